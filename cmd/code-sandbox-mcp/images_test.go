package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/imagebuild"
)

func writeRootfs(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := "hello\n"
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./hello", Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, body)
	tw.Close()
	name := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestImagesPack(t *testing.T) {
	dir := t.TempDir()
	rootfs := writeRootfs(t, dir)
	out := filepath.Join(dir, "image.oci.tar")
	var stdout, stderr bytes.Buffer
	err := imagesCommand(context.Background(), "", "", []string{
		"pack", "--rootfs", rootfs, "--ref", "localhost/code-sandbox-mcp/python:trixie",
		"--env", "LANG=C.UTF-8", "--env", "PATH=/usr/bin:/bin", "--workdir", "/tmp", "--out", out,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("images pack: %v; stderr:\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("images pack wrote %q to stdout; want nothing", stdout.String())
	}

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs := make(map[string][]byte)
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		blobs[hdr.Name] = b
	}
	var index ocispec.Index
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != "localhost/code-sandbox-mcp/python:trixie" {
		t.Errorf("image name %q; want localhost/code-sandbox-mcp/python:trixie", got)
	}
	var manifest ocispec.Manifest
	json.Unmarshal(blobs["blobs/sha256/"+index.Manifests[0].Digest.Encoded()], &manifest)
	var config ocispec.Image
	json.Unmarshal(blobs["blobs/sha256/"+manifest.Config.Digest.Encoded()], &config)
	if want := []string{"LANG=C.UTF-8", "PATH=/usr/bin:/bin"}; !reflect.DeepEqual(config.Config.Env, want) || config.Config.WorkingDir != "/tmp" {
		t.Errorf("config env %v, workdir %q; want %v, /tmp", config.Config.Env, config.Config.WorkingDir, want)
	}

	// Nothing but the archive is left in its directory.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries; want rootfs.tar and image.oci.tar", len(entries))
	}
}

func TestImagesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	rootfs := writeRootfs(t, dir)
	out := filepath.Join(dir, "out.tar")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no verb", nil, "missing verb"},
		{"unknown verb", []string{"frob"}, "unknown verb"},
		{"pack without ref", []string{"pack", "--rootfs", rootfs, "--out", out}, "required"},
		{"pack bad env", []string{"pack", "--rootfs", rootfs, "--ref", "localhost/x:1", "--env", "NOEQUALS", "--out", out}, "KEY=value"},
		{"pack short ref", []string{"pack", "--rootfs", rootfs, "--ref", "python:3", "--out", out}, "full reference"},
		{"pack missing rootfs", []string{"pack", "--rootfs", filepath.Join(dir, "nope.tar"), "--ref", "localhost/x:1", "--out", out}, "no such file"},
		{"import nothing", []string{"import"}, "no archive"},
		{"list extra", []string{"list", "x"}, "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := imagesCommand(context.Background(), "", "", tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("images %q: error %v; want one containing %q", tt.args, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed pack left %s behind", out)
	}
}

func TestParseBuild(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--from", "python", "--pip", "tinypkg==1.0"}, ""},
		{[]string{"--pip", "tinypkg"}, "--from is required"},
		{[]string{"--from", "python"}, "nothing to add"},
		{[]string{"--from", "javascript", "--npm", "tinynpm@1.0.0"}, ""},
		{[]string{"--from", "python", "--pip", "x>=1"}, "want NAME or NAME==VERSION"},
		{[]string{"--from", "python", "--apt", "libgomp1"}, ""},
		{[]string{"--from", "python", "--apt", "tinydeb", "--apt-source", "deb [trusted=yes] http://127.0.0.1:8080/ ./", "--apt-source", "deb http://deb.debian.org/debian trixie main"}, ""},
		{[]string{"--from", "python", "--apt", "tinydeb", "--apt-source", "deb-src http://deb.debian.org/debian trixie main"}, "want one sources.list line"},
		{[]string{"--from", "python", "--apt", "tinydeb", "--apt-source", "deb http://x/ ./\ndeb http://y/ ./"}, "want one sources.list line"},
		{[]string{"--from", "python", "--pip", "tinypkg", "--apt-source", "deb http://x/ ./"}, "--apt-source without --apt"},
		{[]string{"--from", "python", "--apt", "-oX=1"}, `--apt: apt package "-oX=1": want a Debian package name`},
		{[]string{"--configured"}, ""},
		{[]string{"--configured", "--pip", "tinypkg"}, "give it alone"},
		{[]string{"--configured", "--from", "python"}, "give it alone"},
		{[]string{"--configured", "--apt-source", "deb http://x/ ./"}, "give it alone"},
		{[]string{"--configured", "--tag", "localhost/x:1"}, "give it alone"},
		{[]string{"--from", "python", "--pip", "tinypkg", "--tag", "localhost/my/python:tab"}, ""},
		{[]string{"--from", "python", "--pip", "tinypkg", "--tag", "../../etc/x"}, `--tag: image reference "../../etc/x" is not valid`},
		{[]string{"--from", "python", "--pip", "tinypkg", "--tag", ""}, "--tag: image reference is empty"},
		{[]string{"--from", "python", "--pip", "tinypkg", "--tag", "localhost/x"}, "has no tag"},
	} {
		_, err := parseBuild(tc.args, io.Discard)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("parseBuild(%q) = %v; want %q", tc.args, err, tc.want)
		}
	}
}

func TestConfiguredBuilds(t *testing.T) {
	cfg, err := config.Parse(`
[languages.python]
packages = { pip = ["tinypkg"] }
[languages.javascript]
image = "example.test/node:1"
packages = { npm = ["tinynpm@1.0.0"] }
[languages.bash]
image = "example.test/sh:1"
command = ["bash"]
file = "main.sh"
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := configuredBuilds(cfg)
	js, _ := cfg.Language("javascript")
	py, _ := cfg.Language("python")
	want := []imagebuild.Options{
		{Base: "example.test/node:1", Tag: js.Image, Request: imagebuild.Request{Npm: []string{"tinynpm@1.0.0"}}},
		{Base: "localhost/code-sandbox-mcp/python:trixie", Tag: py.Image, Request: imagebuild.Request{Pip: []string{"tinypkg"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configuredBuilds =\n%+v\nwant\n%+v", got, want)
	}
	if got := configuredBuilds(config.Default()); len(got) != 0 {
		t.Errorf("configuredBuilds of the defaults = %+v; want none", got)
	}
}

// TestImagesBadRefs: an image reference that is not a full one is refused
// as a usage error, on one line that quotes it, before anything is read
// or dialled (the socket does not exist, and no error names it).
func TestImagesBadRefs(t *testing.T) {
	const sock = "/nonexistent/containerd.sock"
	dir := t.TempDir()
	rootfs, out := filepath.Join(dir, "nope.tar"), filepath.Join(dir, "out.tar")
	build := func(tag string) []string {
		return []string{"--address", sock, "images", "build", "--from", "python", "--pip", "tinypkg", "--tag", tag}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{build("../../etc/x"), `code-sandbox-mcp: images build: --tag: image reference "../../etc/x" is not valid: want [HOST[:PORT]/]PATH:TAG`},
		{build("localhost/my image:1"), `--tag: image reference "localhost/my image:1" is not valid`},
		{build("localhost/x:1\nok"), `--tag: image reference "localhost/x:1\nok" is not valid`},
		{build("localhost/x:1\x1b[2J"), `--tag: image reference "localhost/x:1\x1b[2J" is not valid`},
		{build("localhost/Upper:1"), "the repository name must be lower case"},
		{[]string{"--address", sock, "images", "build", "--from", "localhost/x:1\x1b[2J", "--pip", "tinypkg"}, `--from: image reference "localhost/x:1\x1b[2J" is not valid`},
		{[]string{"--address", sock, "images", "build", "--from", "python:3", "--pip", "tinypkg"}, `--from: image reference "python:3" is a short name`},
		{[]string{"--address", sock, "images", "pack", "--rootfs", rootfs, "--ref", "../x\n", "--out", out}, `images pack: --ref: image reference "../x\n" is not valid`},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		got := stderr.String()
		if code != exitUsage || !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and one line containing %q", tc.args, code, stdout.String(), got, exitUsage, tc.want)
		}
		if strings.ContainsFunc(strings.TrimSuffix(got, "\n"), func(r rune) bool { return r < 0x20 || r == 0x7f }) || strings.Contains(got, sock) {
			t.Errorf("%q: stderr %q holds a control character or names the socket", tc.args, got)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused pack left %s behind", out)
	}
}

package integration

// images build, end to end: wheels from a PEP 503 index, npm packages
// from a registry and Debian packages from a flat apt repository, each
// served by the test on loopback, installed into a derived image the
// server then runs.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"

	"code-sandbox-mcp/config"
)

// tinyWheel is a pure-Python wheel of tinypkg 1.0, built here, with a
// RECORD that lists each file's hash and size, as pip writes and reads it.
func tinyWheel(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range []struct{ name, body string }{
		{"tinypkg/__init__.py", "VALUE = 'tinypkg says hello'\n"},
		{"tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n\n"},
		{"tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"tinypkg-1.0.dist-info/RECORD", ""},
	} {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.name, "/RECORD") {
			fmt.Fprintf(&record, "%s,,\n", f.name)
			w.Write([]byte(record.String()))
			continue
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pipIndex serves a PEP 503 simple index on loopback holding tinypkg only,
// and returns its URL.
func pipIndex(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(pipIndexHandler(t))
	t.Cleanup(srv.Close)
	return srv.URL + "/simple/"
}

// pipIndexHandler serves a PEP 503 simple index at /simple/ holding
// tinypkg only, its wheel under /files/.
func pipIndexHandler(t *testing.T) http.Handler {
	wheel := tinyWheel(t)
	sum := sha256.Sum256(wheel)
	const file = "tinypkg-1.0-py3-none-any.whl"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/tinypkg/":
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", file, hex.EncodeToString(sum[:]), file)
		case "/files/" + file:
			w.Write(wheel)
		default:
			http.NotFound(w, r)
		}
	})
}

// imagesBuild runs images build against the test daemon with pip pointed
// at index alone; it returns stdout, stderr and the error.
func imagesBuild(t *testing.T, index string, args ...string) (string, string, error) {
	t.Helper()
	return imagesBuildEnv(t, []string{"PIP_INDEX_URL=" + index, "PIP_CONFIG_FILE=/dev/null", "PIP_NO_CACHE_DIR=1"}, args...)
}

// imagesBuildEnv runs images build against the test daemon with env added
// to a bare environment. Its temporary directories, the build snapshot's
// mount among them, are under buildTmp.
func imagesBuildEnv(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	if err := os.MkdirAll(buildTmp(), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(mcpBinary(t), append([]string{"--address", testAddress, "--namespace", testNamespace, "images", "build"}, args...)...)
	cmd.Env = serverEnv(append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + buildTmp()}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestImagesBuildPip(t *testing.T) {
	onBothDaemons(t, daemonImages)
	index := pipIndex(t)
	ctx := testContext(t)
	tag := "localhost/code-sandbox-mcp/python-custom:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(ctx, tag, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete %s: %v", tag, err)
		}
	})

	out, stderr, err := imagesBuild(t, index, "--from", "python", "--pip", "tinypkg", "--tag", tag)
	if err != nil || out != tag+"\n" {
		t.Fatalf("images build: %v, stdout %q; want %s\nstderr:\n%s", err, out, tag, stderr)
	}
	first, err := testClient.ImageService().Get(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}

	// A second build of the same is a no-op.
	out, stderr, err = imagesBuild(t, index, "--from", "python", "--pip", "tinypkg", "--tag", tag)
	if err != nil || out != tag+"\n" || !strings.Contains(stderr, "up to date") || strings.Contains(stderr, "downloading") {
		t.Errorf("second images build: %v, stdout %q, stderr:\n%s\nwant the tag and \"up to date\", no download", err, out, stderr)
	}
	if second, err := testClient.ImageService().Get(ctx, tag); err != nil || second.Target.Digest != first.Target.Digest {
		t.Errorf("after the second build: %v, digest %s; want %s unchanged", err, second.Target.Digest, first.Target.Digest)
	}

	// A package the index does not have fails with its name.
	_, stderr, err = imagesBuild(t, index, "--from", "python", "--pip", "not-there-pkg", "--tag", tag+"-missing")
	if err == nil || !strings.Contains(stderr, "could not find not-there-pkg") {
		t.Errorf("build of a missing package: %v, stderr:\n%s\nwant a failure naming not-there-pkg", err, stderr)
	}
	if _, err := testClient.ImageService().Get(ctx, tag+"-missing"); err == nil {
		t.Errorf("the failed build left image %s-missing", tag)
	}

	// The sandbox imports it, under the same hardening.
	host, port, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(index, "http://"), "/simple/"))
	if err != nil {
		t.Fatal(err)
	}
	s := startMCP(t, serverSpec{config: fmt.Sprintf("[languages.python]\nimage = %q\npool = 0\n", tag)})
	for _, tc := range []struct{ src, want string }{
		{"import tinypkg; print(tinypkg.VALUE)", "tinypkg says hello\n"},
		{"import json; print(json.load(open('/etc/code-sandbox-mcp/packages.json'))['pip'][0]['version'])", "1.0\n"},
		{"import os; print(os.getuid() != 0)", "True\n"},
		{"try:\n open('/usr/x', 'w')\nexcept OSError as e:\n print(e.errno == 30)", "True\n"},
		// The index listens on the host's loopback: a sandbox with the
		// host's network would reach it.
		{fmt.Sprintf("import socket\ntry:\n socket.create_connection(('%s', %s), 2)\n print('reached the host')\nexcept OSError:\n print('no network')", host, port), "no network\n"},
	} {
		r := s.call(ctx, t, "run_python_code", code(tc.src))
		if r.text != tc.want || r.isError {
			t.Errorf("%q: %q (isError %v, stderr %q); want %q", tc.src, r.text, r.isError, r.out.Stderr, tc.want)
		}
	}
}

// tinyNpm is the tarball of tinynpm 1.0.0, built here.
func tinyNpm(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name":"tinynpm","version":"1.0.0","main":"index.js","scripts":{"postinstall":"touch /tmp/tinynpm-postinstall-ran"}}`},
		{"package/index.js", "module.exports = { value: 'tinynpm says hello' };\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npmRegistry serves a registry on loopback holding tinynpm only, and
// returns its URL.
func npmRegistry(t *testing.T) string {
	t.Helper()
	tgz := tinyNpm(t)
	sha1sum := sha1.Sum(tgz)
	sha512sum := sha512.Sum512(tgz)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tinynpm":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"name":      "tinynpm",
				"dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{
					"name": "tinynpm", "version": "1.0.0", "main": "index.js",
					"scripts": map[string]string{"postinstall": "touch /tmp/tinynpm-postinstall-ran"},
					"dist": map[string]string{
						"tarball":   "http://" + r.Host + "/tinynpm/-/tinynpm-1.0.0.tgz",
						"shasum":    hex.EncodeToString(sha1sum[:]),
						"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
					},
				}},
			})
		case "/tinynpm/-/tinynpm-1.0.0.tgz":
			w.Write(tgz)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"Not found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func TestImagesBuildNpm(t *testing.T) {
	registry := npmRegistry(t)
	env := []string{"npm_config_registry=" + registry, "npm_config_cache=" + t.TempDir(), "npm_config_userconfig=/dev/null", "npm_config_update_notifier=false"}
	ctx := testContext(t)
	tag := "localhost/code-sandbox-mcp/nodejs-custom:" + strings.ToLower(t.Name())
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(ctx, tag, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete %s: %v", tag, err)
		}
	})
	os.Remove("/tmp/tinynpm-postinstall-ran")

	out, stderr, err := imagesBuildEnv(t, env, "--from", "javascript", "--npm", "tinynpm", "--tag", tag)
	if err != nil || out != tag+"\n" {
		t.Fatalf("images build: %v, stdout %q; want %s\nstderr:\n%s", err, out, tag, stderr)
	}
	if !strings.Contains(stderr, "install scripts, which were not run") || !strings.Contains(stderr, "tinynpm") {
		t.Errorf("images build's stderr has no warning that tinynpm's postinstall was not run:\n%s", stderr)
	}
	if _, err := os.Stat("/tmp/tinynpm-postinstall-ran"); err == nil {
		t.Error("tinynpm's postinstall script ran on the host")
	}

	_, stderr, err = imagesBuildEnv(t, env, "--from", "javascript", "--npm", "not-there-pkg", "--tag", tag+"-missing")
	if err == nil || !strings.Contains(stderr, "could not find not-there-pkg") {
		t.Errorf("build of a missing package: %v, stderr:\n%s\nwant a failure naming not-there-pkg", err, stderr)
	}

	s := startMCP(t, serverSpec{config: fmt.Sprintf("[languages.javascript]\nimage = %q\npool = 0\n", tag)})
	for _, tc := range []struct{ src, want string }{
		{"console.log(require('tinynpm').value)", "tinynpm says hello\n"},
		{"console.log(JSON.parse(require('fs').readFileSync('/etc/code-sandbox-mcp/packages.json')).npm[0].version)", "1.0.0\n"},
		{"console.log(process.getuid() !== 0)", "true\n"},
		{"try { require('fs').writeFileSync('/usr/x', '') } catch (e) { console.log(e.code) }", "EROFS\n"},
	} {
		r := s.call(ctx, t, "run_js_code", code(tc.src))
		if r.text != tc.want || r.isError {
			t.Errorf("%q: %q (isError %v, stderr %q); want %q", tc.src, r.text, r.isError, r.out.Stderr, tc.want)
		}
	}
}

// TestImagesBuildBadTag: a --tag that is not a full image reference is
// refused as a usage error (exit 2), on one line that quotes it, before
// any work: the package index is never asked, and containerd's images,
// content, snapshots and leases, and the build's TMPDIR, gain nothing.
func TestImagesBuildBadTag(t *testing.T) {
	onBothDaemons(t, daemonImages)
	var asked atomic.Int64
	index := pipIndexHandler(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		index.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := testContext(t)
	before := daemonStore(t, ctx)
	tmpBefore := dirNames(t, buildTmp())

	for _, tc := range []struct{ tag, want string }{
		{"../../etc/x", `code-sandbox-mcp: images build: --tag: image reference "../../etc/x" is not valid: want [HOST[:PORT]/]PATH:TAG`},
		{"localhost/my image:1", `--tag: image reference "localhost/my image:1" is not valid`},
		{"localhost/x:1\nbuild: localhost/x:1 is up to date", `--tag: image reference "localhost/x:1\nbuild: localhost/x:1 is up to date" is not valid`},
		{"localhost/x:1\x1b[2J\x1b]0;owned\x07", `--tag: image reference "localhost/x:1\x1b[2J\x1b]0;owned\a" is not valid`},
		{"localhost/Python:1", `--tag: image reference "localhost/Python:1" is not valid: the repository name must be lower case`},
		{"", "--tag: image reference is empty"},
		{"localhost/" + strings.Repeat("x", 256) + ":1", "the repository name is longer than 255 characters"},
		{"python:custom", `--tag: image reference "python:custom" is a short name`},
	} {
		out, stderr, err := imagesBuild(t, srv.URL+"/simple/", "--from", "python", "--pip", "tinypkg", "--tag", tc.tag)
		var exit *osexec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || out != "" || !strings.HasPrefix(stderr, "code-sandbox-mcp: images build: --tag: ") || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("images build --tag %q: %v, stdout %q, stderr %q; want exit status 2 and one line containing %q", tc.tag, err, out, stderr, tc.want)
		}
		if strings.ContainsFunc(strings.TrimSuffix(stderr, "\n"), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("images build --tag %q printed a control character: %q", tc.tag, stderr)
		}
	}

	if n := asked.Load(); n != 0 {
		t.Errorf("the package index was asked %d times; want none", n)
	}
	// Gained, not changed: the daemon's garbage collector may remove a
	// blob that an earlier import left unreferenced, meanwhile.
	if gained := slices.DeleteFunc(daemonStore(t, ctx), func(e string) bool { return slices.Contains(before, e) }); len(gained) != 0 {
		t.Errorf("containerd's store gained %q; want nothing", gained)
	}
	if after := dirNames(t, buildTmp()); !slices.Equal(after, tmpBefore) {
		t.Errorf("the build's TMPDIR %s: %q, before the builds %q; want it unchanged", buildTmp(), after, tmpBefore)
	}
	if m := buildMounts(t); len(m) != 0 {
		t.Errorf("mounts left by the refused builds: %q", m)
	}
}

// daemonStore lists what containerd holds in ctx's namespace: images (name
// and target), content, snapshots (with their kind and parent) and leases,
// sorted.
func daemonStore(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var out []string
	imgs, err := testClient.ImageService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		out = append(out, "image "+img.Name+" "+img.Target.Digest.String())
	}
	err = testClient.ContentStore().Walk(ctx, func(info content.Info) error {
		out = append(out, "content "+info.Digest.String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = walkSnapshots(ctx, testClient, func(snapshotter string, info snapshots.Info) {
		out = append(out, fmt.Sprintf("snapshot %s/%s %v parent %s", snapshotter, info.Name, info.Kind, info.Parent))
	})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := testClient.LeasesService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		out = append(out, "lease "+l.ID)
	}
	slices.Sort(out)
	return out
}

// dirNames lists the names in dir; a missing dir has none.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestImagesBuildConfigured: a [languages.python] packages table names the
// image the server runs python in; until images build --configured (which
// make setup runs) builds it, a call says which command builds it, and
// once built, with no restart, the call imports the package and the tool's
// description names it. A second build is a no-op.
func TestImagesBuildConfigured(t *testing.T) {
	onBothDaemons(t, daemonImages)
	index := pipIndex(t)
	ctx := testContext(t)
	const table = "[languages.python]\npackages = { pip = [\"TinyPkg\"] }\npool = 0\n"
	cfg, err := config.Parse(table, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	py, _ := cfg.Language("python")
	tag := py.Image
	if !strings.HasPrefix(tag, "localhost/code-sandbox-mcp/python-packages:") {
		t.Fatalf("python's image with packages is %q; want localhost/code-sandbox-mcp/python-packages:HASH", tag)
	}
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(ctx, tag, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete %s: %v", tag, err)
		}
	})
	cfgPath := filepath.Join(t.TempDir(), "sandbox.toml")
	if err := os.WriteFile(cfgPath, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	// The configuration comes as make setup's does, from the environment.
	build := func() (string, string, error) {
		t.Helper()
		return imagesBuildEnv(t, []string{"PIP_INDEX_URL=" + index, "PIP_CONFIG_FILE=/dev/null", "PIP_NO_CACHE_DIR=1", "CODE_SANDBOX_CONFIG=" + cfgPath}, "--configured")
	}

	s := startMCP(t, serverSpec{config: table})
	r := s.call(ctx, t, "run_python_code", code("print('ran')"))
	t.Logf("before the build: %s", r.text)
	if !r.isError || !strings.Contains(r.text, tag) || !strings.Contains(r.text, "images build --configured") {
		t.Errorf("a call before the build: %q (isError %v); want an error naming %s and images build --configured", r.text, r.isError, tag)
	}
	// pull is "missing" by default, but no registry has such an image.
	if strings.Contains(s.stderr.String(), "pulling image") {
		t.Errorf("the server tried to pull %s:\n%s", tag, s.stderr)
	}

	out, stderr, err := build()
	if err != nil || out != tag+"\n" {
		t.Fatalf("images build --configured: %v, stdout %q; want %s\nstderr:\n%s", err, out, tag, stderr)
	}
	out, stderr, err = build()
	if err != nil || out != tag+"\n" || !strings.Contains(stderr, "up to date") || strings.Contains(stderr, "downloading") {
		t.Errorf("a second images build --configured: %v, stdout %q, stderr:\n%s\nwant the tag and \"up to date\", no download", err, out, stderr)
	}

	r = s.call(ctx, t, "run_python_code", code("import tinypkg; print(tinypkg.VALUE)"))
	if r.text != "tinypkg says hello\n" || r.isError {
		t.Errorf("import tinypkg after the build: %q (isError %v, stderr %q); want tinypkg's value", r.text, r.isError, r.out.Stderr)
	}
	desc, contents := imageFacts(t, s)
	if !strings.Contains(desc["run_python_code"], "tinypkg") || contents["python"] == nil || version(contents["python"].Python, "tinypkg") != "1.0" {
		t.Errorf("after the build: description %q, image_contents %+v; want both to name tinypkg 1.0", desc["run_python_code"], contents["python"])
	}
}

// TestImagesBuildConfiguredNone: without any packages table, images build
// --configured does nothing and needs nothing, so make setup pays nothing
// for it.
func TestImagesBuildConfiguredNone(t *testing.T) {
	out, stderr, err := imagesBuildEnv(t, nil, "--configured")
	if err != nil || out != "" || !strings.Contains(stderr, "nothing to build") {
		t.Errorf("images build --configured without packages: %v, stdout %q, stderr %q; want nothing built", err, out, stderr)
	}
}

// buildDeb builds package name 1.0-1 (architecture all) of the files
// given, paths relative to its root, with the host's dpkg-deb; a postinst
// is its maintainer script.
func buildDeb(t *testing.T, name string, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	tree := filepath.Join(dir, name)
	files["DEBIAN/control"] = "Package: " + name + "\nVersion: 1.0-1\nArchitecture: all\nMaintainer: Test <test@example.org>\nDescription: a tiny package for the build test\n"
	for p, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(p, "DEBIAN/post") {
			mode = 0o755
		}
		p = filepath.Join(tree, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, name+".deb")
	if out, err := osexec.Command("dpkg-deb", "--root-owner-group", "--build", tree, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// aptRepo serves a flat apt repository (Packages and an unsigned
// Release) on loopback, and returns its sources.list line. It holds
// tinydeb, with a file /usr/share/tinydeb/hello.txt and a postinst that
// writes /etc/tinydeb-configured saying whether it could connect to the
// repository and which network interfaces it saw, and tinyfail, whose
// postinst fails.
func aptRepo(t *testing.T) string {
	t.Helper()
	debs := map[string][]byte{}
	var packages, release []byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := path.Clean(r.URL.Path); p {
		case "/Release":
			w.Write(release)
		case "/Packages":
			w.Write(packages)
		default:
			if b, ok := debs[strings.TrimPrefix(p, "/")]; ok {
				w.Write(b)
				return
			}
			http.NotFound(w, r)
		}
	}))
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]map[string]string{
		"tinydeb": {
			"usr/share/tinydeb/hello.txt": "tinydeb says hello\n",
			"DEBIAN/postinst": fmt.Sprintf(`#!/bin/bash
set -e
if (exec 3<>/dev/tcp/%s/%s) 2>/dev/null; then net="network"; else net="no network"; fi
ifaces=$(sed -n 's/^ *\([^ :]*\):.*/\1/p' /proc/net/dev | tr '\n' ' ')
echo "$net; interfaces: $ifaces" > /etc/tinydeb-configured
`, host, port),
		},
		"tinyfail": {
			"usr/share/tinyfail/x": "x\n",
			"DEBIAN/postinst":      "#!/bin/sh\necho 'tinyfail: this postinst fails' >&2\nexit 3\n",
		},
	} {
		deb := buildDeb(t, name, files)
		file := name + "_1.0-1_all.deb"
		debs[file] = deb
		sum := sha256.Sum256(deb)
		packages = fmt.Appendf(packages, "Package: %s\nVersion: 1.0-1\nArchitecture: all\nMaintainer: Test <test@example.org>\nFilename: ./%s\nSize: %d\nSHA256: %s\nDescription: a tiny package for the build test\n\n", name, file, len(deb), hex.EncodeToString(sum[:]))
	}
	psum := sha256.Sum256(packages)
	release = fmt.Appendf(nil, "Origin: test\nLabel: test\nDate: %s\nSHA256:\n %s %d Packages\n", time.Now().UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC"), hex.EncodeToString(psum[:]), len(packages))
	srv.Start()
	t.Cleanup(srv.Close)
	return "deb [trusted=yes] " + srv.URL + "/ ./"
}

// buildTmp is the TMPDIR of this run's images builds: under the harness's
// directory, so that the other lanes of make test, at the same time, have
// their own.
func buildTmp() string { return filepath.Join(testDir, "buildtmp") }

// buildMounts are the mounts of this run's images builds left on the host.
func buildMounts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], buildTmp()+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func TestImagesBuildApt(t *testing.T) {
	index := pipIndex(t)
	source := aptRepo(t)
	ctx := testContext(t)
	tag := "localhost/code-sandbox-mcp/python-custom:" + strings.ToLower(t.Name())
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(ctx, tag, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete %s: %v", tag, err)
		}
	})
	if _, err := os.Stat("/etc/tinydeb-configured"); err == nil {
		t.Fatal("/etc/tinydeb-configured is on the host before the build")
	}
	args := []string{"--from", "python", "--apt", "tinydeb", "--apt-source", source, "--pip", "tinypkg", "--tag", tag}

	out, stderr, err := imagesBuild(t, index, args...)
	if err != nil || out != tag+"\n" {
		t.Fatalf("images build: %v, stdout %q; want %s\nstderr:\n%s", err, out, tag, stderr)
	}
	if _, err := os.Stat("/etc/tinydeb-configured"); err == nil {
		t.Error("tinydeb's postinst wrote /etc/tinydeb-configured on the host")
	}
	if m := buildMounts(t); len(m) != 0 {
		t.Errorf("mounts left after the build: %q", m)
	}
	first, err := testClient.ImageService().Get(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing dpkg's step mounted or put there for itself is in the
	// new layer.
	for _, name := range lastLayer(t, first) {
		for _, bad := range []string{"dev/", "proc/", "var/cache/code-sandbox-mcp-debs", "usr/sbin/policy-rc.d", "var/log/dpkg.log", "var/lib/dpkg/status-old", "var/cache/apt/"} {
			if strings.HasPrefix(strings.TrimPrefix(name, "./"), bad) {
				t.Errorf("the new layer holds %s", name)
			}
		}
	}

	// A second build of the same is a no-op.
	out, stderr, err = imagesBuild(t, index, args...)
	if err != nil || out != tag+"\n" || !strings.Contains(stderr, "up to date") || strings.Contains(stderr, "downloading") {
		t.Errorf("second images build: %v, stdout %q, stderr:\n%s\nwant the tag and \"up to date\", no download", err, out, stderr)
	}
	if second, err := testClient.ImageService().Get(ctx, tag); err != nil || second.Target.Digest != first.Target.Digest {
		t.Errorf("after the second build: %v, digest %s; want %s unchanged", err, second.Target.Digest, first.Target.Digest)
	}

	// A package the repository does not have fails with its name, and
	// leaves no image and no mount.
	_, stderr, err = imagesBuild(t, index, "--from", "python", "--apt", "not-there-deb", "--apt-source", source, "--tag", tag+"-missing")
	if err == nil || !strings.Contains(stderr, "could not find Debian package not-there-deb") {
		t.Errorf("build of a missing package: %v, stderr:\n%s\nwant a failure naming not-there-deb", err, stderr)
	}
	if _, err := testClient.ImageService().Get(ctx, tag+"-missing"); err == nil {
		t.Errorf("the failed build left image %s-missing", tag)
	}
	if m := buildMounts(t); len(m) != 0 {
		t.Errorf("mounts left after the failed build: %q", m)
	}

	// A package whose maintainer script fails fails the build with its
	// name and dpkg's output, and leaves no image and no mount.
	_, stderr, err = imagesBuild(t, index, "--from", "python", "--apt", "tinyfail", "--apt-source", source, "--tag", tag+"-fail")
	if err == nil || !strings.Contains(stderr, "dpkg could not install tinyfail") || !strings.Contains(stderr, "its output ends:") || !strings.Contains(stderr, "tinyfail: this postinst fails") {
		t.Errorf("build of a failing package: %v, stderr:\n%s\nwant a failure naming tinyfail with dpkg's output", err, stderr)
	}
	if _, err := testClient.ImageService().Get(ctx, tag+"-fail"); err == nil {
		t.Errorf("the failed build left image %s-fail", tag)
	}
	if m := buildMounts(t); len(m) != 0 {
		t.Errorf("mounts left after the failed dpkg: %q", m)
	}

	// The sandbox has both, under the same hardening.
	repo := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(source)[2], "http://"), "/")
	host, port, err := net.SplitHostPort(repo)
	if err != nil {
		t.Fatal(err)
	}
	s := startMCP(t, serverSpec{config: fmt.Sprintf("[languages.python]\nimage = %q\npool = 0\n", tag)})
	// The tool description and the environments resource name what was
	// asked for, with the versions installed.
	desc, contents := imageFacts(t, s)
	for _, want := range []string{"tinydeb 1.0-1", "tinypkg 1.0"} {
		if !strings.Contains(desc["run_python_code"], want) {
			t.Errorf("run_python_code description %q; want it to name %q", desc["run_python_code"], want)
		}
	}
	if py := contents["python"]; py == nil || version(py.Debian, "tinydeb") != "1.0-1" || version(py.Notable, "tinydeb") != "1.0-1" {
		t.Errorf("python image_contents %+v; want tinydeb 1.0-1 among its Debian and notable packages", py)
	}
	for _, tc := range []struct{ src, want string }{
		{"print(open('/usr/share/tinydeb/hello.txt').read(), end='')", "tinydeb says hello\n"},
		{"import tinypkg; print(tinypkg.VALUE)", "tinypkg says hello\n"},
		// The postinst ran in the image, without network: no connection
		// to the repository on the host's loopback, and no interface but
		// the namespace's loopback.
		{"print(open('/etc/tinydeb-configured').read(), end='')", "no network; interfaces: lo \n"},
		{"import json; m = json.load(open('/etc/code-sandbox-mcp/packages.json')); print([(p['name'], p['version'], p['requested']) for p in m['apt']])", "[('tinydeb', '1.0-1', True)]\n"},
		{"import os; print(os.path.exists('/var/cache/code-sandbox-mcp-debs'), os.path.exists('/usr/sbin/policy-rc.d'))", "False False\n"},
		{"import os; print(os.getuid() != 0)", "True\n"},
		{"try:\n open('/usr/x', 'w')\nexcept OSError as e:\n print(e.errno == 30)", "True\n"},
		{fmt.Sprintf("import socket\ntry:\n socket.create_connection(('%s', %s), 2)\n print('reached the host')\nexcept OSError:\n print('no network')", host, port), "no network\n"},
	} {
		r := s.call(ctx, t, "run_python_code", code(tc.src))
		if r.text != tc.want || r.isError {
			t.Errorf("%q: %q (isError %v, stderr %q); want %q", tc.src, r.text, r.isError, r.out.Stderr, tc.want)
		}
	}
}

// lastLayer lists the entries of img's last layer.
func lastLayer(t *testing.T, img images.Image) []string {
	t.Helper()
	ctx := testContext(t)
	cs := testClient.ContentStore()
	m, err := images.Manifest(ctx, cs, img.Target, platforms.Default())
	if err != nil {
		t.Fatal(err)
	}
	blob, err := content.ReadBlob(ctx, cs, m.Layers[len(m.Layers)-1])
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if len(names) == 0 {
		t.Fatal("the new layer is empty")
	}
	return names
}

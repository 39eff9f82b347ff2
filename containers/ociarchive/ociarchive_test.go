package ociarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// rootfsTar makes a small root file system tar.
func rootfsTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		hdr  tar.Header
		body string
	}{
		{tar.Header{Typeflag: tar.TypeDir, Name: "./etc/", Mode: 0o755}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "./etc/passwd", Mode: 0o644}, "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n"},
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "./bin", Linkname: "usr/bin"}, ""},
		{tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/hello", Mode: 0o755}, strings.Repeat("x", 3000)},
	}
	for _, f := range files {
		f.hdr.Size = int64(len(f.body))
		if err := tw.WriteHeader(&f.hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readArchive returns the regular files of an archive by name.
func readArchive(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := files[hdr.Name]; dup {
			t.Errorf("archive has %s twice", hdr.Name)
		}
		files[hdr.Name] = b
	}
}

// blob returns the blob desc points at, checking its digest and size.
func blob(t *testing.T, files map[string][]byte, desc ocispec.Descriptor) []byte {
	t.Helper()
	b, ok := files[blobPath(desc.Digest)]
	if !ok {
		t.Fatalf("archive has no blob %s", desc.Digest)
	}
	if got := digest.FromBytes(b); got != desc.Digest {
		t.Errorf("blob %s has digest %s", desc.Digest, got)
	}
	if int64(len(b)) != desc.Size {
		t.Errorf("blob %s: size %d; want %d", desc.Digest, len(b), desc.Size)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}

func TestPack(t *testing.T) {
	rootfs := rootfsTar(t)
	img := Image{
		Ref:        "localhost/code-sandbox-mcp/python:trixie",
		Env:        []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		WorkingDir: "/tmp",
		Cmd:        []string{"python3"},
	}
	files := readArchive(t, packBothWays(t, rootfs, img))
	md := checkLayoutAndIndex(t, files)
	manifest := checkManifest(t, files, md, rootfs)
	checkConfig(t, files, manifest, img, rootfs)
	checkDockerManifest(t, files, manifest)

	wantFiles := 3 + 3 // oci-layout, index.json, manifest.json, three blobs
	if len(files) != wantFiles {
		t.Errorf("archive has %d files; want %d", len(files), wantFiles)
	}
}

// packBothWays packs rootfs as img from a plain reader, which Pack spools,
// and from a file, which it reads twice; the two archives must be the
// same, and it returns that archive.
func packBothWays(t *testing.T, rootfs []byte, img Image) []byte {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "rootfs.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(rootfs); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	inputs := map[string]io.Reader{
		"reader": io.MultiReader(bytes.NewReader(rootfs)),
		"file":   f,
	}
	archives := make(map[string][]byte)
	for name, r := range inputs {
		var out bytes.Buffer
		if err := Pack(&out, r, img); err != nil {
			t.Fatalf("Pack from %s: %v", name, err)
		}
		archives[name] = out.Bytes()
	}
	if !bytes.Equal(archives["reader"], archives["file"]) {
		t.Fatal("packing from a reader and from a file gave different archives")
	}
	return archives["file"]
}

// checkLayoutAndIndex checks the archive's oci-layout and index.json, and
// returns the index's one manifest.
func checkLayoutAndIndex(t *testing.T, files map[string][]byte) ocispec.Descriptor {
	t.Helper()
	var layout ocispec.ImageLayout
	decode(t, files[ocispec.ImageLayoutFile], &layout)
	if layout.Version != ocispec.ImageLayoutVersion {
		t.Errorf("oci-layout version %q; want %q", layout.Version, ocispec.ImageLayoutVersion)
	}

	var index ocispec.Index
	decode(t, files[ocispec.ImageIndexFile], &index)
	if index.SchemaVersion != 2 || index.MediaType != ocispec.MediaTypeImageIndex {
		t.Errorf("index schema %d, media type %q; want 2, %q", index.SchemaVersion, index.MediaType, ocispec.MediaTypeImageIndex)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests; want 1", len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest media type %q; want %q", md.MediaType, ocispec.MediaTypeImageManifest)
	}
	wantAnn := map[string]string{
		"io.containerd.image.name":          "localhost/code-sandbox-mcp/python:trixie",
		"org.opencontainers.image.ref.name": "trixie",
	}
	if !reflect.DeepEqual(md.Annotations, wantAnn) {
		t.Errorf("manifest annotations %v; want %v", md.Annotations, wantAnn)
	}
	if md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != runtime.GOARCH {
		t.Errorf("manifest platform %+v; want linux/%s", md.Platform, runtime.GOARCH)
	}
	return md
}

// checkManifest checks the manifest md points at, whose one layer must be
// rootfs as it is, and returns it.
func checkManifest(t *testing.T, files map[string][]byte, md ocispec.Descriptor, rootfs []byte) ocispec.Manifest {
	t.Helper()
	var manifest ocispec.Manifest
	decode(t, blob(t, files, md), &manifest)
	if manifest.SchemaVersion != 2 || manifest.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest schema %d, media type %q", manifest.SchemaVersion, manifest.MediaType)
	}
	if manifest.Config.MediaType != ocispec.MediaTypeImageConfig {
		t.Errorf("config media type %q; want %q", manifest.Config.MediaType, ocispec.MediaTypeImageConfig)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("manifest has %d layers; want 1", len(manifest.Layers))
	}
	ld := manifest.Layers[0]
	if ld.MediaType != ocispec.MediaTypeImageLayer {
		t.Errorf("layer media type %q; want %q", ld.MediaType, ocispec.MediaTypeImageLayer)
	}
	if !bytes.Equal(blob(t, files, ld), rootfs) {
		t.Error("layer differs from the root file system")
	}
	return manifest
}

// checkConfig checks the image config of manifest against img, and its
// one diff_id against rootfs and the layer's digest.
func checkConfig(t *testing.T, files map[string][]byte, manifest ocispec.Manifest, img Image, rootfs []byte) {
	t.Helper()
	var config ocispec.Image
	decode(t, blob(t, files, manifest.Config), &config)
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s; want linux/%s", config.OS, config.Architecture, runtime.GOARCH)
	}
	if config.Created != nil {
		t.Errorf("config created %v; want none", config.Created)
	}
	if !reflect.DeepEqual(config.Config.Env, img.Env) || config.Config.WorkingDir != img.WorkingDir || !reflect.DeepEqual(config.Config.Cmd, img.Cmd) {
		t.Errorf("config %+v; want env %v, workdir %q, cmd %v", config.Config, img.Env, img.WorkingDir, img.Cmd)
	}
	wantRootFS := ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(rootfs)}}
	if !reflect.DeepEqual(config.RootFS, wantRootFS) {
		t.Errorf("config rootfs %+v; want %+v", config.RootFS, wantRootFS)
	}
	if ld := manifest.Layers[0]; ld.Digest != wantRootFS.DiffIDs[0] {
		t.Errorf("uncompressed layer digest %s differs from its diff_id %s", ld.Digest, wantRootFS.DiffIDs[0])
	}
}

// checkDockerManifest checks manifest.json, which docker load reads: the
// same config and layer blobs as manifest, by their paths in the archive,
// and the name to tag the image with.
func checkDockerManifest(t *testing.T, files map[string][]byte, manifest ocispec.Manifest) {
	t.Helper()
	var docker []dockerManifest
	decode(t, files["manifest.json"], &docker)
	wantDocker := []dockerManifest{{
		Config:   "blobs/sha256/" + manifest.Config.Digest.Encoded(),
		RepoTags: []string{"localhost/code-sandbox-mcp/python:trixie"},
		Layers:   []string{"blobs/sha256/" + manifest.Layers[0].Digest.Encoded()},
	}}
	if !reflect.DeepEqual(docker, wantDocker) {
		t.Errorf("manifest.json %+v; want %+v", docker, wantDocker)
	}
	for _, d := range docker {
		for _, p := range append([]string{d.Config}, d.Layers...) {
			if _, ok := files[p]; !ok {
				t.Errorf("manifest.json names %s; the archive has no such file", p)
			}
		}
	}
}

func TestPackCreated(t *testing.T) {
	created := time.Date(2025, 8, 9, 10, 11, 12, 0, time.UTC)
	var out bytes.Buffer
	if err := Pack(&out, bytes.NewReader(rootfsTar(t)), Image{Ref: "localhost/x:1", Created: created}); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, out.Bytes())
	var index ocispec.Index
	decode(t, files[ocispec.ImageIndexFile], &index)
	var manifest ocispec.Manifest
	decode(t, blob(t, files, index.Manifests[0]), &manifest)
	var config ocispec.Image
	decode(t, blob(t, files, manifest.Config), &config)
	if config.Created == nil || !config.Created.Equal(created) {
		t.Errorf("config created %v; want %v", config.Created, created)
	}
}

// TestPackDockerRepoTags checks the names docker load tags the image with:
// what docker itself prints for the ref, docker.io/library/ left out.
func TestPackDockerRepoTags(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"localhost/code-sandbox-mcp/nodejs:trixie", "localhost/code-sandbox-mcp/nodejs:trixie"},
		{"localhost:5000/x:1", "localhost:5000/x:1"},
		{"docker.io/library/python:3", "python:3"},
		{"docker.io/someone/tool:v2", "someone/tool:v2"},
	}
	rootfs := rootfsTar(t)
	for _, tt := range tests {
		var out bytes.Buffer
		if err := Pack(&out, bytes.NewReader(rootfs), Image{Ref: tt.ref}); err != nil {
			t.Fatalf("Pack %s: %v", tt.ref, err)
		}
		var docker []dockerManifest
		decode(t, readArchive(t, out.Bytes())["manifest.json"], &docker)
		if len(docker) != 1 || !reflect.DeepEqual(docker[0].RepoTags, []string{tt.want}) {
			t.Errorf("Pack %s: manifest.json %+v; want RepoTags [%s]", tt.ref, docker, tt.want)
		}
	}
}

func TestPackRefusesBadInput(t *testing.T) {
	good := rootfsTar(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	var empty bytes.Buffer
	tar.NewWriter(&empty).Close()

	tests := []struct {
		name   string
		ref    string
		rootfs []byte
		want   string
	}{
		{"short ref", "python:3", good, "full reference"},
		{"no tag", "localhost/code-sandbox-mcp/python", good, "no tag"},
		{"digest", "localhost/x@sha256:" + strings.Repeat("a", 64), good, "digest"},
		{"gzip rootfs", "localhost/x:1", gz.Bytes(), "compressed"},
		{"not a tar", "localhost/x:1", bytes.Repeat([]byte("not a tar "), 100), "not a valid tar"},
		{"empty tar", "localhost/x:1", empty.Bytes(), "empty"},
		{"no bytes", "localhost/x:1", nil, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Pack(&out, bytes.NewReader(tt.rootfs), Image{Ref: tt.ref})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Pack: error %v; want one containing %q", err, tt.want)
			}
		})
	}
}

package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/platforms"
	"github.com/mark3labs/mcp-go/mcp"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// imageContents is a language's image_contents in sandbox://environments.
type imageContents struct {
	LanguageVersion string `json:"language_version"`
	Notable         []pkg  `json:"notable"`
	Python          []pkg  `json:"python"`
	NPM             []pkg  `json:"npm"`
	Debian          []pkg  `json:"debian"`
}

type pkg struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// version returns the version of the package called name in ps; "" if
// there is none.
func version(ps []pkg, name string) string {
	for _, p := range ps {
		if p.Name == name {
			return p.Version
		}
	}
	return ""
}

// imageFacts lists s's tools and reads its environments: each tool's
// description, and each language's image_contents.
func imageFacts(t *testing.T, s *mcpServer) (map[string]string, map[string]*imageContents) {
	t.Helper()
	ctx := testContext(t)
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tool := range res.Tools {
		desc[tool.Name] = tool.Description
	}
	rr, err := s.readResource(ctx, "sandbox://environments")
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Languages map[string]struct {
			ImageContents *imageContents `json:"image_contents"`
		} `json:"languages"`
	}
	if err := json.Unmarshal([]byte(rr.Contents[0].(mcp.TextResourceContents).Text), &env); err != nil {
		t.Fatal(err)
	}
	contents := map[string]*imageContents{}
	for name, l := range env.Languages {
		contents[name] = l.ImageContents
	}
	return desc, contents
}

// TestMCPDescriptionsNameTheImagesPackages: the server reads what the
// default images hold, and the tools' descriptions and the environments
// resource say it, versions included.
func TestMCPDescriptionsNameTheImagesPackages(t *testing.T) {
	s := startMCP(t, serverSpec{})
	desc, contents := imageFacts(t, s)
	t.Logf("run_python_code: %s\nrun_js_code: %s", desc["run_python_code"], desc["run_js_code"])
	py, js := contents["python"], contents["javascript"]
	if py == nil || js == nil {
		t.Fatalf("image_contents: python %+v, javascript %+v; want both\nstderr:\n%s", py, js, s.stderr)
	}
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "read what the image holds") {
			t.Log(line)
		}
	}
	if py.LanguageVersion == "" || !strings.Contains(desc["run_python_code"], "Python "+py.LanguageVersion+".") {
		t.Errorf("python version %q; want one, named in the description %q", py.LanguageVersion, desc["run_python_code"])
	}
	for _, name := range []string{"numpy", "pandas"} {
		v := version(py.Python, name)
		if v == "" || version(py.Notable, name) != v {
			t.Errorf("python image_contents has %s %q, notable %q; want it in both with its version", name, v, version(py.Notable, name))
		}
		if want := name + " " + v; !strings.Contains(desc["run_python_code"], want) {
			t.Errorf("run_python_code description %q; want it to name %q", desc["run_python_code"], want)
		}
	}
	if version(py.Debian, "python3") == "" {
		t.Errorf("python image_contents debian: %v; want python3 among them", py.Debian)
	}
	if js.LanguageVersion == "" || !strings.Contains(desc["run_js_code"], "Node.js "+js.LanguageVersion+".") {
		t.Errorf("node version %q; want one, named in the description %q", js.LanguageVersion, desc["run_js_code"])
	}
	for tool, d := range desc {
		if (tool == "run_python_code" || tool == "run_js_code") && !strings.Contains(d, "Nothing can be installed at run time") {
			t.Errorf("%s description %q; want it to say nothing can be installed", tool, d)
		}
	}
}

// extraDist is the distribution the test adds to the python image. Its
// name sorts before every other distribution's that nothing requires, so
// that the description, which names the well-known ones and then the
// first of the others, names it.
const extraDist = "aardvark-inventory-test"

// TestMCPDescriptionsFollowTheConfiguredImage: with CONTAINER_IMAGE set to
// an image of the python image plus one distribution, the description
// and the environments resource name that distribution.
func TestMCPDescriptionsFollowTheConfiguredImage(t *testing.T) {
	const ref = "localhost/code-sandbox-mcp/python:inventory-test"
	dir := "usr/lib/python3/dist-packages/"
	addLayer(t, pythonImage, ref, map[string]string{
		dir + "aardvark_inventory_test-0.4.2.dist-info/METADATA":      "Metadata-Version: 2.1\nName: " + extraDist + "\nVersion: 0.4.2\n",
		dir + "aardvark_inventory_test-0.4.2.dist-info/top_level.txt": "aardvark\n",
		dir + "aardvark/__init__.py":                                  "",
	})
	// No pools (see noPools): the test reads descriptions and ends; a pool
	// still being filled as the server exits may, on a slow daemon, outlast
	// the exit's bound and be left to a next server's sweep.
	s := startMCP(t, serverSpec{env: []string{"CONTAINER_IMAGE=" + ref, "CONTAINER_LANGUAGE=python"}, config: noPools})
	desc, contents := imageFacts(t, s)
	py := contents["python"]
	if py == nil {
		t.Fatalf("python image_contents: none; want the image's\nstderr:\n%s", s.stderr)
	}
	if v := version(py.Python, extraDist); v != "0.4.2" {
		t.Errorf("python image_contents: %s %q; want 0.4.2 in %v", extraDist, v, py.Python)
	}
	if want := extraDist + " 0.4.2"; !strings.Contains(desc["run_python_code"], want) {
		t.Errorf("run_python_code description %q; want it to name %q", desc["run_python_code"], want)
	}
	if r := s.call(testContext(t), t, "run_python_code", code("import aardvark; print('ok')")); r.text != "ok\n" {
		t.Errorf("importing the added package: %q; want ok", r.text)
	}
}

// TestMCPDescriptionsOfAnImageThatCannotBeRead: an image whose inventory
// cannot be read (a broken packages.json) is said nothing of beyond that
// nothing can be installed, the server says why in its log, and the
// read's view and mount are gone (startMCP's leftover check).
func TestMCPDescriptionsOfAnImageThatCannotBeRead(t *testing.T) {
	onBothDaemons(t, daemonImages)
	const ref = "localhost/code-sandbox-mcp/python:inventory-broken"
	addLayer(t, pythonImage, ref, map[string]string{"etc/code-sandbox-mcp/packages.json": "{"})
	// No pools (see noPools): the test reads descriptions and ends; a pool
	// still being filled as the server exits may, on a slow daemon, outlast
	// the exit's bound and be left to a next server's sweep.
	s := startMCP(t, serverSpec{env: []string{"CONTAINER_IMAGE=" + ref, "CONTAINER_LANGUAGE=python"}, config: noPools})
	desc, contents := imageFacts(t, s)
	py := desc["run_python_code"]
	if contents["python"] != nil || strings.Contains(py, "Packages in the image") || strings.Contains(py, "Python 3.") {
		t.Errorf("python: image_contents %+v, description %q; want neither to say what the image holds", contents["python"], py)
	}
	if !strings.Contains(py, "Nothing can be installed at run time") {
		t.Errorf("run_python_code description %q; want it to say nothing can be installed", py)
	}
	if contents["javascript"] == nil {
		t.Errorf("javascript image_contents: none; want its own image's, read as ever")
	}
	if !strings.Contains(s.stderr.String(), "packages.json") {
		t.Errorf("server log:\n%s\nwant it to say why the image could not be read", s.stderr)
	}
}

// addLayer makes image ref of image base with one more layer, holding
// files (paths in the image without the leading slash, and their
// contents), and deletes it when the test ends.
func addLayer(t *testing.T, base, ref string, files map[string]string) {
	t.Helper()
	ctx := testContext(t)
	// The blobs are held by a lease until the image holds them.
	lctx, release, err := testClient.WithLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release(context.WithoutCancel(ctx))
	cs := testClient.ContentStore()
	img, err := testClient.ImageService().Get(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := images.Manifest(ctx, cs, img.Target, platforms.Default())
	if err != nil {
		t.Fatal(err)
	}
	b, err := content.ReadBlob(ctx, cs, manifest.Config)
	if err != nil {
		t.Fatal(err)
	}
	var config ocispec.Image
	if err := json.Unmarshal(b, &config); err != nil {
		t.Fatal(err)
	}

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for name, data := range files {
		for d := name; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if !dirs[d] && strings.Count(d, "/") >= 4 { // below dist-packages: the image has the rest
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerDesc := write(t, lctx, ocispec.MediaTypeImageLayer, layer.Bytes(), nil)
	config.RootFS.DiffIDs = append(config.RootFS.DiffIDs, layerDesc.Digest)
	cb, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	manifest.Config = write(t, lctx, manifest.Config.MediaType, cb, nil)
	manifest.Layers = append(manifest.Layers, layerDesc)
	mb, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest's labels make the image hold its config and layers.
	labels := map[string]string{"containerd.io/gc.ref.content.config": manifest.Config.Digest.String()}
	for i, l := range manifest.Layers {
		labels[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = l.Digest.String()
	}
	target := write(t, lctx, ocispec.MediaTypeImageManifest, mb, labels)
	if _, err := testClient.ImageService().Create(ctx, images.Image{Name: ref, Target: target}); err != nil {
		t.Fatal(err)
	}
	// Registered before startMCP's, so run after them: once the server
	// is gone.
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(context.WithoutCancel(ctx), ref, images.SynchronousDelete()); err != nil {
			t.Errorf("delete image %s: %v", ref, err)
		}
	})
}

// write writes blob b of mediaType to the content store, with labels.
func write(t *testing.T, ctx context.Context, mediaType string, b []byte, labels map[string]string) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(ctx, testClient.ContentStore(), desc.Digest.String(), bytes.NewReader(b), desc, content.WithLabels(labels)); err != nil {
		t.Fatalf("write %s: %v", mediaType, err)
	}
	return desc
}

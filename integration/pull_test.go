package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/ociarchive"
	"code-sandbox-mcp/exec"
)

// registry serves one image over the distribution API, on loopback only,
// and records what it was asked for.
type registry struct {
	name     string // repository, such as pulltest
	tag      string
	manifest ocispec.Descriptor
	blobs    map[string][]byte // by digest, the manifest included

	mu       sync.Mutex
	requests []string
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	p := req.URL.Path
	prefix := "/v2/" + r.name + "/"
	var (
		body      []byte
		mediaType = "application/octet-stream"
		dgst      string
	)
	switch {
	case p == "/v2/" || p == "/v2":
		w.WriteHeader(http.StatusOK)
		return
	case p == prefix+"manifests/"+r.tag || p == prefix+"manifests/"+r.manifest.Digest.String():
		dgst, mediaType = r.manifest.Digest.String(), r.manifest.MediaType
		body = r.blobs[dgst]
	case strings.HasPrefix(p, prefix+"blobs/"):
		dgst = strings.TrimPrefix(p, prefix+"blobs/")
		var ok bool
		if body, ok = r.blobs[dgst]; !ok {
			http.NotFound(w, req)
			return
		}
	default:
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", dgst)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method != http.MethodHead {
		w.Write(body)
	}
}

// seen returns the requests so far, as "METHOD path". The server's
// goroutines append to them: read them only through seen.
func (r *registry) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// loadArchive reads an OCI image-layout tar into a registry.
func loadArchive(t *testing.T, archive []byte, name, tag string) *registry {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests; want one", err, len(index.Manifests))
	}
	r := &registry{name: name, tag: tag, manifest: index.Manifests[0], blobs: map[string][]byte{}}
	for path, b := range files {
		if strings.HasPrefix(path, "blobs/sha256/") {
			r.blobs["sha256:"+strings.TrimPrefix(path, "blobs/sha256/")] = b
		}
	}
	return r
}

func TestMissingImageIsPulledFromALoopbackRegistry(t *testing.T) {
	onBothDaemons(t, daemonImages)
	// The image: one static binary, packed by our own packer.
	rootfs := staticRootfs(t, map[string]string{"hello": "hello"})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ref := ln.Addr().String() + "/pulltest:1"
	var archive bytes.Buffer
	if err := ociarchive.Pack(&archive, rootfs, ociarchive.Image{Ref: ref}); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	reg := loadArchive(t, archive.Bytes(), "pulltest", "1")
	srv := &http.Server{Handler: reg}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx := testContext(t)
	t.Cleanup(func() {
		// Deleting the image synchronously collects its content and layer.
		if err := testClient.ImageService().Delete(ctx, ref, images.SynchronousDelete()); err != nil {
			t.Errorf("delete pulled image: %v", err)
		}
	})
	langs := []config.Language{{Name: "hello", Image: ref, Command: []string{"/hello"}, File: "main.txt", Limits: testLimits()}}

	// Without pulling allowed, the missing image is an error that says so.
	stateDir := newStateDir(t)
	noPull, err := exec.New(ctx, exec.Config{Address: testAddress, Namespace: testNamespace, StateDir: stateDir, UIDs: testUIDs, UIDLockDir: testUIDLockDir(), Init: testInit, Languages: langs})
	if err != nil {
		t.Fatal(err)
	}
	err = noPull.Prepare(ctx)
	noPull.Close()
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("Prepare without pull: got %v; want not-found naming %s", err, ref)
	}
	if got := reg.seen(); len(got) != 0 {
		t.Fatalf("registry got %v without pulling allowed; want nothing", got)
	}

	// With it, Prepare pulls and unpacks, and the image runs.
	e := newExecutor(t, func(c *exec.Config) { c.Languages = langs; c.Pull = true })
	res, err := e.Run(ctx, exec.Request{Language: "hello", Code: "ignored"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if string(res.Stdout) != "pulled and ran\n" || res.ExitCode != 0 {
		t.Errorf("got stdout %q exit %d; want %q", res.Stdout, res.ExitCode, "pulled and ran\n")
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(reg.blobs[reg.manifest.Digest.String()], &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %v, %d layers; want one", err, len(m.Layers))
	}
	got := strings.Join(reg.seen(), "\n")
	for _, want := range []string{
		"GET /v2/pulltest/manifests/",
		"GET /v2/pulltest/blobs/" + m.Config.Digest.String(),
		"GET /v2/pulltest/blobs/" + m.Layers[0].Digest.String(),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("registry requests:\n%s\nwant one for %s", got, want)
		}
	}
}

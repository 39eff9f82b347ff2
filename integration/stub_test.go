package integration

import (
	"archive/tar"
	"bytes"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/ociarchive"
	"code-sandbox-mcp/exec"
)

// staticImage packs staticRootfs(files) as an image called ref, imports
// it, and deletes it when the test ends.
func staticImage(t *testing.T, ref string, files map[string]string) {
	t.Helper()
	rootfs := staticRootfs(t, files)
	var archive bytes.Buffer
	if err := ociarchive.Pack(&archive, rootfs, ociarchive.Image{Ref: ref}); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	ctx := testContext(t)
	if _, err := exec.ImportArchive(ctx, testClient, &archive); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(testContext(t), ref, images.SynchronousDelete()); err != nil {
			t.Errorf("delete %s: %v", ref, err)
		}
	})
}

// staticRootfs builds the static Go programs of testdata named by files
// (path in the image: package directory) and returns a root file system
// tar holding only them and the directories a sandbox mounts over.
func staticRootfs(t *testing.T, files map[string]string) *bytes.Buffer {
	t.Helper()
	dir := t.TempDir()
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"bin/", "tmp/", "sandbox/"} {
		tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777})
	}
	for path, pkg := range files {
		bin := filepath.Join(dir, filepath.Base(pkg))
		build := osexec.Command("go", "build", "-o", bin, "./testdata/"+pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: path, Mode: 0o755, Size: int64(len(b))})
		tw.Write(b)
	}
	tw.Close()
	return &rootfs
}

// An image whose /bin/sh cannot run the stub still gets a pool, of
// sandboxes created and not started, after one log line that says why;
// every run gives the right result on the way.
func TestPoolFallsBackWhenTheStubCannotWait(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		log   string
	}{
		// NewTask fails: runc finds no /bin/sh to exec.
		{"no /bin/sh", map[string]string{"hello": "hello"}, "the waiting /bin/sh cannot start"},
		// The stub starts and exits before its program, as it does
		// under bash.
		{"/bin/sh exits at once", map[string]string{"hello": "hello", "bin/sh": "exitsh"}, "the image's /bin/sh is bash"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ref := "localhost/code-sandbox-mcp-test/" + strings.ReplaceAll(tt.name, " ", "-")
			ref = strings.ReplaceAll(ref, "/bin/sh", "sh") + ":1"
			staticImage(t, ref, tt.files)
			var log syncBuffer
			lang := config.Language{Name: "hello", Image: ref, Command: []string{"/hello"}, File: "main.txt", Pool: 1, Limits: testLimits()}
			e := newExecutor(t, func(c *exec.Config) {
				c.Languages = []config.Language{lang}
				c.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			// Three runs: the pool's first sandbox, whatever it was, and
			// the ones after the fallback.
			for i := range 3 {
				// The pool holds its one sandbox again (the last run's is
				// gone): started, or exited at once, or created.
				waitFor(30*time.Second, func() bool { cs, _ := testClient.Containers(testContext(t)); return len(cs) == 1 })
				res, err := e.Run(testContext(t), exec.Request{Language: "hello", Code: "ignored"})
				if err != nil {
					t.Fatalf("run %d: %v\nlog:\n%s", i, err, log.String())
				}
				if string(res.Stdout) != "pulled and ran\n" || res.ExitCode != 0 {
					t.Errorf("run %d: stdout %q, exit %d; want %q, exit 0", i, res.Stdout, res.ExitCode, "pulled and ran\n")
				}
			}
			if n := strings.Count(log.String(), "ready sandboxes will be created without being started"); n != 1 || !strings.Contains(log.String(), tt.log) {
				t.Errorf("log says the pool falls back %d times; want once, saying %q:\n%s", n, tt.log, log.String())
			}
			var ts taskSet
			if !waitFor(30*time.Second, func() bool { ts, _ = sandboxTasks(testContext(t)); return len(ts.created) == 1 }) {
				t.Errorf("after the fallback: tasks %+v; want one ready sandbox, created and not started", ts)
			}
		})
	}
}

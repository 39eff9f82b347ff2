package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/core/images"

	"code-sandbox-mcp/config"
	sandboximages "code-sandbox-mcp/containers/images"
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
	if _, err := sandboximages.Import(ctx, testClient, &archive); err != nil {
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
		if err := goBuild("", pkg, bin, "./testdata/"+pkg, nil, []string{"CGO_ENABLED=0"}); err != nil {
			t.Fatalf("build %s: %v", pkg, err)
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
// every run gives the right result on the way, and each takes the
// sandbox the pool held for it.
func TestPoolFallsBackWhenTheStubCannotWait(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	for _, tt := range []struct {
		name  string
		files map[string]string
		log   string
		// first is the status of the task of the pool's first sandbox,
		// once it is ready.
		first string
	}{
		// NewTask fails: runc finds no /bin/sh to exec. The pool falls
		// back at once and its first sandbox is created, not started.
		{"no /bin/sh", map[string]string{"hello": "hello"}, "the waiting /bin/sh cannot start", "CREATED"},
		// The stub starts and exits before its program, as it does
		// under bash; the first run finds it exited and falls back.
		{"/bin/sh exits at once", map[string]string{"hello": "hello", "bin/sh": "exitsh"}, "the image's /bin/sh is bash", "STOPPED"},
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
			// Three runs: the pool's first sandbox, and the ones after
			// the fallback.
			for i := range 3 {
				// The pool holds its one sandbox, and nothing else is
				// left: the sandbox's task is in the state the case
				// expects (after the fallback, created and not started,
				// which no used sandbox ever is), and the pool counts it.
				// Neither a container with a task nor the executor's
				// "sandbox created" line is enough: both come before the
				// pool has the sandbox, and a run in between creates one
				// of its own (CI saw it, 6 ms after the log line).
				want := "CREATED"
				if i == 0 {
					want = tt.first
				}
				var state []string
				var ready string
				if !waitFor(30*time.Second, func() bool {
					state = poolState(testContext(t))
					var ok bool
					ready, ok = onlyReady(state, want)
					return ok && e.PoolSizes()["hello"] == 1
				}) {
					t.Fatalf("before run %d: containers %q; want only the pool's ready sandbox, %s, counted by the pool (it counts %d)\nlog:\n%s", i, state, want, e.PoolSizes()["hello"], log.String())
				}
				res, err := e.Run(testContext(t), exec.Request{Language: "hello", Code: "ignored"})
				if err != nil {
					t.Fatalf("run %d: %v\nlog:\n%s", i, err, log.String())
				}
				if string(res.Stdout) != "pulled and ran\n" || res.ExitCode != 0 {
					t.Errorf("run %d: stdout %q, exit %d; want %q, exit 0", i, res.Stdout, res.ExitCode, "pulled and ran\n")
				}
				// The run took the pool's sandbox (and ran in it, or
				// found its stub exited): it is retired, not kept.
				if !waitFor(30*time.Second, func() bool { return gone(t, []string{ready}) }) {
					t.Errorf("run %d: the pool's sandbox %s still exists 30s after the run; want it taken and retired\nlog:\n%s", i, ready, log.String())
				}
			}
			if n := strings.Count(log.String(), "ready sandboxes will be created without being started"); n != 1 || !strings.Contains(log.String(), tt.log) {
				t.Errorf("log says the pool falls back %d times; want once, saying %q:\n%s", n, tt.log, log.String())
			}
			var state []string
			if !waitFor(30*time.Second, func() bool { state = poolState(testContext(t)); _, ok := onlyReady(state, "CREATED"); return ok }) {
				t.Errorf("after the fallback: containers %q; want one ready sandbox, created and not started, and nothing else", state)
			}
		})
	}
}

// poolState lists the containers in testNamespace as "id: status of its
// task", the status "none" for a container without one; a task without a
// container shows as "id: status (no container)".
func poolState(ctx context.Context) []string {
	cs, err := testClient.Containers(ctx)
	if err != nil {
		return []string{"list containers: " + err.Error()}
	}
	ts, err := testClient.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return []string{"list tasks: " + err.Error()}
	}
	status := map[string]string{}
	for _, task := range ts.Tasks {
		status[task.ID] = task.Status.String()
	}
	var out []string
	for _, c := range cs {
		st, ok := status[c.ID()]
		if !ok {
			st = "none"
		}
		delete(status, c.ID())
		out = append(out, c.ID()+": "+st)
	}
	for id, st := range status {
		out = append(out, id+": "+st+" (no container)")
	}
	return out
}

// onlyReady returns the id of the one container in state (see poolState),
// if there is one and only one and its task's status is want.
func onlyReady(state []string, want string) (string, bool) {
	if len(state) != 1 {
		return "", false
	}
	id, st, _ := strings.Cut(state[0], ": ")
	return id, st == want
}

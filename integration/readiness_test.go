package integration

// Tests of each language's readiness (its image and its pool), of the
// sweep's proof of ownership, of how a run's end is told, and of the
// bounds on calls to a daemon that hangs: issue 9's defects 2 to 6, 8, 9
// and 10, each of which failed before its fix.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	sandboximages "code-sandbox-mcp/containers/images"
	"code-sandbox-mcp/containers/ociarchive"
	"code-sandbox-mcp/exec"
)

// staticLanguage is a language that runs /hello of a static test image.
func staticLanguage(name, ref string, pool int) config.Language {
	return config.Language{Name: name, Image: ref, Command: []string{"/hello"}, File: "main.txt", Pool: pool, Limits: testLimits()}
}

// A language whose image was missing when the executor started gets its
// pool once the image is imported: the first run that finds the image
// ready starts it (defect 2).
func TestPoolStartsOnceAMissingImageIsImported(t *testing.T) {
	onBothDaemons(t, daemonImages)
	const ref = "localhost/code-sandbox-mcp-test/late:1"
	e := startExecutor(t, func(c *exec.Config) {
		c.Languages = []config.Language{staticLanguage("late", ref, 1)}
		c.Pull = false
	})
	if _, err := e.Run(testContext(t), exec.Request{Language: "late", Code: "x"}); !errdefs.IsNotFound(err) {
		t.Fatalf("run before the import: got %v; want not-found", err)
	}
	staticImage(t, ref, map[string]string{"hello": "hello", "bin/sh": "stubsh"})
	res, err := e.Run(testContext(t), exec.Request{Language: "late", Code: "x"})
	if err != nil || string(res.Stdout) != "pulled and ran\n" {
		t.Fatalf("run after the import: got %v, %v; want the image's output", res, err)
	}
	var ts taskSet
	if !waitFor(30*time.Second, func() bool { ts, _ = sandboxTasks(testContext(t)); return ts.waiting() == 1 && len(ts.running) == 0 }) {
		t.Fatalf("after the import: tasks %+v; want the pool's one ready sandbox", ts)
	}
}

// A ready sandbox made from an image that has since been imported again
// is not used: runs get the new image (the readiness's cache follows
// containerd's store).
func TestImageImportedAgainIsUsedAtOnce(t *testing.T) {
	onBothDaemons(t, daemonImages)
	const ref = "localhost/code-sandbox-mcp-test/again:1"
	staticImage(t, ref, map[string]string{"hello": "hello", "bin/sh": "stubsh"})
	e := newExecutor(t, func(c *exec.Config) { c.Languages = []config.Language{staticLanguage("again", ref, 1)} })
	if !waitFor(30*time.Second, func() bool { ts, _ := sandboxTasks(testContext(t)); return len(ts.stub) == 1 }) {
		t.Fatal("the pool never held a sandbox started ahead")
	}
	// The same name, another image: its /hello is the stub shell, which
	// exits 2 when it is not called as a shell.
	importStatic(t, testContext(t), ref, map[string]string{"hello": "stubsh", "bin/sh": "stubsh"})
	// containerd's event reaches the executor asynchronously.
	var res *exec.Result
	ok := waitFor(10*time.Second, func() bool {
		var err error
		res, err = e.Run(testContext(t), exec.Request{Language: "again", Code: "x"})
		return err == nil && res.ExitCode == 2
	})
	if !ok {
		t.Fatalf("runs after the image changed: last got %+v; want the new image's /hello (exit 2)", res)
	}
	for i := range 3 {
		res, err := e.Run(testContext(t), exec.Request{Language: "again", Code: "x"})
		if err != nil || res.ExitCode != 2 {
			t.Errorf("run %d after the change: got %+v, %v; want the new image's exit 2", i, res, err)
		}
	}
}

// One sandbox whose stub cannot be created does not turn start-ahead off
// for the language: once the image can run the stub, ready sandboxes are
// started ahead again (defect 6). Before the fix, the first failure
// turned it off for good.
func TestStartAheadSurvivesAStubThatCouldNotBeCreated(t *testing.T) {
	const ref = "localhost/code-sandbox-mcp-test/noshyet:1"
	staticImage(t, ref, map[string]string{"hello": "hello"})
	e := newExecutor(t, func(c *exec.Config) { c.Languages = []config.Language{staticLanguage("noshyet", ref, 1)} })
	if !waitFor(30*time.Second, func() bool { ts, _ := sandboxTasks(testContext(t)); return len(ts.created) == 1 }) {
		t.Fatal("without /bin/sh: the pool never held a sandbox created and not started")
	}
	importStatic(t, testContext(t), ref, map[string]string{"hello": "hello", "bin/sh": "stubsh"})
	var ts taskSet
	ok := waitFor(30*time.Second, func() bool {
		// Each run refills the pool from the image as it is now.
		if res, err := e.Run(testContext(t), exec.Request{Language: "noshyet", Code: "x"}); err != nil || string(res.Stdout) != "pulled and ran\n" {
			t.Errorf("run: got %+v, %v; want the image's output", res, err)
		}
		// A sandbox's task is created a moment before its stub starts
		// (longer on a busy host): only a stub that does not come
		// within 5 s means the pool still creates sandboxes without it.
		return waitFor(5*time.Second, func() bool {
			ts, _ = sandboxTasks(testContext(t))
			return ts.waiting() == 1 && len(ts.stub) == 1
		})
	})
	if !ok {
		t.Fatalf("with /bin/sh: tasks %+v; want the ready sandbox started ahead, on the stub", ts)
	}
}

// The state directory shared with a server of another namespace: a sweep
// leaves that server's run directories alone, however old, since their
// owner is alive (defect 4). Before the fix it deleted every directory
// older than a minute that had no container in its own namespace.
func TestSweepKeepsAnotherNamespacesRunDirectories(t *testing.T) {
	const other = "code-sandbox-test-other"
	const ref = "localhost/code-sandbox-mcp-test/other:1"
	stateDir := newStateDir(t)
	ctx := testContext(t)
	otherCtx := namespaces.WithNamespace(ctx, other)
	// Last, once both executors deleted their sandboxes: the other
	// namespace's parent cgroups, and runc's state directory of the
	// namespace (/run/containerd/runc/NAMESPACE), which runc leaves. A
	// directory with entries stays (Remove fails), as the harness's own
	// does (deleteRuncState).
	t.Cleanup(func() {
		if err := removeCgroups(other, nil); err != nil {
			t.Error(err)
		}
		os.Remove(filepath.Join("/run/containerd/runc", other))
	})
	importStatic(t, otherCtx, ref, map[string]string{"hello": "hello", "bin/sh": "stubsh"})
	t.Cleanup(func() {
		if err := testClient.ImageService().Delete(otherCtx, ref, images.SynchronousDelete()); err != nil {
			t.Errorf("delete %s: %v", ref, err)
		}
	})
	a, err := exec.New(otherCtx, exec.Config{Address: testAddress, Namespace: other, StateDir: stateDir, UIDs: testUIDs, UIDLockDir: testUIDLockDir(), Init: testInit,
		Languages: []config.Language{staticLanguage("other", ref, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Prepare(otherCtx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	var dirs []string
	if !waitFor(30*time.Second, func() bool { dirs, _ = filepath.Glob(filepath.Join(stateDir, "csm-*")); return len(dirs) == 1 }) {
		t.Fatalf("run directories of the other namespace's pool: got %v; want one", dirs)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dirs[0], old, old); err != nil {
		t.Fatal(err)
	}

	b, err := exec.New(ctx, exec.Config{Address: testAddress, Namespace: testNamespace, StateDir: stateDir, UIDs: testUIDs, UIDLockDir: testUIDLockDir(), Init: testInit, Languages: testLanguages()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Sweep(ctx); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("after another namespace's sweep: %v; want the live server's run directory kept", err)
	}
	res, err := a.Run(otherCtx, exec.Request{Language: "other", Code: "x"})
	if err != nil || string(res.Stdout) != "pulled and ran\n" {
		t.Fatalf("run in the kept sandbox: got %+v, %v; want it to work", res, err)
	}
}

// importStatic imports staticRootfs(files) as ref, in ctx's namespace, and
// leaves its deletion to the caller: over an image that staticImage
// imported and deletes when the test ends, say.
func importStatic(t *testing.T, ctx context.Context, ref string, files map[string]string) {
	t.Helper()
	var archive bytes.Buffer
	if err := ociarchive.Pack(&archive, staticRootfs(t, files), ociarchive.Image{Ref: ref}); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if _, err := sandboximages.Import(ctx, testClient, &archive); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
}

// A program's own exit status of 129 to 192 is its exit status, not a
// signal; a real signal is still named (defect 10).
func TestExitStatusAbove128IsNotASignal(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	e := newExecutor(t, nil)
	ctx := testContext(t)
	for _, tt := range []struct {
		code   string
		status int
		signal string
	}{
		{"import sys; sys.exit(139)", 139, ""},
		{"import sys; sys.exit(137)", 137, ""},
		{"import os; os._exit(154)", 154, ""},
		{"import ctypes; ctypes.string_at(0)", 139, "SIGSEGV"},
	} {
		res, err := e.Run(ctx, exec.Request{Language: "python", Code: tt.code})
		if err != nil {
			t.Fatalf("%s: %v", tt.code, err)
		}
		if res.ExitCode != tt.status || res.Signal != tt.signal || res.OOMKilled || res.TimedOut {
			t.Errorf("%s: got exit %d signal %q oom %v timed out %v; want exit %d signal %q", tt.code, res.ExitCode, res.Signal, res.OOMKilled, res.TimedOut, tt.status, tt.signal)
		}
	}
}

// hangingRegistry accepts a pull and never answers its manifest until
// the test ends; failing answers 500 to everything and counts requests.
type hangingRegistry struct {
	release chan struct{}
	fail    bool

	mu       sync.Mutex
	requests int
}

func (r *hangingRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()
	if r.fail {
		http.Error(w, "broken", http.StatusInternalServerError)
		return
	}
	if strings.Contains(req.URL.Path, "/manifests/") {
		<-r.release
	}
	http.NotFound(w, req)
}

func (r *hangingRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func serveRegistry(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// A pull that hangs blocks no other language's runs, and a run waiting
// for it gives up when its caller does (defect 3). Before the fix one
// executor-wide lock was held through the pull, on a detached context.
func TestAHangingPullBlocksNoOtherLanguage(t *testing.T) {
	onBothDaemons(t, daemonImages)
	reg := &hangingRegistry{release: make(chan struct{})}
	ref := serveRegistry(t, reg) + "/hangs:1"
	e := startExecutor(t, func(c *exec.Config) {
		c.Languages = append(testLanguages(), staticLanguage("hangs", ref, 0))
		c.Pull = true
	})
	// Registered after newExecutor, so it runs before Close waits for
	// the pull.
	t.Cleanup(func() { close(reg.release) })

	ctx, cancel := context.WithTimeout(testContext(t), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.Run(ctx, exec.Request{Language: "hangs", Code: "x"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("run of the hanging language: got %v after %s; want its caller's deadline after about 2s", err, time.Since(start))
	}
	if reg.count() == 0 {
		t.Fatal("the registry saw no request; the test tested nothing")
	}
	// The pull still hangs in the background; python runs meanwhile.
	start = time.Now()
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: "print('free')"})
	if err != nil || string(res.Stdout) != "free\n" || time.Since(start) > 10*time.Second {
		t.Fatalf("python while another language's pull hangs: got %+v, %v after %s; want it to run", res, err, time.Since(start))
	}
}

// A pull that fails for another reason than "not found" says so, is not
// reported as a missing image, and is remembered: the next call gets its
// error without asking the registry again (defects 3 and 9).
func TestAFailedPullIsRememberedAndSaysWhy(t *testing.T) {
	onBothDaemons(t, daemonImages)
	reg := &hangingRegistry{fail: true}
	ref := serveRegistry(t, reg) + "/broken:1"
	e := startExecutor(t, func(c *exec.Config) {
		c.Languages = []config.Language{staticLanguage("broken", ref, 0)}
		c.Pull = true
	})
	_, err := e.Run(testContext(t), exec.Request{Language: "broken", Code: "x"})
	if err == nil || errdefs.IsNotFound(err) || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "500") {
		t.Fatalf("run: got %v; want a failed precondition naming the registry's 500, not a missing image", err)
	}
	n := reg.count()
	_, err2 := e.Run(testContext(t), exec.Request{Language: "broken", Code: "x"})
	if err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second run: got %v; want the remembered %v", err2, err)
	}
	if got := reg.count(); got != n {
		t.Errorf("registry requests: %d after the first run, %d after the second; want no new pull", n, got)
	}
}

// A run cancelled while containerd hangs returns within the bounds of
// its calls, and so does Close once the daemon is back (defect 8).
// Before the fix the kill waited on a context without a deadline.
func TestCancelWhileContainerdHangsIsBounded(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	e := newExecutor(t, nil)
	ctx, cancel := context.WithTimeout(testContext(t), time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, exec.Request{Language: "python", Code: "import time\nprint('up', flush=True)\ntime.sleep(60)\n"})
		done <- err
	}()
	if !waitFor(30*time.Second, func() bool { ts, _ := sandboxTasks(testContext(t)); return len(ts.running) == 1 }) {
		cancel()
		t.Fatal("the program never ran")
	}
	if err := testDaemon.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			testDaemon.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Run: got no error; want the cancellation")
		}
	case <-time.After(40 * time.Second):
		resume()
		<-done
		t.Fatalf("Run did not return within 40s of its cancellation while containerd hung")
	}
	t.Logf("Run returned %s after its cancellation, containerd stopped", time.Since(start).Round(time.Millisecond))
	resume()
}

// A run whose timeout ends while its sandbox is being created (issue 26:
// a timeout far too short for a creation, on a healthy containerd) fails
// within its timeout and a second, saying that no sandbox could be made
// within it; the creation goes on, and what it made is deleted once it is
// done, before the executor closes.
func TestRunOutOfTimeWhileItsSandboxIsMade(t *testing.T) {
	made := make(chan error, 1)
	e := newExecutor(t, func(c *exec.Config) {
		c.Hooks.SandboxCreated = func(_ string, _ time.Duration, err error) { made <- err }
	})
	const timeout = 40 * time.Millisecond
	start := time.Now()
	_, err := e.Run(testContext(t), exec.Request{Language: "python", Code: "print('ran')", Timeout: timeout})
	took := time.Since(start)
	t.Logf("Run with a timeout of %s: %v, after %s", timeout, err, took.Round(time.Millisecond))
	want := "no sandbox could be made within the call's timeout of 40ms: creating a sandbox"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, exec.ErrNotAnswering) {
		t.Fatalf("Run with a timeout of %s: %v; want an ErrNotAnswering saying %q", timeout, err, want)
	}
	if took > timeout+time.Second {
		t.Errorf("Run with a timeout of %s returned after %s; want within its timeout and a second", timeout, took.Round(time.Millisecond))
	}
	select {
	case err := <-made:
		// The creation saw its caller gone, and deleted what it made.
		if err == nil {
			t.Errorf("the creation the run stopped waiting for: no error; want it cancelled")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the creation the run stopped waiting for did not end within 30s")
	}
	cs, err := testClient.Containers(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("containers once the creation ended: got %d; want none", len(cs))
	}
}

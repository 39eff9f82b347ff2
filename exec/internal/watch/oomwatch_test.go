package watch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The count is kept through the cgroup's removal: the watch reads
// memory.events again when it changes, and kills gives the last count
// once the file is gone (a systemd scope's cgroup goes with its last
// process). A regular file stands in for the cgroup's, which this host
// (cgroup v1) cannot have; make test-cgroupv2 runs the real one
// (TestOOMIsReported under the systemd driver).
func TestOOMCountOutlivesItsCgroup(t *testing.T) {
	w, dir, events := newScope(t, "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
	c := w.Track(dir)
	if n, ok := c.Kills(); !ok || n != 0 {
		t.Fatalf("kills at start: %d %v; want 0 true", n, ok)
	}
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The watch, not kills, must read the change: wait for it.
	for deadline := time.Now().Add(5 * time.Second); c.last.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not read the changed count within 5s")
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Kills(); !ok || n != 1 {
		t.Errorf("kills after the cgroup went: %d %v; want 1 true", n, ok)
	}
	w.Untrack(c)
	if len(w.byWD) != 0 {
		t.Errorf("%d watches left after untrack", len(w.byWD))
	}
	// Nothing counted, nothing known: a cgroup never read.
	if n, ok := w.Track("").Kills(); ok || n != 0 {
		t.Errorf("kills of no cgroup: %d %v; want 0 false", n, ok)
	}
}

// A change that comes without a word of its own, as the kernel's word on
// an OOM kill does when it follows the "max" and "oom" events within
// 10 ms and the cgroup goes before the deferred word, is read all the
// same, by the rereads that follow the word before it. A rename stands in
// for the wordless change: the watch is on the old file's inode.
func TestOOMCountRereadAfterAWord(t *testing.T) {
	w, dir, events := newScope(t, "max 0\noom 0\noom_kill 0\n")
	c := w.Track(dir)
	defer w.Untrack(c)
	if err := os.WriteFile(events, []byte("max 3\noom 1\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !c.rereading.Load(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not take the word on the change within 5s")
		}
	}
	quiet := filepath.Join(dir, "new")
	if err := os.WriteFile(quiet, []byte("max 3\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(quiet, events); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Second); c.last.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the kill counted without a word was not read within 1s of the word before it")
		}
	}
}

// newScope starts an OOM watch, stopped when the test ends, and makes a
// directory standing in for a cgroup, whose memory.events (a regular
// file) holds content.
func newScope(t *testing.T, content string) (w *OOMs, dir, events string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w = NewOOMs(ctx, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		cancel()
		w.Wait()
	})
	if w.f == nil {
		t.Fatal("no inotify instance")
	}
	dir = filepath.Join(t.TempDir(), "scope")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	events = filepath.Join(dir, "memory.events")
	if err := os.WriteFile(events, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return w, dir, events
}

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/audit"
)

// Without an audit log SIGHUP shuts down; with one it rotates the log,
// whose chain goes on in the new file.
func TestHangup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	write := func() {
		t.Helper()
		if err := l.Write("run_ended", nil); err != nil {
			t.Fatal(err)
		}
	}
	write()
	shut := make(chan struct{}, 1)
	h := onHangup(func() { shut <- struct{}{} })
	defer h.stop()
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	hup()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP without an audit log did not shut down")
	}

	h.claim(func() {
		if err := l.Rotate(); err != nil {
			t.Errorf("rotate: %v", err)
		}
	})
	old := path + ".1"
	if err := os.Rename(path, old); err != nil {
		t.Fatal(err)
	}
	hup()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP with an audit log did not reopen it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-shut:
		t.Fatal("SIGHUP with an audit log shut down")
	default:
	}
	write()
	if sum, err := audit.Verify(old, path); err != nil || sum.Records != 3 {
		t.Errorf("verify across the rotation: %+v, %v; want 3 records (run_ended, rotated, run_ended)", sum, err)
	}
}

package sandbox

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"code-sandbox-mcp/exec/internal/watch"
)

// A killed sandbox's end is known from its pidfd when neither the
// kernel's exit event (dropped on a busy host) nor containerd's word has
// come (seen under make test's load: "did not exit within 4s of
// SIGKILL"). The pidfd says nothing while the process runs, and tells its
// end at once.
func TestPidfdExitedTellsTheEnd(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Skipf("no pidfd on this kernel: %v", err)
	}
	s := &Sandbox{pidfd: fd, hasPidfd: true}
	stop := make(chan struct{})
	defer close(stop)
	gone := s.pidfdExited(stop)
	time.Sleep(200 * time.Millisecond)
	if watch.IsClosed(gone) {
		t.Fatal("gone while the process still runs")
	}
	// The sandbox's own pidfd may be closed (by Destroy) while the
	// poll goes on: it polls a copy.
	unix.Close(fd)
	cmd.Process.Kill()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("not gone 5s after the process was killed")
	}
	cmd.Wait()
	if never := (&Sandbox{}).pidfdExited(stop); watch.IsClosed(never) {
		t.Error("a sandbox without a pidfd: gone; want a channel that never closes")
	}
}

package watch

import (
	"context"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"syscall"
	"testing"
	"time"
)

// rootWatch starts an exit watch for the test, which needs CAP_NET_ADMIN
// (make test runs as root), and stops it when the test ends.
func rootWatch(t *testing.T) *Exits {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) for the kernel's process events; make test runs as root")
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := NewExits(ctx, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		cancel()
		w.Wait()
	})
	if !w.Usable() {
		t.Fatal("the process events connector did not open as root")
	}
	return w
}

// The kernel's process events tell a process killed by a signal from one
// that exited with 128 plus that signal's number, which containerd's exit
// status cannot (defect 10). This needs CAP_NET_ADMIN: make test runs as
// root.
func TestExitWatchTellsSignalFromExitStatus(t *testing.T) {
	w := rootWatch(t)
	for _, tt := range []struct {
		script string
		code   uint32
		sig    syscall.Signal
	}{
		{"exit 139", 139, 0},
		{"exit 3", 3, 0},
		{"kill -SEGV $$", 139, syscall.SIGSEGV},
		{"kill -VTALRM $$", 128 + 26, syscall.SIGVTALRM},
	} {
		// The shell waits for a line, so that it is tracked before it ends.
		cmd, in := startWithStdin(t, "/bin/sh", "-c", "read _; "+tt.script)
		info := w.Track(uint32(cmd.Process.Pid))
		in.Write([]byte("\n"))
		cmd.Wait()
		sig, known := info.Signal(tt.code)
		w.Untrack(uint32(cmd.Process.Pid))
		if !known || sig != tt.sig {
			t.Errorf("%q: got signal %v known %v; want %v known", tt.script, sig, known, tt.sig)
		}
		// A status that does not match what the kernel saw is unknown.
		if _, known := info.Signal(tt.code + 1); known {
			t.Errorf("%q with status %d: known; want unknown, as it does not match", tt.script, tt.code+1)
		}
	}
}

// startWithStdin starts the command name args with a pipe to its
// standard input, for it to wait on.
func startWithStdin(t *testing.T, name string, args ...string) (*osexec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := osexec.Command(name, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, in
}

// Without the connector, nothing is known, and nobody waits for it.
func TestExitWatchWithoutTheConnectorKnowsNothing(t *testing.T) {
	w := &Exits{tracked: map[uint32]*Exit{}}
	info := w.Track(1)
	if sig, known := info.Signal(139); known || sig != 0 {
		t.Errorf("got signal %v known %v; want unknown", sig, known)
	}
}

// The watch counts the programs a tracked process exec'd: how a sandbox
// tells a stub that ran its program from one that ended before it.
func TestExitWatchCountsExecs(t *testing.T) {
	w := rootWatch(t)
	for _, tt := range []struct {
		script string
		execs  int
	}{
		{"exit 0", 0},
		{"exec /bin/true", 1},
		{"exec /bin/sh -c 'exec /bin/true'", 2},
	} {
		// The shell says it runs (its own exec is over) before it is
		// tracked, then waits for a line.
		cmd := osexec.Command("/bin/sh", "-c", "echo; read _; "+tt.script)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out.Read(make([]byte, 1))
		info := w.Track(uint32(cmd.Process.Pid))
		in.Write([]byte("\n"))
		cmd.Wait()
		info.Signal(0) // waits for the exit event
		n, ok := info.Execed()
		w.Untrack(uint32(cmd.Process.Pid))
		if !ok || n != tt.execs {
			t.Errorf("%q: got %d execs (known %v); want %d", tt.script, n, ok, tt.execs)
		}
	}
}

// Under an init, the kernel's word on the init's first child is the
// program's: tini exits 143 both when its child calls exit(143) and when
// SIGTERM kills it, and only the child's end tells them apart. A later
// child is not taken for the first.
func TestExitWatchTracksTheFirstChild(t *testing.T) {
	const tini = "/usr/bin/tini-static"
	if _, err := os.Stat(tini); err != nil {
		t.Fatalf("this test needs %s (apt-get install tini): %v", tini, err)
	}
	w := rootWatch(t)
	for _, tt := range []struct {
		script string
		sig    syscall.Signal
	}{
		{"kill -TERM $$", syscall.SIGTERM},
		{"sh -c 'exit 0'; exit 143", 0},
	} {
		// The shell waits for a line, tracked, then becomes tini, whose
		// first child is the script; -s makes tini the reaper it is as pid 1.
		cmd, in := startWithStdin(t, "/bin/sh", "-c", `read _; exec `+tini+` -s -- /bin/sh -c "$0"`, tt.script)
		info := w.Track(uint32(cmd.Process.Pid))
		in.Write([]byte("\n"))
		cmd.Wait()
		if sig, known := info.Signal(143); !known || sig != 0 {
			t.Errorf("%q: tini: signal %v known %v; want an exit with 143", tt.script, sig, known)
		}
		child := info.Child()
		if child == nil {
			t.Fatalf("%q: no child seen", tt.script)
		}
		if sig, known := child.Signal(143); !known || sig != tt.sig {
			t.Errorf("%q: child: signal %v known %v; want %v known", tt.script, sig, known, tt.sig)
		}
		w.Untrack(uint32(cmd.Process.Pid))
		w.mu.Lock()
		left := len(w.tracked)
		w.mu.Unlock()
		if left != 0 {
			t.Errorf("%q: %d processes still tracked after Untrack; want none", tt.script, left)
		}
	}
}

// Forked and FirstExec tell, while the processes run, that an init forked
// its child and that the child exec'd its program: a child that cannot
// exec ends with neither exec seen nor FirstExec closed. This is how a
// sandbox tells, at its start, a stub that could not exec /bin/sh.
func TestExitWatchSeesTheChildForkAndExec(t *testing.T) {
	const tini = "/usr/bin/tini-static"
	if _, err := os.Stat(tini); err != nil {
		t.Fatalf("this test needs %s (apt-get install tini): %v", tini, err)
	}
	w := rootWatch(t)
	for _, tt := range []struct {
		child string
		execs bool
	}{
		{"/bin/sh", true},
		{"/no/such/program", false},
	} {
		cmd, in := startWithStdin(t, "/bin/sh", "-c", `read _; exec `+tini+` -s -- "$0" -c 'read _'`, tt.child)
		info := w.Track(uint32(cmd.Process.Pid))
		in.Write([]byte("\n"))
		select {
		case <-info.Forked():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no fork seen within 5s", tt.child)
		}
		child := info.Child()
		select {
		case <-child.FirstExec():
			if !tt.execs {
				t.Errorf("%s: its exec was seen; want none", tt.child)
			}
		case <-child.Done():
			if n, ok := child.Execed(); tt.execs || !ok || n != 0 {
				t.Errorf("%s: ended with %d execs (known %v); want it running after its exec", tt.child, n, ok)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: neither an exec nor an end within 5s", tt.child)
		}
		in.Write([]byte("\n"))
		in.Close()
		cmd.Wait()
		w.Untrack(uint32(cmd.Process.Pid))
	}
}

// A process tracked once the watch stopped (the server is shutting down)
// is told unknown at once: nothing would ever close its Done, and a
// sandbox being made then waited for it until its own deadline.
func TestExitWatchStoppedTellsNewProcessesUnknown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) for the kernel's process events; make test runs as root")
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := NewExits(ctx, slog.New(slog.DiscardHandler))
	if !w.Usable() {
		t.Fatal("the process events connector did not open as root")
	}
	cancel()
	w.Wait()
	info := w.Track(uint32(os.Getpid()))
	select {
	case <-info.Done():
	default:
		t.Fatal("tracked after the watch stopped: not done; want done at once")
	}
	if _, ok := info.Execed(); ok {
		t.Error("tracked after the watch stopped: known; want unknown")
	}
}

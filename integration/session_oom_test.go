package integration

// An OOM kill in a session's sandbox while no cell runs (issue 23, a
// suspected point): a process a cell left in the background that the
// kernel kills for its memory is told of in the next cell's result, once;
// the interpreter killed so ends the session, and the next call says why.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidWithArg returns the host pid of the process that has arg among its
// arguments, waiting up to 10 s for one.
func pidWithArg(t *testing.T, arg string) int {
	t.Helper()
	want := []byte("\x00" + arg + "\x00")
	pid := 0
	if !waitFor(10*time.Second, func() bool {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cmdline"))
			if err == nil && bytes.Contains(b, want) {
				pid, _ = strconv.Atoi(filepath.Base(d))
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no process with argument %q", arg)
	}
	return pid
}

// processEnded reports whether the process pid has ended: it is gone, or
// a zombie that its parent has not waited for.
func processEnded(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// hogCode starts a process in the background that waits for SIGUSR1 and
// then allocates until the kernel kills it; marker is among its
// arguments, for the test to find it. The cell returns once the process
// waits.
const hogCode = `import subprocess, sys
hog = subprocess.Popen([sys.executable, '-c', r'''
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print('waiting', flush=True)
signal.sigwait({signal.SIGUSR1})
b = []
while True:
    b.append(bytearray(16 << 20))
''', %q], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
print(hog.stdout.readline().strip())
`

// A background process that a cell started runs out of memory while no
// cell runs: the next cell's result says that a process was killed for
// its memory since the previous cell, and that the interpreter and its
// state remain; the cell after it says nothing of it; and a later exit of
// the interpreter is told as the exit it is, not as that old OOM kill.
func TestSessionOOMKillBetweenCellsIsReported(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	_, created, run := oomSession(t)
	marker := "oom-hog-" + created.SessionID
	if r := run("v = 42\n" + fmt.Sprintf(hogCode, marker)); r.isError || r.out.Stdout != "waiting\n" {
		t.Fatalf("starting the hog: %q; want it waiting", r.text)
	}
	pid := pidWithArg(t, marker)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !waitFor(60*time.Second, func() bool { return processEnded(pid) }) {
		t.Fatalf("the hog (pid %d) still runs 60 s after it was let go; want it killed for its memory", pid)
	}

	r := run("print(v)")
	want := "Since the previous cell, the kernel killed 1 process in this session's sandbox for running out of memory (limit 256MiB)"
	if r.isError || r.out.Stdout != "42\n" || r.out.OOMKilled || r.out.BackgroundOOMKills != 1 || !strings.Contains(r.text, want) ||
		!strings.Contains(r.text, "the interpreter and its state remain") {
		t.Errorf("the cell after the kill: %q, oom_killed %t, background_oom_kills %d; want 42, not an error, background_oom_kills 1 and %q",
			r.text, r.out.OOMKilled, r.out.BackgroundOOMKills, want)
	}
	if r = run("print('again')"); r.isError || r.text != "again\n" || r.out.BackgroundOOMKills != 0 {
		t.Errorf("the cell after that: %q, background_oom_kills %d; want only its output (the kill was told once)", r.text, r.out.BackgroundOOMKills)
	}
	r = run("import os; os._exit(4)")
	if r.out.OOMKilled || r.out.ExitCode != 4 || !strings.Contains(r.out.SessionEnded, "exited with status 4") {
		t.Errorf("an exit after the kill: %q, oom_killed %t, session_ended %q; want exit 4, told as an exit, not as the old OOM kill",
			r.text, r.out.OOMKilled, r.out.SessionEnded)
	}
}

// The interpreter itself runs out of memory while no cell runs (a
// thread of an earlier cell allocates): the session ends, and the next
// call on it says that it ended because the interpreter ran out of
// memory.
func TestSessionInterpreterOOMKilledBetweenCellsEndsIt(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	s, created, run := oomSession(t)
	ctx := testContext(t)
	// The thread allocates once the gate process ends, which the test
	// brings about.
	marker := "oom-gate-" + created.SessionID
	r := run(fmt.Sprintf(`import subprocess, sys, threading
gate = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)', %q], stdin=subprocess.DEVNULL)
def hog():
    gate.wait()
    b = []
    while True:
        b.append(bytearray(16 << 20))
threading.Thread(target=hog, daemon=True).start()
print('armed')`, marker))
	if r.isError || r.out.Stdout != "armed\n" {
		t.Fatalf("arming the thread: %q", r.text)
	}
	if err := syscall.Kill(pidWithArg(t, marker), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(60*time.Second, func() bool {
		text, _ := callRaw(ctx, t, s.c, "list_sessions", map[string]any{}, nil)
		return !strings.Contains(text, created.SessionID)
	}) {
		t.Fatalf("session %s is still listed 60 s after its thread began to allocate; want it ended", created.SessionID)
	}
	r = run("print(1)")
	want := "it has ended: the interpreter ran out of memory (limit 256MiB) and was killed, so the session ended"
	if !r.isError || !strings.Contains(r.text, want) {
		t.Errorf("a call after the interpreter's OOM kill: %q; want an error saying %q", r.text, want)
	}
}

// oomSession starts a server whose sandboxes have 256 MiB and a Python
// session on it, and returns the server, the session and what runs a
// cell in it.
func oomSession(t *testing.T) (*mcpServer, createdSession, func(code string) toolResult) {
	t.Helper()
	s := startMCP(t, serverSpec{config: "[limits]\nmemory = \"256MiB\"\n" + noPools})
	ctx := testContext(t)
	var created createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &created); isErr {
		t.Fatalf("create_session: %q", text)
	}
	return s, created, func(code string) toolResult {
		t.Helper()
		return s.call(ctx, t, "run_python_code", map[string]any{"code": code, "session_id": created.SessionID})
	}
}

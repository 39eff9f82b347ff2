package integration

// Sessions (issue 13) through the executor: state that persists across
// calls, in one hardened sandbox per session, and every way a session
// ends. The MCP face of sessions is in session_mcp_test.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/exec"
)

// sessionConfig turns sessions on, with room for max.
func sessionConfig(max int, idle, life time.Duration) func(*exec.Config) {
	return func(c *exec.Config) {
		c.Sessions = exec.SessionConfig{Max: max, IdleTimeout: idle, MaxLifetime: life}
	}
}

// newSession creates a session of lang on e for owner "local".
func newSession(t *testing.T, e *exec.Executor, lang string) exec.SessionInfo {
	t.Helper()
	info, err := e.CreateSession(testContext(t), "local", lang, 0)
	if err != nil {
		t.Fatalf("CreateSession(%s): %v", lang, err)
	}
	return info
}

// cell runs code as the next cell of session id.
func cell(t *testing.T, e *exec.Executor, lang, id, code string) *exec.Result {
	t.Helper()
	res, err := cellErr(testContext(t), e, lang, id, code, 0)
	if err != nil {
		t.Fatalf("cell %q: %v", code, err)
	}
	return res
}

func cellErr(ctx context.Context, e *exec.Executor, lang, id, code string, timeout time.Duration, files ...exec.File) (*exec.Result, error) {
	return e.Run(ctx, exec.Request{Language: lang, Code: code, Session: id, Owner: "local", Timeout: timeout, Files: files})
}

// wantOut fails unless res ended cleanly with stdout want.
func wantOut(t *testing.T, res *exec.Result, want string) {
	t.Helper()
	if string(res.Stdout) != want || res.Failed() || res.Session == nil || res.Session.Ended != "" {
		t.Fatalf("got stdout %q stderr %q exit %d session %+v; want stdout %q, a clean end and the session alive",
			res.Stdout, res.Stderr, res.ExitCode, res.Session, want)
	}
}

// A variable, an import, an open file and a pandas DataFrame made in one
// call are there in the next; a cell ending with an expression shows its
// repr; cells are counted; a traceback names its cell.
func TestSessionPythonStatePersists(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	if s.Language != "python" || !strings.HasPrefix(s.ID, "session-") || s.ExpiresAt.IsZero() {
		t.Fatalf("session info %+v", s)
	}
	wantOut(t, cell(t, e, "python", s.ID, `
import pandas as pd
x = 41
f = open('log.txt', 'w')
f.write('first\n')
df = pd.DataFrame({'a': [1, 2, 3]})
`), "")
	res := cell(t, e, "python", s.ID, "x = x + 1\nf.write('second\\n'); f.flush()\nprint(pd.__name__, x)\nint(df['a'].sum() * 2)")
	wantOut(t, res, "pandas 42\n12\n")
	if res.Session.ExecutionCount != 2 || !res.Session.ExpiresAt.After(s.ExpiresAt) {
		t.Errorf("session result %+v; want execution count 2 and a later expiry than %s", res.Session, s.ExpiresAt)
	}
	wantOut(t, cell(t, e, "python", s.ID, "f.close()\nprint(open('log.txt').read(), end='')\nNone"), "first\nsecond\n")
	res = cell(t, e, "python", s.ID, "y = 1\n\nraise ValueError('bad ' + str(x))")
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), `File "<cell 4>", line 3`) ||
		!strings.Contains(string(res.Stderr), "ValueError: bad 42") || strings.Contains(string(res.Stderr), "session.py") {
		t.Errorf("traceback: exit %d, stderr %q; want exit 1 naming <cell 4> line 3 and no driver frame", res.ExitCode, res.Stderr)
	}
	// The state survives the exception.
	wantOut(t, cell(t, e, "python", s.ID, "y, x"), "(1, 42)\n")
}

// Top-level var, let, const, functions and required modules persist; a
// cell declaring a const runs again; the last expression's value shows;
// a Promise and top-level await are awaited.
func TestSessionJavaScriptStatePersists(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "javascript")
	decl := "var a = 1; let b = 2; const c = 3; function f() { return a + b + c }\nconst fs = require('fs')"
	wantOut(t, cell(t, e, "javascript", s.ID, decl), "")
	wantOut(t, cell(t, e, "javascript", s.ID, "a += 10; f()"), "16\n")
	wantOut(t, cell(t, e, "javascript", s.ID, decl), "") // declared again
	wantOut(t, cell(t, e, "javascript", s.ID, "fs.writeFileSync('n.txt', String(f())); ({k: [1, 'two']})"), "{ k: [ 1, 'two' ] }\n")
	wantOut(t, cell(t, e, "javascript", s.ID, "const v = await new Promise(r => setTimeout(() => r(7), 10)); v * 2"), "14\n")
	wantOut(t, cell(t, e, "javascript", s.ID, "Promise.resolve(v + 1)"), "8\n")
	res := cell(t, e, "javascript", s.ID, "\nthrow new Error('bad ' + v)")
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "Error: bad 7") || !strings.Contains(string(res.Stderr), "<cell 7>") {
		t.Errorf("throw: exit %d, stderr %q; want exit 1 and a stack naming <cell 7>", res.ExitCode, res.Stderr)
	}
	wantOut(t, cell(t, e, "javascript", s.ID, "fs.readFileSync('n.txt', 'utf8')"), "'6'\n")
	// An open file descriptor persists too.
	wantOut(t, cell(t, e, "javascript", s.ID, "const fd = fs.openSync('log.txt', 'w'); fs.writeSync(fd, 'a')"), "1\n")
	wantOut(t, cell(t, e, "javascript", s.ID, "fs.writeSync(fd, 'b'); fs.closeSync(fd); fs.readFileSync('log.txt', 'utf8')"), "'ab'\n")
}

// A figure a cell leaves open comes back with that cell's call, and only
// with it; numbering goes on across cells.
func TestSessionFigures(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	res := cell(t, e, "python", s.ID, "import matplotlib.pyplot as plt\n_ = plt.plot([1, 2, 3])")
	if got := outputPaths(res); strings.Join(got, ",") != "figures/figure-1.png" || !bytes.HasPrefix(res.Files[0].Data, []byte("\x89PNG")) {
		t.Fatalf("first cell's outputs %v; want figures/figure-1.png", got)
	}
	res = cell(t, e, "python", s.ID, "_ = plt.plot([3, 1]); plt.show()\nprint(len(plt.get_fignums()))")
	if got := outputPaths(res); strings.Join(got, ",") != "figures/figure-2.png" {
		t.Fatalf("second cell's outputs %v; want figures/figure-2.png alone", got)
	}
	wantOut(t, cell(t, e, "python", s.ID, "print(plt.get_fignums())"), "[]\n")
}

// Two sessions share nothing: not their variables, not their workspace,
// not their /tmp, and a one-shot run sees none of their files.
func TestSessionsIsolatedFromEachOther(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	a, b := newSession(t, e, "python"), newSession(t, e, "python")
	wantOut(t, cell(t, e, "python", a.ID, "secret = 'a'\nopen('/workspace/a.txt', 'w').write('a')\n_ = open('/tmp/a.txt', 'w').write('a')"), "")
	wantOut(t, cell(t, e, "python", b.ID, "import os\nprint('secret' in globals(), os.listdir('/workspace'), os.path.exists('/tmp/a.txt'))"), "False [] False\n")
	ra := cell(t, e, "python", a.ID, "import os; os.getuid()")
	rb := cell(t, e, "python", b.ID, "import os; os.getuid()")
	if string(ra.Stdout) == string(rb.Stdout) {
		t.Errorf("both sessions run as uid %s", ra.Stdout)
	}
	one := run(t, e, "python", "import os; print(os.listdir('.'), os.path.exists('/tmp/a.txt'))")
	if string(one.Stdout) != "[] False\n" {
		t.Errorf("a one-shot run saw %q", one.Stdout)
	}
	// Nor does a session see a one-shot run's files.
	run(t, e, "python", "open('/workspace/one.txt', 'w').write('x'); open('/tmp/one.txt', 'w').write('x')\n")
	wantOut(t, cell(t, e, "python", b.ID, "print(os.listdir('.'), os.path.exists('/tmp/one.txt'))"), "[] False\n")
}

// /workspace persists for the session's life; files passed in land
// there, replacing an earlier file of the same path; the output files of
// a call are those new or changed during it.
func TestSessionWorkspacePersists(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	res, err := cellErr(testContext(t), e, "python", s.ID, "_ = open('out.txt', 'w').write(open('in.csv').read().upper())", 0,
		exec.File{Path: "in.csv", Data: []byte("a,b\n")})
	if err != nil || res.Failed() {
		t.Fatalf("cell: %v %+v", err, res)
	}
	if got := outputPaths(res); strings.Join(got, ",") != "out.txt" || string(outputFile(t, res, "out.txt")) != "A,B\n" {
		t.Fatalf("outputs %v; want out.txt alone", got)
	}
	res = cell(t, e, "python", s.ID, "import os; print(sorted(os.listdir('.')))\n_ = open('more.txt', 'w').write('m')")
	wantOut(t, res, "['in.csv', 'out.txt']\n")
	if got := outputPaths(res); strings.Join(got, ",") != "more.txt" {
		t.Errorf("second call's outputs %v; want more.txt alone (out.txt did not change)", got)
	}
	// A new in.csv replaces the old one, and a link the program left in
	// its place is replaced, not followed.
	cell(t, e, "python", s.ID, "os.symlink('/etc/passwd', 'link.txt')")
	res, err = cellErr(testContext(t), e, "python", s.ID, "print(open('in.csv').read(), os.path.islink('link.txt'), open('link.txt').read())", 0,
		exec.File{Path: "in.csv", Data: []byte("new\n")}, exec.File{Path: "link.txt", Data: []byte("plain")})
	if err != nil {
		t.Fatal(err)
	}
	wantOut(t, res, "new\n False plain\n")
	if len(res.Files) != 0 {
		t.Errorf("unchanged inputs came back: %v", outputPaths(res))
	}
	// A directory in the way of an input is refused, and the refused
	// call is not a cell.
	count := cell(t, e, "python", s.ID, "os.mkdir('sub')").Session.ExecutionCount
	if _, err := cellErr(testContext(t), e, "python", s.ID, "1", 0, exec.File{Path: "sub", Data: []byte("x")}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("an input where a directory is: %v; want an invalid argument", err)
	}
	if res := cell(t, e, "python", s.ID, "os.path.isdir('sub')"); res.Session.ExecutionCount != count+1 || string(res.Stdout) != "True\n" {
		t.Errorf("after the refused call: cell %d, %q; want cell %d and the directory kept", res.Session.ExecutionCount, res.Stdout, count+1)
	}
}

// Cells of one session run one at a time, in the order they were sent.
func TestSessionCallsRunInOrder(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) { c.Concurrency = 4; sessionConfig(4, time.Minute, time.Hour)(c) })
	s := newSession(t, e, "python")
	cell(t, e, "python", s.ID, "import os, time\nseen = []")
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	// The first call holds the session until the test releases it: it
	// says it runs with a file in its /tmp, then waits for another.
	mk := marker(t)
	wg.Go(func() {
		errs <- sessionCall(testContext(t), e, s.ID, fmt.Sprintf("open('/tmp/%[1]s-held', 'w').close()\nwhile not os.path.exists('/tmp/%[1]s-release'):\n    time.sleep(0.01)", mk))
	})
	release := func() {
		if held := sandboxTmpFile(mk + "-held"); held != "" {
			os.WriteFile(strings.TrimSuffix(held, "-held")+"-release", nil, 0o644)
		}
	}
	defer release() // should the test fail before it releases the cell
	if !waitFor(30*time.Second, func() bool { return sandboxTmpFile(mk+"-held") != "" }) {
		t.Fatal("the first cell never ran")
	}
	// The others arrive one by one, each sent once the one before it
	// waits for its turn.
	for i := range n {
		wg.Go(func() { errs <- queuedCall(testContext(t), e, s.ID, fmt.Sprintf("seen.append(%d)", i)) })
		if !waitFor(30*time.Second, func() bool { return waitingForTurn("integration.queuedCall") == i+1 }) {
			t.Fatalf("call %d never waited for its turn (%d calls wait)", i, waitingForTurn("integration.queuedCall"))
		}
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	res := cell(t, e, "python", s.ID, "print(seen == list(range(20)), seen)")
	if !strings.HasPrefix(string(res.Stdout), "True ") {
		t.Errorf("the cells ran in the order %s; want the order they were sent, 0 to 19", res.Stdout)
	}
	if res.Session.ExecutionCount != n+3 {
		t.Errorf("execution count %d; want %d", res.Session.ExecutionCount, n+3)
	}
}

// sessionCall runs code as a python cell of session id; a cell that
// fails is an error.
func sessionCall(ctx context.Context, e *exec.Executor, id, code string) error {
	res, err := cellErr(ctx, e, "python", id, code, 0)
	if err == nil && res.Failed() {
		err = fmt.Errorf("%q failed: %s", code, res.Stderr)
	}
	return err
}

// queuedCall is sessionCall for the calls TestSessionCallsRunInOrder
// queues: a function of its own, so that waitingForTurn finds them by
// name.
func queuedCall(ctx context.Context, e *exec.Executor, id, code string) error {
	return sessionCall(ctx, e, id, code)
}

// waitingForTurn counts the goroutines, in this process, that are in a
// call of caller and blocked (in a select or a channel send) in exec's
// session code, a function of package exec or below whose name has
// "ession" in it: the calls that wait for their session's turn. (Should
// exec's session code move or be renamed, this is the place to follow
// it.)
func waitingForTurn(caller string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		if !strings.HasPrefix(lines[0], "goroutine ") || !(strings.Contains(lines[0], " [select") || strings.Contains(lines[0], " [chan send")) {
			continue
		}
		// The function that blocks is the first frame outside the runtime;
		// function lines alternate with file lines, which start with a tab.
		var blocker string
		inCaller := false
		for _, l := range lines[1:] {
			if l == "" || strings.HasPrefix(l, "\t") {
				continue
			}
			if blocker == "" && !strings.HasPrefix(l, "runtime.") {
				blocker = l
			}
			if strings.Contains(l, caller+"(") {
				inCaller = true
			}
		}
		if inCaller && strings.HasPrefix(blocker, "code-sandbox-mcp/exec") && strings.Contains(blocker, "ession") {
			count++
		}
	}
	return count
}

// A cell that runs past its timeout is interrupted and the session keeps
// its state; one that ignores the interrupt ends the session.
func TestSessionTimeoutInterrupts(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	both(t, func(t *testing.T, lang string) {
		s := newSession(t, e, lang)
		set, spin, get, deaf := "kept = 5", "import time\nwhile True: time.sleep(0.01)", "kept", `
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True: pass`
		if lang == "javascript" {
			set, spin, get, deaf = "var kept = 5", "while (true) {}", "kept", "setTimeout(() => { while (true) {} }, 0); await new Promise(r => setTimeout(r, 60000))"
		}
		cell(t, e, lang, s.ID, set)
		start := time.Now()
		res, err := cellErr(testContext(t), e, lang, s.ID, spin, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || !res.Session.Interrupted || res.Session.Ended != "" || time.Since(start) > 4*time.Second {
			t.Fatalf("spin: timed out %v, session %+v, took %s; want interrupted at 1s and the session alive", res.TimedOut, res.Session, time.Since(start))
		}
		wantOut(t, cell(t, e, lang, s.ID, get), "5\n")
		res, err = cellErr(testContext(t), e, lang, s.ID, deaf, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.Session.Ended == "" || !strings.Contains(res.Session.Ended, "did not stop") {
			t.Fatalf("deaf: timed out %v, session %+v; want the session ended for ignoring the interrupt", res.TimedOut, res.Session)
		}
		_, err = cellErr(testContext(t), e, lang, s.ID, get, 0)
		var no *exec.NoSessionError
		if !errors.As(err, &no) || !strings.Contains(no.Ended, "did not stop") {
			t.Fatalf("a call after the end: %v; want NoSessionError saying why it ended", err)
		}
	})
}

// An interpreter killed for its memory ends its session, and says so.
func TestSessionOOMEndsIt(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	res, err := cellErr(testContext(t), e, "python", s.ID, "b = []\nwhile True: b.append(bytearray(16 << 20))", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.Session.Ended == "" || !strings.Contains(res.Session.Ended, "out of memory") {
		t.Fatalf("oom: %+v session %+v; want oom_killed and the session ended", res, res.Session)
	}
	if len(e.Sessions("local")) != 0 {
		t.Errorf("the session is still listed")
	}
}

// A crash or an exit of the interpreter ends the session; sys.exit does
// not, in Python, as in a notebook; process.exit does, in Node.js, as in
// its REPL.
func TestSessionExitAndCrash(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	cell(t, e, "python", s.ID, "v = 1")
	res := cell(t, e, "python", s.ID, "import sys; sys.exit(3)")
	if res.ExitCode != 3 || res.Session.Ended != "" {
		t.Fatalf("sys.exit(3): exit %d session %+v; want 3 and the session alive", res.ExitCode, res.Session)
	}
	wantOut(t, cell(t, e, "python", s.ID, "v"), "1\n")
	res = cell(t, e, "python", s.ID, "import os; os._exit(4)")
	if res.ExitCode != 4 || !strings.Contains(res.Session.Ended, "exited with status 4") {
		t.Fatalf("os._exit(4): exit %d session %+v", res.ExitCode, res.Session)
	}
	// A real fault kills the interpreter, even as its namespace's init.
	s = newSession(t, e, "python")
	res = cell(t, e, "python", s.ID, "import ctypes; ctypes.string_at(0)")
	if res.Signal != "SIGSEGV" || !strings.Contains(res.Session.Ended, "SIGSEGV") {
		t.Fatalf("a segfault: signal %q session %+v; want the session ended by SIGSEGV", res.Signal, res.Session)
	}
	j := newSession(t, e, "javascript")
	cell(t, e, "javascript", j.ID, "var v = 1")
	res = cell(t, e, "javascript", j.ID, "process.exit(5)")
	if res.ExitCode != 5 || !strings.Contains(res.Session.Ended, "exited with status 5") {
		t.Fatalf("process.exit(5): exit %d session %+v", res.ExitCode, res.Session)
	}
}

// A call cancelled while it waits for its turn runs nothing; one
// cancelled while its cell runs interrupts the cell, and the session
// lives on.
func TestSessionCancellation(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	s := newSession(t, e, "python")
	cell(t, e, "python", s.ID, "import time\nn = 0")
	ctx, cancel := context.WithCancel(testContext(t))
	first := make(chan error, 1)
	// The cell says it runs with a file in its /tmp.
	mk := marker(t)
	go func() {
		_, err := cellErr(ctx, e, "python", s.ID, fmt.Sprintf("n += 1\nopen('/tmp/%s', 'w').close()\ntime.sleep(30)", mk), 0)
		first <- err
	}()
	if !waitFor(30*time.Second, func() bool { return len(first) > 0 || sandboxTmpFile(mk) != "" }) {
		t.Fatal("the first cell never ran")
	}
	waitCtx, stopWaiting := context.WithTimeout(testContext(t), 300*time.Millisecond)
	defer stopWaiting()
	if _, err := cellErr(waitCtx, e, "python", s.ID, "n += 100", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call waiting for its turn: %v; want its deadline", err)
	}
	start := time.Now()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled cell: %v; want cancelled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the cancelled cell returned after %s", d)
	}
	wantOut(t, cell(t, e, "python", s.ID, "n"), "1\n")
}

// An idle session ends at its idle timeout, any session at its maximum
// lifetime, busy or not; close is idempotent, and an unknown or another
// owner's id runs nothing.
func TestSessionLifetime(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, 2*time.Second, 5*time.Second))
	idle, err := e.CreateSession(testContext(t), "local", "python", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Idle from when it was ready, not from when its creation began.
	if !idle.LastUsed.After(idle.Created) || idle.ExpiresAt.After(idle.LastUsed.Add(time.Second)) {
		t.Errorf("session info %+v; want it idle from when it was ready, for 1s", idle)
	}
	// Idle for 4s (up to its lifetime of 5s): the checks of the other
	// leave it time on a busy host.
	busy, err := e.CreateSession(testContext(t), "local", "javascript", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Past its idle timeout, a call finds the session ended, whether its
	// timer has fired yet or not. Not synchronisation: the idle time
	// passing is what is tested, so the test waits it out, to half a
	// second past the expiry the session gave.
	time.Sleep(time.Until(idle.ExpiresAt.Add(500 * time.Millisecond)))
	_, err = cellErr(testContext(t), e, "python", idle.ID, "1", 0)
	var no *exec.NoSessionError
	if !errors.As(err, &no) || !strings.Contains(no.Ended, "idle") {
		t.Fatalf("after its idle timeout: %v; want NoSessionError saying it was idle", err)
	}
	// Kept busy, the other reaches its lifetime within a cell. Not
	// synchronisation either: its lifetime passing is what is tested,
	// with a cell every half second so that it is never idle for long.
	for time.Since(busy.Created) < 3500*time.Millisecond {
		cell(t, e, "javascript", busy.ID, "1")
		time.Sleep(500 * time.Millisecond)
	}
	_, err = cellErr(testContext(t), e, "javascript", busy.ID, "await new Promise(r => setTimeout(r, 10000))", 0)
	if !errors.As(err, &no) || !strings.Contains(no.Ended, "maximum lifetime") {
		t.Fatalf("past its lifetime: %v; want NoSessionError saying it reached its maximum lifetime", err)
	}
	if took := time.Since(busy.Created); took > 7*time.Second {
		t.Errorf("the session lived %s; max lifetime 5s", took)
	}

	s := newSession(t, e, "python")
	if _, err := cellErr(testContext(t), e, "python", "session-00000000000000000000000000000000", "1", 0); !errors.As(err, &no) || no.Ended != "" {
		t.Errorf("unknown id: %v", err)
	}
	_, err = e.Run(testContext(t), exec.Request{Language: "python", Code: "1", Session: s.ID, Owner: "someone else"})
	if !errors.As(err, &no) || no.Ended != "" || strings.Contains(err.Error(), "ended") {
		t.Errorf("another owner's id: %v; want the same error as an unknown id", err)
	}
	if len(e.Sessions("someone else")) != 0 || e.CloseSession("someone else", s.ID) {
		t.Errorf("another owner sees or closes the session")
	}
	if !e.CloseSession("local", s.ID) || e.CloseSession("local", s.ID) {
		t.Errorf("close: want true once, then false")
	}
	if _, err := cellErr(testContext(t), e, "python", s.ID, "1", 0); !errors.As(err, &no) || !strings.Contains(no.Ended, "closed") {
		t.Errorf("a closed session: %v", err)
	}
}

// max_sessions bounds the open sessions, with an error that says what to
// do; sessions are listed with their memory in use; a language without a
// driver has none.
func TestSessionLimitAndList(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) {
		sessionConfig(2, time.Minute, time.Hour)(c)
		c.Languages[1].SessionDriver = ""
	})
	a, b := newSession(t, e, "python"), newSession(t, e, "python")
	_, err := e.CreateSession(testContext(t), "local", "python", 0)
	if !errors.Is(err, exec.ErrTooManySessions) || !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "max_sessions") {
		t.Fatalf("a third session: %v; want ErrTooManySessions naming max_sessions", err)
	}
	list := e.Sessions("local")
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
		t.Fatalf("Sessions: %+v", list)
	}
	for _, s := range list {
		if s.MemoryBytes <= 0 || s.MemoryBytes > testLimits().MemoryBytes {
			t.Errorf("session %s memory %d", s.ID, s.MemoryBytes)
		}
	}
	e.CloseSession("local", a.ID)
	newSession(t, e, "python")
	if _, err := e.CreateSession(testContext(t), "local", "javascript", 0); !errors.Is(err, exec.ErrNoSessions) {
		t.Errorf("a language without a driver: %v; want ErrNoSessions", err)
	}
}

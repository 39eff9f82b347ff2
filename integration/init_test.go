package integration

// The sandbox's init (issue 26): pid 1 of every sandbox, one-shot (warm,
// cold from the pool, created on demand) and in sessions, is an init
// that runs the program as its child, reaps every orphan, passes on the
// signals the server sends, and exits with the program's status, or
// 128+N when signal N killed it. Programs behave as on a host: their
// background children are reaped, the signals they send themselves kill
// them, and whatever they leave running dies with the sandbox. The
// warm-versus-cold tables (warm_programs_test.go) have rows for the same.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	sandboxoci "code-sandbox-mcp/oci"
)

// initKinds are the kinds of one-shot sandbox, as the suffixes of the
// languages of initLanguages: warm from the pool, cold from the pool
// (waiting in the stub), and created on demand for the program.
var initKinds = []struct{ name, suffix string }{
	{"warm", ""}, {"cold", "-cold"}, {"on demand", "-ondemand"},
}

// initLanguages are warmLanguages and, for each test language, a twin
// with no pool, whose sandboxes are created on demand.
func initLanguages() []config.Language {
	langs := warmLanguages()
	for _, l := range testLanguages() {
		l.Name, l.Pool = l.Name+"-ondemand", 0
		langs = append(langs, l)
	}
	return langs
}

// eachKind runs req, a program of lang, in each kind of one-shot sandbox
// (initKinds) on e, an executor of initLanguages, as subtests, and hands
// check each result. A run from a pool first waits for that pool to be
// full, so that it runs in the kind of sandbox it says; the warm run
// must say it was warm, the others that they were not.
func eachKind(t *testing.T, e *exec.Executor, lang string, req exec.Request, check func(t *testing.T, res *exec.Result)) {
	t.Helper()
	for _, k := range initKinds {
		t.Run(k.name, func(t *testing.T) {
			req.Language = lang + k.suffix
			if k.suffix != "-ondemand" && !waitFor(90*time.Second, func() bool { return e.PoolSizes()[req.Language] == 2 }) {
				t.Fatalf("the %s pool did not fill within 90 s: %v", req.Language, e.PoolSizes())
			}
			res, err := e.Run(testContext(t), req)
			if err != nil {
				t.Fatalf("Run(%s): %v", req.Language, err)
			}
			if warm := k.suffix == ""; res.Warm != warm {
				t.Fatalf("a %s run: warm %v; want %v", k.name, res.Warm, warm)
			}
			check(t, res)
		})
	}
}

// wantEnding is what ending says of a run killed by signal sig with
// status, or, with sig "", of one that exited with status.
func wantEnding(sig string, status int) string {
	if sig != "" {
		return fmt.Sprintf("%s %d", sig, status)
	}
	return fmt.Sprintf("exit %d", status)
}

// orphans are programs that start 300 shells that each leave a
// background child to pid 1 and exit at once, then print "done": the
// zombies of those children, unreaped, would exhaust a pids limit below
// 300. Each fails as soon as a shell or its child cannot be started.
var orphans = []struct{ lang, code string }{
	{"python", `import os
for i in range(300):
    if os.system("true & exit 0") != 0:
        raise SystemExit(f"child {i} failed")
print("done")`},
	{"javascript", `const cp = require("child_process")
for (let i = 0; i < 300; i++) cp.execSync("true & exit 0")
console.log("done")`},
}

// requirePidsBelow300 fails t unless every test language's pids limit
// is below 300: else 300 unreaped zombies would fit, and the orphans
// tests would prove nothing.
func requirePidsBelow300(t *testing.T) {
	t.Helper()
	for _, l := range initLanguages() {
		if l.Limits.Pids >= 300 {
			t.Fatalf("language %s: pids limit %d; want it below 300, or the test proves nothing", l.Name, l.Limits.Pids)
		}
	}
}

// 300 background children that exit at once run to the end in every
// kind of one-shot sandbox, in both languages: the init reaps them, so
// that their zombies never reach the pids limit.
func TestInitReapsOrphans(t *testing.T) {
	requirePidsBelow300(t)
	e := newExecutor(t, func(c *exec.Config) { c.Languages = initLanguages() })
	for _, p := range orphans {
		t.Run(p.lang, func(t *testing.T) {
			eachKind(t, e, p.lang, exec.Request{Code: p.code}, func(t *testing.T, res *exec.Result) {
				if string(res.Stdout) != "done\n" || len(res.Stderr) != 0 || ending(res) != "exit 0" {
					t.Errorf("stdout %q, stderr %s, ended %s; want done, nothing, exit 0", res.Stdout, short(res.Stderr), ending(res))
				}
			})
		})
	}
}

// selfEnds are programs that print "before" and then end themselves:
// with a signal they send themselves, which must kill them (on a host
// it does; to a pid 1 the kernel drops it), or with an exit status of
// their own that is a signal's 128+N, which is no signal.
var selfEnds = []struct {
	name, lang, code string
	// signal is the signal the run must name ("" for none); status its
	// exit status.
	signal string
	status int
	// session is what the end of a session says after the program ran
	// as its cell; "" if the session lives on.
	session string
}{
	{"SIGTERM", "python", pySelfEnd("os.kill(os.getpid(), signal.SIGTERM)"), "SIGTERM", 143, "killed by SIGTERM"},
	{"SIGVTALRM", "python", pySelfEnd("os.kill(os.getpid(), signal.SIGVTALRM)"), "SIGVTALRM", 154, "killed by SIGVTALRM"},
	{"SIGKILL", "python", pySelfEnd("os.kill(os.getpid(), signal.SIGKILL)"), "SIGKILL", 137, "killed by SIGKILL"},
	{"abort", "python", pySelfEnd("os.abort()"), "SIGABRT", 134, "killed by SIGABRT"},
	// In a session, as in a notebook, sys.exit ends the cell only.
	{"own exit 137", "python", pySelfEnd("sys.exit(137)"), "", 137, ""},
	{"SIGTERM", "javascript", jsSelfEnd(`process.kill(process.pid, "SIGTERM")`), "SIGTERM", 143, "killed by SIGTERM"},
	{"abort", "javascript", jsSelfEnd("process.abort()"), "SIGABRT", 134, "killed by SIGABRT"},
	{"own exit 137", "javascript", jsSelfEnd("process.exit(137)"), "", 137, "exited with status 137"},
}

// pySelfEnd is a Python program that prints "before", runs end, and
// prints "still here" should it live on.
func pySelfEnd(end string) string {
	return "import os, signal, sys\nprint('before', flush=True)\n" + end + "\nprint('still here')\n"
}

// jsSelfEnd is pySelfEnd in Node.js; "still here" comes a little later,
// as a signal's delivery may.
func jsSelfEnd(end string) string {
	return "console.log('before')\n" + end + "\nsetTimeout(() => console.log('still here'), 100)\n"
}

// A program that sends itself SIGTERM, SIGVTALRM or SIGKILL, or aborts,
// dies of that signal with status 128+N, not timed out nor killed for
// its memory, in every kind of one-shot sandbox; one that exits 137 of
// itself has status 137 and no signal, and the kernel's word on it
// (SignalUnknown unset).
func TestInitSelfSignals(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) { c.Languages = initLanguages() })
	for _, p := range selfEnds {
		t.Run(p.lang+" "+p.name, func(t *testing.T) {
			eachKind(t, e, p.lang, exec.Request{Code: p.code}, func(t *testing.T, res *exec.Result) {
				if want := wantEnding(p.signal, p.status); string(res.Stdout) != "before\n" || ending(res) != want {
					t.Errorf("stdout %q, stderr %s, ended %s; want before, and %s", res.Stdout, short(res.Stderr), ending(res), want)
				}
			})
		})
	}
}

// short quotes b, or its start and end if it is long: a failure's
// message shows a traceback's first and last lines.
func short(b []byte) string {
	if len(b) <= 300 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q...%q", b[:150], b[len(b)-150:])
}

// sleepMarker is an argument of sleep(1) that is 1000 s and a few
// digits, unique on this host: a sleep of the sandbox's can be found
// on the host by its command line, sleep MARKER.
func sleepMarker() string {
	return fmt.Sprintf("1000.%d%06d", os.Getpid(), rand.IntN(1e6))
}

// marked is code with MARKER replaced by marker.
func marked(code, marker string) string { return strings.ReplaceAll(code, "MARKER", marker) }

// pyUp defines up(n) in Python: it returns once n processes of the
// sandbox run "sleep MARKER" (started, not only forked).
const pyUp = `import os, time
def up(n):
    while sum(1 for p in os.listdir("/proc") if p.isdigit() and cmdline(p) == b"sleep\x00MARKER\x00") < n:
        time.sleep(0.01)
def cmdline(p):
    try:
        return open(f"/proc/{p}/cmdline", "rb").read()
    except OSError:
        return b""
`

// jsUp is pyUp in Node.js: up(n, then) calls then once n processes run
// "sleep MARKER".
const jsUp = `const fs = require("fs"), cp = require("child_process")
const cmdline = (p) => { try { return fs.readFileSync("/proc/" + p + "/cmdline", "latin1") } catch { return "" } }
const count = () => fs.readdirSync("/proc").filter((p) => /^[0-9]+$/.test(p) && cmdline(p) === "sleep\x00MARKER\x00").length
const up = (n, then) => { const t = setInterval(() => { if (count() >= n) { clearInterval(t); then() } }, 10) }
`

// daemons are programs that leave a daemon behind: a sleep MARKER of
// 1000 s that writes nothing and holds the program's output open (in
// Python, forked twice, in a session of its own; in Node.js, a detached
// child). Each waits for its sleep to run, prints its uid and exits.
var daemons = []struct{ lang, code string }{
	{"python", pyUp + `if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "MARKER"])
    os._exit(0)
os.wait()
up(1)
print(os.getuid())`},
	{"javascript", jsUp + `cp.spawn("sleep", ["MARKER"], {detached: true, stdio: "inherit"}).unref()
up(1, () => console.log(process.getuid()))`},
}

// A program that leaves a daemon running ends when it exits, in every
// kind of one-shot sandbox, in both languages, and the daemon with it:
// nothing of the sandbox is left (no process of its uid, no sleep of
// its; newExecutor checks containerd and the host as the test ends).
func TestInitDaemonKilledAtTheEnd(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, func(c *exec.Config) { c.Languages = initLanguages() })
	for _, p := range daemons {
		t.Run(p.lang, func(t *testing.T) {
			marker := sleepMarker()
			eachKind(t, e, p.lang, exec.Request{Code: marked(p.code, marker)}, func(t *testing.T, res *exec.Result) {
				if ending(res) != "exit 0" {
					t.Errorf("ended %s, stderr %s; want exit 0", ending(res), short(res.Stderr))
				}
				wantGone(t, res.Stdout, marker)
			})
		})
	}
}

// trees are programs that start children and grandchildren, three
// sleep MARKER in all (two of a shell, one daemonised), then (oneShot)
// print their uid once all three run and sleep on past any timeout;
// or, as a session's cell, print it and end (cell).
var trees = []struct{ lang, start, oneShot, cell string }{
	{"python", pyUp + `import subprocess
subprocess.Popen(["sh", "-c", "sleep MARKER & sleep MARKER & wait"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "MARKER"])
    os._exit(0)
`, "up(3)\nprint(os.getuid(), flush=True)\ntime.sleep(1000)\n", "up(3)\nprint(os.getuid())\n"},
	{"javascript", jsUp + `cp.spawn("sh", ["-c", "sleep MARKER & sleep MARKER & wait"], {stdio: "inherit"})
cp.spawn("sleep", ["MARKER"], {detached: true, stdio: "inherit"}).unref()
`, "up(3, () => { console.log(process.getuid()); setInterval(() => {}, 1000) })\n",
		"await new Promise((r) => up(3, r))\nconsole.log(process.getuid())\n"},
}

// The timeout still kills the whole tree, in every kind of one-shot
// sandbox, in both languages: the run is reported timed out and killed
// (SIGKILL, 137) as before the init, and no process of it is left.
func TestInitTimeoutKillsTheTree(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, func(c *exec.Config) { c.Languages = initLanguages() })
	for _, p := range trees {
		t.Run(p.lang, func(t *testing.T) {
			marker := sleepMarker()
			req := exec.Request{Code: marked(p.start+p.oneShot, marker), Timeout: time.Duration(scaled(3)) * time.Second}
			eachKind(t, e, p.lang, req, func(t *testing.T, res *exec.Result) {
				if ending(res) != "timed out, SIGKILL 137" {
					t.Errorf("ended %s, stderr %s; want timed out, SIGKILL 137", ending(res), short(res.Stderr))
				}
				wantGone(t, res.Stdout, marker)
			})
		})
	}
}

// wantGone fails unless, within 10 s (scaled), no host process runs as
// the uid stdout holds (which the program printed once its processes
// ran) and none runs sleep marker: nothing of the sandbox is left.
func wantGone(t *testing.T, stdout []byte, marker string) {
	t.Helper()
	uid, err := strconv.ParseUint(strings.TrimSpace(string(stdout)), 10, 32)
	if err != nil || !testUIDs.Contains(uint32(uid)) {
		t.Fatalf("stdout %q; want the sandbox's uid, which the program prints once its processes run", stdout)
	}
	var left []string
	if !waitFor(time.Duration(scaled(10))*time.Second, func() bool { left = leftProcesses(uint32(uid), marker); return len(left) == 0 }) {
		t.Errorf("processes of the sandbox (uid %d, or sleep %s) outlived it: %v", uid, marker, left)
	}
}

// leftProcesses lists, as "pid: command line", the host's processes
// that run as uid (zombies included) or run sleep marker.
func leftProcesses(uid uint32, marker string) []string {
	var out []string
	for _, p := range procTable(func(u uint32, name string) bool { return u == uid || name == "sleep" }) {
		if p.uid == uid || p.cmdline == "sleep\x00"+marker+"\x00" {
			out = append(out, fmt.Sprintf("%d: %q", p.pid, p.cmdline))
		}
	}
	return out
}

// hostProcess is a process of the host, as /proc tells it.
type hostProcess struct {
	pid     int
	uid     uint32 // real uid
	cmdline string // NUL-separated, as /proc has it; empty for a zombie
}

// procTable lists the host's processes that want accepts, by real uid
// and name (status's Name: line), those that ended while it read /proc
// left out. It reads the command line of those alone: reading another
// process's memory waits for that process's memory map lock, which a
// program thrashing at its cgroup's memory limit, in the other
// daemon's run, can hold for seconds.
func procTable(want func(uid uint32, name string) bool) []hostProcess {
	var out []hostProcess
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(string(status), "Name:\t"), "\n")
		_, rest, ok := strings.Cut(string(status), "\nUid:\t")
		if !ok {
			continue
		}
		real, _, _ := strings.Cut(rest, "\t")
		uid, err := strconv.ParseUint(real, 10, 32)
		if err != nil || !want(uint32(uid), name) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, hostProcess{pid: pid, uid: uint32(uid), cmdline: string(cmdline)})
	}
	return out
}

// Zombies of a cell's background children are reaped, between cells
// and within them: in a session of either language, a cell of the
// 300 orphans runs to the end, and so does a second one.
func TestInitSessionReapsOrphans(t *testing.T) {
	requirePidsBelow300(t)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	for _, p := range orphans {
		t.Run(p.lang, func(t *testing.T) {
			s := openSession(t, e, p.lang)
			for i := range 2 {
				if res := cell(t, e, p.lang, s.ID, p.code); string(res.Stdout) != "done\n" || res.Failed() || res.Session.Ended != "" {
					t.Fatalf("cell %d: stdout %q, stderr %s, ended %s, session %+v; want done, and the session alive", i+1, res.Stdout, short(res.Stderr), ending(res), res.Session)
				}
			}
		})
	}
}

// In a session, a cell that sends its interpreter a signal kills it:
// the result names the signal and status 128+N, and the session ends
// saying so. A cell's own exit status 137 is no signal.
func TestInitSessionSelfSignals(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	for _, p := range selfEnds {
		t.Run(p.lang+" "+p.name, func(t *testing.T) {
			s := openSession(t, e, p.lang)
			res := cell(t, e, p.lang, s.ID, p.code)
			want := wantEnding(p.signal, p.status)
			if ending(res) != want || res.Session == nil || (p.session == "") != (res.Session.Ended == "") || !strings.Contains(res.Session.Ended, p.session) {
				t.Errorf("ended %s, stderr %s, session %+v; want %s, and the session ended %q (\"\": alive)", ending(res), short(res.Stderr), res.Session, want, p.session)
			}
		})
	}
}

// An interrupt still reaches a running cell that has started background
// children: at its timeout the cell is interrupted, and the session
// lives on with its state, in both languages.
func TestInitSessionInterruptReachesTheCell(t *testing.T) {
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	for _, tc := range []struct{ lang, set, spin string }{
		{"python", "kept = 5", `import os, subprocess, time
subprocess.Popen(["sleep", "1000"])
os.system("sleep 1000 &")
while True: time.sleep(0.01)`},
		{"javascript", "var kept = 5", `require("child_process").spawn("sleep", ["1000"], {stdio: "inherit"})
require("child_process").execSync("sleep 1000 >/dev/null 2>&1 &")
while (true) {}`},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			s := openSession(t, e, tc.lang)
			wantOut(t, cell(t, e, tc.lang, s.ID, tc.set), "")
			start := time.Now()
			res, err := cellErr(testContext(t), e, tc.lang, s.ID, tc.spin, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); !res.TimedOut || !res.Session.Interrupted || res.Session.Ended != "" || took > time.Duration(scaled(4))*time.Second {
				t.Fatalf("ended %s, session %+v, took %s; want interrupted at 1 s and the session alive", ending(res), res.Session, took)
			}
			wantOut(t, cell(t, e, tc.lang, s.ID, "kept"), "5\n")
		})
	}
}

// A session's end kills all that its cells left running: children,
// grandchildren and a daemon a cell started die when the session is
// closed, or when a cell that ignores its interrupt ends it, in both
// languages, and nothing of the sandbox is left.
func TestInitSessionEndKillsTheTree(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, sessionConfig(4, time.Minute, time.Hour))
	deaf := map[string]string{
		"python":     "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
		"javascript": "setTimeout(() => { while (true) {} }, 0); await new Promise(r => setTimeout(r, 60000))",
	}
	for _, p := range trees {
		for _, how := range []string{"closed", "a deaf cell"} {
			t.Run(p.lang+" "+how, func(t *testing.T) {
				marker := sleepMarker()
				s := openSession(t, e, p.lang)
				res := cell(t, e, p.lang, s.ID, marked(p.start+p.cell, marker))
				if res.Failed() {
					t.Fatalf("the cell that starts the tree: ended %s, stderr %s", ending(res), short(res.Stderr))
				}
				if how == "closed" && !e.CloseSession("local", s.ID) {
					t.Fatal("CloseSession: the session was not open")
				}
				if how == "a deaf cell" {
					res, err := cellErr(testContext(t), e, p.lang, s.ID, deaf[p.lang], time.Second)
					if err != nil || !strings.Contains(res.Session.Ended, "did not stop") {
						t.Fatalf("the deaf cell: %v, %+v; want the session ended for ignoring its interrupt", err, res)
					}
				}
				wantGone(t, res.Stdout, marker)
			})
		}
	}
}

// Through the binary's one-shot CLI, a program that signal N kills makes
// `code-sandbox-mcp run` exit 128+N, with the status line on stderr
// naming the signal; a program's own exit 137 makes it exit 137, with no
// status line. Nothing of the run is left.
func TestInitRunSubcommandSignals(t *testing.T) {
	for _, p := range selfEnds {
		t.Run(p.lang+" "+p.name, func(t *testing.T) {
			cmd, stateDir := serverCommand(t, serverSpec{})
			cmd.Args = append(cmd.Args, "run", "--language", p.lang, "--code", p.code)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			status := 0
			var exit *osexec.ExitError
			if err := cmd.Run(); errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatalf("run: %v", err)
			}
			line := statusLine(stderr.String())
			wantLine := p.signal != "" && strings.HasPrefix(line, "code-sandbox-mcp: killed by "+p.signal+"; ") || p.signal == "" && line == ""
			if status != p.status || stdout.String() != "before\n" || !wantLine {
				t.Errorf("exit %d, stdout %q, status line %q; want %d, before, and a status line naming %q (\"\": none)", status, stdout.String(), line, p.status, p.signal)
			}
			assertNoLeftovers(t, stateDir)
		})
	}
}

// statusLine is the line of run's stderr that says how the run ended,
// or "" if there is none.
func statusLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "code-sandbox-mcp: ") {
			return l
		}
	}
	return ""
}

// Over MCP, the structured result of a program that signal N kills names
// the signal, with exit code 128+N, and so does the text; a program's
// own exit 137 is exit code 137 and no signal.
func TestInitSelfSignalsOverMCP(t *testing.T) {
	s := startMCP(t, serverSpec{})
	tools := map[string]string{"python": "run_python_code", "javascript": "run_js_code"}
	for _, p := range selfEnds {
		t.Run(p.lang+" "+p.name, func(t *testing.T) {
			r := s.call(testContext(t), t, tools[p.lang], code(p.code))
			text := "killed by " + p.signal
			if p.signal == "" {
				text = fmt.Sprintf("exit code %d;", p.status)
			}
			if !r.isError || !r.hasOut || r.out.ExitCode != p.status || r.out.Signal != p.signal || r.out.TimedOut || r.out.OOMKilled ||
				r.out.Stdout != "before\n" || !strings.Contains(r.text, text) || p.signal == "" && strings.Contains(r.text, "killed") {
				t.Errorf("text %q, structured %+v; want an error result, exit code %d, signal %q, stdout before, the text saying %q", r.text, r.out, p.status, p.signal, text)
			}
		})
	}
}

// openSession is newSession, closed when the test ends: a session that
// lives on does not count against max_sessions for the next subtest.
func openSession(t *testing.T, e *exec.Executor, lang string) exec.SessionInfo {
	t.Helper()
	s := newSession(t, e, lang)
	t.Cleanup(func() { e.CloseSession("local", s.ID) })
	return s
}

// A run ends with its program, not with its init: the result comes once
// the program has ended and nothing but the init is left in the sandbox,
// with the program's output whole, even while the init cannot run. The
// test stops the init (SIGSTOP from the host) once the program has
// printed its uid; the program waits until its pid 1 is stopped (state
// T), however long the host takes to find it, then prints and exits 3.
// Were the result the init's exit, as it was under tini (which also
// keeps the output's pipes open), the run would end only at its
// timeout. Without pools (SANDBOX_TEST_NO_POOLS, make test-cgroupv2's
// VM) only the sandboxes made on demand run: the path is the same, the
// cgroup's listing v2's.
func TestInitStoppedDoesNotHoldTheResult(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	langs := initLanguages()
	if testNoPools {
		langs = slices.DeleteFunc(langs, func(l config.Language) bool { return l.Pool != 0 })
	}
	e := newExecutor(t, func(c *exec.Config) { c.Languages = langs })
	programs := []struct{ lang, code string }{
		{"python", "import os, sys, time\nprint(os.getuid(), flush=True)\n" +
			"def stopped():\n    return open('/proc/1/stat').read().rsplit(')', 1)[1].split()[0] == 'T'\n" +
			"end = time.monotonic() + 20\nwhile not stopped() and time.monotonic() < end:\n    time.sleep(0.02)\n" +
			"print('done' if stopped() else 'the init was not stopped within 20 s')\nsys.exit(3)\n"},
		{"javascript", "console.log(process.getuid())\nconst fs = require('fs')\n" +
			"const stopped = () => fs.readFileSync('/proc/1/stat', 'utf8').split(') ').pop().split(' ')[0] === 'T'\n" +
			"const end = Date.now() + 20000\n" +
			"const poll = () => {\n  if (!stopped() && Date.now() < end) return setTimeout(poll, 20)\n" +
			"  console.log(stopped() ? 'done' : 'the init was not stopped within 20 s')\n  process.exit(3)\n}\npoll()\n"},
	}
	for _, p := range programs {
		for _, k := range initKinds {
			if testNoPools && k.suffix != "-ondemand" {
				continue
			}
			t.Run(p.lang+"/"+k.name, func(t *testing.T) {
				lang := p.lang + k.suffix
				if k.suffix != "-ondemand" && !waitFor(90*time.Second, func() bool { return e.PoolSizes()[lang] == 2 }) {
					t.Fatalf("the %s pool did not fill within 90 s: %v", lang, e.PoolSizes())
				}
				// The first line is the sandbox's uid: its init is the
				// process of that uid that runs the init's path.
				stopped := make(chan int, 1)
				var once sync.Once
				output := func(stream string, b []byte) {
					if stream != "stdout" {
						return
					}
					once.Do(func() {
						uid, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]), 10, 32)
						if err != nil {
							stopped <- 0
							return
						}
						pid := initOf(uint32(uid))
						if pid != 0 && syscall.Kill(pid, syscall.SIGSTOP) != nil {
							pid = 0
						}
						stopped <- pid
					})
				}
				timeout := time.Duration(scaled(30)) * time.Second
				res, err := e.Run(testContext(t), exec.Request{Language: lang, Code: p.code, Timeout: timeout, Output: output})
				pid := 0
				select {
				case pid = <-stopped:
				default:
				}
				if pid != 0 {
					syscall.Kill(pid, syscall.SIGCONT)
				}
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if pid == 0 {
					t.Fatalf("the sandbox's init was not found and stopped; stdout %q", res.Stdout)
				}
				if got := ending(res); got != "exit 3" || !strings.HasSuffix(string(res.Stdout), "\ndone\n") {
					t.Errorf("with its init stopped: ended %s, stdout %q, stderr %s; want exit 3 and the program's output whole", got, res.Stdout, short(res.Stderr))
				}
			})
		}
	}
}

// initOf is the host pid of the sandbox init that runs as uid, or 0.
func initOf(uid uint32) int {
	for _, p := range procTable(func(u uint32, _ string) bool { return u == uid }) {
		if p.uid == uid && strings.HasPrefix(p.cmdline, sandboxoci.InitPath+"\x00") {
			return p.pid
		}
	}
	return 0
}

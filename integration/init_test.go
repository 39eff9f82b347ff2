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
	"fmt"
	"testing"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
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

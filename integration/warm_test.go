package integration

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// warmCase is one program of the warm-start equivalence tables: it runs
// in a warm ready sandbox and in a cold one, and must do exactly the same
// in both (warmPython and warmNode, in warm_programs_test.go).
type warmCase struct {
	name  string
	code  string
	files []exec.File
	// timeout, if set, is the run's; the default is the test limits'.
	timeout time.Duration
	// want, if set, is the standard output both runs must give: for what
	// the driver, present in both, could get wrong in both alike.
	want string
	// end, if set, is how both runs must end, as ending words it ("exit
	// 0", "SIGTERM 143", "timed out, SIGKILL 137"): for an end both could
	// get wrong alike, such as a signal the sandbox's pid 1 drops, or a
	// run that hangs until its timeout.
	end string
}

// warmLanguages are the languages of the equivalence test: each test
// language warm, with a pool (Python with two ready sandboxes: one that
// imported numpy and pandas, one that did not), and a cold twin, the same
// language as it runs with warm = false: from its pool, in the stub, or
// created on demand once the pool is empty.
func warmLanguages() []config.Language {
	var langs []config.Language
	for _, l := range testLanguages() {
		warm := l
		warm.Warm, warm.Pool = true, 2
		if l.Name == "python" {
			warm.Preload = []string{"numpy", "pandas"}
		}
		cold := l
		cold.Name, cold.Pool = l.Name+"-cold", 2
		langs = append(langs, warm, cold)
	}
	return langs
}

// TestWarmEquivalence runs each program of the tables warm and cold and
// compares what a caller sees: standard output and standard error byte
// for byte, the exit status, the signal, the timeout and OOM flags, and
// the output files. It also checks that the warm run was warm: a warm
// start that fell back would make the comparison trivial.
func TestWarmEquivalence(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) { c.Languages = warmLanguages() })
	for lang, cases := range map[string][]warmCase{"python": warmPython, "javascript": warmNode} {
		t.Run(lang, func(t *testing.T) {
			if len(cases) < 30 {
				t.Errorf("%d programs; want at least 30", len(cases))
			}
			names := map[string]bool{}
			for _, c := range cases {
				if names[c.name] {
					t.Fatalf("two programs called %q", c.name)
				}
				names[c.name] = true
				t.Run(c.name, func(t *testing.T) { compareWarm(t, e, lang, c) })
			}
		})
	}
}

func compareWarm(t *testing.T, e *exec.Executor, lang string, c warmCase) {
	ctx := testContext(t)
	req := exec.Request{Language: lang + "-cold", Code: c.code, Files: c.files, Timeout: c.timeout}
	cold, err := e.Run(ctx, req)
	if err != nil {
		t.Fatalf("cold run: %v", err)
	}
	if cold.Warm {
		t.Fatal("the cold run says it was warm")
	}
	// The pool full again: the sandbox of the kind this program asks for
	// is there, warm.
	if !waitFor(90*time.Second, func() bool { return e.PoolSizes()[lang] == 2 }) {
		t.Fatalf("the %s pool did not fill within 90 s: %v", lang, e.PoolSizes())
	}
	req.Language = lang
	warm, err := e.Run(ctx, req)
	if err != nil {
		t.Fatalf("warm run: %v", err)
	}
	if !warm.Warm {
		t.Fatal("the warm run was not warm: the warm start fell back")
	}
	for _, d := range []struct {
		what       string
		warm, cold any
	}{
		{"exit status", warm.ExitCode, cold.ExitCode},
		{"signal", warm.Signal, cold.Signal},
		{"signal unknown", warm.SignalUnknown, cold.SignalUnknown},
		{"timed out", warm.TimedOut, cold.TimedOut},
		{"OOM killed", warm.OOMKilled, cold.OOMKilled},
		{"stdout bytes dropped", warm.StdoutDropped, cold.StdoutDropped},
		{"stderr bytes dropped", warm.StderrDropped, cold.StderrDropped},
		{"output files", fileSums(warm.Files), fileSums(cold.Files)},
	} {
		if fmt.Sprint(d.warm) != fmt.Sprint(d.cold) {
			t.Errorf("%s: warm %v, cold %v", d.what, d.warm, d.cold)
		}
	}
	if !bytes.Equal(warm.Stdout, cold.Stdout) {
		t.Errorf("stdout differs:\nwarm: %q\ncold: %q", warm.Stdout, cold.Stdout)
	}
	if !bytes.Equal(nodePids.ReplaceAll(warm.Stderr, []byte("(node:PID)")), nodePids.ReplaceAll(cold.Stderr, []byte("(node:PID)"))) {
		t.Errorf("stderr differs:\nwarm: %q\ncold: %q", warm.Stderr, cold.Stderr)
	}
	if c.want != "" && string(cold.Stdout) != c.want {
		t.Errorf("stdout %q; want %q", cold.Stdout, c.want)
	}
	if c.end != "" && ending(cold) != c.end {
		t.Errorf("ended %s; want %s", ending(cold), c.end)
	}
	if t.Failed() {
		return
	}
	t.Logf("same warm and cold: status %d, %d+%d bytes of output", warm.ExitCode, len(warm.Stdout), len(warm.Stderr))
}

// nodePids are the pids Node.js puts in its warnings, "(node:7)": the
// program's pid is the init's child's, which follows however many threads
// the runtime's own init (runc's, in Go) had before it exec'd the init,
// warm or cold alike, so it differs from one sandbox to the next.
var nodePids = regexp.MustCompile(`\(node:[0-9]+\)`)

// ending says how a run ended, in a few words: "timed out" and "out of
// memory" if so, then the signal that killed it and the status
// ("SIGKILL 137"), or the status alone ("exit 1"), then "signal
// unknown" if the status may be a signal's or the program's own.
func ending(r *exec.Result) string {
	var parts []string
	if r.TimedOut {
		parts = append(parts, "timed out")
	}
	if r.OOMKilled {
		parts = append(parts, "out of memory")
	}
	if r.Signal != "" {
		parts = append(parts, fmt.Sprintf("%s %d", r.Signal, r.ExitCode))
	} else {
		parts = append(parts, fmt.Sprintf("exit %d", r.ExitCode))
	}
	if r.SignalUnknown {
		parts = append(parts, "signal unknown")
	}
	return strings.Join(parts, ", ")
}

// fileSums describes output files by path and content, sorted.
func fileSums(files []exec.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, fmt.Sprintf("%s:%x", f.Path, f.Data))
	}
	slices.Sort(out)
	return out
}

// A warm start that fails falls back to the waiting /bin/sh, logged once
// with its reason, and every run still gives the right result: a preload
// that does not import, a preload that writes while it imports (its
// output would be lost to the program), and a language whose command has
// no warm driver.
func TestWarmStartFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lang    func(l *config.Language)
		log     string // in the warning
		program string
		want    string
	}{
		{"a preload that does not import", func(l *config.Language) { l.Preload = []string{"no_such_module_xyz"} },
			`cannot import no_such_module_xyz: ModuleNotFoundError`, `print("ran")`, "ran\n"},
		{"a preload that writes", func(l *config.Language) { l.Preload = []string{"this"} },
			`it wrote before the program ran`, `print("ran")`, "ran\n"},
		{"no driver for the command", func(l *config.Language) {
			l.SessionDriver, l.Command = "", []string{"/bin/sh", "-c", `exec python3 "$0"`}
		}, `starts neither python nor node`, `print("ran")`, "ran\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lang := testLanguage("python")
			lang.Warm, lang.Pool = true, 1
			tc.lang(&lang)
			var log syncBuffer
			e := newExecutor(t, func(c *exec.Config) {
				c.Languages = []config.Language{lang}
				c.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			for i := range 3 {
				// After the first run the pool is full again; the
				// fallback has happened by then.
				if !waitFor(60*time.Second, func() bool { return e.PoolSizes()["python"] == 1 }) {
					t.Fatalf("before run %d: the pool did not fill\nlog:\n%s", i, log.String())
				}
				res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: tc.program})
				if err != nil {
					t.Fatalf("run %d: %v\nlog:\n%s", i, err, log.String())
				}
				if string(res.Stdout) != tc.want || res.ExitCode != 0 || len(res.Stderr) != 0 {
					t.Errorf("run %d: stdout %q, stderr %q, exit %d; want %q, nothing, 0", i, res.Stdout, res.Stderr, res.ExitCode, tc.want)
				}
				if res.Warm {
					t.Errorf("run %d was warm; want the fallback", i)
				}
			}
			if n := strings.Count(log.String(), "warm interpreters are off"); n != 1 || !strings.Contains(log.String(), tc.log) {
				t.Errorf("log: %d warnings that warm interpreters are off; want 1, saying %q\nlog:\n%s", n, tc.log, log.String())
			}
		})
	}
}

// A program that names a preloaded module runs where the preloads were
// imported, any other where they were not: the equivalence tables cannot
// show it (which modules are loaded is the one thing a program may see
// differ), so the programs here look.
func TestWarmKinds(t *testing.T) {
	lang := testLanguage("python")
	lang.Warm, lang.Pool, lang.Preload = true, 2, []string{"numpy", "pandas"}
	e := newExecutor(t, func(c *exec.Config) { c.Languages = []config.Language{lang} })
	for _, tc := range []struct{ code, want string }{
		// Names numpy, as a word, in a comment.
		{"import sys\nprint(any(m.startswith('pand') for m in sys.modules))  # numpy", "True\n"},
		// Names neither.
		{"import sys\nprint(any(m.startswith('pand') for m in sys.modules))", "False\n"},
	} {
		if !waitFor(90*time.Second, func() bool { return e.PoolSizes()["python"] == 2 }) {
			t.Fatalf("the pool did not fill within 90 s: %v", e.PoolSizes())
		}
		res := run(t, e, "python", tc.code)
		if !res.Warm || string(res.Stdout) != tc.want {
			t.Errorf("%q: warm %v, stdout %q, stderr %q; want warm, %q", tc.code, res.Warm, res.Stdout, res.Stderr, tc.want)
		}
	}
}

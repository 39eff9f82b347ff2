package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// testLimits are the limits of the tests' executors: the product's
// defaults, with a shorter timeout.
func testLimits() config.Limits {
	l, _ := config.Default().Language("python")
	lim := l.Limits
	lim.Timeout, lim.MaxTimeout = 20*time.Second, 60*time.Second
	return lim
}

// testLanguages are the tests' languages, on the runtime of the knobs
// (SANDBOX_TEST_RUNTIME_BINARY, SANDBOX_TEST_CGROUP_DRIVER).
func testLanguages() []config.Language {
	return withTestRuntime([]config.Language{
		{
			Name:          "python",
			Image:         pythonImage,
			Command:       []string{"python3"},
			File:          "main.py",
			Env:           []string{"PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "PYTHONDONTWRITEBYTECODE=1"},
			Figures:       true,
			SessionDriver: "python",
			Limits:        testLimits(),
		},
		{
			Name:          "javascript",
			Image:         nodejsImage,
			Command:       []string{"node"},
			File:          "main.js",
			SessionDriver: "node",
			Limits:        testLimits(),
		},
	})
}

// testLanguage returns the test language called name.
func testLanguage(name string) config.Language {
	langs := testLanguages()
	return langs[slices.IndexFunc(langs, func(l config.Language) bool { return l.Name == name })]
}

// waitRunning waits up to d for a sandbox's program to run, and reports
// whether one did. It may be called from any goroutine.
func waitRunning(t *testing.T, d time.Duration) bool {
	return waitFor(d, func() bool {
		ts, err := sandboxTasks(testContext(t))
		return err == nil && len(ts.running) > 0
	})
}

func run(t *testing.T, e *exec.Executor, lang, code string) *exec.Result {
	t.Helper()
	res, err := e.Run(testContext(t), exec.Request{Language: lang, Code: code})
	if err != nil {
		t.Fatalf("Run(%s): %v", lang, err)
	}
	return res
}

// both runs f once for each language, as subtests.
func both(t *testing.T, f func(t *testing.T, lang string)) {
	for _, lang := range []string{"python", "javascript"} {
		t.Run(lang, func(t *testing.T) { f(t, lang) })
	}
}

// bothAtOnce is both with the two subtests run in parallel, for a test
// whose runs mostly wait for their deadlines. It must be the test's last
// statement: the subtests run once the test's body has returned, and
// its cleanups (an executor's Close, the checks of what is left) after
// them. Under software emulation (SANDBOX_TEST_TIME_SCALE > 1) they run
// one after the other, as both's do: in make test-cgroupv2's VM, on a
// slow host, python's two spinning processes beside Node.js's cold start
// kept node from spawning its child within the 12 s deadline
// (TestTimeoutKillsTheWholeProcessTree, crun and containerd 2.x,
// 2026-12-07).
func bothAtOnce(t *testing.T, f func(t *testing.T, lang string)) {
	for _, lang := range []string{"python", "javascript"} {
		t.Run(lang, func(t *testing.T) {
			if testTimeScale == 1 {
				t.Parallel()
			}
			f(t, lang)
		})
	}
}

// program picks a language's version of a program.
func program(lang, python, javascript string) string {
	if lang == "python" {
		return python
	}
	return javascript
}

func TestStreamsAndExitCodes(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, nil)
	both(t, func(t *testing.T, lang string) {
		tests := []struct {
			name       string
			code       string
			wantOut    string
			wantErr    string // a substring of stderr
			wantStatus int
		}{
			{
				name: "both streams",
				code: program(lang,
					"import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n",
					"console.log('to stdout'); console.error('to stderr');\n"),
				wantOut: "to stdout\n", wantErr: "to stderr\n",
			},
			{
				name:    "exit code",
				code:    program(lang, "import sys\nprint('bye')\nsys.exit(7)\n", "console.log('bye'); process.exit(7);\n"),
				wantOut: "bye\n", wantStatus: 7,
			},
			{
				name:       "exception",
				code:       program(lang, "raise ValueError('boom')\n", "throw new Error('boom');\n"),
				wantErr:    "boom",
				wantStatus: 1,
			},
			{
				name:    "unicode",
				code:    program(lang, "print('héllo wörld · 世界 · 🎉')\n", "console.log('héllo wörld · 世界 · 🎉');\n"),
				wantOut: "héllo wörld · 世界 · 🎉\n",
			},
			{
				name: "stdin is at end of file",
				code: program(lang,
					"try:\n    input()\nexcept EOFError:\n    print('eof')\n",
					"const d = require('fs').readFileSync(0); console.log(d.length === 0 ? 'eof' : 'data');\n"),
				wantOut: "eof\n",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := run(t, e, lang, tt.code)
				if string(res.Stdout) != tt.wantOut {
					t.Errorf("stdout: got %q; want %q", res.Stdout, tt.wantOut)
				}
				if !strings.Contains(string(res.Stderr), tt.wantErr) {
					t.Errorf("stderr: got %q; want it to contain %q", res.Stderr, tt.wantErr)
				}
				if tt.wantErr == "" && len(res.Stderr) > 0 {
					t.Errorf("stderr: got %q; want empty", res.Stderr)
				}
				if res.ExitCode != tt.wantStatus || res.TimedOut || res.OOMKilled || res.Signal != "" {
					t.Errorf("status: got exit %d signal %q timed out %v oom %v; want exit %d only",
						res.ExitCode, res.Signal, res.TimedOut, res.OOMKilled, tt.wantStatus)
				}
				if want := testLanguage(lang).Image; res.Language != lang || res.Image != want {
					t.Errorf("got language %q image %q; want %q %q", res.Language, res.Image, lang, want)
				}
			})
		}
	})
}

func TestLargeProgram(t *testing.T) {
	e := newExecutor(t, nil)
	both(t, func(t *testing.T, lang string) {
		// About 400 KiB of code: one assignment a line, then their sum.
		var b strings.Builder
		const n = 30000
		for i := range n {
			fmt.Fprintf(&b, program(lang, "v%05d = %d\n", "var v%05d = %d;\n"), i, i)
		}
		b.WriteString(program(lang,
			"print(sum(globals()[f'v{i:05d}'] for i in range(30000)))\n",
			"let s = 0; for (let i = 0; i < 30000; i++) s += globalThis['v' + String(i).padStart(5, '0')] ?? eval('v' + String(i).padStart(5, '0')); console.log(s);\n"))
		if b.Len() < 300<<10 {
			t.Fatalf("program is %d bytes; want hundreds of KiB", b.Len())
		}
		res := run(t, e, lang, b.String())
		want := strconv.Itoa(n*(n-1)/2) + "\n"
		if string(res.Stdout) != want || res.ExitCode != 0 {
			t.Errorf("got stdout %q stderr %q exit %d; want %q exit 0", res.Stdout, res.Stderr, res.ExitCode, want)
		}
	})
}

func TestProgramOverSizeCapIsRefused(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Limits.CodeBytes = 1000
		}
	})
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: strings.Repeat("#", 1001)})
	if !errdefs.IsInvalidArgument(err) || res != nil {
		t.Fatalf("got %v, %v; want an invalid-argument error and no result", res, err)
	}
	if !strings.Contains(err.Error(), "1001") || !strings.Contains(err.Error(), "1000") {
		t.Errorf("error %q does not say the size and the limit", err)
	}
}

func TestBadRequests(t *testing.T) {
	e := newExecutor(t, nil)
	for name, req := range map[string]exec.Request{
		"unknown language": {Language: "cobol", Code: "x"},
		// Over max_task_timeout (1 h by default), the longest a run may
		// ask for; what a plain MCP call may ask is the MCP server's to
		// check (mcpserver.TestTaskTimeoutCap).
		"timeout over maximum": {Language: "python", Code: "pass", Timeout: 2 * time.Hour},
		"negative timeout":     {Language: "python", Code: "pass", Timeout: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := e.Run(testContext(t), req)
			if !errdefs.IsInvalidArgument(err) || res != nil {
				t.Errorf("got %v, %v; want an invalid-argument error", res, err)
			}
		})
	}
}

// hostProcesses returns the pids of host processes whose command line
// contains marker.
func hostProcesses(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestTimeoutKillsTheWholeProcessTree(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, nil)
	bothAtOnce(t, func(t *testing.T, lang string) {
		// Of this run alone: another run's test may be at the same point.
		marker := fmt.Sprintf("%d%d", map[string]int{"python": 1, "javascript": 2}[lang], 10000000+os.Getpid())
		code := program(lang, `
import os, subprocess, sys
subprocess.Popen(["sleep", "`+marker+`"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    while True: pass
print("started", flush=True)
print("to stderr", file=sys.stderr, flush=True)
while True: pass
`, `
const { spawn } = require('child_process');
spawn('sleep', ['`+marker+`'], { detached: true, stdio: 'ignore' }).unref();
console.log('started');
console.error('to stderr');
for (;;) {}
`)
		seen := make(chan []int, 1)
		go func() {
			// While the run lives, its sleep is a host process.
			for deadline := time.Now().Add(time.Duration(scaled(10)) * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if p := hostProcesses("sleep\x00" + marker); len(p) > 0 {
					seen <- p
					return
				}
			}
			seen <- nil
		}()
		start := time.Now()
		timeout := time.Duration(scaled(3)) * time.Second
		res, err := e.Run(testContext(t), exec.Request{Language: lang, Code: code, Timeout: timeout})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		took := time.Since(start)
		if pids := <-seen; len(pids) == 0 {
			t.Fatal("never saw the sandbox's child process on the host; the test proves nothing")
		}
		if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != 137 {
			t.Errorf("got timed out %v signal %q exit %d; want true SIGKILL 137", res.TimedOut, res.Signal, res.ExitCode)
		}
		if res.OOMKilled {
			t.Error("got oom_killed; want false")
		}
		if string(res.Stdout) != "started\n" || string(res.Stderr) != "to stderr\n" {
			t.Errorf("got stdout %q stderr %q; want what was printed before the kill", res.Stdout, res.Stderr)
		}
		// The slack covers the sandbox's creation too, which takes seconds
		// where deadlines are scaled (6 s under the systemd driver in the
		// VM).
		if took > timeout+time.Duration(scaled(5))*time.Second {
			t.Errorf("run took %s; want the kill soon after the %s timeout", took, timeout)
		}
		if p := hostProcesses("sleep\x00" + marker); len(p) > 0 {
			t.Errorf("processes %v of the sandbox outlived it", p)
		}
	})
}

func TestOOMIsReported(t *testing.T) {
	onBothDaemons(t, daemonEvents)
	e := newExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Limits.MemoryBytes = 128 << 20
		}
	})
	both(t, func(t *testing.T, lang string) {
		code := program(lang, `
chunks = []
print("allocating", flush=True)
while True:
    chunks.append(bytearray(16 << 20))
`, `
const chunks = [];
console.log('allocating');
for (;;) chunks.push(Buffer.alloc(16 << 20, 1));
`)
		res := run(t, e, lang, code)
		if !res.OOMKilled || res.Signal != "SIGKILL" || res.TimedOut {
			t.Errorf("got oom %v signal %q timed out %v, stderr %q; want an OOM kill", res.OOMKilled, res.Signal, res.TimedOut, res.Stderr)
		}
		if string(res.Stdout) != "allocating\n" {
			t.Errorf("stdout: got %q; want %q", res.Stdout, "allocating\n")
		}
	})
}

func TestOutputIsTruncatedAndMemoryBounded(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	e := newExecutor(t, nil)
	const max = 64 << 10
	both(t, func(t *testing.T, lang string) {
		// 48 MiB to each stream, in lines that say where they are.
		code := program(lang, `
import sys
line = "x" * 1000
for i in range(50000):
    sys.stdout.write("out %06d %s\n" % (i, line))
    sys.stderr.write("err %06d %s\n" % (i, line))
`, `
const line = 'x'.repeat(1000);
const pad = (i) => String(i).padStart(6, '0');
let out = '', err = '';
for (let i = 0; i < 50000; i++) {
  out += 'out ' + pad(i) + ' ' + line + '\n';
  err += 'err ' + pad(i) + ' ' + line + '\n';
  if (out.length > (1 << 20)) { require('fs').writeSync(1, out); require('fs').writeSync(2, err); out = ''; err = ''; }
}
require('fs').writeSync(1, out); require('fs').writeSync(2, err);
`)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		res := run(t, e, lang, code)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)

		const lineLen = 4 + 6 + 1 + 1000 + 1
		total := int64(50000 * lineLen)
		for _, s := range []struct {
			name    string
			kept    []byte
			dropped int64
		}{{"out", res.Stdout, res.StdoutDropped}, {"err", res.Stderr, res.StderrDropped}} {
			if len(s.kept) != max || s.dropped != total-max {
				t.Errorf("%s: kept %d dropped %d; want %d and %d", s.name, len(s.kept), s.dropped, max, total-max)
			}
			if !strings.HasPrefix(string(s.kept), s.name+" 000000 x") {
				t.Errorf("%s: head %q; want the first line", s.name, s.kept[:min(20, len(s.kept))])
			}
			if !strings.HasSuffix(string(s.kept), "x\n") || !strings.Contains(string(s.kept[len(s.kept)-lineLen:]), s.name+" 049999 ") {
				t.Errorf("%s: tail does not end with the last line", s.name)
			}
		}
		if res.ExitCode != 0 {
			t.Errorf("exit code %d; want 0", res.ExitCode)
		}
		// About 96 MiB went through the server: its heap must not have
		// grown by more than a small multiple of what it keeps.
		if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
			t.Errorf("heap in use grew by %d MiB during the run; want bounded output buffers", grew>>20)
		}
		if after.TotalAlloc-before.TotalAlloc > 32<<20 {
			t.Errorf("allocated %d MiB during the run; want the output streamed, not accumulated", (after.TotalAlloc-before.TotalAlloc)>>20)
		}
	})
}

func TestEnvironmentIsOnlyWhatIsAllowed(t *testing.T) {
	t.Setenv("HOST_SECRET", "must-not-leak")
	e := newExecutor(t, func(c *exec.Config) {
		c.PassEnv = []string{"API_KEY=passed-through"}
	})
	both(t, func(t *testing.T, lang string) {
		res := run(t, e, lang, program(lang,
			"import os\nfor k in sorted(os.environ): print(k + '=' + os.environ[k])\n",
			"for (const k of Object.keys(process.env).sort()) console.log(k + '=' + process.env[k]);\n"))
		got := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		want := map[string][]string{
			"python": {
				"API_KEY=passed-through", "HOME=/tmp", "LANG=C.UTF-8", "MPLBACKEND=Agg",
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=/opt/code-sandbox-mcp/python", "PYTHONUNBUFFERED=1",
			},
			"javascript": {
				"API_KEY=passed-through", "HOME=/tmp", "LANG=C.UTF-8",
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			},
		}[lang]
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("environment:\ngot  %q\nwant %q", got, want)
		}
		if strings.Contains(string(res.Stdout), "must-not-leak") {
			t.Error("a host variable reached the sandbox")
		}
	})
}

func TestCancelKillsAndCleansUp(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	both(t, func(t *testing.T, lang string) {
		e := newExecutor(t, nil)
		ctx, cancel := context.WithCancel(testContext(t))
		// Cancel once the program runs (its interpreter, not the stub or
		// runc's init, is the task's process), and say which sandbox it
		// ran in; nil if none ran in time, which the test must not pass.
		ran := make(chan []string, 1)
		go func() {
			defer cancel()
			var ts taskSet
			if waitFor(15*time.Second, func() bool {
				var err error
				ts, err = sandboxTasks(ctx)
				return err == nil && len(ts.running) > 0
			}) {
				ran <- ts.running
				return
			}
			ran <- nil
		}()
		start := time.Now()
		res, err := e.Run(ctx, exec.Request{Language: lang, Code: program(lang, "import time\ntime.sleep(60)\n", "setTimeout(() => {}, 60000);\n")})
		took := time.Since(start)
		running := <-ran
		if running == nil {
			t.Fatalf("the program never ran within 15s (Run returned %v, %v); the cancellation was not tested", res, err)
		}
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("got %v, %v; want context.Canceled", res, err)
		}
		if took > 20*time.Second {
			t.Errorf("cancelled run took %s; want it killed promptly", took)
		}
		// The run deletes its sandbox itself, before Close: newExecutor's
		// cleanup then closes the executor and checks that nothing is left.
		if !waitFor(15*time.Second, func() bool { return gone(t, running) }) {
			t.Errorf("sandbox %v still exists 15s after the cancelled run returned; want it deleted", running)
		}
	})
}

func TestSandboxErrorsAreActionableAndLeaveNothing(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	langs := testLanguages()
	missing := langs[0]
	missing.Name = "missing"
	missing.Image = "localhost/code-sandbox-mcp/not-there:1"
	broken := langs[0]
	broken.Name = "broken"
	broken.Command = []string{"/no/such/interpreter"}
	langs = append(langs, missing, broken)

	stateDir := newStateDir(t)
	ctx := testContext(t)
	e, err := exec.New(ctx, exec.Config{Address: testAddress, Namespace: testNamespace, StateDir: stateDir, UIDs: testUIDs, UIDLockDir: testUIDLockDir(), Init: testInit, Languages: langs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertNoLeftovers(t, stateDir) })
	t.Cleanup(func() { e.Close() })

	err = e.Prepare(ctx)
	if !errdefs.IsNotFound(err) {
		t.Fatalf("Prepare: got %v; want not-found for the missing image", err)
	}
	for _, want := range []string{missing.Image, testNamespace, "pulling is off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Prepare error %q does not mention %q", err, want)
		}
	}
	if _, err := e.Run(ctx, exec.Request{Language: "missing", Code: "print(1)"}); !errdefs.IsNotFound(err) {
		t.Errorf("Run with missing image: got %v; want not-found", err)
	}
	_, err = e.Run(ctx, exec.Request{Language: "broken", Code: "print(1)"})
	if err == nil || !strings.Contains(err.Error(), "/no/such/interpreter") {
		t.Errorf("Run with a missing interpreter: got %v; want an error naming it", err)
	}
	// The executor still works afterwards.
	if res, err := e.Run(ctx, exec.Request{Language: "python", Code: "print(1)"}); err != nil || string(res.Stdout) != "1\n" {
		t.Errorf("Run after failures: got %v, %v; want stdout 1", res, err)
	}
	// The cleanups registered above close the executor, then check that
	// the failed runs left nothing.
}

func TestConcurrencyIsBoundedAndTheQueueHonoursCancellation(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) { c.Concurrency = 1 })
	ctx := testContext(t)
	hold := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, exec.Request{Language: "python", Code: "import time\ntime.sleep(4)\n"})
		hold <- err
	}()
	// Wait until the first run holds the only slot.
	if !waitRunning(t, 15*time.Second) {
		t.Fatal("first run never started")
	}
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Run(qctx, exec.Request{Language: "python", Code: "print(1)"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued run: got %v; want it to give up with its context", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("queued run gave up after %s; want about 300ms", took)
	}
	if err := <-hold; err != nil {
		t.Errorf("first run: %v", err)
	}
	// Two runs with one slot: they queue and both complete.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			res, err := e.Run(ctx, exec.Request{Language: "javascript", Code: "console.log('ok')"})
			if err == nil && string(res.Stdout) != "ok\n" {
				err = fmt.Errorf("stdout %q", res.Stdout)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("queued run: %v", err)
		}
	}
}

func TestLiveServersLeaveEachOthersRunsAlone(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	a := newExecutor(t, nil)
	b := newExecutor(t, nil)
	ctx := testContext(t)
	done := make(chan *exec.Result, 1)
	go func() {
		res, err := a.Run(ctx, exec.Request{Language: "python", Code: "import time\ntime.sleep(3)\nprint('survived')\n"})
		if err != nil {
			t.Errorf("run of server a: %v", err)
		}
		done <- res
	}()
	if !waitRunning(t, 15*time.Second) {
		t.Fatal("run never started")
	}
	n, err := b.Sweep(ctx)
	if err != nil || n != 0 {
		t.Errorf("server b swept %d, %v; want 0 (a is alive)", n, err)
	}
	if res := <-done; res == nil || string(res.Stdout) != "survived\n" {
		t.Errorf("run of server a: got %+v; want it to finish", res)
	}
	// Close a before b's cleanup checks the namespace: a deletes its
	// sandbox in the background.
	if err := a.Close(); err != nil {
		t.Errorf("close a: %v", err)
	}
}

func TestOrphansOfAKilledServerAreSweptAtTheNextStart(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	stateDir := newStateDir(t)
	// A range of three uids, apart from testUIDs: the crashing server's
	// two sandboxes hold two of them.
	uids := config.UIDRange{First: testUIDs.Last + 10, Last: testUIDs.Last + 12}
	orphans, orphanUIDs := crashWithTwoSandboxes(t, stateDir, uids)
	// A shim containerd lost track of, as containerd 2.x leaves one when
	// its client dies while the shim creates the task (seen when the
	// kill above lands during the pool's next creation): a process named
	// and flagged as the shim of one orphan, which containerd knows
	// nothing of. The sweep must stop it too.
	left := startLeftShim(t, orphans[0])

	// The next server, on the same state directory, uid range and claims
	// directory, sweeps at Prepare.
	ctx := testContext(t)
	langs := testLanguages()
	for i := range langs {
		langs[i].Pool = 0
	}
	e, err := exec.New(ctx, exec.Config{Address: testAddress, Namespace: testNamespace, StateDir: stateDir, UIDs: uids, UIDLockDir: testUIDLockDir(), Init: testInit, Languages: langs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	noOrphanUIDBeforeTheSweep(t, e, uids, orphanUIDs)
	if err := e.Prepare(ctx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	select {
	case err := <-left:
		if err != nil {
			t.Errorf("the shim containerd lost: %v; want it to exit 0, on SIGTERM", err)
		}
	case <-time.After(2 * time.Second):
		// (The sweep waits until it has exited; the reaping of it here
		// may take a moment.)
		t.Errorf("the shim containerd lost still runs 2 s after the sweep")
	}
	assertNoLeftovers(t, stateDir)
	orphanUIDsFreeAfterTheSweep(t, e, uids)
}

// whoami prints the program's uid and gid, then sleeps for %d seconds.
const whoami = "import os, time\nprint(os.getuid(), os.getgid(), flush=True)\ntime.sleep(%d)\n"

// crashWithTwoSandboxes runs testdata/crashserver on stateDir and uids,
// and kills it once one run holds the sandbox it took from the pool and
// the pool has made the next one, started: its process runs as its uid.
// It returns the two orphans it left, and the uids they run as. (A kill
// while the pool's task is being created leaves a container whose uid
// no process holds, which the next server may rightly take before it
// sweeps, and with containerd 2.x a shim, which the left shim of the
// test stands for.)
func crashWithTwoSandboxes(t *testing.T, stateDir string, uids config.UIDRange) ([]string, map[uint32]bool) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crashserver")
	if err := goBuild("", "crashserver", bin, "./testdata/crashserver", nil, nil); err != nil {
		t.Fatalf("build crashserver: %v", err)
	}
	cmd := osexec.Command(bin, testAddress, testNamespace, stateDir, pythonImage, testUIDLockDir(), uids.String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	twoSandboxes := func() bool {
		cs, err := testClient.Containers(ctx)
		return err == nil && len(cs) == 2
	}
	twoStarted := func() bool {
		ts, err := sandboxTasks(ctx)
		return err == nil && twoSandboxes() && len(ts.running) == 1 && len(ts.stub)+len(ts.warm) == 1
	}
	if !waitRunning(t, 30*time.Second) || !waitFor(30*time.Second, twoStarted) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the crashing server never had a running and a ready sandbox")
	}
	// The crash: no cleanup runs.
	cmd.Process.Kill()
	cmd.Wait()
	if !twoSandboxes() {
		t.Fatal("after the crash: want the two orphaned sandboxes")
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 2 {
		t.Fatalf("after the crash: got %d run directories; want the orphans' two", len(entries))
	}

	var ids []string
	orphanUIDs := map[uint32]bool{}
	cs, err := testClient.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		spec, err := c.Spec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID())
		orphanUIDs[spec.Process.User.UID] = true
	}
	if len(orphanUIDs) != 2 {
		t.Fatalf("the orphans run as %v; want two uids of %v", orphanUIDs, uids)
	}
	return ids, orphanUIDs
}

// noOrphanUIDBeforeTheSweep checks that e, a server started on the state
// directory and uids of a crashed one and not yet prepared (so not yet
// swept), gives no new sandbox an orphan's uid: its only free uid is the
// third, and while a run holds it there is none.
func noOrphanUIDBeforeTheSweep(t *testing.T, e *exec.Executor, uids config.UIDRange, orphanUIDs map[uint32]bool) {
	t.Helper()
	ctx := testContext(t)
	held := make(chan *exec.Result, 1)
	go func() {
		res, err := e.Run(ctx, exec.Request{Language: "python", Code: fmt.Sprintf(whoami, 3)})
		if err != nil {
			t.Errorf("run before the sweep: %v", err)
		}
		held <- res
	}()
	// The first run has claimed its uid once its sandbox exists: the
	// claim comes before the container, whose spec names the uid.
	threeSandboxes := func() bool {
		cs, err := testClient.Containers(ctx)
		return err == nil && len(cs) == 3
	}
	if !waitFor(30*time.Second, func() bool { return len(held) > 0 || threeSandboxes() }) {
		t.Fatal("the run before the sweep never had a sandbox")
	}
	if res, err := e.Run(ctx, exec.Request{Language: "python", Code: fmt.Sprintf(whoami, 0)}); !errdefs.IsResourceExhausted(err) {
		t.Errorf("second run before the sweep: got %+v, %v; want no uid free (the orphans hold two of three)", res, err)
	}
	if res := <-held; res != nil {
		var uid, gid uint32
		fmt.Sscan(string(res.Stdout), &uid, &gid)
		if orphanUIDs[uid] || !uids.Contains(uid) || gid != uid {
			t.Errorf("run before the sweep ran as %d:%d; want the third uid of %v, not an orphan's %v", uid, gid, uids, orphanUIDs)
		}
	}
}

// orphanUIDsFreeAfterTheSweep checks that, swept, the orphans' uids are
// free again: three runs at once on e get the three uids.
func orphanUIDsFreeAfterTheSweep(t *testing.T, e *exec.Executor, uids config.UIDRange) {
	t.Helper()
	ctx := testContext(t)
	var wg sync.WaitGroup
	got := make(chan uint32, 3)
	for range 3 {
		wg.Go(func() {
			res, err := e.Run(ctx, exec.Request{Language: "python", Code: fmt.Sprintf(whoami, 2)})
			if err != nil {
				t.Errorf("run after the sweep: %v", err)
				return
			}
			var uid uint32
			fmt.Sscan(string(res.Stdout), &uid)
			got <- uid
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for uid := range got {
		seen[uid] = true
	}
	if len(seen) != 3 {
		t.Errorf("three runs after the sweep ran as %v; want the three uids of %v, each once", seen, uids)
	}
}

// startLeftShim starts testdata/leftshim as the shim of container id in
// the test daemon, and returns what its wait returns. The test's end
// kills it if it still runs.
func startLeftShim(t *testing.T, id string) <-chan error {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "containerd-shim-runc-v2")
	if err := goBuild("", "leftshim", bin, "./testdata/leftshim", nil, nil); err != nil {
		t.Fatalf("build leftshim: %v", err)
	}
	cmd := osexec.Command(bin, "-namespace", testNamespace, "-id", id, "-address", testAddress)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return done
}

func TestPoolSandboxesAreFreshAndRefilled(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	const size = 2
	e := newExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Pool = size
		}
	})
	ctx := testContext(t)
	// waitPooled waits until both pools are full again, and returns the
	// ready sandboxes: each must be started ahead, its process the stub
	// waiting for a program (oci.StubScript).
	waitPooled := func() []string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			cs, err := testClient.Containers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := sandboxTasks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) == 2*size && len(ts.stub) == 2*size {
				return ts.stub
			}
			if time.Now().After(deadline) {
				t.Fatalf("pools hold %d containers, %d of them waiting in the stub (%v); want %d, all", len(cs), len(ts.stub), ts.stub, 2*size)
			}
		}
	}
	seen := map[string]bool{}
	for i := range 3 * size {
		ready := waitPooled()
		// Each run leaves a file everywhere it can write and reports what
		// it found there and who it is: no run may see another's traces.
		res := run(t, e, "python", `
import os
found = []
for d in ("/tmp", "/dev/shm"):
    found += [d + "/" + f for f in os.listdir(d)]
    open(d + "/trace", "w").write("x")
# The run's own cgroup namespace hides its id; the source of the
# /sandbox bind mount, its run directory, still names it.
code = next(l.split()[3] for l in open("/proc/self/mountinfo") if l.split()[4] == "/sandbox")
print(code.split("/")[-2], sorted(found))
`)
		fields := strings.SplitN(strings.TrimSpace(string(res.Stdout)), " ", 2)
		if len(fields) != 2 || fields[1] != "[]" {
			t.Fatalf("run %d: got %q (stderr %q); want its own container and empty /tmp and /dev/shm", i, res.Stdout, res.Stderr)
		}
		if seen[fields[0]] {
			t.Errorf("run %d: container %s was used before", i, fields[0])
		}
		if !slices.Contains(ready, fields[0]) {
			t.Errorf("run %d: ran in %s; want one of the ready sandboxes %v", i, fields[0], ready)
		}
		seen[fields[0]] = true
	}
	waitPooled()
}

// Two servers on one host with the same uid range and claims directory
// (here two executors; TestOrphansOfAKilledServerAreSweptAtTheNextStart
// has one in a process of its own) never give one uid to two live
// sandboxes, ready ones included: a range of four uids fills both pools
// of two, each sandbox with a uid of its own, and each sandbox's
// process runs as the uid of its spec.
func TestLiveSandboxesNeverShareAUid(t *testing.T) {
	uids := config.UIDRange{First: testUIDs.Last + 20, Last: testUIDs.Last + 23}
	edit := func(c *exec.Config) {
		c.UIDs = uids
		for i := range c.Languages {
			c.Languages[i].Pool = 0
			if c.Languages[i].Name == "python" {
				c.Languages[i].Pool = 2
			}
		}
	}
	newExecutor(t, edit)
	// The second is closed first (cleanups run last-in first-out), before
	// the first's check that nothing is left in the namespace.
	cfg := exec.Config{Address: testAddress, Namespace: testNamespace, StateDir: newStateDir(t), Languages: testLanguages(), UIDLockDir: testUIDLockDir(), Init: testInit}
	edit(&cfg)
	ctx := testContext(t)
	second, err := exec.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := second.Close(); err != nil {
			t.Errorf("close the second executor: %v", err)
		}
	})
	if err := second.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	var got map[uint32]string
	full := waitFor(30*time.Second, func() bool {
		got = map[uint32]string{}
		ts, err := sandboxTasks(ctx)
		if err != nil || len(ts.stub) != 4 {
			return false
		}
		for _, id := range ts.stub {
			c, err := testClient.LoadContainer(ctx, id)
			if err != nil {
				return false
			}
			spec, err := c.Spec(ctx)
			if err != nil {
				return false
			}
			task, err := c.Task(ctx, nil)
			if err != nil {
				return false
			}
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", task.Pid()))
			if err != nil {
				return false
			}
			uid := spec.Process.User.UID
			want := fmt.Sprintf("Uid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\nGid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\n", uid)
			if !strings.Contains(string(status), want) || spec.Process.User.GID != uid {
				t.Errorf("sandbox %s: spec %d:%d; process status does not hold %q", id, uid, spec.Process.User.GID, want)
			}
			got[uid] = id
		}
		return true
	})
	if !full {
		t.Fatalf("the two pools never held four ready sandboxes (uids seen: %v)", got)
	}
	if len(got) != 4 {
		t.Errorf("four ready sandboxes of two executors run as %v; want four distinct uids of %v", got, uids)
	}
	for uid := range got {
		if !uids.Contains(uid) {
			t.Errorf("uid %d: want one of %v", uid, uids)
		}
	}
}

// A sandbox's root file system is an overlay mounted volatile, so that
// unmounting it at the delete does not wait for the host's dirty data on
// containerd's file system (see exec/internal/sandbox/rootfs.go). Linux takes the option
// from 5.10 on; before, the overlay is mounted as containerd gives it.
// Newer kernels show it as fsync=volatile.
func TestRootFileSystemIsAVolatileOverlay(t *testing.T) {
	onBothDaemons(t, daemonImages)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	want := "overlay False\n"
	if major > 5 || major == 5 && minor >= 10 {
		want = "overlay True\n"
	}

	e := newExecutor(t, nil)
	both(t, func(t *testing.T, lang string) {
		res := run(t, e, lang, program(lang, `
for line in open('/proc/self/mountinfo'):
    f = line.split()
    if f[4] == '/':
        rest = f[f.index('-') + 1:]
        opts = rest[2].split(',')
        print(rest[0], 'volatile' in opts or 'fsync=volatile' in opts)
`, `
for (const line of require('fs').readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n')) {
  const f = line.split(' ');
  if (f[4] === '/') {
    const rest = f.slice(f.indexOf('-') + 1);
    const opts = rest[2].split(',');
    console.log(rest[0], opts.includes('volatile') || opts.includes('fsync=volatile') ? 'True' : 'False');
  }
}
`))
		if string(res.Stdout) != want || res.ExitCode != 0 {
			t.Errorf("root mount: got %q (stderr %q, exit %d); want %q", res.Stdout, res.Stderr, res.ExitCode, want)
		}
	})
}

// A language's runtime binary reaches the runc shim, on 1.6 and 2.x
// alike: a wrapper of the real one, given by its absolute path, logs each
// command the shim runs it for, and the run still works through it.
func TestRuntimeBinaryReachesTheShim(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	real := "runc"
	if testRuntimeBinary != "" {
		real = testRuntimeBinary
	}
	real, err := osexec.LookPath(real)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "runtime")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >>%q\nexec %q \"$@\"\n", log, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, func(c *exec.Config) {
		c.Languages = c.Languages[:1]
		c.Languages[0].RuntimeBinary = wrapper
	})
	if res := run(t, e, "python", "print('through the wrapper')"); string(res.Stdout) != "through the wrapper\n" {
		t.Fatalf("stdout %q; want the program's line", res.Stdout)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the wrapper was never run: %v", err)
	}
	if !strings.Contains(string(b), " create ") {
		t.Errorf("the wrapper's log has no create:\n%s", b)
	}
}

package integration

// The isolation suite, cases 1-13 and 27 of issue 4: hostile programs run
// through the real server on a real containerd, each with the outcome it
// must get, and then the host checked by afterCase (and, when the server
// exits, by startMCP's cleanup).

import (
	"cmp"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// killedAtDeadline checks that r was killed by the server at its time
// limit of sec seconds: timed out, SIGKILL, and the call back within a
// bound that allows for a busy 2-core host.
func killedAtDeadline(t *testing.T, r hostileRun, sec int) {
	t.Helper()
	if !r.isError || !r.out.TimedOut || r.out.Signal != "SIGKILL" || r.out.ExitCode != 137 || r.out.OOMKilled {
		t.Errorf("got %+v; want timed_out, SIGKILL, exit 137, not oom_killed", r.out)
	}
	if !strings.Contains(r.text, "timed out after "+strconv.Itoa(sec)+"s") {
		t.Errorf("text %q; want it to say it timed out after %ds", r.text, sec)
	}
	if min, max := time.Duration(sec)*time.Second, time.Duration(sec+15)*time.Second; r.took < min || r.took > max {
		t.Errorf("call took %s; want between %s and %s", r.took.Round(time.Millisecond), min, max)
	}
}

// intAfter returns the integer that follows prefix in s, or -1.
func intAfter(s, prefix string) int {
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + `(-?\d+)`).FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Case 1: fork bombs, of processes and of threads (and Node workers), hit
// the pids limit and are killed at the deadline.
func TestIsolationForkBomb(t *testing.T) {
	s := startMCP(t, serverSpec{config: "[limits]\npids = 64\n"})
	const pids = 64
	tests := []struct {
		name, lang, code string
		want             *regexp.Regexp // on stdout
		count            string         // prefix of the process or thread count it prints
		timeout          int
	}{
		{
			name: "processes", lang: "python",
			// Every child forks too: a real bomb. The first process reports
			// its first failure and how many processes it can see.
			code: `
import errno, os, time
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print('fork failed:', errno.errorcode[e.errno], flush=True)
        break
    if pid == 0:
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.05)
time.sleep(0.5)
print('processes:', sum(p.isdigit() for p in os.listdir('/proc')), flush=True)
time.sleep(3600)
`,
			want:  regexp.MustCompile(`^fork failed: EAGAIN\nprocesses: \d+\n$`),
			count: "processes: ",
		},
		{
			name: "threads", lang: "python",
			code: `
import os, threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        n += 1
except RuntimeError as e:
    print('thread failed:', e, flush=True)
print('threads:', len(os.listdir('/proc/self/task')), flush=True)
time.sleep(3600)
`,
			want:  regexp.MustCompile(`^thread failed: can't start new thread\nthreads: \d+\n$`),
			count: "threads: ",
		},
		{
			name: "node child processes", lang: "javascript",
			code: `
const { spawn } = require('child_process');
const fs = require('fs');
let failed = false;
function more() {
  const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  c.on('error', (e) => {
    if (failed) return;
    failed = true;
    console.log('spawn failed:', e.code);
    setTimeout(() => console.log('processes:', fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).length), 500);
  });
  c.on('spawn', more);
}
more();
setInterval(() => {}, 1000);
`,
			want:  regexp.MustCompile(`^spawn failed: EAGAIN\nprocesses: \d+\n$`),
			count: "processes: ",
		},
		{
			name: "node workers", lang: "javascript",
			code: `
const { Worker } = require('worker_threads');
const fs = require('fs');
let failed = false;
function report(e) {
  if (failed) return;
  failed = true;
  console.log('worker failed:', e.code);
  console.log('threads:', fs.readdirSync('/proc/self/task').length);
}
function more() {
  let w;
  try {
    w = new Worker('setInterval(() => {}, 1000)', { eval: true });
  } catch (e) {
    return report(e);
  }
  w.on('error', report);
  w.on('online', more);
}
more();
setInterval(() => {}, 1000);
`,
			want:  regexp.MustCompile(`^worker failed: ERR_WORKER_INIT_FAILED\nthreads: \d+\n$`),
			count: "threads: ",
			// Each worker is an isolate: on one CPU, some 50 take 3 s.
			timeout: 8,
		},
	}
	var runs []hostileRun
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := cmp.Or(tt.timeout, 4)
			r := hostile(t, s, tt.lang, tt.code, withTimeout(timeout))
			runs = append(runs, r)
			if !tt.want.MatchString(r.out.Stdout) {
				t.Errorf("stdout %q; want it to match %s (stderr %q)", r.out.Stdout, tt.want, r.out.Stderr)
			}
			if n := intAfter(r.out.Stdout, tt.count); n < 1 || n > pids {
				t.Errorf("%s%d; want 1 to %d (the pids limit)", tt.count, n, pids)
			}
			killedAtDeadline(t, r, timeout)
			for _, id := range r.ids {
				if got := r.watch.cgroupLimits(id)["pids.max"]; got != strconv.Itoa(pids) {
					t.Errorf("sandbox %s pids.max %q; want %d", id, got, pids)
				}
			}
		})
	}
	afterCase(t, s, runs...)
}

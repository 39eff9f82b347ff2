package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sandboxoci "code-sandbox-mcp/oci"
)

// hostCPUWeight reads the CPU weight of the cgroup of process pid from
// the host: "cpu.shares N" (cgroup v1) or "cpu.weight N" (v2). A program
// cannot read its own: the sandbox has no cgroup file system.
func hostCPUWeight(t *testing.T, pid uint32) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	// cgroup v1's cpu hierarchy if there is one, else v2's unified one.
	var dir string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case slices.Contains(strings.Split(f[1], ","), "cpu"):
			dir = filepath.Join("/sys/fs/cgroup/cpu", f[2])
		case f[0] == "0" && f[1] == "" && dir == "":
			dir = filepath.Join("/sys/fs/cgroup", f[2])
		}
	}
	for _, name := range []string{"cpu.shares", "cpu.weight"} {
		if v, err := os.ReadFile(filepath.Join(dir, name)); dir != "" && err == nil {
			return name + " " + strings.TrimSpace(string(v))
		}
	}
	t.Fatalf("no cpu cgroup weight for pid %d in:\n%s", pid, b)
	return ""
}

// TestPoolReadySandboxesYieldTheCPU: the pool's ready sandboxes are made,
// and their warm interpreters start and import, at the background CPU
// weight (issue 30: a refill must not compete with a running call), and a
// program taken from the pool runs at the default weight, the one a
// sandbox made for the call has.
func TestPoolReadySandboxesYieldTheCPU(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	// Under emulation (make test-cgroupv2 keeps no pools), the ready
	// sandboxes wait in the stub, not warm: a warm refill there takes
	// seconds of CPU. Both are made by the same pool code.
	config := "[languages.javascript]\npool = 0\n"
	if testNoPools {
		config += "[languages.python]\npool = 2\nwarm = false\n"
	}
	s := startMCP(t, serverSpec{config: config})
	ctx := testContext(t)
	var warm []string
	if !waitFor(time.Duration(scaled(90))*time.Second, func() bool {
		ts, err := sandboxTasks(ctx)
		warm = ts.warm
		if testNoPools {
			warm = ts.stub
		}
		return err == nil && len(warm) == 2 && len(ts.warming) == 0
	}) {
		t.Fatalf("python's pool does not hold 2 ready sandboxes after %ds: %v", scaled(90), warm)
	}
	background := map[string]string{"cpu.shares": fmt.Sprint(sandboxoci.BackgroundCPUShares), "cpu.weight": "5"}
	for _, id := range warm {
		c, err := testClient.LoadContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.Task(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := hostCPUWeight(t, task.Pid())
		name, v, _ := strings.Cut(got, " ")
		if background[name] != v {
			t.Errorf("ready sandbox %s waits at %s; want %s %s", id, got, name, background[name])
		}
	}

	// While a program taken from the pool runs, and one in a sandbox made
	// for its call (javascript has no pool here), their cgroups have the
	// default weight. Each program runs until the test, done reading its
	// weight, puts /tmp/done in its sandbox (for at most a minute,
	// scaled): a fixed sleep long enough for a slow host was most of the
	// test's time.
	def := map[string]string{"cpu.shares": "1024", "cpu.weight": "100"}
	for _, tc := range []struct {
		tool, src string
		pooled    bool
	}{
		{"run_python_code", fmt.Sprintf(`
import os, time
end = time.monotonic() + %d
while not os.path.exists('/tmp/done') and time.monotonic() < end:
    time.sleep(0.05)
print('done' if os.path.exists('/tmp/done') else 'not told')
`, scaled(60)), true},
		{"run_js_code", fmt.Sprintf(`
const fs = require('fs');
const end = Date.now() + %d;
const poll = setInterval(() => {
  if (fs.existsSync('/tmp/done') || Date.now() > end) {
    clearInterval(poll);
    console.log(fs.existsSync('/tmp/done') ? 'done' : 'not told');
  }
}, 50);
`, scaled(60)*1000), false},
	} {
		done := make(chan toolResult, 1)
		go func() { done <- s.call(ctx, t, tc.tool, code(tc.src)) }()
		var id string
		var pid uint32
		// Under emulation (make test-cgroupv2) Node.js takes seconds to start.
		within := time.Duration(scaled(3)) * time.Second
		if !waitFor(within, func() bool {
			ts, err := sandboxTasks(ctx)
			if err != nil || len(ts.running) != 1 {
				return false
			}
			c, err := testClient.LoadContainer(ctx, ts.running[0])
			if err != nil {
				return false
			}
			task, err := c.Task(ctx, nil)
			if err != nil {
				return false
			}
			id, pid = ts.running[0], task.Pid()
			return true
		}) {
			t.Fatalf("%s: no sandbox running its program within %s", tc.tool, within)
		}
		if slices.Contains(warm, id) != tc.pooled {
			t.Errorf("%s ran in %s; ready sandboxes were %v, want it pooled: %v", tc.tool, id, warm, tc.pooled)
		}
		got := hostCPUWeight(t, pid)
		name, v, _ := strings.Cut(got, " ")
		if def[name] != v {
			t.Errorf("%s (pooled %v): its program runs at %s; want %s %s, the default weight", tc.tool, tc.pooled, got, name, def[name])
		}
		// The sandbox's /tmp, through its init's root: the program's own.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/root/tmp/done", pid), nil, 0o644); err != nil {
			t.Errorf("%s: tell the program to end: %v", tc.tool, err)
		}
		if r := <-done; r.isError || r.text != "done\n" {
			t.Errorf("%s: %q (isError %v); want done, the program told to end", tc.tool, r.text, r.isError)
		}
	}
}

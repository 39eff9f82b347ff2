package integration

// The bench's pace part (issue 30): a Python hello through the server at
// think times 0, 20, 100 and 400 ms between calls, p50, p95 and p99 of
// each, and what each run cost in CPU, split by who spent it.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// paceThinks are the pauses between calls the pace part measures.
var paceThinks = []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}

// paceRuntime is the latency row's runtime at think time think.
func paceRuntime(pool int, think time.Duration) string {
	return fmt.Sprintf("ours, pool %d, think %d ms", pool, think.Milliseconds())
}

// cpuRow is what a window of runs cost in CPU, per run, by who spent it:
// the whole machine (busy time), the server, containerd, the sandboxes
// (their cgroups: the programs, their init and the warm interpreters of
// the refills), the bench itself (its MCP client), and the rest, which is
// the shims, runc and the kernel's own threads (the shims and runc come
// and go with each sandbox, so their time is read as what is left).
type cpuRow struct {
	What         string  `json:"what"`
	Runs         int     `json:"runs"`
	HostMs       float64 `json:"host_ms"`
	ServerMs     float64 `json:"server_ms"`
	ContainerdMs float64 `json:"containerd_ms"`
	SandboxesMs  float64 `json:"sandboxes_ms"`
	BenchMs      float64 `json:"bench_ms"`
	RestMs       float64 `json:"rest_ms"`
	// SandboxesUnknown says the sandboxes' cgroup could not be read; their
	// time is then in the rest.
	SandboxesUnknown bool `json:"sandboxes_unknown,omitempty"`
}

// cpuSample is the counters a cpuRow is the difference of.
type cpuSample struct {
	host, server, containerd, sandboxes, bench time.Duration
	sandboxesOK                                bool
}

func (s *benchServer) cpuSample() cpuSample {
	sb, ok := sandboxesCPU()
	c := cpuSample{host: hostBusy(), server: procCPU(s.cmd.Process.Pid), sandboxes: sb, sandboxesOK: ok, bench: procCPU(os.Getpid())}
	if testHarness != nil && testHarness.daemon != nil && testHarness.daemon.Process != nil {
		c.containerd = procCPU(testHarness.daemon.Process.Pid)
	}
	return c
}

// cpuBetween is the cpuRow of runs runs between a and b.
func cpuBetween(what string, a, b cpuSample, runs int) cpuRow {
	per := func(d time.Duration) float64 { return round(ms(d) / float64(max(runs, 1))) }
	r := cpuRow{What: what, Runs: runs, HostMs: per(b.host - a.host), ServerMs: per(b.server - a.server),
		ContainerdMs: per(b.containerd - a.containerd), BenchMs: per(b.bench - a.bench)}
	if a.sandboxesOK && b.sandboxesOK {
		r.SandboxesMs = per(b.sandboxes - a.sandboxes)
	} else {
		r.SandboxesUnknown = true
	}
	r.RestMs = round(r.HostMs - r.ServerMs - r.ContainerdMs - r.SandboxesMs - r.BenchMs)
	return r
}

// sandboxesCPU is the CPU time spent in the test namespace's cgroups, the
// parent of every sandbox's under the cgroupfs driver: cgroup v1's
// cpuacct (which keeps what removed children spent) or v2's cpu.stat.
// ok is false where neither can be read (the systemd driver's slices).
func sandboxesCPU() (time.Duration, bool) {
	if data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", testNamespace, "cpuacct.usage")); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return time.Duration(n), err == nil
	}
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", testNamespace, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(n) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// paceRows runs the Python hello n times at each think time on one server
// with the default pool, from a full pool each time. Each window's CPU
// ends once the pool is full again, so that the refills the runs caused
// are in it.
func paceRows(b *testing.B, bin string, pool, n int, rep *benchReport) {
	s := startBench(b, bin, "concurrency = 16\n")
	defer s.close(b)
	p := benchPrograms[0]
	for _, think := range paceThinks {
		s.waitQuiet(b, 2*pool)
		runtime := paceRuntime(pool, think)
		before := s.cpuSample()
		// Its warm-up call is in the window too: n+1 runs.
		row := s.latencyThink(b, runtime, p, n, -1, think)
		s.waitQuiet(b, 2*pool)
		rep.Latency = append(rep.Latency, row)
		c := cpuBetween(runtime, before, s.cpuSample(), n+1)
		rep.CPU = append(rep.CPU, c)
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f p95 %7.1f p99 %7.1f ms; CPU/run %.1f ms (server %.1f, containerd %.1f, sandboxes %.1f, rest %.1f)\n",
			runtime, p.name, row.P50Ms, row.P95Ms, row.P99Ms, c.HostMs, c.ServerMs, c.ContainerdMs, c.SandboxesMs, c.RestMs)
	}
}

// writeCPU writes the CPU split of the pace part's windows.
func (r *benchReport) writeCPU(w *strings.Builder) {
	if len(r.CPU) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| CPU per run, ms | host | server | containerd | sandboxes | bench client | rest (shims, runc, kernel) |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.CPU {
		sb := benchNum(c.SandboxesMs)
		if c.SandboxesUnknown {
			sb = "in rest"
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %s | %.1f | %.1f |\n", c.What, c.HostMs, c.ServerMs, c.ContainerdMs, sb, c.BenchMs, c.RestMs)
	}
	fmt.Fprintf(w, "\nEach window runs from a full pool to a full pool again, so a run's refill is in its CPU. The rest is the machine's busy time less the others: the shims and runc, which come and go with each sandbox, the kernel's threads, and anything else running.\n")
}

// paceTargets are issue 30's targets on the pace rows against the floor.
func (r *benchReport) paceTargets() {
	floor := r.row(floorName, benchPrograms[0].name)
	at := func(think time.Duration) *latencyRow { return r.row(paceRuntime(r.Pool, think), benchPrograms[0].name) }
	for _, t := range []struct {
		name  string
		think time.Duration
		p95   bool
		bound float64
	}{
		{"python hello p50 at 20 ms think time ≤ 2x the floor (#30)", 20 * time.Millisecond, false, 2},
		{"python hello p95 at 20 ms think time ≤ 4x the floor (#30)", 20 * time.Millisecond, true, 4},
		{"python hello p95 at 400 ms think time ≤ 3x the floor (#30)", 400 * time.Millisecond, true, 3},
	} {
		row := at(t.think)
		if row == nil {
			continue
		}
		if floor == nil {
			r.Targets = append(r.Targets, target{Name: t.name, Got: "no floor row in this run (BENCH_ONLY=floor,pace)"})
			continue
		}
		got, base := row.P50Ms, floor.P50Ms
		if t.p95 {
			got = row.P95Ms
		}
		ratio := got / base
		r.Targets = append(r.Targets, target{Name: t.name, Got: fmt.Sprintf("%.1f ms, %.2fx the floor's p50 %.1f ms", got, ratio, base), Met: ratio <= t.bound, Known: true})
	}
}

package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCgroupV2 is make bench's row from the cgroup v2 VM
// (`scripts/cgroupv2 bench`, which sets SANDBOX_VM_BENCH=1): a Python
// hello at concurrency 4 for BENCH_VM_SECONDS (default 20) each through
// containerd + runc alone, containerd + crun alone, our server with runc
// and our server with crun, one after the other on one daemon in one
// boot. The VM's absolute times say little (it runs under software
// emulation), so the table gives ratios: ours against the platform alone
// with the same runtime, and crun against runc.
func BenchmarkCgroupV2(b *testing.B) {
	if os.Getenv("SANDBOX_VM_BENCH") != "1" {
		b.Skip("runs in the cgroup v2 VM: scripts/cgroupv2 bench (make bench runs it)")
	}
	d := 20 * time.Second
	if v := os.Getenv("BENCH_VM_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_VM_SECONDS=%q: want a whole number of seconds", v)
		}
		d = time.Duration(n) * time.Second
	}
	const c = 4
	benchUnpack(b)
	hello := benchPrograms[0]
	bin := benchBinary(b)

	aloneRunc := platformThroughput(b, c, d, "")
	aloneCrun := platformThroughput(b, c, d, "crun")
	ours := map[string]throughputRow{}
	for _, rt := range []string{"runc", "crun"} {
		s := startBench(b, bin, fmt.Sprintf("concurrency = %d\n[containerd]\nruntime_binary = %q\n", c, rt))
		s.call(b, hello) // the page cache and the pool, before the clock
		ours[rt] = s.throughput(b, hello, c, d)
		s.close(b)
	}

	fmt.Printf("\ncgroup v2 VM (%s): python hello at concurrency %d, %s each\n", os.Getenv("SANDBOX_VM_ACCEL"), c, d)
	fmt.Printf("| %-34s | %8s | %8s | %8s | %12s |\n", "", "runs/s", "p50 ms", "p99 ms", "CPU/run ms")
	for _, r := range []struct {
		name string
		row  throughputRow
	}{
		{"containerd + runc alone", aloneRunc},
		{"containerd + crun alone", aloneCrun},
		{"code-sandbox-mcp, runc", ours["runc"]},
		{"code-sandbox-mcp, crun", ours["crun"]},
	} {
		fmt.Printf("| %-34s | %8.1f | %8.1f | %8.1f | %12.1f |\n", r.name, r.row.RunsPerSec, r.row.P50Ms, r.row.P99Ms, r.row.HostCPUMs)
	}
	ratio := func(a, b throughputRow) float64 { return round(a.RunsPerSec / b.RunsPerSec) }
	fmt.Printf("ratios (throughput): ours/alone with runc %.2fx, with crun %.2fx; crun/runc alone %.2fx, ours %.2fx\n",
		ratio(ours["runc"], aloneRunc), ratio(ours["crun"], aloneCrun), ratio(aloneCrun, aloneRunc), ratio(ours["crun"], ours["runc"]))
}

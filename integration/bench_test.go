package integration

// BenchmarkSideBySide is issue #5's benchmark (`make bench`): in one run, on
// the same machine and the same images, it measures
//
//   - end-to-end tools/call latency of the real binary over stdio, with the
//     default pool (calls paced so that the pool is full again, as between
//     an assistant's calls; and back to back) and with pool = 0;
//   - the same programs through `podman run --rm` and `docker run --rm` with
//     equivalent flags, when those runtimes work here (scripts/bench
//     installs and starts a dockerd for the run when none answers);
//   - the floor: the interpreter started directly in an unpacked copy of the
//     image (chroot), no container;
//   - throughput at concurrency 1, 4, 8, 16 and the server's RSS;
//   - session cells and create_session (bench_session_test.go);
//   - a Python hello over streamable HTTP with tokens beside stdio, and
//     throughput at concurrency 8 from 8 HTTP clients (bench_http_test.go);
//   - a Python hello with a progress token beside the same without one,
//     and the latency from a print in the sandbox to its notification at
//     the client (bench_stream_test.go);
//   - the time from the server's exec to its first result;
//   - a soak: BENCH_SOAK_N (default 1000) Python hellos at concurrency 8 on
//     one server, with its errors, its RSS after every 100 calls, and what
//     is left after it exits;
//   - a soak over HTTP: 8 clients, each with its own token and MCP session,
//     mixing runs, files, resources/read, sessions and calls meant to fail
//     for BENCH_SOAK_HTTP_SECONDS (default 180) after a 20 s warm-up, with
//     the server's RSS at the start (the highest of the warm-up's second
//     half), its peak after the warm-up and at the end, its calls by kind
//     and its errors (bench_soak_http_test.go).
//
// It samples on its own and runs once: go test -run '^$' -bench SideBySide
// -benchtime 1x ./integration. It prints a table and writes the same as
// JSON to BENCH_JSON (default: bin/bench.json in the repository). BENCH_N
// (default 200) is the number of calls per hello row; the numpy/pandas rows
// make a tenth of it, at least 20. BENCH_ONLY, a comma-separated list of
// benchPartNames, runs just those parts (to check one part without the
// whole run); the table and the targets then show what they measured.
// BENCH_DOCKER is the docker CLI to call (default: docker on PATH).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/sandboxinit"
	sandboxoci "code-sandbox-mcp/oci"
)

// benchProgram is one program every runtime runs.
type benchProgram struct {
	name string // row label
	lang string // config language: python or javascript
	tool string
	code string
	want string // the exact stdout
	few  bool   // slow: sampled fewer times
	// images is how many image blocks the result has; a program with
	// none has exactly one content block, its text, which is want.
	images int
}

var benchPrograms = []benchProgram{
	{name: "python hello", lang: "python", tool: "run_python_code", code: `print("hello")`, want: "hello\n"},
	{name: "node hello", lang: "javascript", tool: "run_js_code", code: `console.log("hello")`, want: "hello\n"},
	{name: "python numpy+pandas", lang: "python", tool: "run_python_code", few: true,
		code: "import numpy as np\nimport pandas as pd\nprint(int(pd.DataFrame({'a': np.arange(4)})['a'].sum()))", want: "6\n"},
}

// plot draws a line chart and never calls savefig: the server returns it
// as an image. It runs on our server only: elsewhere the figure would not
// be saved, and the row would not measure the same work.
var plot = benchProgram{name: "python matplotlib plot", lang: "python", tool: "run_python_code", few: true, images: 1,
	code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 4])\nplt.title('bench')\nprint('plotted')", want: "plotted\n"}

// bigOutput prints 64 KiB, for the RSS-at-16 row.
var bigOutput = benchProgram{name: "python 64 KiB out", lang: "python", tool: "run_python_code",
	code: "import sys\nsys.stdout.write('x' * 65535 + '\\n')", want: strings.Repeat("x", 65535) + "\n"}

// containerFlags are the isolation flags of the podman and docker rows, the
// server's defaults in their terms. The ulimits are there because podman's
// defaults for them are above this kind of VM's hard limits, and runc
// then fails to start the container.
var containerFlags = []string{
	"--network=none", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--read-only",
	"--tmpfs", "/tmp:size=64m", "--memory=512m", "--memory-swap=512m", "--cpus=1",
	"--pids-limit=128", "--user", "65534:65534",
	"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
}

// latencyRow is one runtime's latencies for one program.
type latencyRow struct {
	Runtime     string  `json:"runtime"`
	Program     string  `json:"program"`
	N           int     `json:"n,omitempty"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P95Ms       float64 `json:"p95_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	MeanMs      float64 `json:"mean_ms,omitempty"`
	RunP50Ms    float64 `json:"run_p50_ms,omitempty"`     // the server's duration_ms: the program's start to its exit
	DestroyP50  float64 `json:"destroy_p50_ms,omitempty"` // "sandbox destroyed" took, off the response path
	Unavailable string  `json:"unavailable,omitempty"`
}

// throughputRow is one concurrency level through the server.
type throughputRow struct {
	Concurrency int     `json:"concurrency"`
	Program     string  `json:"program"`
	Runs        int     `json:"runs"`
	Seconds     float64 `json:"seconds"`
	RunsPerSec  float64 `json:"runs_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	// HostCPUMs is the CPU time the whole machine spent per run (busy time
	// from /proc/stat over the window); ServerCPUMs what the server's own
	// process spent, where there is one.
	HostCPUMs   float64 `json:"host_cpu_ms_per_run,omitempty"`
	ServerCPUMs float64 `json:"server_cpu_ms_per_run,omitempty"`
}

// soakEvery is how many completed calls of the soak there are between two
// samples of the server's RSS.
const soakEvery = 100

// soakRow is the soak: one server, many calls of one program, every error
// counted rather than the first ending it. The throughput fields count
// the calls that succeeded.
type soakRow struct {
	throughputRow
	Calls       int       `json:"calls"`
	Errors      int       `json:"errors"`                 // isError results, wrong output, transport errors
	FirstErrors []string  `json:"first_errors,omitempty"` // the first few
	RSSMiB      []float64 `json:"rss_mib_every_100"`      // after every soakEvery completed calls
	AfterExit   []string  `json:"after_exit,omitempty"`   // leftovers, an unclean exit, a panic
}

// flat reports whether the server's RSS held: the last sample is within
// 10% of the first, which is taken after soakEvery calls and so after the
// server's warm-up.
func (r *soakRow) flat() bool {
	return len(r.RSSMiB) > 0 && r.RSSMiB[len(r.RSSMiB)-1] <= 1.1*r.RSSMiB[0]
}

// String sums up the soak in a line.
func (r *soakRow) String() string {
	left := "nothing left after exit"
	if len(r.AfterExit) > 0 {
		left = fmt.Sprintf("%d things wrong at or after exit", len(r.AfterExit))
	}
	return fmt.Sprintf("%d calls of %s at concurrency %d on one server: %d errors, %.1f s (%.1f runs/s, p50 %.1f ms, p99 %.1f ms), RSS MiB after every %d calls: %v, %s",
		r.Calls, r.Program, r.Concurrency, r.Errors, r.Seconds, r.RunsPerSec, r.P50Ms, r.P99Ms, soakEvery, r.RSSMiB, left)
}

// target is one of issue #5's targets and where it stands.
type target struct {
	Name  string `json:"name"`
	Got   string `json:"got"`
	Met   bool   `json:"met"`
	Known bool   `json:"known"` // false: not measurable in this run
}

// benchReport is everything the run measured; it is the JSON.
type benchReport struct {
	Date       string          `json:"date"`
	Machine    string          `json:"machine"`
	Containerd string          `json:"containerd"`
	Pool       int             `json:"pool"`
	Latency    []latencyRow    `json:"latency"`
	Throughput []throughputRow `json:"throughput"`
	IdleRSSMiB float64         `json:"idle_rss_mib"`
	// SessionMemMiB is what an idle session's memory cgroup holds, by
	// language.
	SessionMemMiB map[string]float64 `json:"session_mem_mib,omitempty"`
	FirstResult   []float64          `json:"first_result_ms"`
	Phases        []string           `json:"phases,omitempty"` // debug "run phases" lines, summarized
	// WarmPhases break a warm call down, by language; ReadyMemMiB is what
	// a ready sandbox's memory cgroup holds, by kind.
	WarmPhases  []string           `json:"warm_phases,omitempty"`
	ReadyMemMiB map[string]float64 `json:"ready_mem_mib,omitempty"`
	Soak        *soakRow           `json:"soak,omitempty"`
	SoakHTTP    *soakHTTPRow       `json:"soak_http,omitempty"`
	// StreamNotify is the latency from a print to its notification.
	StreamNotify *notifyRow `json:"stream_notify,omitempty"`
	// CPU splits the pace part's CPU per run by who spent it.
	CPU     []cpuRow `json:"cpu,omitempty"`
	Targets []target `json:"targets"`
	Notes   []string `json:"notes,omitempty"`
}

func BenchmarkSideBySide(b *testing.B) {
	n, nSoak := benchCounts(b)
	pool := config.Default().Languages["python"].Pool
	rep := &benchReport{
		Date:       time.Now().UTC().Format("2006-01-02"),
		Machine:    machine(),
		Containerd: containerdVersion(b),
		Pool:       pool,
	}
	bin := benchBinary(b)
	benchUnpack(b)
	stopWatch := watchLoad()

	benchRunParts(b, bin, n, nSoak, rep)

	rep.Notes = append(rep.Notes, stopWatch())
	rep.judge()
	rep.Targets = append(rep.Targets, target{
		Name:  "nothing left (containers, tasks, snapshots, shims, mounts, state)",
		Got:   fmt.Sprintf("checked at each of %d servers' exit, after %d runs in all", servers.Load(), runs.Load()),
		Met:   !b.Failed(),
		Known: true,
	})
	writeBench(b, rep)
}

// benchRunParts measures the parts BENCH_ONLY names (all unless set),
// in order, into rep: n calls a hello row (a tenth of it, at least 20,
// for the slow programs), nSoak in the soak.
func benchRunParts(b *testing.B, bin string, n, nSoak int, rep *benchReport) {
	pool := rep.Pool
	samples := func(p benchProgram) int {
		if p.few {
			return max(n/10, 20)
		}
		return n
	}
	part := benchParts(b)
	// The floor.
	if part("floor") {
		for _, p := range benchPrograms {
			rep.Latency = append(rep.Latency, floorRow(b, p, samples(p)))
		}
	}

	// The server with its default pool: paced, then back to back, then
	// throughput; idle RSS first.
	if part("pool") {
		poolRows(b, bin, pool, samples, rep)
	}

	// A Python hello at several think times, and its CPU split.
	if part("pace") {
		paceRows(b, bin, pool, n, rep)
	}

	// The pool before warm interpreters, and a warm call's phases.
	if part("cold") {
		coldRows(b, bin, rep, samples)
	}
	if part("phases") {
		warmPhases(b, bin, max(n/4, 20), rep)
	}

	// Sessions, on a server of their own.
	if part("session") {
		sessionRows(b, bin, pool, n, rep)
	}

	// HTTP beside stdio.
	if part("http") {
		httpRows(b, bin, pool, n, rep)
	}

	// Streamed output: its cost on a hello, and its latency.
	if part("stream") {
		streamRows(b, bin, pool, n, rep)
	}

	// The ceiling of containerd and runc here, with no server running.
	if part("platform") {
		rep.Throughput = append(rep.Throughput, platformThroughput(b, 8, 8*time.Second, ""))
	}

	// On demand.
	if part("pool0") {
		pool0Rows(b, bin, samples, rep)
	}
	if part("network") {
		networkRows(b, bin, samples, rep)
	}

	// Time to the first result, from the exec of a fresh server.
	if part("first") {
		rep.FirstResult = firstResults(b, bin, 5)
	}

	// Many calls on one server: errors, its RSS as the calls go on, and
	// what is left after it exits.
	if part("soak") {
		s := startBench(b, bin, "concurrency = 16\n")
		s.waitQuiet(b, 2*pool)
		rep.Soak = s.soak(b, benchPrograms[0], nSoak, 8)
	}

	// The same over HTTP, with 8 clients and a mix of calls.
	if part("soakhttp") {
		rep.SoakHTTP = soakHTTP(b, bin, pool, soakHTTPSeconds(b))
	}

	if part("cli") {
		cliRows(b, samples, rep)
	}
}

// firstResults times, n times, a fresh server's first result, from its
// exec.
func firstResults(b *testing.B, bin string, n int) []float64 {
	var got []float64
	for range n {
		start := time.Now()
		s := startBench(b, bin, "")
		s.call(b, benchPrograms[0])
		got = append(got, ms(time.Since(start)))
		s.close(b)
	}
	return got
}

// benchCounts are BENCH_N, the calls a hello row makes (200 unless
// set), and BENCH_SOAK_N, the soak's (1000 unless set).
func benchCounts(b *testing.B) (n, nSoak int) {
	n, nSoak = 200, 1000
	for _, v := range []struct {
		name string
		n    *int
	}{{"BENCH_N", &n}, {"BENCH_SOAK_N", &nSoak}} {
		if s := os.Getenv(v.name); s != "" {
			k, err := strconv.Atoi(s)
			if err != nil || k < 1 {
				b.Fatalf("%s=%q: want a positive integer", v.name, s)
			}
			*v.n = k
		}
	}
	return n, nSoak
}

// poolRows measures the server with its default pool: idle RSS first,
// then paced, then back to back, then throughput.
func poolRows(b *testing.B, bin string, pool int, samples func(benchProgram) int, rep *benchReport) {
	s := startBench(b, bin, "concurrency = 16\n")
	s.waitQuiet(b, 2*pool)
	// Not synchronisation: idle memory is what is measured, so the
	// server is left idle a moment after its pool is full.
	time.Sleep(time.Second)
	rep.IdleRSSMiB = s.rss()
	rep.ReadyMemMiB = readyMemory(b)
	for _, p := range append(slices.Clone(benchPrograms), plot) {
		rep.Latency = append(rep.Latency, s.latency(b, fmt.Sprintf("ours, pool %d", pool), p, samples(p), 2*pool))
	}
	for _, p := range benchPrograms {
		rep.Latency = append(rep.Latency, s.latency(b, fmt.Sprintf("ours, pool %d, back to back", pool), p, samples(p), -1))
	}
	for _, c := range []int{1, 4, 8, 16} {
		s.waitQuiet(b, 2*pool)
		rep.Throughput = append(rep.Throughput, s.throughput(b, benchPrograms[0], c, 8*time.Second))
	}
	s.waitQuiet(b, 2*pool)
	rep.Throughput = append(rep.Throughput, s.throughput(b, bigOutput, 16, 8*time.Second))
	rep.Phases = s.phases()
	s.close(b)
}

// pool0Rows measures the server with no pools: every call creates its
// sandbox.
func pool0Rows(b *testing.B, bin string, samples func(benchProgram) int, rep *benchReport) {
	s := startBench(b, bin, "concurrency = 16\n[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n")
	for _, p := range benchPrograms {
		rep.Latency = append(rep.Latency, s.latency(b, "ours, pool 0", p, samples(p), 0))
	}
	s.close(b)
}

// The rows of the network part: pool 0, so that each call pays for its
// sandbox's creation, without and with a network.
const (
	plainRuntime   = "ours, pool 0 (network part: no network)"
	networkRuntime = "ours, pool 0, with a network"
)

// networkRows measures what a network costs a sandbox's creation (issue
// 31): two servers with no pools, one whose languages have a network
// (a namespace and a proxy per sandbox; the programs open no connection,
// so no traffic leaves), measured one after the other for each program.
func networkRows(b *testing.B, bin string, samples func(benchProgram) int, rep *benchReport) {
	const pools = "concurrency = 16\n[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n"
	plain := startBench(b, bin, pools)
	defer plain.close(b)
	netw := startBench(b, bin, pools+"[network]\nallow = [\"bench.invalid\"]\n")
	defer netw.close(b)
	for _, p := range benchPrograms {
		rep.Latency = append(rep.Latency, plain.latency(b, plainRuntime, p, samples(p), 0))
		rep.Latency = append(rep.Latency, netw.latency(b, networkRuntime, p, samples(p), 0))
	}
}

// cliRows times the same programs through podman and docker; a runtime
// that does not work here gets one row saying why.
func cliRows(b *testing.B, samples func(benchProgram) int, rep *benchReport) {
	for _, rt := range []string{"podman", "docker"} {
		for i, p := range benchPrograms {
			row := cliRow(b, rt, p, samples(p))
			if i == 0 && row.Unavailable != "" {
				row.Program = "all"
				rep.Latency = append(rep.Latency, row)
				break
			}
			rep.Latency = append(rep.Latency, row)
		}
	}
}

// writeBench prints the report's table, writes its JSON to BENCH_JSON
// (bin/bench.json unless set), and
// reports the headline figures as the benchmark's metrics.
func writeBench(b *testing.B, rep *benchReport) {
	out := os.Getenv("BENCH_JSON")
	if out == "" {
		out = filepath.Join("..", "bin", "bench.json")
	}
	text := rep.table()
	fmt.Print(text)
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("bench: wrote %s\n", out)

	for _, r := range rep.Latency {
		if r.Unavailable == "" && strings.HasPrefix(r.Runtime, "ours, pool") && !strings.HasSuffix(r.Runtime, "back") {
			unit := strings.NewReplacer(" ", "_", ",", "", "+", "_").Replace(r.Runtime + "/" + r.Program)
			b.ReportMetric(r.P50Ms, "p50-ms/"+unit)
		}
	}
	for _, r := range rep.Throughput {
		if r.Program == benchPrograms[0].name {
			b.ReportMetric(r.RunsPerSec, fmt.Sprintf("runs/s@%d", r.Concurrency))
		}
	}
	if rep.IdleRSSMiB > 0 {
		b.ReportMetric(rep.IdleRSSMiB, "idle-rss-MiB")
	}
	if rep.Soak != nil {
		b.ReportMetric(float64(rep.Soak.Errors), "soak-errors")
	}
}

// benchPartNames are the parts of the run, in order, for BENCH_ONLY.
var benchPartNames = []string{"floor", "pool", "pace", "cold", "phases", "session", "http", "stream", "platform", "pool0", "network", "first", "soak", "soakhttp", "cli"}

// benchParts reads BENCH_ONLY, a comma-separated list of benchPartNames
// (all of them when it is empty), and reports whether a part is to run.
func benchParts(b *testing.B) func(name string) bool {
	b.Helper()
	v := os.Getenv("BENCH_ONLY")
	if v == "" {
		return func(string) bool { return true }
	}
	only := strings.Split(v, ",")
	for _, name := range only {
		if !slices.Contains(benchPartNames, name) {
			b.Fatalf("BENCH_ONLY=%q: no part %q; want a comma-separated list of %v", v, name, benchPartNames)
		}
	}
	return func(name string) bool { return slices.Contains(only, name) }
}

// watchLoad samples, every second until the returned function is called,
// the load average and whether other test binaries run (another suite on
// the same machine distorts every number); that function summarizes.
func watchLoad() func() string {
	var (
		mu            sync.Mutex
		loads         []float64
		busy, samples int
		stop          = make(chan struct{})
		done          = make(chan struct{})
	)
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			data, _ := os.ReadFile("/proc/loadavg")
			f, _ := strconv.ParseFloat(strings.Fields(string(data) + " 0")[0], 64)
			others := 0
			for pid, args := range processes() {
				if pid != os.Getpid() && strings.HasSuffix(filepath.Base(args[0]), ".test") {
					others++
				}
			}
			mu.Lock()
			loads = append(loads, f)
			samples++
			if others > 0 {
				busy++
			}
			mu.Unlock()
		}
	}()
	return func() string {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		if samples == 0 {
			return ""
		}
		var sum float64
		for _, l := range loads {
			sum += l
		}
		return fmt.Sprintf("While it ran: 1-minute load average %.1f on average (max %.1f) on %d cores; other Go test binaries were running during %d%% of it.",
			sum/float64(len(loads)), slices.Max(loads), runtime.NumCPU(), 100*busy/samples)
	}
}

// benchBinary builds the server once, into the harness directory (or
// takes SANDBOX_PREBUILT's).
func benchBinary(b *testing.B) string {
	b.Helper()
	path := filepath.Join(testDir, "bench-bin", "code-sandbox-mcp")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := goBuild("..", "code-sandbox-mcp", path, "code-sandbox-mcp/cmd/code-sandbox-mcp", nil, nil); err != nil {
		b.Fatal(err)
	}
	// The init the server finds beside it.
	if err := initBinary(filepath.Join(filepath.Dir(path), sandboxinit.Name)); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchUnpack unpacks the images before any server starts, so no row pays
// for it.
func benchUnpack(b *testing.B) {
	b.Helper()
	ctx := testContext(b)
	for _, ref := range testImages {
		img, err := testClient.GetImage(ctx, ref)
		if err != nil {
			b.Fatalf("image %s: %v", ref, err)
		}
		if err := img.Unpack(ctx, ""); err != nil {
			b.Fatalf("unpack %s: %v", ref, err)
		}
	}
}

// Counted for the leftovers line.
var servers, runs atomic.Int64

// benchServer is a running server with an MCP client on its stdio.
type benchServer struct {
	c        *client.Client
	cmd      *osexec.Cmd
	stderr   *syncBuffer
	stateDir string

	// Over HTTP: where it listens (http://HOST:PORT), its clients and
	// their tokens, those not in a call, and what stops it.
	base    string
	clients []*client.Client
	tokens  []string
	free    chan *client.Client
	stop    func() error
}

// close ends the session; the server must exit cleanly and leave nothing.
func (s *benchServer) close(t testing.TB) {
	t.Helper()
	s.exit(t)
	assertNoLeftovers(t, s.stateDir)
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("server stderr has a panic:\n%s", s.stderr)
	}
}

// exit ends the server, which must exit cleanly, without checking what
// it left: another server in the namespace may still hold sandboxes.
func (s *benchServer) exit(t testing.TB) {
	t.Helper()
	if s.stop != nil {
		s.closeClients()
		if err := s.stop(); err != nil {
			t.Errorf("the server's exit after SIGTERM: %v\nstderr:\n%s", err, s.stderr)
		}
	} else if err := s.c.Close(); err != nil {
		t.Errorf("close the client (the server's exit): %v\nstderr:\n%s", err, s.stderr)
	}
}

// soak calls p n times from c workers on s, counting errors, and samples
// the server's RSS after every soakEvery completed calls; then it closes
// the server and records what its exit left wrong. Those fail the
// benchmark as close's do; the calls' errors are only counted.
func (s *benchServer) soak(b *testing.B, p benchProgram, n, c int) *soakRow {
	b.Helper()
	r := &soakRow{Calls: n, RSSMiB: make([]float64, n/soakEvery)}
	var issued, called atomic.Int64
	row, errs := drive(p.name, c, func() bool { return issued.Add(1) <= int64(n) }, func() error {
		_, err := s.callErr(p)
		if k := called.Add(1); k%soakEvery == 0 {
			r.RSSMiB[k/soakEvery-1] = s.rss() // each k writes its own sample
		}
		return err
	})
	r.throughputRow = row
	r.Errors = len(errs)
	for _, err := range errs[:min(len(errs), 5)] {
		r.FirstErrors = append(r.FirstErrors, err.Error())
	}
	r.PeakRSSMiB = slices.Max(append([]float64{0}, r.RSSMiB...))
	rec := &recorder{TB: b}
	s.close(rec)
	for _, e := range rec.errs {
		b.Error(e)
		line, _, _ := strings.Cut(e, "\n") // without the server's stderr
		r.AfterExit = append(r.AfterExit, line)
	}
	fmt.Fprintf(os.Stderr, "bench: soak: %s\n", r)
	return r
}

// call runs p once and checks its output.
func (s *benchServer) call(b *testing.B, p benchProgram) {
	b.Helper()
	if _, err := s.callErr(p); err != nil {
		b.Fatalf("%s: %v\nstderr tail:\n%s", p.name, err, tail(s.stderr.String(), 2000))
	}
}

// callErr runs p once and returns the server's run duration (Start to
// exit, from the structured result).
func (s *benchServer) callErr(p benchProgram) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, done := s.take()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: p.tool, Arguments: code(p.code)}})
	done()
	runs.Add(1)
	if err != nil {
		return 0, err
	}
	var text string
	images := 0
	for i, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			if i == 0 {
				text = c.Text
			}
		case mcp.ImageContent:
			images++
		}
	}
	ok := text == p.want && len(res.Content) == 1
	if p.images > 0 {
		// The text goes on with the line that lists the files.
		ok = strings.HasPrefix(text, p.want) && images == p.images
	}
	if res.IsError || !ok {
		return 0, fmt.Errorf("got %q, %d blocks, %d images (isError %v); want %q and %d images", tail(text, 300), len(res.Content), images, res.IsError, tail(p.want, 20), p.images)
	}
	var out struct {
		DurationMs float64 `json:"duration_ms"`
	}
	if data, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(data, &out)
	}
	return time.Duration(out.DurationMs * float64(time.Millisecond)), nil
}

// latency calls p n times, one at a time. With ready >= 0 it first waits,
// untimed, until the namespace holds just ready idle sandboxes (a full
// pool, or none): calls then see a server at rest, as between an
// assistant's calls. With ready < 0 the calls are back to back.
func (s *benchServer) latency(b *testing.B, runtime string, p benchProgram, n, ready int) latencyRow {
	b.Helper()
	return s.latencyThink(b, runtime, p, n, ready, 0)
}

// latencyThink is latency with a pause of think after each result.
func (s *benchServer) latencyThink(b *testing.B, runtime string, p benchProgram, n, ready int, think time.Duration) latencyRow {
	b.Helper()
	s.call(b, p) // warm the page cache and the client
	before := len(s.destroyTimes())
	var lat, run []time.Duration
	for range n {
		if ready >= 0 {
			s.waitQuiet(b, ready)
		}
		start := time.Now()
		d, err := s.callErr(p)
		if err != nil {
			b.Fatalf("%s %s: %v\nstderr tail:\n%s", runtime, p.name, err, tail(s.stderr.String(), 2000))
		}
		lat = append(lat, time.Since(start))
		run = append(run, d)
		time.Sleep(think)
	}
	row := summarize(runtime, p.name, lat)
	row.RunP50Ms = ms(percentile(run, 50))
	if ready >= 0 {
		s.waitQuiet(b, ready)
	}
	if d := s.destroyTimes(); len(d) > before {
		row.DestroyP50 = ms(percentile(d[before:], 50))
	}
	fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f ms\n", runtime, p.name, row.P50Ms)
	return row
}

// waitQuiet waits until the namespace holds exactly ready containers, all
// waiting for a program (see sandboxTasks) and none running one: used
// sandboxes are destroyed and the pools are full. It gives up after 30s and says so.
func (s *benchServer) waitQuiet(b *testing.B, ready int) {
	b.Helper()
	ctx := testContext(b)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs, err := testClient.Containers(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ts, err := sandboxTasks(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(cs) == ready && len(ts.running) == 0 && ts.waiting() == ready {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("waiting for %d ready sandboxes: %d containers, %d tasks running a program, %d waiting after 30s; going on", ready, len(cs), len(ts.running), ts.waiting())
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// throughput runs p from c workers for d and samples the server's RSS.
func (s *benchServer) throughput(b *testing.B, p benchProgram, c int, d time.Duration) throughputRow {
	b.Helper()
	var (
		peak atomic.Int64
		stop = make(chan struct{})
	)
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kib := s.rssKiB(); kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	host0, server0 := hostBusy(), procCPU(s.cmd.Process.Pid)
	row, errs := drive(p.name, c, until(d), func() error { _, err := s.callErr(p); return err })
	close(stop)
	if row.Runs > 0 {
		row.HostCPUMs = round(ms(hostBusy()-host0) / float64(row.Runs))
		row.ServerCPUMs = round(ms(procCPU(s.cmd.Process.Pid)-server0) / float64(row.Runs))
	}
	if len(errs) > 0 {
		b.Fatalf("%s at concurrency %d: %d calls failed; the first: %v\nstderr tail:\n%s", p.name, c, len(errs), errs[0], tail(s.stderr.String(), 2000))
	}
	row.PeakRSSMiB = round(float64(peak.Load()) / 1024)
	fmt.Fprintf(os.Stderr, "bench: %s at concurrency %d: %.1f runs/s, peak RSS %.1f MiB, CPU per run %.1f ms (server %.1f ms)\n", p.name, c, row.RunsPerSec, row.PeakRSSMiB, row.HostCPUMs, row.ServerCPUMs)
	return row
}

// drive calls once from c workers, each again as soon as its last call
// returned and for as long as more says, and sums up the calls as the
// throughput row of program; the row counts the calls that succeeded. A
// worker goes on after an error; drive returns every error, in the order
// the calls returned.
func drive(program string, c int, more func() bool, once func() error) (throughputRow, []error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
	)
	start := time.Now()
	for range c {
		wg.Go(func() {
			for more() {
				t0 := time.Now()
				err := once()
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					lat = append(lat, time.Since(t0))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	return throughputRow{
		Concurrency: c,
		Program:     program,
		Runs:        len(lat),
		Seconds:     round(elapsed.Seconds()),
		RunsPerSec:  round(float64(len(lat)) / elapsed.Seconds()),
		P50Ms:       ms(percentile(lat, 50)),
		P99Ms:       ms(percentile(lat, 99)),
	}, errs
}

// until returns a more for drive that says yes until d has passed.
func until(d time.Duration) func() bool {
	end := time.Now().Add(d)
	return func() bool { return time.Now().Before(end) }
}

// clockTick is the kernel's USER_HZ, the unit of /proc's CPU times.
const clockTick = 10 * time.Millisecond

// hostBusy is the CPU time the machine has spent busy since boot, all CPUs
// together: /proc/stat's first line but idle and iowait.
func hostBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 7 { // not idle, iowait, steal (another guest's); guest times are in user's
			busy += n
		}
	}
	return time.Duration(busy) * clockTick
}

// procCPU is the CPU time process pid has spent, its reaped children's
// included; 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var t int64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(f[i], 10, 64)
		t += n
	}
	return time.Duration(t) * clockTick
}

func (s *benchServer) rss() float64 { return round(float64(s.rssKiB()) / 1024) }

// rssKiB is the server's VmRSS, or 0 if it cannot be read.
func (s *benchServer) rssKiB() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}

var (
	logMsg  = regexp.MustCompile(`msg="?([^"=]*?)"? [a-z_]+=`)
	logAttr = regexp.MustCompile(`([a-z_]+)=("[^"]*"|\S+)`)
)

// logDurations returns, for the server's debug lines with message msg, each
// line's attributes that are durations.
func (s *benchServer) logDurations(msg string) []map[string]time.Duration {
	var out []map[string]time.Duration
	for _, line := range s.logAttrs(msg) {
		attrs := map[string]time.Duration{}
		for k, v := range line {
			if d, err := time.ParseDuration(v); err == nil {
				attrs[k] = d
			}
		}
		out = append(out, attrs)
	}
	return out
}

// destroyTimes are the "sandbox destroyed" durations logged so far.
func (s *benchServer) destroyTimes() []time.Duration {
	var out []time.Duration
	for _, a := range s.logDurations("sandbox destroyed") {
		if d, ok := a["took"]; ok {
			out = append(out, d)
		}
	}
	return out
}

// phases summarizes the "run phases" debug lines, if the server logs any:
// p50 and p99 of each duration attribute over every run of this server.
func (s *benchServer) phases() []string {
	by := map[string][]time.Duration{}
	for _, a := range s.logDurations("run phases") {
		for k, d := range a {
			by[k] = append(by[k], d)
		}
	}
	var out []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range by {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, fmt.Sprintf("%s p50 %.1f ms, p99 %.1f ms (n %d)", k, ms(percentile(by[k], 50)), ms(percentile(by[k], 99)), len(by[k])))
	}
	return out
}

// floorRow runs p's interpreter directly in an unpacked copy of its image,
// as the sandbox's user, with the sandbox's environment, from a program
// file: everything a run does but the container.
func floorRow(b *testing.B, p benchProgram, n int) latencyRow {
	b.Helper()
	lang := config.Default().Languages[p.lang]
	root, env := unpackedImage(b, lang.Image)
	dir := filepath.Join(root, strings.TrimPrefix(sandboxoci.CodeDir, "/"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(dir, lang.File)
	args := append(append([]string{}, lang.Command...), sandboxoci.ProgramPath(lang.File))
	env = sandboxoci.Env(env, lang.Env, nil)
	once := func() (time.Duration, error) {
		start := time.Now()
		os.Remove(file)
		if err := os.WriteFile(file, []byte(p.code), 0o444); err != nil {
			return 0, err
		}
		// The interpreter's path is inside the chroot; both images have
		// theirs in /usr/bin.
		cmd := &osexec.Cmd{Path: filepath.Join("/usr/bin", args[0]), Args: args}
		cmd.Env = env
		cmd.Dir = "/tmp"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("%v: %s", err, tail(stderr.String(), 500))
		}
		if stdout.String() != p.want {
			return 0, fmt.Errorf("got %q; want %q", tail(stdout.String(), 100), tail(p.want, 20))
		}
		return time.Since(start), nil
	}
	if _, err := once(); err != nil {
		b.Fatalf("floor %s: %v", p.name, err)
	}
	var lat []time.Duration
	for range n {
		d, err := once()
		if err != nil {
			b.Fatalf("floor %s: %v", p.name, err)
		}
		lat = append(lat, d)
	}
	row := summarize("floor: chroot, no container", p.name, lat)
	fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f ms\n", row.Runtime, p.name, row.P50Ms)
	return row
}

var (
	unpackedMu sync.Mutex
	unpacked   = map[string]unpackedRoot{}
)

type unpackedRoot struct {
	dir string
	env []string
}

// unpackedImage unpacks the archive of image ref from SANDBOX_IMAGES into a
// directory, once, and returns it with the image's environment.
func unpackedImage(b testing.TB, ref string) (string, []string) {
	b.Helper()
	unpackedMu.Lock()
	defer unpackedMu.Unlock()
	if u, ok := unpacked[ref]; ok {
		return u.dir, u.env
	}
	archive := archiveFor(b, ref)
	dir := filepath.Join(testDir, "floor", strings.NewReplacer("/", "_", ":", "_").Replace(ref))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	env, err := unpackOCI(archive, dir)
	if err != nil {
		b.Fatalf("unpack %s into %s: %v", archive, dir, err)
	}
	unpacked[ref] = unpackedRoot{dir, env}
	return dir, env
}

// archiveFor returns the archive in SANDBOX_IMAGES whose index names ref.
func archiveFor(b testing.TB, ref string) string {
	b.Helper()
	for _, p := range strings.Split(os.Getenv("SANDBOX_IMAGES"), ":") {
		if p == "" {
			continue
		}
		blobs, err := ociBlobs(p, func(h *tar.Header) bool { return h.Name == "index.json" })
		if err == nil && strings.Contains(string(blobs["index.json"]), `"`+ref+`"`) {
			return p
		}
	}
	b.Fatalf("no archive in SANDBOX_IMAGES holds %s", ref)
	return ""
}

// ociBlobs reads the entries of an OCI archive that keep says.
func ociBlobs(archive string, keep func(h *tar.Header) bool) (map[string][]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if keep(h) {
			if out[h.Name], err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
}

// unpackOCI extracts the layers of an OCI archive's first image into dir
// with tar(1) and returns the image's environment. Whiteouts are not
// applied: our images have a single layer.
func unpackOCI(archive, dir string) ([]string, error) {
	small, err := ociBlobs(archive, func(h *tar.Header) bool { return h.Size < 1<<20 })
	if err != nil {
		return nil, err
	}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	}
	blob := func(d desc, v any) error {
		data, ok := small["blobs/"+strings.Replace(d.Digest, ":", "/", 1)]
		if !ok {
			return fmt.Errorf("no blob %s", d.Digest)
		}
		return json.Unmarshal(data, v)
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(small["index.json"], &index); err != nil || len(index.Manifests) == 0 {
		return nil, fmt.Errorf("index.json: no manifest (%v)", err)
	}
	var manifest struct {
		Config desc
		Layers []desc
	}
	if err := blob(index.Manifests[0], &manifest); err != nil {
		return nil, err
	}
	var cfg struct {
		Config struct{ Env []string }
	}
	if err := blob(manifest.Config, &cfg); err != nil {
		return nil, err
	}
	for _, l := range manifest.Layers {
		if err := extractBlob(archive, "blobs/"+strings.Replace(l.Digest, ":", "/", 1), strings.Contains(l.MediaType, "gzip"), dir); err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return cfg.Config.Env, nil
}

// extractBlob pipes the archive's entry name, a layer, to tar -x in dir.
func extractBlob(archive, name string, gz bool, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("find %s: %w", name, err)
		}
		if h.Name == name {
			break
		}
	}
	var r io.Reader = tr
	if gz {
		zr, err := gzip.NewReader(tr)
		if err != nil {
			return err
		}
		r = zr
	}
	cmd := osexec.Command("tar", "-x", "-p", "--numeric-owner", "-C", dir, "-f", "-")
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, tail(string(out), 500))
	}
	return nil
}

// cliRow runs p through `rt run --rm` n times, or says why it cannot. The
// CLI is rt on PATH, but for docker BENCH_DOCKER when set: scripts/bench
// names the CLI of the dockerd it installs, whose version it matches.
func cliRow(b *testing.B, rt string, p benchProgram, n int) latencyRow {
	b.Helper()
	name := rt + " run --rm"
	unavailable := func(format string, args ...any) latencyRow {
		r := latencyRow{Runtime: name, Program: p.name, Unavailable: fmt.Sprintf(format, args...)}
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s not available: %s\n", name, p.name, r.Unavailable)
		return r
	}
	cli := rt
	if v := os.Getenv("BENCH_DOCKER"); rt == "docker" && v != "" {
		cli = v
	}
	if _, err := osexec.LookPath(cli); err != nil {
		return unavailable("%s is not installed", cli)
	}
	run := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := osexec.CommandContext(ctx, cli, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(stderr.String())
			if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
				msg = msg[i+1:]
			}
			return "", fmt.Errorf("`%s %s`: %v: %s", rt, args[0], err, tail(msg, 200))
		}
		return stdout.String(), nil
	}
	if _, err := run(30*time.Second, "info"); err != nil {
		return unavailable("%v", err)
	}
	lang := config.Default().Languages[p.lang]
	if _, err := run(30*time.Second, "image", "inspect", lang.Image); err != nil {
		fmt.Fprintf(os.Stderr, "bench: loading %s into %s (once; it stays in %s's store)\n", lang.Image, rt, rt)
		if _, err := run(10*time.Minute, "load", "-i", archiveFor(b, lang.Image)); err != nil {
			return unavailable("%v", err)
		}
	}
	flag := "-c"
	if p.lang == "javascript" {
		flag = "-e"
	}
	args := append(append([]string{"run", "--rm"}, containerFlags...), lang.Image, lang.Command[0], flag, p.code)
	once := func() (time.Duration, error) {
		start := time.Now()
		out, err := run(2*time.Minute, args...)
		if err != nil {
			return 0, err
		}
		if out != p.want {
			return 0, fmt.Errorf("got %q; want %q", tail(out, 100), tail(p.want, 20))
		}
		return time.Since(start), nil
	}
	if _, err := once(); err != nil {
		return unavailable("%v", err)
	}
	var lat []time.Duration
	for range n {
		d, err := once()
		if err != nil {
			return unavailable("%v", err)
		}
		lat = append(lat, d)
	}
	row := summarize(name, p.name, lat)
	fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f ms\n", name, p.name, row.P50Ms)
	return row
}

// machine describes this machine in a line.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d cores (%s), Linux %s", runtime.NumCPU(), model, strings.TrimSpace(string(kernel)))
}

// containerdVersion is the test daemon's version.
func containerdVersion(b *testing.B) string {
	b.Helper()
	v, err := testClient.Version(testContext(b))
	if err != nil {
		b.Fatal(err)
	}
	return v.Version
}

// row returns the latency row of runtime and program, or nil.
func (r *benchReport) row(runtime, program string) *latencyRow {
	for i := range r.Latency {
		if l := &r.Latency[i]; l.Runtime == runtime && l.Program == program && l.Unavailable == "" {
			return l
		}
	}
	return nil
}

func (r *benchReport) ours() string     { return fmt.Sprintf("ours, pool %d", r.Pool) }
func (r *benchReport) oursB2B() string  { return r.ours() + ", back to back" }
func (r *benchReport) oursNone() string { return "ours, pool 0" }

const floorName = "floor: chroot, no container"

// judge sets the targets of issue #5 from the measurements. The latency
// targets are judged on the paced pool row: the default configuration, at
// rest between calls.
func (r *benchReport) judge() {
	py, node := benchPrograms[0].name, benchPrograms[1].name
	add := func(name string, known bool, got string, met bool) {
		r.Targets = append(r.Targets, target{Name: name, Got: got, Met: met && known, Known: known})
	}
	ours, floor := r.row(r.ours(), py), r.row(floorName, py)
	if ours != nil && floor != nil {
		x := ours.P50Ms / floor.P50Ms
		add("python hello p50 <= 2x floor", true, fmt.Sprintf("%.1f ms vs %.1f ms: %.2fx", ours.P50Ms, floor.P50Ms, x), x <= 2)
	}
	oursN, floorN := r.row(r.ours(), node), r.row(floorName, node)
	if oursN != nil && floorN != nil {
		d := oursN.P50Ms - floorN.P50Ms
		add("node hello p50 <= floor + 25 ms", true, fmt.Sprintf("%.1f ms vs %.1f ms: %+.1f ms", oursN.P50Ms, floorN.P50Ms, d), d <= 25)
	}
	for _, c := range []struct {
		rt   string
		want float64
	}{{"docker", 8}, {"podman", 5}} {
		if !slices.ContainsFunc(r.Latency, func(l latencyRow) bool { return l.Runtime == c.rt+" run --rm" }) {
			continue // not part of this run
		}
		name := fmt.Sprintf("python hello p50 >= %gx faster than %s run --rm", c.want, c.rt)
		other := r.row(c.rt+" run --rm", py)
		if other == nil || ours == nil {
			reason := "not measured"
			for _, l := range r.Latency {
				if l.Runtime == c.rt+" run --rm" && l.Unavailable != "" {
					reason = "not measured: " + l.Unavailable
					break
				}
			}
			add(name, false, reason, false)
			continue
		}
		x := other.P50Ms / ours.P50Ms
		add(name, true, fmt.Sprintf("%.1f ms vs %.1f ms: %.2fx", other.P50Ms, ours.P50Ms, x), x >= c.want)
	}
	for _, t := range r.Throughput {
		if t.Concurrency == 8 && t.Program == py {
			got := fmt.Sprintf("%.1f runs/s", t.RunsPerSec)
			for _, p := range r.Throughput {
				if p.Concurrency == 8 && p.Program == platformName {
					got += fmt.Sprintf("; containerd + runc alone: %.1f runs/s (ours %.2fx that)", p.RunsPerSec, t.RunsPerSec/p.RunsPerSec)
				}
			}
			add("python hello >= 30 runs/s at concurrency 8", true, got, t.RunsPerSec >= 30)
		}
	}
	r.judgeWarm(add)
	r.judgeSessions(add)
	r.judgeHTTP(add)
	r.judgeStream(add)
	if r.IdleRSSMiB > 0 {
		add("server RSS <= 30 MiB idle", true, fmt.Sprintf("%.1f MiB", r.IdleRSSMiB), r.IdleRSSMiB <= 30)
	}
	for _, t := range r.Throughput {
		if t.Concurrency == 16 && t.Program == bigOutput.name {
			add("server RSS <= 80 MiB at concurrency 16, 64 KiB out", true, fmt.Sprintf("%.1f MiB peak", t.PeakRSSMiB), t.PeakRSSMiB <= 80)
		}
	}
	if s := r.Soak; s != nil {
		rss := "no RSS sample"
		if len(s.RSSMiB) > 0 {
			rss = fmt.Sprintf("RSS %.1f MiB after %d calls, %.1f MiB after %d", s.RSSMiB[0], soakEvery, s.RSSMiB[len(s.RSSMiB)-1], soakEvery*len(s.RSSMiB))
		}
		add("soak: 0 errors, RSS flat (the last sample <= 1.1x the first), nothing left after exit", len(s.RSSMiB) > 0,
			fmt.Sprintf("%d errors in %d calls, %s, %d things wrong at or after exit", s.Errors, s.Calls, rss, len(s.AfterExit)),
			s.Errors == 0 && s.flat() && len(s.AfterExit) == 0)
	}
	r.judgeSoakHTTP(add)
	if len(r.FirstResult) > 0 {
		worst := slices.Max(r.FirstResult)
		add("first result <= 1 s after the server starts", true,
			fmt.Sprintf("worst %.0f ms of %d starts (each: %v ms)", worst, len(r.FirstResult), r.FirstResult), worst <= 1000)
	}
	r.paceTargets()
}

// table renders the report as Markdown.
func (r *benchReport) table() string {
	var w strings.Builder
	fmt.Fprintf(&w, "\n%s, %s, containerd %s; default pool %d per language\n\n", r.Date, r.Machine, r.Containerd, r.Pool)
	r.writeMeasures(&w)
	r.writeRatios(&w)
	r.writeExtras(&w)
	r.writeCPU(&w)
	r.writeTargets(&w)
	return w.String()
}

// benchNum is a table's number: one decimal, or nothing for zero.
func benchNum(f float64) string {
	if f == 0 {
		return ""
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// writeMeasures writes the latency and throughput tables, the idle RSS,
// the sessions' memory and the first results.
func (r *benchReport) writeMeasures(w *strings.Builder) {
	num := benchNum
	if len(r.Latency) > 0 {
		fmt.Fprintf(w, "| runtime | program | n | p50 ms | p95 ms | p99 ms | run p50 ms | destroy p50 ms |\n")
		fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|\n")
		for _, l := range r.Latency {
			if l.Unavailable != "" {
				fmt.Fprintf(w, "| %s | %s | not available: %s |||||| \n", l.Runtime, l.Program, l.Unavailable)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", l.Runtime, l.Program, l.N, num(l.P50Ms), num(l.P95Ms), num(l.P99Ms), num(l.RunP50Ms), num(l.DestroyP50))
		}
		fmt.Fprintf(w, "\nrun p50: the server's duration_ms (from the program's start to its exit). destroy p50: the server's debug \"sandbox destroyed\" took, off the response path.\n")
	}
	if len(r.Throughput) > 0 {
		fmt.Fprintf(w, "\n| concurrency | program | runs | runs/s | p50 ms | p99 ms | peak RSS MiB | CPU ms/run | server CPU ms/run |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", t.Concurrency, t.Program, t.Runs, t.RunsPerSec, t.P50Ms, t.P99Ms, t.PeakRSSMiB, t.HostCPUMs, t.ServerCPUMs)
		}
	}
	if r.IdleRSSMiB > 0 {
		fmt.Fprintf(w, "\nidle RSS after start, pools full: %.1f MiB.\n", r.IdleRSSMiB)
	}
	for _, lang := range []string{"python", "javascript"} {
		if m, ok := r.SessionMemMiB[lang]; ok {
			fmt.Fprintf(w, "memory of an idle %s session (its memory cgroup): %.1f MiB.\n", lang, m)
		}
	}
	if len(r.FirstResult) > 0 {
		fmt.Fprintf(w, "\nfirst result after exec: %v ms.\n", r.FirstResult)
	}
	if r.StreamNotify != nil {
		fmt.Fprintf(w, "\n%s\n", r.StreamNotify)
	}

}

// writeRatios writes each program's p50 ratios: ours to the floor, pool 0
// to the pool, podman and docker to ours.
func (r *benchReport) writeRatios(w *strings.Builder) {
	var ratios []string
	for _, p := range benchPrograms {
		floor := r.row(floorName, p.name)
		var parts []string
		for _, rt := range []string{r.ours(), r.oursB2B(), r.oursNone()} {
			if o := r.row(rt, p.name); o != nil && floor != nil {
				parts = append(parts, fmt.Sprintf("%s %.2fx floor (%+.1f ms)", rt, o.P50Ms/floor.P50Ms, o.P50Ms-floor.P50Ms))
			}
		}
		ours := r.row(r.ours(), p.name)
		if none := r.row(r.oursNone(), p.name); none != nil && ours != nil {
			parts = append(parts, fmt.Sprintf("pool 0 / pool %d %.2fx", r.Pool, none.P50Ms/ours.P50Ms))
		}
		if plain, netw := r.row(plainRuntime, p.name), r.row(networkRuntime, p.name); plain != nil && netw != nil {
			parts = append(parts, fmt.Sprintf("with a network / without %.2fx (%+.1f ms)", netw.P50Ms/plain.P50Ms, netw.P50Ms-plain.P50Ms))
		}
		for _, rt := range []string{"podman", "docker"} {
			if o := r.row(rt+" run --rm", p.name); o != nil && ours != nil {
				parts = append(parts, fmt.Sprintf("%s / ours %.2fx", rt, o.P50Ms/ours.P50Ms))
			}
		}
		if len(parts) > 0 {
			ratios = append(ratios, fmt.Sprintf("- %s: %s\n", p.name, strings.Join(parts, "; ")))
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(w, "\nratios of p50:\n\n%s", strings.Join(ratios, ""))
	}
}

// writeExtras writes the soaks, the run phases and the ready sandboxes'
// memory.
func (r *benchReport) writeExtras(w *strings.Builder) {
	if s := r.Soak; s != nil {
		fmt.Fprintf(w, "\nsoak: %s.\n", s)
		for _, e := range s.FirstErrors {
			fmt.Fprintf(w, "- error: %s\n", e)
		}
		for _, e := range s.AfterExit {
			fmt.Fprintf(w, "- after exit: %s\n", e)
		}
	}
	if s := r.SoakHTTP; s != nil {
		w.WriteString(s.table())
	}
	if len(r.Phases) > 0 {
		fmt.Fprintf(w, "\nrun phases (server debug log, pool %d server, every run):\n\n", r.Pool)
		for _, p := range r.Phases {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
	if len(r.WarmPhases) > 0 {
		fmt.Fprintf(w, "\na warm call, phase by phase (paced, pool %d):\n\n", r.Pool)
		for _, p := range r.WarmPhases {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
	if len(r.ReadyMemMiB) > 0 {
		fmt.Fprintf(w, "\nmemory a ready sandbox holds (its memory cgroup, MiB):\n\n")
		for _, k := range slices.Sorted(maps.Keys(r.ReadyMemMiB)) {
			fmt.Fprintf(w, "- %s: %.1f\n", k, r.ReadyMemMiB[k])
		}
	}
}

// writeTargets writes the targets, met or not, and the notes.
func (r *benchReport) writeTargets(w *strings.Builder) {
	fmt.Fprintf(w, "\n| target (issues #5, #15, #30) | got | |\n|---|---|---|\n")
	for _, t := range r.Targets {
		verdict := "not met"
		switch {
		case !t.Known:
			verdict = "unknown"
		case t.Met:
			verdict = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.Name, t.Got, verdict)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

// summarize makes a latency row of samples.
func summarize(runtime, program string, lat []time.Duration) latencyRow {
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return latencyRow{
		Runtime: runtime,
		Program: program,
		N:       len(lat),
		P50Ms:   ms(percentile(lat, 50)),
		P95Ms:   ms(percentile(lat, 95)),
		P99Ms:   ms(percentile(lat, 99)),
		MeanMs:  ms(sum / time.Duration(max(len(lat), 1))),
	}
}

// percentile is the nearest-rank percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

func round(f float64) float64 { return math.Round(f*10) / 10 }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

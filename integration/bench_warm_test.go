package integration

// The warm-interpreter parts of make bench (issue 15): the pool as it ran
// before warm interpreters (warm = false), beside the default's warm rows
// of the "pool" part; a warm call broken down into its phases; and what a
// ready sandbox holds in memory.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/mark3labs/mcp-go/mcp"
)

// coldRuntime names the rows of the pool with warm = false.
func (r *benchReport) oursCold() string { return r.ours() + ", cold (warm = false)" }

// coldRows measures the paced programs on a server whose languages are not
// warm: ready sandboxes wait in /bin/sh, and each call starts its
// interpreter, as before issue 15.
func coldRows(b *testing.B, bin string, rep *benchReport, samples func(benchProgram) int) {
	s := startBench(b, bin, "concurrency = 16\n[languages.python]\nwarm = false\n[languages.javascript]\nwarm = false\n")
	defer s.close(b)
	s.waitQuiet(b, 2*rep.Pool)
	for _, p := range benchPrograms {
		rep.Latency = append(rep.Latency, s.latency(b, rep.oursCold(), p, samples(p), 2*rep.Pool))
	}
}

// phasePrograms print the time at which the program began, and the time
// at which it ended (in its last exit handler), in Unix nanoseconds (for
// Node.js, to the microsecond).
var phasePrograms = map[string]string{
	"run_python_code": "import atexit, time\nprint(time.time_ns())\natexit.register(lambda: print(time.time_ns()))",
	"run_js_code": "const now = () => Math.round((performance.timeOrigin + performance.now()) * 1e6).toString()\n" +
		"console.log(now())\nprocess.on('exit', () => console.log(now()))",
}

// warmPhases breaks n paced calls of each language down, warm and cold:
// the server logs when it wrote the program and started it (on the host's
// clock: for a warm or stub sandbox, the line it sent), and when it learnt
// of the exit; the program prints when it began and when its last exit
// handler ran. So a call is: write (program and files), wake (the start
// to the program's first statement: for a cold sandbox, the interpreter's
// start), program (to its exit handler), exit (the interpreter's exit,
// the kernel's and containerd's word of it), and report (the output's
// end, output files, the result back to the client through MCP).
func warmPhases(b *testing.B, bin string, n int, rep *benchReport) {
	for _, cold := range []bool{false, true} {
		toml := "concurrency = 16\n"
		if cold {
			toml += "[languages.python]\nwarm = false\n[languages.javascript]\nwarm = false\n"
		}
		s := startBench(b, bin, toml)
		s.phases15(b, n, cold, rep)
		s.close(b)
	}
}

func (s *benchServer) phases15(b *testing.B, n int, cold bool, rep *benchReport) {
	kind := "warm"
	if cold {
		kind = "cold (warm = false)"
	}
	for _, tool := range []string{"run_python_code", "run_js_code"} {
		s.waitQuiet(b, 2*rep.Pool)
		before := len(s.logAttrs("run phases"))
		var began, ended []int64
		var total []time.Duration
		for range n {
			s.waitQuiet(b, 2*rep.Pool)
			start := time.Now()
			text, err := s.callText(tool, phasePrograms[tool])
			if err != nil {
				b.Fatalf("%s phases: %v", tool, err)
			}
			total = append(total, time.Since(start))
			f := strings.Fields(text)
			var t0, t1 int64
			if len(f) == 2 {
				t0, err = strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					t1, err = strconv.ParseInt(f[1], 10, 64)
				}
			}
			if len(f) != 2 || err != nil {
				b.Fatalf("%s phases: the program printed %q; want its start and end in Unix nanoseconds", tool, text)
			}
			began, ended = append(began, t0), append(ended, t1)
		}
		// The server's log is copied as it comes: the last line may
		// trail the last result a little.
		var lines []map[string]string
		waitFor(5*time.Second, func() bool { lines = s.logAttrs("run phases")[before:]; return len(lines) >= n })
		if len(lines) != n {
			b.Fatalf("%s phases: %d run phases lines for %d calls", tool, len(lines), n)
		}
		var write, wake, prog, exit, report, tot []time.Duration
		other := 0
		for i, a := range lines {
			if (a["warm"] == "true") == cold {
				other++
				continue
			}
			sent, _ := strconv.ParseInt(a["sent_ns"], 10, 64)
			w, _ := time.ParseDuration(a["write"])
			st, _ := time.ParseDuration(a["start"])
			r, _ := time.ParseDuration(a["run"])
			wk := time.Duration(began[i] - sent)
			pr := time.Duration(ended[i] - began[i])
			write = append(write, w)
			wake = append(wake, wk)
			prog = append(prog, pr)
			exit = append(exit, r-wk-pr)
			report = append(report, total[i]-w-st-r)
			tot = append(tot, total[i])
		}
		if len(tot) == 0 {
			b.Fatalf("%s phases: no call was %s", tool, kind)
		}
		p := func(d []time.Duration) float64 { return ms(percentile(d, 50)) }
		line := fmt.Sprintf("%s, %s, p50 of %d: write %.2f ms, wake %.2f ms, program %.2f ms, exit %.2f ms, report %.2f ms; whole call %.2f ms",
			tool, kind, len(tot), p(write), p(wake), p(prog), p(exit), p(report), p(tot))
		if other > 0 {
			line += fmt.Sprintf(" (%d calls of the other kind left out)", other)
		}
		fmt.Fprintf(os.Stderr, "bench: %s\n", line)
		rep.WarmPhases = append(rep.WarmPhases, line)
	}
}

// callText calls tool with code and returns the result's text.
func (s *benchServer) callText(tool, code string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, done := s.take()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"code": code}}})
	done()
	runs.Add(1)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("an error result: %+v", res.Content)
	}
	t, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("no text: %+v", res.Content)
	}
	return t.Text, nil
}

// logAttrs returns, for the server's debug lines with message msg, each
// line's attributes as written.
func (s *benchServer) logAttrs(msg string) []map[string]string {
	var out []map[string]string
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := logMsg.FindStringSubmatch(line)
		if m == nil || m[1] != msg {
			continue
		}
		attrs := map[string]string{}
		for _, a := range logAttr.FindAllStringSubmatch(line, -1) {
			attrs[a[1]] = strings.Trim(a[2], `"`)
		}
		out = append(out, attrs)
	}
	return out
}

// readyMemory reads what the ready sandboxes of the test namespace hold in
// their memory cgroups, by kind: a warm Python one that imported numpy
// and pandas, one that did not, a warm Node.js one, one in the stub.
func readyMemory(b *testing.B) map[string]float64 {
	ts, err := sandboxTasks(testContext(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := testContext(b)
	out := map[string]float64{}
	for _, id := range append(append([]string(nil), ts.warm...), ts.stub...) {
		task, err := testClient.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: id})
		if err != nil {
			continue
		}
		pid, cmd, _ := programOf(task.Process.Pid)
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		kind := "in the stub"
		switch c := string(cmd); {
		case strings.Contains(c, "python") && strings.Contains(string(maps), "pandas"):
			kind = "python, warm, numpy and pandas imported"
		case strings.Contains(c, "python"):
			kind = "python, warm, nothing imported"
		case strings.Contains(c, "node"):
			kind = "javascript, warm"
		}
		if used, ok := cgroupMemory(pid); ok {
			out[kind] = round(float64(used) / (1 << 20))
		}
	}
	return out
}

// cgroupMemory reads the memory in use of pid's memory cgroup.
func cgroupMemory(pid uint32) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var file string
		switch {
		case f[0] == "0" && f[1] == "":
			file = filepath.Join("/sys/fs/cgroup", f[2], "memory.current")
		case strings.Contains(","+f[1]+",", ",memory,"):
			file = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.usage_in_bytes")
		default:
			continue
		}
		v, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		if err == nil {
			return n, true
		}
	}
	return 0, false
}

// judgeWarm sets issue 15's targets.
func (r *benchReport) judgeWarm(add func(name string, known bool, got string, met bool)) {
	py, node, np := benchPrograms[0].name, benchPrograms[1].name, benchPrograms[2].name
	ratio := func(name, runtime, program string, want float64) {
		ours, floor := r.row(runtime, program), r.row(floorName, program)
		if ours == nil || floor == nil {
			return
		}
		x := ours.P50Ms / floor.P50Ms
		got := fmt.Sprintf("%.1f ms vs %.1f ms: %.2fx", ours.P50Ms, floor.P50Ms, x)
		if cold := r.row(r.oursCold(), program); cold != nil && runtime == r.ours() {
			got += fmt.Sprintf(" (cold, warm = false: %.1f ms, %.2fx)", cold.P50Ms, cold.P50Ms/floor.P50Ms)
		}
		add(name, true, got, x <= want)
	}
	ratio("warm python hello p50 <= 0.6x floor", r.ours(), py, 0.6)
	ratio("warm python numpy+pandas p50 <= 0.3x its floor", r.ours(), np, 0.3)
	ratio("warm node hello p50 <= 0.3x floor", r.ours(), node, 0.3)
	ratio("python hello back to back p50 <= 2x floor", r.oursB2B(), py, 2)
	var ours, platform float64
	for _, t := range r.Throughput {
		switch {
		case t.Concurrency == 8 && t.Program == py:
			ours = t.RunsPerSec
		case t.Concurrency == 8 && t.Program == platformName:
			platform = t.RunsPerSec
		}
	}
	if ours > 0 && platform > 0 {
		add("python hello at concurrency 8 >= 0.9x containerd + runc alone", true,
			fmt.Sprintf("%.1f vs %.1f runs/s: %.2fx", ours, platform, ours/platform), ours >= 0.9*platform)
	}
}

package integration

// GET /metrics through the real binary: beside /mcp behind its token
// check, on a listener of its own (--metrics-addr) over HTTP and stdio,
// and counts that match the runs, sessions and refused requests made.

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

// metricsLine is the log line the server promises once /metrics has a
// listener of its own.
var metricsLine = regexp.MustCompile(`msg="serving metrics" listen=(\S+)`)

// metricsListen waits for the address of the metrics listener in stderr.
func metricsListen(t *testing.T, stderr *syncBuffer) string {
	t.Helper()
	addr, ok := waitLogged(stderr, metricsLine)
	if !ok {
		t.Fatalf("the server did not say where it serves metrics within 30s; stderr:\n%s", stderr)
	}
	return addr
}

// scrape is one GET of url with token (none if empty): its status and,
// if 200, its metric families.
type scrape struct {
	status   int
	families map[string]*dto.MetricFamily
}

func getMetrics(t *testing.T, url, token string) scrape {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := scrape{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		return s
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q; want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if s.families, err = p.TextToMetricFamilies(resp.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return s
}

// value is the value of the series of name whose labels are exactly
// labels ("k=v" each): a counter's or a gauge's value, a histogram's
// count. A series that is not there fails the test.
func (s scrape) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	f, ok := s.families[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if strings.Join(got, ",") != strings.Join(labels, ",") {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
		t.Fatalf("%s is a %s", name, f.GetType())
	}
	t.Fatalf("no series %s{%s}", name, strings.Join(labels, ","))
	return 0
}

// sum adds up every series of name, as value reads each.
func (s scrape) sum(t *testing.T, name string) float64 {
	t.Helper()
	total := 0.0
	for _, m := range s.families[name].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		total += s.value(t, name, labels...)
	}
	return total
}

func TestHTTPMetricsCountTheRuns(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, ready: true})
	url := s.base + "/metrics"
	authRefusalsBeforeAnyRun(t, s, url, tokens["alice"])

	c := s.connect(t, tokens["alice"])
	ctx := testContext(t)
	runs := []struct {
		tool string
		args map[string]any
	}{
		{"run_python_code", code("print(1)")},
		{"run_python_code", code("print(2)")},
		{"run_python_code", code("print(3)")},
		{"run_python_code", code("import sys\nsys.exit(2)")},
		// 3 s, not 1: on a loaded host a sandbox made on demand can take
		// over a second, and a run whose timeout ends while its sandbox is
		// made is an error, not a timeout (TestRunOutOfTimeWhileItsSandboxIsMade).
		{"run_js_code", map[string]any{"code": "while (true) {}", "timeout_seconds": 3}},
	}
	for _, r := range runs {
		if text, _ := callRaw(ctx, t, c, r.tool, r.args, nil); text == "" {
			t.Fatalf("%s %v: no text", r.tool, r.args)
		}
	}

	runMetrics(t, getMetrics(t, url, tokens["alice"]))
	sessionMetrics(t, c, url, tokens["alice"])
}

// authRefusalsBeforeAnyRun checks that /metrics of s, at url, takes the
// same checks as /mcp: without token, or with one that is not its, it is
// refused; with token it counts no run yet. The refusals are counted by
// runMetrics.
func authRefusalsBeforeAnyRun(t *testing.T, s *httpServer, url, token string) {
	t.Helper()
	if got := getMetrics(t, url, "").status; got != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d; want 401", got)
	}
	if got := getMetrics(t, url, httpauth.NewToken()).status; got != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a wrong token: %d; want 401", got)
	}
	if status, _, _ := s.post(t, nil); status != http.StatusUnauthorized {
		t.Errorf("POST /mcp without a token: %d; want 401", status)
	}
	before := getMetrics(t, url, token)
	if before.status != http.StatusOK {
		t.Fatalf("GET /metrics with the token: %d; want 200", before.status)
	}
	if got := before.sum(t, "code_sandbox_runs_total"); got != 0 {
		t.Errorf("runs before any: %v; want 0", got)
	}
}

// runMetrics checks m, scraped after TestHTTPMetricsCountTheRuns' five
// runs (three python runs, a python failure, a javascript timeout) and
// the three refusals of authRefusalsBeforeAnyRun.
func runMetrics(t *testing.T, m scrape) {
	t.Helper()
	for _, tc := range []struct {
		lang, outcome string
		want          float64
	}{
		{"python", "ok", 3}, {"python", "error", 1}, {"javascript", "timeout", 1},
	} {
		if got := m.value(t, "code_sandbox_runs_total", "language="+tc.lang, "outcome="+tc.outcome); got != tc.want {
			t.Errorf("runs_total{%s,%s}: %v; want %v", tc.lang, tc.outcome, got, tc.want)
		}
	}
	if got := m.sum(t, "code_sandbox_runs_total"); got != 5 {
		t.Errorf("runs_total of every language and outcome: %v; want 5", got)
	}
	for _, tc := range []struct {
		name, lang string
		want       float64
	}{
		{"code_sandbox_run_duration_seconds", "python", 4},
		{"code_sandbox_run_duration_seconds", "javascript", 1},
		{"code_sandbox_queue_wait_seconds", "python", 4},
		{"code_sandbox_queue_wait_seconds", "javascript", 1},
		{"code_sandbox_runs_in_flight", "python", 0},
		{"code_sandbox_runs_in_flight", "javascript", 0},
	} {
		if got := m.value(t, tc.name, "language="+tc.lang); got != tc.want {
			t.Errorf("%s{%s}: %v; want %v", tc.name, tc.lang, got, tc.want)
		}
	}
	// Both languages have pools: each one-shot run is a hit or a miss.
	for lang, want := range map[string]float64{"python": 4, "javascript": 1} {
		hits := m.value(t, "code_sandbox_pool_takes_total", "language="+lang, "result=hit")
		misses := m.value(t, "code_sandbox_pool_takes_total", "language="+lang, "result=miss")
		if hits+misses != want {
			t.Errorf("pool takes of %s: %v hits and %v misses; want %v in all", lang, hits, misses, want)
		}
	}
	if got := m.sum(t, "code_sandbox_sandbox_create_seconds"); got < 5 {
		t.Errorf("sandboxes created: %v; want at least one a run, 5", got)
	}
	if got := m.value(t, "code_sandbox_auth_failures_total", "reason=missing"); got != 2 {
		t.Errorf("auth failures for a missing token: %v; want 2", got)
	}
	if got := m.value(t, "code_sandbox_auth_failures_total", "reason=invalid"); got != 1 {
		t.Errorf("auth failures for a wrong token: %v; want 1", got)
	}
	if got := m.sum(t, "code_sandbox_build_info"); got != 1 {
		t.Errorf("build_info: %v; want 1", got)
	}

}

// sessionMetrics checks that a session of client c counts as open while
// it lives, that a cell is a run, and that it counts as ended once
// closed, in the metrics at url, read with token.
func sessionMetrics(t *testing.T, c *client.Client, url, token string) {
	t.Helper()
	ctx := testContext(t)
	// A session: open while it lives, a cell is a run, ended once closed.
	var created createdSession
	if text, isErr := callRaw(ctx, t, c, "create_session", map[string]any{"language": "python"}, &created); isErr {
		t.Fatalf("create_session: %q", text)
	}
	if text, isErr := callRaw(ctx, t, c, "run_python_code", map[string]any{"code": "x = 1", "session_id": created.SessionID}, nil); isErr {
		t.Fatalf("a cell: %q", text)
	}
	m := getMetrics(t, url, token)
	if got := m.value(t, "code_sandbox_sessions_open"); got != 1 {
		t.Errorf("sessions_open with one session: %v; want 1", got)
	}
	if got := m.value(t, "code_sandbox_runs_total", "language=python", "outcome=ok"); got != 4 {
		t.Errorf("runs_total{python,ok} after a cell: %v; want 4", got)
	}
	if text, isErr := callRaw(ctx, t, c, "close_session", map[string]any{"session_id": created.SessionID}, nil); isErr {
		t.Fatalf("close_session: %q", text)
	}
	m = getMetrics(t, url, token)
	if got := m.value(t, "code_sandbox_sessions_open"); got != 0 {
		t.Errorf("sessions_open once closed: %v; want 0", got)
	}
	if got := m.value(t, "code_sandbox_sessions_ended_total", "language=python"); got != 1 {
		t.Errorf("sessions_ended_total{python}: %v; want 1", got)
	}
}

func TestHTTPMetricsOnTheirOwnListener(t *testing.T) {
	path, tokens := tokenFile(t, "prometheus")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path, "--metrics-addr", "127.0.0.1:0"}})
	addr := metricsListen(t, s.stderr)
	if got := getMetrics(t, s.base+"/metrics", tokens["prometheus"]).status; got != http.StatusNotFound {
		t.Errorf("GET /metrics beside /mcp with --metrics-addr: %d; want 404", got)
	}
	if got := getMetrics(t, "http://"+addr+"/metrics", "").status; got != http.StatusUnauthorized {
		t.Errorf("GET /metrics on its listener without a token: %d; want 401", got)
	}
	m := getMetrics(t, "http://"+addr+"/metrics", tokens["prometheus"])
	if m.status != http.StatusOK {
		t.Fatalf("GET /metrics on its listener with the token: %d; want 200", m.status)
	}
	if got := m.value(t, "code_sandbox_auth_failures_total", "reason=missing"); got != 1 {
		t.Errorf("auth failures on the metrics listener: %v; want 1", got)
	}
}

func TestMetricsOverStdio(t *testing.T) {
	s := startMCP(t, serverSpec{args: []string{"--metrics-addr", "127.0.0.1:0"}, ready: true})
	url := "http://" + metricsListen(t, s.stderr) + "/metrics"
	ctx := testContext(t)
	if r := s.call(ctx, t, "run_python_code", code("print(42)")); r.isError {
		t.Fatalf("a run: %q", r.text)
	}
	m := getMetrics(t, url, "")
	if m.status != http.StatusOK {
		t.Fatalf("GET /metrics (loopback, no tokens): %d; want 200", m.status)
	}
	if got := m.value(t, "code_sandbox_runs_total", "language=python", "outcome=ok"); got != 1 {
		t.Errorf("runs_total{python,ok}: %v; want 1", got)
	}
	if got := m.value(t, "code_sandbox_run_duration_seconds", "language=python"); got != 1 {
		t.Errorf("run_duration_seconds{python} count: %v; want 1", got)
	}
	if got := m.sum(t, "code_sandbox_runs_total"); got != 1 {
		t.Errorf("runs_total of every language and outcome: %v; want 1", got)
	}
	// The pools fill at start: once containerd is connected the gauge
	// reads them.
	if !waitFor(30*time.Second, func() bool {
		return getMetrics(t, url, "").value(t, "code_sandbox_pool_ready", "language=javascript") > 0
	}) {
		t.Errorf("pool_ready{javascript} stayed 0")
	}
}

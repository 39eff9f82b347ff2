package metrics

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"code-sandbox-mcp/exec"
)

// fakeSource is an executor's pools and sessions.
type fakeSource struct {
	pools    map[string]int
	sessions int
}

func (f fakeSource) PoolSizes() map[string]int { return f.pools }
func (f fakeSource) SessionCount() int         { return f.sessions }

func TestOutcome(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		res  *exec.Result
		err  error
		want string
	}{
		{"exit 0", ctx, &exec.Result{}, nil, outcomeOK},
		{"exit 2", ctx, &exec.Result{ExitCode: 2}, nil, outcomeError},
		{"killed", ctx, &exec.Result{ExitCode: 137, Signal: "SIGKILL"}, nil, outcomeSignal},
		{"timed out (and killed)", ctx, &exec.Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, nil, outcomeTimeout},
		{"out of memory (and killed)", ctx, &exec.Result{ExitCode: 137, Signal: "SIGKILL", OOMKilled: true}, nil, outcomeOOM},
		{"invalid argument", ctx, nil, fmt.Errorf("timeout too long: %w", errdefs.ErrInvalidArgument), outcomeRefused},
		{"unknown session", ctx, nil, fmt.Errorf("session x: %w", exec.ErrNoSession), outcomeRefused},
		{"image missing", ctx, nil, fmt.Errorf("image: %w", errdefs.ErrNotFound), outcomeFailed},
		{"containerd gone", ctx, nil, exec.ErrNotAnswering, outcomeFailed},
		{"the caller went away", cancelled, nil, context.Canceled, outcomeCancelled},
		{"a result although the caller went away", cancelled, &exec.Result{}, nil, outcomeOK},
	} {
		if got := outcome(tc.ctx, tc.res, tc.err); got != tc.want {
			t.Errorf("%s: got %s; want %s", tc.name, got, tc.want)
		}
	}
}

func TestRunCounts(t *testing.T) {
	m := New("v1", []string{"python", "js"}, func() Source { return nil })
	inFlight := make(chan float64, 1)
	run := m.Run(func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		inFlight <- testutil.ToFloat64(m.inFlight.WithLabelValues(req.Language))
		switch req.Code {
		case "ok":
			return &exec.Result{}, nil
		case "exit":
			return &exec.Result{ExitCode: 2}, nil
		case "timeout":
			return &exec.Result{TimedOut: true, ExitCode: 137, Signal: "SIGKILL"}, nil
		}
		return nil, errors.New("no sandbox")
	})
	for _, r := range []exec.Request{
		{Language: "python", Code: "ok"}, {Language: "python", Code: "ok"}, {Language: "python", Code: "ok"},
		{Language: "python", Code: "exit"}, {Language: "js", Code: "timeout"}, {Language: "js", Code: "broken"},
	} {
		if _, err := run(context.Background(), r); (err != nil) != (r.Code == "broken") {
			t.Fatalf("%+v: %v", r, err)
		}
		if got := <-inFlight; got != 1 {
			t.Errorf("in flight during a run: got %v; want 1", got)
		}
	}
	for _, tc := range []struct {
		lang, outcome string
		want          float64
	}{
		{"python", outcomeOK, 3}, {"python", outcomeError, 1}, {"python", outcomeTimeout, 0},
		{"js", outcomeTimeout, 1}, {"js", outcomeFailed, 1}, {"js", outcomeOK, 0},
	} {
		if got := testutil.ToFloat64(m.runs.WithLabelValues(tc.lang, tc.outcome)); got != tc.want {
			t.Errorf("runs_total{%s,%s}: got %v; want %v", tc.lang, tc.outcome, got, tc.want)
		}
	}
	for _, l := range []string{"python", "js"} {
		if got := testutil.ToFloat64(m.inFlight.WithLabelValues(l)); got != 0 {
			t.Errorf("%s in flight after the runs: got %v; want 0", l, got)
		}
	}
	// Durations vary; the counts are certain.
	out := scrape(t, m)
	for _, line := range []string{`code_sandbox_run_duration_seconds_count{language="python"} 4`, `code_sandbox_run_duration_seconds_count{language="js"} 2`} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("the exposition lacks %q", line)
		}
	}
	if !strings.Contains(out, "# TYPE code_sandbox_run_duration_seconds histogram\n") {
		t.Errorf("run_duration_seconds is not a histogram")
	}
}

func TestHooksChainAndCount(t *testing.T) {
	m := New("v1", []string{"python"}, func() Source { return nil })
	var calls []string
	h := m.Hooks(exec.Hooks{
		SessionEnded: func(info exec.SessionInfo, why string) { calls = append(calls, "audit "+info.ID+": "+why) },
	})
	h.SandboxCreated("python", 200*time.Millisecond, nil)
	h.SandboxCreated("python", 300*time.Millisecond, nil)
	h.SandboxCreated("python", time.Second, errors.New("no snapshot"))
	h.PoolTake("python", true)
	h.PoolTake("python", false)
	h.PoolTake("python", false)
	h.QueueWait("python", 5*time.Millisecond)
	h.SessionEnded(exec.SessionInfo{ID: "s1", Language: "python"}, "closed")
	if want := []string{"audit s1: closed"}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("the hook given: got %q; want %q", calls, want)
	}
	want := `
# HELP code_sandbox_pool_takes_total One-shot runs of a language with a ready pool, by whether a ready sandbox was there (hit) or the run created its own (miss).
# TYPE code_sandbox_pool_takes_total counter
code_sandbox_pool_takes_total{language="python",result="hit"} 1
code_sandbox_pool_takes_total{language="python",result="miss"} 2
# HELP code_sandbox_sandbox_create_failures_total Sandboxes that could not be created.
# TYPE code_sandbox_sandbox_create_failures_total counter
code_sandbox_sandbox_create_failures_total{language="python"} 1
# HELP code_sandbox_sessions_ended_total Sessions that ended, for whatever reason (closed, idle, too old, gone, server shutdown).
# TYPE code_sandbox_sessions_ended_total counter
code_sandbox_sessions_ended_total{language="python"} 1
`
	if err := testutil.GatherAndCompare(m.gatherer(), strings.NewReader(want),
		"code_sandbox_pool_takes_total", "code_sandbox_sandbox_create_failures_total", "code_sandbox_sessions_ended_total"); err != nil {
		t.Error(err)
	}
	out := scrape(t, m)
	for _, line := range []string{
		`code_sandbox_sandbox_create_seconds_count{language="python"} 2`,
		`code_sandbox_sandbox_create_seconds_sum{language="python"} 0.5`,
		`code_sandbox_queue_wait_seconds_count{language="python"} 1`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("the exposition lacks %q", line)
		}
	}
}

func TestHooksNoneGiven(t *testing.T) {
	m := New("v1", []string{"python"}, func() Source { return nil })
	h := m.Hooks(exec.Hooks{})
	h.SessionEnded(exec.SessionInfo{Language: "python"}, "idle")
	if got := testutil.ToFloat64(m.sessionsEnded.WithLabelValues("python")); got != 1 {
		t.Errorf("sessions ended: got %v; want 1", got)
	}
}

func TestAuthFailures(t *testing.T) {
	m := New("v1", nil, func() Source { return nil })
	m.AuthFailed(AuthMissing)
	m.AuthFailed(AuthMissing)
	m.AuthFailed(AuthMalformed)
	m.AuthFailed("Bearer s3cret")
	want := `
# HELP code_sandbox_auth_failures_total HTTP requests refused for their Authorization header: missing, malformed (not one "Bearer TOKEN"), or invalid (no client's token).
# TYPE code_sandbox_auth_failures_total counter
code_sandbox_auth_failures_total{reason="invalid"} 1
code_sandbox_auth_failures_total{reason="malformed"} 1
code_sandbox_auth_failures_total{reason="missing"} 2
`
	if err := testutil.GatherAndCompare(m.gatherer(), strings.NewReader(want), "code_sandbox_auth_failures_total"); err != nil {
		t.Error(err)
	}
}

func TestConnectionsRefused(t *testing.T) {
	m := New("v1", nil, func() Source { return nil })
	m.ConnRefused(ConnMaxPerClient)
	m.ConnRefused(ConnMaxPerClient)
	m.ConnRefused(ConnMaxTotal)
	m.ConnRefused("127.0.0.1")
	want := `
# HELP code_sandbox_connections_refused_total Connections closed as soon as accepted, on the /mcp listener or the metrics listener, for the bound they would pass: max_connections (all clients together) or max_connections_per_client (one remote address).
# TYPE code_sandbox_connections_refused_total counter
code_sandbox_connections_refused_total{reason="max_connections"} 1
code_sandbox_connections_refused_total{reason="max_connections_per_client"} 2
`
	if err := testutil.GatherAndCompare(m.gatherer(), strings.NewReader(want), "code_sandbox_connections_refused_total"); err != nil {
		t.Error(err)
	}
}

func TestExecutorGauges(t *testing.T) {
	var src Source
	m := New("v1", []string{"js", "python"}, func() Source { return src })
	want := func(pyPool, sessions int) string {
		return fmt.Sprintf(`
# HELP code_sandbox_pool_ready Ready sandboxes waiting in a language's pool now (0 before containerd is connected).
# TYPE code_sandbox_pool_ready gauge
code_sandbox_pool_ready{language="js"} 0
code_sandbox_pool_ready{language="python"} %d
# HELP code_sandbox_sessions_open Sessions open now, of all clients.
# TYPE code_sandbox_sessions_open gauge
code_sandbox_sessions_open %d
`, pyPool, sessions)
	}
	if err := testutil.GatherAndCompare(m.gatherer(), strings.NewReader(want(0, 0)), "code_sandbox_pool_ready", "code_sandbox_sessions_open"); err != nil {
		t.Errorf("before an executor: %v", err)
	}
	src = fakeSource{pools: map[string]int{"python": 2, "js": 0}, sessions: 3}
	if err := testutil.GatherAndCompare(m.gatherer(), strings.NewReader(want(2, 3)), "code_sandbox_pool_ready", "code_sandbox_sessions_open"); err != nil {
		t.Errorf("with an executor: %v", err)
	}
}

func TestSeriesFromTheStart(t *testing.T) {
	m := New("v1.2.3", []string{"python"}, func() Source { return nil })
	out := scrape(t, m)
	for _, line := range []string{
		`code_sandbox_build_info{version="v1.2.3"} 1`,
		`code_sandbox_runs_total{language="python",outcome="failed"} 0`,
		`code_sandbox_runs_in_flight{language="python"} 0`,
		`code_sandbox_auth_failures_total{reason="invalid"} 0`,
		`code_sandbox_connections_refused_total{reason="max_connections_per_client"} 0`,
		`code_sandbox_run_duration_seconds_bucket{language="python",le="300"} 0`,
		`code_sandbox_run_duration_seconds_bucket{language="python",le="0.005"} 0`,
		`code_sandbox_network_connections_total{language="python",result="refused"} 0`,
		`code_sandbox_network_bytes_total{direction="down",language="python"} 0`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("a fresh registry lacks %q", line)
		}
	}
	for _, prefix := range []string{"go_goroutines ", "process_open_fds "} {
		if !strings.Contains(out, "\n"+prefix) {
			t.Errorf("the exposition lacks %s", prefix)
		}
	}
}

// scrape serves one GET of the handler and returns its text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// A run's connections through its proxy are counted, allowed and
// refused apart, with their bytes both ways.
func TestNetworkCounts(t *testing.T) {
	m := New("v1", []string{"python"}, func() Source { return nil })
	run := m.Run(func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return &exec.Result{Network: []exec.NetworkRecord{
			{Host: "a.example", Allowed: true, BytesUp: 10, BytesDown: 100},
			{Host: "b.example", Allowed: true, BytesUp: 5, BytesDown: 50},
			{Host: "c.example"},
		}, NetworkRest: []exec.NetworkTally{
			{Host: "a.example", Allowed: true, Connections: 3, BytesUp: 1, BytesDown: 2},
			{Host: "", Connections: 4000, Reason: "over the limit"},
		}}, nil
	})
	if _, err := run(context.Background(), exec.Request{Language: "python"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v    *prometheus.CounterVec
		l    []string
		want float64
	}{
		{m.netConns, []string{"python", "allowed"}, 5},
		{m.netConns, []string{"python", "refused"}, 4001},
		{m.netBytes, []string{"python", "up"}, 16},
		{m.netBytes, []string{"python", "down"}, 152},
	} {
		if got := testutil.ToFloat64(tc.v.WithLabelValues(tc.l...)); got != tc.want {
			t.Errorf("%v: got %v; want %v", tc.l, got, tc.want)
		}
	}
}

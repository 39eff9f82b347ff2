// Package metrics is the Prometheus face of code-sandbox-mcp: the
// counters, gauges and histograms of the runs, the sandboxes, the ready
// pools, the queue, the sessions, the failed authentications and the
// refused connections, in a registry of its own, and the handler that
// serves them. It is told of events through a RunFunc wrapper,
// exec.Hooks, AuthFailed and ConnRefused, and reads the pool and session
// gauges from a Source at each scrape. It must not know flags, MCP or a
// transport: where /metrics is served, and behind which checks, is its
// caller's business.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"code-sandbox-mcp/exec"
)

// namespace prefixes every metric of the server's own.
const namespace = "code_sandbox"

// The outcomes of a run, the outcome label of code_sandbox_runs_total: a
// closed set, in the order Outcome tests them.
const (
	// outcomeCancelled: the caller went away (or cancelled the call)
	// before the program finished; there is no result.
	outcomeCancelled = "cancelled"
	// outcomeRefused: the request was refused before anything ran (an
	// invalid argument, an unknown session): the caller's fault.
	outcomeRefused = "refused"
	// outcomeFailed: the server could not run the program (containerd,
	// the image, the sandbox, no free uid, shutting down): its fault.
	outcomeFailed = "failed"
	// outcomeTimeout: the program ran past its timeout and was killed.
	outcomeTimeout = "timeout"
	// outcomeOOM: the program ran out of memory and was killed.
	outcomeOOM = "oom"
	// outcomeSignal: a signal killed the program, other than for a
	// timeout or out of memory.
	outcomeSignal = "signal"
	// outcomeError: the program exited with a non-zero status.
	outcomeError = "error"
	// outcomeOK: the program exited 0.
	outcomeOK = "ok"
)

// outcomes lists every outcome, for the HELP text and to start each
// language's counters at 0.
var outcomes = []string{outcomeOK, outcomeError, outcomeSignal, outcomeTimeout, outcomeOOM, outcomeRefused, outcomeFailed, outcomeCancelled}

// The reasons of code_sandbox_auth_failures_total: a closed set, so no
// label ever holds what a client sent.
const (
	AuthMissing   = "missing"   // no Authorization header
	AuthMalformed = "malformed" // not one header of "Bearer TOKEN"
	AuthInvalid   = "invalid"   // a well-formed token that is no client's
)

// authReasons lists every auth failure reason.
var authReasons = []string{AuthMissing, AuthMalformed, AuthInvalid}

// The reasons of code_sandbox_connections_refused_total, named after the
// [http] settings that refused them: a closed set.
const (
	ConnMaxTotal     = "max_connections"            // all clients' connections together
	ConnMaxPerClient = "max_connections_per_client" // one remote address's
)

// connReasons lists every connection refusal reason.
var connReasons = []string{ConnMaxTotal, ConnMaxPerClient}

// Buckets, in seconds.
var (
	// runBuckets span a 5 ms error to a 5 min program.
	runBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// createBuckets span a warm snapshot (tens of ms) to a slow disk.
	createBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// queueBuckets start at no wait to speak of and end at a run's
	// longest timeout.
	queueBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}
)

// Source is what the gauges read of an executor at each scrape;
// *exec.Executor is one.
type Source interface {
	// PoolSizes returns, per language, how many ready sandboxes wait.
	PoolSizes() map[string]int
	// SessionCount returns how many sessions are open.
	SessionCount() int
}

// RunFunc runs one program; (*exec.Executor).Run is one.
type RunFunc func(ctx context.Context, req exec.Request) (*exec.Result, error)

// Metrics are the server's metrics. Its methods may be called from many
// goroutines at once.
type Metrics struct {
	reg *prometheus.Registry

	runs           *prometheus.CounterVec
	runDuration    *prometheus.HistogramVec
	inFlight       *prometheus.GaugeVec
	createSeconds  *prometheus.HistogramVec
	createFailures *prometheus.CounterVec
	poolTakes      *prometheus.CounterVec
	queueWait      *prometheus.HistogramVec
	sessionsEnded  *prometheus.CounterVec
	authFailures   *prometheus.CounterVec
	connsRefused   *prometheus.CounterVec
	netConns       *prometheus.CounterVec
	netBytes       *prometheus.CounterVec
}

// New returns the metrics of a server of version running languages,
// each language's series present (at 0) from the start. source returns
// the executor the pool and session gauges read, or nil while there is
// none (then no sandbox waits and no session is open). The registry also
// holds the Go runtime's and the process's collectors: they cost a
// runtime/metrics read and a few reads of /proc/self a scrape, and the
// goroutine, memory and open-file counts are the first thing to look at
// in a server that serves many clients for long.
func New(version string, languages []string, source func() Source) *Metrics {
	m := newMetrics()
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; the version label is the server's version.",
	}, []string{"version"})
	buildInfo.WithLabelValues(version).Set(1)
	m.reg.MustRegister(m.runs, m.runDuration, m.inFlight, m.createSeconds, m.createFailures,
		m.poolTakes, m.queueWait, m.sessionsEnded, m.authFailures, m.connsRefused, m.netConns, m.netBytes, buildInfo,
		&executorCollector{languages: languages, source: source},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.zero(languages)
	return m
}

// newMetrics returns the metrics' vectors, in a registry that holds none
// of them yet.
func newMetrics() *Metrics {
	lang := []string{"language"}
	return &Metrics{
		reg: prometheus.NewRegistry(),
		runs: counter("runs_total", "Programs run, one-shot or in a session, by language and outcome: "+
			"ok (exit 0), error (non-zero exit), signal (killed by a signal), timeout, oom, "+
			"refused (invalid request, unknown session: nothing ran), "+
			"failed (the server could not run it: containerd, image, sandbox), "+
			"cancelled (the caller went away first).", []string{"language", "outcome"}),
		runDuration:    histogram("run_duration_seconds", "Time a run call took, queue and sandbox creation included, whatever its outcome.", runBuckets, lang),
		inFlight:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "runs_in_flight", Help: "Run calls in progress, queued ones included."}, lang),
		createSeconds:  histogram("sandbox_create_seconds", "Time to create a sandbox that was created, for a run, a ready pool or a session.", createBuckets, lang),
		createFailures: counter("sandbox_create_failures_total", "Sandboxes that could not be created.", lang),
		poolTakes:      counter("pool_takes_total", "One-shot runs of a language with a ready pool, by whether a ready sandbox was there (hit) or the run created its own (miss).", []string{"language", "result"}),
		queueWait:      histogram("queue_wait_seconds", "Time a one-shot run or a session's cell waited for one of the concurrency slots.", queueBuckets, lang),
		sessionsEnded:  counter("sessions_ended_total", "Sessions that ended, for whatever reason (closed, idle, too old, gone, server shutdown).", lang),
		authFailures:   counter("auth_failures_total", "HTTP requests refused for their Authorization header: missing, malformed (not one \"Bearer TOKEN\"), or invalid (no client's token).", []string{"reason"}),
		connsRefused: counter("connections_refused_total", "Connections closed as soon as accepted, on the /mcp listener or the metrics listener, for the bound they would pass: "+
			"max_connections (all clients together) or max_connections_per_client (one remote address).", []string{"reason"}),
		netConns: counter("network_connections_total", "Connections sandboxes opened through their network proxy, by language and whether the proxy allowed them (allowed) or not (refused); "+
			"counted when the run or the session's cell that saw them ends.", []string{"language", "result"}),
		netBytes: counter("network_bytes_total", "Bytes through sandboxes' network proxies, by language and direction: up (from the sandbox) or down (to it).", []string{"language", "direction"}),
	}
}

// counter and histogram are vectors of the server's namespace.
func counter(name, help string, labels []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

// zero makes each series of each language, and of each reason, present
// at 0, so that a rate over it is defined from the start.
func (m *Metrics) zero(languages []string) {
	for _, l := range languages {
		for _, o := range outcomes {
			m.runs.WithLabelValues(l, o)
		}
		m.runDuration.WithLabelValues(l)
		m.inFlight.WithLabelValues(l)
		m.createSeconds.WithLabelValues(l)
		m.createFailures.WithLabelValues(l)
		m.poolTakes.WithLabelValues(l, "hit")
		m.poolTakes.WithLabelValues(l, "miss")
		m.queueWait.WithLabelValues(l)
		m.sessionsEnded.WithLabelValues(l)
		for _, r := range []string{"allowed", "refused"} {
			m.netConns.WithLabelValues(l, r)
		}
		for _, d := range []string{"up", "down"} {
			m.netBytes.WithLabelValues(l, d)
		}
	}
	for _, r := range authReasons {
		m.authFailures.WithLabelValues(r)
	}
	for _, r := range connReasons {
		m.connsRefused.WithLabelValues(r)
	}
}

// gatherer returns the registry, for tests and for serving elsewhere.
func (m *Metrics) gatherer() prometheus.Gatherer { return m.reg }

// Handler serves the metrics in the Prometheus text (or protobuf)
// exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Run returns next counted: each call is in flight while it runs, and
// then counted by language and Outcome with its duration.
func (m *Metrics) Run(next RunFunc) RunFunc {
	return func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		g := m.inFlight.WithLabelValues(req.Language)
		g.Inc()
		defer g.Dec()
		start := time.Now()
		res, err := next(ctx, req)
		m.runDuration.WithLabelValues(req.Language).Observe(time.Since(start).Seconds())
		m.runs.WithLabelValues(req.Language, outcome(ctx, res, err)).Inc()
		if res != nil {
			m.network(req.Language, res.Network, res.NetworkRest)
		}
		return res, err
	}
}

// network counts a run's connections through its proxy, those it lists
// and those it tallies.
func (m *Metrics) network(lang string, recs []exec.NetworkRecord, rest []exec.NetworkTally) {
	var up, down int64
	count := func(allowed bool, n int64) {
		result := "refused"
		if allowed {
			result = "allowed"
		}
		m.netConns.WithLabelValues(lang, result).Add(float64(n))
	}
	for _, r := range recs {
		count(r.Allowed, 1)
		up += r.BytesUp
		down += r.BytesDown
	}
	for _, t := range rest {
		count(t.Allowed, t.Connections)
		up += t.BytesUp
		down += t.BytesDown
	}
	if up > 0 || down > 0 {
		m.netBytes.WithLabelValues(lang, "up").Add(float64(up))
		m.netBytes.WithLabelValues(lang, "down").Add(float64(down))
	}
}

// outcome classifies what a run returned, one of outcomes; ctx is the
// run's, which tells a cancelled call from a failed one.
func outcome(ctx context.Context, res *exec.Result, err error) string {
	switch {
	case err != nil && ctx.Err() != nil:
		return outcomeCancelled
	case err != nil && (errdefs.IsInvalidArgument(err) || errors.Is(err, exec.ErrNoSession)):
		return outcomeRefused
	case err != nil || res == nil:
		return outcomeFailed
	case res.TimedOut:
		return outcomeTimeout
	case res.OOMKilled:
		return outcomeOOM
	case res.Signal != "":
		return outcomeSignal
	case res.ExitCode != 0:
		return outcomeError
	default:
		return outcomeOK
	}
}

// Hooks returns h with each of its hooks also counted here: h's own hook
// runs first, then the metric's.
func (m *Metrics) Hooks(h exec.Hooks) exec.Hooks {
	created, take, wait, ended := h.SandboxCreated, h.PoolTake, h.QueueWait, h.SessionEnded
	h.SandboxCreated = func(language string, d time.Duration, err error) {
		if created != nil {
			created(language, d, err)
		}
		if err != nil {
			m.createFailures.WithLabelValues(language).Inc()
			return
		}
		m.createSeconds.WithLabelValues(language).Observe(d.Seconds())
	}
	h.PoolTake = func(language string, hit bool) {
		if take != nil {
			take(language, hit)
		}
		result := "miss"
		if hit {
			result = "hit"
		}
		m.poolTakes.WithLabelValues(language, result).Inc()
	}
	h.QueueWait = func(language string, d time.Duration) {
		if wait != nil {
			wait(language, d)
		}
		m.queueWait.WithLabelValues(language).Observe(d.Seconds())
	}
	h.SessionEnded = func(info exec.SessionInfo, why string) {
		if ended != nil {
			ended(info, why)
		}
		m.sessionsEnded.WithLabelValues(info.Language).Inc()
	}
	return h
}

// AuthFailed counts a request refused for its Authorization header;
// reason is AuthMissing, AuthMalformed or AuthInvalid, and any other
// value counts as AuthInvalid, so that the label's set stays closed.
func (m *Metrics) AuthFailed(reason string) {
	switch reason {
	case AuthMissing, AuthMalformed:
	default:
		reason = AuthInvalid
	}
	m.authFailures.WithLabelValues(reason).Inc()
}

// ConnRefused counts a connection refused for reason, ConnMaxTotal or
// ConnMaxPerClient; any other value is not counted, so that the label's
// set stays closed.
func (m *Metrics) ConnRefused(reason string) {
	switch reason {
	case ConnMaxTotal, ConnMaxPerClient:
		m.connsRefused.WithLabelValues(reason).Inc()
	}
}

var (
	poolReadyDesc = prometheus.NewDesc(namespace+"_pool_ready",
		"Ready sandboxes waiting in a language's pool now (0 before containerd is connected).", []string{"language"}, nil)
	sessionsOpenDesc = prometheus.NewDesc(namespace+"_sessions_open",
		"Sessions open now, of all clients.", nil, nil)
)

// executorCollector reads the pool and session gauges from the executor
// at each scrape.
type executorCollector struct {
	languages []string
	source    func() Source
}

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolReadyDesc
	ch <- sessionsOpenDesc
}

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	var sizes map[string]int
	sessions := 0
	if s := c.source(); s != nil {
		sizes, sessions = s.PoolSizes(), s.SessionCount()
	}
	seen := map[string]bool{}
	for _, l := range c.languages {
		seen[l] = true
		ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(sizes[l]), l)
	}
	for l, n := range sizes {
		if !seen[l] {
			ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(n), l)
		}
	}
	ch <- prometheus.MustNewConstMetric(sessionsOpenDesc, prometheus.GaugeValue, float64(sessions))
}

package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/connlimit"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/metrics"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// metricsGrace bounds how long the metrics listener lets a scrape in
// flight finish at shutdown.
const metricsGrace = 5 * time.Second

// telemetry is the server's Prometheus metrics and where they are
// served: GET /metrics beside /mcp, behind the same checks, or on a
// listener of its own (--metrics-addr), over HTTP and stdio alike. A nil
// *telemetry counts nothing and serves nothing.
type telemetry struct {
	m *metrics.Metrics
	// addr is the listener of its own; empty: /metrics is beside /mcp.
	addr     string
	loopback bool
	// tokens are asked of a scraper on addr; nil: none.
	tokens  *httpauth.Tokens
	origins []string
	// conns are [http]'s bounds on addr's connections.
	conns connBounds
	// lx is the executor the pool and session gauges read, once
	// serveMCP has made it.
	lx atomic.Pointer[lazyExecutor]
}

// newTelemetry makes the metrics of a server of cfg at version, and
// checks where the flags (over [http]) say to serve them: a listener of
// its own beyond loopback must ask for tokens, as --http must.
func newTelemetry(f HTTPFlags, cfg *config.Config, version string) (*telemetry, error) {
	t := &telemetry{addr: cfg.HTTP.MetricsAddr, conns: connBoundsOf(cfg.HTTP)}
	t.m = metrics.New(version, cfg.Names(), t.source)
	if f.MetricsAddr != "" {
		t.addr = f.MetricsAddr
	}
	if t.addr == "" {
		return t, nil
	}
	var err error
	if t.tokens, t.origins, err = guards(f, cfg); err != nil {
		return nil, err
	}
	if t.loopback, err = exposure("--metrics-addr", t.addr, t.tokens != nil,
		"read what the server runs and for whom", "with a token for the scraper: `code-sandbox-mcp token new prometheus --append FILE`"); err != nil {
		return nil, err
	}
	return t, nil
}

// source is the executor of lx if there is one, for the gauges.
func (t *telemetry) source() metrics.Source {
	lx := t.lx.Load()
	if lx == nil {
		return nil
	}
	s, _ := lx.current().(metrics.Source)
	return s
}

// hooks returns ec with its hooks also counted, whatever hooks it has.
func (t *telemetry) hooks(ec exec.Config) exec.Config {
	if t != nil {
		ec.Hooks = t.m.Hooks(ec.Hooks)
	}
	return ec
}

// instrument returns lx's Run counted, and lets the gauges read lx's
// executor.
func (t *telemetry) instrument(lx *lazyExecutor) mcpserver.RunFunc {
	if t == nil {
		return lx.Run
	}
	t.lx.Store(lx)
	return mcpserver.RunFunc(t.m.Run(lx.Run))
}

// authReasons and connReasons are the metrics' names of Require's and
// connBounds' reasons; a reason not in authReasons counts as invalid.
var (
	authReasons = map[string]string{
		httpauth.ReasonMissing:   metrics.AuthMissing,
		httpauth.ReasonMalformed: metrics.AuthMalformed,
	}
	connReasons = map[string]string{
		connlimit.ReasonTotal:     metrics.ConnMaxTotal,
		connlimit.ReasonPerClient: metrics.ConnMaxPerClient,
	}
)

// authFailed counts a request Require refused, by its reason.
func (t *telemetry) authFailed(reason string) {
	if t == nil {
		return
	}
	r, ok := authReasons[reason]
	if !ok {
		r = metrics.AuthInvalid
	}
	t.m.AuthFailed(r)
}

// connRefused counts a connection refused by a listener's connBounds,
// by its reason.
func (t *telemetry) connRefused(reason string) {
	if r, ok := connReasons[reason]; ok && t != nil {
		t.m.ConnRefused(r)
	}
}

// besideMCP returns the /metrics handler to serve beside /mcp, or nil if
// /metrics has a listener of its own (or there are no metrics).
func (t *telemetry) besideMCP() http.Handler {
	if t == nil || t.addr != "" {
		return nil
	}
	return t.m.Handler()
}

// serve starts the listener of its own, if there is one, and returns
// what stops it: a scrape in flight may finish for up to metricsGrace.
// Once listening it logs the address, so that a test (or a user who
// asked for port 0) learns the port.
func (t *telemetry) serve(logger *slog.Logger) (stop func(), err error) {
	if t == nil || t.addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	h := t.m.Handler()
	if t.tokens != nil {
		h = httpauth.Require(t.tokens, h, func(r *http.Request, reason string) {
			logger.Warn("authentication failed", "reason", reason, "remote", r.RemoteAddr, "path", r.URL.Path)
			t.authFailed(reason)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", httpauth.CheckHost(httpauth.CheckOrigin(t.origins, h)))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: t.conns.readHeaderTimeout(),
		ReadTimeout:       t.conns.read,
		IdleTimeout:       t.conns.idle,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.Handler = connlimit.PerWrite(srv.Handler, t.conns.write)
	ln = t.conns.listen(ln, true, t, logger)
	if !t.loopback {
		logger.Warn("serving metrics beyond loopback over plain HTTP: the scraper's token crosses the network in clear; put a TLS proxy in front, or listen on 127.0.0.1")
	}
	logger.Info("serving metrics", "listen", ln.Addr().String(), "path", "/metrics", "auth", t.tokens != nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving metrics stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsGrace)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-served
	}, nil
}

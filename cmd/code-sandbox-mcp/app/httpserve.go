package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/clientlimit"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/connlimit"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

const (
	// healthTimeout bounds one /healthz check.
	healthTimeout = 5 * time.Second
	// readHeaderTimeout bounds how long a client may take to send a
	// request's headers, unless [http] read_timeout, the bound of the
	// whole request, is shorter.
	readHeaderTimeout = 10 * time.Second
)

// httpSettings are HTTPFlags over the [http] configuration, checked.
type httpSettings struct {
	addr            string
	tokens          *httpauth.Tokens // nil: no authentication
	origins         []string
	tlsCert, tlsKey string
	loopback        bool
	// tel are the server's metrics; nil: none.
	tel *telemetry
	// authFailed, if set, is told of each request refused for its token.
	authFailed func(r *http.Request, reason string)
	// grace is how long calls in flight may finish after SIGTERM.
	grace time.Duration
	// conns are [http]'s bounds on the listener's connections.
	conns connBounds
	// maxBody bounds a request's body to /mcp ([http]
	// max_request_bytes); limits, if not nil, counts each initialize in
	// its client's rate. serveHTTP sets both.
	maxBody int64
	limits  *clientlimit.Limiter
}

// resolveHTTP applies the flags over cfg's [http] table, loads the token
// file and checks what is not allowed: a listener beyond loopback without
// tokens, half a TLS pair, an origin that is not one.
func resolveHTTP(f HTTPFlags, cfg *config.Config) (httpSettings, error) {
	hs := httpSettings{addr: f.Addr, tlsCert: f.TLSCert, tlsKey: f.TLSKey, grace: f.Grace, conns: connBoundsOf(cfg.HTTP)}
	if hs.grace < 0 {
		return hs, fmt.Errorf("--shutdown-grace %s: want a duration of 0 or more, such as 30s", hs.grace)
	}
	var err error
	if hs.tokens, hs.origins, err = guards(f, cfg); err != nil {
		return hs, err
	}
	if (hs.tlsCert == "") != (hs.tlsKey == "") {
		return hs, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	}
	if hs.tlsCert != "" {
		if _, err := tls.LoadX509KeyPair(hs.tlsCert, hs.tlsKey); err != nil {
			return hs, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
	}
	hs.loopback, err = exposure("--http", hs.addr, hs.tokens != nil,
		"run code", "make a token with `code-sandbox-mcp token new NAME --append FILE`")
	return hs, err
}

// exposure reports whether listener flag's address addr is loopback
// only, and refuses one beyond loopback without tokens, saying what
// anyone who reached it could do and how to make the token it needs.
func exposure(flag, addr string, tokens bool, could, makeToken string) (loopback bool, err error) {
	loopback, err = httpauth.LoopbackOnly(addr)
	if err != nil {
		return false, fmt.Errorf("%s: %w", flag, err)
	}
	if !loopback && !tokens {
		return false, fmt.Errorf("%s %s listens beyond loopback without --auth-tokens, so anyone who reaches it could %s: give --auth-tokens FILE (%s), or listen on 127.0.0.1", flag, addr, could, makeToken)
	}
	return loopback, nil
}

// guards are what the flags, over cfg's [http] table, ask of a request to
// /mcp or /metrics: the tokens of --auth-tokens (nil: none) and the
// browser origins of --allowed-origins, each checked.
func guards(f HTTPFlags, cfg *config.Config) (*httpauth.Tokens, []string, error) {
	origins := cfg.HTTP.AllowedOrigins
	if f.OriginsSet {
		origins = f.Origins
	}
	for _, o := range origins {
		if _, err := httpauth.ParseOrigin(o); err != nil {
			return nil, nil, fmt.Errorf("--allowed-origins: %w", err)
		}
	}
	path := cfg.HTTP.AuthTokens
	if f.AuthTokens != "" {
		path = f.AuthTokens
	}
	if path == "" {
		return nil, origins, nil
	}
	tokens, err := httpauth.Load(path)
	return tokens, origins, err
}

// principalOf names the client of a call: the token's name over HTTP,
// "local" where there is none (HTTP without tokens, on loopback).
func principalOf(ctx context.Context) string {
	if name, ok := httpauth.Principal(ctx); ok {
		return name
	}
	return "local"
}

// httpHandler routes /mcp to mcp, and GET /metrics to hs.tel's metrics
// unless they have a listener of their own, through the Host and Origin
// checks and, with tokens, the bearer check, and /healthz, which needs
// none of them, to the readiness of lx.
func httpHandler(mcp http.Handler, hs httpSettings, ready func(context.Context) error, logger *slog.Logger) http.Handler {
	guard := func(h http.Handler) http.Handler {
		if hs.tokens != nil {
			h = httpauth.Require(hs.tokens, h, func(r *http.Request, reason string) {
				logger.Warn("authentication failed", "reason", reason, "remote", r.RemoteAddr)
				hs.tel.authFailed(reason)
				if hs.authFailed != nil {
					hs.authFailed(r, reason)
				}
			})
		}
		return httpauth.CheckHost(httpauth.CheckOrigin(hs.origins, h))
	}
	health := &healthLog{logger: logger}
	mux := http.NewServeMux()
	mux.Handle("/mcp", guard(mcp))
	if m := hs.tel.besideMCP(); m != nil {
		mux.Handle("GET /metrics", guard(m))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		err := ready(ctx)
		health.note(err)
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", notReadyReason(err))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// notReadyReason is what /healthz, which anyone who reaches the port may
// ask, says of err: a class, never err itself, which can name images,
// paths and the containerd socket. The full reason is in the log.
func notReadyReason(err error) string {
	switch {
	case errors.Is(err, errShuttingDown):
		return "the server is shutting down"
	case errors.Is(err, errNotConnected), errors.Is(err, exec.ErrNotAnswering), errdefs.IsUnavailable(err),
		grpcCode(err) == codes.Unavailable, grpcCode(err) == codes.DeadlineExceeded:
		return "containerd is not answering"
	default:
		// The rest of what Ready reports is per language: an image
		// missing (errdefs NotFound), failing to pull or to prepare, or
		// still being prepared.
		return "an image is not ready"
	}
}

// grpcCode is the code of the first gRPC status in err's tree, OK if
// there is none.
func grpcCode(err error) codes.Code {
	var s interface{ GRPCStatus() *status.Status }
	if errors.As(err, &s) {
		return s.GRPCStatus().Code()
	}
	return codes.OK
}

// healthLog logs, at warn, why the server is not ready, once per change
// of the reason (a probe every few seconds would repeat it otherwise),
// and once, at info, that it is ready again.
type healthLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   string // the last reason logged; "" when ready
}

// note logs err if it differs from the last reason.
func (h *healthLog) note(err error) {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if reason == h.last {
		return
	}
	switch {
	case err != nil:
		h.logger.Warn("/healthz: not ready", "err", err)
	case h.last != "":
		h.logger.Info("/healthz: ready again")
	}
	h.last = reason
}

// serveHTTP serves MCP over streamable HTTP at /mcp on s's address, each
// client within clientLimits, until ctx is cancelled (SIGINT, SIGTERM).
// Then it stops accepting, lets the calls in flight finish for up to the
// grace period, cancels those left, and closes the executor as stdio
// does.
func (s *Server) serveHTTP(ctx context.Context) error {
	cfg, logger, hs := s.cfg, s.logger, *s.hs
	ln, err := net.Listen("tcp", hs.addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	// Closed by the server's Shutdown once serving; this closes it if
	// serving never began (the metrics listener failed, say).
	defer ln.Close()
	if err := s.aud.start(cfg, s.env, "http", ln.Addr().String()); err != nil {
		return err
	}
	hs.authFailed = s.aud.authFailed
	cl := clientLimits(cfg, hs.tokens.Len())
	hs.maxBody, hs.limits = cfg.RequestBytes(), clientlimit.New(cl)
	ec := s.aud.observe(hs.tel.hooks(ExecConfig(cfg, s.env, logger)))
	ec.Sessions.MaxPerOwner = cfg.ClientSessions()
	logger.Info("per-client limits", "per_client_concurrency", cl.Concurrency, "rate_limit", cl.Rate, "rate_burst", cl.Burst,
		"per_client_sessions", ec.Sessions.MaxPerOwner, "max_request_bytes", hs.maxBody)
	err = s.serveMCP(ctx, connect(ec, logger), principalOf, hs.tokens.Len(), func(ctx context.Context, ms *server.MCPServer, lx *lazyExecutor) error {
		// Under systemd (Type=notify): READY=1 once /healthz's check passes.
		defer notifySystemd(ctx, s.env, lx.Ready, logger)()
		return serveListener(ctx, ln, ms, lx.Ready, hs, logger)
	}, server.WithToolHandlerMiddleware(hs.limits.Middleware))
	s.aud.shutdown(ctx, err)
	return err
}

// clientLimits are what [http] allows each client, as principalOf names
// it: a share of the runs (per_client_concurrency), counted over the
// language tools' calls, and a rate of tool calls of any tool
// (rate_limit, rate_burst). They are HTTP's: over stdio there is one
// client, whose calls queue for [sandbox] concurrency instead. principals
// is how many clients the token file names (0 without one): a lone client
// gets all of [sandbox] concurrency unless per_client_concurrency says
// otherwise.
func clientLimits(cfg *config.Config, principals int) clientlimit.Config {
	tools := map[string]time.Duration{}
	for _, l := range cfg.Enabled() {
		tools[l.Tool] = l.Limits.Timeout
	}
	return clientlimit.Config{
		Principal: principalOf, Concurrency: cfg.ClientConcurrency(principals), Tools: tools,
		Rate: cfg.HTTP.RateLimit, Burst: cfg.HTTP.RateBurst,
	}
}

// noEventStreamText is what a GET of /mcp is told.
const noEventStreamText = "no standalone SSE stream: this server sends its messages to a client on the stream of the POST they belong to"

// noEventStream answers a GET of /mcp, and a HEAD (a GET without the
// body), with 405 and Allow: POST, DELETE, as MCP allows a server that
// offers no stream of its own messages beside the POSTs; clients then go
// on without one. mcp-go (v1.2.1) keeps one queue of notifications per
// MCP session, from which every stream open on the session takes: with a
// GET stream open, a call's streamed output could go out there instead
// of on the call's POST, out of order, or after the call's result, when
// the client drops it. The server sends nothing unasked for that a client
// needs. A GET gets the same answer whatever MCP session it names, so
// next, which checks the session's owner, never sees one.
func noEventStream(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			w.Header().Set("Allow", "POST, DELETE")
			http.Error(w, noEventStreamText, http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveListener is serveHTTP's transport on the listener ln.
func serveListener(ctx context.Context, ln net.Listener, s *server.MCPServer, ready func(context.Context) error, hs httpSettings, logger *slog.Logger) error {
	sessions := newMCPSessions()
	// noEventStream refuses GETs before mcp-go sees them; should one
	// reach it, mcp-go refuses it too.
	mcp := server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"), server.WithStreamableHTTPLogger(logger),
		server.WithSessionIdManagerResolver(sessions), server.WithSessionIdleTTL(mcpSessionIdle), server.WithDisableStreaming(true))
	front := &mcpFront{mcp: mcp, limit: hs.maxBody, budget: newBodyBudget(hs.maxBody, hs.conns.read/2), logger: logger}
	if hs.limits != nil {
		front.initialize = hs.limits.Initialize
	}
	sessions.forgotten = front.end
	srv := &http.Server{
		Handler:           httpHandler(noEventStream(sessions.check(front)), hs, ready, logger),
		ReadHeaderTimeout: hs.conns.readHeaderTimeout(),
		ReadTimeout:       hs.conns.read,
		IdleTimeout:       hs.conns.idle,
		HTTP2:             &http.HTTP2Config{WriteByteTimeout: hs.conns.write},
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Outermost, so that every write of every handler has its bound.
	srv.Handler = connlimit.PerWrite(srv.Handler, hs.conns.write)
	useTLS := hs.tlsCert != ""
	ln = hs.conns.listen(ln, !useTLS, hs.tel, logger)
	if !hs.loopback && !useTLS {
		logger.Warn("serving HTTP beyond loopback without TLS: tokens and code cross the network in clear; give --tls-cert and --tls-key, or put a TLS proxy in front")
	}
	// The address is logged once listening, so that a test (or a user
	// who asked for port 0) learns the port.
	logger.Info("serving MCP over HTTP", "listen", ln.Addr().String(), "path", "/mcp", "tls", useTLS, "auth", hs.tokens != nil)
	served := make(chan error, 1)
	go func() {
		if useTLS {
			served <- srv.ServeTLS(ln, hs.tlsCert, hs.tlsKey)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down; in-flight calls may finish", "reason", context.Cause(ctx), "grace", hs.grace)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hs.grace)
	defer cancel()
	if err := srv.Shutdown(gctx); err != nil {
		logger.Warn("calls still in flight after the grace period are cancelled", "err", err)
		srv.Close()
	}
	<-served
	return nil
}

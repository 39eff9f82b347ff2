package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec"
)

// executor is what the server uses of an *exec.Executor.
type executor interface {
	Run(ctx context.Context, req exec.Request) (*exec.Result, error)
	CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error)
	CloseSession(owner, id string) bool
	Sessions(owner string) []exec.SessionInfo
	Ready(ctx context.Context) error
	Inventory(ctx context.Context, language string) (*inventory.Inventory, error)
	Close() error
}

// newExecutorFunc connects to containerd and prepares the sandboxes.
type newExecutorFunc func(ctx context.Context) (executor, error)

// connect returns the newExecutorFunc of ec: exec.New, then Prepare in
// the background, which a call need not wait for (a run waits only for
// its own language's image) and which the executor's Close cancels.
func connect(ec exec.Config, logger *slog.Logger) newExecutorFunc {
	return func(ctx context.Context) (executor, error) {
		ex, err := exec.New(ctx, ec)
		if err != nil {
			return nil, err
		}
		// A missing image fails Prepare but not the other languages: keep
		// the executor, and let each run report its own language's problem.
		go func() {
			if err := ex.Prepare(context.WithoutCancel(ctx)); err != nil {
				logger.Warn("preparing the sandboxes", "err", err)
			}
		}()
		return ex, nil
	}
}

// errShuttingDown is what a call gets once the executor is closed.
var errShuttingDown = errors.New("the server is shutting down")

// errNotConnected marks a readiness check that could not connect to
// containerd (or make the executor at all).
var errNotConnected = errors.New("not connected to containerd")

// lazyExecutor connects to containerd on first use and again after a
// failure, so that a server started before containerd (or before its
// images were imported) recovers without a restart, and each call's error
// says what is wrong. Once closed it makes no executor: one made then
// would never be closed, and its pools would outlive the server.
type lazyExecutor struct {
	newExecutor newExecutorFunc
	// sessions are the bounds of the executor's sessions, which
	// SessionLimits reports before there is one.
	sessions exec.SessionConfig

	mu     sync.Mutex
	ex     executor
	closed bool
	// made is ex, for what must not wait for a connect in progress
	// (which holds mu): reading a session or closing one.
	made atomic.Pointer[executorRef]
}

// executorRef holds an executor for an atomic.Pointer.
type executorRef struct{ executor }

// get returns the executor, connecting and preparing it if needed.
func (l *lazyExecutor) get(ctx context.Context) (executor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errShuttingDown
	}
	if l.ex != nil {
		return l.ex, nil
	}
	ex, err := l.newExecutor(ctx)
	if err != nil {
		return nil, err
	}
	l.ex = ex
	l.made.Store(&executorRef{ex})
	return ex, nil
}

// current returns the executor if there is one, without connecting, and
// without waiting for a connect in progress: before one is made there are
// no sessions.
func (l *lazyExecutor) current() executor {
	if r := l.made.Load(); r != nil {
		return r.executor
	}
	return nil
}

// Run implements mcpserver.RunFunc.
func (l *lazyExecutor) Run(ctx context.Context, req exec.Request) (*exec.Result, error) {
	ex, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return ex.Run(ctx, req)
}

// CreateSession implements mcpserver.SessionManager: like Run, it
// connects first if there is no executor yet.
func (l *lazyExecutor) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error) {
	ex, err := l.get(ctx)
	if err != nil {
		return exec.SessionInfo{}, err
	}
	return ex.CreateSession(ctx, owner, language, idle)
}

// CloseSession implements mcpserver.SessionManager. Without an executor
// no session is open, and it connects none to say so.
func (l *lazyExecutor) CloseSession(owner, id string) bool {
	if ex := l.current(); ex != nil {
		return ex.CloseSession(owner, id)
	}
	return false
}

// Sessions implements mcpserver.SessionManager; without an executor there
// are none.
func (l *lazyExecutor) Sessions(owner string) []exec.SessionInfo {
	if ex := l.current(); ex != nil {
		return ex.Sessions(owner)
	}
	return nil
}

// Ready connects if there is no executor yet, and reports whether it
// can run every language now (see exec.Executor.Ready).
func (l *lazyExecutor) Ready(ctx context.Context) error {
	ex, err := l.get(ctx)
	if errors.Is(err, errShuttingDown) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errNotConnected, err)
	}
	return ex.Ready(ctx)
}

// Inventory implements mcpserver.InventoryFunc: like Run, it connects
// first if there is no executor yet, but it waits for a connect in
// progress only as long as ctx allows, for tools/list bounds its wait.
func (l *lazyExecutor) Inventory(ctx context.Context, language string) (*inventory.Inventory, error) {
	type made struct {
		ex  executor
		err error
	}
	got := make(chan made, 1)
	go func() {
		ex, err := l.get(ctx)
		got <- made{ex, err}
	}()
	select {
	case m := <-got:
		if m.err != nil {
			return nil, m.err
		}
		return m.ex.Inventory(ctx, language)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// SessionLimits implements mcpserver.SessionManager: the bounds the
// executor is, or will be, made with.
func (l *lazyExecutor) SessionLimits() exec.SessionConfig {
	return l.sessions
}

// Close closes the executor if there is one, and keeps any from being
// made after it. It waits for a connect in progress: cancel its context
// first.
func (l *lazyExecutor) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.ex == nil {
		return nil
	}
	err := l.ex.Close()
	l.ex = nil
	l.made.Store(nil)
	return err
}

// stdioWorkers is how many tool calls mcp-go hands to handlers at once
// (its maximum); the executor's own queue bounds the runs.
const stdioWorkers = 100

// serveStdio serves MCP over stdin/stdout until stdin ends or ctx is
// cancelled (SIGINT, SIGTERM). In-flight runs are cancelled, which kills
// their sandboxes, the connect started ahead is cancelled and waited for,
// and the executor is closed before it returns.
func (s *Server) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	if err := s.aud.start(s.cfg, s.env, "stdio", ""); err != nil {
		return err
	}
	err := s.serveWith(ctx, connect(s.aud.observe(s.tel.hooks(ExecConfig(s.cfg, s.env, s.logger))), s.logger), stdin, stdout)
	s.aud.shutdown(ctx, err)
	return err
}

// serveWith is serveStdio with the executor made by newExecutor.
// Requests whose id MCP does not allow are answered by screenIDs and
// never reach mcp-go.
func (s *Server) serveWith(ctx context.Context, newExecutor newExecutorFunc, stdin io.Reader, stdout io.Writer) error {
	logger := s.logger
	// Principal is left nil: over stdio there is one client, "local".
	return s.serveMCP(ctx, newExecutor, nil, 1, func(ctx context.Context, ms *server.MCPServer, _ *lazyExecutor) error {
		stdio := server.NewStdioServer(ms)
		stdio.SetErrorLogger(slog.NewLogLogger(logger.Handler(), slog.LevelError))
		server.WithWorkerPoolSize(stdioWorkers)(stdio)
		server.WithQueueSize(10 * stdioWorkers)(stdio)

		in, out, stopScreen := screenIDs(stdin, stdout)
		err := stdio.Listen(ctx, in, out)
		stopScreen()
		if ctx.Err() != nil {
			logger.Info("shutting down", "reason", context.Cause(ctx))
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("serve stdio: %w", err)
		}
		logger.Info("stdin closed; shutting down")
		return nil
	})
}

// taskShutdownWait bounds how long shutdown waits for the tasks it
// cancelled to end; the executor's Close kills what is left.
const taskShutdownWait = 30 * time.Second

// transportFunc serves the MCP server s until ctx is cancelled or its client
// is gone; lx is the executor behind s, for health checks.
type transportFunc func(ctx context.Context, s *server.MCPServer, lx *lazyExecutor) error

// serveMCP builds the MCP server on the executor newExecutor makes, with
// principal naming each call's client (nil: "local") among clients (the
// number of names it can give, which share file_retention_bytes equally;
// 0 is one), its runs counted by s's telemetry, which serves its metrics
// on a listener of its own if it has one, what it does recorded in s's
// audit log, and the transport's own server options opts; connects to
// containerd ahead of the first call, and serves it with t. Once t
// returns, the tasks still running are cancelled and waited for, the
// connect started ahead is cancelled and waited for, and the executor is
// closed, which kills the runs still going and deletes every sandbox.
func (s *Server) serveMCP(ctx context.Context, newExecutor newExecutorFunc, principal func(context.Context) string, clients int, t transportFunc, opts ...server.ServerOption) error {
	cfg, logger := s.cfg, s.logger
	stopMetrics, err := s.tel.serve(logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	lx := &lazyExecutor{newExecutor: newExecutor, sessions: sessionConfig(cfg)}
	tasks := &mcpserver.Tasks{Max: cfg.Tasks.MaxTasks, Retention: time.Duration(cfg.Tasks.ResultRetention), Event: s.aud.taskEvents()}
	ms, err := mcpserver.New(ctx, mcpserver.Options{
		Version: s.version, ImportHint: ImportHint(cfg), DoctorHint: DoctorHint(cfg),
		FileRetention: time.Duration(cfg.Sandbox.FileRetention), FileRetentionBytes: int64(cfg.Sandbox.FileRetentionBytes),
		Sessions: s.aud.wrapSessions(lx), Principal: principal, Clients: clients, Tasks: tasks,
		Secrets: notificationSecrets(cfg, s.env, logger), Inventory: lx.Inventory,
	}, cfg.Enabled(), s.aud.wrapRun(s.tel.instrument(lx), principal), opts...)
	if err != nil {
		return fmt.Errorf("build the MCP server: %w", err)
	}
	// Connect and prepare now, so the first call does not pay for it; a
	// failure is logged and retried at the first call, which reports it.
	// At shutdown the warm-up is cancelled and waited for before the
	// executor is closed (deferred calls run last first).
	warmCtx, stopWarmUp := context.WithCancel(ctx)
	warmed := make(chan struct{})
	defer func() {
		if err := lx.Close(); err != nil {
			logger.Warn("closing the executor", "err", err)
		}
	}()
	defer func() {
		stopWarmUp()
		<-warmed
	}()
	// Before the executor is closed: the tasks still running are
	// cancelled, each as tasks/cancel would (its sandbox killed, its end
	// recorded), and waited for a while; Close then deletes what is left.
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskShutdownWait)
		defer cancel()
		if err := tasks.Close(stop); err != nil {
			logger.Warn("cancelling the tasks in flight", "err", err)
		}
	}()
	go func() {
		defer close(warmed)
		if _, err := lx.get(warmCtx); err != nil && warmCtx.Err() == nil {
			logger.Error("containerd is not usable yet; calls will fail until it is", "err", err)
		}
	}()
	return t(ctx, ms, lx)
}

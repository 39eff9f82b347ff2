package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// lazyExecutor connects to containerd on first use and again after a
// failure, so that a server started before containerd (or before its
// images were imported) recovers without a restart, and each call's error
// says what is wrong.
type lazyExecutor struct {
	cfg    exec.Config
	logger *slog.Logger

	mu sync.Mutex
	ex *exec.Executor
}

// get returns the executor, connecting and preparing it if needed.
func (l *lazyExecutor) get(ctx context.Context) (*exec.Executor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ex != nil {
		return l.ex, nil
	}
	ex, err := exec.New(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	// A missing image fails Prepare but not the other languages: keep the
	// executor, and let each run report its own language's problem.
	if err := ex.Prepare(ctx); err != nil {
		l.logger.Warn("preparing the sandboxes", "err", err)
	}
	l.ex = ex
	return ex, nil
}

// Run implements mcpserver.RunFunc.
func (l *lazyExecutor) Run(ctx context.Context, req exec.Request) (*exec.Result, error) {
	ex, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return ex.Run(ctx, req)
}

// Close closes the executor if there is one.
func (l *lazyExecutor) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ex == nil {
		return nil
	}
	err := l.ex.Close()
	l.ex = nil
	return err
}

// stdioWorkers is how many tool calls mcp-go hands to handlers at once
// (its maximum); the executor's own queue bounds the runs.
const stdioWorkers = 100

// serve serves MCP over stdin/stdout until stdin ends or ctx is cancelled
// (SIGINT, SIGTERM). In-flight runs are cancelled, which kills their
// sandboxes, and the executor is closed before it returns.
func serve(ctx context.Context, cfg *config.Config, env lookupFunc, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	set, unset := passEnvNames(cfg, env)
	logger.Info("starting", "version", version, "address", cfg.Containerd.Address, "namespace", cfg.Containerd.Namespace,
		"languages", cfg.Names(), "pass_through_env", set, "pass_through_env_unset", unset)

	lx := &lazyExecutor{cfg: execConfig(cfg, env, logger), logger: logger}
	defer func() {
		if err := lx.Close(); err != nil {
			logger.Warn("closing the executor", "err", err)
		}
	}()
	// Connect and prepare now, so the first call does not pay for it; a
	// failure is logged and retried at the first call, which reports it.
	go func() {
		if _, err := lx.get(ctx); err != nil && ctx.Err() == nil {
			logger.Error("containerd is not usable yet; calls will fail until it is", "err", err)
		}
	}()

	s, err := mcpserver.New(ctx, mcpserver.Options{Version: version}, cfg.Enabled(), lx.Run)
	if err != nil {
		return fmt.Errorf("build the MCP server: %w", err)
	}
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(slog.NewLogLogger(logger.Handler(), slog.LevelError))
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithQueueSize(10 * stdioWorkers)(stdio)

	err = stdio.Listen(ctx, stdin, stdout)
	if ctx.Err() != nil {
		logger.Info("shutting down", "reason", context.Cause(ctx))
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serve stdio: %w", err)
	}
	logger.Info("stdin closed; shutting down")
	return nil
}

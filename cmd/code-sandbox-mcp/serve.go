package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// environmentsURI is the resource that lists the configured languages.
const environmentsURI = "sandbox://environments"

// newServer builds the MCP server: one tool per enabled language, and the
// environments resource.
func newServer(cfg *config.Config, run runFunc, opts ...server.ServerOption) *server.MCPServer {
	opts = append([]server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithRecovery(),
		server.WithOutputSchemaValidation(),
		server.WithInstructions("Runs code in fresh, isolated, network-less sandboxes: one tool per language. " +
			"Print the results you need; each call starts from scratch. " +
			"The resource " + environmentsURI + " lists the languages, images and limits."),
	}, opts...)
	s := server.NewMCPServer("code-sandbox-mcp", version, opts...)
	for _, l := range cfg.Enabled() {
		s.AddTool(newTool(l), toolHandler(l.Name, l.Limits, run))
	}
	s.AddResource(
		mcp.NewResource(environmentsURI, "environments",
			mcp.WithResourceDescription("The languages this server runs: tool, image, command and limits of each."),
			mcp.WithMIMEType("application/json"),
		),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			data, err := json.MarshalIndent(environments(cfg), "", "  ")
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{
				URI: environmentsURI, MIMEType: "application/json", Text: string(data),
			}}, nil
		},
	)
	return s
}

// environment is one language in the environments resource.
type environment struct {
	Tool        string       `json:"tool"`
	Image       string       `json:"image"`
	Command     []string     `json:"command"`
	File        string       `json:"file"`
	Description string       `json:"description"`
	Limits      limitsOutput `json:"limits"`
}

type limitsOutput struct {
	MemoryBytes          int64    `json:"memory_bytes"`
	CPUs                 float64  `json:"cpus"`
	Pids                 int64    `json:"pids"`
	TmpBytes             int64    `json:"tmp_bytes"`
	FileBytes            int64    `json:"file_bytes"`
	OpenFiles            uint64   `json:"open_files"`
	TimeoutSeconds       float64  `json:"timeout_seconds"`
	MaxTimeoutSeconds    float64  `json:"max_timeout_seconds"`
	OutputBytesPerStream int64    `json:"output_bytes_per_stream"`
	CodeBytes            int64    `json:"code_bytes"`
	Network              bool     `json:"network"`
	ReadOnlyRootFS       bool     `json:"read_only_rootfs"`
	WritablePaths        []string `json:"writable_paths"`
}

func environments(cfg *config.Config) map[string]any {
	langs := map[string]environment{}
	for _, l := range cfg.Enabled() {
		lim := l.Limits
		langs[l.Name] = environment{
			Tool: l.Tool, Image: l.Image, Command: l.Command, File: l.File, Description: l.Description,
			Limits: limitsOutput{
				MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs, Pids: lim.Pids,
				TmpBytes: lim.TmpBytes, FileBytes: lim.FileBytes, OpenFiles: lim.OpenFiles,
				TimeoutSeconds:       lim.Timeout.Seconds(),
				MaxTimeoutSeconds:    lim.MaxTimeout.Seconds(),
				OutputBytesPerStream: lim.OutputBytes, CodeBytes: lim.CodeBytes,
				Network: false, ReadOnlyRootFS: true, WritablePaths: []string{"/tmp"},
			},
		}
	}
	return map[string]any{"server": "code-sandbox-mcp", "version": version, "languages": langs}
}

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

// Run implements runFunc.
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

	s := newServer(cfg, lx.Run)
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(slog.NewLogLogger(logger.Handler(), slog.LevelError))
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithQueueSize(10 * stdioWorkers)(stdio)

	err := stdio.Listen(ctx, stdin, stdout)
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

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec"
)

// countingExecutors makes executors that run nothing and counts how many
// were made and closed.
type countingExecutors struct {
	mu              sync.Mutex
	created, closed int
}

func (c *countingExecutors) new(ctx context.Context) (executor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created++
	return &countedExecutor{c: c}, nil
}

func (c *countingExecutors) counts() (created, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created, c.closed
}

// noSessions is the session half of a fake executor that has none, and
// is always ready.
type noSessions struct{}

func (noSessions) Ready(context.Context) error { return nil }

func (noSessions) CreateSession(context.Context, string, string, time.Duration) (exec.SessionInfo, error) {
	return exec.SessionInfo{}, exec.ErrNoSessions
}
func (noSessions) CloseSession(owner, id string) bool       { return false }
func (noSessions) Sessions(owner string) []exec.SessionInfo { return nil }

// Inventory says nothing of what an image holds.
func (noSessions) Inventory(context.Context, string) (*inventory.Inventory, error) {
	return nil, errors.New("no inventory")
}

type countedExecutor struct {
	c *countingExecutors
	noSessions
}

func (e *countedExecutor) Run(ctx context.Context, req exec.Request) (*exec.Result, error) {
	return &exec.Result{Language: req.Language}, nil
}

func (e *countedExecutor) Close() error {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	e.c.closed++
	return nil
}

func TestLazyExecutor(t *testing.T) {
	var c countingExecutors
	fail := true
	lx := &lazyExecutor{newExecutor: func(ctx context.Context) (executor, error) {
		if fail {
			return nil, errors.New("containerd is down")
		}
		return c.new(ctx)
	}}
	// A failure is not kept: the next call tries again.
	if _, err := lx.Run(t.Context(), exec.Request{}); err == nil {
		t.Fatal("Run succeeded without an executor")
	}
	fail = false
	for range 2 {
		if _, err := lx.Run(t.Context(), exec.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	if created, closed := c.counts(); created != 1 || closed != 0 {
		t.Errorf("created %d, closed %d; want 1, 0", created, closed)
	}
	if err := lx.Close(); err != nil {
		t.Fatal(err)
	}
	if created, closed := c.counts(); created != 1 || closed != 1 {
		t.Errorf("after Close: created %d, closed %d; want 1, 1", created, closed)
	}
}

// sessionExecutor has one open session, s1 of local.
type sessionExecutor struct{ countedExecutor }

func (sessionExecutor) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error) {
	return exec.SessionInfo{ID: "s1", Owner: owner, Language: language}, nil
}
func (sessionExecutor) CloseSession(owner, id string) bool { return owner == "local" && id == "s1" }
func (sessionExecutor) Sessions(owner string) []exec.SessionInfo {
	return []exec.SessionInfo{{ID: "s1", Owner: owner}}
}

// Listing and closing sessions never connects; creating one does, as a
// run does. The limits are the configuration's, executor or not.
func TestLazyExecutorSessions(t *testing.T) {
	var c countingExecutors
	limits := exec.SessionConfig{Max: 3, IdleTimeout: time.Minute, MaxLifetime: time.Hour}
	lx := &lazyExecutor{newExecutor: func(ctx context.Context) (executor, error) {
		if _, err := c.new(ctx); err != nil {
			return nil, err
		}
		return &sessionExecutor{countedExecutor{c: &c}}, nil
	}, sessions: limits}
	if got := lx.SessionLimits(); got != limits {
		t.Errorf("SessionLimits() = %+v; want %+v", got, limits)
	}
	if lx.CloseSession("local", "s1") || lx.Sessions("local") != nil {
		t.Error("a session closed or listed before there is an executor")
	}
	if created, _ := c.counts(); created != 0 {
		t.Fatalf("listing and closing created %d executors; want none", created)
	}
	info, err := lx.CreateSession(t.Context(), "local", "python", 0)
	if err != nil || info.ID != "s1" {
		t.Fatalf("CreateSession: %+v, %v", info, err)
	}
	if created, _ := c.counts(); created != 1 {
		t.Errorf("CreateSession created %d executors; want 1", created)
	}
	if !lx.CloseSession("local", "s1") || len(lx.Sessions("local")) != 1 {
		t.Error("the executor's sessions are not reached once it exists")
	}
	if err := lx.Close(); err != nil {
		t.Fatal(err)
	}
	if lx.CloseSession("local", "s1") || lx.Sessions("local") != nil {
		t.Error("sessions reached after Close")
	}
	if _, err := lx.CreateSession(t.Context(), "local", "python", 0); !errors.Is(err, errShuttingDown) {
		t.Errorf("CreateSession after Close: %v; want errShuttingDown", err)
	}
}

// After Close, nothing creates an executor that nobody would close.
func TestLazyExecutorAfterClose(t *testing.T) {
	var c countingExecutors
	lx := &lazyExecutor{newExecutor: c.new}
	if err := lx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lx.Run(t.Context(), exec.Request{}); err == nil {
		t.Error("Run after Close succeeded; want an error")
	}
	if created, closed := c.counts(); created != 0 {
		t.Errorf("after Close, Run created %d executors (%d closed); want none", created, closed)
	}
}

// gate is a stdin that ends when open is closed.
type gate struct{ open chan struct{} }

func (g gate) Read([]byte) (int, error) {
	<-g.open
	return 0, io.EOF
}

// When stdin ends while the warm-up is still connecting, serve cancels the
// warm-up and returns; nothing is created after it returned, and what was
// created is closed.
func TestServeStopsTheWarmUp(t *testing.T) {
	in := gate{make(chan struct{})}
	var c countingExecutors
	var returned sync.Mutex // held once serve has returned
	newExecutor := func(ctx context.Context) (executor, error) {
		if !returned.TryLock() {
			t.Error("an executor was created after serve returned")
			return nil, errors.New("too late")
		}
		returned.Unlock()
		close(in.open) // stdin ends while this connects
		<-ctx.Done()   // a connect that waits for containerd until cancelled
		return c.new(ctx)
	}
	done := make(chan error, 1)
	go func() {
		done <- testServer(config.Default(), nil).serveWith(t.Context(), newExecutor, in, io.Discard)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return 10s after stdin ended while it was connecting")
	}
	returned.Lock()
	if created, closed := c.counts(); created != closed {
		t.Errorf("created %d executors, closed %d; want every one closed", created, closed)
	}
}

func TestHints(t *testing.T) {
	cfg := config.Default()
	if got, want := ImportHint(cfg), "code-sandbox-mcp --namespace code-sandbox images import FILE"; got != want {
		t.Errorf("import hint %q; want %q", got, want)
	}
	if got, want := DoctorHint(cfg), "code-sandbox-mcp --namespace code-sandbox doctor"; got != want {
		t.Errorf("doctor hint %q; want %q", got, want)
	}
	cfg.Containerd.Address, cfg.Containerd.Namespace = "/run/other.sock", "mine"
	if got, want := ImportHint(cfg), "code-sandbox-mcp --address /run/other.sock --namespace mine images import FILE"; got != want {
		t.Errorf("import hint %q; want %q", got, want)
	}
}

// failingExecutor fails every run with err.
type failingExecutor struct {
	err error
	noSessions
}

func (e failingExecutor) Run(context.Context, exec.Request) (*exec.Result, error) { return nil, e.err }
func (e failingExecutor) Close() error                                            { return nil }

// The server serveWith builds tells a model the same import command as doctor
// and run tell a user: the one of the configured namespace.
func TestServeNamesTheImportCommand(t *testing.T) {
	cfg := config.Default()
	cfg.Containerd.Namespace = "elsewhere"
	newExecutor := func(context.Context) (executor, error) {
		return failingExecutor{err: fmt.Errorf("image x is not in containerd namespace elsewhere: %w", errdefs.ErrNotFound)}, nil
	}
	c, stop := serveOverPipes(t, cfg, newExecutor, nil)
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "print(1)"}}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "`"+ImportHint(cfg)+"`") {
		t.Errorf("result %q (isError %v); want one naming `%s`", text, res.IsError, ImportHint(cfg))
	}
	// [sessions] reaches the server: the default offers them.
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tool mcp.Tool) bool { return tool.Name == "create_session" }) {
		t.Errorf("tools %+v; want create_session with the default [sessions]", tools.Tools)
	}
	stop()
}

// testServer is a Server of cfg over stdio without metrics, logging
// nowhere, with the audit log of a (nil: none).
func testServer(cfg *config.Config, a *auditor) *Server {
	return &Server{cfg: cfg, version: "dev", logger: slog.New(slog.DiscardHandler), aud: a}
}

// envMap is a lookupFunc over a map.
func envMap(m map[string]string) lookupFunc {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// serveOverPipes serves cfg over pipes with the executor newExecutor
// makes and the audit log of a (nil: none), and returns an initialized
// client of it and what stops it: the client's close, which closes the
// server's stdin, and the wait for serveWith, which must return nil.
func serveOverPipes(t *testing.T, cfg *config.Config, newExecutor newExecutorFunc, a *auditor) (*client.Client, func()) {
	t.Helper()
	clientRead, serverWrite := io.Pipe()
	serverRead, clientWrite := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- testServer(cfg, a).serveWith(t.Context(), newExecutor, serverRead, serverWrite)
		serverWrite.Close()
	}()
	c := client.NewClient(transport.NewIO(clientRead, clientWrite, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c, func() {
		c.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

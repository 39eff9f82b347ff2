package exec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/lifetime"
	"code-sandbox-mcp/exec/internal/pool"
	"code-sandbox-mcp/exec/internal/sandbox"

	"github.com/containerd/errdefs"
)

// TestReadyClosed checks that a closed executor is not ready, and asks
// containerd nothing (its client is nil here): a health check during
// shutdown must say so at once. The ready path itself needs containerd,
// and is tested over HTTP's /healthz by the integration suite.
func TestReadyClosed(t *testing.T) {
	e := &Executor{h: &sandbox.Host{Life: lifetime.New("test")}}
	e.h.Life.Close()
	err := e.Ready(context.Background())
	if !errors.Is(err, ErrClosed) || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Ready of a closed executor = %v; want ErrClosed, an unavailable error that says it is closed", err)
	}
}

// Every entry point of a closed executor refuses with ErrClosed before it
// asks containerd anything (its client is nil here).
func TestCallsAfterCloseAreErrClosed(t *testing.T) {
	e := &Executor{h: &sandbox.Host{Life: lifetime.New("test")}, langs: map[string]*pool.Language{}}
	lang := config.Language{Name: "python", SessionDriver: "python", Limits: config.Limits{CodeBytes: 100, Timeout: time.Second, MaxTimeout: time.Second}}
	e.langs["python"] = pool.New(pool.Config{}, lang)
	e.h.Life.Close()
	ctx := context.Background()
	_, err := e.Run(ctx, Request{Language: "python", Code: "1"})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Run: got %v; want ErrClosed", err)
	}
	if err := e.Prepare(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Prepare: got %v; want ErrClosed", err)
	}
	e.cfg.Sessions = SessionConfig{Max: 1}
	if _, err := e.CreateSession(ctx, "alice", "python", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateSession: got %v; want ErrClosed", err)
	}
}

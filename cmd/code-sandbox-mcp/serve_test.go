package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"code-sandbox-mcp/config"
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
	return &countedExecutor{c}, nil
}

func (c *countingExecutors) counts() (created, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created, c.closed
}

type countedExecutor struct{ c *countingExecutors }

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
		done <- serveWith(t.Context(), config.Default(), newExecutor, in, io.Discard, slog.New(slog.DiscardHandler))
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

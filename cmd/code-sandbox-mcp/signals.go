package main

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// errHangup is the shutdown cause of a SIGHUP without an audit log, as
// signal.NotifyContext would give it.
var errHangup = errors.New(syscall.SIGHUP.String() + " signal received")

// hangup handles SIGHUP. Until an audit log claims it, SIGHUP shuts the
// program down as SIGINT and SIGTERM do (the terminal or the client went
// away); once claimed, each SIGHUP reopens the audit log instead, as
// logrotate expects of a daemon, and the server goes on serving.
type hangup struct {
	ch   chan os.Signal
	done chan struct{}

	mu     sync.Mutex
	rotate func()
}

// onHangup starts handling SIGHUP with shutdown.
func onHangup(shutdown func()) *hangup {
	h := &hangup{ch: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(h.ch, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-h.ch:
				h.mu.Lock()
				rotate := h.rotate
				h.mu.Unlock()
				if rotate == nil {
					shutdown()
				} else {
					rotate()
				}
			case <-h.done:
				return
			}
		}
	}()
	return h
}

// claim makes SIGHUP call rotate, which reopens the audit log;
// claim(nil) gives SIGHUP back to shutting down.
func (h *hangup) claim(rotate func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rotate = rotate
}

// stop stops handling SIGHUP.
func (h *hangup) stop() {
	signal.Stop(h.ch)
	close(h.done)
}

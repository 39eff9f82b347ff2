package main

import (
	"errors"
	"io"
	"sync"
	"syscall"
)

// brokenPipe is a writer that notices when its reader has gone (EPIPE,
// the client died): it calls gone once, and from then on drops what is
// written, so that nothing more is written to a dead pipe. The process
// ignores SIGPIPE (see main), so such a write fails instead of killing the
// server before it cleans up.
type brokenPipe struct {
	w    io.Writer
	gone func()

	mu     sync.Mutex
	broken bool
}

func (p *brokenPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		return 0, syscall.EPIPE
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.broken = true
		go p.gone()
	}
	return n, err
}

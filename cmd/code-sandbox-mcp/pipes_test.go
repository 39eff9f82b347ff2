package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// A write to a pipe whose reader is gone shuts the server down, once, and
// nothing is written to the dead pipe after it.
func TestBrokenPipeShutsDownOnce(t *testing.T) {
	signal.Ignore(syscall.SIGPIPE) // as main does
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	gone := make(chan struct{}, 2)
	p := &brokenPipe{w: w, gone: func() { gone <- struct{}{} }}
	if _, err := p.Write([]byte("frame\n")); err != nil {
		t.Fatalf("write while the reader is there: %v", err)
	}
	r.Close()
	for range 3 {
		if _, err := p.Write([]byte("log line\n")); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write after the reader left: got %v; want EPIPE", err)
		}
	}
	<-gone
	select {
	case <-gone:
		t.Error("gone was called twice; want once")
	default:
	}
}

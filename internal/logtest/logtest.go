// Package logtest holds what a test needs to read a log while it is still
// being written. It is for tests only, and knows nothing of the log's
// format.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a writer (a logger, a process's
// stderr) and a reader (the test) at once. The zero Buffer is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

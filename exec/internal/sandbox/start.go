package sandbox

import (
	"io"
	"sync"
)

// startLine is the standard input of a sandbox started ahead of its
// program, whose process waits for one line: in oci.StubScript, or in a
// warm driver (see warm.go), which first reads the preamble. Reads return
// the preamble at once, then block until send or close; after send they
// return the line, then io.EOF; after close, io.EOF at once, which ends
// the waiting process without running anything. containerd's I/O copier
// is its only reader.
type startLine struct {
	once sync.Once
	ch   chan struct{}
	line bool   // set before ch is closed
	sent bool   // the reader's own
	pre  []byte // the reader's own
}

func newStartLine(preamble string) *startLine {
	return &startLine{ch: make(chan struct{}), pre: []byte(preamble)}
}

func (l *startLine) Read(p []byte) (int, error) {
	if len(l.pre) > 0 && len(p) > 0 {
		n := copy(p, l.pre)
		l.pre = l.pre[n:]
		return n, nil
	}
	<-l.ch
	if !l.line || l.sent || len(p) == 0 {
		return 0, io.EOF
	}
	l.sent = true
	p[0] = '\n'
	return 1, nil
}

// send lets the stub run the program. It does not block.
func (l *startLine) send() {
	l.once.Do(func() {
		l.line = true
		close(l.ch)
	})
}

// close ends the stub's standard input without a line, unless send came
// first.
func (l *startLine) close() {
	l.once.Do(func() { close(l.ch) })
}

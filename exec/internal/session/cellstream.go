package session

import (
	"bytes"
	"sync"

	"code-sandbox-mcp/exec/internal/sandbox"
)

// maxStatusLine bounds the status line a session's driver writes after
// the end token on its standard output.
const maxStatusLine = 4096

// cellEnd is what a stream held when its cell's end token came: the
// cell's output, and on standard output the status line after the token.
type cellEnd struct {
	out     []byte
	dropped int64
	status  []byte
}

// cellStream is one standard stream of a session's driver. It splits the
// stream into cells at each cell's end token (see begin): what comes
// before the token is the cell's output, kept as sandbox.Capture keeps it; after
// the token on standard output comes one status line. What the sandbox
// writes between cells (a background process, say) counts towards the
// next cell. It never fails a write: the driver's output is always
// drained, whatever the driver writes.
type cellStream struct {
	mu      sync.Mutex
	max     int              // bytes kept per cell
	status  bool             // a status line follows the token
	cur     *sandbox.Capture // the current cell's output
	token   []byte           // the current cell's end token; nil between cells
	held    []byte           // a tail of the stream that may begin the token
	inLine  bool             // reading the status line
	line    []byte
	overLen bool // the status line outgrew maxStatusLine
	ended   chan cellEnd
	// tap is told the current cell's output as it is kept (see begin);
	// nil between cells, where what comes is not streamed.
	tap func(p []byte)
}

func newCellStream(max int, status bool) *cellStream {
	return &cellStream{max: max, status: status, cur: sandbox.NewCapture(max)}
}

// begin starts looking for token, which ends the cell that is about to
// run; the returned channel receives the cell's end once, when the token
// (and on standard output the status line) has come. tap, if not nil, is
// told the cell's output as it comes (never the token nor the status
// line), until the cell ends or untap is called; it runs with the stream
// locked, on the writer's goroutine.
func (c *cellStream) begin(token string, tap func(p []byte)) <-chan cellEnd {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tap = tap
	c.token = []byte(token)
	c.held = nil
	c.inLine, c.line, c.overLen = false, nil, false
	c.ended = make(chan cellEnd, 1)
	return c.ended
}

// Write implements io.Writer.
func (c *cellStream) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		switch {
		case c.inLine:
			i := bytes.IndexByte(p, '\n')
			part := p
			if i >= 0 {
				part = p[:i]
			}
			if len(c.line)+len(part) > maxStatusLine {
				c.overLen = true
			} else {
				c.line = append(c.line, part...)
			}
			if i < 0 {
				return n, nil
			}
			p = p[i+1:]
			c.finish(c.line)
		case c.token == nil:
			c.keep(p)
			return n, nil
		default:
			buf := p
			if len(c.held) > 0 {
				buf = append(c.held, p...)
				c.held = nil
			}
			i := bytes.Index(buf, c.token)
			if i < 0 {
				k := heldBack(buf, c.token)
				c.keep(buf[:len(buf)-k])
				c.held = append([]byte(nil), buf[len(buf)-k:]...)
				return n, nil
			}
			c.keep(buf[:i])
			p = buf[i+len(c.token):]
			if c.status {
				c.inLine = true
				continue
			}
			c.finish(nil)
		}
	}
	return n, nil
}

// finish hands the cell's output and status to begin's channel and starts
// the next cell's output. c.mu is held.
func (c *cellStream) finish(status []byte) {
	out, dropped := c.cur.Bytes()
	if c.overLen {
		status = nil // not a status line of ours
	}
	c.ended <- cellEnd{out: out, dropped: dropped, status: status}
	c.cur = sandbox.NewCapture(c.max)
	c.token, c.held, c.tap = nil, nil, nil
	c.inLine, c.line, c.overLen = false, nil, false
}

// keep keeps p as the current cell's output, and tells the tap. c.mu is
// held.
func (c *cellStream) keep(p []byte) {
	if len(p) == 0 {
		return
	}
	c.cur.Write(p)
	if c.tap != nil {
		c.tap(p)
	}
}

// untap stops telling the cell's output to the tap begin was given.
func (c *cellStream) untap() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tap = nil
}

// heldBack returns the length of the longest tail of buf that is a proper
// beginning of token: those bytes may yet turn out to be the token.
func heldBack(buf, token []byte) int {
	for k := min(len(buf), len(token)-1); k > 0; k-- {
		if bytes.Equal(buf[len(buf)-k:], token[:k]) {
			return k
		}
	}
	return 0
}

// pending returns what the current cell has written so far, for a cell
// that will not end.
func (c *cellStream) pending() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, dropped := c.cur.Bytes()
	return append(out, c.held...), dropped
}

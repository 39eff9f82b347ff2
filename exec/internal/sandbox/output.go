package sandbox

import "sync"

// Capture keeps the head and the tail of a stream and counts what it drops
// in between, so that a program printing without end costs the server a
// fixed amount of memory. It never fails a write: the sandbox's output is
// always drained.
type Capture struct {
	mu      sync.Mutex
	max     int    // bytes kept at most, head and tail together
	head    []byte // the first max/2 bytes
	tail    []byte // ring buffer of the last max-max/2 bytes
	tailPos int    // next write position in tail once it is full
	tailLen int
	total   int64
	tap     func(p []byte) // told each write, whole; see Tap
}

func NewCapture(max int) *Capture {
	return &Capture{max: max}
}

// Write implements io.Writer.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if c.tap != nil {
		c.tap(p)
	}
	headMax := c.max / 2
	if len(c.head) < headMax {
		if c.head == nil {
			c.head = make([]byte, 0, headMax)
		}
		k := min(headMax-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailMax := c.max - headMax
	if len(p) == 0 || tailMax == 0 {
		return n, nil
	}
	if c.tail == nil {
		c.tail = make([]byte, tailMax)
	}
	if len(p) >= tailMax {
		copy(c.tail, p[len(p)-tailMax:])
		c.tailPos, c.tailLen = 0, tailMax
		return n, nil
	}
	for len(p) > 0 {
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % tailMax
		c.tailLen = min(c.tailLen+k, tailMax)
	}
	return n, nil
}

// Tap makes every later write be told to f as well, whole, before it is
// kept; nil stops it. f runs on the writer's goroutine with the capture
// locked, so it must copy p and return quickly (see exec.Request.Output).
func (c *Capture) Tap(f func(p []byte)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tap = f
}

// Bytes returns what was kept, head then tail, and how many bytes were
// dropped between them.
func (c *Capture) Bytes() (kept []byte, dropped int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]byte, 0, len(c.head)+c.tailLen)
	out = append(out, c.head...)
	if c.tailLen < len(c.tail) {
		out = append(out, c.tail[:c.tailLen]...)
	} else {
		out = append(out, c.tail[c.tailPos:]...)
		out = append(out, c.tail[:c.tailPos]...)
	}
	return out, c.total - int64(len(out))
}

// Package clocktest is a clock that a test moves by hand, for code that
// reads the time through a func() time.Time: expiry, rate limits,
// retention. It is for tests only, and knows nothing of what it times.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a time that moves only when Advance moves it. It is safe for
// the code under test and the test at once.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock at 2026-12-01 10:00 UTC.
func New() *Clock {
	return &Clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time; pass c.Now where the code takes a clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

package app

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
)

const (
	// bodiesAtOnce is how many bodies of max_request_bytes the server
	// holds at once, all clients together: a body, once read, is held
	// with what mcp-go and the tool decode of it until its call returns,
	// and decoding it takes several times its size while it runs.
	bodiesAtOnce = 2
	// smallBody is the largest body that needs no room in the budget:
	// most requests (initialize, lists, reads, short programs) are
	// smaller, and never wait behind large ones. What they hold is
	// bounded by the connections ([http] max_connections).
	smallBody = 64 << 10
)

// bodyBudget bounds the bytes of request bodies over smallBody that the
// server holds at once: bodiesAtOnce times max_request_bytes. A request
// whose body does not fit waits for room, first come first served, for
// up to wait, and is then refused. It is safe for concurrent use.
type bodyBudget struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
}

// newBodyBudget returns a budget of bodiesAtOnce bodies of limit bytes,
// whose requests wait up to wait for room.
func newBodyBudget(limit int64, wait time.Duration) *bodyBudget {
	size := bodiesAtOnce * limit
	return &bodyBudget{sem: semaphore.NewWeighted(size), size: size, wait: wait}
}

// take holds room for a body of n bytes (the limit if its length is not
// known), waiting up to b.wait or until ctx ends; release gives it back.
// A body of at most smallBody takes none. refusal, if not "", says why
// the request is not read now.
func (b *bodyBudget) take(ctx context.Context, n int64) (release func(), refusal string) {
	if n <= smallBody {
		return func() {}, ""
	}
	n = min(n, b.size)
	wctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		return nil, fmt.Sprintf("the server is busy with other large requests: it holds at most %.1f MiB of request bodies over %d KiB at once, all clients together (%d times [http] max_request_bytes), and no room came free within %s. Retry in a few seconds.",
			float64(b.size)/(1<<20), smallBody>>10, bodiesAtOnce, b.wait)
	}
	return func() { b.sem.Release(n) }, ""
}

// Package lifetime is an executor's lifetime as its parts see it: open,
// then closing (no new work starts, and work in flight is cancelled), then
// abandoned (cleanups still going give up, and what they leave is the next
// server's to sweep). It hands out contexts bound to those moments, made
// when asked and never kept: every one carries the executor's containerd
// namespace. It knows nothing of containerd's objects, sandboxes or MCP.
package lifetime

import (
	"context"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// Lifetime is one executor's. It is safe for concurrent use.
type Lifetime struct {
	namespace   string
	closing     chan struct{}
	abandoned   chan struct{}
	closeOnce   sync.Once
	abandonOnce sync.Once
}

// New returns the open lifetime of an executor whose objects live in
// containerd namespace.
func New(namespace string) *Lifetime {
	return &Lifetime{namespace: namespace, closing: make(chan struct{}), abandoned: make(chan struct{})}
}

// Close begins closing. Calls after the first do nothing.
func (l *Lifetime) Close() { l.closeOnce.Do(func() { close(l.closing) }) }

// Abandon abandons the cleanups still going. Calls after the first do
// nothing.
func (l *Lifetime) Abandon() { l.abandonOnce.Do(func() { close(l.abandoned) }) }

// Closing is closed once closing began.
func (l *Lifetime) Closing() <-chan struct{} { return l.closing }

// Closed reports whether closing began.
func (l *Lifetime) Closed() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// Background returns a context for the executor's own background work:
// in its namespace, cancelled once closing begins or cancel is called.
func (l *Lifetime) Background() (ctx context.Context, cancel context.CancelFunc) {
	return l.UntilClosed(context.Background())
}

// UntilClosed returns ctx in the executor's namespace (whatever namespace
// ctx names), cancelled when ctx is, once closing begins, or when cancel
// is called.
func (l *Lifetime) UntilClosed(ctx context.Context) (context.Context, context.CancelFunc) {
	return until(namespaces.WithNamespace(ctx, l.namespace), l.closing)
}

// Detached returns a context with ctx's values but not its cancellation,
// in the executor's namespace, bounded by d and ended once the executor
// abandons its cleanups: for work that must not stop half-way because a
// caller gave up (a creation, a delete, an unpack).
func (l *Lifetime) Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.WithoutCancel(ctx), l.namespace), d)
	ctx, stop := until(ctx, l.abandoned)
	return ctx, func() { stop(); cancel() }
}

// until returns ctx, also cancelled once ch is closed.
func until(ctx context.Context, ch <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

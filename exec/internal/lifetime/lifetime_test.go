package lifetime

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
)

func namespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, _ := namespaces.Namespace(ctx)
	return ns
}

// Contexts of an open lifetime carry its namespace, whatever the caller's
// names, and end at close; a context made after close is ended at once.
func TestUntilClosed(t *testing.T) {
	l := New("ours")
	caller := namespaces.WithNamespace(context.Background(), "theirs")
	ctx, cancel := l.UntilClosed(caller)
	defer cancel()
	if got := namespace(t, ctx); got != "ours" {
		t.Errorf("namespace: got %q; want ours", got)
	}
	if l.Closed() || ctx.Err() != nil {
		t.Fatalf("open lifetime: Closed %v, ctx.Err %v; want false, nil", l.Closed(), ctx.Err())
	}
	l.Close()
	l.Close() // a second close is harmless
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled 5 s after Close")
	}
	if !l.Closed() {
		t.Error("Closed after Close: got false")
	}
	after, cancel2 := l.Background()
	defer cancel2()
	select {
	case <-after.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context made after Close not cancelled")
	}
}

// A detached context outlives its caller and closing, and ends at its
// bound or when the lifetime abandons its cleanups.
func TestDetached(t *testing.T) {
	l := New("ours")
	caller, cancelCaller := context.WithCancel(context.Background())
	ctx, cancel := l.Detached(caller, time.Hour)
	defer cancel()
	cancelCaller()
	l.Close()
	if ctx.Err() != nil {
		t.Fatalf("detached context ended with its caller or at close: %v", ctx.Err())
	}
	if got := namespace(t, ctx); got != "ours" {
		t.Errorf("namespace: got %q; want ours", got)
	}
	l.Abandon()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("detached context not cancelled 5 s after Abandon")
	}
	short, cancel3 := New("ours").Detached(context.Background(), time.Millisecond)
	defer cancel3()
	select {
	case <-short.Done():
		if short.Err() != context.DeadlineExceeded {
			t.Errorf("bounded detached context: got %v; want its deadline", short.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("detached context not ended 5 s after its 1 ms bound")
	}
}

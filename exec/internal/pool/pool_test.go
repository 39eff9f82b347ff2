package pool

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/lifetime"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/watch"
)

// testLanguage is a language of a Host that has no containerd: what
// a pool's take and expire need, and no more.
func testLanguage(t *testing.T, size int) *Language {
	t.Helper()
	h := &sandbox.Host{Log: slog.New(slog.DiscardHandler), Life: lifetime.New("test"), Exits: &watch.Exits{}}
	var retired sync.WaitGroup
	retire := func(s *sandbox.Sandbox) { retired.Go(func() { s.Destroy(context.Background()) }) }
	t.Cleanup(func() {
		h.Life.Close()
		h.Life.Abandon()
		retired.Wait()
	})
	l := New(Config{Host: h, Retire: retire}, config.Language{Name: "test", Pool: size})
	l.img = &sandbox.Image{}
	return l
}

// take never hands out a ready sandbox older than poolMaxAge (its deadline
// label would no longer cover its run), nor one made from an image that
// has since changed; it destroys them and takes the next (defect 5).
func TestTakeChecksAgeAndImage(t *testing.T) {
	l := testLanguage(t, 4)
	fresh := sandbox.Bare(l.c.Host, l.img, time.Now())
	old := sandbox.Bare(l.c.Host, l.img, time.Now().Add(-poolMaxAge-time.Second))
	stale := sandbox.Bare(l.c.Host, &sandbox.Image{}, time.Now())
	l.pool.ready <- old
	l.pool.ready <- stale
	l.pool.ready <- fresh
	if got := l.pool.take(""); got != fresh {
		t.Fatalf("take: got %p; want the fresh sandbox %p (old %p, stale %p)", got, fresh, old, stale)
	}
	if n := len(l.pool.ready); n != 0 {
		t.Errorf("ready sandboxes left: %d; want 0 (the old and the stale one destroyed)", n)
	}
	if got := l.pool.take(""); got != nil {
		t.Errorf("take from an empty pool: got %p; want nil", got)
	}
}

// expire replaces the same sandboxes that take would refuse, and keeps the
// others in order.
func TestExpireKeepsOnlyUsableSandboxes(t *testing.T) {
	l := testLanguage(t, 3)
	a := sandbox.Bare(l.c.Host, l.img, time.Now())
	old := sandbox.Bare(l.c.Host, l.img, time.Now().Add(-2*poolMaxAge))
	b := sandbox.Bare(l.c.Host, l.img, time.Now())
	l.pool.ready <- a
	l.pool.ready <- old
	l.pool.ready <- b
	l.Invalidate()
	l.pool.expire()
	if n := len(l.pool.ready); n != 0 {
		t.Fatalf("after the image changed: %d ready sandboxes; want none", n)
	}
	l.img = &sandbox.Image{}
	c := sandbox.Bare(l.c.Host, l.img, time.Now())
	l.pool.ready <- old
	l.pool.ready <- c
	l.pool.expire()
	if got := l.pool.take(""); got != c || len(l.pool.ready) != 0 {
		t.Errorf("after expire: took %p with %d left; want %p alone", got, len(l.pool.ready), c)
	}
}

// An image that is not there is a not-found error that names the image,
// the language and the namespace, and says why it was not pulled: pulling
// is off, or the registry does not have it either.
func TestMissingImageSaysWhy(t *testing.T) {
	l := New(Config{Namespace: "ns"}, config.Language{Name: "python", Image: "example.invalid/python:1"})
	for _, tc := range []struct {
		pullErr error
		want    string
	}{
		{nil, "pulling is off"},
		{errdefs.ErrNotFound, "its registry does not have it either"},
	} {
		err := l.missingImage(tc.pullErr)
		if !errdefs.IsNotFound(err) {
			t.Errorf("pull error %v: got %v; want a not-found error", tc.pullErr, err)
		}
		for _, part := range []string{"example.invalid/python:1", "python", `"ns"`, tc.want} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("pull error %v: %q does not say %q", tc.pullErr, err, part)
			}
		}
	}
}

// A configured snapshotter is used as it is, without asking containerd
// (there is no client here).
func TestResolveSnapshotterKeepsTheConfiguredOne(t *testing.T) {
	got, err := ResolveSnapshotter(context.Background(), nil, "native")
	if err != nil || got != "native" {
		t.Fatalf("ResolveSnapshotter with native configured: %q, %v; want native", got, err)
	}
}

package app

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestBodyBudget(t *testing.T) {
	const limit = 1 << 20
	b := newBodyBudget(limit, 200*time.Millisecond)
	ctx := context.Background()

	// Two bodies of the limit fit; small ones never wait.
	var releases []func()
	for i := range bodiesAtOnce {
		release, refusal := b.take(ctx, limit)
		if refusal != "" {
			t.Fatalf("body %d of %d at the limit: refused: %s", i+1, bodiesAtOnce, refusal)
		}
		releases = append(releases, release)
	}
	if _, refusal := b.take(ctx, smallBody); refusal != "" {
		t.Fatalf("a small body with the budget full: refused: %s", refusal)
	}

	// One more waits, and is refused when no room comes free.
	begin := time.Now()
	_, refusal := b.take(ctx, smallBody+1)
	if refusal == "" {
		t.Fatal("a large body with the budget full: taken; want a refusal")
	}
	if waited := time.Since(begin); waited < 200*time.Millisecond {
		t.Errorf("refused after %s; want it to wait 200ms for room", waited)
	}
	for _, want := range []string{"busy with other large requests", "2.0 MiB", "max_request_bytes", "Retry"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("refusal %q does not say %q", refusal, want)
		}
	}

	// Room that comes free while it waits lets it in. In a bubble, so
	// that the release comes once the taker is blocked waiting for room
	// (synctest.Wait), and its wait's deadline is the bubble's clock,
	// which stands still meanwhile.
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 1)
		go func() {
			release, refusal := b.take(ctx, limit)
			if release != nil {
				release()
			}
			got <- refusal
		}()
		synctest.Wait()
		select {
		case refusal := <-got:
			t.Fatalf("a body with the budget full did not wait for room: refusal %q", refusal)
		default:
		}
		releases[0]()
		if refusal := <-got; refusal != "" {
			t.Fatalf("a body waiting while another was released: refused: %s", refusal)
		}
	})
	releases[1]()

	// A cancelled request stops waiting for room.
	release, _ := b.take(ctx, b.size)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, refusal := b.take(cctx, limit); refusal == "" {
		t.Error("a cancelled request with the budget full: taken; want a refusal")
	}
	release()
}

package exec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSessionTableBoundsAndOwners(t *testing.T) {
	var tab sessionTable
	for range 2 {
		if err := tab.reserve(SessionConfig{Max: 2}, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.reserve(SessionConfig{Max: 2}, "alice"); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("a third reservation: %v; want ErrTooManySessions", err)
	}
	now := time.Now()
	a := &session{id: "session-a", owner: "alice", created: now, lastUsed: now, idle: time.Minute, lifetime: time.Hour}
	tab.add(a)
	tab.unreserve("alice")
	if err := tab.reserve(SessionConfig{Max: 2}, "alice"); err != nil {
		t.Fatalf("after an unreserve: %v", err)
	}
	if tab.get("alice", "session-a") != a || tab.get("bob", "session-a") != nil {
		t.Error("get: only the owner gets the session")
	}
	err := tab.reserve(SessionConfig{Max: 2}, "alice")
	if err == nil || !strings.Contains(err.Error(), "the first to expire") {
		t.Errorf("a reservation past the bound: %v; want the first expiry named", err)
	}
	tab.remove(a, "closed by close_session")
	var no *NoSessionError
	if err := tab.noSession("alice", "session-a"); !errors.As(err, &no) || !strings.Contains(no.Ended, "closed") {
		t.Errorf("the owner of an ended session: %v; want why it ended", err)
	}
	// Another owner learns nothing: the same error as an unknown id.
	if got, unknown := tab.noSession("bob", "session-a").Error(), tab.noSession("bob", "session-x").Error(); strings.Replace(got, "session-a", "session-x", 1) != unknown {
		t.Errorf("another owner gets %q; an unknown id %q", got, unknown)
	}
	if !errors.Is(tab.noSession("bob", "session-a"), ErrNoSession) {
		t.Error("NoSessionError does not wrap ErrNoSession")
	}
}

func TestSessionTableBoundsPerOwner(t *testing.T) {
	var tab sessionTable
	cfg := SessionConfig{Max: 4, MaxPerOwner: 2}
	for range 2 {
		if err := tab.reserve(cfg, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	err := tab.reserve(cfg, "alice")
	if !errors.Is(err, ErrTooManyOwnSessions) || errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "per_client_sessions") {
		t.Fatalf("alice's third: %v; want ErrTooManyOwnSessions naming per_client_sessions", err)
	}
	// Bob is not held back by alice's.
	if err := tab.reserve(cfg, "bob"); err != nil {
		t.Fatalf("bob's first: %v", err)
	}
	// One of alice's opens, the other fails: she may reserve one more.
	now := time.Now()
	tab.add(&session{id: "session-a", owner: "alice", created: now, lastUsed: now, idle: time.Minute, lifetime: time.Hour})
	tab.unreserve("alice")
	if err := tab.reserve(cfg, "alice"); err != nil {
		t.Fatalf("alice's after a failed creation: %v", err)
	}
	err = tab.reserve(cfg, "alice")
	if !errors.Is(err, ErrTooManyOwnSessions) || !strings.Contains(err.Error(), "the first to expire") {
		t.Fatalf("alice's past the bound with one open: %v; want the first expiry named", err)
	}
	// The server-wide bound still holds: alice 2, bob 1, one left.
	if err := tab.reserve(cfg, "carol"); err != nil {
		t.Fatalf("carol's: %v", err)
	}
	if err := tab.reserve(cfg, "dave"); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("past max_sessions: %v; want ErrTooManySessions", err)
	}
	if len(tab.creatingBy) != 3 || tab.creatingBy["alice"] != 1 {
		t.Fatalf("creatingBy = %v; want alice 1, bob 1, carol 1", tab.creatingBy)
	}
}

func TestSessionTableForgetsOldEnds(t *testing.T) {
	var tab sessionTable
	for i := range keepEnded + 10 {
		tab.remove(&session{id: fmt.Sprint("s", i), owner: "o"}, "idle")
	}
	if len(tab.ended) != keepEnded || len(tab.order) != keepEnded {
		t.Fatalf("remembered %d (order %d); want %d", len(tab.ended), len(tab.order), keepEnded)
	}
	var no *NoSessionError
	if errors.As(tab.noSession("o", "s0"), &no); no.Ended != "" {
		t.Errorf("the oldest end is still remembered: %q", no.Ended)
	}
	if errors.As(tab.noSession("o", fmt.Sprint("s", keepEnded+9)), &no); no.Ended == "" {
		t.Error("the latest end is forgotten")
	}
}

func TestSessionExpiry(t *testing.T) {
	now := time.Now()
	s := &session{created: now.Add(-50 * time.Minute), lastUsed: now.Add(-time.Minute), idle: 10 * time.Minute, lifetime: time.Hour}
	if got := s.expiresLocked(); !got.Equal(s.lastUsed.Add(10 * time.Minute)) {
		t.Errorf("idle: expires %s; want last use plus the idle timeout", got)
	}
	s.lastUsed = now
	if got := s.expiresLocked(); !got.Equal(s.created.Add(time.Hour)) {
		t.Errorf("near its lifetime: expires %s; want its creation plus its lifetime", got)
	}
	s.lastUsed, s.busy = now.Add(-time.Hour), true
	if got := s.expiresLocked(); !got.Equal(s.created.Add(time.Hour)) {
		t.Errorf("busy: expires %s; want its lifetime only", got)
	}
}

// expiredLocked is what both the timer and a call's start ask, so a late
// timer lets no call into an expired session.
func TestSessionExpired(t *testing.T) {
	now := time.Now()
	s := &session{created: now.Add(-time.Minute), lastUsed: now.Add(-2 * time.Second), idle: time.Second, lifetime: time.Hour}
	if why := s.expiredLocked(now); !strings.Contains(why, "idle for 1s") {
		t.Errorf("idle past its timeout: %q; want it idle", why)
	}
	s.busy = true
	if why := s.expiredLocked(now); why != "" {
		t.Errorf("busy past its idle timeout: %q; want not expired", why)
	}
	s.busy, s.lastUsed = false, now
	if why := s.expiredLocked(now); why != "" {
		t.Errorf("just used: %q; want not expired", why)
	}
	s.created = now.Add(-time.Hour)
	if why := s.expiredLocked(now); !strings.Contains(why, "maximum lifetime of 1h0m0s") {
		t.Errorf("at its lifetime: %q; want its lifetime reached", why)
	}
}

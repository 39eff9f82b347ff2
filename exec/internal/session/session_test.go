package session

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSessionTableBoundsAndOwners(t *testing.T) {
	var tab Table
	for range 2 {
		if err := tab.Reserve(Config{Max: 2}, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.Reserve(Config{Max: 2}, "alice"); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("a third reservation: %v; want ErrTooManySessions", err)
	}
	now := time.Now()
	a := &Session{id: "session-a", owner: "alice", created: now, lastUsed: now, idle: time.Minute, lifetime: time.Hour}
	tab.add(a)
	tab.Unreserve("alice")
	if err := tab.Reserve(Config{Max: 2}, "alice"); err != nil {
		t.Fatalf("after an unreserve: %v", err)
	}
	if tab.Get("alice", "session-a") != a || tab.Get("bob", "session-a") != nil {
		t.Error("get: only the owner gets the session")
	}
	err := tab.Reserve(Config{Max: 2}, "alice")
	if err == nil || !strings.Contains(err.Error(), "the first of yours to expire") {
		t.Errorf("a reservation past the bound: %v; want the first expiry named", err)
	}
	tab.remove(a, "closed by close_session")
	var no *NoSessionError
	if err := tab.NoSession("alice", "session-a"); !errors.As(err, &no) || !strings.Contains(no.Ended, "closed") {
		t.Errorf("the owner of an ended session: %v; want why it ended", err)
	}
	// Another owner learns nothing: the same error as an unknown id.
	if got, unknown := tab.NoSession("bob", "session-a").Error(), tab.NoSession("bob", "session-x").Error(); strings.Replace(got, "session-a", "session-x", 1) != unknown {
		t.Errorf("another owner gets %q; an unknown id %q", got, unknown)
	}
	if !errors.Is(tab.NoSession("bob", "session-a"), ErrNoSession) {
		t.Error("NoSessionError does not wrap ErrNoSession")
	}
}

func TestSessionTableBoundsPerOwner(t *testing.T) {
	var tab Table
	cfg := Config{Max: 4, MaxPerOwner: 2}
	for range 2 {
		if err := tab.Reserve(cfg, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	err := tab.Reserve(cfg, "alice")
	if !errors.Is(err, ErrTooManyOwnSessions) || errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "per_client_sessions") {
		t.Fatalf("alice's third: %v; want ErrTooManyOwnSessions naming per_client_sessions", err)
	}
	// Bob is not held back by alice's.
	if err := tab.Reserve(cfg, "bob"); err != nil {
		t.Fatalf("bob's first: %v", err)
	}
	// One of alice's opens, the other fails: she may reserve one more.
	now := time.Now()
	tab.add(&Session{id: "session-a", owner: "alice", created: now, lastUsed: now, idle: time.Minute, lifetime: time.Hour})
	tab.Unreserve("alice")
	if err := tab.Reserve(cfg, "alice"); err != nil {
		t.Fatalf("alice's after a failed creation: %v", err)
	}
	err = tab.Reserve(cfg, "alice")
	if !errors.Is(err, ErrTooManyOwnSessions) || !strings.Contains(err.Error(), "the first of yours to expire") {
		t.Fatalf("alice's past the bound with one open: %v; want the first expiry named", err)
	}
	// The server-wide bound still holds: alice 2, bob 1, one left.
	if err := tab.Reserve(cfg, "carol"); err != nil {
		t.Fatalf("carol's: %v", err)
	}
	if err := tab.Reserve(cfg, "dave"); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("past max_sessions: %v; want ErrTooManySessions", err)
	}
	if len(tab.creatingBy) != 3 || tab.creatingBy["alice"] != 1 {
		t.Fatalf("creatingBy = %v; want alice 1, bob 1, carol 1", tab.creatingBy)
	}
}

// The refusals say only what is the caller's: a full server tells each
// owner how many of the sessions are theirs and when the first of theirs
// expires, never another owner's expiry nor a count of theirs.
func TestSessionTableRefusalsTellOnlyYours(t *testing.T) {
	var tab Table
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	open := func(id, owner string, idle time.Duration) {
		if err := tab.Reserve(Config{Max: 8}, owner); err != nil {
			t.Fatal(err)
		}
		tab.add(&Session{id: id, owner: owner, created: now, lastUsed: now, idle: idle, lifetime: time.Hour})
	}
	open("session-a1", "alice", time.Minute)   // the first to expire, at 10:01
	open("session-a2", "alice", 2*time.Minute) // 10:02
	open("session-b1", "bob", 10*time.Minute)  // 10:10
	cfg := Config{Max: 4, MaxPerOwner: 2}
	if err := tab.Reserve(cfg, "carol"); err != nil { // the fourth, being created
		t.Fatal(err)
	}
	alice, bob, alice2 := "2026-12-01T10:01:00Z", "2026-12-01T10:10:00Z", "10:02"
	for _, tc := range []struct {
		owner    string
		sentinel error
		want     []string
		notWant  []string
	}{
		{"bob", ErrTooManySessions, []string{"max_sessions", "1 of them are yours", "the first of yours to expire does so at " + bob},
			[]string{alice, alice2, "4", "3"}},
		{"alice", ErrTooManySessions, []string{"max_sessions", "2 of them are yours", "the first of yours to expire does so at " + alice},
			[]string{bob, "4", "3"}},
		{"carol", ErrTooManySessions, []string{"max_sessions", "1 of them are yours"}, []string{alice, bob, alice2, "expire", "4", "3"}},
		{"dave", ErrTooManySessions, []string{"max_sessions", "none is yours"}, []string{alice, bob, alice2, "expire", "4", "3"}},
	} {
		t.Run(tc.owner, func(t *testing.T) {
			err := tab.Reserve(cfg, tc.owner)
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("got %v; want %v", err, tc.sentinel)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q; want %q in it", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("got %q; want no %q in it", err, w)
				}
			}
		})
	}
	// Under max_sessions, per_client_sessions' refusal is alice's alone.
	cfg.Max = 8
	err := tab.Reserve(cfg, "alice")
	if !errors.Is(err, ErrTooManyOwnSessions) || !strings.Contains(err.Error(), "2 of your sessions") ||
		!strings.Contains(err.Error(), alice) || strings.Contains(err.Error(), bob) {
		t.Errorf("alice past per_client_sessions: %v; want her 2 and her first expiry, not bob's", err)
	}
}

func TestSessionTableForgetsOldEnds(t *testing.T) {
	var tab Table
	for i := range keepEnded + 10 {
		tab.remove(&Session{id: fmt.Sprint("s", i), owner: "o"}, "idle")
	}
	if len(tab.ended) != keepEnded || len(tab.order) != keepEnded {
		t.Fatalf("remembered %d (order %d); want %d", len(tab.ended), len(tab.order), keepEnded)
	}
	var no *NoSessionError
	if errors.As(tab.NoSession("o", "s0"), &no); no.Ended != "" {
		t.Errorf("the oldest end is still remembered: %q", no.Ended)
	}
	if errors.As(tab.NoSession("o", fmt.Sprint("s", keepEnded+9)), &no); no.Ended == "" {
		t.Error("the latest end is forgotten")
	}
}

func TestSessionExpiry(t *testing.T) {
	now := time.Now()
	s := &Session{created: now.Add(-50 * time.Minute), lastUsed: now.Add(-time.Minute), idle: 10 * time.Minute, lifetime: time.Hour}
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

// A cell's result tells the deadline the session has once the call ends,
// the one list_sessions then shows, though the session is still busy
// when the result is made (issue 29, item 1).
func TestSessionCellExpiry(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		created time.Time
		want    time.Time
	}{
		{"idle deadline first", now.Add(-time.Minute), now.Add(10 * time.Minute)},
		{"lifetime's end first", now.Add(-55 * time.Minute), now.Add(5 * time.Minute)},
	} {
		s := &Session{created: tc.created, lastUsed: tc.created, idle: 10 * time.Minute, lifetime: time.Hour, busy: true}
		got := s.after(cellOutcome{}, now)
		if !got.Equal(tc.want) {
			t.Errorf("%s: the cell's result says it expires at %s; want %s", tc.name, got, tc.want)
		}
		s.endCall(now)
		s.mu.Lock()
		listed := s.expiresLocked()
		s.mu.Unlock()
		if !listed.Equal(got) {
			t.Errorf("%s: after the call the session expires at %s; the cell's result said %s", tc.name, listed, got)
		}
	}
}

// expiredLocked is what both the timer and a call's start ask, so a late
// timer lets no call into an expired session.
func TestSessionExpired(t *testing.T) {
	now := time.Now()
	s := &Session{created: now.Add(-time.Minute), lastUsed: now.Add(-2 * time.Second), idle: time.Second, lifetime: time.Hour}
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

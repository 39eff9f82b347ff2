package session

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Table holds a server's sessions. Its exported fields are set before
// the first session, and not changed.
type Table struct {
	Log *slog.Logger
	// Ended, if set, is told that a session ended, and why (the text a
	// later call of its owner is told). It must return quickly.
	Ended func(info Info, why string)
	// Closing is closed when the server begins to shut down: a session
	// opened then is ended at once.
	Closing <-chan struct{}

	destroying sync.WaitGroup // ended sessions' sandboxes being destroyed
	mu         sync.Mutex
	open       map[string]*Session
	creating   int
	// creatingBy counts the sessions being created, by owner.
	creatingBy map[string]int
	ended      map[string]endedSession
	order      []string // ended, oldest first
}

// endedSession is what is remembered of a session that ended.
type endedSession struct {
	owner, why string
	at         time.Time
}

// Reserve counts a session of owner being created in, unless cfg.Max
// are open or being created, or cfg.MaxPerOwner of owner's. Its errors
// say only what is owner's: how many of the sessions are owner's and when
// the first of them expires, never another owner's count or times.
func (t *Table) Reserve(cfg Config, owner string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.creatingBy[owner]
	for _, ss := range t.open {
		if ss.owner == owner {
			n++
		}
	}
	if len(t.open)+t.creating >= cfg.Max {
		yours := "; none is yours"
		if n > 0 {
			yours = fmt.Sprintf("; %d of them are yours, open or being created%s", n, t.firstExpiry(owner))
		}
		return fmt.Errorf("%w: the server holds as many sessions as it allows (max_sessions)%s", ErrTooManySessions, yours)
	}
	if cfg.MaxPerOwner > 0 {
		if n >= cfg.MaxPerOwner {
			return fmt.Errorf("%w: %d of your sessions are open or being created, the most one client may have (per_client_sessions)%s",
				ErrTooManyOwnSessions, n, t.firstExpiry(owner))
		}
	}
	if t.creatingBy == nil {
		t.creatingBy = map[string]int{}
	}
	t.creating++
	t.creatingBy[owner]++
	return nil
}

// firstExpiry says when the first of owner's open sessions expires, as
// "; the first of yours to expire does so at TIME", or "" if none is
// open. t.mu is held.
func (t *Table) firstExpiry(owner string) string {
	next := time.Time{}
	for _, ss := range t.open {
		if ss.owner != owner {
			continue
		}
		ss.mu.Lock()
		if x := ss.expiresLocked(); next.IsZero() || x.Before(next) {
			next = x
		}
		ss.mu.Unlock()
	}
	if next.IsZero() {
		return ""
	}
	return fmt.Sprintf("; the first of yours to expire does so at %s", next.UTC().Format(time.RFC3339))
}

// Unreserve forgets a reservation of owner's that did not become a
// session.
func (t *Table) Unreserve(owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.creating--
	t.uncount(owner)
}

// uncount takes one from owner's sessions being created. t.mu is held.
func (t *Table) uncount(owner string) {
	if t.creatingBy[owner]--; t.creatingBy[owner] <= 0 {
		delete(t.creatingBy, owner)
	}
}

// add registers a session that was reserved.
func (t *Table) add(ss *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[string]*Session{}
	}
	t.creating--
	t.uncount(ss.owner)
	t.open[ss.id] = ss
}

// Get returns owner's open session id, or nil.
func (t *Table) Get(owner, id string) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := t.open[id]
	if ss == nil || ss.owner != owner {
		return nil
	}
	return ss
}

// Count returns how many sessions are open.
func (t *Table) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// remove forgets an ended session, remembering why it ended for a while.
func (t *Table) remove(ss *Session, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, ss.id)
	if t.ended == nil {
		t.ended = map[string]endedSession{}
	}
	t.ended[ss.id] = endedSession{owner: ss.owner, why: why, at: time.Now()}
	t.order = append(t.order, ss.id)
	if len(t.order) > keepEnded {
		delete(t.ended, t.order[0])
		t.order = t.order[1:]
	}
}

// NoSession is the error of a call naming id, which owner has no open
// session of: it says why the session ended if it was owner's.
func (t *Table) NoSession(owner, id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := &NoSessionError{ID: id}
	if x, ok := t.ended[id]; ok && x.owner == owner {
		err.Ended = fmt.Sprintf("%s (at %s)", x.why, x.at.UTC().Format(time.RFC3339))
	}
	return err
}

// List lists owner's open sessions, oldest first.
func (t *Table) List(owner string) []Info {
	t.mu.Lock()
	var list []*Session
	for _, ss := range t.open {
		if ss.owner == owner {
			list = append(list, ss)
		}
	}
	t.mu.Unlock()
	out := make([]Info, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.Info())
	}
	slices.SortFunc(out, func(a, b Info) int { return a.Created.Compare(b.Created) })
	return out
}

// EndAll ends every open session, for why.
func (t *Table) EndAll(why string) {
	t.mu.Lock()
	list := make([]*Session, 0, len(t.open))
	for _, ss := range t.open {
		list = append(list, ss)
	}
	t.mu.Unlock()
	for _, ss := range list {
		ss.End(why)
	}
}

// Wait waits for the sandboxes of the sessions that ended to be destroyed.
func (t *Table) Wait() { t.destroying.Wait() }

func newSessionID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "session-" + hex.EncodeToString(b)
}

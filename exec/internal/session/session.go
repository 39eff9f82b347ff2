// Package session keeps sessions: one sandbox each, with exactly the
// hardening of a one-shot run, whose process is a driver of ours (see
// sandbox's drivers/) that keeps one interpreter alive and runs each
// call's code in it, like a notebook cell. It holds the table of open
// sessions (bounded in all and per owner, and what is remembered of
// those that ended), each one's idle and maximum lifetime, and the cell
// protocol: the server speaks to the driver only through the task's
// standard streams, a request a line on its standard input, and the end
// of each cell marked in its standard output and error by a token fresh
// for that cell (see cellstream.go). It gets its sandboxes made; it knows
// nothing of run slots, languages other than a session's own, MCP or the
// configuration file.
package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/watch"
)

// Config bounds sessions.
type Config struct {
	// Max is how many sessions may be open at once; 0 disables sessions.
	// MaxPerOwner is how many of them one owner may have; 0 is no bound
	// but Max.
	Max         int
	MaxPerOwner int
	// IdleTimeout ends a session that ran nothing for that long, unless
	// its creator asked for another; MaxLifetime ends any session that
	// old, busy or not.
	IdleTimeout time.Duration
	MaxLifetime time.Duration
}

// Info describes an open session.
type Info struct {
	ID       string
	Owner    string
	Language string
	Created  time.Time
	// LastUsed is when its last call ended, or Created before the first.
	LastUsed time.Time
	// ExpiresAt is when it ends unless used again: LastUsed plus
	// IdleTimeout, or Created plus MaxLifetime if that comes first.
	ExpiresAt   time.Time
	IdleTimeout time.Duration
	MaxLifetime time.Duration
	// ExecutionCount counts its cells so far.
	ExecutionCount int
	// MemoryBytes is what its memory cgroup holds now; -1 if unknown.
	MemoryBytes int64
}

// ErrNoSession marks a call naming a session that does not exist for its
// owner: unknown, closed, expired, or another owner's (which is not told
// apart from unknown). Errors wrapping it are *NoSessionError.
var ErrNoSession = errors.New("no such session")

// NoSessionError says why a session id names no open session.
type NoSessionError struct {
	ID string
	// Ended says why and when the session ended, if it was the caller's
	// and ended a short while ago; "" for an id that is unknown.
	Ended string
}

func (e *NoSessionError) Error() string {
	if e.Ended != "" {
		return fmt.Sprintf("session %s has ended: %s", e.ID, e.Ended)
	}
	return fmt.Sprintf("session %q does not exist", e.ID)
}

func (e *NoSessionError) Unwrap() error { return ErrNoSession }

// ErrTooManySessions marks a session refused because Config.Max
// sessions are open.
var ErrTooManySessions = fmt.Errorf("too many sessions: %w", errdefs.ErrResourceExhausted)

// ErrTooManyOwnSessions marks a session refused because its owner has
// Config.MaxPerOwner sessions open.
var ErrTooManyOwnSessions = fmt.Errorf("too many sessions of one owner: %w", errdefs.ErrResourceExhausted)

// ErrNoSessions marks a session asked of a language that has no session
// driver, or of a server whose sessions are disabled.
var ErrNoSessions = fmt.Errorf("sessions are not available: %w", errdefs.ErrNotImplemented)

const (
	// driverStartTimeout bounds the start of a session's interpreter,
	// once its sandbox runs: its answer to cell 0.
	driverStartTimeout = 30 * time.Second
	// interruptGrace is how long an interrupted cell has to stop: past
	// it, the session is ended.
	interruptGrace = 2 * time.Second
	// endGrace bounds the wait for a cell's end in its second stream once
	// it came in the first.
	endGrace = time.Second
	// keepEnded is how many ended sessions are remembered, so that a call
	// naming one is told why it ended.
	keepEnded = 256
)

// Session is one open session: its sandbox, whose task runs the driver,
// and its bounds.
type Session struct {
	t        *Table
	lang     config.Language
	sb       *sandbox.Sandbox
	io       *Streams
	id       string
	owner    string
	created  time.Time
	idle     time.Duration
	lifetime time.Duration
	// turn holds a token while a call runs a cell: calls on one session
	// run one at a time.
	turn chan struct{}
	// done is closed when the session ends; gone when its driver's
	// process ended, with code its status.
	done chan struct{}
	gone chan struct{}
	code uint32

	mu       sync.Mutex
	busy     bool
	lastUsed time.Time
	cells    int
	why      string // why it ended
	timer    *time.Timer
	endOnce  sync.Once
}

// ID is the session's id, which its owner names it by.
func (ss *Session) ID() string { return ss.id }

// Language is the language it runs.
func (ss *Session) Language() config.Language { return ss.lang }

// Done is closed once the session has ended.
func (ss *Session) Done() <-chan struct{} { return ss.done }

// Turn waits for the session's previous call to end, or for the session
// or ctx to end; release ends the call's turn.
func (ss *Session) Turn(ctx context.Context) (release func(), err error) {
	select {
	case ss.turn <- struct{}{}:
		return func() { <-ss.turn }, nil
	case <-ss.done:
		return nil, ss.t.NoSession(ss.owner, ss.id)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the session's previous call to end: %w", context.Cause(ctx))
	}
}

// watch waits for the driver's process to end, by containerd's word or
// the kernel's, and ends the session unless a call is running, which
// reports it.
func (ss *Session) watch() {
	code, ended := ss.sb.WaitExit(ss.done)
	if !ended {
		return
	}
	ss.mu.Lock()
	ss.code = code
	close(ss.gone)
	busy := ss.busy
	ss.mu.Unlock()
	if !busy {
		ss.End(ss.goneReason())
	}
}

// goneReason says why the driver's process ended.
func (ss *Session) goneReason() string {
	r := &sandbox.Result{}
	ss.sb.Explain(r, ss.code)
	switch {
	case r.OOMKilled:
		return fmt.Sprintf("the interpreter ran out of memory (limit %s) and was killed, so the session ended", config.Size(ss.lang.Limits.MemoryBytes))
	case r.Signal != "":
		return fmt.Sprintf("the interpreter was killed by %s, so the session ended", r.Signal)
	}
	return fmt.Sprintf("the interpreter exited with status %d, so the session ended", ss.code)
}

// startCall marks the session busy, unless it ended or its time is up:
// a timer that fires late lets no call into an expired session.
func (ss *Session) startCall() bool {
	ss.mu.Lock()
	why := ss.expiredLocked(time.Now())
	ok := why == "" && ss.why == "" && !watch.IsClosed(ss.gone)
	if ok {
		ss.busy = true
	}
	ss.mu.Unlock()
	if why != "" {
		ss.End(why)
	}
	return ok
}

// count counts a cell about to be sent, and returns its number.
func (ss *Session) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.cells++
	return ss.cells
}

// endCall marks the session idle again, from used, or from now if used
// is zero: a cell's result told its caller the deadline counted from
// used, and the session keeps that one.
func (ss *Session) endCall(used time.Time) {
	if used.IsZero() {
		used = time.Now()
	}
	ss.mu.Lock()
	ss.busy = false
	ss.lastUsed = used
	if ss.timer != nil && ss.why == "" {
		ss.timer.Reset(time.Until(ss.expiresLocked()))
	}
	gone := watch.IsClosed(ss.gone)
	ss.mu.Unlock()
	if gone {
		ss.End(ss.goneReason())
	}
}

// expiresLocked is when the session ends unless used again; ss.mu is held.
// A busy session has no idle deadline, only its lifetime's end.
func (ss *Session) expiresLocked() time.Time {
	if ss.busy {
		return ss.created.Add(ss.lifetime)
	}
	return ss.deadline(ss.lastUsed)
}

// deadline is when the session ends if it is idle from used: used plus
// its idle timeout, or its lifetime's end if that comes first.
func (ss *Session) deadline(used time.Time) time.Time {
	end := ss.created.Add(ss.lifetime)
	if idle := used.Add(ss.idle); idle.Before(end) {
		return idle
	}
	return end
}

// expire ends the session if its time is up, and otherwise looks again
// when it might be.
func (ss *Session) expire() {
	ss.mu.Lock()
	now := time.Now()
	why := ss.expiredLocked(now)
	if why == "" {
		ss.timer.Reset(ss.expiresLocked().Sub(now))
	}
	ss.mu.Unlock()
	if why != "" {
		ss.End(why)
	}
}

// expiredLocked says why the session's time is up at now, or returns ""
// if it is not; ss.mu is held.
func (ss *Session) expiredLocked(now time.Time) string {
	switch {
	case !now.Before(ss.created.Add(ss.lifetime)):
		return fmt.Sprintf("it reached its maximum lifetime of %s (max_lifetime)", ss.lifetime)
	case !ss.busy && !now.Before(ss.lastUsed.Add(ss.idle)):
		return fmt.Sprintf("it was idle for %s (its idle timeout)", ss.idle)
	}
	return ""
}

// End ends the session once: it is forgotten, and its sandbox destroyed
// (which kills whatever still runs in it).
func (ss *Session) End(why string) {
	ss.endOnce.Do(func() {
		ss.mu.Lock()
		ss.why = why
		if ss.timer != nil {
			ss.timer.Stop()
		}
		ss.mu.Unlock()
		// Its destroy is counted before the session leaves the table:
		// a shutdown ends the sessions it finds there, then waits for
		// the table's destroys, so it waits for this one whichever ends
		// it.
		ss.t.destroying.Add(1)
		// Why it ended is on record before a call waiting on done wakes
		// to say so.
		ss.t.remove(ss, why)
		close(ss.done)
		if h := ss.t.Ended; h != nil {
			h(ss.Info(), why)
		}
		go func() {
			defer ss.t.destroying.Done()
			ss.sb.Destroy(context.Background())
		}()
		ss.t.Log.Info("session ended", "session", ss.id, "why", why)
	})
}

// Info describes the session now.
func (ss *Session) Info() Info {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return Info{
		ID: ss.id, Owner: ss.owner, Language: ss.lang.Name,
		Created: ss.created, LastUsed: ss.lastUsed, ExpiresAt: ss.expiresLocked(),
		IdleTimeout: ss.idle, MaxLifetime: ss.lifetime,
		ExecutionCount: ss.cells,
		MemoryBytes:    memoryInUse(ss.sb.MemoryCgroup()),
	}
}

// memoryInUse reads what the memory cgroup at dir holds: memory.current
// (cgroup v2) or memory.usage_in_bytes (v1); -1 if neither says.
func memoryInUse(dir string) int64 {
	if dir == "" {
		return -1
	}
	for _, name := range []string{"memory.current", "memory.usage_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return -1
}

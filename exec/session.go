package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
)

// A session is one sandbox, with exactly the hardening of a one-shot run,
// whose process is a driver of ours (see drivers/) that keeps one
// interpreter alive and runs each call's code in it, like a notebook cell.
// The server speaks to the driver only through the task's standard
// streams: a request a line on its standard input, and the end of each
// cell marked in its standard output and error by a token fresh for that
// cell. Sessions are bounded in number (SessionConfig.Max), idle time and
// lifetime, belong to the owner that made them, and end with the
// executor.

// SessionConfig bounds sessions.
type SessionConfig struct {
	// Max is how many sessions may be open at once; 0 disables sessions.
	Max int
	// IdleTimeout ends a session that ran nothing for that long, unless
	// its creator asked for another; MaxLifetime ends any session that
	// old, busy or not.
	IdleTimeout time.Duration
	MaxLifetime time.Duration
}

// SessionInfo describes an open session.
type SessionInfo struct {
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

// SessionResult is what a run in a session adds to its Result.
type SessionResult struct {
	ID string
	// ExecutionCount is the cell's number in its session, from 1.
	ExecutionCount int
	// ExpiresAt is the session's renewed expiry.
	ExpiresAt time.Time
	// Interrupted says the cell was interrupted (at its timeout, or
	// because its call was cancelled) and the interpreter came back: the
	// session lives on, with its state.
	Interrupted bool
	// Ended says why the session ended with this call (the interpreter
	// crashed, exited, ran out of memory, or ignored its interrupt); ""
	// if it lives on.
	Ended string
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

// ErrTooManySessions marks a session refused because SessionConfig.Max
// sessions are open.
var ErrTooManySessions = fmt.Errorf("too many sessions: %w", errdefs.ErrResourceExhausted)

// ErrNoSessions marks a session asked of a language that has no session
// driver, or of an executor whose sessions are disabled.
var ErrNoSessions = fmt.Errorf("sessions are not available: %w", errdefs.ErrNotImplemented)

// CreateSession starts a session of language for owner, with the given
// idle timeout (zero: SessionConfig.IdleTimeout; it may not exceed
// MaxLifetime), and returns once its interpreter is ready.
func (e *Executor) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (SessionInfo, error) {
	return SessionInfo{}, fmt.Errorf("%w: not built yet", ErrNoSessions)
}

// CloseSession ends owner's session id. It reports whether the session
// was open; closing a session that is not is no error.
func (e *Executor) CloseSession(owner, id string) bool {
	return false
}

// Sessions lists owner's open sessions, oldest first.
func (e *Executor) Sessions(owner string) []SessionInfo {
	return nil
}

// SessionLimits returns the executor's bounds on sessions.
func (e *Executor) SessionLimits() SessionConfig {
	return e.cfg.Sessions
}

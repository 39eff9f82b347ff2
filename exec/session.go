package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/session"
	"code-sandbox-mcp/exec/internal/sweep"
)

// Sessions are one sandbox each, whose interpreter lives from call to
// call, like a notebook's: see package session. They are bounded in
// number (SessionConfig.Max), idle time and lifetime, belong to the owner
// that made them, and end with the executor.

// SessionConfig bounds sessions.
type SessionConfig = session.Config

// SessionInfo describes an open session.
type SessionInfo = session.Info

// NoSessionError says why a session id names no open session.
type NoSessionError = session.NoSessionError

var (
	// ErrNoSession marks a call naming a session that does not exist for
	// its owner: unknown, closed, expired, or another owner's (which is
	// not told apart from unknown). Errors wrapping it are
	// *NoSessionError.
	ErrNoSession = session.ErrNoSession
	// ErrTooManySessions marks a session refused because
	// SessionConfig.Max sessions are open.
	ErrTooManySessions = session.ErrTooManySessions
	// ErrTooManyOwnSessions marks a session refused because its owner
	// has SessionConfig.MaxPerOwner sessions open.
	ErrTooManyOwnSessions = session.ErrTooManyOwnSessions
	// ErrNoSessions marks a session asked of a language that has no
	// session driver, or of an executor whose sessions are disabled.
	ErrNoSessions = session.ErrNoSessions
)

// CreateSession starts a session of language for owner, with the given
// idle timeout (zero: SessionConfig.IdleTimeout; it may not exceed
// MaxLifetime), and returns once its interpreter is ready. Creation takes
// one of the executor's run slots while it lasts.
func (e *Executor) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (SessionInfo, error) {
	cfg := e.cfg.Sessions
	lang, ok := e.langs[language]
	switch {
	case !ok:
		return SessionInfo{}, fmt.Errorf("unknown language %q: %w", language, errdefs.ErrInvalidArgument)
	case cfg.Max <= 0:
		return SessionInfo{}, fmt.Errorf("%w: this server has them turned off (max_sessions = 0)", ErrNoSessions)
	case lang.Config().SessionDriver == "":
		return SessionInfo{}, fmt.Errorf("%w: language %q has no session driver", ErrNoSessions, language)
	case idle < 0 || idle > cfg.MaxLifetime:
		return SessionInfo{}, fmt.Errorf("idle timeout %s is not between 0 and the maximum lifetime of %s: %w", idle, cfg.MaxLifetime, errdefs.ErrInvalidArgument)
	case idle == 0:
		idle = cfg.IdleTimeout
	}
	if !e.enter() {
		return SessionInfo{}, ErrClosed
	}
	defer e.runs.Done()
	caller := ctx
	ctx, cancel := e.h.Life.UntilClosed(ctx)
	defer cancel()

	if err := e.sessions.Reserve(cfg, owner); err != nil {
		return SessionInfo{}, err
	}
	opened := false
	defer func() {
		if !opened {
			e.sessions.Unreserve(owner)
		}
	}()
	release, err := e.takeSlot(ctx, nil, "")
	if err != nil {
		return SessionInfo{}, err
	}
	defer release()
	img, err := lang.Ready(ctx)
	if err != nil {
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	now := time.Now()
	streams := session.NewStreams(lang.Config().Limits.OutputBytes)
	sb, err := e.h.New(ctx, lang.Config(), sandbox.Options{Image: img, Deadline: now.Add(cfg.MaxLifetime + sweep.CleanupGrace), Session: streams.Sandbox()})
	if err != nil {
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	opened = true // Open uses the reservation up, whatever comes of it
	ss, err := e.sessions.Open(ctx, session.Opening{
		Owner: owner, Lang: lang.Config(), Sandbox: sb, Streams: streams,
		Created: now, Idle: idle, Lifetime: cfg.MaxLifetime,
	})
	if errors.Is(err, session.ErrClosing) {
		return SessionInfo{}, ErrClosed
	}
	if err != nil {
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	return ss.Info(), nil
}

// CloseSession ends owner's session id. It reports whether the session
// was open; closing a session that is not is no error.
func (e *Executor) CloseSession(owner, id string) bool {
	ss := e.sessions.Get(owner, id)
	if ss == nil {
		return false
	}
	ss.End("closed by close_session")
	return true
}

// Sessions lists owner's open sessions, oldest first.
func (e *Executor) Sessions(owner string) []SessionInfo {
	return e.sessions.List(owner)
}

// SessionLimits returns the executor's bounds on sessions.
func (e *Executor) SessionLimits() SessionConfig {
	return e.cfg.Sessions
}

// runInSession runs req's code as the next cell of its session. The call
// waits for its turn (cancellably), then for a run slot.
func (e *Executor) runInSession(ctx context.Context, req Request, timeout time.Duration) (*Result, error) {
	ss := e.sessions.Get(req.Owner, req.Session)
	if ss == nil {
		return nil, e.sessions.NoSession(req.Owner, req.Session)
	}
	if name := ss.Language().Name; name != req.Language {
		return nil, fmt.Errorf("session %s runs %s, not %s: call its own language's tool: %w", ss.ID(), name, req.Language, errdefs.ErrInvalidArgument)
	}
	endTurn, err := ss.Turn(ctx)
	if err != nil {
		return nil, err
	}
	defer endTurn()
	release, err := e.takeSlot(ctx, ss.Done(), req.Language)
	if errors.Is(err, errGone) {
		return nil, e.sessions.NoSession(req.Owner, req.Session)
	}
	if err != nil {
		return nil, err
	}
	defer release()
	return ss.Run(ctx, req.Code, req.Files, timeout, req.Output)
}

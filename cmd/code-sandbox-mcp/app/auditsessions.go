package app

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/exec"
)

// auditedSessions is a session manager whose creations and closes are
// recorded.
type auditedSessions struct {
	mcpserver.SessionManager
	a *auditor
}

// wrapSessions returns m, recording the sessions created and closed
// through it.
func (a *auditor) wrapSessions(m mcpserver.SessionManager) mcpserver.SessionManager {
	if a == nil {
		return m
	}
	return auditedSessions{SessionManager: m, a: a}
}

// sessionCreated is session_created's fields.
type sessionCreated struct {
	Principal          string `json:"principal"`
	Language           string `json:"language"`
	Session            string `json:"session,omitempty"`
	IdleTimeoutSeconds int64  `json:"idle_timeout_seconds,omitempty"`
	MaxLifetimeSeconds int64  `json:"max_lifetime_seconds,omitempty"`
	Error              string `json:"error,omitempty"`
}

// CreateSession creates the session, then records it. A session whose
// record cannot be written is closed again and refused, as a run is.
func (s auditedSessions) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error) {
	info, err := s.SessionManager.CreateSession(ctx, owner, language, idle)
	rec := sessionCreated{Principal: owner, Language: language}
	if err != nil {
		rec.Error = err.Error()
		s.a.write(eventSessionCreated, rec)
		return info, err
	}
	rec.Session = info.ID
	rec.IdleTimeoutSeconds, rec.MaxLifetimeSeconds = int64(info.IdleTimeout/time.Second), int64(info.MaxLifetime/time.Second)
	if werr := s.a.log.Write(eventSessionCreated, rec); werr != nil {
		s.a.logger.Error("the audit log cannot be written; closing the new session", "session", info.ID, "path", s.a.path, "err", werr)
		s.SessionManager.CloseSession(owner, info.ID)
		return exec.SessionInfo{}, notRecorded(werr)
	}
	return info, nil
}

// CloseSession closes the session and records the call.
func (s auditedSessions) CloseSession(owner, id string) bool {
	open := s.SessionManager.CloseSession(owner, id)
	s.a.write(eventSessionClosed, struct {
		Principal string `json:"principal"`
		Session   string `json:"session"`
		WasOpen   bool   `json:"was_open"`
	}{owner, id, open})
	return open
}

// observe returns ec with a SessionEnded hook (after any it has) that
// records each session's end, however it ended.
func (a *auditor) observe(ec exec.Config) exec.Config {
	if a == nil {
		return ec
	}
	prev := ec.Hooks.SessionEnded
	ec.Hooks.SessionEnded = func(info exec.SessionInfo, why string) {
		if prev != nil {
			prev(info, why)
		}
		a.write(eventSessionEnded, struct {
			Principal      string `json:"principal"`
			Language       string `json:"language"`
			Session        string `json:"session"`
			Why            string `json:"why"`
			ExecutionCount int    `json:"execution_count"`
		}{info.Owner, info.Language, info.ID, why, info.ExecutionCount})
	}
	return ec
}

// taskRecord is task_created's and task_ended's fields.
type taskRecord struct {
	Principal string `json:"principal"`
	Task      string `json:"task"`
	Tool      string `json:"tool"`
	Status    string `json:"status"`
	// TTLSeconds is how long the task is kept from its creation
	// (task_created only).
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// DurationMs is how long it ran, IsError whether its result is an
	// error, Reason why it failed or was cancelled (task_ended only).
	DurationMs int64  `json:"duration_ms,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// taskEvents returns what records each task's creation and end (a task
// has no other status changes: it is working from its creation until it
// ends completed, failed or cancelled); nil without an audit log. The
// run a task makes has its own run_started and run_ended, which name
// the task. A task_created that cannot be written is logged and the task
// goes on: its run's run_started, which fails closed, still stands
// between it and any program.
func (a *auditor) taskEvents() func(mcpserver.TaskEvent) {
	if a == nil {
		return nil
	}
	return func(e mcpserver.TaskEvent) {
		rec := taskRecord{Principal: e.Principal, Task: e.Task, Tool: e.Tool, Status: e.Status,
			TTLSeconds: e.TTL.Seconds(), DurationMs: e.Duration.Milliseconds(), IsError: e.IsError, Reason: e.Reason}
		event := eventTaskEnded
		if e.Status == string(mcp.TaskStatusWorking) {
			event = eventTaskCreated
		}
		a.write(event, rec)
	}
}

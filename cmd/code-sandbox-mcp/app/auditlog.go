package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/audit"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
)

// The events of the server's audit log, and the fields of each, after the
// time, event and prev that package audit puts first:
//
//	start            version, pid, transport ("stdio", "http"), listen (http),
//	                 namespace, languages, pass_through_env (the names set),
//	                 pass_through_env_unset, include_code
//	run_started      run_id, principal, tool, language, image, session,
//	                 code {sha256, size, text (with include_code)},
//	                 files_in [{path, sha256, size}], limits {...}
//	run_ended        the fields of run_started (code without its text),
//	                 then image_digest, execution_count and session_ended
//	                 (in a session), files_out, and outcome: {exit_code,
//	                 signal, timed_out, oom_killed, duration_ms, ...} if the
//	                 program ran, {error} if it could not
//	session_created  principal, language, session, idle_timeout_seconds,
//	                 max_lifetime_seconds; or principal, language, error
//	session_closed   principal, session, was_open (a close_session call)
//	session_ended    principal, language, session, why, execution_count
//	auth_failed      remote, reason (never the token)
//	rotated          (by package audit, first in a file after SIGHUP)
//	shutdown         reason
//
// A run_started and its run_ended share their run_id. Values of
// pass-through variables are never written, only their names: every
// string of every record (paths, error texts, why, code text, anything)
// has each value of minRedactBytes or more replaced by redactMarker of
// its variable, such as "[redacted SECRET_X]"; hashes (sha256) are
// written as computed. A value shorter than that cannot be kept out of
// free text without mangling it, and is not redacted: start names such
// variables in pass_through_env_not_redacted, and the server warns of them.
const (
	eventStart          = "start"
	eventRunStarted     = "run_started"
	eventRunEnded       = "run_ended"
	eventSessionCreated = "session_created"
	eventSessionClosed  = "session_closed"
	eventSessionEnded   = "session_ended"
	eventTaskCreated    = "task_created"
	eventTaskEnded      = "task_ended"
	eventAuthFailed     = "auth_failed"
	eventShutdown       = "shutdown"
)

// auditor writes the audit log of a serving server ([audit] path,
// --audit-log). A nil *auditor keeps none: its methods do nothing and its
// wrappers return what they wrap.
type auditor struct {
	log         *audit.Log
	path        string
	includeCode bool
	langs       map[string]config.Language
	version     string
	logger      *slog.Logger
	// transport is set by start: "stdio" or "http".
	transport string

	// running counts the runs between their two records; drained, if
	// set, is closed when running falls to 0 (see shutdown).
	mu      sync.Mutex
	running int
	drained chan struct{}

	// The auth_failed ration (see authFailed): tokens at authAt, and
	// the records left out since the last one written. now reads the
	// clock; nil is time.Now.
	authTokens     float64
	authAt         time.Time
	authSuppressed int
	now            func() time.Time
}

// shutdownDrain bounds how long shutdown waits for the runs in flight to
// be recorded as ended: the executor is closed by then, so they end at
// once unless something hangs.
const shutdownDrain = 10 * time.Second

// openAuditor opens cfg's audit log, for a server at version, or
// returns nil if there is none.
func openAuditor(cfg *config.Config, version string, logger *slog.Logger) (*auditor, error) {
	if cfg.Audit.Path == "" {
		return nil, nil
	}
	l, err := audit.Open(cfg.Audit.Path)
	if err != nil {
		return nil, err
	}
	a := &auditor{log: l, path: cfg.Audit.Path, includeCode: cfg.Audit.IncludeCode,
		langs: map[string]config.Language{}, version: version, logger: logger}
	for _, lang := range cfg.Enabled() {
		a.langs[lang.Name] = lang
	}
	return a, nil
}

// startRecord is the start event's fields.
type startRecord struct {
	Version             string   `json:"version"`
	PID                 int      `json:"pid"`
	Transport           string   `json:"transport"`
	Listen              string   `json:"listen,omitempty"`
	Namespace           string   `json:"namespace"`
	Languages           []string `json:"languages"`
	PassThroughEnv      []string `json:"pass_through_env"`
	PassThroughEnvUnset []string `json:"pass_through_env_unset,omitempty"`
	// PassThroughEnvNotRedacted names the variables whose values are too
	// short to redact (see minRedactBytes).
	PassThroughEnvNotRedacted []string `json:"pass_through_env_not_redacted,omitempty"`
	IncludeCode               bool     `json:"include_code"`
}

// minRedactBytes is the shortest pass-through value redacted from the
// log. A value of one to three bytes ("1", "yes", "C") would match
// nearly every string the log holds and make it unreadable, and no secret
// is that short.
const minRedactBytes = 4

// redactMarker stands for the value of the variable name in the log.
func redactMarker(name string) string { return "[redacted " + name + "]" }

// newRedactor returns the function that replaces, in a string, each
// value of redactedEnv(cfg) that env sets and that has minRedactBytes or
// more by its redactMarker, and the names of the variables whose values
// are too short for it (empty values have nothing to hide). It replaces
// too the form of a value that encoding/json writes, each byte that is
// not UTF-8 as U+FFFD. A longer value wins over one it contains. It is
// nil if there is nothing to redact.
func newRedactor(cfg *config.Config, env lookupFunc) (redact func(string) string, tooShort []string) {
	type pair struct{ value, marker string }
	var pairs []pair
	for _, name := range redactedEnv(cfg) {
		v, ok := env(name)
		switch {
		case !ok || v == "":
			continue
		case len(v) < minRedactBytes:
			tooShort = append(tooShort, name)
			continue
		}
		pairs = append(pairs, pair{v, redactMarker(name)})
		if j := []rune(v); string(j) != v { // not UTF-8: as json writes it
			pairs = append(pairs, pair{string(j), redactMarker(name)})
		}
	}
	if len(pairs) == 0 {
		return nil, tooShort
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.value) - len(a.value) })
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.value, p.marker)
	}
	return strings.NewReplacer(args...).Replace, tooShort
}

// start records the start-up of the server on transport, listening on
// listen (HTTP). An error means the server must not serve: it could not
// record what it does.
func (a *auditor) start(cfg *config.Config, env lookupFunc, transport, listen string) error {
	if a == nil {
		return nil
	}
	a.transport = transport
	set, unset := passEnvNames(cfg, env)
	if set == nil {
		set = []string{}
	}
	redact, tooShort := newRedactor(cfg, env)
	a.log.SetRedact(redact, "sha256")
	if len(tooShort) > 0 {
		a.logger.Warn("pass-through values too short to redact from the audit log: a program can put them in it (a file name, say)",
			"pass_through_env", tooShort, "min_bytes", minRedactBytes)
	}
	err := a.log.Write(eventStart, startRecord{
		Version: a.version, PID: os.Getpid(), Transport: transport, Listen: listen,
		Namespace: cfg.Containerd.Namespace, Languages: cfg.Names(),
		PassThroughEnv: set, PassThroughEnvUnset: unset, PassThroughEnvNotRedacted: tooShort, IncludeCode: a.includeCode,
	})
	if err != nil {
		return fmt.Errorf("the audit log %s cannot be written, so the server does not start: %w", a.path, err)
	}
	a.logger.Info("audit log", "path", a.path, "include_code", a.includeCode)
	return nil
}

// shutdown records the end of serving, which err (or ctx's cause) ended;
// call it once the executor is closed, so that the sessions it ended come
// before.
func (a *auditor) shutdown(ctx context.Context, err error) {
	if a == nil {
		return
	}
	a.drain()
	reason := "stdin closed: the client is gone"
	switch {
	case err != nil:
		reason = err.Error()
	case ctx.Err() != nil:
		reason = context.Cause(ctx).Error()
	case a.transport != "stdio":
		reason = "the server stopped"
	}
	a.write(eventShutdown, struct {
		Reason string `json:"reason"`
	}{reason})
}

// drain waits, up to shutdownDrain, for the runs in flight to write
// their run_ended: a transport may return before its handlers do (mcp-go's
// stdio workers, an HTTP handler past the grace period).
func (a *auditor) drain() {
	a.mu.Lock()
	if a.running == 0 {
		a.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	a.drained = ch
	n := a.running
	a.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(shutdownDrain):
		a.logger.Error("runs still in flight at shutdown; their run_ended may be missing from the audit log", "runs", n, "waited", shutdownDrain)
	}
}

// begin and end bracket a run between its two records.
func (a *auditor) begin() {
	a.mu.Lock()
	a.running++
	a.mu.Unlock()
}

func (a *auditor) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running--; a.running == 0 && a.drained != nil {
		close(a.drained)
		a.drained = nil
	}
}

// close closes the log.
func (a *auditor) close() {
	if a == nil {
		return
	}
	if err := a.log.Close(); err != nil {
		a.logger.Error("closing the audit log", "path", a.path, "err", err)
	}
}

// rotate reopens the log's path (SIGHUP), continuing the chain in a new
// file if the old one was moved away.
func (a *auditor) rotate() {
	if err := a.log.Rotate(); err != nil {
		a.logger.Error("rotating the audit log", "path", a.path, "err", err)
		return
	}
	a.logger.Info("audit log reopened (SIGHUP)", "path", a.path, "last", a.log.Last())
}

// write writes a record whose loss cannot undo what it records (the run
// or session has ended, a request was refused): a failure is logged at
// error level, for the operator, and the caller goes on.
func (a *auditor) write(event string, fields any) {
	if err := a.log.Write(event, fields); err != nil {
		a.logger.Error("the audit log cannot be written; this event is not recorded", "event", event, "path", a.path, "err", err)
	}
}

// notRecorded refuses a call whose record cannot be written, with the
// text the model reads. It is also errdefs' Unavailable.
func notRecorded(err error) error {
	return &mcpserver.Refusal{Err: notRecordedError{err}, Text: fmt.Sprintf(
		"Nothing was run: this server records every call in an audit log, cannot write to it now (%v), and runs nothing it cannot record. This is not a problem of your code, and retrying will not help until it is fixed: ask the user to free or fix the server's audit log file (see the server's log).", err)}
}

// notRecordedError is the cause of notRecorded's refusal.
type notRecordedError struct{ err error }

func (e notRecordedError) Error() string {
	return fmt.Sprintf("the audit log cannot be written (%v): nothing was run", e.err)
}

func (e notRecordedError) Unwrap() error { return e.err }

// Unavailable marks the error as errdefs.ErrUnavailable.
func (notRecordedError) Unavailable() {}

// Anyone who reaches the port can fail authentication, as often as they
// like: the auth_failed records are rationed to authFailedBurst at once
// and authFailedPerSecond after that, so that a flood of bad requests
// cannot fill the disk or keep it busy with fsyncs. The next record
// written counts those left out in "suppressed" (the metric
// code_sandbox_auth_failures_total counts them all).
const (
	authFailedBurst     = 20
	authFailedPerSecond = 1
)

// authFailed records a request refused for its token, within the ration;
// reason is one of httpauth's fixed few, which never hold the token.
func (a *auditor) authFailed(r *http.Request, reason string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	now := a.clock()
	if a.authAt.IsZero() {
		a.authTokens = authFailedBurst
	} else {
		a.authTokens = min(authFailedBurst, a.authTokens+now.Sub(a.authAt).Seconds()*authFailedPerSecond)
	}
	a.authAt = now
	if a.authTokens < 1 {
		a.authSuppressed++
		a.mu.Unlock()
		return
	}
	a.authTokens--
	suppressed := a.authSuppressed
	a.authSuppressed = 0
	a.mu.Unlock()
	a.write(eventAuthFailed, struct {
		Remote     string `json:"remote"`
		Reason     string `json:"reason"`
		Suppressed int    `json:"suppressed,omitempty"`
	}{r.RemoteAddr, reason, suppressed})
}

// clock is the time for the auth_failed ration.
func (a *auditor) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

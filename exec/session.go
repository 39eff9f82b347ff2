package exec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"code-sandbox-mcp/exec/internal/pool"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/sweep"
	"code-sandbox-mcp/exec/internal/watch"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/workspace"
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

// ErrTooManyOwnSessions marks a session refused because its owner has
// SessionConfig.MaxPerOwner sessions open.
var ErrTooManyOwnSessions = fmt.Errorf("too many sessions of one owner: %w", errdefs.ErrResourceExhausted)

// ErrNoSessions marks a session asked of a language that has no session
// driver, or of an executor whose sessions are disabled.
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

// sessionTable holds an executor's sessions.
type sessionTable struct {
	mu       sync.Mutex
	open     map[string]*session
	creating int
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

// session is one open session: its sandbox, whose task runs the driver,
// and its bounds.
type session struct {
	e        *Executor
	lang     *pool.Language
	sb       *sandbox.Sandbox
	io       *sessionIO
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

	if err := e.sessions.reserve(cfg, owner); err != nil {
		return SessionInfo{}, err
	}
	registered := false
	defer func() {
		if !registered {
			e.sessions.unreserve(owner)
		}
	}()
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return SessionInfo{}, fmt.Errorf("waiting for a free sandbox slot: %w", context.Cause(ctx))
	}
	img, err := lang.Ready(ctx)
	if err != nil {
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	now := time.Now()
	sio := newSessionIO(lang.Config().Limits.OutputBytes)
	sb, err := e.h.New(ctx, lang.Config(), sandbox.Options{Image: img, Deadline: now.Add(cfg.MaxLifetime + sweep.CleanupGrace), Session: sio.streams()})
	if err != nil {
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	ss := &session{
		e: e, lang: lang, sb: sb, io: sio,
		id: newSessionID(), owner: owner,
		created: now, lastUsed: now, idle: idle, lifetime: cfg.MaxLifetime,
		turn: make(chan struct{}, 1), done: make(chan struct{}), gone: make(chan struct{}),
		busy: true, // until it is ready: watch leaves its end to us
	}
	go ss.watch()
	// Cell 0 runs nothing: its answer says the interpreter is up.
	c, err := ss.cell(ctx, "", 0, driverStartTimeout)
	if err == nil && (c.ended != "" || c.status.Status != "ok") {
		err = fmt.Errorf("the %s session driver did not start: %s%s: %w", lang.Config().SessionDriver, c.failure(), quoteTail(c.stderr), errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		ss.end("it did not start")
		return SessionInfo{}, e.notAnswering(caller, err)
	}
	e.sessions.add(ss)
	registered = true
	if e.h.Life.Closed() {
		// Close began after cell 0 was answered, and its end of every
		// session may have run before the add.
		ss.end("the server is shutting down")
		return SessionInfo{}, ErrClosed
	}
	ss.mu.Lock()
	ss.busy = false
	// Idle from now: the time its sandbox took to start is not idle time.
	ss.lastUsed = time.Now()
	ss.timer = time.AfterFunc(time.Until(ss.expiresLocked()), ss.expire)
	gone := watch.IsClosed(ss.gone)
	ss.mu.Unlock()
	if gone {
		ss.end(ss.goneReason())
		return SessionInfo{}, fmt.Errorf("the %s session driver ended as it started: %s: %w", lang.Config().SessionDriver, ss.goneReason(), errdefs.ErrFailedPrecondition)
	}
	e.h.Log.Info("session created", "session", ss.id, "run", sb.ID(), "language", language, "took", time.Since(now))
	return ss.info(), nil
}

// CloseSession ends owner's session id. It reports whether the session
// was open; closing a session that is not is no error.
func (e *Executor) CloseSession(owner, id string) bool {
	ss := e.sessions.get(owner, id)
	if ss == nil {
		return false
	}
	ss.end("closed by close_session")
	return true
}

// Sessions lists owner's open sessions, oldest first.
func (e *Executor) Sessions(owner string) []SessionInfo {
	e.sessions.mu.Lock()
	var list []*session
	for _, ss := range e.sessions.open {
		if ss.owner == owner {
			list = append(list, ss)
		}
	}
	e.sessions.mu.Unlock()
	out := make([]SessionInfo, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return a.Created.Compare(b.Created) })
	return out
}

// SessionLimits returns the executor's bounds on sessions.
func (e *Executor) SessionLimits() SessionConfig {
	return e.cfg.Sessions
}

// endSessions ends every session, at shutdown.
func (e *Executor) endSessions(why string) {
	e.sessions.mu.Lock()
	list := make([]*session, 0, len(e.sessions.open))
	for _, ss := range e.sessions.open {
		list = append(list, ss)
	}
	e.sessions.mu.Unlock()
	for _, ss := range list {
		ss.end(why)
	}
}

// runInSession runs req's code as the next cell of its session. The call
// waits for its turn (cancellably), then for a run slot.
func (e *Executor) runInSession(ctx context.Context, req Request, timeout time.Duration) (*Result, error) {
	ss := e.sessions.get(req.Owner, req.Session)
	if ss == nil {
		return nil, e.sessions.noSession(req.Owner, req.Session)
	}
	if ss.lang.Config().Name != req.Language {
		return nil, fmt.Errorf("session %s runs %s, not %s: call its own language's tool: %w", ss.id, ss.lang.Config().Name, req.Language, errdefs.ErrInvalidArgument)
	}
	select {
	case ss.turn <- struct{}{}:
		defer func() { <-ss.turn }()
	case <-ss.done:
		return nil, e.sessions.noSession(req.Owner, req.Session)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the session's previous call to end: %w", context.Cause(ctx))
	}
	queued := time.Now()
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ss.done:
		return nil, e.sessions.noSession(req.Owner, req.Session)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free sandbox slot: %w", context.Cause(ctx))
	}
	if h := e.cfg.Hooks.QueueWait; h != nil {
		h(req.Language, time.Since(queued))
	}
	if !ss.startCall() {
		return nil, e.sessions.noSession(req.Owner, req.Session)
	}
	defer ss.endCall()

	ws := ss.sb.Workspace()
	if err := workspace.WriteInputs(ws, req.Files, ss.sb.UID(), true); err != nil {
		return nil, err
	}
	before, err := workspace.Stamps(ws)
	if err != nil {
		return nil, fmt.Errorf("read the workspace: %w", err)
	}
	// The OOM killer may kill a process the cell started and leave the
	// driver alive: the cell's result says so, as a one-shot run's does.
	// Kills since the previous result, before the cell, are told apart:
	// the sandbox's explain no longer counts them, and if this call
	// returns no result the next one tells of them.
	told := ss.sb.OOMsTold()
	ooms, _ := ss.sb.OOMKills()
	ooms = max(ooms, told)
	ss.sb.SetOOMsTold(ooms)
	reported := false
	defer func() {
		if !reported {
			ss.sb.SetOOMsTold(told)
		}
	}()
	start := time.Now()
	n := ss.count()
	c, err := ss.cell(ctx, req.Code, n, timeout)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Language: req.Language, Image: ss.lang.Config().Image, ImageDigest: ss.sb.ImageDigest(),
		Stdout: c.stdout, StdoutDropped: c.stdoutDropped,
		Stderr: c.stderr, StderrDropped: c.stderrDropped,
		Timeout: timeout, Duration: c.took,
		TimedOut: c.timedOut,
	}
	switch {
	case c.gone:
		res.ExitCode = int(ss.code)
		ss.sb.Explain(res, ss.code)
	case c.ended != "":
		// Killed for ignoring its interrupt, or a driver that broke
		// the protocol.
		res.ExitCode, res.Signal = 128+int(syscall.SIGKILL), sandbox.SignalName(syscall.SIGKILL)
	default:
		res.ExitCode = c.status.ExitCode
		if c.status.Status == "interrupted" {
			res.Signal = sandbox.SignalName(syscall.SIGINT)
		}
	}
	// Read while the cgroup exists: a session that must end is ended
	// below.
	now, ok := ss.sb.OOMKills()
	if ok && now > ooms {
		res.OOMKilled = true
	}
	if c.ended == "" {
		lim := ss.lang.Config().Limits
		files, dropped, err := workspace.CollectOutputs(ws, workspace.Baseline{Inputs: workspace.InputSums(req.Files), Stamps: before}, workspace.OutputCaps{Files: lim.MaxFilesOut, Bytes: lim.FilesOutBytes})
		if err != nil {
			return nil, fmt.Errorf("collect the output files: %w", err)
		}
		res.Files, res.FilesDropped = files, dropped
	}
	ss.sb.SetOOMsTold(max(now, ooms))
	reported = true
	res.Session = &SessionResult{
		ID: ss.id, ExecutionCount: n, Interrupted: c.interrupted && c.ended == "", Ended: c.ended,
		BackgroundOOMKills: int(ooms - told),
	}
	if c.ended != "" {
		ss.end(c.ended)
		res.Session.ExpiresAt = time.Now() // it has ended
	} else {
		ss.mu.Lock()
		ss.lastUsed = time.Now()
		res.Session.ExpiresAt = ss.expiresLocked()
		ss.mu.Unlock()
	}
	e.h.Log.Debug("session cell", "session", ss.id, "cell", n, "took", time.Since(start))
	return res, nil
}

// driverStatus is the status line a driver writes after a cell's end
// token on its standard output.
type driverStatus struct {
	Status   string `json:"status"` // ok, error, exit, interrupted
	ExitCode int    `json:"exit_code"`
}

// cellOutcome is how a cell ended.
type cellOutcome struct {
	stdout, stderr               []byte
	stdoutDropped, stderrDropped int64
	status                       driverStatus
	took                         time.Duration
	// interrupted: the cell was sent SIGINT, at its timeout (timedOut)
	// or because its call was cancelled.
	interrupted, timedOut bool
	// gone: the driver's process ended (see session.code).
	gone bool
	// ended says why the session must end, or ended; "" if it lives on.
	ended string
}

// failure says in a few words why a cell failed to answer.
func (c cellOutcome) failure() string {
	if c.ended != "" {
		return c.ended
	}
	return fmt.Sprintf("its status was %q", c.status.Status)
}

// quoteTail is the end of a driver's stderr, to quote in an error.
func quoteTail(stderr []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(stderr), "?"))
	if s == "" {
		return ""
	}
	if len(s) > 500 {
		s = "..." + s[len(s)-500:]
	}
	return "; it said: " + s
}

// cellRequest is a request line to the driver.
type cellRequest struct {
	Cell int    `json:"cell"`
	Code string `json:"code"`
	End  string `json:"end"`
}

// cell sends the driver cell n and waits for its end. At timeout, or when
// ctx ends, the driver is sent SIGINT, and has interruptGrace to answer;
// past it the outcome says the session must end. An error means the cell
// could not be run at all, or the call was cancelled.
func (ss *session) cell(ctx context.Context, code string, n int, timeout time.Duration) (cellOutcome, error) {
	var c cellOutcome
	token := newToken()
	outEnd, errEnd := ss.io.out.begin(token), ss.io.errs.begin(token)
	line, err := json.Marshal(cellRequest{Cell: n, Code: code, End: token})
	if err != nil {
		return c, err
	}
	line = append(line, '\n')
	wrote := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := ss.io.inW.Write(line)
		wrote <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		grace     <-chan time.Time
		cancelled error
		out, errs *cellEnd
		done      = ctx.Done()
	)
	interrupt := func() {
		c.interrupted = true
		ss.interrupt()
		grace = time.After(interruptGrace)
	}
	for out == nil || errs == nil {
		select {
		case e := <-outEnd:
			out = &e
			if errs == nil && grace == nil {
				grace = time.After(endGrace)
			}
		case e := <-errEnd:
			errs = &e
			if out == nil && grace == nil {
				grace = time.After(endGrace)
			}
		case err := <-wrote:
			wrote = nil
			if err != nil {
				ss.e.h.Log.Warn("session: could not send the cell", "session", ss.id, "err", err)
			}
		case <-timer.C:
			if !c.interrupted {
				c.timedOut = true
				interrupt()
			}
		case <-done:
			done = nil
			cancelled = context.Cause(ctx)
			if !c.interrupted {
				interrupt()
			}
		case <-grace:
			c.took = time.Since(start)
			if c.interrupted {
				c.ended = fmt.Sprintf("the cell did not stop within %s of its interrupt, so the session was ended", interruptGrace)
			} else {
				c.ended = "the session driver broke its protocol, so the session was ended"
			}
			ss.rest(&c)
			if cancelled != nil {
				ss.end(c.ended)
				return c, fmt.Errorf("run cancelled: %w", cancelled)
			}
			return c, nil
		case <-ss.gone:
			c.took = time.Since(start)
			c.gone = true
			ss.sb.Drain()
			ss.rest(&c)
			c.ended = ss.goneReason()
			if cancelled != nil {
				ss.end(c.ended)
				return c, fmt.Errorf("run cancelled: %w", cancelled)
			}
			return c, nil
		case <-ss.done:
			return c, ss.e.sessions.noSession(ss.owner, ss.id)
		}
	}
	c.took = time.Since(start)
	c.stdout, c.stdoutDropped = out.out, out.dropped
	c.stderr, c.stderrDropped = errs.out, errs.dropped
	if err := json.Unmarshal(out.status, &c.status); err != nil || !slices.Contains([]string{"ok", "error", "exit", "interrupted"}, c.status.Status) {
		c.ended = "the session driver broke its protocol, so the session was ended"
	}
	if cancelled != nil {
		if c.ended != "" {
			ss.end(c.ended)
		}
		return c, fmt.Errorf("run cancelled: %w", cancelled)
	}
	return c, nil
}

// rest takes what the streams hold of a cell that did not end.
func (ss *session) rest(c *cellOutcome) {
	c.stdout, c.stdoutDropped = ss.io.out.pending()
	c.stderr, c.stderrDropped = ss.io.errs.pending()
}

// interrupt sends the driver SIGINT: it is the sandbox's first process,
// which receives the signals it has a handler for.
func (ss *session) interrupt() {
	ss.sb.Signal(syscall.SIGINT)
}

// watch waits for the driver's process to end, by containerd's word or
// the kernel's, and ends the session unless a call is running, which
// reports it.
func (ss *session) watch() {
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
		ss.end(ss.goneReason())
	}
}

// goneReason says why the driver's process ended.
func (ss *session) goneReason() string {
	r := &Result{}
	ss.sb.Explain(r, ss.code)
	switch {
	case r.OOMKilled:
		return fmt.Sprintf("the interpreter ran out of memory (limit %s) and was killed, so the session ended", config.Size(ss.lang.Config().Limits.MemoryBytes))
	case r.Signal != "":
		return fmt.Sprintf("the interpreter was killed by %s, so the session ended", r.Signal)
	}
	return fmt.Sprintf("the interpreter exited with status %d, so the session ended", ss.code)
}

// startCall marks the session busy, unless it ended or its time is up:
// a timer that fires late lets no call into an expired session.
func (ss *session) startCall() bool {
	ss.mu.Lock()
	why := ss.expiredLocked(time.Now())
	ok := why == "" && ss.why == "" && !watch.IsClosed(ss.gone)
	if ok {
		ss.busy = true
	}
	ss.mu.Unlock()
	if why != "" {
		ss.end(why)
	}
	return ok
}

// count counts a cell about to be sent, and returns its number.
func (ss *session) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.cells++
	return ss.cells
}

// endCall marks the session idle again, from now.
func (ss *session) endCall() {
	ss.mu.Lock()
	ss.busy = false
	ss.lastUsed = time.Now()
	if ss.timer != nil && ss.why == "" {
		ss.timer.Reset(time.Until(ss.expiresLocked()))
	}
	gone := watch.IsClosed(ss.gone)
	ss.mu.Unlock()
	if gone {
		ss.end(ss.goneReason())
	}
}

// expiresLocked is when the session ends unless used again; ss.mu is held.
func (ss *session) expiresLocked() time.Time {
	end := ss.created.Add(ss.lifetime)
	if idle := ss.lastUsed.Add(ss.idle); !ss.busy && idle.Before(end) {
		return idle
	}
	return end
}

// expire ends the session if its time is up, and otherwise looks again
// when it might be.
func (ss *session) expire() {
	ss.mu.Lock()
	now := time.Now()
	why := ss.expiredLocked(now)
	if why == "" {
		ss.timer.Reset(ss.expiresLocked().Sub(now))
	}
	ss.mu.Unlock()
	if why != "" {
		ss.end(why)
	}
}

// expiredLocked says why the session's time is up at now, or returns ""
// if it is not; ss.mu is held.
func (ss *session) expiredLocked(now time.Time) string {
	switch {
	case !now.Before(ss.created.Add(ss.lifetime)):
		return fmt.Sprintf("it reached its maximum lifetime of %s (max_lifetime)", ss.lifetime)
	case !ss.busy && !now.Before(ss.lastUsed.Add(ss.idle)):
		return fmt.Sprintf("it was idle for %s (its idle timeout)", ss.idle)
	}
	return ""
}

// end ends the session once: it is forgotten, and its sandbox destroyed
// (which kills whatever still runs in it).
func (ss *session) end(why string) {
	ss.endOnce.Do(func() {
		ss.mu.Lock()
		ss.why = why
		if ss.timer != nil {
			ss.timer.Stop()
		}
		ss.mu.Unlock()
		// Its destroy is counted before the session leaves the table:
		// Close ends the sessions it finds there, then waits for the
		// cleanups, so it waits for this one whichever ends it.
		ss.e.cleanups.Add(1)
		// Why it ended is on record before a call waiting on done wakes
		// to say so.
		ss.e.sessions.remove(ss, why)
		close(ss.done)
		if h := ss.e.cfg.Hooks.SessionEnded; h != nil {
			h(ss.info(), why)
		}
		go ss.e.destroyCounted(ss.sb)
		ss.e.h.Log.Info("session ended", "session", ss.id, "why", why)
	})
}

// info describes the session now.
func (ss *session) info() SessionInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return SessionInfo{
		ID: ss.id, Owner: ss.owner, Language: ss.lang.Config().Name,
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

// reserve counts a session of owner being created in, unless cfg.Max
// are open or being created, or cfg.MaxPerOwner of owner's. Its errors
// say only what is owner's: how many of the sessions are owner's and when
// the first of them expires, never another owner's count or times.
func (t *sessionTable) reserve(cfg SessionConfig, owner string) error {
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
func (t *sessionTable) firstExpiry(owner string) string {
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

// unreserve forgets a reservation of owner's that did not become a
// session.
func (t *sessionTable) unreserve(owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.creating--
	t.uncount(owner)
}

// uncount takes one from owner's sessions being created. t.mu is held.
func (t *sessionTable) uncount(owner string) {
	if t.creatingBy[owner]--; t.creatingBy[owner] <= 0 {
		delete(t.creatingBy, owner)
	}
}

// add registers a session that was reserved.
func (t *sessionTable) add(ss *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open == nil {
		t.open = map[string]*session{}
	}
	t.creating--
	t.uncount(ss.owner)
	t.open[ss.id] = ss
}

// get returns owner's open session id, or nil.
func (t *sessionTable) get(owner, id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := t.open[id]
	if ss == nil || ss.owner != owner {
		return nil
	}
	return ss
}

// count returns how many sessions are open.
func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// remove forgets an ended session, remembering why it ended for a while.
func (t *sessionTable) remove(ss *session, why string) {
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

// noSession is the error of a call naming id, which owner has no open
// session of: it says why the session ended if it was owner's.
func (t *sessionTable) noSession(owner, id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := &NoSessionError{ID: id}
	if x, ok := t.ended[id]; ok && x.owner == owner {
		err.Ended = fmt.Sprintf("%s (at %s)", x.why, x.at.UTC().Format(time.RFC3339))
	}
	return err
}

func newSessionID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "session-" + hex.EncodeToString(b)
}

// newToken is a cell's end token: 32 random hex digits.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

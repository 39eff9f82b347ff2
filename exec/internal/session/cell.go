package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/watch"
	"code-sandbox-mcp/exec/internal/workspace"
)

// Opening is what Open makes a session of.
type Opening struct {
	Owner string
	Lang  config.Language
	// Sandbox runs the language's session driver on Streams.
	Sandbox *sandbox.Sandbox
	Streams *Streams
	// Created is when its making began; Idle and Lifetime its bounds.
	Created  time.Time
	Idle     time.Duration
	Lifetime time.Duration
}

// ErrClosing is Open's error once the Table's Closing is closed.
var ErrClosing = errors.New("the server is shutting down")

// Open makes a session of o, reserved by Reserve, and returns once its
// interpreter is ready: its answer to cell 0, which runs nothing. The
// reservation is used up either way; on error the session is ended, its
// sandbox destroyed.
func (t *Table) Open(ctx context.Context, o Opening) (*Session, error) {
	ss := &Session{
		t: t, lang: o.Lang, sb: o.Sandbox, io: o.Streams,
		id: newSessionID(), owner: o.Owner,
		created: o.Created, lastUsed: o.Created, idle: o.Idle, lifetime: o.Lifetime,
		turn: make(chan struct{}, 1), done: make(chan struct{}), gone: make(chan struct{}),
		busy: true, // until it is ready: watch leaves its end to us
	}
	go ss.watch()
	c, err := ss.cell(ctx, "", 0, driverStartTimeout, nil)
	if err == nil && (c.ended != "" || c.status.Status != "ok") {
		err = fmt.Errorf("the %s session driver did not start: %s%s: %w", o.Lang.SessionDriver, c.failure(), quoteTail(c.stderr), errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		t.Unreserve(o.Owner)
		ss.End("it did not start")
		return nil, err
	}
	t.add(ss)
	if watch.IsClosed(t.Closing) {
		// The shutdown began after cell 0 was answered, and its end of
		// every session may have run before the add.
		ss.End("the server is shutting down")
		return nil, ErrClosing
	}
	ss.mu.Lock()
	ss.busy = false
	// Idle from now: the time its sandbox took to start is not idle time.
	ss.lastUsed = time.Now()
	ss.timer = time.AfterFunc(time.Until(ss.expiresLocked()), ss.expire)
	gone := watch.IsClosed(ss.gone)
	ss.mu.Unlock()
	if gone {
		ss.End(ss.goneReason())
		return nil, fmt.Errorf("the %s session driver ended as it started: %s: %w", o.Lang.SessionDriver, ss.goneReason(), errdefs.ErrFailedPrecondition)
	}
	t.Log.Info("session created", "session", ss.id, "run", o.Sandbox.ID(), "language", o.Lang.Name, "took", time.Since(o.Created))
	return ss, nil
}

// Run runs code as the session's next cell, with files written into its
// workspace first, and returns what it did; output, if not nil, is told
// the cell's output as it is read (see exec.Request.Output). The caller holds the
// session's Turn. At timeout, or when ctx ends, the cell is interrupted;
// a session whose interpreter then ends, or does not stop, is ended, and
// the result says so.
func (ss *Session) Run(ctx context.Context, code string, files []workspace.File, timeout time.Duration, output func(stream string, p []byte)) (*sandbox.Result, error) {
	if !ss.startCall() {
		return nil, ss.t.NoSession(ss.owner, ss.id)
	}
	// used is when the cell's result says the session was last used; the
	// session is idle from then once the call ends.
	var used time.Time
	defer func() { ss.endCall(used) }()

	ws := ss.sb.Workspace()
	if err := workspace.WriteInputs(ws, files, ss.sb.UID(), true); err != nil {
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
	c, err := ss.cell(ctx, code, n, timeout, output)
	if err != nil {
		return nil, err
	}
	res := ss.result(c, timeout)
	// Read while the cgroup exists: a session that must end is ended
	// below.
	now, ok := ss.sb.OOMKills()
	if ok && now > ooms {
		res.OOMKilled = true
	}
	if c.ended == "" {
		lim := ss.lang.Limits
		files, dropped, err := workspace.CollectOutputs(ws, workspace.Baseline{Inputs: workspace.InputSums(files), Stamps: before}, workspace.OutputCaps{Files: lim.MaxFilesOut, Bytes: lim.FilesOutBytes})
		if err != nil {
			return nil, fmt.Errorf("collect the output files: %w", err)
		}
		res.Files, res.FilesDropped = files, dropped
	}
	ss.sb.SetOOMsTold(max(now, ooms))
	reported = true
	res.Session = &sandbox.SessionResult{
		ID: ss.id, ExecutionCount: n, Interrupted: c.interrupted && c.ended == "", Ended: c.ended,
		BackgroundOOMKills: int(ooms - told),
	}
	used = time.Now()
	res.Session.ExpiresAt = ss.after(c, used)
	ss.t.Log.Debug("session cell", "session", ss.id, "cell", n, "took", time.Since(start))
	return res, nil
}

// result is what cell c did, as a run's result: its output, and its
// status as the driver told it, or as the sandbox's end explains it.
func (ss *Session) result(c cellOutcome, timeout time.Duration) *sandbox.Result {
	res := &sandbox.Result{
		Language: ss.lang.Name, Image: ss.lang.Image, ImageDigest: ss.sb.ImageDigest(),
		Stdout: c.stdout, StdoutDropped: c.stdoutDropped,
		Stderr: c.stderr, StderrDropped: c.stderrDropped,
		Timeout: timeout, Duration: c.took,
		TimedOut: c.timedOut,
	}
	res.Network, res.NetworkRest = ss.sb.Network()
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
	return res
}

// after ends the session if cell c says it must, and otherwise returns
// when it expires once idle from used: the deadline list_sessions shows
// once the call ends (the session is still busy here, so its own
// expiry would be its lifetime's end).
func (ss *Session) after(c cellOutcome, used time.Time) time.Time {
	if c.ended != "" {
		ss.End(c.ended)
		return used // it has ended
	}
	return ss.deadline(used)
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
// could not be run at all, or the call was cancelled. output, if not nil,
// is told the cell's output as it comes, until cell returns.
func (ss *Session) cell(ctx context.Context, code string, n int, timeout time.Duration, output func(stream string, p []byte)) (cellOutcome, error) {
	var c cellOutcome
	token := newToken()
	outEnd, errEnd := ss.io.out.begin(token, named("stdout", output)), ss.io.errs.begin(token, named("stderr", output))
	// A cell that did not end leaves its streams tapped: what comes later
	// is not this call's to tell.
	defer ss.io.out.untap()
	defer ss.io.errs.untap()
	start := time.Now()
	wrote, err := ss.send(cellRequest{Cell: n, Code: code, End: token})
	if err != nil {
		return c, err
	}
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
				ss.t.Log.Warn("session: could not send the cell", "session", ss.id, "err", err)
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
			return ss.unfinished(c, cancelled)
		case <-ss.gone:
			c.took = time.Since(start)
			c.gone = true
			ss.sb.Drain()
			c.ended = ss.goneReason()
			return ss.unfinished(c, cancelled)
		case <-ss.done:
			return c, ss.t.NoSession(ss.owner, ss.id)
		}
	}
	c.took = time.Since(start)
	return ss.finished(c, out, errs, cancelled)
}

// named is output for one stream, or nil if output is.
func named(stream string, output func(stream string, p []byte)) func(p []byte) {
	if output == nil {
		return nil
	}
	return func(p []byte) { output(stream, p) }
}

// send writes request r to the driver, in the background (a driver that
// does not read must not block the cell's timeout); the channel tells how
// the write went.
func (ss *Session) send(r cellRequest) (<-chan error, error) {
	line, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	line = append(line, '\n')
	wrote := make(chan error, 1)
	go func() {
		_, err := ss.io.inW.Write(line)
		wrote <- err
	}()
	return wrote, nil
}

// finished is cell's outcome for c, which ended in both streams with out
// and errs: their output, and the driver's status, which must be one of
// the protocol's, or the session must end. A cancelled call still
// returns its cancellation.
func (ss *Session) finished(c cellOutcome, out, errs *cellEnd, cancelled error) (cellOutcome, error) {
	c.stdout, c.stdoutDropped = out.out, out.dropped
	c.stderr, c.stderrDropped = errs.out, errs.dropped
	if err := json.Unmarshal(out.status, &c.status); err != nil || !slices.Contains([]string{"ok", "error", "exit", "interrupted"}, c.status.Status) {
		c.ended = "the session driver broke its protocol, so the session was ended"
	}
	if cancelled != nil {
		if c.ended != "" {
			ss.End(c.ended)
		}
		return c, fmt.Errorf("run cancelled: %w", cancelled)
	}
	return c, nil
}

// unfinished is cell's outcome for c, which did not end (c.ended says
// why the session must end): what the streams hold, and the session
// ended at once if its call was cancelled.
func (ss *Session) unfinished(c cellOutcome, cancelled error) (cellOutcome, error) {
	ss.rest(&c)
	if cancelled != nil {
		ss.End(c.ended)
		return c, fmt.Errorf("run cancelled: %w", cancelled)
	}
	return c, nil
}

// rest takes what the streams hold of a cell that did not end.
func (ss *Session) rest(c *cellOutcome) {
	c.stdout, c.stdoutDropped = ss.io.out.pending()
	c.stderr, c.stderrDropped = ss.io.errs.pending()
}

// interrupt sends the driver SIGINT: the sandbox's init passes it on to
// its child, the driver, which keeps a handler for it.
func (ss *Session) interrupt() {
	ss.sb.Signal(syscall.SIGINT)
}

// newToken is a cell's end token: 32 random hex digits.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

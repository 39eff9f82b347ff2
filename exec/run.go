package exec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"code-sandbox-mcp/exec/internal/pool"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/sweep"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/exec/internal/workspace"
)

// closeTimeout bounds Close, its kills and deletes, while containerd does
// not answer: what is left then is the next server's to sweep (its owner,
// this process, is gone by then). While containerd answers, on a host too
// busy for the deletes to end within closeTimeout, Close gives them
// closeTimeout more at a time, up to closeMax in all (see
// Executor.abandonWhenStuck).
const (
	closeTimeout = 5 * time.Second
	closeMax     = 30 * time.Second
	// pingTimeout bounds the question "does containerd answer?".
	pingTimeout = time.Second
)

// Run runs one program in a sandbox that no other code has touched, and
// returns what it did. An error means the sandbox could not run the program
// (bad request, missing image, runtime failure, cancellation); a program
// that fails is a Result, not an error; errors from a containerd that did
// not answer wrap ErrNotAnswering. A ready sandbox whose stub turns out to
// have ended before the program ran is replaced by a fresh one, once. The
// sandbox is destroyed after Run returns, in the background (a failed
// delete is retried); Close waits for that. A request naming a Session
// runs as that session's next cell instead (see CreateSession); an
// unknown, ended or another owner's session is a *NoSessionError.
//
// The request's Timeout bounds the program's run and, for a run that
// finds no ready sandbox, the making of one first (see coldSandbox): a
// run waits for its sandbox no longer than its timeout, and its program
// then gets the whole timeout. The wait for a run slot is not counted.
func (e *Executor) Run(ctx context.Context, req Request) (_ *Result, err error) {
	lang, timeout, err := e.check(req)
	if err != nil {
		return nil, err
	}
	if !e.enter() {
		return nil, ErrClosed
	}
	defer e.runs.Done()
	caller := ctx
	defer func() { err = e.notAnswering(caller, err) }()
	// Runs end when the caller gives up or the executor closes, and run
	// in our namespace.
	ctx, cancel := e.h.Life.UntilClosed(ctx)
	defer cancel()

	if req.Session != "" {
		return e.runInSession(ctx, req, timeout)
	}
	release, err := e.takeSlot(ctx, nil, req.Language)
	if err != nil {
		return nil, err
	}
	defer release()

	// Refill after the program, not before it: see pool.take.
	defer lang.Refill()
	s := lang.Take(req.Code)
	if h := e.cfg.Hooks.PoolTake; h != nil && lang.Pooled() {
		h(req.Language, s != nil)
	}
	if s != nil {
		res, err := s.Execute(ctx, req.Code, req.Files, timeout, req.Output)
		e.retire(s)
		var ended *sandbox.StubEnded
		if !errors.As(err, &ended) {
			return res, err
		}
		// The stub had ended, or ended without running the program,
		// before the line reached it: the program never ran. It runs in
		// a sandbox of its own.
		lang.StubFailed(ended.Code)
	}
	s, err = e.coldSandbox(ctx, lang, timeout)
	if err != nil {
		return nil, err
	}
	defer e.retire(s)
	return s.Execute(ctx, req.Code, req.Files, timeout, req.Output)
}

// errOutOfTime is the cause that ends a run's wait for a sandbox made on
// demand at the run's timeout.
var errOutOfTime = errors.New("timed out")

// coldSandbox makes the sandbox of a run that found no ready one: the
// language's image ready (looked up, or pulled and unpacked), then a
// sandbox created from it. The run waits for that no longer than its own
// timeout (and ctx): its timeout bounds the getting of its sandbox, and
// then, in full, its program. Its error then says that no sandbox could
// be made within the timeout, and why: containerd did not answer in time
// (ErrNotAnswering), or the image is still being prepared.
func (e *Executor) coldSandbox(ctx context.Context, lang *pool.Language, timeout time.Duration) (*sandbox.Sandbox, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errOutOfTime)
	defer cancel()
	img, err := lang.Ready(wctx)
	if err == nil {
		// Its deadline covers the wait for it, then the run.
		var s *sandbox.Sandbox
		if s, err = e.newSandbox(wctx, lang, img, time.Now().Add(2*timeout+sweep.CleanupGrace)); err == nil {
			return s, nil
		}
	}
	switch {
	case !errors.Is(err, errOutOfTime):
		return nil, err
	case errors.Is(err, pool.ErrPreparing):
		return nil, fmt.Errorf("no sandbox could be made within the call's timeout of %s: %w; retry once it is ready", timeout, err)
	}
	return nil, fmt.Errorf("%w: no sandbox could be made within the call's timeout of %s: %w", ErrNotAnswering, timeout, err)
}

// newSandbox creates a one-shot sandbox of lang from img, not started
// (started ahead would only add the stub's exec to the run), and waits for
// it until ctx ends. A creation is not cut short (see sandbox.Host.New):
// one that outlives the wait goes on in the background, counted in
// e.cleanups, and what it makes is destroyed.
func (e *Executor) newSandbox(ctx context.Context, lang *pool.Language, img *sandbox.Image, deadline time.Time) (*sandbox.Sandbox, error) {
	type made struct {
		s   *sandbox.Sandbox
		err error
	}
	// Unbuffered: the sandbox is handed over to a caller still waiting,
	// or else destroyed, never both.
	ch := make(chan made)
	e.cleanups.Add(1)
	go func() {
		defer e.cleanups.Done()
		s, err := lang.NewSandbox(ctx, img, deadline, sandbox.OnRun)
		select {
		case ch <- made{s, err}:
		case <-ctx.Done():
			if s != nil {
				s.Destroy(context.Background())
			}
		}
	}()
	select {
	case m := <-ch:
		return m.s, m.err
	case <-ctx.Done():
		return nil, fmt.Errorf("creating a sandbox: %w", context.Cause(ctx))
	}
}

// errGone is takeSlot's error when what the slot was for ended first.
var errGone = errors.New("ended while waiting for a slot")

// takeSlot waits for one of the Concurrency run slots, until ctx ends or
// gone (if not nil) closes, and tells the QueueWait hook how long a run
// of language waited (a session's creation, with language "", is not a
// run). release gives the slot back.
func (e *Executor) takeSlot(ctx context.Context, gone <-chan struct{}, language string) (release func(), err error) {
	queued := time.Now()
	select {
	case e.slots <- struct{}{}:
	case <-gone:
		return nil, errGone
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free sandbox slot: %w", context.Cause(ctx))
	}
	if h := e.cfg.Hooks.QueueWait; h != nil && language != "" {
		h(language, time.Since(queued))
	}
	return func() { <-e.slots }, nil
}

// ErrClosed is the error of every call made once Close has begun. It is
// an errdefs.ErrUnavailable.
var ErrClosed = fmt.Errorf("executor is closed: %w", errdefs.ErrUnavailable)

// ErrNotAnswering marks the errors of calls that containerd did not
// answer, or refused as unavailable, on an executor that was connected:
// the daemon is restarting, or hangs. Retrying in a moment may help.
var ErrNotAnswering = errors.New("containerd is not answering (restarting?)")

// notAnswering wraps err with ErrNotAnswering where containerd did not
// answer: it was unavailable, or a call's own bound ran out while the
// caller (ctx) still waited.
func (e *Executor) notAnswering(ctx context.Context, err error) error {
	switch {
	case err == nil, e.h.Life.Closed(), ctx.Err() != nil:
		return err
	case errdefs.IsUnavailable(err), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrNotAnswering, err)
	}
	return err
}

// enter counts a run in, unless the executor is closing: Close waits for
// the runs it counted.
func (e *Executor) enter() bool {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.h.Life.Closed() {
		return false
	}
	e.runs.Add(1)
	return true
}

// retire destroys a used sandbox in the background, off the response path.
func (e *Executor) retire(s *sandbox.Sandbox) {
	e.cleanups.Add(1)
	go e.destroyCounted(s)
}

// destroyCounted destroys s, which e.cleanups counts already.
func (e *Executor) destroyCounted(s *sandbox.Sandbox) {
	defer e.cleanups.Done()
	s.Destroy(context.Background())
}

// check validates a request against its language.
func (e *Executor) check(req Request) (*pool.Language, time.Duration, error) {
	lang, ok := e.langs[req.Language]
	if !ok {
		return nil, 0, fmt.Errorf("unknown language %q: %w", req.Language, errdefs.ErrInvalidArgument)
	}
	lim := lang.Config().Limits
	if int64(len(req.Code)) > lim.CodeBytes {
		return nil, 0, fmt.Errorf("program is %d bytes, over the limit of %d bytes: %w", len(req.Code), lim.CodeBytes, errdefs.ErrInvalidArgument)
	}
	if err := workspace.CheckFiles(req.Files, lim.MaxFilesIn, lim.FilesInBytes); err != nil {
		return nil, 0, err
	}
	timeout := lim.Timeout
	switch {
	case req.Timeout < 0:
		return nil, 0, fmt.Errorf("timeout %s is negative: %w", req.Timeout, errdefs.ErrInvalidArgument)
	case req.Timeout > lim.RunCap():
		return nil, 0, fmt.Errorf("timeout %s is over the maximum of %s: %w", req.Timeout, lim.RunCap(), errdefs.ErrInvalidArgument)
	case req.Timeout > 0:
		timeout = req.Timeout
	}
	return lang, timeout, nil
}

// cleanBase returns name if it is a plain file name, and "" otherwise.
func cleanBase(name string) string {
	if name == "." || name == ".." || filepath.Base(name) != name {
		return ""
	}
	return name
}

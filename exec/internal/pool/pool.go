package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/sweep"
	"code-sandbox-mcp/exec/internal/uid"

	"github.com/containerd/errdefs"

	sandboxoci "code-sandbox-mcp/oci"
)

// reconnectPoll is how often a pool asks containerd again while it does not
// answer.
const reconnectPoll = time.Second

// poolMaxAge is how long a ready sandbox may wait for a program. Older ones
// are replaced, and never taken, so that their deadline label, which
// covers this age plus the longest run, stays true.
const poolMaxAge = 10 * time.Minute

// pool keeps sandboxes of one language created, started ahead and waiting,
// so that a run pays only for the write of its program and one line to
// the waiting stub (see oci.StubScript). Each sandbox is used once. A pool
// of size 0 keeps nothing: every run creates its own sandbox.
//
// A sandbox whose stub cannot be created is created without it, and not
// started, that once. Where a stub ran and exited before its program (the
// image's /bin/sh is bash, or exits at once), the pool falls back for
// good to sandboxes created and not started, and a run then pays for Start
// too.
//
// A warm language's pool starts its sandboxes in the warm driver instead
// (see sandbox.WarmInterpreter), and keeps them only once the driver says it is ready.
// With preloads, it keeps two kinds: about half of the sandboxes import
// them first, the rest do not (their exit is quicker), and take gives a
// program the kind its text asks for, or else the other. Where a warm
// start fails (no driver for the interpreter, a preload that fails or
// writes, an interpreter that exits or hangs), the pool falls back for
// good to the stub, logged once.
//
// Ready sandboxes hold no concurrency slot: a slot bounds programs that
// run, and a waiting stub uses no CPU. Refilling is one sandbox at a time
// per language, in the background.
type pool struct {
	l    *Language
	size int

	ready    chan *sandbox.Sandbox // all but the preloaded
	loaded   chan *sandbox.Sandbox // warm, with the preloads imported
	wake     chan struct{}
	ahead    atomic.Bool  // start sandboxes ahead, on the stub
	warm     atomic.Bool  // start them in the warm driver instead
	lastMiss atomic.Int64 // when take last found nothing, in Unix nanoseconds
	fellBack atomic.Bool  // a stub could not be created, once at least
	once     sync.Once
	started  atomic.Bool
	done     chan struct{} // closed when the filler has stopped
}

func newPool(l *Language) *pool {
	p := &pool{
		l:      l,
		size:   max(l.cfg.Pool, 0),
		ready:  make(chan *sandbox.Sandbox, max(l.cfg.Pool, 0)),
		loaded: make(chan *sandbox.Sandbox, max(l.cfg.Pool, 0)),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	p.ahead.Store(true)
	p.warm.Store(p.size > 0 && sandbox.WarmInterpreter(l.cfg) != "")
	return p
}

// WarmDriver returns the interpreter of the warm driver that the
// language's one-shot sandboxes carry, or "" while they carry none: the
// language is not warm, has no driver, or its warm start failed.
func (l *Language) WarmDriver() string {
	if !l.pool.warm.Load() {
		return ""
	}
	return sandbox.WarmInterpreter(l.cfg)
}

// NewSandbox makes a one-shot sandbox of the language from img, started
// as how says, carrying the language's warm driver while its pool starts
// sandboxes warm.
func (l *Language) NewSandbox(ctx context.Context, img *sandbox.Image, deadline time.Time, how sandbox.How) (*sandbox.Sandbox, error) {
	return l.newSandbox(ctx, img, deadline, how, false)
}

// newSandbox is NewSandbox, made in the background (a ready sandbox of
// the pool: see sandbox.Options.Background) if background.
func (l *Language) newSandbox(ctx context.Context, img *sandbox.Image, deadline time.Time, how sandbox.How, background bool) (*sandbox.Sandbox, error) {
	return l.c.Host.New(ctx, l.cfg, sandbox.Options{Image: img, Deadline: deadline, How: how, WarmDriver: l.WarmDriver(), Background: background})
}

// busyFor is how long after a call found the pool empty the filler makes
// only sandboxes without preloads.
const busyFor = 5 * time.Second

// loadedWanted is how many of the pool's sandboxes import the preloads:
// half, and at least one, if there are preloads and the pool is warm.
func (p *pool) loadedWanted() int {
	if !p.warm.Load() || len(p.l.cfg.Preload) == 0 {
		return 0
	}
	return max(p.size/2, 1)
}

// nextPreloaded says whether the next sandbox the filler makes imports
// the preloads: only once the others are there (they are quicker to
// make), while fewer than loadedWanted do, and not while calls find the
// pool empty. Importing numpy and pandas takes about 300 ms of a CPU:
// under a load that empties the pool, that CPU is better spent on the
// sandboxes the calls wait for.
func (p *pool) nextPreloaded() bool {
	want := p.loadedWanted()
	return want > 0 && len(p.loaded) < want && len(p.ready) >= p.size-want &&
		time.Since(time.Unix(0, p.lastMiss.Load())) > busyFor
}

// count is how many sandboxes the pool holds.
func (p *pool) count() int {
	return len(p.ready) + len(p.loaded)
}

// take returns a ready sandbox for code, or nil if there is none: a
// preloaded one if code names a preload (see wantsPreload), and else one
// of the others, or failing that the other kind. Sandboxes that may not
// be used are destroyed on the way: one whose stub or driver exited
// before its program (the pool then stops starting sandboxes ahead), one
// older than poolMaxAge, and one made from an image that has since
// changed.
//
// take does not wake the filler: the caller calls refill once its program
// is done, so that creating the next sandbox, which costs far more CPU
// than a short program, does not compete with the program it would slow
// down.
func (p *pool) take(code string) *sandbox.Sandbox {
	if p.size == 0 {
		return nil
	}
	first, second := p.ready, p.loaded
	if sandbox.WantsPreload(code, p.l.cfg.Preload) {
		first, second = second, first
	}
	for {
		var s *sandbox.Sandbox
		select {
		case s = <-first:
		default:
			select {
			case s = <-second:
			default:
				p.lastMiss.Store(time.Now().UnixNano())
				return nil
			}
		}
		if st, exited := s.StubExited(); exited {
			code, _, err := st.Result()
			switch {
			case !s.Warm():
				p.stubFailed(code)
			case err == nil:
				p.warmFailed(fmt.Errorf("its interpreter exited, status %d, while it waited for a program%s", code, s.WarmSaid()))
			}
			p.l.c.Retire(s)
			continue
		}
		if time.Since(s.Created()) > poolMaxAge || s.Image() != p.l.current() {
			p.l.c.Retire(s)
			continue
		}
		s.Foreground()
		return s
	}
}

// stubFailed stops starting sandboxes ahead, after a stub exited before
// its program with status code.
func (p *pool) stubFailed(code uint32) {
	if !p.ahead.Swap(false) {
		return
	}
	why := "the waiting /bin/sh exited before its program"
	if code == sandboxoci.StubRefused {
		why = "the image's /bin/sh is bash, which changes the environment it passes on"
	}
	p.l.c.Host.Log.Info("ready sandboxes will be created without being started: "+why, "language", p.l.cfg.Name, "exit_status", code)
}

// warmFailed stops starting sandboxes in the warm driver, after one
// could not start for the reason err gives.
func (p *pool) warmFailed(err error) {
	if !p.warm.Swap(false) {
		return
	}
	p.l.c.Host.Log.Warn("warm interpreters are off; ready sandboxes will wait in /bin/sh instead", "language", p.l.cfg.Name, "reason", err)
}

// refill wakes the filler.
func (p *pool) refill() {
	if p.size == 0 {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// start starts the pool's filler, once; it stops when the Host's Life
// closes, destroying what it kept.
func (p *pool) start() {
	if p.size == 0 {
		return
	}
	p.once.Do(func() {
		p.started.Store(true)
		if p.l.cfg.Warm && sandbox.WarmInterpreter(p.l.cfg) == "" {
			p.l.c.Host.Log.Warn("warm interpreters are off: the language's command starts neither python nor node, and it names no session_driver; ready sandboxes wait in /bin/sh instead", "language", p.l.cfg.Name, "command", p.l.cfg.Command)
		}
		go p.fill()
	})
}

// wait waits for the filler to stop, once the Host's Life is closing. A pool
// not started by then never starts.
func (p *pool) wait() {
	p.once.Do(func() {})
	if p.started.Load() {
		<-p.done
	}
}

func (p *pool) fill() {
	defer close(p.done)
	h := p.l.c.Host
	ctx, cancel := h.Life.Background()
	defer cancel()
	backoff := time.Second
	var lastErr string
	tick := time.NewTicker(poolMaxAge / 4)
	defer tick.Stop()
	for {
		p.expire()
		for p.count() < p.size && ctx.Err() == nil {
			s, err := p.create(ctx, p.nextPreloaded())
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				// While containerd does not answer, ask again every
				// second, so that the pool is full again soon after it
				// is back; other failures back off. A run's refill (it
				// found the language ready) ends the wait at once.
				wait := backoff
				if errdefs.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) {
					wait = reconnectPoll
				} else {
					backoff = min(2*backoff, time.Minute)
				}
				log := h.Log.Debug
				if msg := err.Error(); msg != lastErr {
					lastErr, log = msg, h.Log.Warn
				}
				log("cannot fill the sandbox pool; retrying", "language", p.l.cfg.Name, "err", err, "in", wait)
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				case <-p.wake:
				}
				continue
			}
			if lastErr != "" {
				h.Log.Info("the sandbox pool fills again", "language", p.l.cfg.Name)
			}
			backoff, lastErr = time.Second, ""
			if s.Preloaded() {
				p.loaded <- s
			} else {
				p.ready <- s
			}
		}
		select {
		case <-ctx.Done():
			p.drain()
			return
		case <-p.wake:
		case <-tick.C:
		}
	}
}

// create makes one ready sandbox from the image as it is now: warm (with
// the preloads if preloaded) if the pool is, and once it is ready; else,
// or if that fails, started ahead on the stub if the pool does so; else,
// or if that fails, created and not started.
func (p *pool) create(ctx context.Context, preloaded bool) (*sandbox.Sandbox, error) {
	h := p.l.c.Host
	img, err := p.l.Ready(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(poolMaxAge + p.l.cfg.Limits.RunCap() + sweep.CleanupGrace)
	if p.warm.Load() {
		how := sandbox.Warm
		if preloaded {
			how = sandbox.Preloaded
		}
		s, err := p.l.newSandbox(ctx, img, deadline, how, true)
		if err != nil {
			// As for the stub, below: this one goes without.
			if ctx.Err() != nil || errors.Is(err, uid.ErrNoneFree) {
				return nil, err
			}
			h.Log.Debug("a warm ready sandbox cannot start; created without it", "language", p.l.cfg.Name, "err", err)
		} else if err := s.WarmUp(ctx); err != nil {
			s.Destroy(ctx)
			var fault *sandbox.WarmFault
			if ctx.Err() != nil || !errors.As(err, &fault) {
				return nil, err
			}
			p.warmFailed(err)
		} else {
			return s, nil
		}
	}
	if p.ahead.Load() {
		s, err := p.l.newSandbox(ctx, img, deadline, sandbox.Stub, true)
		// No free uid is no fault of the stub: a sandbox without it
		// would not get one either.
		if err == nil || ctx.Err() != nil || errors.Is(err, uid.ErrNoneFree) {
			return s, err
		}
		// Perhaps the image has no /bin/sh, perhaps the daemon was slow:
		// this sandbox goes without the stub; the next tries it again.
		h.Log.Debug("a ready sandbox cannot start ahead; created without it", "language", p.l.cfg.Name, "err", err)
		if p.fellBack.CompareAndSwap(false, true) {
			h.Log.Info("ready sandboxes will be created without being started while the waiting /bin/sh cannot start", "language", p.l.cfg.Name, "err", err)
		}
	}
	return p.l.newSandbox(ctx, img, deadline, sandbox.OnRun, true)
}

// expire replaces ready sandboxes that may no longer be used: older than
// poolMaxAge, or made from an image that has since changed.
func (p *pool) expire() {
	for _, ch := range []chan *sandbox.Sandbox{p.ready, p.loaded} {
		for range len(ch) {
			select {
			case s := <-ch:
				if time.Since(s.Created()) > poolMaxAge || s.Image() != p.l.current() {
					p.l.c.Retire(s)
					continue
				}
				ch <- s
			default:
			}
		}
	}
}

// drain destroys every ready sandbox, side by side.
func (p *pool) drain() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case s := <-p.ready:
			wg.Go(func() { s.Destroy(context.Background()) })
		case s := <-p.loaded:
			wg.Go(func() { s.Destroy(context.Background()) })
		default:
			return
		}
	}
}

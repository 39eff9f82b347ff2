package exec

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

// poolMaxAge is how long a ready sandbox may wait for a program. Older ones
// are replaced, so that their deadline label, which covers this age plus
// the longest run, stays true.
const poolMaxAge = 10 * time.Minute

// pool keeps sandboxes of one language created, started ahead and waiting,
// so that a run pays only for the write of its program and one line to
// the waiting stub (see oci.StubScript). Each sandbox is used once. A pool
// of size 0 keeps nothing: every run creates its own sandbox.
//
// Where the image cannot run the stub (no /bin/sh, or bash as /bin/sh),
// the pool falls back, for good, to sandboxes created and not started,
// and a run then pays for Start too.
//
// Ready sandboxes hold no concurrency slot: a slot bounds programs that
// run, and a waiting stub uses no CPU. Refilling is one sandbox at a time
// per language, in the background.
type pool struct {
	e    *Executor
	lang config.Language
	size int

	ready   chan *sandbox
	wake    chan struct{}
	ahead   atomic.Bool // start sandboxes ahead, on the stub
	start   sync.Once
	started bool          // set inside start
	done    chan struct{} // closed when the filler has stopped
}

func newPool(e *Executor, lang config.Language) *pool {
	p := &pool{
		e:     e,
		lang:  lang,
		size:  lang.Pool,
		ready: make(chan *sandbox, max(lang.Pool, 0)),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	p.ahead.Store(true)
	return p
}

// take returns a ready sandbox, or nil if there is none. A sandbox whose
// stub exited before its program is destroyed instead, and the pool stops
// starting sandboxes ahead. take does not wake
// the filler: the caller calls refill once its program is done, so that
// creating the next sandbox, which costs far more CPU than a short
// program, does not compete with the program it would slow down.
func (p *pool) take() *sandbox {
	if p == nil || p.size <= 0 {
		return nil
	}
	var s *sandbox
	select {
	case s = <-p.ready:
	default:
		return nil
	}
	if st, exited := s.stubExited(); exited {
		p.stubFailed(st)
		p.e.retire(s)
		return nil
	}
	return s
}

// stubFailed stops starting sandboxes ahead, after a stub exited early with
// status st.
func (p *pool) stubFailed(st containerd.ExitStatus) {
	if !p.ahead.Swap(false) {
		return
	}
	code, _, _ := st.Result()
	why := "the waiting /bin/sh exited before its program"
	if code == sandboxoci.StubRefused {
		why = "the image's /bin/sh is bash, which changes the environment it passes on"
	}
	p.e.log.Info("ready sandboxes will be created without being started: "+why, "language", p.lang.Name, "exit_status", code)
}

// refill wakes the filler.
func (p *pool) refill() {
	if p == nil || p.size <= 0 {
		return
	}
	p.poke()
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run starts the pool's filler once; it stops when the executor closes,
// destroying what it kept.
func (p *pool) run(img *preparedImage) {
	p.start.Do(func() {
		if p.size > 0 {
			p.started = true
			go p.fill(img)
		}
	})
}

// wait waits for the filler to stop, once the executor is closing. A pool
// not started by then never starts.
func (p *pool) wait() {
	p.start.Do(func() {})
	if p.started {
		<-p.done
	}
}

func (p *pool) fill(img *preparedImage) {
	defer close(p.done)
	ctx := p.e.closing
	backoff := time.Second
	tick := time.NewTicker(poolMaxAge / 4)
	defer tick.Stop()
	for {
		p.expire()
		for len(p.ready) < p.size && ctx.Err() == nil {
			deadline := time.Now().Add(poolMaxAge + p.lang.Limits.MaxTimeout + cleanupGrace)
			s, err := p.e.newSandbox(ctx, p.lang, img, deadline, p.ahead.Load())
			if err != nil && p.ahead.Load() && ctx.Err() == nil {
				// Perhaps the image has no /bin/sh: try without it.
				var err2 error
				if s, err2 = p.e.newSandbox(ctx, p.lang, img, deadline, false); err2 == nil {
					p.ahead.Store(false)
					p.e.log.Info("ready sandboxes will be created without being started: the waiting /bin/sh cannot start", "language", p.lang.Name, "err", err)
					err = nil
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				p.e.log.Warn("cannot fill the sandbox pool; retrying", "language", p.lang.Name, "err", err, "in", backoff)
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Minute)
				continue
			}
			backoff = time.Second
			p.ready <- s
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

// expire replaces ready sandboxes that waited longer than poolMaxAge.
func (p *pool) expire() {
	for range len(p.ready) {
		select {
		case s := <-p.ready:
			if time.Since(s.created) > poolMaxAge {
				p.e.retire(s)
				continue
			}
			p.ready <- s
		default:
			return
		}
	}
}

// drain destroys every ready sandbox.
func (p *pool) drain() {
	for {
		select {
		case s := <-p.ready:
			s.destroy(context.Background())
		default:
			return
		}
	}
}

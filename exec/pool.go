package exec

import (
	"context"
	"sync"
	"time"
)

// poolMaxAge is how long a ready sandbox may wait for a program. Older ones
// are replaced, so that their deadline label, which covers this age plus
// the longest run, stays true.
const poolMaxAge = 10 * time.Minute

// pool keeps sandboxes of one language created and waiting, so that a run
// pays only for starting its program. Each sandbox is used once. A pool of
// size 0 keeps nothing: every run creates its own sandbox.
//
// Ready sandboxes hold no concurrency slot: a slot bounds programs that
// run. Refilling is one sandbox at a time per language, in the background.
type pool struct {
	e    *Executor
	lang Language
	size int

	ready   chan *sandbox
	wake    chan struct{}
	start   sync.Once
	started bool          // set inside start
	done    chan struct{} // closed when the filler has stopped
}

func newPool(e *Executor, lang Language) *pool {
	return &pool{
		e:     e,
		lang:  lang,
		size:  lang.Pool,
		ready: make(chan *sandbox, max(lang.Pool, 0)),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// take returns a ready sandbox, or nil if there is none. It does not wake
// the filler: the caller calls refill once its program is done, so that
// creating the next sandbox, which costs far more CPU than a short
// program, does not compete with the program it would slow down.
func (p *pool) take() *sandbox {
	if p == nil || p.size <= 0 {
		return nil
	}
	select {
	case s := <-p.ready:
		return s
	default:
		return nil
	}
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
			s, err := p.e.newSandbox(ctx, p.lang, img, deadline)
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

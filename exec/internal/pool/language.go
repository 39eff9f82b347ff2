// Package pool keeps each language ready to run: its image present,
// unpacked and cached for as long as containerd's record of it does not
// change, what the image holds (Inventories), and a pool of ready
// sandboxes, started ahead and waiting (on the stub, or warm), refilled in
// the background. It makes sandboxes through a sandbox.Host and hands used
// ones to its Config's Retire. It knows nothing of requests, sessions, MCP
// or the configuration file.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/sandbox"
)

const (
	// callTimeout bounds one short call to containerd on a run's path,
	// such as an image lookup.
	callTimeout = sandbox.CallTimeout
	// pullRetry is how long a failed pull is remembered: calls in that
	// time get its error at once instead of paying for another try.
	pullRetry = 30 * time.Second
)

// Config is what the languages share.
type Config struct {
	Host *sandbox.Host
	// Namespace is containerd's namespace, for errors.
	Namespace string
	// Pull pulls a missing image from its registry.
	Pull bool
	// Retire destroys a sandbox off the caller's path; whoever closes
	// the Host's Life waits for it.
	Retire func(*sandbox.Sandbox)
	// Inventories reads what the images hold, shared by the languages
	// so that an image two of them run is read once.
	Inventories *Inventories
}

// Language is one language's readiness. It owns the language's image,
// present, unpacked and cached for as long as the image in containerd's
// store does not change, and its pool of ready sandboxes, which the first
// success starts. Each language has its own lock, held only briefly: a
// pull or unpack runs in the background, so preparing one language never
// blocks another's runs, and a caller that gives up stops waiting.
type Language struct {
	c    Config
	cfg  config.Language
	pool *pool
	// preparing counts the preparations under way, which outlive their
	// callers: see WaitPrepared.
	preparing sync.WaitGroup

	mu      sync.Mutex
	img     *sandbox.Image // the image as last prepared; nil before, or once it changed
	flight  *flight        // the preparation under way; nil if none
	pullErr error          // the last failed pull, and when it failed
	pullAt  time.Time
}

// flight is one preparation of a language's image; done is closed once
// img or err is set.
type flight struct {
	done chan struct{}
	img  *sandbox.Image
	err  error
}

func New(c Config, cfg config.Language) *Language {
	l := &Language{c: c, cfg: cfg}
	l.pool = newPool(l)
	return l
}

// Ready returns the language's prepared image and makes sure its pool
// runs. The image's record in containerd is looked up each time, so that
// an image imported again under the same name is prepared again; the
// unpack happens only then. A pull that failed within pullRetry is not
// tried again: its error is returned.
func (l *Language) Ready(ctx context.Context) (*sandbox.Image, error) {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	rec, err := l.c.Host.Client.ImageService().Get(lctx, l.cfg.Image)
	cancel()
	if err != nil && !errdefs.IsNotFound(err) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("looking up image %s: %w", l.cfg.Image, context.Cause(ctx))
		}
		return nil, fmt.Errorf("look up image %s in containerd: %w", l.cfg.Image, err)
	}
	missing := err != nil

	l.mu.Lock()
	if !missing && l.img != nil && l.img.Target == rec.Target.Digest {
		img := l.img
		l.mu.Unlock()
		l.pool.start()
		return img, nil
	}
	if missing {
		l.img = nil
		if !l.c.Pull || !l.cfg.Packages.Empty() {
			l.mu.Unlock()
			return nil, l.missingImage(nil)
		}
		if l.pullErr != nil && time.Since(l.pullAt) < pullRetry {
			err := l.pullErr
			l.mu.Unlock()
			return nil, err
		}
	}
	f := l.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		l.flight = f
		l.preparing.Add(1)
		go l.prepare(f)
	}
	l.mu.Unlock()

	select {
	case <-f.done:
		if f.err != nil {
			return nil, f.err
		}
		l.pool.start()
		return f.img, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for image %s: %w: %w", l.cfg.Image, ErrPreparing, context.Cause(ctx))
	}
}

// ErrPreparing marks Ready's error when ctx ended while it waited for
// the image's preparation, which goes on.
var ErrPreparing = errors.New("it is still being prepared (pulled or unpacked)")

// prepare runs one flight. A pull or unpack, once begun, is not
// interrupted by a caller: containerd's unpacker cleans up on the context
// it was given, and a cancelled one leaves its extraction snapshot behind.
// It runs detached from every caller, bounded by prepareTimeout, and by
// Close's own bound: a server that exits does not wait for a pull.
func (l *Language) prepare(f *flight) {
	defer l.preparing.Done()
	ctx, cancel := l.c.Host.Life.Detached(context.Background(), prepareTimeout)
	defer cancel()
	img, pulled, err := l.prepareImage(ctx)
	l.mu.Lock()
	f.img, f.err = img, err
	l.flight = nil
	switch {
	case err == nil:
		l.img, l.pullErr = img, nil
	case pulled:
		l.pullErr, l.pullAt = err, time.Now()
	}
	l.mu.Unlock()
	close(f.done)
}

// current returns the image as last prepared, or nil.
func (l *Language) current() *sandbox.Image {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.img
}

// Invalidate forgets the prepared image, once containerd says the image
// changed: ready sandboxes made from it are then not used, and the next
// ready prepares the image anew.
func (l *Language) Invalidate() {
	l.mu.Lock()
	changed := l.img != nil
	l.img = nil
	l.mu.Unlock()
	if changed {
		l.c.Host.Log.Info("image changed in containerd; ready sandboxes of the old one are replaced", "language", l.cfg.Name, "image", l.cfg.Image)
	}
	// A pool waiting for a missing image tries again at once.
	l.pool.refill()
}

// Config is the language's configuration.
func (l *Language) Config() config.Language { return l.cfg }

// WaitPrepared waits for the preparations under way to end: each is
// bounded by prepareTimeout and by the Host's Life.
func (l *Language) WaitPrepared() { l.preparing.Wait() }

// Pooled reports whether the language keeps ready sandboxes.
func (l *Language) Pooled() bool { return l.pool.size > 0 }

// Take returns a ready sandbox for code, or nil: see pool.take. Call
// Refill once its program is done.
func (l *Language) Take(code string) *sandbox.Sandbox { return l.pool.take(code) }

// Refill wakes the pool's filler.
func (l *Language) Refill() { l.pool.refill() }

// StubFailed stops starting sandboxes ahead, after a stub exited before
// its program with status code.
func (l *Language) StubFailed(code uint32) { l.pool.stubFailed(code) }

// Count is how many ready sandboxes wait now.
func (l *Language) Count() int { return l.pool.count() }

// WaitPool waits for the pool's filler to stop, once the Host's Life is
// closing, and destroys what it kept.
func (l *Language) WaitPool() { l.pool.wait() }

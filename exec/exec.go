// Package exec runs programs in fresh, locked-down containerd containers,
// one brand-new container per run, deleted with its snapshot afterwards,
// or, for a session, as the cells of one interpreter kept alive in a
// container of its own, confined the same way. It is a facade (Config,
// New, Run, Ready, Inventory, Close, the sessions' calls, the sentinel
// errors, Hooks) that checks requests, bounds concurrent runs and owns the
// order of shutdown; the work is done by packages with one job each under
// internal/: sandbox (one sandbox, created, run and destroyed), pool (each
// language's image and ready sandboxes), session (sessions and their cell
// protocol), watch (how sandboxes end), sweep (what is ours, and its
// deletion), workspace (the files in and out), uid (host uid claims) and
// lifetime (closing, then abandoning). None of them imports exec. It reads
// languages in config's model but knows no configuration file, and
// nothing of MCP.
package exec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"code-sandbox-mcp/exec/internal/pool"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/session"
	"code-sandbox-mcp/exec/internal/sweep"

	"code-sandbox-mcp/exec/internal/lifetime"
	"code-sandbox-mcp/exec/internal/watch"

	"code-sandbox-mcp/exec/internal/uid"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/images"
	"code-sandbox-mcp/containers/inventory"
)

// Config is what an Executor needs to know.
type Config struct {
	// Address is containerd's socket; Namespace the containerd namespace
	// every object of ours lives in.
	Address   string
	Namespace string
	// Snapshotter is the snapshotter to use; empty means the daemon's default.
	Snapshotter string
	// StateDir is a host directory for per-run program directories. It is
	// created if missing.
	StateDir string
	// Concurrency bounds runs in flight; more wait in a queue. Zero means
	// the number of CPUs.
	Concurrency int
	// Languages are the languages it runs, each with a distinct Name.
	Languages []config.Language
	// UIDs are the host uids, and gids of the same numbers, that
	// sandboxes run as, one each; UIDLockDir is the host-wide directory
	// where a uid is claimed (see uids). Every server and command on the
	// host must use the same directory.
	UIDs       config.UIDRange
	UIDLockDir string
	// PassEnv is added, as KEY=value, to every run's environment.
	PassEnv []string
	// LookupEnv reads the server's environment, as os.LookupEnv does (nil
	// is os.LookupEnv): the values of the secrets a language's network
	// proxy adds to its requests (config.Network.Secrets).
	LookupEnv func(string) (string, bool)
	// Init is the host path of the static init that runs as pid 1 of
	// every sandbox; empty is sandbox.DefaultInit: code-sandbox-init beside
	// the server's executable, else Debian's tini-static.
	Init string
	// Pull allows pulling an image that is missing from the image store.
	Pull bool
	// Sessions bounds the sessions of the languages that have a session
	// driver (config.Language.SessionDriver).
	Sessions SessionConfig
	// Hooks are told what the executor does; the zero value tells no one.
	Hooks Hooks
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Executor runs programs. It is safe for concurrent use.
type Executor struct {
	cfg   Config
	h     *sandbox.Host // what the sandboxes need; its Life is closed by Close, and abandoned when Close gives up waiting (see abandonWhenStuck): deletes still going then give up
	slots chan struct{}

	runs     sync.WaitGroup // runs in flight
	cleanups sync.WaitGroup // sandboxes being destroyed
	retried  chan struct{}  // closed when the reaper's retry loop has stopped

	langs map[string]*pool.Language // by name
	inv   pool.Inventories          // what the languages' images hold

	closeOnce sync.Once
	closeErr  error
	closeMu   sync.RWMutex // orders enter's check against Close

	sessions session.Table
}

// New validates cfg, connects to containerd and returns an Executor; call
// Close when done. Prepare is optional: it makes the first runs quicker
// and sweeps what crashed servers left, but a Run prepares its language
// itself when it must.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := newHost(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	e := &Executor{
		cfg:     cfg,
		h:       h,
		slots:   make(chan struct{}, cfg.Concurrency),
		langs:   map[string]*pool.Language{},
		retried: make(chan struct{}),
	}
	e.sessions.Log, e.sessions.Ended, e.sessions.Closing = log, cfg.Hooks.SessionEnded, h.Life.Closing()
	pc := pool.Config{Host: h, Namespace: cfg.Namespace, Pull: cfg.Pull, Retire: e.retire, Inventories: &e.inv}
	for _, l := range cfg.Languages {
		e.langs[l.Name] = pool.New(pc, l)
	}
	// Its first event may come at once: the languages are there to hear
	// it. It ends, as the other watches do, when Close begins.
	bg, _ := h.Life.Background()
	h.Events = watch.NewEvents(bg, h.Client, cfg.Namespace, log, e.imageChanged)
	go func() {
		defer close(e.retried)
		h.Reaper.RetryLoop(h.Life)
	}()
	return e, nil
}

// check validates cfg before New does any I/O.
func (cfg *Config) check() error {
	switch {
	case cfg.Namespace == "":
		return fmt.Errorf("no containerd namespace configured: %w", errdefs.ErrInvalidArgument)
	case cfg.StateDir == "":
		return fmt.Errorf("no state directory configured: %w", errdefs.ErrInvalidArgument)
	case len(cfg.Languages) == 0:
		return fmt.Errorf("no languages configured: %w", errdefs.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, l := range cfg.Languages {
		if err := validate(l); err != nil {
			return err
		}
		if seen[l.Name] {
			return fmt.Errorf("language %q is configured twice: %w", l.Name, errdefs.ErrInvalidArgument)
		}
		seen[l.Name] = true
	}
	return nil
}

// newHost makes what the sandboxes need: the state directory, the uid
// claims, the client (and the snapshotter it uses), the reaper, and the
// watches of the kernel's exits and OOM counts, which end when the Life's
// closing begins. Its Events are the caller's to start.
func newHost(ctx context.Context, cfg Config, log *slog.Logger) (*sandbox.Host, error) {
	initPath, err := sandbox.CheckInit(cfg.Init)
	if err != nil {
		return nil, err
	}
	egress, err := egressOf(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	me, err := sweep.Self()
	if err != nil {
		return nil, err
	}
	ids, err := uid.New(cfg.UIDs, cfg.UIDLockDir, me.String())
	if err != nil {
		return nil, err
	}
	c, err := images.Dial(ctx, cfg.Address, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	snapshotter, err := pool.ResolveSnapshotter(ctx, c, cfg.Snapshotter)
	if err != nil {
		c.Close()
		return nil, err
	}
	volatile, err := sandbox.VolatileOverlays(cfg.StateDir)
	if err != nil {
		log.Info("sandbox overlays are mounted as containerd gives them: each delete waits for the host's dirty data on containerd's file system", "reason", err)
	}
	// Every call runs in our namespace, whatever namespace the caller's
	// context names.
	life := lifetime.New(cfg.Namespace)
	bg, _ := life.Background()
	return &sandbox.Host{
		Client:      c,
		Snapshotter: snapshotter,
		Volatile:    volatile,
		StateDir:    cfg.StateDir,
		PassEnv:     cfg.PassEnv,
		Init:        initPath,
		Hard:        hardLimits(),
		Egress:      egress,
		UIDs:        ids,
		Reaper: &sweep.Reaper{
			Client:      c,
			Namespace:   cfg.Namespace,
			Snapshotter: snapshotter,
			StateDir:    cfg.StateDir,
			Owner:       me,
			UIDs:        ids,
			Log:         log,
		},
		Exits:   watch.NewExits(bg, log),
		OOMs:    watch.NewOOMs(bg, log),
		Life:    life,
		Log:     log,
		Created: cfg.Hooks.SandboxCreated,
	}, nil
}

// egressOf reads the network of every language that has one.
func egressOf(cfg Config) (map[string]*sandbox.Egress, error) {
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var pass []string
	for _, kv := range cfg.PassEnv {
		k, _, _ := strings.Cut(kv, "=")
		pass = append(pass, k)
	}
	e, err := sandbox.NewEgresses(cfg.Languages, lookup, pass)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	return e, nil
}

// imageChanged invalidates the prepared image of every language that runs
// the image called name.
func (e *Executor) imageChanged(name string) {
	for _, l := range e.langs {
		if l.Config().Image == name {
			l.Invalidate()
		}
	}
}

// Prepare sweeps what crashed servers left behind, and makes every
// language ready: its image present and unpacked, so that no run pays for
// it, its pool of ready sandboxes filling, and what its image holds read
// (see Inventory; a read that fails is logged, not returned). The
// languages are prepared side by side. It returns every problem it met; a
// language that failed is prepared again by its next run, and its pool
// starts then. Close cancels it, and waits for it.
func (e *Executor) Prepare(ctx context.Context) error {
	if !e.enter() {
		return ErrClosed
	}
	defer e.runs.Done()
	ctx, cancel := e.h.Life.UntilClosed(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	add := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, l := range e.langs {
		wg.Go(func() {
			if _, err := l.Ready(ctx); err != nil {
				add(err)
				return
			}
			// A read that fails is logged, and says nothing of the
			// image; the language runs all the same.
			l.Inventory(ctx)
		})
	}
	if _, err := e.h.Reaper.Sweep(ctx); err != nil {
		add(fmt.Errorf("sweep: %w", err))
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close kills the runs still going, destroys the ready sandboxes, waits for
// every sandbox to be deleted, tries once more the deletes that failed
// before, and disconnects from containerd. It takes about closeTimeout
// at most where containerd does not answer, and up to closeMax where it
// answers slowly: past that, what is left is the next server's to sweep,
// and Close says so.
// What is left then is containerd's records alone: a sandbox containerd
// did not delete had its processes killed from the host (see
// sandbox.Destroy). Calls after the first return its result.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.shutdown() })
	return e.closeErr
}

func (e *Executor) shutdown() error {
	stop := make(chan struct{})
	defer close(stop)
	go e.abandonWhenStuck(stop)
	e.closeMu.Lock()
	e.h.Life.Close()
	e.closeMu.Unlock()
	e.sessions.EndAll("the server is shutting down")
	e.runs.Wait()
	// Before the Life is abandoned: a read's cleanup (its unmount, its
	// view's removal) runs on the Life's detached contexts.
	e.inv.Wait()
	for _, l := range e.langs {
		l.WaitPool()
	}
	e.cleanups.Wait()
	e.sessions.Wait()
	<-e.retried
	var err error
	last, cancel := e.h.Life.Detached(context.Background(), closeTimeout)
	defer cancel()
	if left := e.h.Reaper.Retry(last); left > 0 {
		err = fmt.Errorf("%d sandboxes could not be deleted; the next server's start-up sweep deletes them", left)
	}
	e.h.Life.Abandon()
	e.h.UIDs.Abandon()
	for _, l := range e.langs {
		l.WaitPrepared()
	}
	e.h.Events.Wait()
	e.h.Exits.Wait()
	e.h.OOMs.Wait()
	return errors.Join(err, e.h.Client.Close())
}

// abandonWhenStuck abandons the Life's cleanups when Close gives up on
// them (see giveUp, with closeTimeout, pingTimeout and closeMax). It
// returns once stop is closed.
func (e *Executor) abandonWhenStuck(stop <-chan struct{}) {
	giveUp(stop, closeBounds{first: closeTimeout - pingTimeout, every: closeTimeout, max: closeMax}, e.answers, e.h.Life.Abandon, func(waited time.Duration) {
		e.h.Log.Info("closing: containerd answers but the deletes are not done; waiting for them", "waited", waited.Round(time.Millisecond))
	})
}

// closeBounds are when Close asks whether containerd answers: first
// after first, then every every, and never past max.
type closeBounds struct{ first, every, max time.Duration }

// giveUp calls abandon once Close should give up its deletes, unless stop
// is closed first: at the first question that answers (containerd, asked
// at b.first and then every b.every) says no, since a containerd that does
// not answer (it hangs, or is down) would not finish them either, or once
// the next question would come past b.max. A busy host's deletes take
// longer than a quiet one's, and one given up is left to the next
// server's sweep, that is, left behind: while containerd answers, Close
// waits. waiting is told each time it does.
func giveUp(stop <-chan struct{}, b closeBounds, answers func() bool, abandon func(), waiting func(waited time.Duration)) {
	begin := time.Now()
	wait := b.first
	for {
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		if time.Since(begin)+b.every > b.max || !answers() {
			abandon()
			return
		}
		waiting(time.Since(begin))
		wait = b.every
	}
}

// answers says whether containerd answers a question within pingTimeout.
func (e *Executor) answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	_, err := e.h.Client.Version(ctx)
	return err == nil
}

// Sweep deletes what servers that are gone left behind in our namespace:
// tasks, containers with their snapshots, stray snapshots, and program
// directories. Live runs, ours or another server's, are left alone. It
// returns how many containers it reaped.
func (e *Executor) Sweep(ctx context.Context) (int, error) {
	return e.h.Reaper.Sweep(ctx)
}

func validate(l config.Language) error {
	name := l.Name
	switch {
	case name == "":
		return fmt.Errorf("a language has no name: %w", errdefs.ErrInvalidArgument)
	case l.Image == "":
		return fmt.Errorf("language %q has no image: %w", name, errdefs.ErrInvalidArgument)
	case len(l.Command) == 0:
		return fmt.Errorf("language %q has no command: %w", name, errdefs.ErrInvalidArgument)
	case l.File == "" || l.File != cleanBase(l.File):
		return fmt.Errorf("language %q: file %q must be a plain file name: %w", name, l.File, errdefs.ErrInvalidArgument)
	case l.Pool < 0:
		return fmt.Errorf("language %q: pool %d is negative: %w", name, l.Pool, errdefs.ErrInvalidArgument)
	}
	// The limits' rules are the configuration's, wherever the language
	// came from.
	if err := l.Limits.Check("languages." + name + ".limits"); err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	return sandbox.CheckRuntime(l)
}

// hardLimits reads the server's own hard rlimits, which a run's may not
// exceed.
func hardLimits() map[string]uint64 {
	out := map[string]uint64{}
	for name, res := range map[string]int{
		"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
		"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
		"RLIMIT_CORE":       unix.RLIMIT_CORE,
		"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
		"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
		"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
		"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
		"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
		"RLIMIT_NICE":       unix.RLIMIT_NICE,
	} {
		var r unix.Rlimit
		if unix.Getrlimit(res, &r) == nil {
			out[name] = r.Max
		}
	}
	return out
}

// Ready reports whether the executor can run every language now: nil if
// containerd answers and each language's image is present and prepared,
// and otherwise every reason it cannot, in the languages' names order. It
// asks as a run would (an image missing from the store is pulled, if
// pulling is allowed, and a language that is ready starts its pool), and
// waits for a preparation under way only as long as ctx allows; give it a
// short bound. It is meant for health checks, and is safe to call at any
// time; once Close has begun it says the executor is closed.
func (e *Executor) Ready(ctx context.Context) error {
	if !e.enter() {
		return ErrClosed
	}
	defer e.runs.Done()
	ctx = namespaces.WithNamespace(ctx, e.cfg.Namespace)
	vctx, cancel := context.WithTimeout(ctx, sandbox.CallTimeout)
	_, err := e.h.Client.Version(vctx)
	cancel()
	if err != nil {
		return fmt.Errorf("containerd does not answer: %w", err)
	}
	names := make([]string, 0, len(e.langs))
	for name := range e.langs {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		if _, err := e.langs[name].Ready(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Inventory returns what language's image holds: its packages, its
// Python modules, its language's version (see inventory.Inventory). It is
// read from the image's unpacked files, never by running it, once per
// image digest; the image is prepared first, as a run would, and Inventory
// waits for that and for the read only as long as ctx allows. Its error
// says why the inventory is not known: the image is missing, or could not
// be read.
func (e *Executor) Inventory(ctx context.Context, language string) (*inventory.Inventory, error) {
	if !e.enter() {
		return nil, ErrClosed
	}
	defer e.runs.Done()
	l, ok := e.langs[language]
	if !ok {
		return nil, fmt.Errorf("unknown language %q: %w", language, errdefs.ErrInvalidArgument)
	}
	return l.Inventory(namespaces.WithNamespace(ctx, e.cfg.Namespace))
}

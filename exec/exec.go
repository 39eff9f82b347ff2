// Package exec runs programs in fresh, locked-down containerd containers:
// one brand-new container per run, deleted with its snapshot afterwards.
//
// It owns the run lifecycle on containerd (image lookup and unpack,
// container and snapshot, task with captured I/O, deadline, kill, cleanup,
// the sweep of what a crashed server left behind, and the bound on
// concurrent runs). It knows containerd, not MCP and not configuration files.
package exec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
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
	// PassEnv is added, as KEY=value, to every run's environment.
	PassEnv []string
	// Pull allows pulling an image that is missing from the image store.
	Pull bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Executor runs programs. It is safe for concurrent use.
type Executor struct {
	cfg         Config
	client      *containerd.Client
	log         *slog.Logger
	owner       owner
	snapshotter string
	slots       chan struct{}
	hard        map[string]uint64 // the server's own hard rlimits

	// closing is cancelled by Close; every run derives from it too.
	closing  context.Context
	close    context.CancelFunc
	runs     sync.WaitGroup // runs in flight
	cleanups sync.WaitGroup // sandboxes being destroyed

	pools map[string]*pool // by language name; never nil for a language

	closeOnce sync.Once
	closeErr  error
	closeMu   sync.RWMutex // orders enter's check against Close

	oom *oomWatch

	mu       sync.Mutex
	prepared map[string]*preparedImage // by language name
}

// New connects to containerd and returns an Executor. Call Prepare before
// the first Run, and Close when done.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("no containerd namespace configured: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("no state directory configured: %w", errdefs.ErrInvalidArgument)
	}
	if len(cfg.Languages) == 0 {
		return nil, fmt.Errorf("no languages configured: %w", errdefs.ErrInvalidArgument)
	}
	for _, l := range cfg.Languages {
		if err := validate(l); err != nil {
			return nil, err
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	me, err := self()
	if err != nil {
		return nil, err
	}
	c, err := Dial(ctx, cfg.Address, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	snapshotter, err := resolveSnapshotter(ctx, c, cfg.Snapshotter)
	if err != nil {
		c.Close()
		return nil, err
	}
	closing, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &Executor{
		cfg:         cfg,
		client:      c,
		log:         log,
		owner:       me,
		snapshotter: snapshotter,
		slots:       make(chan struct{}, cfg.Concurrency),
		hard:        hardLimits(),
		closing:     closing,
		close:       cancel,
		prepared:    map[string]*preparedImage{},
		pools:       map[string]*pool{},
	}
	for _, l := range cfg.Languages {
		e.pools[l.Name] = newPool(e, l)
	}
	e.oom = watchOOM(closing, c, cfg.Namespace, log)
	return e, nil
}

// Prepare sweeps what crashed servers left behind, makes sure every
// language's image is present and unpacked, so that no run pays for it, and
// starts filling each language's pool of ready sandboxes.
func (e *Executor) Prepare(ctx context.Context) error {
	if _, err := e.Sweep(ctx); err != nil {
		return err
	}
	var errs []error
	for _, l := range e.cfg.Languages {
		img, err := e.image(ctx, l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.pools[l.Name].run(img)
	}
	return errors.Join(errs...)
}

// Close kills the runs still going, destroys the ready sandboxes, waits for
// every sandbox to be deleted and disconnects from containerd. Calls after
// the first return its result.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.shutdown() })
	return e.closeErr
}

func (e *Executor) shutdown() error {
	e.closeMu.Lock()
	e.close()
	e.closeMu.Unlock()
	e.runs.Wait()
	for _, p := range e.pools {
		p.wait()
	}
	e.cleanups.Wait()
	e.oom.wait()
	return e.client.Close()
}

// Client returns the containerd client, for read-only checks such as the
// CLI's doctor. Closing it is the Executor's business.
func (e *Executor) Client() *containerd.Client {
	return e.client
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
	case l.Limits.UID == 0 || l.Limits.GID == 0:
		return fmt.Errorf("language %q would run as root (uid %d, gid %d): %w", name, l.Limits.UID, l.Limits.GID, errdefs.ErrInvalidArgument)
	case l.Limits.Timeout <= 0 || l.Limits.MaxTimeout < l.Limits.Timeout:
		return fmt.Errorf("language %q: timeout %s must be positive and at most max timeout %s: %w", name, l.Limits.Timeout, l.Limits.MaxTimeout, errdefs.ErrInvalidArgument)
	case l.Limits.OutputBytes <= 0 || l.Limits.CodeBytes <= 0:
		return fmt.Errorf("language %q: output and code caps must be positive: %w", name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// hardLimits reads the server's own hard rlimits, which a run's may not
// exceed.
func hardLimits() map[string]uint64 {
	out := map[string]uint64{}
	for name, res := range map[string]int{
		"RLIMIT_NOFILE": unix.RLIMIT_NOFILE,
		"RLIMIT_FSIZE":  unix.RLIMIT_FSIZE,
		"RLIMIT_CORE":   unix.RLIMIT_CORE,
	} {
		var r unix.Rlimit
		if unix.Getrlimit(res, &r) == nil {
			out[name] = r.Max
		}
	}
	return out
}

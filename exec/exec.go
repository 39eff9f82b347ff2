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
	"log/slog"
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
	// Concurrency bounds runs in flight; more wait in a queue.
	Concurrency int
	// Languages by name.
	Languages map[string]Language
	// PassEnv is added, as KEY=value, to every run's environment.
	PassEnv []string
	// Pull allows pulling an image that is missing from the image store.
	Pull bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Executor runs programs. It is safe for concurrent use.
type Executor struct {
	cfg Config
}

// New connects to containerd and returns an Executor. Call Prepare before
// the first Run, and Close when done.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	panic("not implemented")
}

// Prepare sweeps what crashed servers left behind and makes sure every
// language's image is present and unpacked, so that no run pays for it.
func (e *Executor) Prepare(ctx context.Context) error {
	panic("not implemented")
}

// Run runs one program in a new sandbox and returns what it did. An error
// means the sandbox could not run the program (bad request, missing image,
// runtime failure); a program that fails is a Result, not an error.
func (e *Executor) Run(ctx context.Context, req Request) (*Result, error) {
	panic("not implemented")
}

// Close waits for cleanups in flight and disconnects from containerd. Runs
// still going are killed.
func (e *Executor) Close() error {
	panic("not implemented")
}

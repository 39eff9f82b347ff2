package exec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	sandboxoci "code-sandbox-mcp/oci"
)

// idPrefix starts the id of every container, snapshot and program
// directory we create.
const idPrefix = "csm-"

const (
	// cleanupTimeout bounds the deletion of one run's objects.
	cleanupTimeout = 30 * time.Second
	// exitTimeout bounds the wait for a killed task to be reported gone.
	exitTimeout = 10 * time.Second
	// drainTimeout bounds the wait for the last output once a task exited.
	drainTimeout = 5 * time.Second
	// oomGrace is how long a run killed by SIGKILL that it did not get from
	// us waits for the OOM event, which may trail the exit.
	oomGrace = 250 * time.Millisecond
)

// Run runs one program in a new sandbox and returns what it did. An error
// means the sandbox could not run the program (bad request, missing image,
// runtime failure, cancellation); a program that fails is a Result, not an
// error. Whatever happens, the sandbox is gone when Run returns.
func (e *Executor) Run(ctx context.Context, req Request) (*Result, error) {
	lang, timeout, err := e.check(req)
	if err != nil {
		return nil, err
	}
	// Runs end when the caller gives up or the executor closes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.closing, cancel)
	defer stop()

	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free sandbox slot: %w", context.Cause(ctx))
	}
	e.runs.Add(1)
	defer e.runs.Done()

	img, err := e.image(ctx, req.Language)
	if err != nil {
		return nil, err
	}
	r := &run{
		e:       e,
		lang:    lang,
		img:     img,
		id:      newID(),
		timeout: timeout,
		stdout:  newCapture(lang.Limits.OutputBytes),
		stderr:  newCapture(lang.Limits.OutputBytes),
	}
	defer r.cleanup(ctx)
	return r.do(ctx, req.Code)
}

// check validates a request against its language.
func (e *Executor) check(req Request) (Language, time.Duration, error) {
	lang, ok := e.cfg.Languages[req.Language]
	if !ok {
		return lang, 0, fmt.Errorf("unknown language %q: %w", req.Language, errdefs.ErrInvalidArgument)
	}
	lang.Name = req.Language
	if len(req.Code) > lang.Limits.CodeBytes {
		return lang, 0, fmt.Errorf("program is %d bytes, over the limit of %d bytes: %w", len(req.Code), lang.Limits.CodeBytes, errdefs.ErrInvalidArgument)
	}
	timeout := lang.Limits.Timeout
	switch {
	case req.Timeout < 0:
		return lang, 0, fmt.Errorf("timeout %s is negative: %w", req.Timeout, errdefs.ErrInvalidArgument)
	case req.Timeout > lang.Limits.MaxTimeout:
		return lang, 0, fmt.Errorf("timeout %s is over the maximum of %s: %w", req.Timeout, lang.Limits.MaxTimeout, errdefs.ErrInvalidArgument)
	case req.Timeout > 0:
		timeout = req.Timeout
	}
	return lang, timeout, nil
}

// run is one run's state, from its container's creation to its deletion.
type run struct {
	e       *Executor
	lang    Language
	img     *preparedImage
	id      string
	timeout time.Duration
	stdout  *capture
	stderr  *capture

	dir       string // the run's host directory, removed at cleanup
	container containerd.Container
	task      containerd.Task
}

func (r *run) do(ctx context.Context, program string) (*Result, error) {
	if err := r.writeProgram(program); err != nil {
		return nil, err
	}
	if err := r.create(ctx); err != nil {
		return nil, err
	}
	oom, stopOOM := r.e.oom.track(r.id)
	defer stopOOM()

	task, err := r.container.NewTask(ctx, cio.NewCreator(
		cio.WithStreams(nil, r.stdout, r.stderr),
		cio.WithFIFODir(r.dir),
	))
	if err != nil {
		return nil, fmt.Errorf("create task for %s: %w", r.lang.Image, err)
	}
	r.task = task
	exited, err := task.Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("wait for task: %w", err)
	}
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	start := time.Now()
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", r.lang.Command[0], r.lang.Image, err)
	}

	res := &Result{Language: r.lang.Name, Image: r.lang.Image, Timeout: r.timeout}
	var status containerd.ExitStatus
	select {
	case status = <-exited:
	case <-timer.C:
		res.TimedOut = true
		if status, err = r.kill(ctx, exited); err != nil {
			return nil, err
		}
	case <-ctx.Done():
		// The caller gave up: kill, and let cleanup delete everything.
		r.kill(context.WithoutCancel(ctx), exited)
		return nil, fmt.Errorf("run cancelled: %w", context.Cause(ctx))
	}
	res.Duration = time.Since(start)
	r.drain(task)

	code, _, err := status.Result()
	if err != nil {
		return nil, fmt.Errorf("read exit status: %w", err)
	}
	res.ExitCode = int(code)
	if code > 128 && code <= 128+64 {
		sig := syscall.Signal(code - 128)
		res.Signal = signalName(sig)
		if sig == syscall.SIGKILL && !res.TimedOut {
			// Only the kernel's OOM killer sends SIGKILL that we did not.
			t := time.NewTimer(oomGrace)
			select {
			case <-oom:
				res.OOMKilled = true
			case <-t.C:
			}
			t.Stop()
		}
	}
	if !res.OOMKilled {
		select {
		case <-oom:
			res.OOMKilled = true
		default:
		}
	}
	res.Stdout, res.StdoutDropped = r.stdout.Bytes()
	res.Stderr, res.StderrDropped = r.stderr.Bytes()
	return res, nil
}

// writeProgram puts the program in a new host directory, which the sandbox
// sees read-only at oci.CodeDir. The program never goes through argv.
func (r *run) writeProgram(code string) error {
	r.dir = filepath.Join(r.e.cfg.StateDir, r.id)
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	codeDir := filepath.Join(r.dir, "code")
	if err := os.Mkdir(codeDir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	// Mkdir is subject to the umask; the sandbox's user must be able to
	// read the program.
	if err := os.Chmod(codeDir, 0o755); err != nil {
		return err
	}
	f := filepath.Join(codeDir, r.lang.File)
	if err := os.WriteFile(f, []byte(code), 0o444); err != nil {
		return fmt.Errorf("write program: %w", err)
	}
	return os.Chmod(f, 0o444)
}

// create makes the run's container: a new snapshot of the image and a spec
// built by package oci.
func (r *run) create(ctx context.Context) error {
	l := r.lang.Limits
	policy := sandboxoci.Policy{
		Args:        append(append([]string{}, r.lang.Command...), sandboxoci.ProgramPath(r.lang.File)),
		Env:         sandboxoci.Env(r.img.env, r.lang.Env, r.e.cfg.PassEnv),
		UID:         l.UID,
		GID:         l.GID,
		Hostname:    "sandbox",
		MemoryBytes: l.MemoryBytes,
		CPUs:        l.CPUs,
		Pids:        l.Pids,
		TmpBytes:    l.TmpBytes,
		ShmBytes:    l.ShmBytes,
		Rlimits: sandboxoci.Rlimits([]sandboxoci.Rlimit{
			{Type: "RLIMIT_NOFILE", Max: l.OpenFiles},
			{Type: "RLIMIT_FSIZE", Max: uint64(l.FileBytes)},
			{Type: "RLIMIT_CORE", Max: 0},
		}, func(t string) (uint64, bool) { v, ok := r.e.hard[t]; return v, ok }),
		CodeHostDir: filepath.Join(r.dir, "code"),
	}
	specOpts, err := sandboxoci.SpecOpts(policy)
	if err != nil {
		return err
	}
	labels := map[string]string{
		LabelInstance: r.e.owner.instance,
		labelOwner:    r.e.owner.label(),
		LabelRun:      r.id,
		LabelLanguage: r.lang.Name,
		LabelDeadline: time.Now().Add(r.timeout + cleanupGrace).UTC().Format(time.RFC3339),
	}
	opts := []containerd.NewContainerOpts{
		containerd.WithContainerLabels(labels),
		containerd.WithImageName(r.img.image.Name()),
		containerd.WithSnapshotter(r.e.snapshotter),
		containerd.WithNewSnapshot(r.id, r.img.image, snapshots.WithLabels(labels)),
		containerd.WithNewSpec(specOpts...),
	}
	if r.lang.Runtime != "" {
		opts = append(opts, containerd.WithRuntime(r.lang.Runtime, nil))
	}
	c, err := r.e.client.NewContainer(ctx, r.id, opts...)
	if err != nil {
		return fmt.Errorf("create container from %s: %w", r.lang.Image, err)
	}
	r.container = c
	return nil
}

// kill kills every process of the task and waits for it to be reported
// gone.
func (r *run) kill(ctx context.Context, exited <-chan containerd.ExitStatus) (containerd.ExitStatus, error) {
	if err := r.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		r.e.log.Warn("kill sandbox", "run", r.id, "err", err)
	}
	t := time.NewTimer(exitTimeout)
	defer t.Stop()
	select {
	case s := <-exited:
		return s, nil
	case <-t.C:
		return containerd.ExitStatus{}, fmt.Errorf("sandbox %s did not exit within %s of SIGKILL", r.id, exitTimeout)
	}
}

// drain waits, boundedly, for the output copiers to reach the end of both
// streams; the shim closes them once every process in the sandbox is gone.
func (r *run) drain(task containerd.Task) {
	done := make(chan struct{})
	go func() {
		task.IO().Wait()
		close(done)
	}()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.e.log.Warn("output did not end after the sandbox exited", "run", r.id)
	}
}

// cleanup deletes the task, the container with its snapshot, and the run's
// directory, on a context that outlives the (possibly cancelled) request.
// It runs on every path out of Run, panics included.
func (r *run) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if r.task != nil {
		if _, err := r.task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			r.e.log.Warn("delete task", "run", r.id, "err", err)
		}
	}
	if r.container != nil {
		if err := r.container.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			r.e.log.Warn("delete container", "run", r.id, "err", err)
		}
	}
	if r.dir != "" {
		if err := os.RemoveAll(r.dir); err != nil {
			r.e.log.Warn("remove run directory", "run", r.id, "err", err)
		}
	}
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return idPrefix + hex.EncodeToString(b)
}

// cleanBase returns name if it is a plain file name, and "" otherwise.
func cleanBase(name string) string {
	if name == "." || name == ".." || filepath.Base(name) != name {
		return ""
	}
	return name
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

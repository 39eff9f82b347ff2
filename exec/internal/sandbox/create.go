package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/sweep"
	"code-sandbox-mcp/exec/internal/watch"
	"code-sandbox-mcp/exec/internal/workspace"
	sandboxoci "code-sandbox-mcp/oci"
)

// createTimeout bounds the creation of one sandbox.
const createTimeout = 30 * time.Second

// New makes a sandbox for lang from o.Image, whose task starts as o.How
// says; with o.Session, the task runs the language's session driver on
// those streams instead, started at once. Objects are labelled so that
// anyone may reap them after o.Deadline. On error nothing is left.
//
// Creation is not interrupted half-way when ctx ends: a cancelled call to
// containerd may still complete in the daemon, after a cleanup that did not
// see its object. It runs on a detached context bounded by createTimeout
// and by the Host's Life (what it leaves then, labelled, is the next
// server's to sweep), and ctx is checked once it is done.
func (h *Host) New(ctx context.Context, lang config.Language, o Options) (_ *Sandbox, err error) {
	caller := ctx
	// The Life's abandon ends it too: a server that exits does not wait
	// for a daemon that hangs.
	ctx, cancel := h.Life.Detached(ctx, createTimeout)
	defer cancel()
	s := &Sandbox{
		h:       h,
		lang:    lang,
		img:     o.Image,
		id:      sweep.NewID(),
		created: time.Now(),
		stdout:  NewCapture(int(lang.Limits.OutputBytes)),
		stderr:  NewCapture(int(lang.Limits.OutputBytes)),
		session: o.Session,
	}
	defer func() {
		if err != nil {
			s.Destroy(ctx)
		}
		if h.Created != nil {
			h.Created(lang.Name, time.Since(s.created), err)
		}
	}()
	if s.uid, err = h.UIDs.Claim(s.id); err != nil {
		return nil, err
	}
	labels := h.Reaper.Owner.Labels(s.id, lang.Name, o.Deadline)
	if err := s.makeDir(labels); err != nil {
		return nil, err
	}
	if err := workspace.Mount(s.dir, s.uid, lang.Limits.WorkspaceBytes); err != nil {
		return nil, err
	}
	if err := s.openNetwork(); err != nil {
		return nil, err
	}
	if err := s.createContainer(ctx, labels, o); err != nil {
		return nil, err
	}
	s.oom, s.stopOOM = h.Events.Track(s.id)
	if err := s.createTask(ctx); err != nil {
		return nil, err
	}
	if o.Background {
		s.cpuCgroup = watch.CgroupDir(s.task.Pid(), "cpu")
	}
	if err := s.startAhead(ctx); err != nil {
		return nil, err
	}
	if err := caller.Err(); err != nil {
		return nil, fmt.Errorf("sandbox creation cancelled: %w", context.Cause(caller))
	}
	h.Log.Debug("sandbox created", "run", s.id, "started", s.start != nil, "warm", s.warm != nil, "took", time.Since(s.created),
		"memory_cgroup", s.memCgroup)
	return s, nil
}

// createTask creates the container's task on its streams, and starts
// watching its process: its exit as the kernel tells it, a pidfd for the
// host's own kill, its memory cgroup's OOM count, and containerd's exit.
func (s *Sandbox) createTask(ctx context.Context) (err error) {
	h := s.h
	var stdin io.Reader // none: /dev/null
	var stdout, stderr io.Writer = s.stdout, s.stderr
	switch {
	case s.warm != nil:
		stdin, stdout, stderr = s.start, s.warm.out, s.warm.err
	case s.start != nil:
		stdin = s.start
	case s.session != nil:
		stdin, stdout, stderr = s.session.Stdin, s.session.Stdout, s.session.Stderr
	}
	s.task, err = newTask(ctx, h.Client, s.container, h.Snapshotter, s.id, h.Volatile, cio.NewCreator(
		cio.WithStreams(stdin, stdout, stderr),
		cio.WithFIFODir(s.dir),
	))
	if err != nil {
		s.taskFailed = true
		return fmt.Errorf("create task for %s: %w", s.lang.Image, err)
	}
	// The task's process is the program's, from the stub or runc's init
	// to the interpreter: the same pid.
	s.exit = h.Exits.Track(s.task.Pid())
	if fd, err := unix.PidfdOpen(int(s.task.Pid()), 0); err == nil {
		s.pidfd, s.hasPidfd = fd, true
	}
	// Its memory cgroup counts the OOM killer's kills for explain; the
	// watch keeps the count should the cgroup go with the exit, as a
	// systemd scope's does.
	s.memCgroup = watch.MemoryCgroup(s.task.Pid())
	s.ooms = h.OOMs.Track(s.memCgroup)
	if err := workspace.Same(s.task.Pid(), filepath.Join(s.dir, workspace.Dir)); err != nil {
		return err
	}
	// The exit channel must outlive this function's context.
	if s.exited, err = s.task.Wait(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("wait for task: %w", err)
	}
	return nil
}

// startAhead starts the task of a sandbox started ahead (on the stub, or
// warm) and of a session's driver; others wait for Execute.
func (s *Sandbox) startAhead(ctx context.Context) error {
	var what string
	switch {
	case s.warm != nil:
		what = "the warm " + s.lang.Command[0]
	case s.start != nil:
		what = "the waiting /bin/sh"
	case s.session != nil:
		what = "the " + s.lang.SessionDriver + " session driver"
	default:
		return nil
	}
	if err := s.task.Start(ctx); err != nil {
		return fmt.Errorf("start %s in %s: %w", what, s.lang.Image, err)
	}
	if s.start != nil && s.warm == nil {
		if err := s.awaitStub(ctx); err != nil {
			return fmt.Errorf("start %s in %s: %w", what, s.lang.Image, err)
		}
	}
	return nil
}

// stubExecTimeout bounds awaitStub's wait for the stub's exec.
const stubExecTimeout = 5 * time.Second

// awaitStub waits, once a stub sandbox's task started, until the init's
// child has exec'd the waiting /bin/sh, and fails where it ended first
// (an image without /bin/sh): the pool then makes this sandbox without
// the stub and tries it again for the next, as it did when /bin/sh was
// the task's own process and runc refused to create it. Where the
// kernel's word is missing, or the exec takes longer than
// stubExecTimeout, it does not fail: a run then finds the stub ended
// (StubEnded), or waiting.
func (s *Sandbox) awaitStub(ctx context.Context) error {
	if s.h.Init == "" {
		return nil
	}
	t := time.NewTimer(stubExecTimeout)
	defer t.Stop()
	select {
	case <-s.exit.Forked():
	case <-s.exit.Done():
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	child := s.exit.Child()
	if child == nil {
		if _, ok := s.exit.Execed(); !ok {
			return nil
		}
		return fmt.Errorf("the init ended without starting it")
	}
	select {
	case <-child.FirstExec():
		return nil
	case <-child.Done():
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	// Both may be ready at once: only an end with no exec failed.
	if n, ok := child.Execed(); !ok || n > 0 {
		return nil
	}
	// The init exits with its child: its last words are all there is.
	s.Drain()
	why, _ := s.stderr.Bytes()
	return fmt.Errorf("%s: %w", initFatal(why), errdefs.ErrFailedPrecondition)
}

// makeDir creates the sandbox's host directory, with the owner's labels in
// its owner file (a sweep proves ownership from it before deleting). Its
// code/ subdirectory is what the sandbox sees, read-only, at oci.CodeDir;
// New mounts the workspace in it next, and createContainer writes the
// Python hook into it.
func (s *Sandbox) makeDir(labels map[string]string) error {
	s.dir = filepath.Join(s.h.StateDir, s.id)
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	if err := sweep.WriteOwner(s.dir, labels); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	code := filepath.Join(s.dir, "code")
	if err := os.Mkdir(code, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	// Mkdir is subject to the umask; the sandbox's user must be able to
	// read the program.
	return os.Chmod(code, 0o755)
}

// createContainer makes the container: a new snapshot of the image and a
// spec built by package oci. A one-shot sandbox with a warm driver carries
// it whether it starts warm or not; the driver waits only where o.How is
// Warm or Preloaded.
func (s *Sandbox) createContainer(ctx context.Context, labels map[string]string, o Options) error {
	h := s.h
	policy := basePolicy(s.lang, runFacts{
		imageEnv: s.img.Env, passEnv: h.PassEnv, hard: h.Hard, uid: s.uid, initPath: h.Init,
		codeDir: filepath.Join(s.dir, "code"), workspaceDir: filepath.Join(s.dir, workspace.Dir),
	})
	policy.Background = o.Background
	s.withNetwork(&policy)
	driver := ""
	if s.session == nil {
		driver = o.WarmDriver
	}
	if err := s.writeHooks(&policy, driver); err != nil {
		return err
	}
	if s.session != nil {
		args, err := writeDriver(filepath.Join(s.dir, "code"), s.lang.SessionDriver)
		if err != nil {
			return err
		}
		policy.Args = append(slices.Clone(s.lang.Command), args...)
	} else if driver != "" && (o.How == Warm || o.How == Preloaded) {
		var preload []string
		if o.How == Preloaded {
			preload = s.lang.Preload
		}
		s.start = newStartLine(warmLine(preload))
		s.warm = newWarmStart(s.stdout, s.stderr, o.How == Preloaded)
	} else if o.How != OnRun && sandboxoci.CanWaitForStart(policy.Env) {
		policy.WaitForStart = true
		s.start = newStartLine("")
	}
	specOpts, err := sandboxoci.SpecOpts(policy)
	if err != nil {
		// The configuration let through what the spec refuses.
		return fmt.Errorf("the sandbox policy of %s is refused: %v: %w", s.lang.Name, err, errdefs.ErrFailedPrecondition)
	}
	opts := []containerd.NewContainerOpts{
		containerd.WithContainerLabels(labels),
		containerd.WithImageName(s.img.Image.Name()),
		containerd.WithSnapshotter(h.Snapshotter),
		containerd.WithNewSnapshot(s.id, s.img.Image, snapshots.WithLabels(labels)),
		containerd.WithNewSpec(specOpts...),
	}
	if rt := withRuntime(s.lang); rt != nil {
		opts = append(opts, rt)
	}
	c, err := h.Client.NewContainer(ctx, s.id, opts...)
	if err != nil {
		return fmt.Errorf("create container from %s: %w", s.lang.Image, err)
	}
	s.container = c
	return nil
}

// writeHooks writes the start-up hooks the sandbox's interpreter loads:
// Python's for figures, its warm driver or, with a network, pip's user
// site (see pipEnv), Node.js's warm driver, and sets policy to mount them.
func (s *Sandbox) writeHooks(policy *sandboxoci.Policy, driver string) error {
	switch {
	case s.lang.Figures || driver == "python" || s.net != nil && s.lang.Interpreter() == "python":
		hooks, err := writePythonHook(s.dir, s.lang.Figures, s.net != nil)
		if err != nil {
			return err
		}
		policy.HooksHostDir = hooks
		policy.Env = sandboxoci.WithPythonHooks(policy.Env)
	case driver == "node":
		hooks, err := writeNodeHook(s.dir)
		if err != nil {
			return err
		}
		policy.HooksHostDir, policy.HooksDir = hooks, sandboxoci.NodeHooksDir
		policy.Args = slices.Concat(s.lang.Command, []string{"--require", sandboxoci.NodeHooksDir + "/warm.js"}, policy.Args[len(s.lang.Command):])
	}
	return nil
}

package exec

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"code-sandbox-mcp/exec/internal/sweep"

	"code-sandbox-mcp/exec/internal/watch"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/workspace"
	sandboxoci "code-sandbox-mcp/oci"
)

// sandbox is one container whose task waits for a program: the program's
// directory is mounted and still empty. Either the task is created and not
// started, or it was started ahead and its process waits in
// oci.StubScript for a line on its standard input. It runs exactly one
// program and is then destroyed.
type sandbox struct {
	e       *Executor
	lang    config.Language
	img     *preparedImage
	id      string
	dir     string // host directory: the program (code/), the workspace mount, the Python hook (hooks/) and the FIFOs
	uid     uint32 // the host uid and gid it runs as, its own; 0 before the claim
	created time.Time

	container containerd.Container
	task      containerd.Task
	exited    <-chan containerd.ExitStatus
	stdout    *capture
	stderr    *capture
	oom       <-chan struct{}
	stopOOM   func()
	exit      *watch.Exit // how the kernel says its process ended
	// pidfd refers to its first process for the host's own kill, which it
	// reaches whatever became of the pid since; valid only with hasPidfd
	// (none before Linux 5.3, or before the task exists).
	pidfd     int
	hasPidfd  bool
	memCgroup string          // host directory of its memory cgroup; "" if unknown
	ooms      *watch.OOMCount // its memory cgroup's count of OOM kills
	// oomsTold counts the OOM kills in its memory cgroup that are not its
	// process's to explain: in a session, those before the cell now
	// running, which a result told of or will (see runInSession). Zero
	// for a one-shot sandbox.
	oomsTold atomic.Uint64

	// start is the waiting process's standard input when the task was
	// started ahead (on the stub, or warm); nil when Start runs the
	// program.
	start *startLine
	// warm is set when the task was started ahead in a warm driver.
	warm *warmStart
	// exitOwed is set when execute took the kernel's word on the exit and
	// did not wait for containerd's: destroy waits for it first.
	exitOwed bool
	// taskFailed is set when the task could not be created: destroy
	// then stops a shim containerd may have left (see sweep.Reaper.StopLeftShims).
	taskFailed bool
	// session holds the streams of a session's driver, which the task
	// runs instead of a program; nil for a one-shot sandbox.
	session *sessionIO
}

// startHow is how a sandbox's task starts.
type startHow int

const (
	// startOnRun creates the task and leaves it: Start runs the program.
	startOnRun startHow = iota
	// startStub starts the task at once, in oci.StubScript, unless the
	// environment rules that out (see oci.CanWaitForStart).
	startStub
	// startWarm starts it at once in the warm driver (see warm.go);
	// startPreloaded does too, and has the driver import the language's
	// preloads first.
	startWarm
	startPreloaded
)

// newSandbox makes a sandbox for lang from img, whose task starts as how
// says. With sio, the task runs the language's session driver on those
// streams instead, started at once. Objects are labelled so that anyone
// may reap them after deadline. On error nothing is left.
//
// Creation is not interrupted half-way when ctx ends: a cancelled call to
// containerd may still complete in the daemon, after a cleanup that did not
// see its object. It runs on a detached context bounded by createTimeout
// and by Close's own bound (what it leaves then, labelled, is the next
// server's to sweep), and ctx is checked once it is done.
func (e *Executor) newSandbox(ctx context.Context, lang config.Language, img *preparedImage, deadline time.Time, how startHow, sio *sessionIO) (_ *sandbox, err error) {
	caller := ctx
	// Close's bound ends it too: a server that exits does not wait for a
	// daemon that hangs.
	ctx, cancel := e.life.Detached(ctx, createTimeout)
	defer cancel()
	s := &sandbox{
		e:       e,
		lang:    lang,
		img:     img,
		id:      sweep.NewID(),
		created: time.Now(),
		stdout:  newCapture(int(lang.Limits.OutputBytes)),
		stderr:  newCapture(int(lang.Limits.OutputBytes)),
		session: sio,
	}
	defer func() {
		if err != nil {
			s.destroy(ctx)
		}
		if h := e.cfg.Hooks.SandboxCreated; h != nil {
			h(lang.Name, time.Since(s.created), err)
		}
	}()
	if s.uid, err = e.uids.Claim(s.id); err != nil {
		return nil, err
	}
	labels := s.labels(deadline)
	if err := s.makeDir(labels); err != nil {
		return nil, err
	}
	if err := workspace.Mount(s.dir, s.uid, lang.Limits.WorkspaceBytes); err != nil {
		return nil, err
	}
	if err := s.createContainer(ctx, img, labels, how); err != nil {
		return nil, err
	}
	s.oom, s.stopOOM = e.events.Track(s.id)
	var stdin io.Reader // none: /dev/null
	var stdout, stderr io.Writer = s.stdout, s.stderr
	switch {
	case s.warm != nil:
		stdin, stdout, stderr = s.start, s.warm.out, s.warm.err
	case s.start != nil:
		stdin = s.start
	case sio != nil:
		stdin, stdout, stderr = sio.in, sio.out, sio.errs
	}
	s.task, err = newTask(ctx, e.client, s.container, e.snapshotter, s.id, e.volatile, cio.NewCreator(
		cio.WithStreams(stdin, stdout, stderr),
		cio.WithFIFODir(s.dir),
	))
	if err != nil {
		s.taskFailed = true
		return nil, fmt.Errorf("create task for %s: %w", lang.Image, err)
	}
	// The task's process is the program's, from the stub or runc's init
	// to the interpreter: the same pid.
	s.exit = e.exits.Track(s.task.Pid())
	if fd, err := unix.PidfdOpen(int(s.task.Pid()), 0); err == nil {
		s.pidfd, s.hasPidfd = fd, true
	}
	// Its memory cgroup counts the OOM killer's kills for explain; the
	// watch keeps the count should the cgroup go with the exit, as a
	// systemd scope's does.
	s.memCgroup = watch.MemoryCgroup(s.task.Pid())
	s.ooms = e.ooms.Track(s.memCgroup)
	if err := workspace.Same(s.task.Pid(), filepath.Join(s.dir, workspace.Dir)); err != nil {
		return nil, err
	}
	// The exit channel must outlive this function's context.
	if s.exited, err = s.task.Wait(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("wait for task: %w", err)
	}
	if s.start != nil {
		what := "the waiting /bin/sh"
		if s.warm != nil {
			what = "the warm " + lang.Command[0]
		}
		if err := s.task.Start(ctx); err != nil {
			return nil, fmt.Errorf("start %s in %s: %w", what, lang.Image, err)
		}
	}
	if sio != nil {
		if err := s.task.Start(ctx); err != nil {
			return nil, fmt.Errorf("start the %s session driver in %s: %w", lang.SessionDriver, lang.Image, err)
		}
	}
	if err := caller.Err(); err != nil {
		return nil, fmt.Errorf("sandbox creation cancelled: %w", context.Cause(caller))
	}
	e.log.Debug("sandbox created", "run", s.id, "started", s.start != nil, "warm", s.warm != nil, "took", time.Since(s.created))
	return s, nil
}

// labels are the container's and its snapshot's labels, which say who
// owns them until deadline.
func (s *sandbox) labels(deadline time.Time) map[string]string {
	return s.e.reaper.Owner.Labels(s.id, s.lang.Name, deadline)
}

// makeDir creates the sandbox's host directory, with the owner's labels in
// its ownerFile (a sweep proves ownership from it before deleting). Its
// code/ subdirectory is what the sandbox sees, read-only, at oci.CodeDir;
// newSandbox mounts the workspace in it next, and createContainer writes
// the Python hook into it.
func (s *sandbox) makeDir(labels map[string]string) error {
	s.dir = filepath.Join(s.e.cfg.StateDir, s.id)
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
// spec built by package oci. Every one-shot sandbox of a warm language
// carries its warm driver, warm or not, so that a program sees the same
// sandbox either way; the driver waits only where how is startWarm or
// startPreloaded.
func (s *sandbox) createContainer(ctx context.Context, img *preparedImage, labels map[string]string, how startHow) error {
	e := s.e
	policy := sandboxoci.NewPolicy(s.lang)
	policy.Env = sandboxoci.Env(img.env, s.lang.Env, e.cfg.PassEnv)
	policy.Hard = func(t string) (uint64, bool) { v, ok := e.hard[t]; return v, ok }
	policy.CodeHostDir = filepath.Join(s.dir, "code")
	policy.WorkspaceHostDir = filepath.Join(s.dir, workspace.Dir)
	policy.UID, policy.GID = s.uid, s.uid
	driver := ""
	if s.session == nil {
		driver = e.warmDriver(s.lang)
	}
	switch {
	case s.lang.Figures || driver == "python":
		hooks, err := writePythonHook(s.dir, s.lang.Figures)
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
	if s.session != nil {
		args, err := writeDriver(filepath.Join(s.dir, "code"), s.lang.SessionDriver)
		if err != nil {
			return err
		}
		policy.Args = append(slices.Clone(s.lang.Command), args...)
	} else if driver != "" && (how == startWarm || how == startPreloaded) {
		var preload []string
		if how == startPreloaded {
			preload = s.lang.Preload
		}
		s.start = newStartLine(warmLine(preload))
		s.warm = newWarmStart(s.stdout, s.stderr, how == startPreloaded)
	} else if how != startOnRun && sandboxoci.CanWaitForStart(policy.Env) {
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
		containerd.WithImageName(img.image.Name()),
		containerd.WithSnapshotter(e.snapshotter),
		containerd.WithNewSnapshot(s.id, img.image, snapshots.WithLabels(labels)),
		containerd.WithNewSpec(specOpts...),
	}
	if rt := withRuntime(s.lang); rt != nil {
		opts = append(opts, rt)
	}
	c, err := e.client.NewContainer(ctx, s.id, opts...)
	if err != nil {
		return fmt.Errorf("create container from %s: %w", s.lang.Image, err)
	}
	s.container = c
	return nil
}

// execute writes the program where the waiting process will find it and
// the request's files into the workspace, starts the program (or, started
// ahead, sends the stub its line), and collects what it did: its output,
// its status and its output files. The program never goes through argv.
// On expiry of timeout, or when ctx ends, every process of the sandbox is
// killed.
func (s *sandbox) execute(ctx context.Context, req Request, timeout time.Duration) (*Result, error) {
	begun := time.Now()
	if err := s.writeProgram(req.Code); err != nil {
		return nil, err
	}
	ws := filepath.Join(s.dir, workspace.Dir)
	if err := workspace.WriteInputs(ws, req.Files, s.uid, false); err != nil {
		return nil, err
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	start := time.Now()
	if s.start != nil {
		s.start.send()
	} else if err := s.startTask(ctx); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", s.lang.Command[0], s.lang.Image, err)
	}
	started := time.Now()
	res := &Result{Language: s.lang.Name, Image: s.lang.Image, ImageDigest: s.img.target.String(), Timeout: timeout, Warm: s.warm != nil}
	var code uint32
	// The process's end is told by containerd's exit, or, first or alone
	// when containerd is slow or hangs, by the kernel's.
	kernel, exited := s.exit.Done(), s.exited
wait:
	for {
		select {
		case st := <-exited:
			c, _, err := st.Result()
			if err != nil && s.e.exits.Usable() {
				// containerd went away (its wait broke): the shim and
				// the program go on, and the kernel tells their end.
				s.e.log.Warn("containerd's wait for the sandbox broke; waiting for the kernel's word", "run", s.id, "err", err)
				exited = nil
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read exit status: %w", err)
			}
			code = c
			break wait
		case <-kernel:
			c, ok := s.exit.Code()
			if !ok {
				kernel = nil // the kernel's word is missing: wait for containerd's
				continue
			}
			// The kernel's status is the result's; containerd's word
			// on the exit, which normally follows within a few
			// milliseconds, is waited for by destroy, off the response
			// path.
			code, s.exitOwed = c, exited != nil
			break wait
		case <-timer.C:
			// A program that ended in time is not timed out, whatever
			// containerd has said of it yet.
			if c, ok := s.exit.Code(); ok {
				code = c
				break wait
			}
			res.TimedOut = true
			c, err := s.kill(ctx)
			if err != nil {
				return nil, err
			}
			code = c
			break wait
		case <-ctx.Done():
			// The caller gave up: kill now; destroy deletes the rest.
			s.kill(ctx)
			return nil, fmt.Errorf("run cancelled: %w", context.Cause(ctx))
		}
	}
	// A stub that ended before it exec'd the program (two execs: runc's
	// init into the stub, the stub into the interpreter) ran nothing,
	// whatever containerd says of its status.
	if n, ok := s.exit.Execed(); ok && s.start != nil && s.warm == nil && n < 2 && !res.TimedOut {
		return nil, &stubEnded{code: code}
	}
	res.Duration = time.Since(start)
	s.drain()
	drained := time.Now()
	res.ExitCode = int(code)
	s.explain(res, code)
	res.Stdout, res.StdoutDropped = s.stdout.Bytes()
	res.Stderr, res.StderrDropped = s.stderr.Bytes()
	lim := s.lang.Limits
	files, dropped, err := workspace.CollectOutputs(ws, workspace.Baseline{Inputs: workspace.InputSums(req.Files)}, workspace.OutputCaps{Files: lim.MaxFilesOut, Bytes: lim.FilesOutBytes})
	if err != nil {
		return nil, fmt.Errorf("collect the output files: %w", err)
	}
	res.Files, res.FilesDropped = files, dropped
	// What a run costs, phase by phase (make bench reads these): writing
	// the program and its files, starting it (a line to the waiting
	// process, or containerd's Start), from there to its exit as the
	// kernel or containerd told it, the end of its output, and the output
	// files. sent_ns is when it was started, on the host's clock.
	s.e.log.Debug("run phases", "run", s.id, "warm", s.warm != nil,
		"write", start.Sub(begun), "start", started.Sub(start), "run", res.Duration,
		"drain", drained.Sub(start)-res.Duration, "files", time.Since(drained), "sent_ns", start.UnixNano())
	return res, nil
}

// explain sets what killed a run that ended with status code, from what
// is known for sure: our own kill at the timeout, the kernel's word on how
// the process ended, and the memory cgroup's OOM event or its count of OOM
// kills. A status of 128+N
// is a program's own exit status unless one of them says a signal ended
// it.
func (s *sandbox) explain(res *Result, code uint32) {
	if res.TimedOut {
		res.Signal = signalName(syscall.SIGKILL)
	} else if code > 128 {
		sig, known := s.exit.Signal(code)
		if sig != 0 {
			res.Signal = signalName(sig)
		}
		res.SignalUnknown = !known && code <= 128+64
		// Only the kernel's OOM killer sends a SIGKILL that we did not;
		// its event may trail the exit a little. Where the kernel's word
		// is missing, 137 is waited on too.
		if sig == syscall.SIGKILL || (!known && code == 128+uint32(syscall.SIGKILL)) {
			t := time.NewTimer(oomGrace)
			select {
			case <-s.oom:
			case <-t.C:
			}
			t.Stop()
		}
	}
	// The OOM event may come late, or not at all from a shim that goes
	// away first; the cgroup's own count of OOM kills says for sure. The
	// event tells of any kill in the sandbox, so once kills are told
	// apart (a session's earlier ones) only the count can.
	told := s.oomsTold.Load()
	if (told == 0 && isClosed(s.oom)) || s.oomCounted(told) {
		res.OOMKilled = true
		res.Signal = signalName(syscall.SIGKILL)
		res.SignalUnknown = false
	}
}

// oomCounted reports whether the sandbox's memory cgroup counted more
// than told OOM kills.
func (s *sandbox) oomCounted(told uint64) bool {
	n, ok := s.ooms.Kills()
	return ok && n > told
}

// killFromHost sends SIGKILL to the sandbox's first process itself. Its
// pidfd reaches that process and no other, even where the exit watch
// cannot say whether it ended (the kernel dropped events, as a fork bomb
// makes it); without one, the pid is used only while the watch has not
// seen the process end, since a pid can be reused.
func (s *sandbox) killFromHost() {
	var err error
	switch {
	case s.hasPidfd:
		err = unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0)
	case !isClosed(s.exit.Done()):
		err = unix.Kill(int(s.task.Pid()), unix.SIGKILL)
	}
	if err != nil && err != unix.ESRCH {
		s.e.log.Warn("kill sandbox process", "run", s.id, "pid", s.task.Pid(), "err", err)
	}
}

// startTask starts a task created and not started, boundedly.
func (s *sandbox) startTask(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return s.task.Start(ctx)
}

// stubEnded is execute's error when a sandbox started ahead ran nothing:
// its stub ended (with status code) before it exec'd the program.
type stubEnded struct{ code uint32 }

func (e *stubEnded) Error() string {
	return fmt.Sprintf("the waiting /bin/sh exited with status %d before it ran the program", e.code)
}

// stubExited reports, for a sandbox started ahead, whether its stub
// exited before it was sent a program, and with what status.
func (s *sandbox) stubExited() (containerd.ExitStatus, bool) {
	if s.start == nil {
		return containerd.ExitStatus{}, false
	}
	select {
	case st := <-s.exited:
		return st, true
	default:
		return containerd.ExitStatus{}, false
	}
}

// kill kills every process of the task and waits for it to be reported
// gone, by containerd or by the kernel; it returns the status it ended
// with. It runs on ctx's values, not its cancellation (the caller may have
// given up), bounded by killTimeout and exitTimeout. Where containerd does
// not carry out the kill, the server kills the sandbox's first process
// itself: it is the init of the sandbox's pid namespace, and the kernel
// kills every other process of the namespace with it.
func (s *sandbox) kill(ctx context.Context) (uint32, error) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	err := s.task.Kill(kctx, syscall.SIGKILL, containerd.WithKillAll)
	cancel()
	if err != nil && !errdefs.IsNotFound(err) {
		s.e.log.Warn("kill sandbox; killing its process from the host", "run", s.id, "err", err)
		s.killFromHost()
	}
	t := time.NewTimer(exitTimeout)
	defer t.Stop()
	kernel, exited := s.exit.Done(), s.exited
	for {
		select {
		case st := <-exited:
			code, _, err := st.Result()
			if err != nil && s.e.exits.Usable() {
				exited = nil // containerd went away: the kernel tells
				continue
			}
			return code, err
		case <-kernel:
			if code, ok := s.exit.Code(); ok {
				return s.containerdExit(exited, code), nil
			}
			kernel = nil
		case <-t.C:
			return 0, fmt.Errorf("sandbox %s did not exit within %s of SIGKILL, and containerd did not say so either: its status is unknown: %w", s.id, killTimeout+exitTimeout, errdefs.ErrUnavailable)
		}
	}
}

// containerdGrace is how long the kernel's word on a process's end waits
// for containerd's, which normally follows at once.
const containerdGrace = time.Second

// containerdExit waits up to containerdGrace for containerd's exit of the
// task, once the kernel said its process ended with status code, and
// returns containerd's status, or code if containerd is slow or gone. The
// wait keeps the order of a healthy daemon: the task's exit is processed
// before the sandbox is deleted. (containerd's wait returns before its
// shim sends the /tasks/exit event: destroy's kill, before the delete,
// gives it the time; see there.) A one-shot run's result
// does not wait for it (the kernel's status is the same, a millisecond or
// two sooner): its destroy does, before the delete.
func (s *sandbox) containerdExit(exited <-chan containerd.ExitStatus, code uint32) uint32 {
	if exited == nil {
		return code
	}
	t := time.NewTimer(containerdGrace)
	defer t.Stop()
	select {
	case st := <-exited:
		if c, _, err := st.Result(); err == nil {
			return c
		}
	case <-t.C:
	}
	return code
}

// writeProgram writes the program where the sandbox reads it. A write
// that fails (the state directory's file system is full, say) leaves no
// partial file, and says where and how much room there was.
func (s *sandbox) writeProgram(program string) error {
	f := filepath.Join(s.dir, "code", s.lang.File)
	err := writeReadable(f, []byte(program), 0o444)
	if err == nil {
		return nil
	}
	os.Remove(f)
	var st unix.Statfs_t
	if unix.Statfs(s.e.cfg.StateDir, &st) == nil {
		free := int64(st.Bavail) * st.Bsize
		return fmt.Errorf("write the program (%d bytes) to state directory %s, which has %d bytes free: %v: %w", len(program), s.e.cfg.StateDir, free, err, errdefs.ErrResourceExhausted)
	}
	return fmt.Errorf("write the program to state directory %s: %v: %w", s.e.cfg.StateDir, err, errdefs.ErrResourceExhausted)
}

// drain waits, boundedly, for the output copiers to reach the end of both
// streams; the shim closes them once every process in the sandbox is gone.
func (s *sandbox) drain() {
	done := make(chan struct{})
	go func() {
		s.task.IO().Wait()
		close(done)
	}()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.e.log.Warn("output did not end after the sandbox exited", "run", s.id)
	}
}

// destroy deletes the task (killing what still runs), the container with
// its snapshot, and the host directory, on a context that outlives the
// (possibly cancelled) request. What is already gone counts as deleted.
func (s *sandbox) destroy(ctx context.Context) {
	start := time.Now()
	// Past the bound on the executor's shutdown, what is left is left to
	// the next server's sweep.
	ctx, cancel := s.e.life.Detached(ctx, sweep.CleanupTimeout)
	defer cancel()
	if s.start != nil {
		s.start.close()
	}
	if s.session != nil {
		// The driver reads the end of its standard input as its end.
		s.session.inW.Close()
	}
	if s.exitOwed {
		// Keep a healthy daemon's order (see containerdExit): the
		// task's exit processed, then its delete.
		s.containerdExit(s.exited, 0)
	}
	if s.task != nil {
		// The kill matters only for a task that has not exited. Deleting
		// an exited task at once, without it, was tried: with containerd
		// 2.4.2 the task's /tasks/exit event then did not reach a
		// subscriber within 5 s in about one run in six (the shim goes
		// away first). Event watchers, our tests among them, count on
		// that event, so the kill and its round trips stay.
		if _, err := s.task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			s.e.log.Warn("delete task", "run", s.id, "err", err)
		}
	}
	var failed error
	if s.container != nil {
		// sweep.Delete also finds a task whose creation failed on our
		// side but not in the daemon.
		if failed = sweep.Delete(ctx, s.container); failed != nil {
			s.e.log.Warn("delete sandbox; retrying in the background", "run", s.id, "err", failed)
		}
	}
	if s.stopOOM != nil {
		s.stopOOM()
	}
	s.e.ooms.Untrack(s.ooms)
	if s.exit != nil {
		s.e.exits.Untrack(s.task.Pid())
	}
	if s.hasPidfd {
		unix.Close(s.pidfd)
		s.hasPidfd = false
	}
	// The run directory holds the FIFOs the shim may still have open:
	// it goes with the container, and the uid is free once both are.
	if failed != nil {
		s.e.reaper.DeleteLater(s.container, s.dir, s.uid)
		return
	}
	if s.taskFailed {
		s.e.reaper.StopLeftShims(s.id)
	}
	if s.uid != 0 {
		s.e.uids.Release(s.uid)
	}
	if s.dir != "" {
		if err := workspace.RemoveRunDir(s.dir); err != nil {
			s.e.log.Warn("remove run directory", "run", s.id, "err", err)
		}
	}
	s.e.log.Debug("sandbox destroyed", "run", s.id, "took", time.Since(start))
}

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

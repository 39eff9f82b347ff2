package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/exec/internal/watch"
	"code-sandbox-mcp/exec/internal/workspace"
)

const (
	// killTimeout bounds containerd's kill of a task, exitTimeout the wait
	// for a killed task to be reported gone: its status is unknown past
	// it. Under make test's load (sixteen bombs at once) a killed sandbox
	// was seen reported gone 2.9 s after the kill; 10 s leaves room for a
	// slower machine.
	killTimeout = 1 * time.Second
	exitTimeout = 10 * time.Second
	// programRecheckFirst and programRecheckMax bound how a run's wait
	// polls, once its program ended, for what else of the program is
	// left (see waitExit): its other threads end within a millisecond or
	// so of its main one on an idle host, but a warm Node.js's were once
	// not gone within the 51 ms that a 25 ms maximum polls for, on a
	// host running two suites and more (the run then waited for its
	// init, stopped by the test, to its timeout). The polls cost nothing
	// on the run's path: a run with an orphan left ends with its init.
	programRecheckFirst = 100 * time.Microsecond
	programRecheckMax   = 200 * time.Millisecond
	// drainTimeout bounds the wait for the last output once a task exited.
	drainTimeout = 5 * time.Second
	// oomGrace is how long a run killed by a SIGKILL that it did not get
	// from us waits for the OOM event, which may trail the exit.
	oomGrace = 250 * time.Millisecond
)

// Execute writes the program where the waiting process will find it and
// files into the workspace, starts the program (or, started ahead, sends
// the stub its line), and collects what it did: its output, its status
// and its output files. The program never goes through argv. On expiry of
// timeout, or when ctx ends, every process of the sandbox is killed. output,
// if not nil, is told the program's output as it is read (see
// exec.Request.Output), until Execute returns.
func (s *Sandbox) Execute(ctx context.Context, code string, files []workspace.File, timeout time.Duration, output func(stream string, p []byte)) (*Result, error) {
	begun := time.Now()
	if err := s.writeProgram(code); err != nil {
		return nil, err
	}
	ws := s.Workspace()
	if err := workspace.WriteInputs(ws, files, s.uid, false); err != nil {
		return nil, err
	}

	defer s.tapOutput(output)()
	// tctx ends at the timeout or with ctx; await tells which by ctx.
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if s.start != nil {
		s.start.send()
	} else if err := s.startTask(ctx); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", s.lang.Command[0], s.lang.Image, err)
	}
	started := time.Now()
	res := &Result{Language: s.lang.Name, Image: s.lang.Image, ImageDigest: s.ImageDigest(), Timeout: timeout, Warm: s.warm != nil}
	status, err := s.await(ctx, tctx, res)
	if err != nil {
		return nil, err
	}
	// A stub that ended before it exec'd the program (two execs: the
	// init's child into the stub, the stub into the interpreter) ran
	// nothing, whatever containerd says of its status.
	if n, ok := s.program().Execed(); ok && s.start != nil && s.warm == nil && n < 2 && !res.TimedOut {
		return nil, &StubEnded{Code: status}
	}
	// An init whose child never exec'd could not start the program (no
	// such interpreter in the image, say): the run failed to start, as
	// a program that is its container's first process fails in
	// containerd's Start. The init said why on the program's stderr.
	if n, ok := s.program().Execed(); ok && s.h.Init != "" && s.start == nil && s.warm == nil && n == 0 && !res.TimedOut {
		s.Drain()
		why, _ := s.stderr.Bytes()
		return nil, fmt.Errorf("start %s in %s: %s (status %d)", s.lang.Command[0], s.lang.Image, initFatal(why), status)
	}
	res.Duration = time.Since(start)
	s.Drain()
	drained := time.Now()
	res.ExitCode = int(status)
	s.Explain(res, status)
	// The program has ended: what it left running goes with the sandbox,
	// and its connections with the proxy, now, so that every one is in
	// the result.
	s.closeNetwork()
	res.Network, res.NetworkRest = s.Network()
	res.Stdout, res.StdoutDropped = s.stdout.Bytes()
	res.Stderr, res.StderrDropped = s.stderr.Bytes()
	lim := s.lang.Limits
	out, dropped, err := workspace.CollectOutputs(ws, workspace.Baseline{Inputs: workspace.InputSums(files)}, workspace.OutputCaps{Files: lim.MaxFilesOut, Bytes: lim.FilesOutBytes})
	if err != nil {
		return nil, fmt.Errorf("collect the output files: %w", err)
	}
	res.Files, res.FilesDropped = out, dropped
	// What a run costs, phase by phase (make bench reads these): writing
	// the program and its files, starting it (a line to the waiting
	// process, or containerd's Start), from there to its exit as the
	// kernel or containerd told it, the end of its output, and the output
	// files. sent_ns is when it was started, on the host's clock.
	s.h.Log.Debug("run phases", "run", s.id, "warm", s.warm != nil,
		"write", start.Sub(begun), "start", started.Sub(start), "run", res.Duration,
		"drain", drained.Sub(start)-res.Duration, "files", time.Since(drained), "sent_ns", start.UnixNano())
	return res, nil
}

// tapOutput makes the output captures tell out (if not nil) what they are
// written, named by stream, until untap is called. Set before the program
// starts, it sees all of the program's output: a warm sandbox's gates
// write to the captures only what follows the driver's marker.
func (s *Sandbox) tapOutput(out func(stream string, p []byte)) (untap func()) {
	if out == nil {
		return func() {}
	}
	s.stdout.Tap(func(p []byte) { out("stdout", p) })
	s.stderr.Tap(func(p []byte) { out("stderr", p) })
	return func() {
		s.stdout.Tap(nil)
		s.stderr.Tap(nil)
	}
}

// await waits for the program's end, or for tctx's, which ends at the
// run's timeout or with ctx; it returns the program's status. At the
// timeout it kills the sandbox and sets res.TimedOut; when ctx ends it
// kills the sandbox too and returns the cancellation.
func (s *Sandbox) await(ctx, tctx context.Context, res *Result) (uint32, error) {
	// The kernel's status is the result's; containerd's word on the
	// exit, which normally follows within a few milliseconds, is
	// waited for by Destroy, off the response path.
	status, ended, err := s.waitExit(tctx.Done(), false)
	switch {
	case ended:
		return status, err
	case ctx.Err() != nil:
		// The caller gave up: kill now; Destroy deletes the rest.
		s.kill(ctx)
		return 0, fmt.Errorf("run cancelled: %w", context.Cause(ctx))
	}
	// A program that ended in time is not timed out, whatever containerd
	// has said of it yet.
	if c, ok := s.exit.Code(); ok {
		return c, nil
	}
	res.TimedOut = true
	return s.kill(ctx)
}

// waitExit waits for the sandbox's first process to end, by containerd's
// word or the kernel's, whichever comes first, or for stop to close
// (ended false then). Where containerd's wait breaks but the kernel's
// word can come, it goes on waiting for that; where it cannot, the
// broken wait's error is returned with what status containerd gave.
// When the kernel tells first, it waits up to containerdGrace for
// containerd (see containerdExit) if grace is set; else it returns at
// once and leaves the wait to Destroy.
//
// Without grace (a run's own wait), the program's end ends it too, with
// the status the init will exit with, once nothing but the init is left
// in the sandbox (see programEnded): the init's own wake-up, reap and
// exit, and the pid namespace's teardown, are not the run's to wait for.
func (s *Sandbox) waitExit(stop <-chan struct{}, grace bool) (status uint32, ended bool, err error) {
	kernel, exited := s.exit.Done(), s.exited
	// forked, then program: the init's child, once it has one. After the
	// program's end, recheck polls for its last threads' (see
	// programEnded), every recheckWait, doubled each time up to
	// programRecheckMax; past it the init's exit ends the wait.
	var forked, program <-chan struct{}
	var recheck <-chan time.Time
	recheckWait := programRecheckFirst
	if !grace && s.h.Init != "" && s.memCgroup != "" {
		forked = s.exit.Forked()
	}
	for {
		select {
		case <-forked:
			forked = nil
			if c := s.exit.Child(); c != nil {
				program = c.Done()
			}
		case <-program:
			program = nil
			recheck = time.After(0)
			// Read the count of OOM kills while the init keeps the
			// cgroup: the kernel counts a kill before it sends it, and
			// under the systemd driver the cgroup goes soon after the
			// init, with the count, and with it maybe the inotify word
			// on its last change (the kernel defers a change that
			// follows another within 10 ms).
			s.ooms.Kills()
		case <-recheck:
			recheck = nil
			if c, ok := s.programEnded(); ok {
				s.endedByProgram = true
				s.exitOwed = exited != nil
				return c, true, nil
			}
			if _, ok := s.exit.Child().Code(); ok && recheckWait <= programRecheckMax {
				recheck = time.After(recheckWait)
				recheckWait *= 2
			}
		case st := <-exited:
			s.ooms.Kills() // as at the program's end: the cgroup may go next
			c, _, err := st.Result()
			if err != nil && s.h.Exits.Usable() {
				// containerd went away (its wait broke): the shim and the
				// program go on, and the kernel tells their end.
				s.h.Log.Warn("containerd's wait for the sandbox broke; waiting for the kernel's word", "run", s.id, "err", err)
				exited = nil
				continue
			}
			if err != nil {
				return c, true, fmt.Errorf("read exit status: %w", err)
			}
			return c, true, nil
		case <-kernel:
			// The program's end and the init's may be told at once, and
			// this case taken first.
			s.ooms.Kills()
			c, ok := s.exit.Code()
			if !ok {
				kernel = nil // the kernel's word is missing: wait for containerd's
				continue
			}
			if grace {
				return s.containerdExit(exited, c), true, nil
			}
			s.exitOwed = exited != nil
			return c, true, nil
		case <-stop:
			return 0, false, nil
		}
	}
}

// Explain sets what killed a run that ended with status code, from what
// is known for sure: our own kill at the timeout, the kernel's word on how
// the process ended, and the memory cgroup's OOM event or its count of OOM
// kills. A status of 128+N is a program's own exit status unless one of
// them says a signal ended it.
func (s *Sandbox) Explain(res *Result, code uint32) {
	// The OOM event may come late, or not at all from a shim that goes
	// away first; the cgroup's own count of OOM kills says for sure. The
	// event tells of any kill in the sandbox, so once kills are told
	// apart (a session's earlier ones) only the count can.
	told := s.oomsTold.Load()
	counted := s.oomCounted(told)
	if res.TimedOut {
		res.Signal = signalName(syscall.SIGKILL)
	} else if code > 128 {
		sig, known := s.endedBy(code)
		if sig != 0 {
			res.Signal = signalName(sig)
		}
		res.SignalUnknown = !known && code <= 128+64
		// Only the kernel's OOM killer sends a SIGKILL that we did not;
		// its event may trail the exit a little, unless the count has
		// it already. Where the kernel's word is missing, 137 is waited
		// on too.
		if !counted && (sig == syscall.SIGKILL || (!known && code == 128+uint32(syscall.SIGKILL))) {
			t := time.NewTimer(oomGrace)
			select {
			case <-s.oom:
			case <-t.C:
			}
			t.Stop()
			counted = s.oomCounted(told)
		}
	}
	if (told == 0 && watch.IsClosed(s.oom)) || counted {
		res.OOMKilled = true
		res.Signal = signalName(syscall.SIGKILL)
		res.SignalUnknown = false
	} else if res.Signal == signalName(syscall.SIGKILL) && !res.TimedOut {
		// A SIGKILL nobody here sent, and no word of the OOM killer:
		// what the count said, for a report of a kill not explained.
		n, ok := s.ooms.Kills()
		s.h.Log.Debug("a SIGKILL not told as an OOM kill", "run", s.id, "memory_cgroup", s.memCgroup,
			"oom_kills", n, "oom_kills_read", ok, "told", told)
	}
}

// endedBy says, once the sandbox's first process ended with status code,
// whether a signal ended its program and which, by the kernel's word:
// known is false where that is missing. The init exits with its
// program's status, 128+N for a program killed by signal N as for one
// that called exit(128+N); its program's own end tells them apart. An init
// killed itself (by our kill, or the OOM killer) ended everything.
func (s *Sandbox) endedBy(code uint32) (sig syscall.Signal, known bool) {
	if s.endedByProgram {
		return s.exit.Child().Signal(code)
	}
	sig, known = s.exit.Signal(code)
	if !known || sig != 0 || s.h.Init == "" {
		return sig, known
	}
	program := s.exit.Child()
	if program == nil {
		return 0, false
	}
	return program.Signal(code)
}

// programEnded returns the status the init exits with once its program
// ended, by the kernel's word, its exit status or 128+N for signal N, if
// the program has ended and the sandbox's memory cgroup holds nothing but
// the init: nothing else can then write the program's output or its
// files, and what it wrote is written. With an orphan of the program
// still running, or where the kernel's word is missing, ok is false, and
// the run ends with the init, which ends that orphan. The kernel lists
// no zombie, so the init need not have reaped the program yet; it does
// list a program whose other threads outlive its main one, which
// waitExit polls for.
func (s *Sandbox) programEnded() (status uint32, ok bool) {
	c, ok := s.exit.Child().Code()
	if !ok {
		return 0, false
	}
	return c, onlyProcess(s.memCgroup, s.task.Pid())
}

// onlyProcess reports whether pid is the one process in the cgroup at
// dir, as its cgroup.procs lists them.
func onlyProcess(dir string, pid uint32) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return err == nil && string(b) == strconv.FormatUint(uint64(pid), 10)+"\n"
}

// program is the kernel's word on the sandbox's program (or its stub, its
// warm driver, its session's driver): the init's first child, or the
// first process itself where there is no init. Nil where the watch saw
// no child.
func (s *Sandbox) program() *watch.Exit {
	if s.h.Init == "" {
		return s.exit
	}
	return s.exit.Child()
}

// oomCounted reports whether the sandbox's memory cgroup counted more
// than told OOM kills.
func (s *Sandbox) oomCounted(told uint64) bool {
	n, ok := s.ooms.Kills()
	return ok && n > told
}

// startTask starts a task created and not started, boundedly.
func (s *Sandbox) startTask(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return s.task.Start(ctx)
}

// StubEnded is Execute's error when a sandbox started ahead ran nothing:
// its stub ended (with status Code) before it exec'd the program.
type StubEnded struct{ Code uint32 }

func (e *StubEnded) Error() string {
	return fmt.Sprintf("the waiting /bin/sh exited with status %d before it ran the program", e.Code)
}

// StubExited reports, for a sandbox started ahead, whether its stub (or
// warm driver) exited before it was sent a program, and with what status.
func (s *Sandbox) StubExited() (containerd.ExitStatus, bool) {
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
func (s *Sandbox) kill(ctx context.Context) (uint32, error) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	// The first process alone: it is the init of the sandbox's own pid
	// namespace (oci's spec always makes one), and the kernel kills every
	// other process of the namespace with it. Not WithKillAll: runc kill
	// --all freezes a cgroup v1 sandbox, signals, then thaws it, and a runc
	// starved by the load it is killing (eight bombs, the other suite's
	// beside) left a sandbox frozen for over 10 s, its processes unable to
	// die even of the server's own SIGKILL from the host.
	err := s.task.Kill(kctx, syscall.SIGKILL)
	cancel()
	if err != nil && !errdefs.IsNotFound(err) {
		s.h.Log.Warn("kill sandbox; killing its process from the host", "run", s.id, "err", err)
		s.signalFromHost(syscall.SIGKILL)
	}
	wctx, cancel := context.WithTimeout(context.Background(), exitTimeout)
	defer cancel()
	gone := s.pidfdExited(wctx.Done())
	status, ended, err := s.waitExit(firstOf(wctx.Done(), gone), true)
	if !ended && watch.IsClosed(gone) {
		// The kernel's word on the exit was lost (a fork bomb makes it
		// drop process events) and containerd has not answered yet (it
		// is as busy): the pidfd says the first process is gone, and
		// with it, as the init of the sandbox's pid namespace, every
		// process in it. It was killed, by us. Destroy waits for
		// containerd's word before the delete, as after the kernel's.
		s.h.Log.Debug("killed sandbox gone by its pidfd; neither the kernel's exit event nor containerd's has come", "run", s.id)
		s.exitOwed = s.exited != nil
		return 128 + uint32(syscall.SIGKILL), nil
	}
	if !ended {
		return 0, fmt.Errorf("sandbox %s did not exit within %s of SIGKILL, and containerd did not say so either: its status is unknown: %w", s.id, killTimeout+exitTimeout, errdefs.ErrUnavailable)
	}
	return status, err
}

// pidfdExited returns a channel closed once the sandbox's first process
// has exited, as its pidfd tells (a pid namespace's init is reported
// exited only once every other process in the namespace is gone), polled
// until stop closes. Without a pidfd it never closes.
func (s *Sandbox) pidfdExited(stop <-chan struct{}) <-chan struct{} {
	gone := make(chan struct{})
	if !s.hasPidfd {
		return gone
	}
	// A copy of its own: Destroy may close the sandbox's before this
	// poll has seen stop.
	fd, err := unix.FcntlInt(uintptr(s.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return gone
	}
	go func() {
		defer unix.Close(fd)
		for !watch.IsClosed(stop) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 50)
			if err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0 {
				close(gone)
				return
			}
			if err != nil && err != unix.EINTR {
				return
			}
		}
	}()
	return gone
}

// firstOf returns a channel closed once a or b is.
func firstOf(a, b <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(c)
	}()
	return c
}

// WaitExit waits for the sandbox's first process to end, or for stop to
// close (ended false then), and returns its status: containerd's, or the
// kernel's where containerd is slow, gone or its wait broke.
func (s *Sandbox) WaitExit(stop <-chan struct{}) (status uint32, ended bool) {
	status, ended, _ = s.waitExit(stop, true)
	return status, ended
}

// containerdGrace is how long the kernel's word on a process's end waits
// for containerd's, which normally follows at once.
const containerdGrace = time.Second

// containerdExit waits up to containerdGrace for containerd's exit of the
// task, once the kernel said its process ended with status code, and
// returns containerd's status, or code if containerd is slow or gone. The
// wait keeps the order of a healthy daemon: the task's exit is processed
// before the sandbox is deleted. (containerd's wait returns before its
// shim sends the /tasks/exit event: Destroy's kill, before the delete,
// gives it the time; see there.) A one-shot run's result does not wait
// for it (the kernel's status is the same, a millisecond or two sooner):
// its Destroy does, before the delete.
func (s *Sandbox) containerdExit(exited <-chan containerd.ExitStatus, code uint32) uint32 {
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
func (s *Sandbox) writeProgram(program string) error {
	f := filepath.Join(s.dir, "code", s.lang.File)
	err := writeReadable(f, []byte(program), 0o444)
	if err == nil {
		return nil
	}
	os.Remove(f)
	dir := s.h.StateDir
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		free := int64(st.Bavail) * st.Bsize
		return fmt.Errorf("write the program (%d bytes) to state directory %s, which has %d bytes free: %v: %w", len(program), dir, free, err, errdefs.ErrResourceExhausted)
	}
	return fmt.Errorf("write the program to state directory %s: %v: %w", dir, err, errdefs.ErrResourceExhausted)
}

// Drain waits, boundedly, for the output copiers to reach the end of both
// streams; the shim closes them once every process in the sandbox is gone.
func (s *Sandbox) Drain() {
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
		s.h.Log.Warn("output did not end after the sandbox exited", "run", s.id)
	}
}

// Workspace is the host directory of its workspace mount.
func (s *Sandbox) Workspace() string { return filepath.Join(s.dir, workspace.Dir) }

// ImageDigest is the digest of the image's manifest (or index) it was made
// from, such as "sha256:…".
func (s *Sandbox) ImageDigest() string { return s.img.Target.String() }

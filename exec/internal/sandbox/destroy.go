package sandbox

import (
	"context"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/exec/internal/sweep"
	"code-sandbox-mcp/exec/internal/workspace"
)

// Destroy deletes the task (killing what still runs), the container with
// its snapshot, and the host directory, on a context that outlives the
// (possibly cancelled) request. What is already gone counts as deleted.
// Where containerd does not delete the task (it hangs, or is down), the
// task's processes are killed from the host all the same: only
// containerd's records of the sandbox are left, to the reaper's retries
// or the next server's sweep.
func (s *Sandbox) Destroy(ctx context.Context) {
	start := time.Now()
	// Past the Life's abandon, what is left is left to the next server's
	// sweep.
	ctx, cancel := s.h.Life.Detached(ctx, sweep.CleanupTimeout)
	defer cancel()
	if s.start != nil {
		s.start.close()
	}
	if s.session != nil && s.session.EndInput != nil {
		// The driver reads the end of its standard input as its end.
		s.session.EndInput.Close()
	}
	if s.exitOwed {
		// Keep a healthy daemon's order (see containerdExit): the
		// task's exit processed, then its delete.
		s.containerdExit(s.exited, 0)
	}
	if s.task != nil {
		s.deleteTask(ctx)
	}
	var failed error
	if s.container != nil {
		// sweep.Delete also finds a task whose creation failed on our
		// side but not in the daemon.
		if failed = sweep.Delete(ctx, s.container); failed != nil {
			s.h.Log.Warn("delete sandbox; retrying in the background", "run", s.id, "err", failed)
		}
	}
	// Its processes are gone, or out of reach: its connections go too.
	s.closeNetwork()
	if s.stopOOM != nil {
		s.stopOOM()
	}
	s.h.OOMs.Untrack(s.ooms)
	if s.exit != nil {
		s.h.Exits.Untrack(s.task.Pid())
	}
	if s.hasPidfd {
		unix.Close(s.pidfd)
		s.hasPidfd = false
	}
	// The run directory holds the FIFOs the shim may still have open:
	// it goes with the container, and the uid is free once both are.
	if failed != nil {
		s.h.Reaper.DeleteLater(s.container, s.dir, s.uid)
		return
	}
	if s.taskFailed {
		s.h.Reaper.StopLeftShims(s.id)
	}
	if s.uid != 0 {
		s.h.UIDs.Release(s.uid)
	}
	if s.dir != "" {
		if err := workspace.RemoveRunDir(s.dir); err != nil {
			s.h.Log.Warn("remove run directory", "run", s.id, "err", err)
		}
	}
	s.h.Log.Debug("sandbox destroyed", "run", s.id, "took", time.Since(start))
}

// deleteTask deletes the task, killing its processes; where containerd
// does not, it kills them from the host (see signalFromHost), so that
// none outlives the sandbox, a ready one's waiting interpreter included.
func (s *Sandbox) deleteTask(ctx context.Context) {
	// The kill matters only for a task that has not exited. Deleting an
	// exited task at once, without it, was tried: with containerd 2.4.2
	// the task's /tasks/exit event then did not reach a subscriber within
	// 5 s in about one run in six (the shim goes away first). Event
	// watchers, our tests among them, count on that event, so the kill
	// and its round trips stay.
	_, err := s.task.Delete(ctx, killFirst)
	if err == nil || errdefs.IsNotFound(err) {
		return
	}
	s.h.Log.Warn("delete task; killing its process from the host", "run", s.id, "err", err)
	s.signalFromHost(syscall.SIGKILL)
}

// killFirst is the delete's kill: containerd's WithProcessKill, but sent
// to the task's first process alone, as kill does and for the same
// reason (runc kill --all freezes a cgroup v1 sandbox first). That process
// is the init of the sandbox's pid namespace: every other process ends
// with it. It waits for the exit, or for ctx's end, before the delete.
func killFirst(ctx context.Context, p containerd.Process) error {
	if p.Pid() == 0 {
		return nil // a task that never started
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	err = p.Kill(ctx, syscall.SIGKILL)
	switch {
	case errdefs.IsFailedPrecondition(err):
		return nil // it had exited
	case err != nil && !errdefs.IsNotFound(err):
		return err
	}
	// Not found may still mean killed: wait for the exit either way.
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

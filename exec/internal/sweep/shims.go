package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A task's shim normally exits when its task is deleted. But when the
// creation of a task is interrupted (its client went away or gave up
// while the shim was creating the container), containerd 2.x can lose
// track of the shim it started: its clean-up finds no task, calls the
// shim's shutdown, drops the connection, and the shim, one process per
// sandbox, runs on for good with nothing to serve (containerd issues
// 7733 and 11392 describe the same kind of leak). Nothing in containerd
// stops it later: the container's delete does not know of it. So where a
// creation may have been interrupted, for every orphan a sweep deletes,
// and for every sandbox whose delete failed and was done later (Retry:
// containerd was down, and a restarted daemon deleted it), the server
// looks for the sandbox's shim once the container is gone and stops it.

const (
	// shimExitGrace is how long a shim whose container is deleted has to
	// exit on its own before it counts as left behind.
	shimExitGrace = time.Second
	// shimTermGrace is how long a shim has to exit on SIGTERM (it then
	// removes its socket) before it gets SIGKILL.
	shimTermGrace = 2 * time.Second
)

// StopLeftShims stops the shims of container id in our namespace that
// outlive its deletion, and logs each. Call it once the container is
// deleted.
func (r *Reaper) StopLeftShims(id string) {
	pids := shimsOf(r.Namespace, id)
	if len(pids) == 0 {
		return
	}
	pids = waitGone(pids, shimExitGrace)
	for pid, start := range pids {
		if sameProcess(pid, start) {
			r.Log.Warn("containerd left the shim of a deleted sandbox running; stopping it", "run", id, "pid", pid)
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	pids = waitGone(pids, shimTermGrace)
	for pid, start := range pids {
		if sameProcess(pid, start) {
			r.Log.Warn("the shim did not exit on SIGTERM; killing it", "run", id, "pid", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// shimsOf returns the processes that are containerd shims of container
// id in namespace, with their start times: by their command line, which
// names both (`containerd-shim-runc-v2 -namespace NS -id ID -address
// ...`, in containerd 1.6 and 2.x alike). Ids are random, so no other
// daemon's shim has the same.
func shimsOf(namespace, id string) map[int]string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !isShimOf(strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"), namespace, id) {
			continue
		}
		if start, err := startTime(pid); err == nil {
			out[pid] = start
		}
	}
	return out
}

// isShimOf reports whether args, a command line, is a containerd shim's
// for container id in namespace.
func isShimOf(args []string, namespace, id string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	return flagValue(args[1:], "namespace") == namespace && flagValue(args[1:], "id") == id
}

// flagValue returns the value of flag name in args, given as "-name
// value", "--name value", "-name=value" or "--name=value", or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// waitGone waits up to d for pids (with their start times) to exit, and
// returns those that have not.
func waitGone(pids map[int]string, d time.Duration) map[int]string {
	for deadline := time.Now().Add(d); len(pids) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		pids = alive(pids)
	}
	return pids
}

// alive returns those of pids (with their start times) that are still the
// same process and have not exited (a zombie has).
func alive(pids map[int]string) map[int]string {
	out := map[int]string{}
	for pid, start := range pids {
		if sameProcess(pid, start) {
			out[pid] = start
		}
	}
	return out
}

// sameProcess reports whether pid is still the process that started at
// start, and has not exited (a zombie has).
func sameProcess(pid int, start string) bool {
	f, err := procStat(pid)
	return err == nil && f[19] == start && f[0] != "Z" && f[0] != "X"
}

// Package sweep knows what is ours in containerd and on the host, and
// deletes it: the labels that prove who owns a container, a snapshot or
// a run directory; the sweep of what servers that are gone left behind;
// the deletes that failed, tried again until they succeed; and the shims
// containerd left running. It knows nothing of how a sandbox runs, of
// languages or of MCP.
package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"code-sandbox-mcp/exec/internal/workspace"
)

// Labels on every container and snapshot we create. User input never sets
// a label: all of them come from here.
const (
	labelPrefix = "code-sandbox-mcp/"
	// LabelInstance names the server instance that owns the object.
	LabelInstance = labelPrefix + "instance"
	// LabelRun is the run's id, which is also the container's id.
	LabelRun = labelPrefix + "run"
	// LabelLanguage is the language of the run.
	LabelLanguage = labelPrefix + "language"
	// LabelDeadline is when the run is over for sure (RFC 3339): past it,
	// anyone may reap the object.
	LabelDeadline = labelPrefix + "deadline"
	// LabelOwner identifies the owning process: "boot-id/pid-ns/pid/start".
	LabelOwner = labelPrefix + "owner"
)

// IDPrefix starts the id of every container, snapshot and run directory we
// create.
const IDPrefix = "csm-"

// NewID returns a fresh id for a sandbox: its container's, its snapshot's
// and its run directory's.
func NewID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return IDPrefix + hex.EncodeToString(b)
}

// sweepTimeout bounds one sweep.
const sweepTimeout = 2 * time.Minute

// CleanupGrace is added to a run's timeout to give its deadline: the time
// a live server needs at most to kill, collect and delete.
const CleanupGrace = 2 * time.Minute

// Owner identifies a server process, so that a later server can tell a
// crashed owner from a live one and two live servers leave each other's
// runs alone.
type Owner struct {
	instance string // random, unique per server
	boot     string // /proc/sys/kernel/random/boot_id
	pidNS    string // the pid namespace, as /proc/self/ns/pid reads
	pid      int
	start    string // the process's start time in clock ticks since boot
}

// Self identifies this process, with a fresh instance id.
func Self() (Owner, error) {
	var o Owner
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return o, err
	}
	o.instance = hex.EncodeToString(b)
	o.pid = os.Getpid()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return o, fmt.Errorf("read boot id: %w", err)
	}
	o.boot = strings.TrimSpace(string(boot))
	if o.pidNS, err = os.Readlink("/proc/self/ns/pid"); err != nil {
		return o, fmt.Errorf("read pid namespace: %w", err)
	}
	if o.start, err = startTime(o.pid); err != nil {
		return o, err
	}
	return o, nil
}

// String names the owner as a uid claim file does: its pid and instance.
func (o Owner) String() string {
	return fmt.Sprintf("pid %d instance %s", o.pid, o.instance)
}

// Label is the owner's LabelOwner value.
func (o Owner) Label() string {
	return strings.Join([]string{o.boot, o.pidNS, strconv.Itoa(o.pid), o.start}, "/")
}

// startTime reads field 22 of /proc/PID/stat: when the process started.
func startTime(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil {
		return "", err
	}
	return f[19], nil
}

// procStat returns the fields of /proc/PID/stat from the third (the
// state) on: at least 20 of them.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces and parentheses; fields
	// after it start past the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return f, nil
}

// orphaned reports whether an object with these labels may be reaped by
// server me at time now: it is not me's, and either its deadline has passed
// or its owner is a process of this boot and pid namespace that is gone.
func orphaned(labels map[string]string, me Owner, now time.Time) bool {
	if labels[LabelInstance] == me.instance {
		return false
	}
	if d, err := time.Parse(time.RFC3339, labels[LabelDeadline]); err == nil && now.After(d) {
		return true
	}
	parts := strings.Split(labels[LabelOwner], "/")
	if len(parts) != 4 || parts[0] != me.boot || parts[1] != me.pidNS {
		// Another boot's objects are orphans; another namespace's owner
		// cannot be checked, so only its deadline counts.
		return len(parts) == 4 && parts[0] != me.boot
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil {
		return false
	}
	start, err := startTime(pid)
	return err != nil || start != parts[3]
}

// Labels are the labels of run id's container, snapshot and run
// directory: the language it runs, and who owns it until deadline.
func (o Owner) Labels(id, language string, deadline time.Time) map[string]string {
	return map[string]string{
		LabelInstance: o.instance,
		LabelOwner:    o.Label(),
		LabelRun:      id,
		LabelLanguage: language,
		LabelDeadline: deadline.UTC().Format(time.RFC3339),
	}
}

// Sweep deletes what servers that are gone left behind in our namespace:
// tasks, containers with their snapshots, stray snapshots, and program
// directories. Live runs, ours or another server's, are left alone. It
// returns how many containers it reaped.
func (r *Reaper) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(ctx, r.Namespace), sweepTimeout)
	defer cancel()
	now := time.Now()
	cs, err := r.Client.Containers(ctx, fmt.Sprintf("labels.%q", LabelInstance))
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	reaped := 0
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil {
			if !errdefs.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		if !orphaned(labels, r.Owner, now) {
			continue
		}
		r.Log.Info("reaping orphaned sandbox", "container", c.ID(), "owner", labels[LabelOwner])
		var uid uint32
		if spec, err := c.Spec(ctx); err == nil && spec.Process != nil {
			uid = spec.Process.User.UID
		}
		if err := Delete(ctx, c); err != nil {
			errs = append(errs, err)
			continue
		}
		// Its owner may have died while the task was being created.
		r.StopLeftShims(c.ID())
		workspace.RemoveRunDir(filepath.Join(r.StateDir, c.ID()))
		// Its processes are gone: its uid's claim, left by its dead
		// owner, need not be checked against the host's processes.
		r.UIDs.ClearStale(uid)
		reaped++
	}
	if err := r.sweepSnapshots(ctx, now); err != nil {
		errs = append(errs, err)
	}
	r.sweepDirs(ctx, now)
	return reaped, errors.Join(errs...)
}

// sweepSnapshots removes snapshots of ours whose container is gone.
func (r *Reaper) sweepSnapshots(ctx context.Context, now time.Time) error {
	sn := r.Client.SnapshotService(r.Snapshotter)
	var stale []string
	err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Labels[LabelInstance] != "" && orphaned(info.Labels, r.Owner, now) {
			stale = append(stale, info.Name)
		}
		return nil
	}, fmt.Sprintf("labels.%q", LabelInstance))
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	var errs []error
	for _, key := range stale {
		if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove snapshot %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// ownerFile, in a run directory, holds the labels of the run's container
// as JSON: the proof of who owns the directory. The state directory may be
// shared by servers of other namespaces or daemons, whose containers a
// sweep cannot see.
const ownerFile = "owner.json"

// WriteOwner writes labels to run directory dir, as the proof of who owns
// it that a sweep reads.
func WriteOwner(dir string, labels map[string]string) error {
	b, err := json.Marshal(labels)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), b, 0o600)
}

// sweepDirs removes the run directories that the owner named in their
// ownerFile left behind. A directory without one (a server before that
// file, or one caught between its mkdir and its write) is removed only if
// it is older than any run could be while being set up and has no
// container in our namespace.
func (r *Reaper) sweepDirs(ctx context.Context, now time.Time) {
	entries, err := os.ReadDir(r.StateDir)
	if err != nil {
		return
	}
	for _, ent := range entries {
		if !strings.HasPrefix(ent.Name(), IDPrefix) {
			continue
		}
		dir := filepath.Join(r.StateDir, ent.Name())
		if b, err := os.ReadFile(filepath.Join(dir, ownerFile)); err == nil {
			var labels map[string]string
			if json.Unmarshal(b, &labels) == nil && orphaned(labels, r.Owner, now) {
				workspace.RemoveRunDir(dir)
			}
			continue
		}
		info, err := ent.Info()
		if err != nil || now.Sub(info.ModTime()) < time.Minute {
			continue
		}
		if _, err := r.Client.LoadContainer(ctx, ent.Name()); errdefs.IsNotFound(err) {
			workspace.RemoveRunDir(dir)
		}
	}
}

// Delete kills and deletes a container's task, then the container
// with its snapshot. What is already gone counts as deleted.
func Delete(ctx context.Context, c containerd.Container) error {
	if t, err := c.Task(ctx, nil); err == nil {
		if _, err := t.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task %s: %w", c.ID(), err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("load task %s: %w", c.ID(), err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", c.ID(), err)
	}
	return nil
}

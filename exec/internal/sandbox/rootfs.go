package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	taskapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"golang.org/x/sys/unix"
)

// With the overlayfs snapshotter (containerd's default), a sandbox's root
// file system is an overlay whose upper directory lies on the file system
// of containerd's root. Unmounting an overlay syncs that whole file system
// (overlayfs's sync_fs), so without more, every sandbox's delete would wait
// for all the host's dirty data there to reach the disk: 1.1 s with 1.6 GB
// dirty on this project's test machine, 4.8 ms with the overlay's volatile
// option, and seconds on a busy host, past the bound on a server's
// shutdown. Nothing of the upper directory outlives the sandbox
// (its root file system is read-only, and the snapshot is removed with
// it), so it never needs the sync: its overlay is mounted volatile.

// VolatileOverlays reports whether the kernel takes overlayfs's volatile
// option (Linux 5.10 and later), by mounting an overlay with it on a small
// tmpfs of its own under dir. Any failure says no: the sandboxes then
// mount their overlays as containerd gives them.
func VolatileOverlays(dir string) (bool, error) {
	probe, err := os.MkdirTemp(dir, ".overlay-probe-")
	if err != nil {
		return false, err
	}
	defer os.Remove(probe)
	if err := unix.Mount("tmpfs", probe, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0700"); err != nil {
		return false, fmt.Errorf("mount a tmpfs on %s: %w", probe, err)
	}
	defer unix.Unmount(probe, unix.MNT_DETACH)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(probe, d), 0o700); err != nil {
			return false, err
		}
	}
	merged := filepath.Join(probe, "merged")
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,volatile", filepath.Join(probe, "lower"), filepath.Join(probe, "upper"), filepath.Join(probe, "work"))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return false, fmt.Errorf("mount an overlay with the volatile option: %w", err)
	}
	if err := unix.Unmount(merged, 0); err != nil {
		unix.Unmount(merged, unix.MNT_DETACH)
	}
	return true, nil
}

// withVolatile returns mounts with the volatile option added to each
// overlay that has an upper directory. Other mounts (a bind mount, another
// snapshotter's) are left as they are.
func withVolatile(mounts []mount.Mount) []mount.Mount {
	out := make([]mount.Mount, len(mounts))
	for i, m := range mounts {
		out[i] = m
		if m.Type != "overlay" || slices.Contains(m.Options, "volatile") ||
			!slices.ContainsFunc(m.Options, func(o string) bool { return strings.HasPrefix(o, "upperdir=") }) {
			continue
		}
		out[i].Options = append(slices.Clone(m.Options), "volatile")
	}
	return out
}

// newTask creates the container's task with ioCreate's streams and the
// root file system of its snapshot (key, in snapshotter), its overlay
// volatile if volatile is set. The client's NewTask cannot do the latter:
// it always adds the snapshot's mounts as they are. The task is then
// loaded with the same streams, as NewTask would have returned it.
func newTask(ctx context.Context, client *containerd.Client, c containerd.Container, snapshotter, key string, volatile bool, ioCreate cio.Creator) (_ containerd.Task, err error) {
	if !volatile {
		return c.NewTask(ctx, ioCreate)
	}
	mounts, err := client.SnapshotService(snapshotter).Mounts(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("mounts of snapshot %s: %w", key, err)
	}
	i, err := ioCreate(c.ID())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			i.Cancel()
			i.Close()
		}
	}()
	cfg := i.Config()
	req := &taskapi.CreateTaskRequest{
		ContainerID: c.ID(),
		Terminal:    cfg.Terminal,
		Stdin:       cfg.Stdin,
		Stdout:      cfg.Stdout,
		Stderr:      cfg.Stderr,
	}
	for _, m := range withVolatile(mounts) {
		req.Rootfs = append(req.Rootfs, &types.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
	}
	if _, err := client.TaskService().Create(ctx, req); err != nil {
		return nil, errgrpc.ToNative(err)
	}
	t, err := c.Task(ctx, func(*cio.FIFOSet) (cio.IO, error) { return i, nil })
	if err != nil {
		// Created, but not loaded: the caller's delete finds it through
		// the container.
		return nil, fmt.Errorf("load the task just created: %w", err)
	}
	if t.IO() == nil {
		// Loading attaches the streams only to a task whose state the
		// shim could tell.
		return nil, fmt.Errorf("the task just created is in an unknown state (its shim did not answer): %w", errdefs.ErrUnavailable)
	}
	return t, nil
}

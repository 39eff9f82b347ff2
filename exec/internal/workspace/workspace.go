// Package workspace owns a run's workspace: the tmpfs mounted in its run
// directory and bound into the sandbox as the program's working directory,
// the call's files written into it before the program, and the output
// files read out of it afterwards, from the host, without following any
// link. It checks the paths a caller gives. It knows nothing of
// containerd, sandboxes' lifetimes or MCP.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	sandboxoci "code-sandbox-mcp/oci"
)

// A run's workspace is a tmpfs of its own, mounted on the host in the
// run directory (Dir) and bound into the sandbox at
// oci.WorkspaceDir, its working directory. Being a file system of its
// own, it bounds what the program can store there (size= and nr_inodes=),
// its pages are charged to the memory cgroup of whoever writes them, and
// no hard link can lead out of it. The server writes the call's files
// into it before the program starts and reads the output files out of it
// once the program ended, from the host, without following any link; it
// is unmounted when the sandbox is destroyed.

// File is a file in a run's workspace.
type File struct {
	// Path is relative to the workspace, slash-separated and clean: no
	// ".", ".." or empty component, no leading slash, no NUL.
	Path string
	Data []byte
}

// Dir is the workspace's mount point in a run directory.
const Dir = "workspace"

// bytesPerInode sizes a workspace's inode table from its size: a 64 MiB
// workspace holds at most 16384 files and directories.
const bytesPerInode = 4096

// collectTimeout bounds the reading of a run's output files.
const collectTimeout = 10 * time.Second

// maxDepth bounds how deep the walk of a workspace goes.
const maxDepth = 64

// Mount mounts a tmpfs of size bytes at dir/workspace, owned by
// uid and gid uid, mode 0700, not executable, and keeps it from
// propagating to other mount namespaces.
func Mount(dir string, uid uint32, size int64) error {
	mp := filepath.Join(dir, Dir)
	if err := os.Mkdir(mp, 0o700); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	inodes := max(size/bytesPerInode, 64)
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", size, inodes, uid, uid)
	if err := unix.Mount("tmpfs", mp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount the workspace tmpfs at %s: %v: %w", mp, err, errdefs.ErrFailedPrecondition)
	}
	if err := unix.Mount("", mp, "", unix.MS_PRIVATE, ""); err != nil {
		unix.Unmount(mp, unix.MNT_DETACH)
		return fmt.Errorf("make the workspace at %s private: %v: %w", mp, err, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// Same checks that the sandbox whose first process is pid sees,
// at oci.WorkspaceDir, the workspace the server mounted at ws. It does not
// when the server and containerd live in different mount namespaces (a
// service unit with a private /run, say): runc then binds the empty
// directory under the mount, and the program's files would never reach
// the server.
func Same(pid uint32, ws string) error {
	var mine, theirs unix.Stat_t
	if err := unix.Stat(ws, &mine); err != nil {
		return fmt.Errorf("check the workspace: %w", err)
	}
	in := fmt.Sprintf("/proc/%d/root%s", pid, sandboxoci.WorkspaceDir)
	if err := unix.Stat(in, &theirs); err != nil {
		return fmt.Errorf("check the workspace in the sandbox: %w", err)
	}
	if mine.Dev != theirs.Dev || mine.Ino != theirs.Ino {
		return fmt.Errorf("the sandbox's %s is not the workspace the server mounted at %s: the server and containerd are in different mount namespaces (run the server in containerd's, the host's): %w",
			sandboxoci.WorkspaceDir, ws, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// RemoveRunDir unmounts a run directory's workspace and network
// namespace, where they are mounted, and removes the directory. A directory that was not empty when
// RemoveAll came to remove it (an entry appeared while it went: seen once
// in a full integration run, in a session's code/, cause unknown) is
// tried again a few times; if it still holds something, the error names
// what.
func RemoveRunDir(dir string) error {
	mp := filepath.Join(dir, Dir)
	if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount workspace %s: %w", mp, err)
	}
	// The mount of a sandbox's network namespace (see egress.NewNetns),
	// left where its server did not close it.
	if ns := filepath.Join(dir, "netns"); unix.Unmount(ns, unix.MNT_DETACH) == nil {
		os.Remove(ns)
	}
	var err error
	for i := range 5 {
		if err = os.RemoveAll(dir); err == nil || !errors.Is(err, unix.ENOTEMPTY) {
			return err
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir && len(left) < 10 {
			left = append(left, p)
		}
		return nil
	})
	return fmt.Errorf("%w; left: %q", err, left)
}

// CheckFile reports what is wrong with path as the path of a file in a
// workspace; nil if nothing is.
func CheckFile(p string) error {
	switch {
	case p == "":
		return errors.New("the path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("the path holds a NUL byte")
	case strings.HasPrefix(p, "/"):
		return errors.New("the path is absolute; give it relative to the workspace")
	case len(p) > 4096:
		return errors.New("the path is longer than 4096 bytes")
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return errors.New("the path has an empty component")
		case c == "." || c == "..":
			return fmt.Errorf("the path has a %q component", c)
		case len(c) > 255:
			return errors.New("a component of the path is longer than 255 bytes")
		}
	}
	return nil
}

// CheckFiles validates a request's files against the caps: each path,
// duplicates, a path that is also another's directory, the count and the
// total.
func CheckFiles(files []File, maxFiles int, maxBytes int64) error {
	if len(files) > maxFiles {
		return fmt.Errorf("%d files given, over the limit of %d: %w", len(files), maxFiles, errdefs.ErrInvalidArgument)
	}
	var total int64
	seen := map[string]bool{}
	for i, f := range files {
		if err := CheckFile(f.Path); err != nil {
			return fmt.Errorf("file %d (%q): %v: %w", i, f.Path, err, errdefs.ErrInvalidArgument)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %d (%q) is given twice: %w", i, f.Path, errdefs.ErrInvalidArgument)
		}
		seen[f.Path] = true
		total += int64(len(f.Data))
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("%q is a file and also the directory of %q: %w", d, f.Path, errdefs.ErrInvalidArgument)
			}
		}
	}
	if total > maxBytes {
		return fmt.Errorf("the files hold %d bytes, over the limit of %d: %w", total, maxBytes, errdefs.ErrInvalidArgument)
	}
	return nil
}

package workspace

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// WriteInputs writes files into the workspace at ws, owned by uid. os.Root
// keeps every write beneath ws. Before a one-shot run nothing is there yet;
// in a session, replace lets a file replace one of the same path that an
// earlier call left, whatever that was (a link is replaced, not followed),
// but not a directory.
func WriteInputs(ws string, files []File, uid uint32, replace bool) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	made := map[string]bool{}
	for _, f := range files {
		var dirs []string
		for d := path.Dir(f.Path); d != "." && !made[d]; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
		for _, d := range slices.Backward(dirs) {
			if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return inputError(f.Path, err)
			}
			if err := root.Lchown(d, int(uid), int(uid)); err != nil {
				return inputError(f.Path, err)
			}
			made[d] = true
		}
		if replace {
			if err := replaceable(root, f.Path); err != nil {
				return inputError(f.Path, err)
			}
		}
		w, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return inputError(f.Path, err)
		}
		_, err = w.Write(f.Data)
		if err == nil {
			err = w.Chown(int(uid), int(uid))
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return inputError(f.Path, err)
		}
	}
	return nil
}

// replaceable removes what is at p beneath root, unless it is a
// directory; nothing there is no error.
func replaceable(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("a directory of that name is in the way: %w", errdefs.ErrInvalidArgument)
	}
	return root.Remove(p)
}

// inputError is the error of an input file that could not be written;
// ENOSPC means the files do not fit in the workspace.
func inputError(p string, err error) error {
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("write %q to the workspace: the files do not fit in it: %w", p, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("write %q to the workspace: %w", p, err)
}

// inputSum is an input file's size and sha256 sum.
type inputSum struct {
	size int64
	sum  [sha256.Size]byte
}

// InputSums are a run's input files' sums, by path: a file still holding
// its input is not an output.
func InputSums(files []File) map[string]inputSum {
	m := make(map[string]inputSum, len(files))
	for _, f := range files {
		m[f.Path] = inputSum{int64(len(f.Data)), sha256.Sum256(f.Data)}
	}
	return m
}

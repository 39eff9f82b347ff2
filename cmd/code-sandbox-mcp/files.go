package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// fileUsage is how run's --file value splits, for its usage text.
const fileUsage = "copy a local file into the workspace (the program's working directory),\n" +
	"as `LOCAL[:PATH]`; PATH defaults to LOCAL's base name; repeatable. The value\n" +
	"splits at its last ':' when what precedes it is not empty and what follows is a\n" +
	"valid workspace path (relative, no empty, '.' or '..' component); otherwise it\n" +
	"is all LOCAL. So a LOCAL holding ':' takes an explicit PATH: --file a:b.csv:b.csv"

// splitFileFlag splits a --file value into the local file and its path in
// the workspace, as fileUsage says.
func splitFileFlag(v string) (local, p string, err error) {
	if i := strings.LastIndexByte(v, ':'); i > 0 && exec.CheckFile(v[i+1:]) == nil {
		return v[:i], v[i+1:], nil
	}
	if v == "" {
		return "", "", errors.New("the value is empty; want LOCAL[:PATH]")
	}
	p = filepath.Base(v)
	if err := exec.CheckFile(p); err != nil {
		return "", "", fmt.Errorf("%q is not a workspace path: %v; give one as LOCAL:PATH", p, err)
	}
	return v, p, nil
}

// readFileFlags reads the files of run's --file values. Together they may
// hold at most maxBytes, which bounds what is read (the executor checks
// the rest of the caps). Every error names the value it is about.
func readFileFlags(values []string, maxBytes int64) ([]exec.File, error) {
	var files []exec.File
	byPath := map[string]string{}
	left := maxBytes
	for _, v := range values {
		local, p, err := splitFileFlag(v)
		if err != nil {
			return nil, fmt.Errorf("--file %q: %v", v, err)
		}
		if prev, ok := byPath[p]; ok {
			return nil, fmt.Errorf("--file %q: workspace path %q is already given by --file %q", v, p, prev)
		}
		byPath[p] = v
		data, err := readLocal(local, left)
		switch {
		case errors.Is(err, errOverBytes):
			return nil, fmt.Errorf("--file %q: the files hold more than %s, the language's files_in_bytes", v, config.Size(maxBytes))
		case err != nil:
			return nil, fmt.Errorf("--file %q: %v%s", v, err, splitHint(v, local, err))
		}
		left -= int64(len(data))
		files = append(files, exec.File{Path: p, Data: data})
	}
	return files, nil
}

// errOverBytes is readLocal's error for a file over its limit.
var errOverBytes = errors.New("over the limit")

// readLocal reads the local file name, which must not be a directory, and
// at most limit bytes of it: a FIFO, such as a shell's <(command), is
// read too.
func readLocal(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory; --file takes a file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, max(limit, 0)+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errOverBytes
	}
	return data, nil
}

// splitHint explains how the value v holding a ':' split, when reading
// its LOCAL part, local, failed with err: why it did not split, or that
// it did though the whole value names a file.
func splitHint(v, local string, err error) string {
	i := strings.LastIndexByte(v, ':')
	switch {
	case i <= 0:
		return ""
	case local == v:
		return fmt.Sprintf(" (the value is all LOCAL: %q after its last ':' is not a workspace path: %v)", v[i+1:], exec.CheckFile(v[i+1:]))
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(v); serr == nil {
			return fmt.Sprintf(" (the value split at its last ':'; to pass the file %s, give it as %s:PATH)", v, v)
		}
	}
	return ""
}

// openOut creates the --out directory if it is missing and opens it as a
// root, before the run: a directory that cannot be written to is known
// before the program's outputs would be lost.
func openOut(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

// saveFiles writes files beneath root at their paths, creating the
// directories on the way, and returns how many it wrote. os.Root keeps
// every write beneath root whatever symbolic links it holds: one that
// leads out of it is an error. Each file is written to a new temporary
// file, then renamed over its path: it is replaced whole or not at all,
// and neither a symbolic link nor a hard link at its path is written
// through. Each file that cannot be written is an error of its own, and
// the rest are still written.
func saveFiles(root *os.Root, files []exec.File) (int, []error) {
	var errs []error
	saved := 0
	for _, f := range files {
		if err := saveFile(root, f); err != nil {
			errs = append(errs, fmt.Errorf("save %q: %w", f.Path, err))
			continue
		}
		saved++
	}
	return saved, errs
}

// saveFile writes one file beneath root, as saveFiles says.
func saveFile(root *os.Root, f exec.File) error {
	if err := exec.CheckFile(f.Path); err != nil {
		return err
	}
	if d := path.Dir(f.Path); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	b := make([]byte, 8)
	rand.Read(b)
	tmp := path.Join(path.Dir(f.Path), ".code-sandbox-mcp-"+hex.EncodeToString(b)+".tmp")
	w, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = w.Write(f.Data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, f.Path)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

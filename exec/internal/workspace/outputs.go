package workspace

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// OutputCaps bound what CollectOutputs returns.
type OutputCaps struct {
	Files int   // how many files
	Bytes int64 // their total size
}

// Baseline is what a workspace held before a program ran: the files the
// call wrote in (inputs), and in a session every file as it was before the
// cell (stamps). A file found as it was is not an output.
type Baseline struct {
	Inputs map[string]inputSum
	Stamps map[string]stamp
}

// stamp tells a file apart from itself changed: a write changes its
// ctime, which a program cannot set back.
type stamp struct {
	ino, size    int64
	mtime, ctime unix.Timespec
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// stamps records every regular file beneath the workspace at ws, as
// CollectOutputs walks it.
func Stamps(ws string) (map[string]stamp, error) {
	root, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer unix.Close(root)
	m := map[string]stamp{}
	err = walk(root, "", 0, time.Now().Add(collectTimeout), func(p string, ok bool) {
		if !ok {
			return
		}
		fd, err := openBeneath(root, p, unix.O_PATH)
		if err != nil {
			return
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			m[p] = stampOf(&st)
		}
		unix.Close(fd)
	})
	return m, err
}

// CollectOutputs reads the output files of the workspace at ws: every
// regular file that is not as it was before the program (base), in path
// order, within caps; dropped counts those left out. It never follows a
// symbolic link, opens nothing but regular files (a FIFO cannot block it),
// reads no file past its share of the caps, and stops at collectTimeout.
func CollectOutputs(ws string, base Baseline, caps OutputCaps) (files []File, dropped int, err error) {
	deadline := time.Now().Add(collectTimeout)
	root, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open workspace: %w", err)
	}
	defer unix.Close(root)
	var found []string
	if err := walk(root, "", 0, deadline, func(p string, ok bool) {
		if !ok {
			dropped++
			return
		}
		found = append(found, p)
	}); err != nil {
		return nil, 0, err
	}
	slices.SortFunc(found, pathOrder)
	var total int64
	for _, p := range found {
		if time.Now().After(deadline) {
			dropped++
			continue
		}
		data, got, err := readOutput(root, p, base, caps.Bytes-total)
		switch {
		case err != nil:
			return nil, 0, fmt.Errorf("read output %q: %w", p, err)
		case got == notOutput:
			continue
		case got == overCap || len(files) >= caps.Files:
			dropped++
			continue
		}
		total += int64(len(data))
		files = append(files, File{Path: p, Data: data})
	}
	return files, dropped, nil
}

// walk calls found with the path of every regular file beneath the
// directory dir (at path prefix), and with ok false for each file or
// directory whose name cannot be returned (not UTF-8, or holding a control
// character) or that lies deeper than maxDepth. Symbolic links, FIFOs, sockets and
// devices are not files to it.
func walk(dir int, prefix string, depth int, deadline time.Time, found func(p string, ok bool)) error {
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if time.Now().After(deadline) {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since
		}
		p := path.Join(prefix, name)
		mode := st.Mode & unix.S_IFMT
		switch {
		case mode != unix.S_IFREG && mode != unix.S_IFDIR:
		case !printable(name) || depth >= maxDepth:
			found(p, false) // a directory counts once, whatever it holds
		case mode == unix.S_IFREG:
			found(p, true)
		default:
			sub, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				continue // replaced by something else since
			}
			err = walk(sub, p, depth+1, deadline, found)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// readDirNames lists the names in the directory fd, without "." and "..".
func readDirNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// printable reports whether a file name can be returned: valid UTF-8
// without control characters.
func printable(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsFunc(name, unicode.IsControl)
}

// readResult says what readOutput found.
type readResult int

const (
	isOutput  readResult = iota // an output file, read
	notOutput                   // an input left as it was, or no longer a regular file
	overCap                     // an output larger than what was left of the cap
)

// readOutput reads the file at p beneath root, if it is still a regular
// file, and at most limit bytes of it, with readSized: what it returns
// holds exactly the bytes read.
func readOutput(root int, p string, base Baseline, limit int64) ([]byte, readResult, error) {
	fd, err := openBeneath(root, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, notOutput, nil // replaced by a link, or removed, since the walk
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, notOutput, nil
	}
	if was, ok := base.Stamps[p]; ok && was == stampOf(&st) {
		return nil, notOutput, nil
	}
	// An input of its old size is read to compare it; it is at most
	// files_in_bytes.
	in, isInput := base.Inputs[p]
	isInput = isInput && st.Size == in.size
	if !isInput && st.Size > limit {
		return nil, overCap, nil
	}
	readLimit := max(limit, 0)
	if isInput {
		readLimit = max(readLimit, in.size)
	}
	data, over, err := readSized(f, st.Size, readLimit)
	if err != nil {
		return nil, 0, err
	}
	if over {
		return nil, overCap, nil // grew past its share while it was read
	}
	if isInput && int64(len(data)) == in.size && sha256.Sum256(data) == in.sum {
		return nil, notOutput, nil
	}
	if int64(len(data)) > limit {
		return nil, overCap, nil
	}
	return data, isOutput, nil
}

// growthReads bounds how many times readSized reads on in a file that
// grew while it was read.
const growthReads = 3

// readSized reads the open file f, which held size bytes when it was
// stat'ed, from its offset into a slice of exactly the bytes read: its
// capacity is its length, and never nil. over says the file holds more
// than limit bytes, none of which are returned then.
//
// What the server keeps of an output file is this slice, and what the
// file store counts is its length, so the two must be one: a buffer
// regrown as it is read (bytes.Buffer doubles it), or sized at the stat
// and kept whole for a file that a session's background process
// truncated since, would hold memory that nothing counts. So a file is
// read into a slice of its stat size, and one that came up short is
// copied into a slice of what was read, the big one left to the
// collector. A file longer than its stat size grew while it was read,
// which only a process the program left running can do (a session's, in
// the background): readSized stats it again and reads on into a slice of
// its new size, at most growthReads times; a file still growing then is
// returned as far as that read went, which is the file as the server
// read it, the only content a file still being written has.
func readSized(f *os.File, size, limit int64) (data []byte, over bool, err error) {
	if size > limit {
		return nil, true, nil
	}
	data = make([]byte, size)
	var read int64
	for round := 0; ; round++ {
		n, err := io.ReadFull(f, data[read:])
		read += int64(n)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			// Truncated since the stat: keep only what was read.
			short := make([]byte, read)
			copy(short, data)
			return short, false, nil
		case err != nil:
			return nil, false, err
		}
		var one [1]byte
		switch n, err := f.Read(one[:]); {
		case n == 0 && err != nil && err != io.EOF:
			return nil, false, err
		case n == 0:
			return data, false, nil
		}
		// It grew since the stat.
		if round == growthReads {
			return data, false, nil
		}
		fi, err := f.Stat()
		if err != nil {
			return nil, false, err
		}
		size = max(fi.Size(), read+1)
		if size > limit {
			return nil, true, nil
		}
		grown := make([]byte, size)
		copy(grown, data)
		grown[read] = one[0]
		data, read = grown, read+1
	}
}

// openBeneath opens name beneath the directory dir with flags, following
// no symbolic link, magic link or mount point on the way: with openat2
// and RESOLVE_BENEATH where the kernel has it (5.6 and later), else one
// component at a time with O_NOFOLLOW.
func openBeneath(dir int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != unix.ENOSYS {
		return fd, err
	}
	parts := strings.Split(name, "/")
	cur := dir
	for i, c := range parts {
		if c == "" || c == "." || c == ".." {
			if cur != dir {
				unix.Close(cur)
			}
			return -1, unix.EINVAL
		}
		fl := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			fl = flags
		}
		next, err := unix.Openat(cur, c, fl, 0)
		if cur != dir {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// naturalCompare orders paths as people do: runs of digits compare as
// numbers, so figure-2.png comes before figure-10.png.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmpInt(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

// pathOrder is naturalCompare, with plain byte order to break its ties
// ("a01" and "a1").
func pathOrder(a, b string) int {
	if c := naturalCompare(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

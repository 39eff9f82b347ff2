// Package uid claims host uids for sandboxes, one each, host-wide: a
// claim is a locked file in a directory every server and command on the
// host shares, and a uid some host process runs as is never handed out.
// It knows nothing of containerd, sandboxes or MCP.
package uid

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
)

// Claims hands out the host uids of a range, one to each live sandbox, the
// gid of the same number with it. The kernel counts some limits per uid
// across the whole host (inotify instances, queued signals, message
// queues, pipe buffers, processes), so a uid of its own keeps a run from
// taking them from any other.
//
// A uid is claimed host-wide: the claim is a file named after it in dir,
// locked (flock) by the claimant for as long as its sandbox exists, and
// removed once the sandbox is deleted. Every server and CLI command that
// uses the same dir therefore never shares a uid with another, whatever
// their ranges. A file left by a process that died (its lock went with it)
// may name a uid whose sandbox still runs, an orphan not yet swept: such a
// uid is taken only if no process on the host runs as it.
type Claims struct {
	r   config.UIDRange
	dir string
	me  string // what a claim file says of its holder

	mu   sync.Mutex
	held map[uint32]*os.File // our claims, locked
	busy map[uint32]bool     // uids a host process ran as, not ours
	next uint32              // offset in r where the next search starts
}

// New prepares claims of r in dir. It refuses a range that holds a
// host account's uid or group's gid, or overlaps a subordinate id range
// of /etc/subuid or /etc/subgid (rootless containers run as those): a
// lock directory cannot keep them apart from the sandboxes. uids a host
// process runs as now are never handed out.
func New(r config.UIDRange, dir, me string) (*Claims, error) {
	if r.First == 0 || r.Last < r.First {
		return nil, fmt.Errorf("no uid range configured ([limits] uid_range): %w", errdefs.ErrInvalidArgument)
	}
	if dir == "" {
		return nil, fmt.Errorf("no directory for uid claims configured ([sandbox] uid_lock_dir): %w", errdefs.ErrInvalidArgument)
	}
	if err := checkHostIDs(r, "/etc"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the uid claims directory: %w", err)
	}
	busy, err := processUIDs(r)
	if err != nil {
		return nil, err
	}
	return &Claims{
		r:    r,
		dir:  dir,
		me:   me,
		held: map[uint32]*os.File{},
		busy: busy,
		// Servers sharing a range start their searches apart.
		next: rand.Uint32N(uint32(r.Size())),
	}, nil
}

// errClaimed is lock's answer for a uid another live claimant holds.
var errClaimed = errors.New("uid claimed")

// ErrNoneFree marks the error of a run that found no free uid in the range:
// more sandboxes live at once than [limits] uid_range holds, or its uids
// used by host processes. It is an errdefs.ErrResourceExhausted.
var ErrNoneFree = fmt.Errorf("no free uid: %w", errdefs.ErrResourceExhausted)

// Claim returns a uid no live sandbox holds and claims it for the
// sandbox called holder, until release.
func (u *Claims) Claim(holder string) (uint32, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	size := uint32(u.r.Size())
	for i := uint32(0); i < size; i++ {
		off := (u.next + i) % size
		uid := u.r.First + off
		if u.held[uid] != nil || u.busy[uid] {
			continue
		}
		f, stale, err := u.lock(uid)
		if errors.Is(err, errClaimed) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if stale {
			// Its last holder died without deleting its sandbox.
			running, err := processUIDs(config.UIDRange{First: uid, Last: uid})
			if err != nil || len(running) > 0 {
				f.Close()
				u.busy[uid] = true
				continue
			}
		}
		if err := record(f, u.me+" run "+holder); err != nil {
			f.Close()
			return 0, fmt.Errorf("claim uid %d in %s: %w", uid, u.dir, err)
		}
		u.held[uid] = f
		u.next = (off + 1) % size
		return uid, nil
	}
	return 0, fmt.Errorf("every uid of uid_range %s is held by a live sandbox or a host process (%d are this server's): widen [limits] uid_range: %w", u.r, len(u.held), ErrNoneFree)
}

// lock opens and locks uid's claim file. stale is true if the file holds
// the record of an earlier claimant that is gone.
func (u *Claims) lock(uid uint32) (f *os.File, stale bool, err error) {
	path := filepath.Join(u.dir, strconv.FormatUint(uint64(uid), 10))
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("claim uid %d: %w", uid, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, false, errClaimed
		}
		return nil, false, fmt.Errorf("claim uid %d: lock %s: %w", uid, path, err)
	}
	// The claimant before us may have removed the file between our open
	// and our lock: the lock is then on a file nobody else can see.
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		f.Close()
		return nil, false, errClaimed
	}
	return f, a.Size > 0, nil
}

// record replaces the claim file's content with who holds it, for a
// person reading the directory.
func record(f *os.File, who string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(who+"\n"), 0)
	return err
}

// Release gives uid back, once its sandbox is deleted: its claim file
// is removed while still locked, then unlocked.
func (u *Claims) Release(uid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := u.held[uid]
	if f == nil {
		return
	}
	delete(u.held, uid)
	os.Remove(f.Name())
	f.Close()
}

// ClearStale removes the claim file of uid if nobody holds it: the sweep
// calls it once it has deleted an orphan that ran as uid, so that the
// next claim of uid need not look for its processes.
func (u *Claims) ClearStale(uid uint32) {
	if !u.r.Contains(uid) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held[uid] != nil {
		return
	}
	f, _, err := u.lock(uid)
	if err != nil {
		return
	}
	os.Remove(f.Name())
	f.Close()
	delete(u.busy, uid)
}

// Abandon lets go of the claims of sandboxes that are not deleted, at
// Close: their files stay, so that a later claimant checks that no
// process runs as their uid before it takes one.
func (u *Claims) Abandon() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for uid, f := range u.held {
		f.Close()
		delete(u.held, uid)
	}
}

// processUIDs returns the uids of r that a process on the host runs as
// (its real, effective, saved or file-system uid), as far as this pid
// namespace's /proc shows.
func processUIDs(r config.UIDRange) (map[uint32]bool, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := map[uint32]bool{}
	for _, e := range ents {
		if c := e.Name()[0]; c < '1' || c > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone
		}
		_, rest, ok := strings.Cut(string(b), "\nUid:")
		if !ok {
			continue
		}
		line, _, _ := strings.Cut(rest, "\n")
		for _, f := range strings.Fields(line) {
			if id, err := strconv.ParseUint(f, 10, 32); err == nil && r.Contains(uint32(id)) {
				out[uint32(id)] = true
			}
		}
	}
	return out, nil
}

// checkHostIDs refuses a range that holds an id of etc's passwd or group,
// or overlaps a range of its subuid or subgid.
func checkHostIDs(r config.UIDRange, etc string) error {
	var found []string
	for _, db := range []string{etc + "/passwd", etc + "/group"} {
		err := eachLine(db, func(f []string) {
			if len(f) < 3 {
				return
			}
			if id, err := strconv.ParseUint(f[2], 10, 32); err == nil && r.Contains(uint32(id)) {
				found = append(found, fmt.Sprintf("%s has %s with id %d", db, f[0], id))
			}
		})
		if err != nil {
			return err
		}
	}
	for _, db := range []string{etc + "/subuid", etc + "/subgid"} {
		err := eachLine(db, func(f []string) {
			if len(f) < 3 {
				return
			}
			first, err1 := strconv.ParseUint(f[1], 10, 32)
			n, err2 := strconv.ParseUint(f[2], 10, 32)
			if err1 != nil || err2 != nil || n == 0 || first+n-1 > 1<<32-1 {
				return
			}
			sub := config.UIDRange{First: uint32(first), Last: uint32(first + n - 1)}
			if r.Overlaps(sub) {
				found = append(found, fmt.Sprintf("%s gives %s the ids %s for rootless containers", db, f[0], sub))
			}
		})
		if err != nil {
			return err
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("[limits] uid_range %s holds ids the host already uses, which would share per-user kernel limits (and files) with the sandboxes: %s; choose a range clear of them: %w",
			r, strings.Join(found, "; "), errdefs.ErrInvalidArgument)
	}
	return nil
}

// eachLine calls fn with the ':'-separated fields of every line of an
// /etc database; a database that does not exist has no lines.
func eachLine(path string, fn func(fields []string)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fn(strings.Split(line, ":"))
	}
	return sc.Err()
}

// Status checks range r as a server would at its start (clear of the
// host's accounts and subordinate ranges, its claims directory usable),
// and counts the uids of r that live sandboxes hold in dir now, this
// host's servers and commands together.
func Status(r config.UIDRange, dir string) (held int, err error) {
	if err := checkHostIDs(r, "/etc"); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("create the uid claims directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read the uid claims directory: %w", err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || !r.Contains(uint32(id)) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == unix.EWOULDBLOCK {
			held++
		}
		f.Close()
	}
	return held, nil
}

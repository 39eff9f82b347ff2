package watch

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// OOMs keeps, for each live sandbox on cgroup v2, the last count of
// OOM kills its memory cgroup's memory.events gave, read again whenever
// the kernel says the file changed (one inotify instance for the whole
// executor: root's inotify instances are a budget of the whole host). The
// kernel bumps that count when it sends its kill, before the process is
// gone; under the systemd cgroup driver systemd removes a scope's cgroup
// as soon as its last process is, so after the exit the count may be gone
// with it. On cgroup v1, memory.oom_control tells of nothing through
// inotify; there the count is read once, at tracking, and after the exit.
type OOMs struct {
	f       *os.File // nil where inotify is not available
	mu      sync.Mutex
	byWD    map[int32]*OOMCount
	stopped chan struct{}
}

// OOMCount is one sandbox's count of OOM kills, as last read.
type OOMCount struct {
	dir       string
	wd        int32 // -1 if not watched
	last      atomic.Uint64
	read      atomic.Bool // last holds a count read
	rereading atomic.Bool // a reread (see rereadAfter) is under way
}

// rereadAfter are the delays, one after the other, after the kernel said
// memory.events changed, at which the count is read again. The kernel
// sends one word for the changes of 10 ms: a change that follows another
// within that is told at its end, by a timer that the cgroup's removal
// cancels. Under an OOM the "max" and "oom" events come just before the
// "oom_kill" one, so the word on the kill is the deferred one, and under
// the systemd driver the cgroup may be gone before it comes: the count
// is read a moment after each word instead of waiting for the next. The
// program killed has its memory to free and the init its wake-up, reap
// and exit before the cgroup can go.
var rereadAfter = []time.Duration{time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond}

func NewOOMs(ctx context.Context, log *slog.Logger) *OOMs {
	w := &OOMs{byWD: map[int32]*OOMCount{}, stopped: make(chan struct{})}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		log.Info("inotify is not available: an OOM kill is told from containerd's event and the count read after the exit only", "err", err)
		close(w.stopped)
		return w
	}
	w.f = os.NewFile(uintptr(fd), "inotify-memory-events")
	go func() {
		<-ctx.Done()
		w.f.Close()
	}()
	go w.follow()
	return w
}

func (w *OOMs) follow() {
	defer close(w.stopped)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			length := binary.NativeEndian.Uint32(buf[off+12:])
			off += unix.SizeofInotifyEvent + int(length)
			w.mu.Lock()
			c := w.byWD[wd]
			w.mu.Unlock()
			if c != nil {
				c.update()
				c.reread()
			}
		}
	}
}

// Track starts following the memory cgroup at dir ("" for none) and reads
// its count once.
func (w *OOMs) Track(dir string) *OOMCount {
	c := &OOMCount{dir: dir, wd: -1}
	if dir == "" {
		return c
	}
	w.withFD(func(fd int) {
		if wd, err := unix.InotifyAddWatch(fd, filepath.Join(dir, "memory.events"), unix.IN_MODIFY); err == nil {
			c.wd = int32(wd)
			w.mu.Lock()
			w.byWD[c.wd] = c
			w.mu.Unlock()
		}
	})
	c.update()
	return c
}

// Untrack stops following c.
func (w *OOMs) Untrack(c *OOMCount) {
	if c == nil || c.wd < 0 {
		return
	}
	w.mu.Lock()
	delete(w.byWD, c.wd)
	w.mu.Unlock()
	// Fails harmlessly where the cgroup, and with it the watch, is gone.
	w.withFD(func(fd int) { unix.InotifyRmWatch(fd, uint32(c.wd)) })
}

// withFD calls fn with the inotify descriptor, unless there is none or it
// is closed; the descriptor stays open until fn returns. (File.Fd would
// make it blocking, and a Read blocked in it could then not be ended.)
func (w *OOMs) withFD(fn func(fd int)) {
	if w.f == nil {
		return
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { fn(int(fd)) })
}

func (w *OOMs) Wait() { <-w.stopped }

// update reads the count again, keeping the highest seen.
func (c *OOMCount) update() {
	n, ok := oomKills(c.dir)
	if !ok {
		return
	}
	for {
		old := c.last.Load()
		if n <= old && c.read.Load() {
			return
		}
		if c.last.CompareAndSwap(old, max(old, n)) {
			c.read.Store(true)
			return
		}
	}
}

// reread reads the count again after each of rereadAfter, unless that is
// under way already.
func (c *OOMCount) reread() {
	if !c.rereading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.rereading.Store(false)
		for _, d := range rereadAfter {
			time.Sleep(d)
			c.update()
		}
	}()
}

// Kills returns the cgroup's count of OOM kills: read now if the cgroup
// is still there, else the last count read; ok is false if none ever was.
func (c *OOMCount) Kills() (uint64, bool) {
	if c == nil {
		return 0, false
	}
	c.update()
	return c.last.Load(), c.read.Load()
}

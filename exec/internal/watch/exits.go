package watch

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's process events connector (linux/cn_proc.h, connector.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventFork     = 0x00000001
	procEventExec     = 0x00000002
	procEventExit     = 0x80000000
	nlmsgHdrLen       = 16
	cnMsgLen          = 20
	// exitEventOffset is where a proc_event's data starts in a
	// message: after nlmsghdr, cn_msg, and what, cpu and timestamp_ns.
	exitEventOffset = nlmsgHdrLen + cnMsgLen + 16
)

// exitInfoGrace bounds the wait for the kernel's word on how a process
// ended, once containerd reported its exit: the kernel sends it first, at
// the process's exit, but our reader may not have read it yet.
const exitInfoGrace = 200 * time.Millisecond

// Exits learns from the kernel's process events connector how the
// processes it tracks ended: by a signal, or by exit with a status.
// containerd's exit status cannot tell a program killed by signal N from
// one that called exit(128+N); the kernel's wait status can. It needs
// CAP_NET_ADMIN in the host's network namespace (the server runs as root
// for containerd's socket anyway). Without it, or when the kernel dropped
// events, it knows nothing of a process, and says so.
type Exits struct {
	f       *os.File // nil if the connector is not available
	mu      sync.Mutex
	tracked map[uint32]*Exit // by host pid
	ended   bool             // the watch stopped reading: nothing more is heard
	stopped chan struct{}
}

// Exit is how one tracked process ended; done is closed once status
// is set, or once the watch knows it cannot tell.
type Exit struct {
	done   chan struct{}
	known  bool
	status syscall.WaitStatus
	execs  int    // programs the process exec'd while tracked, until done
	since  uint64 // when tracking began, CLOCK_MONOTONIC ns, as events are stamped
	// child is the first process it forked while tracked, tracked too
	// (under an init, the program); nil before that fork, and always for
	// a child itself (isChild).
	child   atomic.Pointer[Exit]
	isChild bool
	pid     uint32 // its host pid
	// forked is closed once child is set; execd once the process exec'd
	// a program while tracked. Neither is closed where the kernel's word
	// is missing: a waiter waits on done too.
	forked chan struct{}
	execd  chan struct{}
}

func newExit(since uint64, pid uint32) *Exit {
	return &Exit{done: make(chan struct{}), forked: make(chan struct{}), execd: make(chan struct{}), since: since, pid: pid}
}

func NewExits(ctx context.Context, log *slog.Logger) *Exits {
	w := &Exits{tracked: map[uint32]*Exit{}, stopped: make(chan struct{})}
	f, err := listenProcEvents()
	if err != nil {
		log.Info("the kernel's process events are not available: a program's exit status of 129 to 192 is not told apart from a signal", "err", err)
		close(w.stopped)
		return w
	}
	w.f = f
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go w.read(log)
	return w
}

// listenProcEvents opens a netlink socket on the connector and asks for
// the process events.
func listenProcEvents() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, err
	}
	// Room for bursts of exits on a busy host; as root the limit is ours
	// to raise, elsewhere the default stays.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le := binary.NativeEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	le.PutUint32(msg[16:], cnIdxProc)
	le.PutUint32(msg[20:], cnValProc)
	le.PutUint16(msg[32:], 4)
	le.PutUint32(msg[36:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "netlink-proc-connector"), nil
}

func (w *Exits) read(log *slog.Logger) {
	defer close(w.stopped)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			// Events were dropped: what is tracked may have ended
			// unseen.
			log.Debug("the kernel dropped process events")
			w.forget()
			continue
		}
		if err != nil {
			w.mu.Lock()
			w.ended = true
			w.mu.Unlock()
			w.forget()
			return
		}
		w.parse(buf[:n])
	}
}

// parse reads the exit events in one datagram.
func (w *Exits) parse(b []byte) {
	le := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		l := int(le.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			return
		}
		m := b[:l]
		b = b[(l+3)&^3:]
		if len(m) < exitEventOffset+12 {
			continue
		}
		what := le.Uint32(m[exitEventOffset-16:])
		if what == procEventFork && len(m) >= exitEventOffset+16 {
			w.forked(le.Uint32(m[exitEventOffset+4:]), le.Uint32(m[exitEventOffset+8:]), le.Uint32(m[exitEventOffset+12:]))
			continue
		}
		if what != procEventExit && what != procEventExec {
			continue
		}
		pid, tgid := le.Uint32(m[exitEventOffset:]), le.Uint32(m[exitEventOffset+4:])
		if pid != tgid {
			continue // a thread, not the process
		}
		w.mu.Lock()
		if info, ok := w.tracked[pid]; ok && !IsClosed(info.done) {
			if what == procEventExec {
				// An exec from before track (runc's own, say) may
				// still be on its way: only later ones count.
				if le.Uint64(m[exitEventOffset-8:]) > info.since {
					if info.execs++; info.execs == 1 {
						close(info.execd)
					}
				}
			} else {
				info.known, info.status = true, syscall.WaitStatus(le.Uint32(m[exitEventOffset+8:]))
				close(info.done)
			}
		}
		w.mu.Unlock()
	}
}

// forked tracks the first child process that a tracked process (by its
// tgid) forks: a fork event whose child is a process of its own
// (child_pid is its tgid), not a thread of the parent's.
func (w *Exits) forked(parent, child, childTgid uint32) {
	if child != childTgid || childTgid == parent {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	info, ok := w.tracked[parent]
	if !ok || info.isChild || info.child.Load() != nil || IsClosed(info.done) {
		return
	}
	c := newExit(info.since, child)
	c.isChild = true
	info.child.Store(c)
	close(info.forked)
	w.tracked[child] = c
}

// forget tells everything tracked that its end cannot be told.
func (w *Exits) forget() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, info := range w.tracked {
		if !IsClosed(info.done) {
			close(info.done)
		}
	}
}

// Track starts listening for the exit of host process pid; call it while
// the process still runs, and untrack once its result is read. Once the
// watch stopped (its context ended), the Exit is done at once, unknown.
func (w *Exits) Track(pid uint32) *Exit {
	var now unix.Timespec
	var since uint64
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) == nil {
		since = uint64(now.Nano())
	}
	info := newExit(since, pid)
	if w.f == nil {
		close(info.done)
		return info
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Once the watch stopped, nothing more is heard of any process.
	if w.ended {
		close(info.done)
		return info
	}
	w.tracked[pid] = info
	return info
}

// Untrack stops listening for host process pid, and for the child it
// forked first.
func (w *Exits) Untrack(pid uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	info, ok := w.tracked[pid]
	if !ok {
		return
	}
	delete(w.tracked, pid)
	if c := info.child.Load(); c != nil && w.tracked[c.pid] == c {
		delete(w.tracked, c.pid)
	}
}

func (w *Exits) Wait() { <-w.stopped }

// Usable reports whether the watch hears the kernel's process events.
func (w *Exits) Usable() bool { return w.f != nil }

// Done is closed once the process ended.
func (info *Exit) Done() <-chan struct{} { return info.done }

// Execed returns, once the process ended, how many programs it exec'd
// while it was tracked; ok is false when the kernel's word is missing,
// as it is for a nil Exit.
func (info *Exit) Execed() (n int, ok bool) {
	if info == nil || !IsClosed(info.done) || !info.known {
		return 0, false
	}
	return info.execs, true
}

// Forked is closed once the process forked its first child while
// tracked (see Child); never where the kernel's word is missing, so wait
// on Done too.
func (info *Exit) Forked() <-chan struct{} { return info.forked }

// FirstExec is closed once the process exec'd a program while tracked;
// never where the kernel's word is missing, so wait on Done too.
func (info *Exit) FirstExec() <-chan struct{} { return info.execd }

// Child is the Exit of the first child process it forked while tracked
// (the program its init runs), or nil if the watch saw none: it forked
// none yet, or the kernel's word is missing.
func (info *Exit) Child() *Exit {
	if info == nil {
		return nil
	}
	return info.child.Load()
}

// Code returns the status containerd will report for the process, from
// the kernel's word: its exit status, or 128+N for signal N. ok is false
// while the process runs, or when the kernel's word is missing.
func (info *Exit) Code() (code uint32, ok bool) {
	if !IsClosed(info.done) || !info.known {
		return 0, false
	}
	if info.status.Signaled() {
		return 128 + uint32(info.status.Signal()), true
	}
	return uint32(info.status.ExitStatus()), true
}

// Signal says, once the process's exit was reported with status code,
// whether a signal killed it and which: known is false when the kernel's
// word is missing, or does not match code.
func (info *Exit) Signal(code uint32) (sig syscall.Signal, known bool) {
	t := time.NewTimer(exitInfoGrace)
	defer t.Stop()
	select {
	case <-info.done:
	case <-t.C:
		return 0, false
	}
	switch st := info.status; {
	case !info.known:
		return 0, false
	case st.Signaled() && code == 128+uint32(st.Signal()):
		return st.Signal(), true
	case st.Exited() && code == uint32(st.ExitStatus()):
		return 0, true
	}
	return 0, false
}

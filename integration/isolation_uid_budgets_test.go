package integration

// The isolation suite, cases 28-33 of issue 11: budgets the kernel keeps
// per user, or for the whole host, that one run must not be able to take
// from another. In each case run A takes all it can of the resource and
// holds it; while it does, run B, in a sandbox of its own, and a host
// process of another uid must both still get it. Cases 28-32 failed while
// every sandbox ran as uid 65534: B (and the host's uid 65534) shared A's
// budget. Case 33 failed while io_setup was allowed: A took the host's
// whole fs.aio-max-nr, and the host process got EAGAIN; now no sandbox
// gets an AIO context.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/defaults"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/opencontainers/image-spec/identity"

	"code-sandbox-mcp/config"
)

// holdPrelude starts run A's program. take() is the case's own: it takes
// the resource until the kernel refuses, and returns how many it got and
// the errno that stopped it. A then leaves a marker in its /tmp, which
// the host sees through /proc/PID/root, and holds what it took until the
// test writes "release-TOKEN" into its program directory (or 60 s pass),
// then prints "held N ERRNO". TOKEN is the case's own: a ready sandbox
// whose directory got an earlier case's release does not end at once.
const holdPrelude = `
import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
`

const holdEnd = `
n, e = take()
open("/tmp/held-" + sys.argv[0].split("/")[-1] + "-TOKEN", "w").close()
for _ in range(1200):
    if os.path.exists("/sandbox/release-TOKEN"):
        break
    time.sleep(0.05)
print("held", n, e, flush=True)
`

// exhaustion is one case: hold is A's take(), use is a program that uses
// the resource once and prints "ok" or what went wrong, in a sandbox and
// as a host process; held checks what A took.
type exhaustion struct {
	name string
	hold string
	use  string
	// inSandbox is what use must print in run B: "" for "ok".
	inSandbox string
	// host runs use on the host as another uid; nil runs it in the
	// python image's root (imageRoot: chroot, host namespaces).
	host func(t *testing.T) string
	held func(t *testing.T, n int, errno string)
}

func TestIsolationPerUserBudgets(t *testing.T) {
	py, _ := config.Default().Language("python")
	lim := py.Limits
	inotifyMax := readInt(t, "/proc/sys/fs/inotify/max_user_instances")
	cases := []exhaustion{
		{
			// Case 28: inotify instances, fs.inotify.max_user_instances
			// per uid.
			name: "inotify instances",
			hold: `
def take():
    n = 0
    while libc.inotify_init1(0) >= 0:
        n += 1
    return n, err()
`,
			use: `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print("ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
`,
			held: func(t *testing.T, n int, e string) {
				if n != inotifyMax || e != "EMFILE" {
					t.Errorf("A took %d inotify instances, stopped by %s; want all %d of its uid's, then EMFILE", n, e, inotifyMax)
				}
			},
		},
		{
			// Case 29: queued signals, RLIMIT_SIGPENDING against a count
			// per uid.
			name: "queued signals",
			hold: `
class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]
def take():
    sig = signal.SIGRTMIN
    signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    n = 0
    while libc.sigqueue(os.getpid(), sig, sigval(n)) == 0:
        n += 1
    return n, err()
`,
			use: `
import ctypes, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
class sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
timer = ctypes.c_void_p()
if libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(1)) != 0:
    print("sigqueue", errno.errorcode[ctypes.get_errno()])
elif libc.timer_create(1, None, ctypes.byref(timer)) != 0:
    print("timer_create", errno.errorcode[ctypes.get_errno()])
else:
    print("ok")
`,
			held: func(t *testing.T, n int, e string) {
				if uint64(n) != lim.PendingSignals || e != "EAGAIN" {
					t.Errorf("A queued %d signals, stopped by %s; want pending_signals (%d), then EAGAIN", n, e, lim.PendingSignals)
				}
			},
		},
		{
			// Case 30: POSIX message queues, RLIMIT_MSGQUEUE against a
			// count per uid, although each run has its own IPC namespace.
			name: "message queues",
			hold: `
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
def take():
    n = 0
    while libc.mq_open(b"/q%d" % n, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
        n += 1
    return n, err()
`,
			use: `
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
name = b"/csm-check-%d" % os.getpid()
fd = libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None)
if fd < 0:
    print(errno.errorcode[ctypes.get_errno()])
else:
    libc.mq_unlink(name)
    print("ok")
`,
			held: func(t *testing.T, n int, e string) {
				// A queue of the default 10 messages of 8 KiB takes
				// about 80 KiB of the budget.
				if n < 1 || int64(n)*80<<10 > lim.MsgQueueBytes || e != "EMFILE" {
					t.Errorf("A made %d message queues, stopped by %s; want what msgqueue_size (%d bytes) allows, then EMFILE", n, e, lim.MsgQueueBytes)
				}
			},
		},
		{
			// Case 31: pipe buffers, fs.pipe-user-pages-soft per uid:
			// over it, a uid's new pipes get 8 KiB instead of 64 KiB.
			name: "pipe buffers",
			hold: `
import fcntl
def take():
    n = 0
    while n < 200:
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError as e:
            return n, errno.errorcode[e.errno]
        n += 1
    return n, "none"
`,
			use: `
import fcntl, os
r, w = os.pipe()
size = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
print("ok" if size == 65536 else "pipe of %d bytes" % size)
`,
			held: func(t *testing.T, n int, e string) {
				if n < 8 || e != "EPERM" {
					t.Errorf("A grew %d pipes to 1 MiB, stopped by %s; want its uid's soft limit reached (EPERM)", n, e)
				}
			},
		},
		{
			// Case 32: ptys, kernel.pty.max for the whole host (less the
			// host's own reserve). A's devpts is capped; before the cap A
			// took every pty from several processes, nofile being 1024.
			name: "ptys",
			hold: `
def take_here():
    fds = []
    while True:
        try:
            fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
        except OSError as e:
            return fds, errno.errorcode[e.errno]
def take():
    # Each child takes what its open files allow, reports, and holds
    # them until the sandbox ends; the next one goes on.
    n, e = 0, "none"
    for _ in range(6):
        r, w = os.pipe()
        if os.fork() == 0:
            fds, e2 = take_here()
            os.write(w, b"%d %s\n" % (len(fds), e2.encode()))
            while True:
                time.sleep(60)
        os.close(w)
        k, e = os.read(r, 100).decode().split()
        os.close(r)
        n += int(k)
        if e != "EMFILE":
            break
    return n, e
`,
			use: `
import errno, os
try:
    os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
`,
			// The image's root holds no /dev: the host's own shell opens
			// the host's /dev/ptmx.
			host: func(t *testing.T) string {
				return hostRun(t, "", "/bin/sh", "-c", `exec 3<>/dev/ptmx && echo ok`)
			},
			held: func(t *testing.T, n int, e string) {
				if n != lim.Ptys || e != "ENOSPC" {
					t.Errorf("A opened %d ptys, stopped by %s; want its cap of %d, then ENOSPC", n, e, lim.Ptys)
				}
			},
		},
		{
			// Case 33: Linux native AIO contexts, fs.aio-max-nr for the
			// whole host: one io_setup of 65536 events took all of it.
			// No sandbox gets any now; the host keeps its budget.
			name: "aio contexts",
			hold: `
libc.syscall.restype = ctypes.c_long
def take():
    n = 0
    for size in (65536, 4096, 256, 16, 1):
        while True:
            ctx = ctypes.c_ulong(0)
            if libc.syscall(206, ctypes.c_long(size), ctypes.byref(ctx)) != 0:
                e = err()
                break
            n += size
    return n, e
`,
			use: `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ctx = ctypes.c_ulong(0)
if libc.syscall(206, ctypes.c_long(1), ctypes.byref(ctx)) != 0:
    print(errno.errorcode[ctypes.get_errno()])
else:
    libc.syscall(207, ctx)
    print("ok")
`,
			inSandbox: "EPERM",
			held: func(t *testing.T, n int, e string) {
				if n != 0 || e != "EPERM" {
					t.Errorf("A took %d AIO events, stopped by %s; want none: io_setup refused (EPERM)", n, e)
				}
			},
		},
	}

	spec := serverSpec{concurrency: 4}
	root := imageRoot(t, pythonImage)
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				token := randomToken(t)
				// In a session, A is the first cell of a session of its
				// own, and B of another: what a session's sandbox holds
				// lives on after its cell (case 32's children hold their
				// ptys), until the session is closed, once A is done.
				args := code(holdPrelude + tc.hold + strings.ReplaceAll(holdEnd, "TOKEN", token))
				if m.session {
					session := createSession(t, s, "python")
					args["session_id"] = session
					t.Cleanup(func() { closeSession(t, s, session) })
				}
				a := startCall(t, s, "run_python_code", args)
				if !waitFor(30*time.Second, func() bool { return heldMarker(token) }) {
					releaseRuns(t, s.stateDir, token)
					r := <-a
					t.Fatalf("run A never held the resource: %q", r.text)
				}

				b := m.hostile(t, s, "python", tc.use)
				var host string
				if tc.host != nil {
					host = tc.host(t)
				} else {
					host = hostRun(t, root, "/usr/bin/python3", "-c", tc.use)
				}

				releaseRuns(t, s.stateDir, token)
				r := <-a
				want := tc.inSandbox
				if want == "" {
					want = "ok"
				}
				if strings.TrimSpace(b.out.Stdout) != want {
					t.Errorf("run B, while A held the resource: got %q (stderr %q); want %s", b.out.Stdout, b.out.Stderr, want)
				}
				if host != "ok" {
					t.Errorf("a host process of uid 65534, while A held the resource: got %q; want ok", host)
				}
				var n int
				var e string
				if _, err := fmt.Sscanf(r.out.Stdout, "held %d %s", &n, &e); err != nil {
					t.Fatalf("run A: got %q (stderr %q); want \"held N ERRNO\"", r.out.Stdout, r.out.Stderr)
				}
				tc.held(t, n, e)
			})
		}
		afterCase(t, s)
	})
}

// startCall makes a call to tool with args in the background; the channel
// gets its result.
func startCall(t *testing.T, s *mcpServer, tool string, args map[string]any) <-chan toolResult {
	t.Helper()
	ch := make(chan toolResult, 1)
	ctx := testContext(t)
	go func() {
		var r toolResult
		res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		if err == nil {
			r, err = parseResult(res)
		}
		if err != nil {
			r.text = "call failed: " + err.Error()
		}
		ch <- r
	}()
	return ch
}

// heldMarker reports whether a process on the host has the file
// /tmp/held-main.py-TOKEN in its root.
func heldMarker(token string) bool {
	return sandboxTmpFile("held-*-"+token) != ""
}

// releaseRuns writes "release-TOKEN" into every run's program directory
// under stateDir, where a holding run looks for it in /sandbox.
func releaseRuns(t *testing.T, stateDir, token string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "*", "code"))
	for _, d := range dirs {
		os.WriteFile(filepath.Join(d, "release-"+token), nil, 0o444)
	}
}

// imageRoot returns the directory of image ref's root file system as the
// test daemon unpacked it, for a host process to chroot into and read
// only: the committed snapshot of its one layer (the images the tests
// import have one). A read-only view of a one-layer image is a bind mount
// of that layer's directory, whose path is all this wants: the view is
// removed at once, the directory staying with the image. (Unpacked from
// the archive with tar(1) instead, the python image cost some 10 s of a
// core to extract and, at the run's end, 7 to 16 s to remove.)
func imageRoot(t *testing.T, ref string) string {
	t.Helper()
	ctx := testContext(t)
	img, err := testClient.GetImage(ctx, ref)
	if err != nil {
		t.Fatalf("image %s: %v", ref, err)
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		t.Fatalf("image %s's layers: %v", ref, err)
	}
	if len(diffIDs) != 1 {
		t.Fatalf("image %s has %d layers; imageRoot reads a one-layer image's", ref, len(diffIDs))
	}
	sn := testClient.SnapshotService(defaults.DefaultSnapshotter)
	key := "image-root-" + randomToken(t)
	mounts, err := sn.View(ctx, key, identity.ChainID(diffIDs).String())
	if err != nil {
		t.Fatalf("view of image %s's layer (is it unpacked for %s?): %v", ref, defaults.DefaultSnapshotter, err)
	}
	if err := sn.Remove(ctx, key); err != nil {
		t.Fatalf("remove the view of image %s's layer: %v", ref, err)
	}
	if len(mounts) != 1 || mounts[0].Type != "bind" {
		t.Fatalf("view of image %s's one layer: mounts %+v; want one bind mount of its directory", ref, mounts)
	}
	return mounts[0].Source
}

// hostRun runs argv on the host, in root if not empty (chroot), as uid
// and gid 65534 with the host's namespaces, and returns its trimmed
// standard output, or what went wrong.
func hostRun(t *testing.T, root string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("%v: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

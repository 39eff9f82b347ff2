// Package sandbox makes, runs and destroys one sandbox: a containerd
// container, built from the spec package oci assembles, whose task runs
// one program (or a session's driver) as a host uid of its own, with its
// output captured, how it ended explained, and nothing of it left once it
// is destroyed. It starts the task as asked: on the program's arrival, or
// ahead, in oci.StubScript or in a warm interpreter (see warm.go).
//
// It gets what it needs of its surroundings in a Host, and knows nothing
// of pools, sessions, languages other than the one it runs, MCP or the
// configuration file.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/lifetime"
	"code-sandbox-mcp/exec/internal/sweep"
	"code-sandbox-mcp/exec/internal/uid"
	"code-sandbox-mcp/exec/internal/watch"
)

// CallTimeout bounds one short call to containerd on a run's path, such
// as an image lookup, a start or a kill. A run's own timeout bounds the
// making of its sandbox too, where its caller (package exec) waits for one
// to be made: the shorter bound ends the wait.
const CallTimeout = 10 * time.Second

// Host is what sandboxes need of their surroundings. Its fields are set
// once, before the first sandbox, and not changed.
type Host struct {
	Client      *containerd.Client
	Snapshotter string
	// Volatile mounts the sandboxes' overlays with the volatile option
	// (see VolatileOverlays).
	Volatile bool
	// StateDir holds a directory per sandbox: its program, workspace
	// mount, hooks and FIFOs.
	StateDir string
	// PassEnv names host variables passed into every sandbox.
	PassEnv []string
	// Init is the host path of the static init every sandbox runs as its
	// pid 1 (see CheckInit and oci.Policy.InitHostPath).
	Init string
	// Hard are the host's hard rlimits by oci rlimit type: no sandbox's
	// limit may exceed them.
	Hard map[string]uint64
	// Egress is the way out of each language with a network, by name
	// (see NewEgress); a language without one has none.
	Egress map[string]*Egress

	UIDs   *uid.Claims
	Reaper *sweep.Reaper // labels, deletes and retries them
	Events *watch.Events // containerd's OOM events
	Exits  *watch.Exits  // the kernel's word on how processes end
	OOMs   *watch.OOMs   // memory cgroups' counts of OOM kills
	// Life bounds creations and deletes: past its abandon, what is left
	// is the next server's to sweep.
	Life *lifetime.Lifetime
	Log  *slog.Logger
	// Created, if set, is told of every sandbox made, or not, for
	// language, in d; err is why not. It must return quickly.
	Created func(language string, d time.Duration, err error)
}

// Image is a language's image, present and unpacked, with the
// environment its config declares and the digest its name pointed at when
// it was prepared.
type Image struct {
	Image  containerd.Image
	Target digest.Digest
	Env    []string
}

// How is how a sandbox's task starts.
type How int

const (
	// OnRun creates the task and leaves it: Execute starts the program.
	OnRun How = iota
	// Stub starts the task at once, in oci.StubScript, unless the
	// environment rules that out (see oci.CanWaitForStart).
	Stub
	// Warm starts it at once in the warm driver (see warm.go);
	// Preloaded does too, and has the driver import the language's
	// preloads first.
	Warm
	Preloaded
)

// Options say how New makes a sandbox.
type Options struct {
	Image *Image
	// Deadline is when anyone may reap what is left of it: it is in its
	// labels.
	Deadline time.Time
	How      How
	// WarmDriver is the interpreter whose warm driver a one-shot
	// sandbox carries (see WarmInterpreter), or "" for none. Every
	// one-shot sandbox of a warm language carries it, warm or not, so
	// that a program sees the same sandbox either way.
	WarmDriver string
	// Session, if set, has the task run the language's session driver on
	// these streams instead of a program, started at once.
	Session *SessionStreams
	// Background makes it with a low CPU weight (oci.Policy.Background),
	// for a sandbox made ahead of any call; Foreground raises it.
	Background bool
}

// SessionStreams are the standard streams of a session's driver.
type SessionStreams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// EndInput ends Stdin: Destroy calls it first, since the driver reads
	// the end of its input as its end.
	EndInput io.Closer
}

// Sandbox is one container whose task waits for a program: the program's
// directory is mounted and still empty. Either the task is created and not
// started, or it was started ahead and its process waits in
// oci.StubScript for a line on its standard input. It runs exactly one
// program (or a session's cells) and is then destroyed.
type Sandbox struct {
	h       *Host
	lang    config.Language
	img     *Image
	id      string
	dir     string // host directory: the program (code/), the workspace mount, the Python hook (hooks/) and the FIFOs
	uid     uint32 // the host uid and gid it runs as, its own; 0 before the claim
	created time.Time

	container containerd.Container
	task      containerd.Task
	exited    <-chan containerd.ExitStatus
	stdout    *Capture
	stderr    *Capture
	oom       <-chan struct{}
	stopOOM   func()
	exit      *watch.Exit // how the kernel says its process ended
	// pidfd refers to its first process for the host's own kill, which it
	// reaches whatever became of the pid since; valid only with hasPidfd
	// (none before Linux 5.3, or before the task exists).
	pidfd     int
	hasPidfd  bool
	memCgroup string // host directory of its memory cgroup; "" if unknown
	// cpuCgroup is the host directory of its cpu cgroup while it runs
	// with the background CPU weight, which Foreground raises; "" for a
	// sandbox made in the foreground, or once raised.
	cpuCgroup string
	ooms      *watch.OOMCount // its memory cgroup's count of OOM kills
	// oomsTold counts the OOM kills in its memory cgroup that are not its
	// process's to explain: in a session, those before the cell now
	// running, which a result told of or will. Zero for a one-shot
	// sandbox.
	oomsTold atomic.Uint64

	// start is the waiting process's standard input when the task was
	// started ahead (on the stub, or warm); nil when Start runs the
	// program.
	start *startLine
	// warm is set when the task was started ahead in a warm driver.
	warm *warmStart
	// exitOwed is set when Execute took the kernel's word on the exit and
	// did not wait for containerd's: Destroy waits for it first.
	exitOwed bool
	// endedByProgram is set when Execute took the program's end for the
	// run's, before its init's (see waitExit): how it ended is the
	// program's alone to tell.
	endedByProgram bool
	// taskFailed is set when the task could not be created: Destroy
	// then stops a shim containerd may have left (see sweep.Reaper.StopLeftShims).
	taskFailed bool
	// session holds the streams of a session's driver, which the task
	// runs instead of a program; nil for a one-shot sandbox.
	session *SessionStreams
	// net is its network namespace and proxy; nil with no network.
	net *network
}

// Bare returns a sandbox of no container, task or directory, made from
// img at created, which Destroy lets go of: for the tests of code that
// keeps sandboxes and judges them by their image and age.
func Bare(h *Host, img *Image, created time.Time) *Sandbox {
	return &Sandbox{h: h, img: img, created: created}
}

// ID is the sandbox's container's, snapshot's and run directory's name.
func (s *Sandbox) ID() string { return s.id }

// Image is the image it was made from.
func (s *Sandbox) Image() *Image { return s.img }

// Created is when its making began.
func (s *Sandbox) Created() time.Time { return s.created }

// UID is the host uid (and gid) its processes run as.
func (s *Sandbox) UID() uint32 { return s.uid }

// Warm reports whether it waits in a warm driver.
func (s *Sandbox) Warm() bool { return s.warm != nil }

// Preloaded reports whether it waits warm with the language's preloads
// imported.
func (s *Sandbox) Preloaded() bool { return s.warm != nil && s.warm.preloaded }

// Foreground gives a sandbox made in the background the CPU weight of
// one made for a call: cgroup v1's default shares, 1024, or v2's default
// weight, 100, written to its cgroup directly (a write, not a runc
// update, which would cost a process on the call's path). Whoever takes
// a ready sandbox for a program calls it first. A failed write is logged
// and the program runs anyway, at the lower weight.
func (s *Sandbox) Foreground() {
	dir := s.cpuCgroup
	if dir == "" {
		return
	}
	s.cpuCgroup = ""
	err := writeCgroupFile(filepath.Join(dir, "cpu.shares"), "1024")
	if errors.Is(err, fs.ErrNotExist) {
		err = writeCgroupFile(filepath.Join(dir, "cpu.weight"), "100")
	}
	if err != nil {
		s.h.Log.Warn("cannot raise a ready sandbox's CPU weight; its program runs at the background weight", "run", s.id, "cgroup", dir, "err", err)
	}
}

// writeCgroupFile writes value to the cgroup file at name, which must
// exist: a cgroup file system refuses to create one (with EPERM, not
// ENOENT), so os.WriteFile would never say that v1's cpu.shares is
// missing on v2.
func writeCgroupFile(name, value string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// MemoryCgroup is the host directory of its memory cgroup, or "".
func (s *Sandbox) MemoryCgroup() string { return s.memCgroup }

// OOMKills is its memory cgroup's count of OOM kills, if known.
func (s *Sandbox) OOMKills() (uint64, bool) { return s.ooms.Kills() }

// OOMsTold is how many of those kills Explain counts as told already, not
// the process's: see SetOOMsTold.
func (s *Sandbox) OOMsTold() uint64 { return s.oomsTold.Load() }

// SetOOMsTold sets how many of its cgroup's OOM kills are not its first
// process's to explain: in a session, those before the cell now running.
func (s *Sandbox) SetOOMsTold(n uint64) { s.oomsTold.Store(n) }

// Signal sends sig to the sandbox's first process (its init, which passes
// it on to the program), through containerd, or from the host where
// containerd does not carry it out.
func (s *Sandbox) Signal(sig syscall.Signal) {
	ctx, cancel := s.h.Life.Detached(context.Background(), killTimeout)
	defer cancel()
	if err := s.task.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
		s.h.Log.Warn("signal sandbox; signalling its process from the host", "run", s.id, "signal", signalName(sig), "err", err)
		s.signalFromHost(sig)
	}
}

// signalFromHost sends sig to the sandbox's first process itself. Its
// pidfd reaches that process and no other, even where the exit watch
// cannot say whether it ended (the kernel dropped events, as a fork bomb
// makes it); without one, the pid is used only while the watch has not
// seen the process end, since a pid can be reused.
func (s *Sandbox) signalFromHost(sig syscall.Signal) {
	var err error
	switch {
	case s.hasPidfd:
		err = unix.PidfdSendSignal(s.pidfd, sig, nil, 0)
	case !watch.IsClosed(s.exit.Done()):
		err = unix.Kill(int(s.task.Pid()), sig)
	}
	if err != nil && err != unix.ESRCH {
		s.h.Log.Warn("signal sandbox process", "run", s.id, "pid", s.task.Pid(), "signal", signalName(sig), "err", err)
	}
}

// SignalName is sig's name, such as "SIGKILL".
func SignalName(sig syscall.Signal) string { return signalName(sig) }

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

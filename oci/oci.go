// Package oci turns the policy of one sandboxed run into OCI runtime spec
// options for containerd's pkg/oci, as pure functions of that Policy, and
// reads back from a generated spec what it enforces (Describe), so that
// what the server tells a model about its sandbox comes from the spec
// itself. It knows nothing of containerd's client, of MCP or of
// configuration files; it reads a language's limits in config's model.
package oci

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	ctroci "github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"code-sandbox-mcp/config"
)

// CodeDir is where the directory holding the run's program is mounted,
// read-only, inside the sandbox.
const CodeDir = "/sandbox"

// WorkspaceDir is where the run's workspace is mounted, writable: the
// working directory of its program, which holds the files a call passes
// in and whose files come back.
const WorkspaceDir = "/workspace"

// pythonHooksDir is where the directory holding the Python start-up hook
// (a sitecustomize module) is mounted, read-only, for the languages whose
// figures are saved.
const pythonHooksDir = "/opt/code-sandbox-mcp/python"

// NodeHooksDir is where the directory holding the Node.js warm-start
// module is mounted, read-only, for warm JavaScript languages.
const NodeHooksDir = "/opt/code-sandbox-mcp/node"

// TrustDir is where the directory holding the certificates a sandbox
// with TLS interception trusts is mounted, read-only: ca.pem (the
// proxy's CA) and bundle.pem (the host's roots and that CA).
const TrustDir = "/opt/code-sandbox-mcp/trust"

// InitPath is where the host's init (Policy.InitHostPath) is mounted,
// read-only, in every sandbox: the sandbox's pid 1, it runs the process's
// command as its child (see Policy.InitHostPath).
const InitPath = "/opt/code-sandbox-mcp/init"

// Policy is everything that decides how one run is confined.
type Policy struct {
	// Args is the full command line, program path included.
	Args []string
	// InitHostPath is the host path of a static init, such as tini,
	// that runs as pid 1 of the sandbox: it is mounted read-only at
	// InitPath, and runs Args (or the stub) as its one child after "--",
	// reaps every orphan, passes on the signals it gets, and exits with
	// its child's status, or 128+N when signal N killed it. Empty runs
	// the command itself as pid 1.
	InitHostPath string
	// WaitForStart makes the process a stub that can be started before
	// its program exists: see StubArgs.
	WaitForStart bool
	// Env is the complete environment, as KEY=value; see Env.
	Env []string
	// Hostname inside the sandbox.
	Hostname string
	// UID and GID the process runs as, with no supplementary groups; zero
	// is refused: runs are never root.
	UID, GID uint32

	// Limits are the language's: the memory cgroup limit (swap on top of
	// it is none), the CFS quota, the pids limit, the sizes of /tmp and
	// /dev/shm, the pseudo-terminals, and the rlimits (see rlimits).
	Limits config.Limits
	// Hard looks up the server's own hard limit of an rlimit ("RLIMIT_NOFILE"):
	// a run's is never raised above it. Nil knows none.
	Hard func(typ string) (uint64, bool)
	// Background gives the sandbox's cgroup the CPU weight
	// BackgroundCPUShares, so that a sandbox made ahead of any call (a
	// pool's refill, its interpreter starting and importing) yields the
	// CPU to the programs running; whoever takes it for a program raises
	// it to the default (see the sandbox's Foreground). False leaves the
	// runtime's default, as for a sandbox made for a call.
	Background bool

	// CodeHostDir is the host directory holding the program; it is bind
	// mounted read-only at CodeDir. Empty mounts nothing.
	CodeHostDir string
	// WorkspaceHostDir is the host directory of the run's workspace (a
	// tmpfs of its own, sized by the executor); it is bind mounted
	// writable, but not executable, at WorkspaceDir, the working
	// directory. Empty mounts nothing, and the working directory is /tmp.
	WorkspaceHostDir string
	// HooksHostDir is the host directory holding the start-up hooks of
	// the interpreter (the Python hook, or the Node.js warm start); it is
	// bind mounted read-only at HooksDir, or where WithPythonHooks puts
	// on PYTHONPATH if that is empty.
	// Empty mounts nothing.
	HooksHostDir string
	HooksDir     string

	// TrustHostDir is the host directory of the certificates the run
	// trusts for TLS interception; it is bind mounted read-only at
	// TrustDir. Empty mounts nothing.
	TrustHostDir string

	// Netns is the host path of a network namespace the run joins: the
	// one the server made for it, whose only way out is the server's
	// proxy (see package egress). Empty gives the run a new network
	// namespace of its own, with only a loopback: no network.
	Netns string

	// SystemdCgroup gives the run the cgroupsPath of the systemd cgroup
	// driver (see SystemdCgroupsPath), for a runtime run with
	// SystemdCgroup; false keeps containerd's /NAMESPACE/ID, for
	// cgroupfs.
	SystemdCgroup bool
}

// SpecVersion is the ociVersion every spec declares: runtime-spec 1.0.2,
// not the 1.3.0 of the runtime-spec module containerd's default spec
// writes, because crun before 1.14.3 refuses any version without "1.0" in
// it ("unknown version specified"; Debian 12 ships crun 1.8.1). runc has
// never checked the version. The one field we set that is newer than
// 1.0.2 is a seccomp rule's errnoRet (1.1.0: containerd's default profile
// gives clone3 ENOSYS), which runc (since 1.0) and crun (since 0.x) honour
// whatever the version says.
const SpecVersion = "1.0.2"

// SystemdSlice is the slice the systemd cgroup driver puts each sandbox's
// transient unit in.
const SystemdSlice = "system.slice"

// SystemdCgroupsPath is the cgroupsPath of container id in containerd
// namespace ns under the systemd cgroup driver, in runc's and crun's
// "slice:prefix:name" form: the runtime asks systemd for the transient
// unit ns-id.scope in SystemdSlice.
func SystemdCgroupsPath(ns, id string) string {
	return SystemdSlice + ":" + ns + ":" + id
}

// extraMaskedPaths are masked on top of containerd's defaults: they leak
// host information and no program needs them.
var extraMaskedPaths = []string{
	"/proc/interrupts",
	"/proc/kallsyms",
	"/proc/sched_debug",
	"/proc/timer_list",
	"/sys/devices/virtual/powercap",
	"/sys/firmware",
	"/sys/kernel/debug",
}

// deniedSyscalls are refused on top of containerd's default profile, which
// allows them: a sandboxed program has no use for debugging other
// processes, and each has a history of kernel bugs. Linux native AIO
// (io_setup and the calls that use its contexts) draws on fs.aio-max-nr,
// a budget of the whole host that one io_setup call can take; Python and
// Node.js do not use it (glibc's aio_* and libuv use threads).
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "userfaultfd", "personality", "memfd_secret",
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
}

// SpecOpts returns the options that build the spec of a run on top of
// containerd's default spec, in the order they must be applied: the capability drop comes before seccomp, because
// containerd's default profile allows some syscalls only to holders of
// certain capabilities.
func SpecOpts(p Policy) ([]ctroci.SpecOpts, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	l := p.Limits
	quota, period := cfs(l.CPUs)
	opts := []ctroci.SpecOpts{
		withVersion(SpecVersion),
		ctroci.WithProcessArgs(p.args()...),
		ctroci.WithProcessCwd(p.cwd()),
		withEnvExactly(p.Env),
		ctroci.WithUIDGID(p.UID, p.GID),
		withNoAdditionalGIDs,
		ctroci.WithHostname(p.Hostname),
		ctroci.WithRootFSReadonly(),
		ctroci.WithNoNewPrivileges,
		ctroci.WithCapabilities(nil),
		withNoAmbientCapabilities,
		ctroci.WithoutRunMount,
		ctroci.WithoutMounts("/dev/shm"),
		ctroci.WithMounts(p.mounts()),
		withPtys(l.Ptys),
		withMaskedPathsAdded(extraMaskedPaths),
		withNetwork(p.Netns),
		// A cgroup namespace of its own: /proc/self/cgroup shows "/", not
		// the host's hierarchy and the run's id.
		ctroci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}),
		ctroci.WithMemoryLimit(uint64(l.MemoryBytes)),
		ctroci.WithMemorySwap(l.MemoryBytes),
		ctroci.WithCPUCFS(quota, period),
		ctroci.WithPidsLimit(l.Pids),
	}
	if p.Background {
		opts = append(opts, ctroci.WithCPUShares(BackgroundCPUShares))
	}
	if p.SystemdCgroup {
		opts = append(opts, withSystemdCgroupsPath)
	}
	hard := p.Hard
	if hard == nil {
		hard = func(string) (uint64, bool) { return 0, false }
	}
	rl := specRlimits(rlimits(l), hard)
	for i := range rl {
		opts = append(opts, ctroci.WithRlimit(&rl[i]))
	}
	// Last: the profile is derived from the capabilities set above.
	opts = append(opts, seccomp.WithDefaultProfile(), withSyscallsDenied(deniedSyscalls))
	return opts, nil
}

// validate refuses a policy no sandbox may run with: no command, a stub
// whose shell would change its environment, root, or limits that
// config.Limits.Check refuses.
func (p Policy) validate() error {
	switch {
	case len(p.Args) == 0:
		return fmt.Errorf("policy has no command")
	case p.InitHostPath != "" && !path.IsAbs(p.InitHostPath):
		return fmt.Errorf("policy's init %q is not an absolute path", p.InitHostPath)
	case p.Netns != "" && !path.IsAbs(p.Netns):
		return fmt.Errorf("policy's network namespace %q is not an absolute path", p.Netns)
	case p.WaitForStart && !CanWaitForStart(p.Env):
		return fmt.Errorf("policy waits for its start in a shell, but its environment sets one of %v, which the shell would change", stubUnset)
	case p.UID == 0 || p.GID == 0:
		return fmt.Errorf("policy would run as uid %d gid %d: sandboxes never run as root", p.UID, p.GID)
	}
	if err := p.Limits.Check("limits"); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return nil
}

// StubScript is what a sandbox started ahead of its program runs, in the
// image's /bin/sh: it waits for one line on standard input, which only the
// server writes, once the program is in place, and then replaces itself
// with the interpreter ("$@"), whose standard input is /dev/null, open
// for reading and writing as the runtime opens it where no stub runs. A
// standard input closed without a line (the sandbox is being destroyed, or
// the server went away) ends it without running anything. dash (Debian's
// /bin/sh) adds PWD to what it passes on, and other shells OLDPWD or
// SHLVL; the unset takes them out again, so that the interpreter's
// environment is exactly the spec's (CanWaitForStart rules out a spec that
// sets them itself). bash adds SHLVL back at exec whatever the script
// does, so under bash the stub exits at once with StubRefused, and the
// server stops starting sandboxes ahead for that image.
const StubScript = `[ -z "${BASH_VERSION-}" ] || exit 121
read -r _ || exit
unset PWD OLDPWD SHLVL
exec "$@" <>/dev/null`

// stubUnset are the variables StubScript unsets.
var stubUnset = []string{"PWD", "OLDPWD", "SHLVL"}

// CanWaitForStart reports whether a stub keeps env exactly: it does unless
// env sets one of the variables the stub unsets.
func CanWaitForStart(env []string) bool {
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(stubUnset, k) {
			return false
		}
	}
	return true
}

// StubRefused is the exit status of a stub that refuses to run under the
// image's /bin/sh.
const StubRefused = 121

// StubArgs returns the argv of a process that runs StubScript in
// /bin/sh and then args.
func StubArgs(args []string) []string {
	return append([]string{"/bin/sh", "-c", StubScript, "sh"}, args...)
}

func (p Policy) args() []string {
	args := p.Args
	if p.WaitForStart {
		args = StubArgs(args)
	}
	if p.InitHostPath != "" {
		args = InitArgs(args)
	}
	return args
}

// InitArgs returns the argv of the sandbox's init running args as its
// child.
func InitArgs(args []string) []string {
	return append([]string{InitPath, "--"}, args...)
}

// BackgroundCPUShares is the cgroup v1 CPU shares of a background
// sandbox: an eighth of the default 1024, so that it gets an eighth of
// what a running program gets when both want a CPU, and all of an idle
// one. runc gives cgroup v2 the weight 1 + (shares-2)*9999/262142 of it,
// 5 against the default 100.
const BackgroundCPUShares = 128

// cfs converts a number of CPUs into a CFS quota over a 100 ms period.
func cfs(cpus float64) (quota int64, period uint64) {
	const p = 100000
	q := int64(cpus * p)
	if q < 1000 {
		q = 1000 // the kernel's minimum quota is 1 ms
	}
	return q, p
}

// cwd is the program's working directory: the workspace, if it has one.
func (p Policy) cwd() string {
	if p.WorkspaceHostDir != "" {
		return WorkspaceDir
	}
	return "/tmp"
}

func (p Policy) mounts() []specs.Mount {
	m := []specs.Mount{
		{
			Destination: "/tmp",
			Type:        "tmpfs",
			Source:      "tmpfs",
			Options:     []string{"nosuid", "nodev", "noexec", "mode=1777", "size=" + strconv.FormatInt(p.Limits.TmpBytes, 10)},
		},
		{
			Destination: "/dev/shm",
			Type:        "tmpfs",
			Source:      "shm",
			Options:     []string{"nosuid", "nodev", "noexec", "mode=1777", "size=" + strconv.FormatInt(p.Limits.ShmBytes, 10)},
		},
	}
	// The init: read-only, and the one file from the host that runs.
	if p.InitHostPath != "" {
		m = append(m, specs.Mount{
			Destination: InitPath,
			Type:        "bind",
			Source:      p.InitHostPath,
			Options:     []string{"rbind", "ro", "nosuid", "nodev"},
		})
	}
	// Bound in from the host: the program read-only, the workspace
	// writable, the Python hook and the trusted certificates read-only;
	// none executable.
	for _, b := range []struct {
		src, dst, mode string
	}{{p.CodeHostDir, CodeDir, "ro"}, {p.WorkspaceHostDir, WorkspaceDir, "rw"}, {p.HooksHostDir, cmp.Or(p.HooksDir, pythonHooksDir), "ro"}, {p.TrustHostDir, TrustDir, "ro"}} {
		if b.src != "" {
			m = append(m, specs.Mount{
				Destination: b.dst,
				Type:        "bind",
				Source:      b.src,
				Options:     []string{"rbind", b.mode, "nosuid", "nodev", "noexec"},
			})
		}
	}
	return m
}

// withEnvExactly sets the process environment to env and nothing else,
// dropping the PATH that containerd's default spec carries unless env has
// its own.
func withEnvExactly(env []string) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		s.Process.Env = slices.Clone(env)
		return nil
	}
}

// withPtys caps the sandbox's own devpts instance at n pseudo-terminals
// (its max= option), or, for n = 0, mounts none: /dev/ptmx, a link into
// /dev/pts, then leads nowhere. The kernel's kernel.pty.max is shared by
// every devpts instance on the host; the cap keeps a run from taking it.
func withPtys(n int) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/dev/pts" })
		switch {
		case i < 0 && n > 0:
			return fmt.Errorf("no /dev/pts in the default spec to cap at %d ptys", n)
		case i < 0:
		case n == 0:
			s.Mounts = slices.Delete(s.Mounts, i, i+1)
		default:
			m := &s.Mounts[i]
			m.Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return strings.HasPrefix(o, "max=") })
			m.Options = append(m.Options, "max="+strconv.Itoa(n))
		}
		return nil
	}
}

// withVersion sets the spec's ociVersion to v.
func withVersion(v string) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		s.Version = v
		return nil
	}
}

// withSystemdCgroupsPath sets the cgroupsPath to SystemdCgroupsPath of
// the container in the context's namespace.
func withSystemdCgroupsPath(ctx context.Context, _ ctroci.Client, c *containers.Container, s *ctroci.Spec) error {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return err
	}
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	s.Linux.CgroupsPath = SystemdCgroupsPath(ns, c.ID)
	return nil
}

// withNoAdditionalGIDs clears supplementary groups: the run holds its own
// gid and no other.
func withNoAdditionalGIDs(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
	s.Process.User.AdditionalGids = nil
	return nil
}

// withNoAmbientCapabilities empties the ambient set, the one
// WithCapabilities(nil) leaves alone (it empties the other four).
func withNoAmbientCapabilities(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
	s.Process.Capabilities.Ambient = nil
	return nil
}

// withMaskedPathsAdded masks paths on top of those already masked.
func withMaskedPathsAdded(paths []string) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		for _, p := range paths {
			if !slices.Contains(s.Linux.MaskedPaths, p) {
				s.Linux.MaskedPaths = append(s.Linux.MaskedPaths, p)
			}
		}
		return nil
	}
}

// withNetwork gives the run the network namespace at path or, for "", a
// network namespace of its own (with only loopback, which runc brings
// up); it never keeps another the default spec names.
func withNetwork(path string) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		for i, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				s.Linux.Namespaces[i].Path = path
				return nil
			}
		}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: path})
		return nil
	}
}

// Env builds a run's environment: the image's own variables, then the
// language's, then the pass-through ones, each later one replacing an
// earlier one of the same name. HOME is always /tmp, the only writable
// directory. Entries without '=' are dropped.
func Env(image, language, pass []string) []string {
	var out []string
	index := map[string]int{}
	add := func(kv string) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return
		}
		if i, seen := index[k]; seen {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, list := range [][]string{image, language, pass, {"HOME=/tmp"}} {
		for _, kv := range list {
			add(kv)
		}
	}
	return out
}

// rlimits are the limits a run of l gets, before they are clamped. Those
// the kernel counts per user (queued signals, message queues, locked
// memory, processes) are low: each sandbox has a uid of its own, and these
// bound what its own count can reach. A run may not raise its scheduling
// priority, real-time or nice, and writes no core files.
func rlimits(l config.Limits) []rlimit {
	return []rlimit{
		{Type: "RLIMIT_NOFILE", Max: l.OpenFiles},
		{Type: "RLIMIT_FSIZE", Max: uint64(l.FileBytes)},
		{Type: "RLIMIT_CORE", Max: 0},
		{Type: "RLIMIT_SIGPENDING", Max: l.PendingSignals},
		{Type: "RLIMIT_MSGQUEUE", Max: uint64(l.MsgQueueBytes)},
		{Type: "RLIMIT_MEMLOCK", Max: uint64(l.LockedBytes)},
		{Type: "RLIMIT_NPROC", Max: uint64(l.Pids)},
		{Type: "RLIMIT_RTPRIO", Max: 0},
		{Type: "RLIMIT_NICE", Max: 0},
	}
}

// RlimitTypes are the rlimits every run's spec sets.
func RlimitTypes() []string {
	var out []string
	for _, r := range rlimits(config.Limits{}) {
		out = append(out, r.Type)
	}
	return out
}

// rlimit is a limit a run should get, before it is clamped.
type rlimit struct {
	Type string // RLIMIT_NOFILE, ...
	Max  uint64 // both soft and hard
}

// specRlimits turns wanted limits into spec rlimits, never above hard, the
// server's own hard limit for that resource as looked up by hard: raising a
// limit needs CAP_SYS_RESOURCE, which hardened hosts do not grant. A
// resource hard does not know is left as wanted.
func specRlimits(want []rlimit, hard func(typ string) (uint64, bool)) []specs.POSIXRlimit {
	out := make([]specs.POSIXRlimit, 0, len(want))
	for _, w := range want {
		v := w.Max
		if h, ok := hard(w.Type); ok && h < v {
			v = h
		}
		out = append(out, specs.POSIXRlimit{Type: w.Type, Hard: v, Soft: v})
	}
	return out
}

// WithPythonHooks returns env with the directory of the Python start-up
// hook (/opt/code-sandbox-mcp/python) first on PYTHONPATH, before any
// directories env already puts there.
func WithPythonHooks(env []string) []string {
	out := slices.Clone(env)
	for i, kv := range out {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if v != "" {
				v = ":" + v
			}
			out[i] = "PYTHONPATH=" + pythonHooksDir + v
			return out
		}
	}
	return append(out, "PYTHONPATH="+pythonHooksDir)
}

// ProgramPath is where a program file of the given name is found inside
// the sandbox.
func ProgramPath(file string) string {
	return path.Join(CodeDir, file)
}

// withSyscallsDenied takes names out of every rule of the seccomp profile,
// so that the profile's default action (an error) applies to them.
func withSyscallsDenied(names []string) ctroci.SpecOpts {
	return func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
		if s.Linux.Seccomp == nil {
			return fmt.Errorf("no seccomp profile to deny %v in", names)
		}
		rules := s.Linux.Seccomp.Syscalls[:0]
		for _, r := range s.Linux.Seccomp.Syscalls {
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return slices.Contains(names, n) })
			if len(r.Names) > 0 {
				rules = append(rules, r)
			}
		}
		s.Linux.Seccomp.Syscalls = rules
		return nil
	}
}

// NewPolicy returns the policy of one run of l: its command with the
// program's path appended, its limits, the hostname "sandbox", and the
// cgroupsPath of its cgroup driver. The
// caller adds what only a run knows: the environment, the program's host
// directory, the server's hard limits, and whether it waits for its start.
func NewPolicy(l config.Language) Policy {
	return Policy{
		Args:          append(slices.Clone(l.Command), ProgramPath(l.File)),
		Hostname:      "sandbox",
		Limits:        l.Limits,
		SystemdCgroup: l.CgroupDriver == config.CgroupDriverSystemd,
	}
}

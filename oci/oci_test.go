package oci

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	ctroci "github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"code-sandbox-mcp/config"
)

func testPolicy() Policy {
	return Policy{
		Args:     []string{"python3", "/sandbox/main.py"},
		Env:      []string{"PATH=/usr/bin:/bin", "HOME=/tmp"},
		Hostname: "sandbox",
		UID:      2000000007,
		GID:      2000000007,
		Limits: config.Limits{
			MemoryBytes:    512 << 20,
			CPUs:           1.5,
			Pids:           128,
			TmpBytes:       64 << 20,
			ShmBytes:       32 << 20,
			FileBytes:      1 << 20,
			OpenFiles:      256,
			PendingSignals: 100,
			MsgQueueBytes:  200 << 10,
			LockedBytes:    32 << 10,
			Ptys:           3,
			Timeout:        30 * time.Second,
			MaxTimeout:     time.Minute,
			MaxTaskTimeout: time.Hour,
			OutputBytes:    64 << 10,
			CodeBytes:      1 << 20,
			WorkspaceBytes: 64 << 20,
		},
		CodeHostDir:      "/run/code-sandbox-mcp/csm-1/code",
		WorkspaceHostDir: "/run/code-sandbox-mcp/csm-1/workspace",
		HooksHostDir:     "/run/code-sandbox-mcp/csm-1/hooks",
		InitHostPath:     "/usr/bin/tini-static",
	}
}

// generate applies the policy's options to containerd's default spec, as
// containerd.WithNewSpec does, with no client and no image.
func generate(t *testing.T, p Policy) *ctroci.Spec {
	t.Helper()
	return generateOver(t, p)
}

// generateOver is generate with base applied to the default spec first: a
// test of an option that containerd's default spec already satisfies needs
// a base that does not, or it passes with the option deleted.
func generateOver(t *testing.T, p Policy, base ...ctroci.SpecOpts) *ctroci.Spec {
	t.Helper()
	opts, err := SpecOpts(p)
	if err != nil {
		t.Fatalf("SpecOpts: %v", err)
	}
	ctx := namespaces.WithNamespace(context.Background(), "test")
	s, err := ctroci.GenerateSpec(ctx, nil, &containers.Container{ID: "csm-1"}, append(slices.Clone(base), opts...)...)
	if err != nil {
		t.Fatalf("GenerateSpec: %v", err)
	}
	return s
}

func TestSpecProcess(t *testing.T) {
	s := generate(t, testPolicy())
	p := s.Process
	if got, want := p.Args, []string{InitPath, "--", "python3", "/sandbox/main.py"}; !slices.Equal(got, want) {
		t.Errorf("args: got %q; want %q", got, want)
	}
	if got, want := p.Env, []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}; !slices.Equal(got, want) {
		t.Errorf("env: got %q; want %q (exactly, nothing added)", got, want)
	}
	if p.User.UID != 2000000007 || p.User.GID != 2000000007 {
		t.Errorf("user: got %d:%d; want 2000000007:2000000007", p.User.UID, p.User.GID)
	}
	if len(p.User.AdditionalGids) != 0 {
		t.Errorf("additional gids: got %v; want none", p.User.AdditionalGids)
	}
	if p.Cwd != WorkspaceDir {
		t.Errorf("cwd: got %q; want %s", p.Cwd, WorkspaceDir)
	}
	if !p.NoNewPrivileges {
		t.Error("no_new_privileges: got false; want true")
	}
	if p.Terminal {
		t.Error("terminal: got true; want false")
	}
	c := p.Capabilities
	for name, set := range map[string][]string{
		"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted,
		"inheritable": c.Inheritable, "ambient": c.Ambient,
	} {
		if len(set) != 0 {
			t.Errorf("%s capabilities: got %v; want none", name, set)
		}
	}
	want := map[string]uint64{
		"RLIMIT_NOFILE": 256, "RLIMIT_CORE": 0, "RLIMIT_FSIZE": 1 << 20,
		"RLIMIT_SIGPENDING": 100, "RLIMIT_MSGQUEUE": 200 << 10, "RLIMIT_MEMLOCK": 32 << 10,
		"RLIMIT_NPROC": 128, "RLIMIT_RTPRIO": 0, "RLIMIT_NICE": 0,
	}
	for _, r := range p.Rlimits {
		w, ok := want[r.Type]
		if !ok {
			t.Errorf("unexpected rlimit %s", r.Type)
			continue
		}
		if r.Hard != w || r.Soft != w {
			t.Errorf("%s: got soft %d hard %d; want %d", r.Type, r.Soft, r.Hard, w)
		}
		delete(want, r.Type)
	}
	for typ := range want {
		t.Errorf("rlimit %s missing", typ)
	}
	if s.Hostname != "sandbox" {
		t.Errorf("hostname: got %q; want sandbox", s.Hostname)
	}
}

// The spec declares runtime-spec 1.0.2, which crun before 1.14.3 needs
// (it refuses a version without "1.0" in it), not the 1.3.0 containerd's
// default spec declares.
func TestSpecVersion(t *testing.T) {
	if got := generate(t, testPolicy()).Version; got != SpecVersion || !strings.Contains(got, "1.0") {
		t.Errorf("ociVersion: got %q; want %q, which contains \"1.0\"", got, SpecVersion)
	}
}

// The cgroupsPath is containerd's /NAMESPACE/ID for cgroupfs, and the
// systemd driver's slice:prefix:name for systemd, which runc and crun
// make into the unit NAMESPACE-ID.scope in system.slice.
func TestSpecCgroupsPath(t *testing.T) {
	if got, want := generate(t, testPolicy()).Linux.CgroupsPath, "/test/csm-1"; got != want {
		t.Errorf("cgroupfs: cgroupsPath %q; want %q", got, want)
	}
	p := testPolicy()
	p.SystemdCgroup = true
	if got, want := generate(t, p).Linux.CgroupsPath, "system.slice:test:csm-1"; got != want {
		t.Errorf("systemd: cgroupsPath %q; want %q", got, want)
	}
	l := config.Language{Command: []string{"python3"}, File: "main.py", CgroupDriver: config.CgroupDriverSystemd}
	if !NewPolicy(l).SystemdCgroup {
		t.Error("NewPolicy of a language with the systemd driver: SystemdCgroup false; want true")
	}
	l.CgroupDriver = config.CgroupDriverCgroupfs
	if NewPolicy(l).SystemdCgroup {
		t.Error("NewPolicy of a language with the cgroupfs driver: SystemdCgroup true; want false")
	}
}

func TestSpecFilesystem(t *testing.T) {
	s := generate(t, testPolicy())
	if !s.Root.Readonly {
		t.Error("root: got read-write; want read-only")
	}
	mounts := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		if _, dup := mounts[m.Destination]; dup {
			t.Errorf("mount %s appears twice", m.Destination)
		}
		mounts[m.Destination] = m
	}
	tmp := mounts["/tmp"]
	if tmp.Type != "tmpfs" || !hasAll(tmp.Options, "nosuid", "nodev", "noexec", "size=67108864") {
		t.Errorf("/tmp: got %+v; want tmpfs nosuid,nodev,noexec,size=67108864", tmp)
	}
	shm := mounts["/dev/shm"]
	if shm.Type != "tmpfs" || !hasAll(shm.Options, "nosuid", "nodev", "noexec", "size=33554432") {
		t.Errorf("/dev/shm: got %+v; want tmpfs nosuid,nodev,noexec,size=33554432", shm)
	}
	code := mounts[CodeDir]
	if code.Type != "bind" || code.Source != "/run/code-sandbox-mcp/csm-1/code" || !hasAll(code.Options, "ro", "nosuid", "nodev", "noexec") {
		t.Errorf("%s: got %+v; want a read-only bind of the run's code directory", CodeDir, code)
	}
	ws := mounts[WorkspaceDir]
	if ws.Type != "bind" || ws.Source != "/run/code-sandbox-mcp/csm-1/workspace" || !hasAll(ws.Options, "rw", "nosuid", "nodev", "noexec") || hasAll(ws.Options, "ro") {
		t.Errorf("%s: got %+v; want a writable, not executable bind of the run's workspace", WorkspaceDir, ws)
	}
	if s.Process.Cwd != WorkspaceDir {
		t.Errorf("cwd %s; want %s", s.Process.Cwd, WorkspaceDir)
	}
	hooks := mounts[pythonHooksDir]
	if hooks.Type != "bind" || hooks.Source != "/run/code-sandbox-mcp/csm-1/hooks" || !hasAll(hooks.Options, "ro", "nosuid", "nodev", "noexec") {
		t.Errorf("%s: got %+v; want a read-only bind of the run's hook directory", pythonHooksDir, hooks)
	}
	// The init is the one file from the host that runs: read-only, and
	// no set-uid bit or device of it counts.
	if in := mounts[InitPath]; in.Type != "bind" || in.Source != "/usr/bin/tini-static" || !hasAll(in.Options, "ro", "nosuid", "nodev") || hasAll(in.Options, "rw") {
		t.Errorf("%s: got %+v; want a read-only, nosuid, nodev bind of the host's init", InitPath, in)
	}
	if _, ok := mounts["/run"]; ok {
		t.Error("/run: mounted; want no writable /run")
	}
	if pts := mounts["/dev/pts"]; pts.Type != "devpts" || !hasAll(pts.Options, "newinstance", "max=3") ||
		len(slices.DeleteFunc(slices.Clone(pts.Options), func(o string) bool { return !strings.HasPrefix(o, "max=") })) != 1 {
		t.Errorf("/dev/pts: got %+v; want its own devpts instance capped with max=3", pts)
	}
	// Nothing else of the host: every bind mount is one of the run's own
	// directories.
	for _, m := range s.Mounts {
		if (m.Type == "bind" || hasAll(m.Options, "bind") || hasAll(m.Options, "rbind")) && !slices.Contains([]string{CodeDir, WorkspaceDir, pythonHooksDir, InitPath}, m.Destination) {
			t.Errorf("host bind mount at %s from %s; want none but %s, %s, %s and %s", m.Destination, m.Source, CodeDir, WorkspaceDir, pythonHooksDir, InitPath)
		}
	}
	if sys := mounts["/sys"]; !hasAll(sys.Options, "ro") {
		t.Errorf("/sys: got %+v; want read-only", sys)
	}
	// containerd's own (kept), then each of ours, listed here rather than
	// read from extraMaskedPaths, so that dropping one from there fails.
	// Some of ours are containerd's too today; they stay listed so that
	// the test holds if containerd's list shrinks.
	for _, p := range []string{
		"/proc/kcore", "/proc/keys",
		"/proc/interrupts", "/proc/kallsyms", "/proc/sched_debug", "/proc/timer_list",
		"/sys/devices/virtual/powercap", "/sys/firmware", "/sys/kernel/debug",
	} {
		if !slices.Contains(s.Linux.MaskedPaths, p) {
			t.Errorf("masked paths: %s missing", p)
		}
	}
	for i, p := range s.Linux.MaskedPaths {
		if slices.Contains(s.Linux.MaskedPaths[:i], p) {
			t.Errorf("masked paths: %s appears twice", p)
		}
	}
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq"} {
		if !slices.Contains(s.Linux.ReadonlyPaths, p) {
			t.Errorf("read-only paths: %s missing", p)
		}
	}
}

func TestSpecWithoutPtys(t *testing.T) {
	p := testPolicy()
	p.Limits.Ptys = 0
	s := generate(t, p)
	for _, m := range s.Mounts {
		if m.Destination == "/dev/pts" || m.Type == "devpts" {
			t.Errorf("mount %+v; want no devpts with ptys = 0", m)
		}
	}
}

func TestSpecNamespacesAndDevices(t *testing.T) {
	s := generate(t, testPolicy())
	got := map[specs.LinuxNamespaceType]string{}
	for _, ns := range s.Linux.Namespaces {
		got[ns.Type] = ns.Path
	}
	for _, typ := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.CgroupNamespace} {
		path, ok := got[typ]
		if !ok || path != "" {
			t.Errorf("%s namespace: got present=%v path=%q; want a new one", typ, ok, path)
		}
	}
	devs := s.Linux.Resources.Devices
	if len(devs) == 0 || devs[0].Allow || devs[0].Access != "rwm" {
		t.Errorf("device cgroup: got %+v; want deny-all first", devs)
	}
	if len(s.Linux.Devices) != 0 {
		t.Errorf("devices: got %+v; want none beyond runc's defaults", s.Linux.Devices)
	}
}

func TestSpecCgroupLimits(t *testing.T) {
	s := generate(t, testPolicy())
	r := s.Linux.Resources
	if r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != 512<<20 {
		t.Fatalf("memory limit: got %+v; want %d", r.Memory, 512<<20)
	}
	if r.Memory.Swap == nil || *r.Memory.Swap != 512<<20 {
		t.Errorf("memory+swap: got %v; want %d (equal to memory: no swap)", r.Memory.Swap, 512<<20)
	}
	if r.CPU == nil || r.CPU.Quota == nil || *r.CPU.Quota != 150000 || r.CPU.Period == nil || *r.CPU.Period != 100000 {
		t.Errorf("cpu: got %+v; want quota 150000 period 100000", r.CPU)
	}
	if r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != 128 {
		t.Errorf("pids: got %+v; want 128", r.Pids)
	}
	if r.CPU.Shares != nil {
		t.Errorf("cpu shares: got %d; want the runtime's default for a sandbox made for a call", *r.CPU.Shares)
	}
	p := testPolicy()
	p.Background = true
	bg := generate(t, p).Linux.Resources.CPU
	if bg == nil || bg.Shares == nil || *bg.Shares != BackgroundCPUShares || bg.Quota == nil || *bg.Quota != 150000 {
		t.Errorf("background cpu: got %+v; want shares %d and the same quota", bg, BackgroundCPUShares)
	}
}

func TestSpecSeccomp(t *testing.T) {
	s := generate(t, testPolicy())
	sc := s.Linux.Seccomp
	if sc == nil {
		t.Fatal("seccomp: got none; want containerd's default profile")
	}
	if sc.DefaultAction != specs.ActErrno {
		t.Errorf("seccomp default action: got %s; want %s", sc.DefaultAction, specs.ActErrno)
	}
	allowed := map[string]bool{}
	for _, rule := range sc.Syscalls {
		if rule.Action != specs.ActAllow {
			continue
		}
		for _, n := range rule.Names {
			allowed[n] = true
		}
	}
	if !allowed["read"] || !allowed["write"] {
		t.Errorf("seccomp does not allow read/write; profile looks wrong")
	}
	// Allowed only with capabilities the spec dropped (the profile must
	// have been built after the drop), or denied by us on top. A rule with
	// argument conditions counts as allowing: none of these may have one.
	// containerd's profile allows personality for a few arguments; we
	// deny it whatever they are.
	for _, name := range []string{"mount", "umount2", "unshare", "setns", "ptrace", "bpf", "perf_event_open", "kexec_load", "keyctl", "add_key", "io_uring_setup", "pivot_root", "chroot", "reboot", "process_vm_readv", "process_vm_writev", "userfaultfd", "personality", "memfd_secret",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents"} {
		if allowed[name] {
			t.Errorf("seccomp allows %s; want it denied", name)
		}
	}
}

// TestSyscallsDenied applies withSyscallsDenied to a profile that allows
// every syscall we deny, with and without argument conditions:
// containerd's default profile does not allow userfaultfd at all, so
// TestSpecSeccomp cannot tell whether we deny it.
func TestSyscallsDenied(t *testing.T) {
	denied := []string{"ptrace", "process_vm_readv", "process_vm_writev", "userfaultfd", "personality", "memfd_secret",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents"}
	s := &ctroci.Spec{Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{
			{Names: append([]string{"read"}, denied...), Action: specs.ActAllow},
			{Names: slices.Clone(denied), Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 8, Op: specs.OpEqualTo}}},
			{Names: []string{"userfaultfd"}, Action: specs.ActAllow},
		},
	}}}
	if err := withSyscallsDenied(deniedSyscalls)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range s.Linux.Seccomp.Syscalls {
		if len(r.Names) == 0 {
			t.Errorf("rule %+v has no names left; want it removed", r)
		}
		names = append(names, r.Names...)
	}
	if !slices.Equal(names, []string{"read"}) {
		t.Errorf("syscalls still in the profile: got %q; want only read (%q all denied)", names, denied)
	}
}

func TestSyscallsDeniedNeedsAProfile(t *testing.T) {
	s := &ctroci.Spec{Linux: &specs.Linux{}}
	if err := withSyscallsDenied(deniedSyscalls)(context.Background(), nil, nil, s); err == nil {
		t.Error("got no error for a spec without seccomp; want one: denying nothing is not denying")
	}
}

// TestSpecOverAWeakerBase builds the spec on top of a base that lacks one
// piece of hardening containerd's default spec happens to have. Against
// the default spec alone, the option that provides it could be deleted
// without any test failing.
// A policy with Netns joins that namespace, whatever the base spec had,
// and Describe counts it as a network; every other namespace stays new.
func TestSpecJoinsTheServersNetns(t *testing.T) {
	p := testPolicy()
	p.Netns = "/var/lib/code-sandbox-mcp/run/x/netns"
	for _, base := range []ctroci.SpecOpts{
		ctroci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/proc/1/ns/net"}),
		ctroci.WithHostNamespace(specs.NetworkNamespace),
	} {
		s := generateOver(t, p, base)
		var net []specs.LinuxNamespace
		for _, ns := range s.Linux.Namespaces {
			switch {
			case ns.Type == specs.NetworkNamespace:
				net = append(net, ns)
			case ns.Path != "":
				t.Errorf("%s namespace joins %q; want a new one", ns.Type, ns.Path)
			}
		}
		if len(net) != 1 || net[0].Path != p.Netns {
			t.Errorf("network namespaces: got %+v; want one, at %s", net, p.Netns)
		}
		if !Describe(s).Network {
			t.Error("Describe: Network false for a joined namespace; want true")
		}
	}
	if Describe(generate(t, testPolicy())).Network {
		t.Error("Describe: Network true without Netns; want false")
	}
}

func TestSpecOverAWeakerBase(t *testing.T) {
	noCapabilities := func(t *testing.T, s *ctroci.Spec) {
		t.Helper()
		c := s.Process.Capabilities
		for name, set := range map[string][]string{
			"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted,
			"inheritable": c.Inheritable, "ambient": c.Ambient,
		} {
			if len(set) != 0 {
				t.Errorf("%s capabilities: got %v; want none", name, set)
			}
		}
	}
	privateNetwork := func(t *testing.T, s *ctroci.Spec) {
		t.Helper()
		var got []specs.LinuxNamespace
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				got = append(got, ns)
			}
		}
		if len(got) != 1 || got[0].Path != "" {
			t.Errorf("network namespaces: got %+v; want one, new (no path)", got)
		}
	}
	for _, tc := range []struct {
		name  string
		base  ctroci.SpecOpts
		check func(*testing.T, *ctroci.Spec)
	}{
		{"ambient capabilities", ctroci.WithAmbientCapabilities([]string{"CAP_NET_RAW", "CAP_CHOWN"}), noCapabilities},
		{"network namespace joined", ctroci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/proc/1/ns/net"}), privateNetwork},
		{"host network", ctroci.WithHostNamespace(specs.NetworkNamespace), privateNetwork},
		{"new privileges", func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
			s.Process.NoNewPrivileges = false
			return nil
		}, func(t *testing.T, s *ctroci.Spec) {
			if !s.Process.NoNewPrivileges {
				t.Error("no_new_privileges: got false; want true")
			}
		}},
		{"supplementary groups", func(_ context.Context, _ ctroci.Client, _ *containers.Container, s *ctroci.Spec) error {
			s.Process.User.AdditionalGids = []uint32{0, 4, 27}
			return nil
		}, func(t *testing.T, s *ctroci.Spec) {
			if g := s.Process.User.AdditionalGids; len(g) != 0 {
				t.Errorf("additional gids: got %v; want none", g)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, generateOver(t, testPolicy(), tc.base))
		})
	}
}

func TestSpecOptsRefusesUnsafePolicies(t *testing.T) {
	for name, mutate := range map[string]func(*Policy){
		"root uid":       func(p *Policy) { p.UID = 0 },
		"root gid":       func(p *Policy) { p.GID = 0 },
		"no sigpending":  func(p *Policy) { p.Limits.PendingSignals = 0 },
		"no msgqueue":    func(p *Policy) { p.Limits.MsgQueueBytes = 0 },
		"negative ptys":  func(p *Policy) { p.Limits.Ptys = -1 },
		"no memory":      func(p *Policy) { p.Limits.MemoryBytes = 0 },
		"no cpu":         func(p *Policy) { p.Limits.CPUs = 0 },
		"no pids limit":  func(p *Policy) { p.Limits.Pids = 0 },
		"no tmp size":    func(p *Policy) { p.Limits.TmpBytes = 0 },
		"no file size":   func(p *Policy) { p.Limits.FileBytes = 0 },
		"no timeout":     func(p *Policy) { p.Limits.Timeout = 0 },
		"no command":     func(p *Policy) { p.Args = nil },
		"relative init":  func(p *Policy) { p.InitHostPath = "usr/bin/tini-static" },
		"relative netns": func(p *Policy) { p.Netns = "run/netns/x" },
		"stub with PWD":  func(p *Policy) { p.WaitForStart = true; p.Env = append(p.Env, "PWD=/x") },
	} {
		t.Run(name, func(t *testing.T) {
			p := testPolicy()
			mutate(&p)
			if _, err := SpecOpts(p); err == nil {
				t.Error("got no error; want the policy refused")
			}
		})
	}
}

func TestEnv(t *testing.T) {
	got := Env(
		[]string{"PATH=/usr/bin", "LANG=C.UTF-8", "HOME=/root"},
		[]string{"PYTHONUNBUFFERED=1", "LANG=C"},
		[]string{"API_KEY=secret", "broken"},
	)
	want := []string{"PATH=/usr/bin", "LANG=C", "HOME=/tmp", "PYTHONUNBUFFERED=1", "API_KEY=secret"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestRlimitsNeverRaised(t *testing.T) {
	hard := map[string]uint64{"RLIMIT_NOFILE": 512}
	got := specRlimits([]rlimit{{"RLIMIT_NOFILE", 1024}, {"RLIMIT_CORE", 0}, {"RLIMIT_FSIZE", 100}},
		func(typ string) (uint64, bool) { v, ok := hard[typ]; return v, ok })
	want := []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Hard: 512, Soft: 512},
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
		{Type: "RLIMIT_FSIZE", Hard: 100, Soft: 100},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

func hasAll(opts []string, want ...string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(opts, func(o string) bool { return strings.EqualFold(o, w) }) {
			return false
		}
	}
	return true
}

func TestWithoutAWorkspaceTheWorkingDirectoryIsTmp(t *testing.T) {
	p := testPolicy()
	p.WorkspaceHostDir, p.HooksHostDir = "", ""
	s := generate(t, p)
	if s.Process.Cwd != "/tmp" {
		t.Errorf("cwd %s; want /tmp", s.Process.Cwd)
	}
	for _, m := range s.Mounts {
		if m.Destination == WorkspaceDir || m.Destination == pythonHooksDir {
			t.Errorf("mount at %s; want none", m.Destination)
		}
	}
}

func TestWithPythonHooks(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"A=1"}, []string{"A=1", "PYTHONPATH=" + pythonHooksDir}},
		{[]string{"PYTHONPATH=/opt/lib", "B=2"}, []string{"PYTHONPATH=" + pythonHooksDir + ":/opt/lib", "B=2"}},
		{[]string{"PYTHONPATH="}, []string{"PYTHONPATH=" + pythonHooksDir}},
	} {
		if got := WithPythonHooks(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("WithPythonHooks(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// The certificates a run with TLS interception trusts are bound in
// read-only, not executable.
func TestSpecTrustMount(t *testing.T) {
	p := testPolicy()
	p.TrustHostDir = "/var/lib/code-sandbox-mcp/run/x/trust"
	s := generate(t, p)
	i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == TrustDir })
	if i < 0 {
		t.Fatalf("no mount at %s", TrustDir)
	}
	m := s.Mounts[i]
	for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
		if !slices.Contains(m.Options, o) {
			t.Errorf("trust mount options %v lack %s", m.Options, o)
		}
	}
	if m.Source != p.TrustHostDir {
		t.Errorf("trust mount source %q", m.Source)
	}
	if slices.ContainsFunc(generate(t, testPolicy()).Mounts, func(m specs.Mount) bool { return m.Destination == TrustDir }) {
		t.Error("a trust mount without TrustHostDir")
	}
}

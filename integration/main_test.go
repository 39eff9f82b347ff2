// Package integration tests code-sandbox-mcp against a real containerd: a
// private daemon that TestMain starts for the run, in a temporary directory,
// with the language images imported into the namespace testNamespace.
//
// Run it with `make integration` (as root). The environment it reads:
//
//	SANDBOX_INTEGRATION  1: every piece below is required and a missing one
//	                     fails the run; 0: skip; unset: run if all is there,
//	                     else skip with a message.
//	SANDBOX_CONTAINERD   the containerd binary (default: containerd on PATH).
//	SANDBOX_SHIM_DIR     where its containerd-shim-runc-v2 is (default: the
//	                     binary's directory); put first on the daemon's PATH.
//	SANDBOX_IMAGES       image archives to import, separated by ':'.
//	SANDBOX_TEST_UIDS    the uid range the sandboxes run as (default
//	                     2100000000-2100065535); runs at once on one host
//	                     need ranges apart, 100 uids apart at least
//	                     (some tests take a few uids above the range).
//	SANDBOX_RUN          the daemon's version in the lane of
//	                     scripts/integration that this is (1.6 or 2.x),
//	                     for the logs; which tests a lane runs, its -run
//	                     says (see onBothDaemons).
//	SANDBOX_HOST_LOCK    a file the lanes of scripts/integration share:
//	                     a case that loads the whole host on purpose
//	                     (the eight bombs of case 27) holds an exclusive
//	                     lock on it while it runs (see holdHost), so
//	                     that no two lanes do so at once; unset, in one
//	                     lane alone, nothing is locked.
//	SANDBOX_HOST_ALONE   "later": case 27 (TestIsolationManyHostileRunsAtOnce)
//	                     skips itself, saying so: scripts/integration sets it
//	                     in its lanes and runs the case in a phase of
//	                     its own after them, alone on the host.
//	SANDBOX_TEST_RUNTIME_BINARY
//	                     the OCI runtime the runc shim runs ([containerd]
//	                     runtime_binary: "runc", "crun" or a path) for
//	                     every server and executor the tests start, the
//	                     testdata programs that make one included; unset
//	                     is the shim's default, runc.
//	SANDBOX_TEST_CGROUP_DRIVER
//	                     "cgroupfs" (the default) or "systemd" ([containerd]
//	                     cgroup_driver), for the same; the tests look for
//	                     a sandbox's cgroup where that driver puts it (see
//	                     sandboxCgroup). systemd needs systemd as pid 1.
//	SANDBOX_TEST_NO_POOLS
//	                     1: the servers the tests start keep no ready
//	                     sandboxes (see testNoPools), for a host as slow
//	                     as software emulation.
//	SANDBOX_TEST_TIME_SCALE
//	                     N (1 to 10, default 1): the deadlines of the cases
//	                     that would not hold on a host that slow are N
//	                     times longer (see testTimeScale).
//	SANDBOX_NODE, SANDBOX_NODE_MODULES
//	                     Node.js 22 and the node_modules directory of
//	                     integration/node's npm packages (the MCP
//	                     conformance suite, the TypeScript SDK), which
//	                     `scripts/setup node` installs and prints; only
//	                     the tests that run them need them (see
//	                     nodeTools), and under SANDBOX_INTEGRATION=1 such
//	                     a test fails without them.
//	SANDBOX_PREBUILT     a directory of the programs the tests would build
//	                     with go build, for a host with no Go toolchain
//	                     (or built once for all the lanes, as
//	                     scripts/integration does): each is taken from
//	                     DIR/NAME instead, and a missing one fails the
//	                     test that needs it, saying how to build it (a
//	                     suite built with -race wants the server built
//	                     with -race too). The names (see prebuiltNames):
//	                     code-sandbox-mcp (the server: go build -o
//	                     DIR/code-sandbox-mcp ./cmd/code-sandbox-mcp),
//	                     crashserver, leftshim, hello, stubsh and exitsh
//	                     (CGO_ENABLED=0 go build -o DIR/NAME
//	                     ./integration/testdata/NAME), and the sandboxes'
//	                     init, code-sandbox-init (see initBinary).
//	SANDBOX_CONTAINERD_ROOT
//	                     the shared daemon's containerd root, instead of
//	                     a new one in the harness directory: the images
//	                     found there are not imported again (the VM's
//	                     roots are seeded by scripts/seed); one that does
//	                     not exist starts as a copy of
//	                     SANDBOX_CONTAINERD_TEMPLATE, if set, with
//	                     layers of its own where the template has links
//	                     (see ownLayers). Teardown
//	                     deletes every
//	                     container, task and active snapshot of
//	                     testNamespace in it, and keeps the root and its
//	                     images; so does the start
//	                     of the next run, for what a killed run left
//	                     there. One run at a time may use a root.
//	SANDBOX_CONTAINERD_TEMPLATE
//	                     a stopped daemon's root, made by this daemon's
//	                     version, with the images imported and unpacked
//	                     in testNamespace (scripts/seed makes it;
//	                     scripts/integration keeps one per daemon
//	                     version in CACHE/roots, and gives every lane of
//	                     that version a copy of the run's own, its
//	                     layers' directories symbolic links to where
//	                     the run keeps them): the shared daemon's root,
//	                     a new one, starts as a copy of it, and so does
//	                     the fault tests' template (see copyRoot: hard
//	                     links for the content and the unpacked layers,
//	                     which no daemon writes in place, links copied
//	                     as links), where each daemon imported and
//	                     unpacked the images itself, some 30 s of CPU
//	                     each.
//	SANDBOX_FAULT_NAMESPACE
//	                     the namespace of the fault tests' private
//	                     daemons (see faultNamespace), instead of one of
//	                     the run's own; where SANDBOX_CONTAINERD_TEMPLATE
//	                     holds the python image unpacked in it, as
//	                     scripts/integration seeds it (one namespace per
//	                     daemon version), their roots are copies of the
//	                     template, and no run unpacks the image again.
//	                     Two runs at once must not share one.
//
// The runtime choice is logged once, as the harness starts.
//
// The executor's tests drive package exec; the MCP, isolation, fault and
// benchmark tests drive the real binary over stdio, as a client would, and
// never import its code. Each fault test (faults_test.go) runs the binary
// against a daemon of its own, which it kills, stops and restarts.
package integration

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/containerd/containerd/v2/pkg/identifiers"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/images"
	"code-sandbox-mcp/containers/sandboxinit"
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	cfg, err := harnessConfigFromEnv()
	if err != nil {
		var skip skipError
		if errors.As(err, &skip) {
			fmt.Fprintf(os.Stderr, "integration tests skipped: %v; set SANDBOX_INTEGRATION=1 to require them (make integration)\n", err)
			return 0
		}
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}

	h := &harness{cfg: cfg}
	hadNetnsMount := slices.Contains(mountsUnder(netnsDir), netnsDir)
	var once sync.Once
	teardown := func() error {
		var err error
		once.Do(func() {
			err = h.teardown()
			if !hadNetnsMount {
				releaseNetnsDir()
			}
		})
		return err
	}
	// An interrupted run still cleans up. A test's panic or go test's
	// -timeout kills the process without running this; the next run's
	// sweepStale removes what such a run left.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "integration: %v: cleaning up\n", s)
		if err := teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: teardown: %v\n", err)
		}
		os.Exit(1)
	}()

	if err := h.start(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		h.dumpLog()
		if err := teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: teardown: %v\n", err)
		}
		return 1
	}
	code := m.Run()
	if code != 0 {
		h.dumpLog()
	}
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: teardown: %v\n", err)
		h.dumpLog()
		code = 1
	}
	signal.Stop(sigs)
	return code
}

// netnsDir is where ip netns add keeps its namespaces. The first add
// on a host makes the directory a mount of its own (bound onto itself,
// to share its mounts), which ip netns del leaves.
const netnsDir = "/run/netns"

// releaseNetnsDir unmounts netnsDir, for a run that found it no mount
// and whose network tests (ip netns add) made it one, once it holds no
// namespace: while the other daemon's run, alongside, still holds one,
// it is left for that run's end, which finds it bound too and tries
// again. A namespace added meanwhile keeps working: its bind mount
// stays, on the directory beneath.
func releaseNetnsDir() {
	for range 4 {
		mounts := mountsUnder(netnsDir)
		if len(mounts) == 0 || slices.ContainsFunc(mounts, func(m string) bool { return m != netnsDir }) {
			return
		}
		if err := syscall.Unmount(netnsDir, 0); err != nil {
			if !errors.Is(err, syscall.EBUSY) {
				fmt.Fprintf(os.Stderr, "integration: unmount %s, which ip netns add bound onto itself: %v\n", netnsDir, err)
			}
			return
		}
	}
}

// skipError is a missing piece that makes an optional run skip.
type skipError struct{ error }

// harnessConfig is what the environment asks for.
type harnessConfig struct {
	containerd string   // the daemon's binary
	shimDir    string   // put first on the daemon's PATH
	images     []string // archives to import
	// root is SANDBOX_CONTAINERD_ROOT: the shared daemon's root, if not
	// a new one.
	root string
	// template is SANDBOX_CONTAINERD_TEMPLATE: a root a new root starts
	// as a copy of, if any.
	template string
	// faultNamespace is SANDBOX_FAULT_NAMESPACE: the namespace of the
	// fault tests' daemons, if not one of the run's own.
	faultNamespace string
}

// Set from the environment by harnessConfigFromEnv, before any test runs.
var (
	// testRuntimeBinary is SANDBOX_TEST_RUNTIME_BINARY; "" is the runc
	// shim's default.
	testRuntimeBinary string
	// testCgroupDriver is SANDBOX_TEST_CGROUP_DRIVER, config's cgroupfs
	// when unset.
	testCgroupDriver = config.CgroupDriverCgroupfs
	// prebuiltDir is SANDBOX_PREBUILT; "" builds every program.
	prebuiltDir string
	// testInit is code-sandbox-init, built by the harness into the
	// directory of the servers it builds (see initBinary).
	testInit string
)

// harnessConfigFromEnv reads the environment. Its error is a skipError when
// the run is optional and something it needs is missing.
func harnessConfigFromEnv() (harnessConfig, error) {
	var cfg harnessConfig
	required := false
	switch v := os.Getenv("SANDBOX_INTEGRATION"); v {
	case "1":
		required = true
	case "0":
		return cfg, skipError{errors.New("SANDBOX_INTEGRATION=0")}
	case "":
	default:
		return cfg, fmt.Errorf("SANDBOX_INTEGRATION=%q: want 1, 0 or unset", v)
	}
	missing := func(format string, args ...any) (harnessConfig, error) {
		err := fmt.Errorf(format, args...)
		if required {
			return cfg, fmt.Errorf("SANDBOX_INTEGRATION=1 but %w", err)
		}
		return cfg, skipError{err}
	}

	if os.Geteuid() != 0 {
		return missing("not root (the tests create containers, mounts and cgroups)")
	}
	cfg.containerd = os.Getenv("SANDBOX_CONTAINERD")
	if cfg.containerd == "" {
		p, err := exec.LookPath("containerd")
		if err != nil {
			return missing("SANDBOX_CONTAINERD is unset and there is no containerd on PATH")
		}
		cfg.containerd = p
	}
	if fi, err := os.Stat(cfg.containerd); err != nil || fi.Mode()&0o111 == 0 {
		return missing("containerd binary %s is missing or not executable (SANDBOX_CONTAINERD)", cfg.containerd)
	}
	cfg.shimDir = os.Getenv("SANDBOX_SHIM_DIR")
	if cfg.shimDir == "" {
		cfg.shimDir = filepath.Dir(cfg.containerd)
	}
	if _, err := os.Stat(filepath.Join(cfg.shimDir, "containerd-shim-runc-v2")); err != nil {
		return missing("no containerd-shim-runc-v2 in %s (SANDBOX_SHIM_DIR)", cfg.shimDir)
	}
	if v := os.Getenv("SANDBOX_CONTAINERD_ROOT"); v != "" {
		if !filepath.IsAbs(v) {
			return cfg, fmt.Errorf("SANDBOX_CONTAINERD_ROOT=%s is not an absolute path", v)
		}
		cfg.root = v
	}
	if v := os.Getenv("SANDBOX_CONTAINERD_TEMPLATE"); v != "" {
		if !filepath.IsAbs(v) {
			return cfg, fmt.Errorf("SANDBOX_CONTAINERD_TEMPLATE=%s is not an absolute path", v)
		}
		if _, err := os.Stat(filepath.Join(v, "io.containerd.metadata.v1.bolt", "meta.db")); err != nil {
			return cfg, fmt.Errorf("SANDBOX_CONTAINERD_TEMPLATE=%s is no containerd root (scripts/seed makes one): %w", v, err)
		}
		cfg.template = v
	}
	cfg.faultNamespace = os.Getenv("SANDBOX_FAULT_NAMESPACE")
	if err := identifiers.Validate(cfg.faultNamespace); cfg.faultNamespace != "" && err != nil {
		return cfg, fmt.Errorf("SANDBOX_FAULT_NAMESPACE=%s: %w", cfg.faultNamespace, err)
	}
	for _, p := range strings.Split(os.Getenv("SANDBOX_IMAGES"), ":") {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return missing("image archive %s: %v (SANDBOX_IMAGES)", p, err)
		}
		cfg.images = append(cfg.images, p)
	}
	if len(cfg.images) == 0 && cfg.root == "" && cfg.template == "" {
		return missing("SANDBOX_IMAGES names no image archives (scripts/setup archives builds them)")
	}
	return cfg, testSettingsFromEnv()
}

// testSettingsFromEnv sets the tests' settings from the environment: the
// runtime binary and cgroup driver under test, the time scale, whether
// pools are off, the prebuilt binaries and the uid range.
func testSettingsFromEnv() error {
	testRuntimeBinary = os.Getenv("SANDBOX_TEST_RUNTIME_BINARY")
	switch v := os.Getenv("SANDBOX_TEST_CGROUP_DRIVER"); v {
	case "":
	case config.CgroupDriverCgroupfs, config.CgroupDriverSystemd:
		testCgroupDriver = v
	default:
		return fmt.Errorf("SANDBOX_TEST_CGROUP_DRIVER=%q: want %q or %q", v, config.CgroupDriverCgroupfs, config.CgroupDriverSystemd)
	}
	if _, err := config.Parse(testContainerdTOML(), "SANDBOX_TEST_RUNTIME_BINARY"); err != nil {
		return err
	}
	if v := os.Getenv("SANDBOX_TEST_TIME_SCALE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10 {
			return fmt.Errorf("SANDBOX_TEST_TIME_SCALE=%q: want a whole number from 1 to 10", v)
		}
		testTimeScale = n
	}
	switch v := os.Getenv("SANDBOX_TEST_NO_POOLS"); v {
	case "", "0":
	case "1":
		testNoPools = true
	default:
		return fmt.Errorf("SANDBOX_TEST_NO_POOLS=%q: want 1 or unset", v)
	}
	if v := os.Getenv("SANDBOX_PREBUILT"); v != "" {
		if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
			return fmt.Errorf("SANDBOX_PREBUILT=%s is not a directory", v)
		}
		prebuiltDir = v
	}
	if v := os.Getenv("SANDBOX_TEST_UIDS"); v != "" {
		r, err := config.ParseUIDRange(v)
		if err != nil {
			return fmt.Errorf("SANDBOX_TEST_UIDS: %w", err)
		}
		testUIDs = r
	}
	return nil
}

// ensureImages imports the archives unless every image the tests use is
// already in the namespace.
func ensureImages(ctx context.Context, h *harness) error {
	if haveImages(ctx) == nil {
		return nil
	}
	for _, p := range h.cfg.images {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		names, err := images.Import(ctx, testClient, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("import %s: %w", p, err)
		}
		fmt.Fprintf(os.Stderr, "integration: imported %s: %s\n", filepath.Base(p), strings.Join(names, ", "))
	}
	if err := haveImages(ctx); err != nil {
		return fmt.Errorf("after importing %s: %w", strings.Join(h.cfg.images, ", "), err)
	}
	return nil
}

// haveImages reports an error naming the first test image that is missing.
func haveImages(ctx context.Context) error {
	for _, ref := range testImages {
		if _, err := testClient.GetImage(ctx, ref); err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
	}
	return nil
}

// daemonPart is a part of containerd whose behaviour differs between 1.6
// and 2.x and on which a test's outcome can rest.
type daemonPart string

// The parts, each with what differs between the versions.
const (
	// daemonEvents: the events service. Task exit and OOM events (which
	// shim publishes them, in what order beside the task's delete),
	// subscriptions across a daemon's restart.
	daemonEvents daemonPart = "events"
	// daemonTasks: the task service and its shim, beyond a plain start,
	// wait and delete: exec into a live task (sessions, warm starts),
	// kill and signals, a task deleted with processes left in it, the
	// shim's io, the runtime binary the shim runs.
	daemonTasks daemonPart = "task service"
	// daemonImages: the content store, snapshotters and leases. Import,
	// unpack, pull (client-side in both, through a transfer service only
	// in 2.x), the root file system's mounts, what a sweep or a delete
	// leaves of snapshots.
	daemonImages daemonPart = "images and snapshots"
	// daemonLifecycle: the daemon itself killed, stopped, restarted, down
	// when the server starts, or hanging; what a shim and its task do
	// meanwhile, and what a server finds after it.
	daemonLifecycle daemonPart = "daemon lifecycle"
)

// onBothDaemons says that t's outcome rests on part of containerd.
// scripts/integration runs every test against 2.x; it runs against 1.6
// too the tests that call onBothDaemons as the first statement of their
// body, and the isolation suite's (eachMode, a statement of the body):
// integration/lanes reads the source for them, and refuses a call placed
// elsewhere. What rests on none of the parts (the MCP front and its
// transports, HTTP and tokens, files, the audit log, the server's own
// limits, the interpreters) runs against 2.x alone: the server's calls
// to containerd are the same code whatever the test drives through them,
// and the tests that call onBothDaemons drive each of those calls against
// both versions.
func onBothDaemons(t *testing.T, part daemonPart) {
	t.Helper()
	if v := os.Getenv("SANDBOX_RUN"); v != "" {
		t.Logf("runs against containerd 1.6 and 2.x (this run: %s): its outcome rests on the daemon's %s", v, part)
	}
}

// prebuiltNames are the programs SANDBOX_PREBUILT must hold: the server
// and the testdata programs the tests build.
var prebuiltNames = []string{"code-sandbox-mcp", "crashserver", "leftshim", "hello", "stubsh", "exitsh"}

// goBuild puts the program name at out: go build of pkg (with flags, in
// dir, with env added to this process's), or, under SANDBOX_PREBUILT, a
// copy of DIR/name, which a host without Go provides, or
// scripts/integration, once for all its lanes.
func goBuild(dir, name, out, pkg string, flags, env []string) error {
	if !slices.Contains(prebuiltNames, name) {
		// So that the list, and the package doc the VM script reads,
		// name every program a test builds.
		return fmt.Errorf("%s is not in prebuiltNames; add it there and to the package doc's SANDBOX_PREBUILT", name)
	}
	if prebuiltDir != "" {
		src := filepath.Join(prebuiltDir, name)
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("SANDBOX_PREBUILT: %w; build it with `CGO_ENABLED=0 go build -o %s %s` from the repository's root", err, src, prebuiltPackage(name))
		}
		// A suite built with -race runs a server built with it
		// (race_test.go), prebuilt or not.
		if slices.Contains(flags, "-race") {
			info, err := buildinfo.ReadFile(src)
			if err != nil || !slices.Contains(info.Settings, debug.BuildSetting{Key: "-race", Value: "true"}) {
				return fmt.Errorf("SANDBOX_PREBUILT: %s was not built with -race (%v), and this suite was: build it with `go build -race -o %s %s` from the repository's root", src, err, src, prebuiltPackage(name))
			}
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o755)
	}
	cmd := exec.Command("go", append(append(append([]string{"build"}, flags...), "-o", out), pkg)...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// initBinary puts code-sandbox-init at out: built with the host's C
// compiler (containers/sandboxinit), or, under SANDBOX_PREBUILT, a copy
// of DIR/code-sandbox-init.
func initBinary(out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if prebuiltDir == "" {
		return sandboxinit.Build(out)
	}
	b, err := os.ReadFile(filepath.Join(prebuiltDir, sandboxinit.Name))
	if err != nil {
		return fmt.Errorf("SANDBOX_PREBUILT: %w; build it with `cc %s -o %s containers/sandboxinit/src/init.c` from the repository's root", err, strings.Join(sandboxinit.Flags(), " "), filepath.Join(prebuiltDir, sandboxinit.Name))
	}
	return os.WriteFile(out, b, 0o755)
}

// prebuiltPackage is the package of the program name, from the
// repository's root.
func prebuiltPackage(name string) string {
	if name == "code-sandbox-mcp" {
		return "./cmd/code-sandbox-mcp"
	}
	return "./integration/testdata/" + name
}

// testNoPools is SANDBOX_TEST_NO_POOLS=1: servers the tests start keep
// no ready sandboxes (pool = 0 for both languages), unless the test's
// own configuration names a language's table. Under software emulation
// (make test-cgroupv2's VM) a warm refill costs seconds of CPU, starving
// the runs under test, and a server's exit must delete its pools within
// the bounds of its own Close and of the MCP client's shutdown (5 s in
// all): both fail there for time alone. A sandbox made on demand has the
// same spec, limits and cgroup as a pool's.
var testNoPools bool

// testPoolsTOML is the languages' pools for a server's configuration
// config, unless config has a language's own table (a test of pools says
// what it wants). With ready (serverSpec.ready), and not under
// testNoPools, it is one ready sandbox a language, python's without
// preloads: a one-shot run then takes the path a run in the default's
// pools does (the ready kind, without preloads, for a program that names
// none). The isolation cases ask for it (mode.start), and so do the tests
// of a run over MCP as a client sees it by default (TestMCPRuns) and of
// the metrics that count the pools' takes; the tests of the pools
// themselves, of warm interpreters and of preloads set their own. The other servers keep none: their subject is the MCP front,
// its transports, files, sessions or limits, which meet the same runs
// either way, and a pool's sandboxes, made at every server start and
// after every run and destroyed unused at its exit, were two of the three
// sandboxes of a test of one run, on a host whose CPU bounds the suite's
// time. (The default's two a language, python's second with numpy and
// pandas imported, were once most of the sandboxes the suite made.)
func testPoolsTOML(config string, ready bool) string {
	switch {
	case strings.Contains(config, "[languages.python]") || strings.Contains(config, "[languages.javascript]"):
		return ""
	case testNoPools || !ready:
		return "\n[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n"
	default:
		return "\n[languages.python]\npool = 1\npreload = []\n[languages.javascript]\npool = 1\n"
	}
}

// testTimeScale is SANDBOX_TEST_TIME_SCALE: how many times longer than
// on a real host the deadlines of the cases that run against one are
// (the hostile runs' timeout_seconds, the timeout test's, the normal run
// after a hostile one). Under software emulation Node.js takes seconds to
// start, longer than a 3 s deadline; what the cases assert stays the same.
var testTimeScale = 1

// scaled is sec seconds times testTimeScale, at most max_timeout's
// default (120 s).
func scaled(sec int) int {
	return min(sec*testTimeScale, max(sec, 120))
}

// testContainerdTOML is the [containerd] table of the runtime knobs, for
// a server's configuration; empty when neither is set.
func testContainerdTOML() string {
	if testRuntimeBinary == "" && testCgroupDriver == config.CgroupDriverCgroupfs {
		return ""
	}
	return fmt.Sprintf("[containerd]\nruntime_binary = %q\ncgroup_driver = %q\n", testRuntimeBinary, testCgroupDriver)
}

// withTestRuntime gives every language of langs that does not choose its
// own the runtime binary and cgroup driver of the knobs.
func withTestRuntime(langs []config.Language) []config.Language {
	for i := range langs {
		if langs[i].RuntimeBinary == "" {
			langs[i].RuntimeBinary = testRuntimeBinary
		}
		if langs[i].CgroupDriver == "" {
			langs[i].CgroupDriver = testCgroupDriver
		}
	}
	return langs
}

// runtimeChoice says which runtime and cgroup driver the tests use.
func runtimeChoice() string {
	bin := testRuntimeBinary
	if bin == "" {
		bin = "the shim's default (runc)"
	}
	return fmt.Sprintf("runtime binary %s, cgroup driver %s", bin, testCgroupDriver)
}

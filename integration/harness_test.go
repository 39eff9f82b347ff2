package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/sandboxinit"
	sandboxoci "code-sandbox-mcp/oci"
)

// testNamespace is the containerd namespace every test object lives in.
const testNamespace = "code-sandbox-test"

// The images the tests run, as SANDBOX_IMAGES provides them.
const (
	pythonImage = "localhost/code-sandbox-mcp/python:trixie"
	nodejsImage = "localhost/code-sandbox-mcp/nodejs:trixie"
)

var testImages = []string{pythonImage, nodejsImage}

// Set by TestMain before any test runs.
var (
	// testAddress is the private daemon's socket, for exec.Config.Address.
	testAddress string
	// testClient is connected to the private daemon, with testNamespace as
	// its default namespace. Tests must not close it.
	testClient *containerd.Client
	// testDir is the harness's temporary directory: the daemon's root,
	// state, socket and log, and the tests' state directories.
	testDir string
	// testShimDir is where the daemon's shim should come from.
	testShimDir string
	// testDaemon is the private daemon's process, which fault tests may
	// stop (SIGSTOP) and continue.
	testDaemon *os.Process
	// testHarness is the shared daemon's harness; fault tests start more
	// daemons like it (see newPrivateDaemon).
	testHarness *harness
)

// harnessPrefix starts the name of every harness directory, so that a run
// can find what a killed run left (see sweepStale).
const harnessPrefix = "code-sandbox-it-"

// testContext returns a context in testNamespace that ends with the test,
// or after two minutes.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), testNamespace)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newStateDir returns a new, empty directory for an executor's StateDir,
// under the harness directory; it is removed when the test ends.
func newStateDir(t testing.TB) string {
	t.Helper()
	parent := filepath.Join(testDir, "states")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(parent, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Never remove through a mount: that would delete what it shows.
		if m := mountsUnder(dir); len(m) > 0 {
			t.Errorf("state dir %s: got mounts %v at cleanup; want none", dir, m)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// assertNoLeftovers checks that nothing of a run is left: in testNamespace
// no container, no task, no snapshot but committed (image layer) ones; no
// shim of the private daemon; no mount under the harness directory; and, if
// stateDir is not empty, nothing in stateDir. It allows shims a few seconds
// to exit, since deleting a task does not wait for its shim.
func assertNoLeftovers(t testing.TB, stateDir string) {
	t.Helper()
	testHarness.assertNoLeftovers(t, stateDir)
}

// assertNoLeftovers is the package's assertNoLeftovers for h's daemon: its
// namespace, its shims, the mounts under its directory.
func (h *harness) assertNoLeftovers(t testing.TB, stateDir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), h.namespace), time.Minute)
	defer cancel()

	h.assertNoHostLeftovers(t, stateDir, h.assertNoObjects(t, ctx))
	if stateDir != "" {
		entries, err := os.ReadDir(stateDir)
		if err != nil {
			t.Fatalf("read state dir: %v", err)
		}
		if len(entries) > 0 {
			names := make([]string, len(entries))
			for i, e := range entries {
				names[i] = e.Name()
			}
			t.Errorf("state dir %s: got %v; want empty", stateDir, names)
		}
	}
}

// assertNoObjects is assertNoLeftovers' check of the daemon's namespace:
// no container, no task, no active snapshot. It reports whether tasks
// were left.
func (h *harness) assertNoObjects(t testing.TB, ctx context.Context) (tasksLeft bool) {
	t.Helper()
	cs, err := h.client.Containers(ctx)
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	if len(cs) > 0 {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.ID()
		}
		t.Errorf("containers in %s: got %v; want none", h.namespace, ids)
		h.logAbout(t, ids)
	}

	ts, err := h.client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		t.Fatalf("list tasks: %v", err)
	}
	if len(ts.Tasks) > 0 {
		var ids, names []string
		for _, task := range ts.Tasks {
			ids = append(ids, fmt.Sprintf("%s (pid %d, %v)", task.ID, task.Pid, task.Status))
			names = append(names, task.ID)
		}
		t.Errorf("tasks in %s: got %v; want none", h.namespace, ids)
		h.logAbout(t, names)
	}

	active, err := activeSnapshots(ctx, h.client)
	if err != nil {
		t.Fatalf("walk snapshots: %v", err)
	}
	if len(active) > 0 {
		t.Errorf("active or view snapshots in %s: got %v; want none (only committed image layers)", h.namespace, active)
	}
	return len(ts.Tasks) > 0
}

// assertNoHostLeftovers is assertNoLeftovers' check of the host: no shim
// of the daemon (a few seconds allowed unless tasksLeft), no mount under
// its directory but other tests' state directories.
func (h *harness) assertNoHostLeftovers(t testing.TB, stateDir string, tasksLeft bool) {
	t.Helper()
	// A shim exits shortly after its task is deleted; a live task keeps it.
	wait := 5 * time.Second
	if tasksLeft {
		wait = 0
	}
	var shims []string
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		if shims = shimsOf(h.address); len(shims) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(shims) > 0 {
		t.Errorf("shims of the test daemon: got %v; want none", shims)
	}
	// The shim unmounts a task's root file system before its Delete returns.
	// Another test's state directory is that test's to report (newStateDir
	// checks it as the test ends): a leak fails the test that made it, not
	// every test after it.
	states := filepath.Join(testDir, "states") + "/"
	mounts := slices.DeleteFunc(mountsUnder(h.dir), func(mp string) bool {
		return strings.HasPrefix(mp, states) && (stateDir == "" || mp != stateDir && !strings.HasPrefix(mp, stateDir+"/"))
	})
	if len(mounts) > 0 {
		t.Errorf("mounts under %s: got %v; want none", h.dir, mounts)
		h.logAbout(t, runIDs.FindAllString(strings.Join(mounts, " "), -1))
	}
}

// activeSnapshots lists, as "snapshotter/key", every snapshot in ctx's
// namespace that is not committed, in every snapshotter client's daemon
// loaded. Committed snapshots are unpacked image layers; an active or view
// snapshot is a container's root file system (or a half-done unpack).
func activeSnapshots(ctx context.Context, client *containerd.Client) ([]string, error) {
	var out []string
	err := walkSnapshots(ctx, client, func(snapshotter string, info snapshots.Info) {
		if info.Kind != snapshots.KindCommitted {
			out = append(out, snapshotter+"/"+info.Name)
		}
	})
	return out, err
}

// walkSnapshots calls fn with every snapshot in ctx's namespace, in every
// snapshotter client's daemon loaded.
func walkSnapshots(ctx context.Context, client *containerd.Client, fn func(snapshotter string, info snapshots.Info)) error {
	resp, err := client.IntrospectionService().Plugins(ctx, `type=="io.containerd.snapshotter.v1"`)
	if err != nil {
		return err
	}
	for _, p := range resp.Plugins {
		if p.InitErr != nil {
			continue
		}
		err := client.SnapshotService(p.ID).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
			fn(p.ID, info)
			return nil
		})
		if err != nil {
			return fmt.Errorf("snapshotter %s: %w", p.ID, err)
		}
	}
	return nil
}

// harness is a private daemon and what it needs: the one TestMain starts
// for the run, or one a fault test starts for itself (newPrivateDaemon).
type harness struct {
	cfg  harnessConfig
	dir  string   // the daemon's root, state, socket, config and log
	lock *os.File // flock held while the run lives; see sweepStale
	// address is the daemon's socket, namespace the one the tests use in
	// it, client a client of it with that namespace as its default.
	address, namespace string
	client             *containerd.Client
	daemon             *exec.Cmd
	exited             chan struct{} // closed when the daemon has exited
	// ids of every container the teardown found, for runc and cgroups.
	ids []string
	// root is the daemon's root when it is not dir/root: the shared
	// daemon's under SANDBOX_CONTAINERD_ROOT, kept with its images.
	root string
	// stopProfile ends recordCreates, under SANDBOX_PROFILE_EVENTS.
	stopProfile context.CancelFunc
}

func (h *harness) logPath() string { return filepath.Join(h.dir, "containerd.log") }

// start sweeps what killed runs left, starts the daemon, connects
// testClient and imports the images.
func (h *harness) start() error {
	sweepStale()

	h.namespace = testNamespace
	h.root = h.cfg.root
	dir, err := os.MkdirTemp("", harnessPrefix)
	if err != nil {
		return err
	}
	h.dir, testDir, testShimDir = dir, dir, h.cfg.shimDir
	testHarness = h
	// The servers the tests start find the init beside them, in bin;
	// the executors the tests make in this process are given it.
	testInit = filepath.Join(dir, "bin", sandboxinit.Name)
	if err := initBinary(testInit); err != nil {
		return err
	}
	h.lock, err = os.Create(filepath.Join(dir, "lock"))
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(h.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("lock %s: %w", h.lock.Name(), err)
	}

	h.address = filepath.Join(dir, "containerd.sock")
	testAddress = h.address
	if err := h.fromTemplate(); err != nil {
		return err
	}
	if err := h.launch(); err != nil {
		return err
	}
	testDaemon = h.daemon.Process
	if err := h.connect(); err != nil {
		return err
	}
	testClient = h.client
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), testNamespace), 5*time.Minute)
	defer cancel()
	v, err := testClient.Version(ctx)
	if err != nil {
		return fmt.Errorf("containerd version: %w", err)
	}
	fmt.Fprintf(os.Stderr, "integration: containerd %s (%s), shims from %s, socket %s; %s\n",
		v.Version, h.cfg.containerd, h.cfg.shimDir, testAddress, runtimeChoice())
	if h.root != "" {
		// A run killed in mid-test left its objects in the kept root.
		fmt.Fprintf(os.Stderr, "integration: containerd root %s (SANDBOX_CONTAINERD_ROOT), kept\n", h.root)
		if err := h.deleteContainers(); err != nil {
			return fmt.Errorf("clear what a killed run left in %s: %w", h.root, err)
		}
		if len(h.ids) > 0 {
			fmt.Fprintf(os.Stderr, "integration: deleted %d containers a killed run left in %s\n", len(h.ids), h.root)
			removeCgroups(h.namespace, deleteRuncState(h.dir, h.namespace, h.ids))
			h.ids = nil
		}
	}
	if path := os.Getenv("SANDBOX_PROFILE_EVENTS"); path != "" {
		var pctx context.Context
		pctx, h.stopProfile = context.WithCancel(namespaces.WithNamespace(context.Background(), testNamespace))
		if err := recordCreates(pctx, testClient, path); err != nil {
			return fmt.Errorf("SANDBOX_PROFILE_EVENTS: %w", err)
		}
	}
	return ensureImages(ctx, h)
}

// fromTemplate makes the daemon's root a copy of SANDBOX_CONTAINERD_TEMPLATE,
// if set and the root does not exist yet.
func (h *harness) fromTemplate() error {
	if h.cfg.template == "" {
		return nil
	}
	root := h.root
	if root == "" {
		root = filepath.Join(h.dir, "root")
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	start := time.Now()
	if err := copyRoot(h.cfg.template, root); err != nil {
		return fmt.Errorf("SANDBOX_CONTAINERD_TEMPLATE: %w", err)
	}
	if h.root != "" {
		if err := ownLayers(root); err != nil {
			return fmt.Errorf("SANDBOX_CONTAINERD_TEMPLATE's layers into SANDBOX_CONTAINERD_ROOT: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "integration: containerd root %s copied from %s (SANDBOX_CONTAINERD_TEMPLATE) in %s\n", root, h.cfg.template, time.Since(start).Round(time.Millisecond))
	return nil
}

// launch writes the daemon's config and starts it, on h.dir and
// h.address; the log is appended to, so a restart keeps the earlier one.
func (h *harness) launch() error {
	config := filepath.Join(h.dir, "config.toml")
	root := h.root
	if root == "" {
		root = filepath.Join(h.dir, "root")
	}
	if err := os.WriteFile(config, []byte(daemonConfig(root, filepath.Join(h.dir, "state"), h.address)), 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(h.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()

	cmd := exec.Command(h.cfg.containerd, "--config", config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = daemonEnv(h.cfg.shimDir)
	// Its own process group keeps a terminal's Ctrl-C for us (we clean up);
	// Pdeathsig ends it if this process dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the thread that started the child exits: the
	// goroutine that starts it keeps its thread, locked, until the daemon
	// has exited, so the Go runtime cannot retire that thread before.
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", h.cfg.containerd, err)
	}
	h.daemon, h.exited = cmd, exited
	return nil
}

// connect waits up to 20 s for the daemon to answer and connects h.client.
func (h *harness) connect() error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-h.exited:
			return fmt.Errorf("containerd exited at start-up (%v); its log is below", h.daemon.ProcessState)
		default:
		}
		if _, err := os.Stat(h.address); err == nil {
			c, err := containerd.New(h.address,
				containerd.WithDefaultNamespace(h.namespace),
				containerd.WithTimeout(2*time.Second))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = c.Version(ctx)
				cancel()
				if err == nil {
					h.client = c
					return nil
				}
				c.Close()
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("containerd at %s does not answer after 20 s: %v", h.address, err)
			}
		} else if time.Now().After(deadline) {
			return fmt.Errorf("containerd made no socket at %s in 20 s", h.address)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// daemonConfig is a containerd config with root and state where given
// (under the harness directory but for SANDBOX_CONTAINERD_ROOT) that loads
// nothing the tests do not need. Version 2 is read by 1.6 and
// migrated by 2.x. Unknown ids in disabled_plugins are ignored, so the
// list names both generations' plugins.
func daemonConfig(root, state, address string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = [
  # CRI: io.containerd.grpc.v1.cri in 1.6; 2.x split it in three.
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  # NRI (2.x) listens on /var/run/nri/nri.sock, shared with the system daemon.
  "io.containerd.nri.v1.nri",
  # opt (1.6) installs into /opt/containerd.
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""
  # What a leftover's id finds in this log is shown when a test fails.
  level = "debug"

[metrics]
  address = ""
`, root, state, address, address+".ttrpc")
}

// daemonEnv is this process's environment with shimDir first on PATH:
// both 1.6 and 2.x look the shim up on PATH, and only then next to their
// own binary.
func daemonEnv(shimDir string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=")
	})
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return append(env, "PATH="+shimDir+string(os.PathListSeparator)+path)
}

// runIDs finds the ids of our sandboxes in a text, such as a path.
var runIDs = regexp.MustCompile(`csm-[0-9a-f]+`)

// logAbout logs the last lines of the daemon's log that name one of ids:
// what the daemon and the shims said of a sandbox a test found left over.
func (h *harness) logAbout(t testing.TB, ids []string) {
	t.Helper()
	b, err := os.ReadFile(h.logPath())
	if err != nil || len(ids) == 0 {
		return
	}
	var found [][]byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		for _, id := range ids {
			if bytes.Contains(line, []byte(id)) {
				found = append(found, line)
				break
			}
		}
	}
	found = found[max(0, len(found)-80):]
	t.Logf("%s on %v:\n%s", h.logPath(), ids, bytes.Join(found, nil))
}

// dumpLog writes the tail of the daemon's log to stderr.
func (h *harness) dumpLog() {
	if h.dir == "" {
		return
	}
	b, err := os.ReadFile(h.logPath())
	if err != nil {
		return
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[max(0, len(lines)-40):]
	fmt.Fprintf(os.Stderr, "integration: tail of %s:\n%s\n", h.logPath(), bytes.Join(lines, nil))
}

// teardown deletes what tests left in the daemon, stops it, and removes
// every trace of the run: shims, runc state, mounts, cgroups, the directory.
// It goes on after an error and returns them all.
func (h *harness) teardown() error {
	var errs []error
	start := time.Now()
	if h.stopProfile != nil {
		h.stopProfile()
	}
	if h.client != nil {
		errs = append(errs, h.deleteContainers())
		h.client.Close()
		h.client = nil
	}
	if h.daemon != nil {
		errs = append(errs, h.stopDaemon())
	}
	if h.dir == "" {
		return errors.Join(errs...)
	}
	stopped := time.Now()
	if held, err := heldUIDClaims(filepath.Join(h.dir, "uids")); err != nil || len(held) > 0 {
		errs = append(errs, fmt.Errorf("uid claims still held at the end: %v (%v)", held, err))
	}
	killProcesses(func(args []string) bool { return isShim(args) && slices.Contains(args, h.address) })
	ids := deleteRuncState(h.dir, h.namespace, h.ids)
	errs = append(errs, unmountUnder(h.dir))
	errs = append(errs, removeCgroups(h.namespace, ids))
	swept := time.Now()
	if m := mountsUnder(h.dir); len(m) > 0 {
		errs = append(errs, fmt.Errorf("not removing %s: still mounted: %v", h.dir, m))
	} else if err := removeLockedDir(h.dir); err != nil {
		errs = append(errs, err)
	}
	if h == testHarness {
		fmt.Fprintf(os.Stderr, "integration: teardown of %s in %s (containers deleted and daemon stopped in %s, swept in %s, removed in %s)\n", h.dir, time.Since(start).Round(time.Millisecond),
			stopped.Sub(start).Round(time.Millisecond), swept.Sub(stopped).Round(time.Millisecond), time.Since(swept).Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

// removeLockedDir removes dir with its lock file last, so that a run
// killed half-way leaves a directory that sweepStale still knows as a
// harness's: one with a lock file nobody holds.
func removeLockedDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != "lock" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}

// deleteContainers kills and deletes every task and container in
// h.namespace, with their snapshots, and then any other active snapshot.
func (h *harness) deleteContainers() error {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), h.namespace), time.Minute)
	defer cancel()
	cs, err := h.client.Containers(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		h.ids = append(h.ids, c.ID())
		if task, err := c.Task(ctx, nil); err == nil {
			if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete task %s: %w", c.ID(), err))
			}
		}
		if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete container %s: %w", c.ID(), err))
		}
	}
	active, err := activeSnapshots(ctx, h.client)
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range active {
		name, key, _ := strings.Cut(s, "/")
		if err := h.client.SnapshotService(name).Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove snapshot %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// stopDaemon sends SIGTERM (and SIGCONT, in case a test stopped it), and
// SIGKILL after 10 s.
func (h *harness) stopDaemon() error {
	h.daemon.Process.Signal(syscall.SIGTERM)
	h.daemon.Process.Signal(syscall.SIGCONT)
	select {
	case <-h.exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	h.daemon.Process.Kill()
	<-h.exited
	return fmt.Errorf("containerd did not stop on SIGTERM in 10 s; killed it")
}

// deleteRuncState force-deletes, with runc, every container of namespace
// whose bundle is still in dir's daemon state or whose id is in ids, if
// runc still has it in its default root: a killed shim leaves them. That
// kills their processes and removes their cgroups. It returns the ids it
// looked at.
func deleteRuncState(dir, namespace string, ids []string) []string {
	bundles, _ := os.ReadDir(filepath.Join(dir, "state", "io.containerd.runtime.v2.task", namespace))
	for _, b := range bundles {
		if !slices.Contains(ids, b.Name()) {
			ids = append(ids, b.Name())
		}
	}
	root := filepath.Join("/run/containerd/runc", namespace)
	bin := "runc"
	if testRuntimeBinary != "" {
		// crun keeps its state in the same --root, in its own format.
		bin = testRuntimeBinary
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(root, id)); err == nil {
			args := []string{"--root", root, "delete", "--force", id}
			if testCgroupDriver == config.CgroupDriverSystemd {
				args = append([]string{"--systemd-cgroup"}, args...)
			}
			exec.Command(bin, args...).Run()
		}
	}
	// The namespace's directory, once empty; a run going on beside this
	// one keeps it (Remove fails on a directory with entries).
	os.Remove(root)
	return ids
}

// sweepStale removes what earlier runs that were killed left: their
// daemons, shims, mounts and directories. A live run holds the flock on its
// directory's lock file; a directory whose lock is free is stale.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), harnessPrefix+"*"))
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "lock"))
		if err != nil {
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			f.Close()
			continue
		}
		fmt.Fprintf(os.Stderr, "integration: removing %s, left by a killed run\n", dir)
		killProcesses(func(args []string) bool {
			return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, dir+"/") })
		})
		removeCgroups(testNamespace, deleteRuncState(dir, testNamespace, nil))
		sweepFaultNamespace(dir)
		if err := unmountUnder(dir); err != nil {
			fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		}
		if len(mountsUnder(dir)) == 0 {
			removeLockedDir(dir)
		}
		f.Close()
	}
}

// namespaceCgroups lists the parent cgroups of namespace's containers that
// exist under the cgroupfs driver: /sys/fs/cgroup/*/NAMESPACE on v1,
// /sys/fs/cgroup/NAMESPACE on v2. Under systemd there is none of the
// namespace's own: its containers are units of system.slice (see
// containerCgroups).
func namespaceCgroups(namespace string) []string {
	if testCgroupDriver == config.CgroupDriverSystemd {
		return nil
	}
	parents, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", namespace))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", namespace, "cgroup.procs")); err == nil {
		parents = append(parents, filepath.Join("/sys/fs/cgroup", namespace))
	}
	return parents
}

// containerCgroups lists the cgroup directories of namespace's containers
// that exist, in every hierarchy: the children of namespaceCgroups under
// cgroupfs; under systemd the scopes NAMESPACE-*.scope of system.slice,
// v2's and each v1 controller's.
func containerCgroups(namespace string) []string {
	if testCgroupDriver == config.CgroupDriverSystemd {
		pattern := namespace + "-*.scope"
		v1, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", sandboxoci.SystemdSlice, pattern))
		v2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", sandboxoci.SystemdSlice, pattern))
		return append(v1, v2...)
	}
	var out []string
	for _, p := range namespaceCgroups(namespace) {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(p, e.Name()))
			}
		}
	}
	return out
}

// sandboxCgroup is the cgroup directory of container id of namespace, in
// controller's v1 hierarchy ("" on v2, or for the unified root): where
// the test driver (SANDBOX_TEST_CGROUP_DRIVER) has the runtime put its
// processes and limits. cgroupfs: containerd's default cgroupsPath
// /NAMESPACE/ID; systemd: the unit NAMESPACE-ID.scope in system.slice (see
// oci.SystemdCgroupsPath), and on v2 under crun the scope's child
// "container" (crun's run.oci.systemd.subgroup default there: the scope
// is systemd's, its child the runtime's alone). The server finds the
// directory from /proc/PID/cgroup, wherever the runtime put it.
func sandboxCgroup(controller, namespace, id string) string {
	rel := filepath.Join(namespace, id)
	if testCgroupDriver == config.CgroupDriverSystemd {
		rel = filepath.Join(sandboxoci.SystemdSlice, namespace+"-"+id+".scope")
		if controller == "" && cgroupV2() && filepath.Base(testRuntimeBinary) == "crun" {
			rel = filepath.Join(rel, "container")
		}
	}
	return filepath.Join("/sys/fs/cgroup", controller, rel)
}

// isShim reports whether args is a runc shim's command line.
func isShim(args []string) bool {
	return len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim")
}

// shimsOf lists, as "pid: command line", the shims of the daemon at
// address.
func shimsOf(address string) []string {
	var out []string
	for pid, args := range processes() {
		if isShim(args) && slices.Contains(args, address) {
			out = append(out, fmt.Sprintf("%d: %s", pid, strings.Join(args, " ")))
		}
	}
	sort.Strings(out)
	return out
}

// processes maps each process's pid to its command line.
func processes() map[int][]string {
	ents, _ := os.ReadDir("/proc")
	out := make(map[int][]string)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		out[pid] = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	return out
}

// killProcesses SIGKILLs every process whose command line match selects,
// except this one, and waits up to 5 s for them to go.
func killProcesses(match func(args []string) bool) {
	var pids []int
	for pid, args := range processes() {
		if pid != os.Getpid() && match(args) {
			syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(pids) > 0 && time.Now().Before(deadline); {
		pids = slices.DeleteFunc(pids, func(pid int) bool {
			return syscall.Kill(pid, 0) != nil
		})
		time.Sleep(50 * time.Millisecond)
	}
}

// mountsUnder lists the mount points in this mount namespace at or below
// dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or below dir, deepest first, lazily
// if a plain unmount fails.
func unmountUnder(dir string) error {
	var errs []error
	for _, mp := range mountsUnder(dir) {
		if err := syscall.Unmount(mp, 0); err != nil {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes, with rmdir only, the cgroups of ids, then any
// other empty cgroup left under namespace's parent cgroups (v1:
// /sys/fs/cgroup/*/NAMESPACE, v2: /sys/fs/cgroup/NAMESPACE), saying so since
// that is a leak, then the parents. A cgroup with processes stays; so does
// one made in the last few seconds, which another run sharing the namespace
// may be filling.
func removeCgroups(namespace string, ids []string) error {
	if namespace == "" {
		return errors.New("remove cgroups: no namespace")
	}
	if testCgroupDriver == config.CgroupDriverSystemd {
		return removeScopes(namespace, ids)
	}
	parents := namespaceCgroups(namespace)
	var errs []error
	for _, p := range parents {
		for _, id := range ids {
			if err := syscall.Rmdir(filepath.Join(p, id)); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", filepath.Join(p, id), err))
			}
		}
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < 5*time.Second {
				continue
			}
			if err := syscall.Rmdir(filepath.Join(p, e.Name())); err == nil {
				fmt.Fprintf(os.Stderr, "integration: removed cgroup %s, which a run left behind\n", filepath.Join(p, e.Name()))
			}
		}
		// Busy or not empty: another run's, or one we could not clean.
		if err := syscall.Rmdir(p); err != nil && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeScopes is removeCgroups under the systemd driver: the cgroups of
// ids' units, then any other empty scope of namespace in system.slice,
// with rmdir only. The slice is systemd's, and stays.
func removeScopes(namespace string, ids []string) error {
	var errs []error
	var dirs []string
	for _, id := range ids {
		d := sandboxCgroup("", namespace, id)
		dirs = append(dirs, d)
		if filepath.Base(d) == "container" {
			dirs = append(dirs, filepath.Dir(d)) // crun's scope, once its child is gone
		}
		for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "blkio", "devices", "freezer", "cpuset"} {
			dirs = append(dirs, sandboxCgroup(c, namespace, id))
		}
	}
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	for _, d := range containerCgroups(namespace) {
		if fi, err := os.Stat(d); err != nil || time.Since(fi.ModTime()) < 5*time.Second {
			continue
		}
		if err := syscall.Rmdir(d); err == nil {
			fmt.Fprintf(os.Stderr, "integration: removed cgroup %s, which a run left behind\n", d)
		}
	}
	return errors.Join(errs...)
}

// TestHarnessDaemon checks the harness itself, without the executor: the
// daemon answers, the images are there, the daemon can create a task, and
// assertNoLeftovers sees every kind of leftover and passes once they are
// gone.
func TestHarnessDaemon(t *testing.T) {
	onBothDaemons(t, daemonImages)
	ctx := testContext(t)
	if _, err := testClient.Version(ctx); err != nil {
		t.Fatalf("version: got %v; want the daemon to answer", err)
	}
	for _, ref := range testImages {
		if _, err := testClient.GetImage(ctx, ref); err != nil {
			t.Errorf("image %s: got %v; want it imported", ref, err)
		}
	}
	if t.Failed() {
		return
	}

	img, err := testClient.GetImage(ctx, pythonImage)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(ctx, ""); err != nil {
		t.Fatalf("unpack %s: %v", pythonImage, err)
	}
	// runc's state (/run/containerd/runc/NAMESPACE/ID) and the cgroups are
	// shared with other runs on this host; the harness dir's suffix keeps
	// the id ours.
	id := t.Name() + strings.TrimPrefix(filepath.Base(testDir), harnessPrefix[:len(harnessPrefix)-1])
	c, err := testClient.NewContainer(ctx, id,
		containerd.WithImage(img),
		containerd.WithNewSnapshot(id, img),
		containerd.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("/bin/true")))
	if err != nil {
		t.Fatalf("new container: %v", err)
	}
	// Created, not started: the shim runs and has mounted the root file system.
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		c.Delete(ctx, containerd.WithSnapshotCleanup)
		t.Fatalf("new task: %v", err)
	}
	// Each daemon must run its own shim, which PATH decides: check it did.
	for pid, args := range processes() {
		if isShim(args) && slices.Contains(args, testAddress) {
			exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := filepath.Dir(exe), filepath.Clean(testShimDir); got != want {
				t.Errorf("shim %d runs %s: got it from %s; want from %s (SANDBOX_SHIM_DIR)", pid, exe, got, want)
			}
		}
	}
	stateDir := newStateDir(t)
	if err := os.WriteFile(filepath.Join(stateDir, "left"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{TB: t}
	assertNoLeftovers(rec, stateDir)
	for _, want := range []string{"containers in", "tasks in", "active or view snapshots", "shims of the test daemon", "mounts under", "state dir"} {
		if !slices.ContainsFunc(rec.errs, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("assertNoLeftovers with a task and a file: got %q; want an error starting %q", rec.errs, want)
		}
	}

	if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil {
		t.Errorf("delete task: %v", err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		t.Errorf("delete container: %v", err)
	}
	os.Remove(filepath.Join(stateDir, "left"))
	assertNoLeftovers(t, stateDir)
}

// recorder is a testing.TB that records Errorf instead of failing, to test
// assertions.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

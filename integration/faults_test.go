package integration

// Issue 10's fault-injection suite: the real binary over stdio, with an
// MCP client, against a containerd of the test's own (newPrivateDaemon)
// that the test may SIGKILL, SIGSTOP and restart. Each case asserts what
// the client sees, a time bound, and that nothing is left at its end:
// containers, tasks, snapshots, shims, mounts, cgroup directories, run
// directories, processes of the sandboxes' uids.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"code-sandbox-mcp/containers/images"
)

// faultPool is the python pool of a fault test's server (the default).
const faultPool = 2

// faultNamespaceOf is the namespace of the private daemons of the harness
// directory dir, unless SANDBOX_FAULT_NAMESPACE names one (see
// faultNamespace): one per run, so that what a case leaves in the host's
// cgroups and runc state is told apart from another run's, and a later
// run's sweepStale can find it.
func faultNamespaceOf(dir string) string {
	return "code-sandbox-fault-" + strings.TrimPrefix(filepath.Base(dir), harnessPrefix)
}

// faultNamespace is the namespace of this run's private daemons:
// SANDBOX_FAULT_NAMESPACE, which scripts/integration seeds with the
// python image in each daemon version's template root (so that no lane
// unpacks it again), or the run's own (faultNamespaceOf). Its checks see
// the whole namespace (privateDaemon.assertNoLeftovers): two runs at once
// must not share it, which is why scripts/integration names one per
// daemon version and deals the fault tests to one lane of each.
func faultNamespace() string {
	if testHarness.cfg.faultNamespace != "" {
		return testHarness.cfg.faultNamespace
	}
	return faultNamespaceOf(testDir)
}

// sweepFaultNamespace removes what private daemons of the killed run in
// dir left in the host: runc state and cgroups of its fault namespace.
// Its own namespace is the run's, and what is there is the run's; from a
// named one (SANDBOX_FAULT_NAMESPACE), which later runs share, only the
// containers whose bundles are in its daemons' state directories.
func sweepFaultNamespace(dir string) {
	ns := faultNamespaceOf(dir)
	ents, _ := os.ReadDir(filepath.Join("/run/containerd/runc", ns))
	var ids []string
	for _, e := range ents {
		ids = append(ids, e.Name())
	}
	removeCgroups(ns, deleteRuncState(dir, ns, ids))
	// DIR/fN (a private daemon's directory)/state/io.containerd.runtime.v2.task/NAMESPACE.
	states, _ := filepath.Glob(filepath.Join(dir, "f*", "state", "io.containerd.runtime.v2.task", "*"))
	for _, st := range states {
		if named := filepath.Base(st); named != ns {
			removeCgroups(named, deleteRuncState(filepath.Dir(filepath.Dir(filepath.Dir(st))), named, nil))
		}
	}
}

// faultTemplate is a daemon root with the python image imported and
// unpacked in the run's fault namespace, made once per run and copied
// for each private daemon: an import and unpack take about 15 s, a copy
// with hard links under a second. It starts as a copy of
// SANDBOX_CONTAINERD_TEMPLATE, if set, which scripts/integration seeds
// with the image unpacked in the fault namespace too: then that copy is
// the template as it is.
var faultTemplate struct {
	once sync.Once
	root string
	err  error
}

// pythonArchive returns the python image's archive among SANDBOX_IMAGES
// (scripts/setup names them LANGUAGE-HASH.oci.tar).
func pythonArchive() (string, error) {
	for _, p := range testHarness.cfg.images {
		if strings.HasPrefix(filepath.Base(p), "python") {
			return p, nil
		}
	}
	return "", fmt.Errorf("no python archive in SANDBOX_IMAGES %v", testHarness.cfg.images)
}

// templateRoot makes faultTemplate on first use and returns its root.
func templateRoot(t *testing.T) string {
	t.Helper()
	faultTemplate.once.Do(func() {
		start := time.Now()
		var imported time.Duration
		seeded := false
		h := &harness{cfg: testHarness.cfg, dir: filepath.Join(testDir, "ft"), namespace: faultNamespace()}
		h.address = filepath.Join(h.dir, "containerd.sock")
		faultTemplate.err = func() error {
			if err := os.MkdirAll(h.dir, 0o700); err != nil {
				return err
			}
			// From SANDBOX_CONTAINERD_TEMPLATE, the python image is there,
			// in testNamespace, and maybe in the fault namespace too: if
			// not, the fault namespace takes it from testNamespace, with
			// no data sent, and unpacks its layers again.
			if err := h.fromTemplate(); err != nil {
				return err
			}
			if err := h.launch(); err != nil {
				return err
			}
			defer func() {
				if h.client != nil {
					h.client.Close()
				}
				h.stopDaemon()
			}()
			if err := h.connect(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), h.namespace), 5*time.Minute)
			defer cancel()
			// Seeded there (SANDBOX_FAULT_NAMESPACE): nothing to do.
			if img, err := h.client.GetImage(ctx, pythonImage); err == nil {
				unpacked, err := img.IsUnpacked(ctx, defaults.DefaultSnapshotter)
				if err != nil {
					return err
				}
				if unpacked {
					seeded = true
					return nil
				}
			}
			if h.cfg.template != "" {
				if err := adoptImage(ctx, h.client, testNamespace, h.namespace, pythonImage); err != nil {
					return fmt.Errorf("take %s from namespace %s: %w", pythonImage, testNamespace, err)
				}
			} else {
				archive, err := pythonArchive()
				if err != nil {
					return err
				}
				f, err := os.Open(archive)
				if err != nil {
					return err
				}
				defer f.Close()
				if _, err := images.Import(ctx, h.client, f); err != nil {
					return fmt.Errorf("import %s: %w", archive, err)
				}
			}
			imported = time.Since(start)
			img, err := h.client.GetImage(ctx, pythonImage)
			if err != nil {
				return err
			}
			if err := img.Unpack(ctx, ""); err != nil {
				return err
			}
			if h.cfg.template == "" {
				return nil
			}
			// testNamespace's images go, with their layers (a
			// synchronous delete collects them): each private daemon's
			// copy of this root is a hard link a file, and they were
			// most of its files, 4 to 7 s a copy instead of 1 to 3.
			tctx := namespaces.WithNamespace(ctx, testNamespace)
			list, err := h.client.ImageService().List(tctx)
			if err != nil {
				return err
			}
			for _, i := range list {
				if err := h.client.ImageService().Delete(tctx, i.Name, ctrimages.SynchronousDelete()); err != nil {
					return fmt.Errorf("delete %s from namespace %s: %w", i.Name, testNamespace, err)
				}
			}
			return nil
		}()
		if faultTemplate.err != nil {
			h.dumpLog()
			faultTemplate.err = fmt.Errorf("fault template daemon: %w", faultTemplate.err)
			return
		}
		faultTemplate.root = filepath.Join(h.dir, "root")
		if seeded {
			t.Logf("fault template: the python image was unpacked in namespace %s of the template root already; ready in %s", h.namespace, time.Since(start).Round(time.Millisecond))
			return
		}
		if err := linkLayers(faultTemplate.root, filepath.Join(h.dir, "layers")); err != nil {
			faultTemplate.err = fmt.Errorf("fault template: %w", err)
			return
		}
		t.Logf("fault template: the python image there in %s (imported, or taken from the template), unpacked in %s more", imported.Round(time.Millisecond), (time.Since(start) - imported).Round(time.Millisecond))
	})
	if faultTemplate.err != nil {
		t.Fatal(faultTemplate.err)
	}
	return faultTemplate.root
}

// adoptImage gives namespace to, on c's daemon, the image ref of namespace
// from: each of its blobs by digest (containerd's default sharing policy
// lets a namespace take a blob the store holds without its data being
// sent; failing that, it is copied), with its labels, the references that
// keep the image's content from the garbage collector, and then its
// record. Its layers are not unpacked in to.
func adoptImage(ctx context.Context, c *containerd.Client, from, to, ref string) error {
	fctx, tctx := namespaces.WithNamespace(ctx, from), namespaces.WithNamespace(ctx, to)
	// A lease keeps the blobs from the garbage collector until the
	// image's record holds them: 1.6 collected one in between.
	tctx, done, err := c.WithLease(tctx)
	if err != nil {
		return err
	}
	defer done(context.WithoutCancel(tctx))
	img, err := c.ImageService().Get(fctx, ref)
	if err != nil {
		return err
	}
	cs := c.ContentStore()
	var blobs []ocispec.Descriptor
	collect := ctrimages.HandlerFunc(func(ctx context.Context, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		blobs = append(blobs, d)
		return ctrimages.Children(ctx, cs, d)
	})
	if err := ctrimages.Walk(fctx, collect, img.Target); err != nil {
		return err
	}
	for _, d := range blobs {
		info, err := cs.Info(fctx, d.Digest)
		if err != nil {
			return fmt.Errorf("info %s: %w", d.Digest, err)
		}
		w, err := cs.Writer(tctx, content.WithRef("adopt-"+d.Digest.Encoded()), content.WithDescriptor(d))
		switch {
		case errdefs.IsAlreadyExists(err):
			if _, err := cs.Update(tctx, content.Info{Digest: d.Digest, Labels: info.Labels}, "labels"); err != nil {
				return fmt.Errorf("label %s: %w", d.Digest, err)
			}
		case err != nil:
			return fmt.Errorf("writer for %s: %w", d.Digest, err)
		default:
			ra, err := cs.ReaderAt(fctx, d)
			if err != nil {
				w.Close()
				return fmt.Errorf("read %s: %w", d.Digest, err)
			}
			err = content.Copy(tctx, w, content.NewReader(ra), d.Size, d.Digest, content.WithLabels(info.Labels))
			ra.Close()
			w.Close()
			if err != nil {
				return fmt.Errorf("copy %s: %w", d.Digest, err)
			}
		}
		if _, err := cs.Info(tctx, d.Digest); err != nil {
			return fmt.Errorf("%s, once taken: %w", d.Digest, err)
		}
	}
	_, err = c.ImageService().Create(tctx, img)
	return err
}

// linkLayers moves the unpacked layers of the stopped daemon's root to
// dir, each snapshot's fs directory left as a symbolic link to its new
// place, which copyRoot copies as a link: a copy of the root for a
// private daemon is then a few dozen files, not the image's 27,000 hard
// links (some 1.3 s of the kernel's time to copy, and 1 s to remove,
// 9 to 12 times a lane). A daemon reads a committed layer only, as
// an overlay's lower directory, whose path the kernel resolves; removing
// the snapshot removes the link. dir lives as long as the harness's
// directory, which holds every private daemon's.
func linkLayers(root, dir string) error {
	snapshots := snapshotsDir(root)
	ents, err := os.ReadDir(snapshots)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, e := range ents {
		fs := filepath.Join(snapshots, e.Name(), "fs")
		if fi, err := os.Lstat(fs); err != nil {
			return err
		} else if fi.Mode()&os.ModeSymlink != 0 {
			continue // a link already, from the template
		}
		layer := filepath.Join(dir, e.Name())
		if err := os.Rename(fs, layer); err != nil {
			return err
		}
		if err := os.Symlink(layer, fs); err != nil {
			return err
		}
	}
	return nil
}

// ownLayers replaces each layer link of root (linkLayers) by a hard-link
// copy of the layer it names: a kept root (SANDBOX_CONTAINERD_ROOT)
// outlives the run whose template holds the layers.
func ownLayers(root string) error {
	snapshots := snapshotsDir(root)
	ents, err := os.ReadDir(snapshots)
	if err != nil {
		return err
	}
	for _, e := range ents {
		fs := filepath.Join(snapshots, e.Name(), "fs")
		layer, err := os.Readlink(fs)
		if errors.Is(err, syscall.EINVAL) {
			continue // a directory of its own
		}
		if err != nil {
			return err
		}
		if err := os.Remove(fs); err != nil {
			return err
		}
		if out, err := osexec.Command("cp", "-a", "--link", layer, fs).CombinedOutput(); err != nil {
			return fmt.Errorf("cp -a --link %s %s: %v: %s", layer, fs, err, out)
		}
	}
	return nil
}

// snapshotsDir is the directory of root's snapshots, each an fs directory
// (the layer, unpacked) in a directory named after its id.
func snapshotsDir(root string) string {
	return filepath.Join(root, "io.containerd.snapshotter.v1.overlayfs", "snapshots")
}

// copyRoot copies a stopped daemon's root from to to: image content and
// unpacked layers, which nobody writes, as hard links, and a symbolic
// link (linkLayers) as a link; every other file (the bolt databases
// above all) as a copy of its own.
func copyRoot(from, to string) error {
	if out, err := osexec.Command("cp", "-a", "--link", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a --link %s %s: %v: %s", from, to, err, out)
	}
	shared := []string{
		filepath.Join(to, "io.containerd.content.v1.content", "blobs") + "/",
		snapshotsDir(to) + "/",
	}
	return filepath.WalkDir(to, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if slices.ContainsFunc(shared, func(s string) bool { return strings.HasPrefix(p, s) }) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.WriteFile(p, b, fi.Mode().Perm())
	})
}

// privateDaemon is a containerd of one test's own, with the python image,
// which the test may kill, stop and restart. It shares the harness's
// binary and shims, and the run's fault namespace; its directory is under
// the harness's. The test's end stops it and removes every trace of it.
type privateDaemon struct {
	*harness
}

var privateDaemons int

// newPrivateDaemon starts a private daemon for t.
func newPrivateDaemon(t *testing.T) *privateDaemon {
	t.Helper()
	// scripts/integration deals the TestFault* tests to one lane of each
	// daemon version, by name: two lanes at once sharing the version's
	// fault namespace would see each other's sandboxes in its checks.
	if !strings.HasPrefix(t.Name(), "TestFault") {
		t.Fatalf("%s starts a private daemon, which only a test named TestFault* may: scripts/integration deals those to one lane of each daemon version, whose fault namespace they share", t.Name())
	}
	root := templateRoot(t)
	privateDaemons++
	h := &harness{cfg: testHarness.cfg, dir: filepath.Join(testDir, fmt.Sprintf("f%d", privateDaemons)), namespace: faultNamespace()}
	h.address = filepath.Join(h.dir, "containerd.sock")
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &privateDaemon{harness: h}
	t.Cleanup(func() {
		// A daemon the test killed and did not restart has nothing to
		// delete through; runc and the state directory tell what is left.
		select {
		case <-d.exited:
			if d.client != nil {
				d.client.Close()
				d.client = nil
			}
		default:
		}
		if err := d.teardown(); err != nil {
			t.Errorf("private daemon teardown: %v", err)
		}
		// The namespace is the run's: empty its cgroups for the next case.
		for _, d := range containerCgroups(h.namespace) {
			syscall.Rmdir(d)
		}
		if t.Failed() {
			d.dumpLog()
		}
	})
	start := time.Now()
	if err := copyRoot(root, filepath.Join(h.dir, "root")); err != nil {
		t.Fatal(err)
	}
	copied := time.Since(start)
	if err := h.launch(); err != nil {
		t.Fatal(err)
	}
	if err := h.connect(); err != nil {
		d.dumpLog()
		t.Fatal(err)
	}
	t.Logf("private daemon %s up in %s (root copied in %s)", h.address, time.Since(start).Round(time.Millisecond), copied.Round(time.Millisecond))
	if time.Since(start) > 4*time.Second {
		d.dumpLog()
	}
	return d
}

// context returns a context in the daemon's namespace, for one call of
// at most 10 s.
func (d *privateDaemon) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(context.Background(), d.namespace), 10*time.Second)
}

func (d *privateDaemon) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.daemon.Process.Signal(sig); err != nil {
		t.Fatalf("%v to containerd: %v", sig, err)
	}
}

// Kill SIGKILLs the daemon and waits for it to exit. Its shims live on.
func (d *privateDaemon) Kill(t *testing.T) {
	t.Helper()
	d.signal(t, syscall.SIGKILL)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("containerd did not exit within 10s of SIGKILL")
	}
}

// Stop SIGSTOPs the daemon; the test's cleanup continues it.
func (d *privateDaemon) Stop(t *testing.T) {
	t.Helper()
	d.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { d.daemon.Process.Signal(syscall.SIGCONT) })
}

// Cont SIGCONTs the daemon.
func (d *privateDaemon) Cont(t *testing.T) { t.Helper(); d.signal(t, syscall.SIGCONT) }

// Restart starts the daemon again, after Kill, on the same root, state
// and socket, and returns once it answers, with d.client connected anew.
func (d *privateDaemon) Restart(t *testing.T) {
	t.Helper()
	select {
	case <-d.exited:
	default:
		t.Fatal("Restart: the daemon still runs")
	}
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
	if err := d.launch(); err != nil {
		t.Fatal(err)
	}
	if err := d.connect(); err != nil {
		t.Fatal(err)
	}
}

// tasks sorts the daemon's tasks as sandboxTasks does.
func (d *privateDaemon) tasks(t *testing.T) taskSet {
	t.Helper()
	ctx, cancel := d.context()
	defer cancel()
	ts, err := tasksOf(ctx, d.client)
	if err != nil {
		t.Fatalf("list tasks: %v", err)
	}
	return ts
}

// containerIDs lists the daemon's containers.
func (d *privateDaemon) containerIDs(t *testing.T) []string {
	t.Helper()
	ctx, cancel := d.context()
	defer cancel()
	cs, err := d.client.Containers(ctx)
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID())
	}
	slices.Sort(ids)
	return ids
}

// poolFull reports whether the daemon holds exactly the server's pool:
// faultPool containers, each a ready sandbox, and nothing else.
func (d *privateDaemon) poolFull(t *testing.T) bool {
	t.Helper()
	ts := d.tasks(t)
	return ts.waiting() == faultPool && len(ts.running) == 0 && len(d.containerIDs(t)) == faultPool
}

// assertNoLeftovers is the package's assertNoLeftovers for d, and also
// checks the host: no cgroup directory under the namespace's parent
// cgroups and no process of the sandboxes' uids in them. Those are allowed
// the few seconds a shim takes to exit.
func (d *privateDaemon) assertNoLeftovers(t *testing.T, stateDir string) {
	t.Helper()
	d.harness.assertNoLeftovers(t, stateDir)
	var cgroups, procs []string
	waitFor(5*time.Second, func() bool {
		cgroups, procs = namespaceCgroupDirs(d.namespace), sandboxProcesses(d.namespace)
		return len(cgroups) == 0 && len(procs) == 0
	})
	if len(cgroups) > 0 {
		t.Errorf("cgroup directories of %s: got %v; want none", d.namespace, cgroups)
	}
	if len(procs) > 0 {
		t.Errorf("processes of the sandboxes' uids (%v) in %s's cgroups: got %v; want none", testUIDs, d.namespace, procs)
	}
}

// namespaceCgroupDirs lists the cgroup directories of namespace's
// containers, in every hierarchy, where the test driver puts them (see
// containerCgroups).
func namespaceCgroupDirs(namespace string) []string {
	return containerCgroups(namespace)
}

// sandboxProcesses lists, as "pid: command line", the processes of the
// sandboxes' uids (testUIDs) in a cgroup of namespace.
func sandboxProcesses(namespace string) []string {
	var out []string
	for pid, args := range processes() {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		uid := uint64(0)
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					uid, _ = strconv.ParseUint(f[0], 10, 32)
				}
			}
		}
		if !testUIDs.Contains(uint32(uid)) {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(cg), "/"+namespace+"/") {
			cmdline := strings.Join(args, " ")
			if len(cmdline) > 60 {
				cmdline = cmdline[:60] + "..."
			}
			out = append(out, fmt.Sprintf("%d: %q", pid, cmdline))
		}
	}
	slices.Sort(out)
	return out
}

// faultServer is the binary on d, started the way a client starts it:
// stdin, stdout and stderr are pipes whose other ends the test holds, and
// stderr is read as it comes.
type faultServer struct {
	cmd      *osexec.Cmd
	c        *client.Client
	stateDir string
	// The test's ends of the pipes.
	stdin          *os.File
	stdout, errOut *os.File
	stderr         *syncBuffer
	exited         chan struct{} // closed once the process is waited for
	state          *os.ProcessState
}

// callOutcome is what a call gave the client, and when.
type callOutcome struct {
	r    toolResult
	err  error // a JSON-RPC or transport error, or a result that did not decode
	took time.Duration
}

func (o callOutcome) String() string {
	if o.err != nil {
		return fmt.Sprintf("error %v after %s", o.err, o.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("result %q (isError %v, timed_out %v) after %s", o.r.text, o.r.isError, o.r.out.TimedOut, o.took.Round(time.Millisecond))
}

// call runs python src with args (timeout_seconds, say), bounded by d.
func (s *faultServer) call(ctx context.Context, src string, d time.Duration, args ...any) callOutcome {
	a := code(src)
	for i := 0; i+1 < len(args); i += 2 {
		a[args[i].(string)] = args[i+1]
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: a}})
	o := callOutcome{took: time.Since(start), err: err}
	if err == nil {
		o.r, o.err = parseResult(res)
	}
	return o
}

// callAsync is call in the background.
func (s *faultServer) callAsync(src string, d time.Duration, args ...any) <-chan callOutcome {
	ch := make(chan callOutcome, 1)
	go func() { ch <- s.call(context.Background(), src, d, args...) }()
	return ch
}

// killClient is the client's death: every pipe to the server breaks. The
// ends the server writes to break first, so that whatever it writes once
// it sees stdin end meets a broken pipe, as it does when a client dies
// (otherwise the pipe's buffer could take a last log line, and a server
// that dies of SIGPIPE would pass by luck).
func (s *faultServer) killClient() {
	s.errOut.Close()
	s.stdout.Close()
	s.stdin.Close()
}

// waitExit waits up to d for the server to exit and returns how long it
// took; it fails the test if the server did not exit.
func (s *faultServer) waitExit(t *testing.T, d time.Duration, since time.Time) time.Duration {
	t.Helper()
	select {
	case <-s.exited:
		return time.Since(since)
	case <-time.After(time.Until(since.Add(d))):
	}
	t.Errorf("the server did not exit within %s", d)
	s.cmd.Process.Kill()
	<-s.exited
	return time.Since(since)
}

// notKilledBySIGPIPE fails the test if the server died of SIGPIPE (exit
// status 141 to a shell), which skips every cleanup.
func (s *faultServer) notKilledBySIGPIPE(t *testing.T) {
	t.Helper()
	ws, _ := s.state.Sys().(syscall.WaitStatus)
	if ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
		t.Errorf("server exit: killed by SIGPIPE (status 141); want a broken pipe handled as a shutdown, with cleanup")
	}
}

const sleepForever = "import time\nprint('up', flush=True)\ntime.sleep(120)"

// startRunning starts sleepForever on s and returns once its program runs,
// with the id of its sandbox.
func startRunning(t *testing.T, d *privateDaemon, s *faultServer, args ...any) (<-chan callOutcome, string) {
	t.Helper()
	done := s.callAsync(sleepForever, time.Minute, args...)
	var ts taskSet
	if !waitFor(30*time.Second, func() bool { ts = d.tasks(t); return len(ts.running) == 1 }) {
		t.Fatalf("the program never ran: tasks %+v\nstderr:\n%s", ts, s.stderr)
	}
	return done, ts.running[0]
}

// waitPool waits up to 30 s for the server's pool to be full.
func waitPool(t *testing.T, d *privateDaemon, s *faultServer) {
	t.Helper()
	if !waitFor(30*time.Second, func() bool { return d.poolFull(t) }) {
		t.Fatalf("the pool was not full within 30s: tasks %+v, containers %v\nstderr:\n%s", d.tasks(t), d.containerIDs(t), s.stderr)
	}
}

// exitBound is how long a server may take to exit with containerd
// healthy: issue 10's target is 2 s (clients give 2-4 s before SIGKILL);
// the rest is slack for a loaded CI machine and the race detector.
const exitBound = 5 * time.Second

// A client killed mid-call, with the server's stderr piped to it: the
// server must take the broken pipes as a shutdown, not die of SIGPIPE, and
// kill and delete everything before it exits.
func TestFaultClientKilledMidCall(t *testing.T) {
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	startRunning(t, d, s)
	start := time.Now()
	s.killClient()
	took := s.waitExit(t, exitBound, start)
	t.Logf("server exited %s after its client died mid-call: %v", took.Round(time.Millisecond), s.state)
	s.notKilledBySIGPIPE(t)
	d.assertNoLeftovers(t, stateDir)
}

// A client killed while the server is idle, its pool full.
func TestFaultClientKilledWhileIdle(t *testing.T) {
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)
	start := time.Now()
	s.killClient()
	took := s.waitExit(t, exitBound, start)
	t.Logf("idle server exited %s after its client died: %v", took.Round(time.Millisecond), s.state)
	s.notKilledBySIGPIPE(t)
	d.assertNoLeftovers(t, stateDir)
}

// hopeless is what an error must not say while containerd restarts.
const hopeless = "will not help"

// saysRetry reports whether text tells the model to retry, as an error
// must while containerd restarts.
func saysRetry(text string) bool {
	text = strings.ToLower(text)
	return strings.Contains(text, "restarting") || strings.Contains(text, "retry")
}

// containerd SIGKILLed mid-call and restarted: the call still gets its
// result (its program runs on under the shim, and the kernel tells its
// end: here, killed at its timeout while containerd is down), or an error
// result, within its timeout and a few seconds; calls meanwhile say to
// retry; once it is back, calls work and the pool is refilled at once; the
// deletes that failed meanwhile are retried, so nothing is left at the
// server's exit.
func TestFaultDaemonKilledMidCallAndRestarted(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)
	done, id := startRunning(t, d, s, "timeout_seconds", 5)
	start := time.Now()
	d.Kill(t)
	select {
	case o := <-done:
		t.Logf("in-flight call: %s after containerd's SIGKILL", o)
		if o.err != nil || !o.r.isError {
			t.Errorf("in-flight call when containerd was killed: %s; want an error result, or its timeout", o)
		}
		var procs []string
		if strings.Contains(o.r.text, "killed") && !waitFor(2*time.Second, func() bool { procs = sandboxProcessesOf(d, []string{id}); return len(procs) == 0 }) {
			t.Errorf("in-flight call: %s; its processes %v still run 2s later: want no claim that it was killed", o, procs)
		}
		if time.Since(start) > 15*time.Second {
			t.Errorf("in-flight call returned %s after containerd was killed; want within its timeout (5s) and 10s", time.Since(start).Round(time.Millisecond))
		}
	case <-time.After(20 * time.Second):
		t.Errorf("in-flight call: no answer within 20s of containerd's SIGKILL, with timeout_seconds 5")
	}

	// While containerd is down, as during any restart.
	o := s.call(context.Background(), "print('down')", 10*time.Second)
	t.Logf("call while containerd is down: %s", o)
	if o.err != nil || !o.r.isError || !saysRetry(o.r.text) || strings.Contains(o.r.text, hopeless) || o.took > 5*time.Second {
		t.Errorf("call while containerd is down: %s; want an error result within 5s saying containerd is restarting and to retry, not %q", o, hopeless)
	}

	d.Restart(t)
	restarted := time.Now()
	var last callOutcome
	var hopelessOnce bool
	ok := waitFor(10*time.Second, func() bool {
		last = s.call(context.Background(), "print('back')", 30*time.Second)
		if last.err == nil && last.r.isError && strings.Contains(last.r.text, hopeless) && !hopelessOnce {
			hopelessOnce = true
			t.Errorf("call during the reconnect: %s; want it to say retry, not %q", last, hopeless)
		}
		return last.err == nil && last.r.text == "back\n"
	})
	t.Logf("first working call %s after containerd answered again (last: %s)", time.Since(restarted).Round(time.Millisecond), last)
	if !ok {
		t.Errorf("calls after the restart: still %s after 10s; want them to work within a few seconds", last)
	}
	// The pool refills, and the sandboxes whose deletes failed while
	// containerd was down are deleted, without waiting for the server's exit.
	if waitFor(5*time.Second, func() bool { return d.poolFull(t) }) {
		t.Logf("pool full, nothing else left %s after containerd answered again", time.Since(restarted).Round(time.Millisecond))
	} else {
		t.Errorf("5s after the restart's first working call: tasks %+v, containers %v; want just the %d ready sandboxes of the pool (failed deletes retried, pool refilled)", d.tasks(t), d.containerIDs(t), faultPool)
	}

	start = time.Now()
	s.stdin.Close()
	took := s.waitExit(t, exitBound, start)
	t.Logf("server exited %s after stdin closed: %v", took.Round(time.Millisecond), s.state)
	if !s.state.Success() {
		t.Errorf("server exit: %v; want 0", s.state)
	}
	d.assertNoLeftovers(t, stateDir)
}

// containerd SIGSTOPped during calls that have timeout_seconds=5: one
// whose program runs when it stops, and one that starts during the hang
// in a ready sandbox and whose program prints and exits. Each gets an
// answer within its timeout plus 10 s, and the second is never reported
// as timed out. After SIGCONT nothing is left at the server's exit.
func TestFaultDaemonStoppedDuringCall(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	running, id := startRunning(t, d, s, "timeout_seconds", 5)
	callStart := time.Now()
	// The call took a ready sandbox; the next one needs its replacement.
	if !waitFor(30*time.Second, func() bool { return d.tasks(t).waiting() == faultPool }) {
		t.Fatalf("the pool was not refilled within 30s: tasks %+v", d.tasks(t))
	}
	d.Stop(t)
	exited := s.callAsync("print('printed and exited')", time.Minute, "timeout_seconds", 5)
	exitedStart := time.Now()

	// A call that does not return in time is waited for after SIGCONT,
	// so that what it says then is checked (and logged) too.
	const bound = 15 * time.Second
	wait := func(name string, ch <-chan callOutcome, since time.Time, check func(callOutcome)) {
		select {
		case o := <-ch:
			t.Logf("%s: %s, %s after it started", name, o, time.Since(since).Round(time.Millisecond))
			check(o)
			return
		case <-time.After(time.Until(since.Add(bound))):
			t.Errorf("%s (timeout_seconds 5): no answer within %s while containerd was stopped", name, bound)
		}
		d.Cont(t)
		select {
		case o := <-ch:
			t.Logf("%s: %s, %s after it started, once containerd continued", name, o, time.Since(since).Round(time.Millisecond))
			check(o)
		case <-time.After(30 * time.Second):
			t.Errorf("%s: no answer within 30s of SIGCONT either", name)
		}
	}
	wait("the running program's call", running, callStart, func(o callOutcome) {
		if o.err != nil {
			t.Errorf("the running program's call: %s; want a result", o)
		}
		// A result that says the program was killed is true when it
		// comes (give or take the moment its processes take to be reaped).
		var procs []string
		if strings.Contains(o.r.text, "killed") && !waitFor(2*time.Second, func() bool { procs = sandboxProcessesOf(d, []string{id}); return len(procs) == 0 }) {
			t.Errorf("the running program's call: %s; its processes %v still run 2s later: want no claim that it was killed", o, procs)
		}
	})
	wait("the call made during the hang", exited, exitedStart, func(o callOutcome) {
		switch {
		case o.err != nil:
			t.Errorf("the call made during the hang: %s; want a result", o)
		case o.r.out.TimedOut || strings.Contains(o.r.text, "timed out"):
			t.Errorf("the call made during the hang: %s; its program printed and exited: want its output, or an error saying its status is unknown, never a timeout", o)
		case !o.r.isError && o.r.text != "printed and exited\n":
			t.Errorf("the call made during the hang: %s; want its output", o)
		}
	})

	d.Cont(t)
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, 20*time.Second, start)
	t.Logf("server exited %s after stdin closed, containerd continued: %v", took.Round(time.Millisecond), s.state)
	d.assertNoLeftovers(t, stateDir)
}

// claimsRemoved matches a text that says a removal is done ("its sandbox
// was removed"), not one that says it is under way ("is being removed").
var claimsRemoved = regexp.MustCompile(`\b(was|were|has been|have been) (removed|deleted)\b`)

// containerd SIGSTOPped while the server shuts down: the server exits
// within 10 s all the same, without claiming it removed what it could
// not; once containerd continues, a new server on the same state directory
// and namespace sweeps what was left.
func TestFaultDaemonStoppedDuringShutdown(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)
	done, _ := startRunning(t, d, s)
	d.Stop(t)
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, 10*time.Second, start)
	t.Logf("server exited %s after stdin closed, containerd stopped: %v", took.Round(time.Millisecond), s.state)
	select {
	case o := <-done:
		t.Logf("the in-flight call: %s", o)
		if o.err == nil && claimsRemoved.MatchString(o.r.text) {
			t.Errorf("the in-flight call: %s; containerd was stopped, so nothing was removed: want no claim that it was", o)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the in-flight call got no answer, not even the transport's end, within 5s of the server's exit")
	}

	d.Cont(t)
	sweptByNewServer(t, d, stateDir)
	d.assertNoLeftovers(t, stateDir)
}

// sweptByNewServer starts a new server on d and stateDir, checks that
// within 10 s it sweeps the containers and run directories an earlier
// server left, and closes it.
func sweptByNewServer(t *testing.T, d *privateDaemon, stateDir string) {
	t.Helper()
	left := d.containerIDs(t)
	runDirs, _ := filepath.Glob(filepath.Join(stateDir, "csm-*"))
	t.Logf("left by the server that exited during the hang: containers %v, run directories %d", left, len(runDirs))
	s := startFaultServer(t, d, stateDir)
	start := time.Now()
	ok := waitFor(10*time.Second, func() bool {
		now := d.containerIDs(t)
		for _, id := range left {
			if slices.Contains(now, id) {
				return false
			}
		}
		for _, dir := range runDirs {
			if _, err := os.Stat(dir); err == nil {
				return false
			}
		}
		return true
	})
	if ok {
		t.Logf("the new server swept what was left in %s", time.Since(start).Round(time.Millisecond))
	} else {
		t.Errorf("10s after a new server started: containers %v (left: %v); want what the old server left swept", d.containerIDs(t), left)
	}
	start = time.Now()
	s.stdin.Close()
	took := s.waitExit(t, exitBound, start)
	t.Logf("the new server exited %s after stdin closed: %v", took.Round(time.Millisecond), s.state)
}

// containerd SIGSTOPped while the server shuts down with its pool full
// and a session's cell running that ignores the interrupt (issue 26):
// when the server exits, no process of any of its sandboxes runs, though
// containerd's records of them are left; once containerd continues, a new
// server sweeps those.
func TestFaultDaemonStoppedSandboxesDieWithTheServer(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)
	holdSessionCell(t, s)
	t.Logf("the sandboxes' processes before containerd stopped: %v", sandboxProcesses(d.namespace))
	d.Stop(t)
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, 10*time.Second, start)
	t.Logf("server exited %s after stdin closed, containerd stopped: %v", took.Round(time.Millisecond), s.state)
	// The kill is the kernel's to carry out, and the shim's to reap.
	var procs []string
	if !waitFor(2*time.Second, func() bool { procs = sandboxProcesses(d.namespace); return len(procs) == 0 }) {
		t.Errorf("2s after the server exited, containerd stopped: processes of its sandboxes %v; want none: a sandbox's processes end with the server, whatever containerd does", procs)
	}
	d.Cont(t)
	sweptByNewServer(t, d, stateDir)
	d.assertNoLeftovers(t, stateDir)
}

// holdSessionCell creates a python session on s and starts a cell in it
// that ignores SIGINT (the session's interrupt) and sleeps; it returns
// once the cell runs.
func holdSessionCell(t *testing.T, s *faultServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var created createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &created); isErr || created.SessionID == "" {
		t.Fatalf("create_session: %q %+v", text, created)
	}
	token := strconv.FormatInt(time.Now().UnixNano(), 36)
	s.callAsync("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nopen('/tmp/held-"+token+"', 'w').close()\ntime.sleep(120)", time.Minute, "session_id", created.SessionID)
	if !waitFor(30*time.Second, func() bool { return sandboxTmpFile("held-"+token) != "" }) {
		t.Fatalf("the session's cell did not run within 30s\nstderr:\n%s", s.stderr)
	}
}

// containerd SIGSTOPped before a call that needs a sandbox made on demand
// (the language keeps no ready ones) (issue 26): the call fails within its
// own timeout_seconds and 2 s, not at a fixed bound of the server's,
// saying that no sandbox could be made within its timeout because
// containerd did not answer. Once containerd continues, nothing is left at
// the server's exit.
func TestFaultDaemonStoppedColdCallEndsAtItsTimeout(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir, "\n[languages.python]\npool = 0\n")
	// The image is prepared; only containerd's hang is left in the way.
	if o := s.call(context.Background(), "print('up')", 30*time.Second); o.err != nil || o.r.text != "up\n" {
		t.Fatalf("a call with containerd healthy: %s; want up", o)
	}
	d.Stop(t)
	for _, timeout := range []int{1, 3} {
		o := s.call(context.Background(), "print('ran')", 30*time.Second, "timeout_seconds", timeout)
		t.Logf("call with timeout_seconds %d, containerd stopped: %s", timeout, o)
		want := fmt.Sprintf("no sandbox could be made within the call's timeout of %ds", timeout)
		if o.err != nil || !o.r.isError || !strings.Contains(o.r.text, want) || !strings.Contains(o.r.text, "containerd") {
			t.Errorf("call with timeout_seconds %d, containerd stopped: %s; want an error result saying %q and naming containerd", timeout, o, want)
		}
		if bound := time.Duration(timeout)*time.Second + 2*time.Second; o.took > bound {
			t.Errorf("call with timeout_seconds %d, containerd stopped: answered after %s; want within %s", timeout, o.took.Round(time.Millisecond), bound)
		}
	}
	d.Cont(t)
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, exitBound, start)
	t.Logf("server exited %s after stdin closed, containerd continued: %v", took.Round(time.Millisecond), s.state)
	d.assertNoLeftovers(t, stateDir)
}

// A server started while containerd is down: it serves, each call gets an
// actionable error result at once, and calls work once containerd is up,
// without a restart of the server.
func TestFaultServerStartedWithDaemonDown(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	d.Kill(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	for i := range 3 {
		o := s.call(context.Background(), "print(1)", 10*time.Second)
		t.Logf("call %d with containerd down: %s", i, o)
		if o.err != nil || !o.r.isError || !strings.Contains(o.r.text, "containerd") || o.took > time.Second {
			t.Errorf("call %d with containerd down: %s; want an error result naming containerd within 1s", i, o)
		}
	}
	d.Restart(t)
	up := time.Now()
	var last callOutcome
	ok := waitFor(10*time.Second, func() bool {
		last = s.call(context.Background(), "print('up')", 30*time.Second)
		return last.err == nil && last.r.text == "up\n"
	})
	t.Logf("first working call %s after containerd started (last: %s)", time.Since(up).Round(time.Millisecond), last)
	if !ok {
		t.Errorf("calls after containerd started: still %s after 10s; want them to work without a restart of the server", last)
	}
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, exitBound, start)
	t.Logf("server exited %s after stdin closed: %v", took.Round(time.Millisecond), s.state)
	if !s.state.Success() {
		t.Errorf("server exit: %v; want 0", s.state)
	}
	d.assertNoLeftovers(t, stateDir)
}

// tinyStateDir mounts a 1 MiB tmpfs for a state directory; the test's end
// unmounts it.
func tinyStateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(testDir, "tiny-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		os.Remove(dir)
	})
	return dir
}

// fill writes path until the file system is full, and returns its size.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4096)
	buf := make([]byte, 4096)
	for {
		if _, err := w.Write(buf); err != nil {
			break
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// The state directory on a tiny tmpfs, filled up: a small call gets an
// error result naming the directory and its free space; a program too big
// for the space left fails the same way and leaves no partial file, so
// that a small call right after works; after space is freed calls work.
func TestFaultStateDirFull(t *testing.T) {
	d := newPrivateDaemon(t)
	stateDir := tinyStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)

	filler := filepath.Join(stateDir, "filler")
	size := fill(t, filler)
	t.Logf("filled %s with %d bytes", stateDir, size)
	o := s.call(context.Background(), "print('small')", 30*time.Second)
	t.Logf("small call, disk full: %s", o)
	if o.err != nil || !o.r.isError || !strings.Contains(o.r.text, stateDir) || !strings.Contains(o.r.text, "free") || o.took > 5*time.Second {
		t.Errorf("small call with the state directory full: %s; want an error result within 5s naming %s and its free space", o, stateDir)
	}

	// Leave 128 KiB: enough for a small program, not for a 512 KiB one.
	if err := os.Truncate(filler, max(0, size-128<<10)); err != nil {
		t.Fatal(err)
	}
	// The failed call's sandbox, and the one it replaced, settle first.
	if !waitFor(30*time.Second, func() bool { return d.poolFull(t) }) {
		t.Fatalf("the pool was not full again within 30s: tasks %+v", d.tasks(t))
	}
	big := "x = 1\n#" + strings.Repeat("y", 512<<10) + "\nprint(x)"
	o = s.call(context.Background(), big, 30*time.Second)
	t.Logf("512 KiB program, 128 KiB free: %s", o)
	if o.err != nil || !o.r.isError || !strings.Contains(o.r.text, stateDir) || !strings.Contains(o.r.text, "free") {
		t.Errorf("512 KiB program with 128 KiB free: %s; want an error result naming %s and its free space", o, stateDir)
	}
	o = s.call(context.Background(), "print('small')", 30*time.Second)
	t.Logf("small call right after: %s", o)
	if o.err != nil || o.r.text != "small\n" {
		t.Errorf("small call right after the failed write: %s; want it to run (the partial file removed at once)", o)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	o = s.call(context.Background(), "print('freed')", 30*time.Second)
	t.Logf("call after freeing space: %s", o)
	if o.err != nil || o.r.text != "freed\n" {
		t.Errorf("call after freeing space: %s; want it to run", o)
	}
	start := time.Now()
	s.stdin.Close()
	took := s.waitExit(t, exitBound, start)
	t.Logf("server exited %s after stdin closed: %v", took.Round(time.Millisecond), s.state)
	d.assertNoLeftovers(t, stateDir)
}

// A server SIGKILLed mid-call: its client sees the call fail, and a new
// server on the same state directory and namespace sweeps the orphans at
// start-up, the running program included.
func TestFaultServerKilledMidCallThenNewServer(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	s := startFaultServer(t, d, stateDir)
	waitPool(t, d, s)
	done, _ := startRunning(t, d, s)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-s.exited
	select {
	case o := <-done:
		t.Logf("the call when its server was killed: %s", o)
		if o.err == nil {
			t.Errorf("the call when its server was killed: %s; want an error", o)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the call got no error within 10s of its server's death")
	}
	s.killClient()
	orphans := d.containerIDs(t)
	if len(orphans) == 0 {
		t.Fatal("the killed server left no container; the case tests nothing")
	}
	s2 := startFaultServer(t, d, stateDir)
	start := time.Now()
	ok := waitFor(10*time.Second, func() bool {
		now := d.containerIDs(t)
		return !slices.ContainsFunc(orphans, func(id string) bool { return slices.Contains(now, id) }) &&
			len(sandboxProcessesOf(d, orphans)) == 0
	})
	if ok {
		t.Logf("the new server swept %d orphans %s after it started (%s after the kill)", len(orphans), time.Since(start).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	} else {
		t.Errorf("10s after a new server started: containers %v (orphans %v); want the orphans swept", d.containerIDs(t), orphans)
	}
	start = time.Now()
	s2.stdin.Close()
	took := s2.waitExit(t, exitBound, start)
	t.Logf("the new server exited %s after stdin closed: %v", took.Round(time.Millisecond), s2.state)
	d.assertNoLeftovers(t, stateDir)
}

// sandboxProcessesOf lists the processes of the sandboxes' uids in the cgroups
// of the containers ids.
func sandboxProcessesOf(d *privateDaemon, ids []string) []string {
	return slices.DeleteFunc(sandboxProcesses(d.namespace), func(p string) bool {
		pid, _, _ := strings.Cut(p, ":")
		cg, _ := os.ReadFile("/proc/" + pid + "/cgroup")
		return !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(string(cg), "/"+id) })
	})
}

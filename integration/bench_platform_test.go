package integration

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

// platformName labels the throughput row of containerd and runc alone.
const platformName = "python hello, containerd + runc alone"

// platformThroughput measures what this daemon and runtime sustain with
// nothing of ours taking part: c workers each create a container from the
// Python image with containerd's default spec, run python3 -c
// "print('hello')" in it with no I/O, wait for its exit, and delete the
// task and the container with its snapshot, for d. It is the ceiling of
// any client of containerd here that gives each run a new container, the
// baseline our own throughput row is set against. binary, if set, is the
// OCI runtime the runc shim runs instead of runc (crun, say); the spec
// then declares oci.SpecVersion, as ours do, since Debian's crun refuses
// containerd's default. The row is still named platformName.
func platformThroughput(b *testing.B, c int, d time.Duration, binary string) throughputRow {
	b.Helper()
	ctx := testContext(b)
	img, err := testClient.GetImage(ctx, config.Default().Languages["python"].Image)
	if err != nil {
		b.Fatal(err)
	}
	specOpts := []oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs("python3", "-c", "print('hello')")}
	var runtime []containerd.NewContainerOpts
	if binary != "" {
		specOpts = append(specOpts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
			s.Version = sandboxoci.SpecVersion
			return nil
		})
		runtime = append(runtime, containerd.WithRuntime(plugins.RuntimeRuncV2, &options.Options{BinaryName: binary}))
	}
	var seq atomic.Int64
	once := func() error {
		id := fmt.Sprintf("bench-platform-%d-%d", os.Getpid(), seq.Add(1))
		ctr, err := testClient.NewContainer(ctx, id, append([]containerd.NewContainerOpts{
			containerd.WithNewSnapshot(id, img),
			containerd.WithNewSpec(specOpts...),
		}, runtime...)...)
		if err != nil {
			return err
		}
		defer ctr.Delete(context.WithoutCancel(ctx), containerd.WithSnapshotCleanup)
		task, err := ctr.NewTask(ctx, cio.NullIO)
		if err != nil {
			return err
		}
		exited, err := task.Wait(ctx)
		if err == nil {
			err = task.Start(ctx)
		}
		if err != nil {
			task.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill)
			return err
		}
		st := <-exited
		if _, err := task.Delete(ctx); err != nil {
			return err
		}
		if code, _, err := st.Result(); err != nil || code != 0 {
			return fmt.Errorf("python3 exited %d (%v)", code, err)
		}
		return nil
	}
	host0 := hostBusy()
	row, errs := drive(platformName, c, until(d), once)
	if len(errs) > 0 {
		b.Fatalf("%s at concurrency %d: %d runs failed; the first: %v", platformName, c, len(errs), errs[0])
	}
	if row.Runs > 0 {
		row.HostCPUMs = round(ms(hostBusy()-host0) / float64(row.Runs))
	}
	fmt.Fprintf(os.Stderr, "bench: %s at concurrency %d: %.1f runs/s, CPU per run %.1f ms\n", platformName, c, row.RunsPerSec, row.HostCPUMs)
	return row
}

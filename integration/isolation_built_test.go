package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// TestIsolationBuiltImage runs the isolation suite's resource and escape
// cases with python in an image that images build made (issue 28), with a
// wheel and a Debian package whose maintainer script ran: the packages a
// user adds must not weaken the sandbox, because the sandbox is
// the server's, not the image's. All but case 27
// (TestIsolationManyHostileRunsAtOnce): its eight bombs at once are a
// load on the host, not on the image, whose kinds of bomb run here one at
// a time (cases 1 to 3); it runs alone on the host after the lanes, and
// there it built this image a second time. Each case runs once, one-shot, over
// stdio (the other modes differ in the server, not the image); every
// server the cases start runs python in the built image (builtPythonImage),
// and the cases' Node.js programs, whose image is the unchanged one, do
// not run (mode.pythonOnly).
// It runs against containerd 2.x alone (it calls no onBothDaemons): the
// image and the spec do not depend on the daemon's version.
func TestIsolationBuiltImage(t *testing.T) {
	index := pipIndex(t)
	tag := "localhost/code-sandbox-mcp/python-custom:isolation"
	t.Cleanup(func() {
		// Not testContext's: the cases take longer than it lasts.
		ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), testNamespace), time.Minute)
		defer cancel()
		if err := testClient.ImageService().Delete(ctx, tag, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("delete %s: %v", tag, err)
		}
	})
	out, stderr, err := imagesBuild(t, index, "--from", "python", "--pip", "tinypkg", "--apt", "tinydeb", "--apt-source", aptRepo(t), "--tag", tag)
	if err != nil || out != tag+"\n" {
		t.Fatalf("images build: %v, stdout %q; want %s\nstderr:\n%s", err, out, tag, stderr)
	}

	builtPythonImage, eachModeRuns = tag, []mode{{name: "oneshot", pythonOnly: true}}
	t.Cleanup(func() { builtPythonImage, eachModeRuns = "", modes })

	// The cases run in the built image: a program there sees the packages.
	// (A subtest, so that its server is gone before the cases start.)
	t.Run("SeesThePackages", func(t *testing.T) {
		ctx := testContext(t)
		s := startMCP(t, serverSpec{})
		r := s.call(ctx, t, "run_python_code", code("import tinypkg; print(tinypkg.VALUE); print(open('/usr/share/tinydeb/hello.txt').read().strip())"))
		if !strings.HasPrefix(r.text, "tinypkg says hello\n") || !strings.Contains(r.text, "tinydeb") || r.isError {
			t.Fatalf("python in the built image: %q (isError %v, stderr %q); want tinypkg's value and tinydeb's file", r.text, r.isError, r.out.Stderr)
		}
	})

	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		// Resources (isolation_resources_test.go).
		{"ForkBomb", TestIsolationForkBomb},
		{"MemoryBomb", TestIsolationMemoryBomb},
		{"CPUSpin", TestIsolationCPUSpin},
		{"SleepAndStdin", TestIsolationSleepAndStdin},
		{"FillTmpAndShm", TestIsolationFillTmpAndShm},
		{"HugeFile", TestIsolationHugeFile},
		{"OutputFlood", TestIsolationOutputFlood},
		{"HostileOutputBytes", TestIsolationHostileOutputBytes},
		{"CodeOverCap", TestIsolationCodeOverCap},
		// Escapes (isolation_escapes_test.go).
		{"RootFSReadOnly", TestIsolationRootFSReadOnly},
		{"NoLeftoverFiles", TestIsolationNoLeftoverFiles},
		{"SecretsUnreadable", TestIsolationSecretsUnreadable},
		{"ProcSysReadOnly", TestIsolationProcSysReadOnly},
		{"NoNamespacesOrMounts", TestIsolationNoNamespacesOrMounts},
		{"NoPtraceAndHostProcessesInvisible", TestIsolationNoPtraceAndHostProcessesInvisible},
		{"DangerousSyscallsRefused", TestIsolationDangerousSyscallsRefused},
		{"NoDevices", TestIsolationNoDevices},
		{"SetuidGivesNothing", TestIsolationSetuidGivesNothing},
		{"EnvironmentAllowListed", TestIsolationEnvironmentAllowListed},
		{"OnlyStdioInherited", TestIsolationOnlyStdioInherited},
		{"NothingSurvivesTheRun", TestIsolationNothingSurvivesTheRun},
		{"SegfaultNoCore", TestIsolationSegfaultNoCore},
		{"PostureFromHost", TestIsolationPostureFromHost},
		{"OwnCgroup", TestIsolationOwnCgroup},
	} {
		t.Run(c.name, c.f)
	}
}

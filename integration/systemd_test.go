package integration

// The systemd unit (contrib/systemd) under a real systemd: installed,
// started (Type=notify, so start returns once the server said READY=1),
// its hardening read from the kernel, a hello per language and a file in
// and out through MCP over HTTP with a token, a clean stop, nothing left
// in containerd, and every file it installed removed. It changes the
// host's /etc and starts a service on the system containerd, so it runs
// only where asked: in make test-cgroupv2's systemd VM.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sys/unix"
)

// The unit and what it reads, as contrib/systemd/README.md installs them.
const (
	unitName      = "code-sandbox-mcp.service"
	unitPath      = "/etc/systemd/system/" + unitName
	unitConfigDir = "/etc/code-sandbox-mcp"
	// unitBinary is the ExecStart binary of the unit.
	unitBinary = "/usr/local/bin/code-sandbox-mcp"
	// The system containerd the unit uses, and the namespace of the
	// default configuration, where the VM's images are.
	systemContainerd = "/run/containerd/containerd.sock"
	systemNamespace  = "code-sandbox"
)

func TestSystemdUnit(t *testing.T) {
	if os.Getenv("SANDBOX_SYSTEMD_UNIT") != "1" {
		t.Skip("installs and starts the systemd unit on this host's systemd and containerd: it runs in make test-cgroupv2's systemd VM (SANDBOX_SYSTEMD_UNIT=1)")
	}
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		t.Fatal("SANDBOX_SYSTEMD_UNIT=1 but systemd is not pid 1 (no /run/systemd/system)")
	}
	bin := os.Getenv("SANDBOX_SYSTEMD_BINARY")
	if bin == "" {
		bin = unitBinary
	}
	unit, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", unitName))
	if err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", "sandbox.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// JavaScript gets a network, so that its sandboxes' namespaces are
	// made by the server under the unit's RestrictNamespaces= and system
	// call filter. Its hello opens no connection: no traffic leaves.
	toml = append(toml, "\n[languages.javascript.network]\nallow = [\"systemd-test.invalid\"]\n"...)
	// Never over a real installation.
	for _, p := range []string{unitPath, unitPath + ".d", unitConfigDir, "/var/log/code-sandbox-mcp"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists: this test installs the unit and removes it after; run it on a throw-away host", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cd, err := containerd.New(systemContainerd, containerd.WithDefaultNamespace(systemNamespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("the system containerd at %s: %v", systemContainerd, err)
	}
	defer cd.Close()
	if left := sandboxesIn(ctx, t, cd); len(left) > 0 {
		t.Fatalf("namespace %s holds %v before the unit started; want none", systemNamespace, left)
	}
	_, hadRun := os.Lstat("/run/code-sandbox-mcp")

	t.Cleanup(func() { uninstallUnit(t, hadRun) })

	// Install: the unit, its config, a token, the listener's port.
	token, port := installUnit(t, bin, unit, toml)
	systemctl(t, "daemon-reload")
	start := time.Now()
	if out, err := osexec.CommandContext(ctx, "systemctl", "start", unitName).CombinedOutput(); err != nil {
		t.Fatalf("systemctl start %s: %v: %s", unitName, err, out)
	}
	t.Logf("systemctl start returned after %s (Type=notify: once the server said READY=1)", time.Since(start).Round(time.Millisecond))
	props := showUnit(t, "ActiveState", "SubState", "MainPID", "StatusText")
	if props["ActiveState"] != "active" || props["SubState"] != "running" || props["StatusText"] != "ready" {
		t.Fatalf("after start: %v; want active, running, status ready", props)
	}

	// The hardening, as the kernel holds it for the main process.
	unitHardening(t, props["MainPID"], string(unit))

	// /healthz: the check that READY=1 waited for passes.
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	unitHealthz(t, base)

	// MCP over HTTP with the token: a hello per language, and a file in
	// and out (the workspace the server mounted is the one the sandbox
	// saw: its mount namespace is containerd's).
	callsThroughUnit(ctx, t, base, token)

	// A clean stop: SIGTERM, every sandbox deleted, exit 0.
	stop := time.Now()
	systemctl(t, "stop", unitName)
	t.Logf("systemctl stop returned after %s", time.Since(stop).Round(time.Millisecond))
	props = showUnit(t, "ActiveState", "Result", "ExecMainStatus")
	if props["ActiveState"] != "inactive" || props["Result"] != "success" || props["ExecMainStatus"] != "0" {
		t.Errorf("after stop: %v; want inactive, success, exit status 0", props)
	}
	if left := sandboxesIn(ctx, t, cd); len(left) > 0 {
		t.Errorf("namespace %s holds %v after the unit stopped; want none", systemNamespace, left)
	}
	if m := mountsUnder("/run/code-sandbox-mcp"); len(m) > 0 {
		t.Errorf("mounts under /run/code-sandbox-mcp after the unit stopped: %v; want none", m)
	}
}

// uninstallUnit, at the end of TestSystemdUnit, stops the unit and
// removes what installUnit put in place (and the state directory, if
// the unit made it: hadRun is what Lstat said of it before), showing the
// unit's journal if the test failed.
func uninstallUnit(t *testing.T, hadRun error) {
	if t.Failed() {
		out, _ := osexec.Command("journalctl", "-u", unitName, "--no-pager", "-n", "200").CombinedOutput()
		t.Logf("journal of %s:\n%s", unitName, out)
	}
	systemctl(t, "stop", unitName)
	// A failed unit is remembered until reset; a stopped one is not.
	if showUnit(t, "ActiveState")["ActiveState"] == "failed" {
		systemctl(t, "reset-failed", unitName)
	}
	for _, p := range []string{unitPath, unitPath + ".d", unitConfigDir, "/var/log/code-sandbox-mcp"} {
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	}
	if hadRun != nil {
		// The state directory, if the unit made it; a mount left in
		// it is an error, not something to remove through.
		if m := mountsUnder("/run/code-sandbox-mcp"); len(m) > 0 {
			t.Errorf("mounts left under /run/code-sandbox-mcp: %v", m)
		} else {
			os.RemoveAll("/run/code-sandbox-mcp")
		}
	}
	systemctl(t, "daemon-reload")
}

// installUnit installs unit, the unit file, with bin as its binary, toml
// as its config, a new token and a free port for its listener, and
// returns the token and the port.
func installUnit(t *testing.T, bin string, unit, toml []byte) (string, int) {
	t.Helper()
	if err := os.WriteFile(unitPath, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	if bin != unitBinary {
		// The binary under test is elsewhere: the same ExecStart, on it.
		var exec string
		for _, l := range strings.Split(string(unit), "\n") {
			if strings.HasPrefix(l, "ExecStart="+unitBinary+" ") {
				exec = "ExecStart=" + bin + strings.TrimPrefix(l, "ExecStart="+unitBinary)
			}
		}
		if exec == "" {
			t.Fatalf("the unit has no ExecStart=%s line", unitBinary)
		}
		writeFile(t, unitPath+".d/binary.conf", "[Service]\nExecStart=\n"+exec+"\n")
	}
	writeFile(t, unitConfigDir+"/sandbox.toml", string(toml)+testPoolsTOML(string(toml), true))
	var token, stderr bytes.Buffer
	tok := osexec.Command(bin, "token", "new", "systemd-test", "--append", unitConfigDir+"/tokens")
	tok.Stdout, tok.Stderr = &token, &stderr
	if err := tok.Run(); err != nil {
		t.Fatalf("token new: %v: %s", err, stderr.String())
	}
	port := freePort(t)
	writeFile(t, unitConfigDir+"/code-sandbox-mcp.env", fmt.Sprintf("CSM_HTTP=127.0.0.1:%d\n", port))

	return strings.TrimSpace(token.String()), port
}

// unitHardening checks the hardening of the unit's main process pid, as
// the kernel holds it: the capabilities of unit's CapabilityBoundingSet
// and no others, no_new_privs, a seccomp filter.
func unitHardening(t *testing.T, pid, unit string) {
	t.Helper()
	status := procStatus(t, pid)
	wantCaps := unitCapabilities(t, unit)
	for _, k := range []string{"CapBnd", "CapEff", "CapPrm"} {
		if got := status[k]; got != fmt.Sprintf("%016x", wantCaps) {
			t.Errorf("%s %s; want %016x, the unit's CapabilityBoundingSet", k, got, wantCaps)
		}
	}
	if status["CapAmb"] != "0000000000000000" || status["CapInh"] != "0000000000000000" {
		t.Errorf("CapAmb %s, CapInh %s; want none", status["CapAmb"], status["CapInh"])
	}
	if status["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs %q; want 1", status["NoNewPrivs"])
	}
	if status["Seccomp"] != "2" {
		t.Errorf("Seccomp %q; want 2 (a filter: SystemCallFilter, RestrictAddressFamilies)", status["Seccomp"])
	}
}

// unitHealthz checks that /healthz at base answers 200 ok.
func unitHealthz(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("/healthz: %d %q; want 200 ok", resp.StatusCode, body)
	}
}

// callsThroughUnit calls the unit's server at base over MCP with token:
// a hello per language, and a file in and out, read back.
func callsThroughUnit(ctx context.Context, t *testing.T, base, token string) {
	t.Helper()
	s := &httpServer{base: base, client: &http.Client{}}
	c := s.connect(t, token)
	call := func(tool string, args map[string]any) toolResult {
		t.Helper()
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		if err != nil {
			t.Fatalf("call %s: %v", tool, err)
		}
		return decodeResult(t, res)
	}
	for _, tc := range []struct{ tool, code, want string }{
		{"run_python_code", `print("hello from python")`, "hello from python\n"},
		{"run_js_code", `console.log("hello from javascript")`, "hello from javascript\n"},
	} {
		r := call(tc.tool, code(tc.code))
		if r.isError || r.out.Stdout != tc.want || r.out.ExitCode != 0 {
			t.Errorf("%s: %q, stdout %q; want %q", tc.tool, r.text, r.out.Stdout, tc.want)
		}
		if hasNet := r.out.Network != nil; hasNet != (tc.tool == "run_js_code") {
			t.Errorf("%s: network list %v (present %v); want one for JavaScript only, which has a network", tc.tool, r.out.Network, hasNet)
		}
	}
	args := code("s = open('in.txt').read()\nopen('out.txt', 'w').write(s.upper())\nprint(len(s))")
	args["files"] = []map[string]any{{"path": "in.txt", "content": "through the unit\n"}}
	r := call("run_python_code", args)
	want := "THROUGH THE UNIT\n"
	sum := sha256.Sum256([]byte(want))
	if r.isError || r.out.Stdout != "17\n" || len(r.out.Files) != 1 || r.out.Files[0].Path != "out.txt" || r.out.Files[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("a file in and out: %q, files %+v; want stdout 17 and out.txt holding %q", r.text, r.out.Files, want)
	}
	read, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: r.out.Files[0].URI}})
	if err != nil {
		t.Fatalf("read %s: %v", r.out.Files[0].URI, err)
	}
	if len(read.Contents) != 1 {
		t.Fatalf("read %s: %+v", r.out.Files[0].URI, read.Contents)
	}
	if tc, ok := read.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != want {
		t.Errorf("out.txt read back %+v; want %q", read.Contents[0], want)
	}
	c.Close()
}

// systemctl runs systemctl with args and fails t if it fails.
func systemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := osexec.Command("systemctl", args...).CombinedOutput(); err != nil {
		t.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// showUnit returns the unit's properties names, as systemctl show has them.
func showUnit(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out, err := osexec.Command("systemctl", "show", "-p", strings.Join(names, ","), unitName).Output()
	if err != nil {
		t.Fatalf("systemctl show %s: %v", unitName, err)
	}
	props := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			props[k] = v
		}
	}
	return props
}

// procStatus returns the fields of /proc/PID/status.
func procStatus(t *testing.T, pid string) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("the unit's main process: %v", err)
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// capNumbers are the capabilities by name, for reading the unit.
var capNumbers = map[string]int{
	"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"CAP_FOWNER": unix.CAP_FOWNER, "CAP_FSETID": unix.CAP_FSETID, "CAP_KILL": unix.CAP_KILL, "CAP_SETGID": unix.CAP_SETGID,
	"CAP_SETUID": unix.CAP_SETUID, "CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE,
	"CAP_NET_ADMIN": unix.CAP_NET_ADMIN, "CAP_NET_RAW": unix.CAP_NET_RAW, "CAP_IPC_LOCK": unix.CAP_IPC_LOCK,
	"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_SYS_PTRACE": unix.CAP_SYS_PTRACE, "CAP_SYS_ADMIN": unix.CAP_SYS_ADMIN,
	"CAP_SYS_NICE": unix.CAP_SYS_NICE, "CAP_SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "CAP_MKNOD": unix.CAP_MKNOD,
	"CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE, "CAP_SETFCAP": unix.CAP_SETFCAP, "CAP_BPF": unix.CAP_BPF,
}

// unitCapabilities is the mask of the unit's CapabilityBoundingSet line.
func unitCapabilities(t *testing.T, unit string) uint64 {
	t.Helper()
	var mask uint64
	found := false
	for _, l := range strings.Split(unit, "\n") {
		v, ok := strings.CutPrefix(l, "CapabilityBoundingSet=")
		if !ok {
			continue
		}
		found = true
		for _, name := range strings.Fields(v) {
			n, ok := capNumbers[name]
			if !ok {
				t.Fatalf("the unit's CapabilityBoundingSet names %s, which this test does not know", name)
			}
			mask |= 1 << n
		}
	}
	if !found || mask == 0 {
		t.Fatal("the unit has no CapabilityBoundingSet line")
	}
	return mask
}

// sandboxesIn lists the containers and tasks of the system containerd's
// namespace.
func sandboxesIn(ctx context.Context, t *testing.T, c *containerd.Client) []string {
	t.Helper()
	ctx = namespaces.WithNamespace(ctx, systemNamespace)
	var left []string
	cs, err := c.Containers(ctx)
	if err != nil {
		t.Fatalf("list containers in %s: %v", systemNamespace, err)
	}
	for _, x := range cs {
		left = append(left, "container "+x.ID())
	}
	ts, err := c.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		t.Fatalf("list tasks in %s: %v", systemNamespace, err)
	}
	for _, x := range ts.Tasks {
		left = append(left, "task "+x.ID)
	}
	return left
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeFile writes content to path, 0600, making its directory (0700).
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/exec"
)

// How a test starts what it runs against. Each starts on the test daemon
// (harness_test.go) unless it says otherwise, with a state directory of
// its own, and when the test ends stops what it started and checks that
// nothing is left in containerd or on the host (a benchmark does both
// itself, with its server's close). Which to use when:
//
//   - newExecutor: the executor in this process, no binary and no MCP,
//     for what the engine does (runs, pools, sessions, uids, the sweep).
//     startExecutor is the same without Prepare, for a language that
//     cannot be prepared.
//   - startMCP: the binary over stdio with an mcp-go client; the default
//     for a test of a tool. startMCPUntil leaves its stop to the caller;
//     startAudited also returns the process and a stop, for what the
//     server writes as it exits (the audit log).
//   - startRaw: the binary over stdio, JSON-RPC lines and no MCP client,
//     for frames a client would never send.
//   - startHTTP: the binary with --http and no client, for HTTP itself
//     (status codes, auth, limits, connections); connect or post on what
//     it returns. startHTTPWith adds TLS.
//   - startMCPHTTP: startMCP over HTTP with a token; startRawHTTP:
//     startRaw over HTTP. The isolation suite's modes (eachMode) pick one
//     of stdio or HTTP for each case.
//   - startFaultServer: the binary on a private daemon the test may kill
//     and restart (faults_test.go), with pipes whose other ends the test
//     holds, to kill the client or the server mid-call.
//   - startBench and startBenchHTTP: for benchmarks, a given binary (the
//     old tree's or the new one's) over stdio, or over HTTP with many
//     clients; newBenchServer is the command they share, not started.

// newExecutor starts an executor on the test daemon, prepared, with its own
// state directory. When the test ends it is closed and the namespace and
// state directory are checked for leftovers.
func newExecutor(t *testing.T, edit func(*exec.Config)) *exec.Executor {
	t.Helper()
	e := startExecutor(t, edit)
	if err := e.Prepare(testContext(t)); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return e
}

// startExecutor is newExecutor without the Prepare, for tests of what
// happens when a language cannot be prepared.
func startExecutor(t *testing.T, edit func(*exec.Config)) *exec.Executor {
	t.Helper()
	cfg := exec.Config{
		Address:   testAddress,
		Namespace: testNamespace,
		StateDir:  newStateDir(t),
		Languages: testLanguages(),
		UIDs:      testUIDs,
		// The harness's: every executor and server on the shared daemon
		// claims uids from it, so that none shares one with another.
		UIDLockDir: testUIDLockDir(),
		// The servers' default (beside their binary), which this
		// process's executable does not have.
		Init: testInit,
	}
	if edit != nil {
		edit(&cfg)
	}
	// A test's own languages too.
	cfg.Languages = withTestRuntime(cfg.Languages)
	if cfg.Logger == nil {
		// What the executor logged, shown if the test fails: registered
		// first, so that it runs after Close.
		log := &syncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the executor's log:\n%s", log)
			}
		})
	}
	e, err := exec.New(testContext(t), cfg)
	if err != nil {
		t.Fatalf("exec.New: %v", err)
	}
	// Cleanups run last-in first-out: Close, then the check.
	t.Cleanup(func() { assertNoLeftovers(t, cfg.StateDir) })
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// serverSpec is how to start one server.
type serverSpec struct {
	args        []string // before the built-in --config, --address, --namespace
	env         []string // the server's whole environment, besides PATH (and serverEnv's GORACE)
	concurrency int      // [sandbox] concurrency; 0 means 4
	sandbox     string   // more lines for the [sandbox] table
	config      string   // more TOML tables (not [sandbox], nor [containerd], which the runtime knobs may set)
	netns       string   // a network namespace (its path) the server runs in, entered by nsenter; "" is the test's
	// ready keeps one ready sandbox a language, as the default's pools
	// do (testPoolsTOML); without it the server keeps none. A config
	// with a language's own table says what it wants either way.
	ready bool
}

// serverCommand returns the command for a server on the test daemon with
// its own state directory, and that directory.
func serverCommand(t *testing.T, spec serverSpec) (*osexec.Cmd, string) {
	t.Helper()
	unpackImages(t)
	stateDir := newStateDir(t)
	cfgPath := filepath.Join(t.TempDir(), "sandbox.toml")
	concurrency := spec.concurrency
	if concurrency == 0 {
		concurrency = 4
	}
	cfg := withUIDs(fmt.Sprintf("[sandbox]\nstate_dir = %q\nconcurrency = %d\n%s\n%s\n%s%s", stateDir, concurrency, spec.sandbox, testContainerdTOML(), spec.config, testPoolsTOML(spec.config, spec.ready)), testUIDLockDir())
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Debug logs are shown only when a test fails, and tell what it did.
	args := append(append([]string{}, spec.args...), "--config", cfgPath, "--address", testAddress, "--namespace", testNamespace, "--log-level", "debug")
	cmd := osexec.Command(mcpBinary(t), args...)
	if spec.netns != "" {
		// nsenter execs the server: the pid is the server's.
		cmd = osexec.Command("nsenter", append([]string{"--net=" + spec.netns, "--", mcpBinary(t)}, args...)...)
	}
	cmd.Env = serverEnv(append([]string{"PATH=" + os.Getenv("PATH")}, spec.env...)...)
	if builtPythonImage != "" && !slices.ContainsFunc(spec.env, func(kv string) bool { return strings.HasPrefix(kv, "CONTAINER_") }) {
		cmd.Env = append(cmd.Env, "CONTAINER_LANGUAGE=python", "CONTAINER_IMAGE="+builtPythonImage)
	}
	return cmd, stateDir
}

// builtPythonImage, when set, is the image every server the tests start
// runs python in (CONTAINER_IMAGE), unless the test sets its own: for
// TestIsolationBuiltImage's run of the isolation cases.
var builtPythonImage string

// startMCP starts the binary and initializes an MCP session with it. When
// the test ends the client closes stdin, the server must exit cleanly, and
// nothing may be left in containerd or the state directory.
func startMCP(t *testing.T, spec serverSpec) *mcpServer {
	t.Helper()
	return startMCPUntil(t, spec, t.Cleanup)
}

// startMCPUntil is startMCP with the server's stop, and the checks of
// what its exit left, registered by until instead of t.Cleanup.
func startMCPUntil(t *testing.T, spec serverSpec, until func(func())) *mcpServer {
	t.Helper()
	return startMCPVersion(t, spec, until, "")
}

// startMCPVersion is startMCPUntil whose client initializes with protocol
// version (mcp-go's client picks its newest if it is "").
func startMCPVersion(t *testing.T, spec serverSpec, until func(func()), version string) *mcpServer {
	t.Helper()
	cmd, stateDir := serverCommand(t, spec)
	// Before the server starts: its pool starts sandboxes at once.
	watch := watchStarts(t)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	// The pipes are the harness's, not mcp-go's stdio transport's: its
	// Close gives the server 5 s to exit, then kills it, and under make
	// test's load (the other daemon's suite running its bombs) a server
	// destroying its pools on the way out was seen to need more; killed,
	// it left its sandboxes behind.
	inW, outR, exited := startPiped(t, cmd)
	frames := &lineMeter{r: outR}
	c := client.NewClient(transport.NewIO(frames, inW, nil))
	until(func() {
		assertNoLeftovers(t, stateDir)
		if strings.Contains(stderr.String(), "panic") {
			t.Errorf("server stderr has a panic:\n%s", stderr)
		}
		if strings.Contains(stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("server stderr has a data race:\n%s", stderr)
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr)
		}
	})
	until(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close the client (stdin): %v", err)
		}
		if err := awaitExit(cmd, exited, 60*time.Second); err != nil {
			t.Errorf("the server's exit once stdin closed: %v", err)
		}
		outR.Close()
	})
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start the MCP client: %v", err)
	}
	ir, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      mcp.Implementation{Name: "integration", Version: "1"},
	}})
	if err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr)
	}
	if ir.ServerInfo.Name != "code-sandbox-mcp" {
		t.Errorf("server name %q; want code-sandbox-mcp", ir.ServerInfo.Name)
	}
	return &mcpServer{c: c, stderr: stderr, watch: watch, stateDir: stateDir, cmd: cmd, frames: frames}
}

// startPiped starts cmd with its standard input and output on pipes of
// the test's, and returns their ends and a channel closed once cmd has
// exited (its Wait returned: cmd.ProcessState is set).
func startPiped(t *testing.T, cmd *osexec.Cmd) (stdin, stdout *os.File, exited <-chan struct{}) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	inR.Close()
	outW.Close()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	return inW, outR, done
}

// awaitExit waits up to d for cmd, whose Wait closes exited, to exit; then
// it sends SIGTERM, and SIGKILL 10 s later, and says so.
func awaitExit(cmd *osexec.Cmd, exited <-chan struct{}, d time.Duration) error {
	select {
	case <-exited:
		return nil
	case <-time.After(d):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return fmt.Errorf("still running %s after stdin closed; exited on SIGTERM", d)
	case <-time.After(10 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("still running %s after stdin closed and 10s after SIGTERM; killed", d)
}

// startAudited is startMCP that also returns the server's process, and
// stop, which closes the client (so that the server exits) and waits for
// the exit; the test's cleanup calls it too.
func startAudited(t *testing.T, spec serverSpec) (*mcpServer, *osexec.Cmd, func()) {
	t.Helper()
	var stops []func()
	s := startMCPUntil(t, spec, func(f func()) { stops = append(stops, f) })
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		})
	}
	t.Cleanup(stop)
	return s, s.cmd, stop
}

// startRaw starts the binary on stdio for a client of raw JSON-RPC lines.
// When the test ends stdin is closed, the server must exit cleanly within
// 20 s, and nothing may be left behind.
func startRaw(t *testing.T) *rawServer {
	t.Helper()
	cmd, stateDir := serverCommand(t, serverSpec{})
	r := &rawServer{cmd: cmd, lines: make(chan []byte, 100), first: make(chan byte, 1), stderr: &syncBuffer{}}
	cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Last: what the server said, for a failure it may explain.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", tail(r.stderr.String(), 8000))
		}
	})
	t.Cleanup(func() { assertNoLeftovers(t, stateDir) })
	t.Cleanup(func() {
		r.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server exit: %v\nstderr:\n%s", err, r.stderr)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("server did not exit within 20s of stdin closing")
		}
	})
	go func() {
		br := bufio.NewReader(stdout)
		if b, err := br.Peek(1); err == nil {
			r.first <- b[0]
		}
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				r.lines <- line
			}
			if err != nil {
				close(r.lines)
				return
			}
		}
	}()
	return r
}

// listenLine is the log line the server promises once it listens.
var listenLine = regexp.MustCompile(`msg="serving MCP over HTTP" listen=(\S+)`)

// waitLogged waits up to 30 s for a line of stderr that re matches, and
// returns re's first group in it; false if none came.
func waitLogged(stderr *syncBuffer, re *regexp.Regexp) (string, bool) {
	var got string
	ok := waitFor(30*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			got = m[1]
		}
		return m != nil
	})
	return got, ok
}

// httpOptions are what startHTTP needs beyond the server's spec.
type httpOptions struct {
	// tls, if set, is served with --tls-cert and --tls-key, and the
	// clients trust its CA only.
	tls *testCA
	// netns, if set, runs the server in a network namespace of its own
	// with loopback alone: its address is reachable only from that
	// namespace (see httpServer.inNetns), and a client there can reach
	// nothing else.
	netns bool
}

// startHTTP starts the binary of spec with --http on a port of its
// choosing, and waits for the line that says where it listens. When the
// test ends it gets SIGTERM (unless it has exited already), must exit 0,
// and leave nothing behind.
func startHTTP(t *testing.T, spec serverSpec) *httpServer {
	t.Helper()
	return startHTTPWith(t, spec, httpOptions{})
}

// startHTTPWith is startHTTP with o.
func startHTTPWith(t *testing.T, spec serverSpec, o httpOptions) *httpServer {
	t.Helper()
	scheme, client := "http", &http.Client{}
	var tlsArgs []string
	if o.tls != nil {
		scheme, client = "https", o.tls.client()
		tlsArgs = []string{"--tls-cert", o.tls.certFile, "--tls-key", o.tls.keyFile}
	}
	spec.args = append(append([]string{"--http", "127.0.0.1:0"}, tlsArgs...), spec.args...)
	cmd, stateDir := serverCommand(t, spec)
	if o.netns {
		// unshare execs sh in the new namespace, and sh, once loopback is
		// up, the server: the process started is the server's.
		unshare, err := osexec.LookPath("unshare")
		if err != nil {
			t.Fatalf("a server in a network namespace of its own needs unshare (util-linux): %v", err)
		}
		if _, err := osexec.LookPath("ip"); err != nil {
			t.Fatalf("a server in a network namespace of its own needs ip (iproute2, as the isolation suite's network cases do): %v", err)
		}
		cmd.Args = append([]string{"unshare", "--net", "--", "/bin/sh", "-c", `ip link set lo up && exec "$@"`, "sh", cmd.Path}, cmd.Args[1:]...)
		cmd.Path = unshare
	}
	s := &httpServer{client: client, stderr: &syncBuffer{}, stateDir: stateDir, cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		assertNoLeftovers(t, stateDir)
		if strings.Contains(s.stderr.String(), "panic") || strings.Contains(s.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("server stderr has a panic or a race:\n%s", s.stderr)
		} else if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr)
		}
	})
	t.Cleanup(func() {
		if err := s.stop(60 * time.Second); err != nil {
			t.Errorf("server exit after SIGTERM: %v", err)
		}
	})
	addr, ok := waitLogged(s.stderr, listenLine)
	if !ok {
		t.Fatalf("the server did not say where it listens within 30s; stderr:\n%s", s.stderr)
	}
	s.base = scheme + "://" + addr
	return s
}

// startMCPHTTP is startMCP over HTTP, for the isolation suite's http
// mode: the binary of spec with --http on loopback and a token file (so
// authentication is on, as it would be for a remote client), and mcp-go's
// streamable HTTP client with the token. When the test ends the client
// ends its session, the server gets SIGTERM and must exit 0, and nothing
// may be left in containerd or the state directory (startHTTP).
func startMCPHTTP(t *testing.T, spec serverSpec) *mcpServer {
	t.Helper()
	path, tokens := tokenFile(t, "isolation")
	spec.args = append(append([]string{}, spec.args...), "--auth-tokens", path)
	// The suite's one client may use the whole server, as over stdio:
	// the per-client shares are tested on their own (http_limits_test.go)
	// and would refuse some of a case's concurrent hostile runs.
	concurrency := spec.concurrency
	if concurrency == 0 {
		concurrency = 4
	}
	spec.config += fmt.Sprintf("\n[http]\nper_client_concurrency = %d\nrate_limit = 0\n", concurrency)
	// Before the server starts: its pool starts sandboxes at once.
	watch := watchStarts(t)
	h := startHTTP(t, spec)
	c := h.connect(t, tokens["isolation"])
	return &mcpServer{c: c, stderr: h.stderr, watch: watch, stateDir: h.stateDir}
}

// startRawHTTP starts a server with a token file for a raw client.
func startRawHTTP(t *testing.T) *rawHTTP {
	t.Helper()
	path, tokens := tokenFile(t, "raw")
	return &rawHTTP{s: startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}}), token: tokens["raw"]}
}

// startFaultServer starts the binary on d with stateDir and initializes an
// MCP session; tables, if given, are more TOML tables of its
// configuration (not [sandbox], [limits] or [languages.javascript]). Only
// python is enabled (the private daemon has no other image) and nothing is
// pulled. When the test ends, a server still running gets stdin closed,
// and is killed 20 s later.
func startFaultServer(t *testing.T, d *privateDaemon, stateDir string, tables ...string) *faultServer {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "sandbox.toml")
	cfg := withUIDs(fmt.Sprintf("[sandbox]\nstate_dir = %q\nconcurrency = 2\npull = \"never\"\n\n[languages.javascript]\ndisabled = true\n%s", stateDir, strings.Join(tables, "")), filepath.Join(d.dir, "uids"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// At debug level: its log is shown if the test fails.
	cmd := osexec.Command(mcpBinary(t), "--config", cfgPath, "--address", d.address, "--namespace", d.namespace, "--log-level", "debug")
	cmd.Env = serverEnv("PATH=" + os.Getenv("PATH"))
	s := &faultServer{cmd: cmd, stateDir: stateDir, stderr: &syncBuffer{}, exited: make(chan struct{})}

	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = errW
	inW, outR, exited := startPiped(t, cmd)
	errW.Close()
	s.stdin, s.stdout, s.errOut = inW, outR, errR
	go io.Copy(s.stderr, errR)
	go func() {
		<-exited
		s.state = cmd.ProcessState
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-s.exited
			t.Errorf("the server did not exit within 20s of the test's end; killed it")
		}
		s.stdout.Close()
		s.errOut.Close()
		for _, bad := range []string{"panic", "WARNING: DATA RACE"} {
			if strings.Contains(s.stderr.String(), bad) {
				t.Errorf("server stderr has %q", bad)
			}
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr)
		}
	})

	s.c = client.NewClient(transport.NewIO(outR, inW, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.c.Start(ctx); err != nil {
		t.Fatalf("start the MCP client: %v", err)
	}
	if _, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "faults", Version: "1"},
	}}); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, s.stderr)
	}
	return s
}

// newBenchServer prepares the command of the binary at debug level with
// sandboxTOML (lines of [sandbox], then more tables) and args.
func newBenchServer(b *testing.B, bin, sandboxTOML string, args ...string) *benchServer {
	b.Helper()
	stateDir := newStateDir(b)
	cfgPath := filepath.Join(b.TempDir(), "sandbox.toml")
	if err := os.WriteFile(cfgPath, []byte(withUIDs(fmt.Sprintf("[sandbox]\nstate_dir = %q\n%s", stateDir, sandboxTOML), testUIDLockDir())), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := osexec.Command(bin, append([]string{"--log-level", "debug", "--config", cfgPath, "--address", testAddress, "--namespace", testNamespace}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	s := &benchServer{cmd: cmd, stderr: &syncBuffer{}, stateDir: stateDir}
	cmd.Stderr = s.stderr
	return s
}

// startBench starts the binary at debug level with sandboxTOML (lines of
// [sandbox], then more tables) and initializes a session over stdio.
func startBench(b *testing.B, bin, sandboxTOML string) *benchServer {
	b.Helper()
	s := newBenchServer(b, bin, sandboxTOML)
	cmd := s.cmd
	tr := transport.NewStdioWithOptions(cmd.Path, nil, cmd.Args[1:], transport.WithCommandFunc(
		func(ctx context.Context, command string, env []string, args []string) (*osexec.Cmd, error) {
			return cmd, nil
		}))
	s.c = client.NewClient(tr)
	servers.Add(1)
	ctx := testContext(b)
	if err := s.c.Start(ctx); err != nil {
		b.Fatalf("start %s: %v", bin, err)
	}
	if _, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "bench", Version: "1"},
	}}); err != nil {
		b.Fatalf("initialize: %v\nstderr:\n%s", err, s.stderr)
	}
	return s
}

// startBenchHTTP starts the binary as startBench does, but serving
// streamable HTTP on a loopback port of its choosing with a token file of
// clients names, and connects one MCP client per name.
func startBenchHTTP(b *testing.B, bin, sandboxTOML string, clients int) *benchServer {
	b.Helper()
	dir := b.TempDir()
	var lines []string
	tokens := make([]string, clients)
	for i := range tokens {
		tokens[i] = httpauth.NewToken()
		lines = append(lines, httpauth.Line(fmt.Sprintf("client%d", i), tokens[i]))
	}
	tokenPath := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenPath, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	s := newBenchServer(b, bin, sandboxTOML, "--http", "127.0.0.1:0", "--auth-tokens", tokenPath)
	if err := s.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", bin, err)
	}
	servers.Add(1)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	s.stop = func() error {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(time.Minute):
			_ = s.cmd.Process.Kill()
			return fmt.Errorf("still running a minute after SIGTERM")
		}
	}
	addr, ok := waitLogged(s.stderr, listenLine)
	if !ok {
		s.stop()
		b.Fatalf("the server did not say where it listens within 30s; stderr:\n%s", s.stderr)
	}
	ctx := testContext(b)
	for _, tok := range tokens {
		c, err := client.NewStreamableHttpClient("http://"+addr+"/mcp",
			transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ClientInfo: mcp.Implementation{Name: "bench-http", Version: "1"},
		}}); err != nil {
			b.Fatalf("initialize over HTTP: %v\nstderr:\n%s", err, s.stderr)
		}
		s.clients = append(s.clients, c)
	}
	s.c = s.clients[0]
	s.base, s.tokens = "http://"+addr, tokens
	// Each call takes a client no other call is using.
	s.free = make(chan *client.Client, len(s.clients))
	for _, c := range s.clients {
		s.free <- c
	}
	return s
}

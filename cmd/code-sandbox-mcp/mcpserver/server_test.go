package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/internal/jsontest"
	"code-sandbox-mcp/internal/logtest"
	"code-sandbox-mcp/oci"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// start serves s over in-memory stdio pipes and returns a started mcp-go
// client of it, not yet initialized, with a context that ends with the
// test. If wire is not nil, it gets a copy of every byte the server
// writes.
func start(t *testing.T, s *server.MCPServer, wire io.Writer) (*client.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clientRead, serverWrite := io.Pipe()
	serverRead, clientWrite := io.Pipe()
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(log.New(testWriter{t}, "server: ", 0))
	served := make(chan struct{})
	var out io.Writer = serverWrite
	if wire != nil {
		out = io.MultiWriter(wire, serverWrite) // wire first: the client may act as soon as it reads
	}
	go func() {
		defer close(served)
		stdio.Listen(ctx, serverRead, out)
	}()
	c := client.NewClient(transport.NewIO(clientRead, clientWrite, io.NopCloser(strings.NewReader(""))))
	t.Cleanup(func() {
		c.Close()
		cancel()
		serverWrite.Close()
		serverRead.Close()
		<-served
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

// connect serves s over in-memory stdio pipes, as the binary serves it over
// its own stdin and stdout, and returns an initialized mcp-go client of it.
// The session speaks the newest protocol version that clients deployed
// today speak. If wire is not nil, it gets a copy of every byte the server
// writes. Everything is closed when the test ends.
func connect(t *testing.T, s *server.MCPServer, wire io.Writer) *client.Client {
	t.Helper()
	c, ctx := start(t, s, wire)
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: t.Name(), Version: "test"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// testOptions are the options of the servers the tests build.
var testOptions = Options{
	Version:    "test",
	ImportHint: "code-sandbox-mcp --namespace test-ns images import FILE",
	DoctorHint: "code-sandbox-mcp --namespace test-ns doctor",
}

// newServer builds the server of langs on run.
func newServer(t *testing.T, langs []config.Language, run RunFunc) *server.MCPServer {
	t.Helper()
	s, err := New(t.Context(), testOptions, langs, run)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newClient builds the server of langs, which run nothing, and connects
// a client to it.
func newClient(t *testing.T, langs []config.Language) *client.Client {
	t.Helper()
	return connect(t, newServer(t, langs, noRun(t)), nil)
}

// runClient builds the server of the default languages on run and
// connects a client to it.
func runClient(t *testing.T, run RunFunc) *client.Client {
	t.Helper()
	return connect(t, newServer(t, config.Default().Enabled(), run), nil)
}

func noRun(t *testing.T) RunFunc {
	return func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		t.Errorf("Run called with %+v; want nothing started", req)
		return nil, errors.New("not expected")
	}
}

// wire records what a server writes: one JSON-RPC message a line.
type wire struct{ logtest.Buffer }

// result returns, as sent, the result of the last response that has
// the given member.
func (w *wire) result(t *testing.T, member string) map[string]any {
	t.Helper()
	sent := w.String()
	var found map[string]any
	for _, line := range strings.Split(sent, "\n") {
		var msg struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Result[member] != nil {
			found = msg.Result
		}
	}
	if found == nil {
		t.Fatalf("no result with %q in:\n%s", member, sent)
	}
	return found
}

// TestToolsListGolden snapshots tools/list as the server sends it, so
// that a change of a tool's name, description or schema is deliberate:
// go test -run Golden -update.
func TestToolsListGolden(t *testing.T) {
	var w wire
	c := connect(t, newSessionServer(t, config.Default().Enabled(), noRun(t), &fakeSessions{limits: defaultSessionLimits()}, nil), &w)
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(w.result(t, "tools"), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "tools_list.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("tools/list changed; if on purpose, run go test ./cmd/code-sandbox-mcp/mcpserver -run Golden -update\ngot:\n%s", got)
	}

	if len(res.Tools) != 5 {
		t.Fatalf("%d tools; want 5", len(res.Tools))
	}
	// Every array in a schema has items.
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
	for _, path := range jsontest.ArraysWithoutItems("tools", v) {
		t.Errorf("%s: array without items", path)
	}
}

// readEnvironments reads the environments resource through c.
func readEnvironments(t *testing.T, c *client.Client) environmentsOutput {
	t.Helper()
	res, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: environmentsURI}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("%d contents; want 1", len(res.Contents))
	}
	text, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || text.MIMEType != "application/json" {
		t.Fatalf("contents %+v; want JSON text", res.Contents[0])
	}
	var env environmentsOutput
	if err := json.Unmarshal([]byte(text.Text), &env); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestEnvironmentsResource(t *testing.T) {
	env := readEnvironments(t, newClient(t, config.Default().Enabled()))
	if env.Server != "code-sandbox-mcp" || env.Version != "test" {
		t.Errorf("server %q version %q; want code-sandbox-mcp test", env.Server, env.Version)
	}
	py := env.Languages["python"]
	if py.Tool != "run_python_code" || py.Image == "" || py.Limits.MemoryBytes != 512<<20 || py.Limits.Network {
		t.Errorf("python environment %+v", py)
	}
	if env.Languages["javascript"].Tool != "run_js_code" {
		t.Errorf("javascript environment %+v", env.Languages["javascript"])
	}
	if env.Tasks.MaxTasks != 0 || py.Limits.MaxTaskTimeoutSeconds != 0 {
		t.Errorf("a server without tasks: tasks %+v, max_task_timeout_seconds %v; want none", env.Tasks, py.Limits.MaxTaskTimeoutSeconds)
	}
	o := testOptions
	o.Tasks = &Tasks{Max: 7, Retention: time.Minute}
	s, err := New(t.Context(), o, config.Default().Enabled(), noRun(t))
	if err != nil {
		t.Fatal(err)
	}
	env = readEnvironments(t, connect(t, s, nil))
	if env.Tasks != (tasksOutput{MaxTasks: 7, ResultRetentionSeconds: 60}) || env.Languages["python"].Limits.MaxTaskTimeoutSeconds != 3600 {
		t.Errorf("a server with tasks: tasks %+v, max_task_timeout_seconds %v; want 7, 60 and 3600", env.Tasks, env.Languages["python"].Limits.MaxTaskTimeoutSeconds)
	}
}

// The instructions call the sandboxes network-less only if no spec gives
// one a network.
func TestInstructions(t *testing.T) {
	if got := instructions([]sandbox{{}, {}}, nil); !strings.Contains(got, "network-less") {
		t.Errorf("instructions without a network: %q; want network-less", got)
	}
	if got := instructions([]sandbox{{}, {Posture: oci.Posture{Network: true}}}, nil); strings.Contains(got, "network-less") {
		t.Errorf("instructions with a network: %q; want no network-less", got)
	}
}

// TestSandboxFactsFollowTheSpec checks what the environments resource and
// the tool descriptions say about the sandbox against the spec each
// language's policy generates, read here straight from the spec's fields.
// The second case changes the limits, so that text written by hand for the
// defaults would fail.
func TestSandboxFactsFollowTheSpec(t *testing.T) {
	changed := config.Default().Enabled()
	for i := range changed {
		changed[i].Limits.ShmBytes = 16 << 20
		changed[i].Limits.TmpBytes = 100 << 20
		changed[i].Limits.MemoryBytes = 1 << 30
		changed[i].Limits.CPUs = 1.5
		changed[i].Limits.Pids = 64
		changed[i].Limits.WorkspaceBytes = 32 << 20
	}
	for name, langs := range map[string][]config.Language{"defaults": config.Default().Enabled(), "changed": changed} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, langs)
			env := readEnvironments(t, c)
			tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			descriptions := map[string]string{}
			for _, tool := range tools.Tools {
				descriptions[tool.Name] = tool.Description
			}
			for _, l := range langs {
				p := oci.NewPolicy(l)
				p.UID, p.GID = 2000000000, 2000000000
				p.WorkspaceHostDir = t.TempDir()
				s, err := oci.Generate(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				got := env.Languages[l.Name].Limits
				desc := descriptions[l.Tool]

				// Writable: the tmpfs mounts not mounted read-only, but
				// runc's /dev, which holds device nodes only; and the
				// workspace, a bind of the executor's own tmpfs of
				// workspace_size.
				want := map[string]int64{}
				for _, m := range s.Mounts {
					switch {
					case slices.Contains(m.Options, "ro") || m.Destination == "/dev":
					case m.Type == "tmpfs":
						want[m.Destination] = sizeOption(t, m.Options)
					case m.Type == "bind" && m.Destination == oci.WorkspaceDir:
						want[m.Destination] = l.Limits.WorkspaceBytes
					}
				}
				if _, ok := want[oci.WorkspaceDir]; !ok {
					t.Fatalf("%s: the spec has no writable %s", l.Name, oci.WorkspaceDir)
				}
				if _, ok := want["/dev/shm"]; !ok {
					t.Fatalf("%s: the spec has no writable /dev/shm; this test needs one", l.Name)
				}
				gotW := map[string]int64{}
				for _, w := range got.Writable {
					gotW[w.Path] = w.Bytes
				}
				if !maps.Equal(gotW, want) {
					t.Errorf("%s: resource writable %v; want the spec's writable mounts %v", l.Name, gotW, want)
				}
				for path, size := range want {
					if !strings.Contains(desc, fmt.Sprintf("%s (%s", path, config.Size(size))) {
						t.Errorf("%s: description does not name writable %s (%s):\n%s", l.Name, path, config.Size(size), desc)
					}
				}
				if !s.Root.Readonly || !got.ReadOnlyRootFS || !strings.Contains(desc, "a read-only file system except") {
					t.Errorf("%s: spec root read-only %v, resource %v, description %q", l.Name, s.Root.Readonly, got.ReadOnlyRootFS, desc)
				}

				// Network: the spec gives the run a network namespace of
				// its own (no path: a new one, loopback only).
				ownNetNS := slices.ContainsFunc(s.Linux.Namespaces, func(ns specs.LinuxNamespace) bool {
					return ns.Type == specs.NetworkNamespace && ns.Path == ""
				})
				if !ownNetNS || got.Network || !strings.Contains(desc, "no network") {
					t.Errorf("%s: spec has its own network namespace %v; resource network %v; description %q", l.Name, ownNetNS, got.Network, desc)
				}

				// Memory, CPUs, pids: the cgroup limits.
				r := s.Linux.Resources
				if got.MemoryBytes != *r.Memory.Limit || !strings.Contains(desc, config.Size(*r.Memory.Limit).String()+" memory") {
					t.Errorf("%s: resource memory %d, description %q; want the spec's %d", l.Name, got.MemoryBytes, desc, *r.Memory.Limit)
				}
				if cpus := float64(*r.CPU.Quota) / float64(*r.CPU.Period); got.CPUs != cpus {
					t.Errorf("%s: resource cpus %v; want the spec's %v", l.Name, got.CPUs, cpus)
				}
				if got.Pids != *r.Pids.Limit || !strings.Contains(desc, fmt.Sprintf("%d processes", *r.Pids.Limit)) {
					t.Errorf("%s: resource pids %d, description %q; want the spec's %d", l.Name, got.Pids, desc, *r.Pids.Limit)
				}

				// HOME is the run's, and writable.
				if got.Home != "/tmp" || !strings.Contains(desc, "also HOME") {
					t.Errorf("%s: resource home %q, description %q; want /tmp", l.Name, got.Home, desc)
				}
			}
		})
	}
}

// sizeOption reads a tmpfs mount's size= option.
func sizeOption(t *testing.T, options []string) int64 {
	t.Helper()
	for _, o := range options {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

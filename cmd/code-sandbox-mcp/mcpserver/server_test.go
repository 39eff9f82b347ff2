package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// connect serves s over in-memory stdio pipes, as the binary serves it over
// its own stdin and stdout, and returns an initialized mcp-go client of it.
// The session speaks the newest protocol version that clients deployed
// today speak. If wire is not nil, it gets a copy of every byte the server
// writes. Everything is closed when the test ends.
func connect(t *testing.T, s *server.MCPServer, wire io.Writer) *client.Client {
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

// newClient builds the server of the default languages on run and
// connects a client to it.
func newClient(t *testing.T, run RunFunc) *client.Client {
	t.Helper()
	return connect(t, New(Options{Version: "test"}, config.Default().Enabled(), run), nil)
}

func noRun(t *testing.T) RunFunc {
	return func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		t.Errorf("Run called with %+v; want nothing started", req)
		return nil, errors.New("not expected")
	}
}

// wire records what a server writes: one JSON-RPC message a line.
type wire struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// result returns, as sent, the result of the last response that has
// the given member.
func (w *wire) result(t *testing.T, member string) map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var found map[string]any
	for _, line := range bytes.Split(w.buf.Bytes(), []byte("\n")) {
		var msg struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal(line, &msg) == nil && msg.Result[member] != nil {
			found = msg.Result
		}
	}
	if found == nil {
		t.Fatalf("no result with %q in:\n%s", member, w.buf.Bytes())
	}
	return found
}

// TestToolsListGolden snapshots tools/list as the server sends it, so
// that a change of a tool's name, description or schema is deliberate:
// go test -run Golden -update.
func TestToolsListGolden(t *testing.T) {
	var w wire
	c := connect(t, New(Options{Version: "test"}, config.Default().Enabled(), noRun(t)), &w)
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

	if len(res.Tools) != 2 {
		t.Fatalf("%d tools; want 2", len(res.Tools))
	}
	// Every array in a schema has items.
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "array" && v["items"] == nil {
				t.Errorf("%s: array without items", path)
			}
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("tools", v)
}

// readEnvironments reads the environments resource through c.
func readEnvironments(t *testing.T, c *client.Client) environmentsOutput {
	t.Helper()
	res, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: EnvironmentsURI}})
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
	env := readEnvironments(t, newClient(t, noRun(t)))
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
}

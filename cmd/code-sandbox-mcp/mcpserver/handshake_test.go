package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
)

// rawClient writes JSON-RPC lines to a server over in-memory stdio pipes
// and reads its answers, so that a test can send what the mcp-go client
// never would.
type rawClient struct {
	in      io.Writer
	answers chan []byte
	close   func() // ends the session and waits for the server to stop serving it
}

// rawConnect serves s over in-memory stdio pipes until the client is
// closed or the test ends.
func rawConnect(t *testing.T, s *server.MCPServer) *rawClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clientRead, serverWrite := io.Pipe()
	serverRead, clientWrite := io.Pipe()
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(log.New(testWriter{t}, "server: ", 0))
	served, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		stdio.Listen(ctx, serverRead, serverWrite)
	}()
	c := &rawClient{in: clientWrite, answers: make(chan []byte)}
	c.close = sync.OnceFunc(func() {
		cancel()
		clientWrite.Close()
		clientRead.Close()
		<-served
		<-read
	})
	t.Cleanup(c.close)
	go func() {
		defer close(read)
		sc := bufio.NewScanner(clientRead)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case c.answers <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

// answer is a JSON-RPC response, as a test reads it.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// send writes line to the server.
func (c *rawClient) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// call writes line to the server and returns the next answer.
func (c *rawClient) call(t *testing.T, line string) answer {
	t.Helper()
	c.send(t, line)
	select {
	case data := <-c.answers:
		var a answer
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("answer %s: %v", data, err)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer 10s after %s", line)
		return answer{}
	}
}

const (
	initializeLine  = `{"jsonrpc":"2.0","id":%s,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// wantRefused fails the test unless a is a -32600 error with the id id.
func wantRefused(t *testing.T, a answer, id string) {
	t.Helper()
	if a.Error == nil || a.Error.Code != -32600 || string(a.ID) != id {
		t.Errorf("answer id %s, result %.100s, error %+v; want id %s and error code -32600", a.ID, a.Result, a.Error, id)
	}
}

// wantResult fails the test unless a is a result with the id id.
func wantResult(t *testing.T, a answer, id string) {
	t.Helper()
	if a.Error != nil || a.Result == nil || string(a.ID) != id {
		t.Errorf("answer id %s, result %.100s, error %+v; want id %s and a result", a.ID, a.Result, a.Error, id)
	}
}

// Before its initialize has succeeded, a session gets ping and initialize
// served, and every other request refused with -32600 and its own id;
// nothing runs. After it, tools/list is served.
func TestRequestsBeforeInitialize(t *testing.T) {
	c := rawConnect(t, newServer(t, config.Default().Enabled(), noRun(t)))
	wantRefused(t, c.call(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"print(1)"}}}`), "1")
	wantRefused(t, c.call(t, `{"jsonrpc":"2.0","id":"two","method":"tools/list"}`), `"two"`)
	wantRefused(t, c.call(t, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"sandbox://environments"}}`), "3")
	wantResult(t, c.call(t, `{"jsonrpc":"2.0","id":4,"method":"ping"}`), "4")
	// An initialize that fails does not open the session.
	if a := c.call(t, `{"jsonrpc":"2.0","id":5,"method":"initialize","params":"not an object"}`); a.Error == nil {
		t.Errorf("a malformed initialize got result %.100s; want an error", a.Result)
	}
	wantRefused(t, c.call(t, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`), "6")

	wantResult(t, c.call(t, strings.Replace(initializeLine, "%s", "7", 1)), "7")
	c.send(t, initializedLine)
	a := c.call(t, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	wantResult(t, a, "8")
	if !strings.Contains(string(a.Result), `"run_python_code"`) {
		t.Errorf("tools/list result %s; want run_python_code in it", a.Result)
	}
}

// A session's initialize does not open the next session of the same
// server: mcp-go's stdio session is one value for the whole process, so
// the check keeps its own record and forgets it when the session ends.
func TestInitializeIsPerSession(t *testing.T) {
	s := newServer(t, config.Default().Enabled(), noRun(t))
	first := rawConnect(t, s)
	wantResult(t, first.call(t, strings.Replace(initializeLine, "%s", "1", 1)), "1")
	wantResult(t, first.call(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), "2")
	first.close()
	second := rawConnect(t, s)
	wantRefused(t, second.call(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "1")
}

// A request of protocol version 2026-07-28 or later, which has no
// initialize, is served without one.
func TestModernRequestNeedsNoInitialize(t *testing.T) {
	c := rawConnect(t, newServer(t, config.Default().Enabled(), noRun(t)))
	wantResult(t, c.call(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`), "1")
}

// mcp-go's client, unless told a version, probes with server/discover of
// protocol 2026-07-28 before any initialize; it connects and lists the
// tools.
func TestDiscoveringClientConnects(t *testing.T) {
	s := newServer(t, config.Default().Enabled(), noRun(t))
	c, ctx := start(t, s, nil)
	res, err := c.Initialize(ctx, mcp.InitializeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Errorf("protocol %s; want %s, reached without initialize", res.ProtocolVersion, mcp.ProtocolVersion20260728)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 2 {
		t.Errorf("%d tools; want 2", len(tools.Tools))
	}
}

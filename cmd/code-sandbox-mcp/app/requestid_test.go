package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// countingRuns is an executor that counts its runs and runs nothing.
type countingRuns struct {
	runs *atomic.Int32
	noSessions
}

func (c countingRuns) Run(ctx context.Context, req exec.Request) (*exec.Result, error) {
	c.runs.Add(1)
	return &exec.Result{Language: req.Language}, nil
}

func (c countingRuns) Close() error { return nil }

// rawAnswer is a JSON-RPC response, as a test reads it.
type rawAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rawServe runs serveWith on ex over in-memory pipes until the test ends,
// and returns a function that writes a line to it and one that reads its
// next answer.
func rawServe(t *testing.T, ex executor) (send func(string), next func() rawAnswer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clientRead, serverWrite := io.Pipe()
	serverRead, clientWrite := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- testServer(config.Default(), nil).serveWith(ctx, func(context.Context) (executor, error) { return ex, nil },
			serverRead, serverWrite)
	}()
	answers, read := make(chan []byte), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(clientRead)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case answers <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		clientWrite.Close() // stdin ends: serve returns
		if err := <-done; err != nil {
			t.Error(err)
		}
		cancel()
		clientRead.Close()
		<-read
	})
	send = func(line string) {
		t.Helper()
		if _, err := io.WriteString(clientWrite, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next = func() rawAnswer {
		t.Helper()
		select {
		case data := <-answers:
			var a rawAnswer
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatalf("answer %s: %v", data, err)
			}
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no answer in 10s")
			return rawAnswer{}
		}
	}
	return send, next
}

// A request whose id is neither a string nor an integer is answered with
// -32600 Invalid Request and the id null, and is not served; requests with
// the ids MCP allows, notifications and responses are served as before.
func TestRequestIDs(t *testing.T) {
	var runs atomic.Int32
	send, next := rawServe(t, countingRuns{runs: &runs})
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`)
	if a := next(); a.Error != nil || string(a.ID) != "0" {
		t.Fatalf("initialize: answer id %s, error %+v; want id 0 and a result", a.ID, a.Error)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	const call = `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"print(1)"}}}`
	for _, id := range []string{`{"a":1}`, `[1]`, `true`, `false`, `1.5`, `1.0`, `1e3`, `-2E1`, `null`, ` { } `} {
		send(strings.Replace(call, "%s", id, 1))
		if a := next(); a.Error == nil || a.Error.Code != -32600 || string(a.ID) != "null" {
			t.Errorf("tools/call with id %s: answer id %s, result %.100s, error %+v; want id null and error code -32600", id, a.ID, a.Result, a.Error)
		}
	}
	// The same ids in other cases of "id", which mcp-go reads as the id.
	send(`{"jsonrpc":"2.0","ID":{"a":1},"method":"tools/list"}`)
	if a := next(); a.Error == nil || a.Error.Code != -32600 || string(a.ID) != "null" {
		t.Errorf(`tools/list with "ID" {"a":1}: answer id %s, error %+v; want id null and error code -32600`, a.ID, a.Error)
	}

	// A response (no method) with such an id gets no answer: the next
	// answer is the ping's.
	send(`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`)
	send(`{"jsonrpc":"2.0","id":"after the response","method":"ping"}`)
	if a := next(); a.Error != nil || string(a.ID) != `"after the response"` {
		t.Errorf("ping after a response: answer id %s, error %+v; want the ping's result", a.ID, a.Error)
	}

	for _, id := range []string{`"x"`, `""`, `-3`, `0`, `12345678901`} {
		send(strings.Replace(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, "%s", id, 1))
		if a := next(); a.Error != nil || !strings.Contains(string(a.Result), `"run_python_code"`) || string(a.ID) != id {
			t.Errorf("tools/list with id %s: answer id %s, result %.100s, error %+v; want the tools, with the same id", id, a.ID, a.Result, a.Error)
		}
	}
	send(strings.Replace(call, "%s", `"run"`, 1))
	if a := next(); a.Error != nil || string(a.ID) != `"run"` {
		t.Errorf(`tools/call with id "run": answer id %s, error %+v; want a result`, a.ID, a.Error)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs; want 1, the call with a string id", n)
	}
}

package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

// mcpSessionsServer serves a real mcp-go streamable HTTP server behind
// httpHandler's checks with tokens for alice and bob, noEventStream,
// mcpSessions and mcpFront, as serveListener does.
func mcpSessionsServer(t *testing.T) (*httptest.Server, map[string]string) {
	t.Helper()
	toks := map[string]string{"alice": httpauth.NewToken(), "bob": httpauth.NewToken()}
	path := filepath.Join(t.TempDir(), "tokens")
	lines := httpauth.Line("alice", toks["alice"]) + "\n" + httpauth.Line("bob", toks["bob"]) + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := httpauth.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sessions := newMCPSessions()
	mcp := server.NewStreamableHTTPServer(server.NewMCPServer("test", "1"), server.WithEndpointPath("/mcp"),
		server.WithSessionIdManagerResolver(sessions), server.WithSessionIdleTTL(mcpSessionIdle), server.WithDisableStreaming(true))
	front := &mcpFront{mcp: mcp, limit: 1 << 20, logger: slog.New(slog.DiscardHandler)}
	sessions.forgotten = front.end
	ts := httptest.NewServer(httpHandler(noEventStream(sessions.check(front)), httpSettings{tokens: tokens},
		func(context.Context) error { return nil }, slog.New(slog.DiscardHandler)))
	t.Cleanup(ts.Close)
	return ts, toks
}

// mcpRequest sends one request to /mcp as the holder of token, in the MCP
// session id if not empty, and returns the status, the session id the
// server gave, and the body.
func mcpRequest(t *testing.T, ts *httptest.Server, method, token, id, body string) (int, string, string) {
	t.Helper()
	resp, b := mcpResponse(t, ts, method, token, id, body)
	return resp.StatusCode, resp.Header.Get(server.HeaderKeySessionID), b
}

// mcpResponse sends one request to /mcp as the holder of token (none if
// empty), in the MCP session id if not empty, and returns the response
// and its body, read whole.
func mcpResponse(t *testing.T, ts *httptest.Server, method, token, id, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if id != "" {
		req.Header.Set(server.HeaderKeySessionID, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s /mcp: reading the answer: %v", method, err)
	}
	return resp, string(b)
}

const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	pingBody       = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
)

func TestMCPSessionsBelongToTheirPrincipal(t *testing.T) {
	ts, tok := mcpSessionsServer(t)
	code, alice, body := mcpRequest(t, ts, http.MethodPost, tok["alice"], "", initializeBody)
	if code != http.StatusOK || !strings.HasPrefix(alice, mcpSessionPrefix) {
		t.Fatalf("alice's initialize: %d, session %q, %s", code, alice, body)
	}
	if code, _, body := mcpRequest(t, ts, http.MethodPost, tok["alice"], alice, pingBody); code != http.StatusOK {
		t.Fatalf("alice's ping in her session: %d %s", code, body)
	}
	// Bob naming alice's session gets what a made-up id gets, whatever
	// the method. (A GET gets 405 whatever it names: TestMCPRefusesGET.)
	madeUp := mcpSessionPrefix + strings.Repeat("0", 32)
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		body := ""
		if method == http.MethodPost {
			body = pingBody
		}
		codeA, _, bodyA := mcpRequest(t, ts, method, tok["bob"], alice, body)
		codeU, _, bodyU := mcpRequest(t, ts, method, tok["bob"], madeUp, body)
		if codeA != http.StatusNotFound || codeA != codeU || bodyA != bodyU {
			t.Errorf("%s by bob: alice's session %d %q, a made-up one %d %q; want the same 404", method, codeA, bodyA, codeU, bodyU)
		}
	}
	// Bob's DELETE did not end it.
	if code, _, body := mcpRequest(t, ts, http.MethodPost, tok["alice"], alice, pingBody); code != http.StatusOK {
		t.Fatalf("alice's ping after bob's DELETE: %d %s", code, body)
	}
	if code, _, body := mcpRequest(t, ts, http.MethodDelete, tok["alice"], alice, ""); code != http.StatusOK {
		t.Fatalf("alice's DELETE: %d %s", code, body)
	}
	if code, _, _ := mcpRequest(t, ts, http.MethodPost, tok["alice"], alice, pingBody); code != http.StatusNotFound {
		t.Fatalf("alice's ping after her DELETE: %d; want 404", code)
	}
}

func TestMCPSessionsBoundPerPrincipal(t *testing.T) {
	m := newMCPSessions()
	ids := principalIDs{m: m, principal: "alice"}
	first := ids.Generate()
	for range mcpSessionsPerPrincipal - 1 {
		ids.Generate()
	}
	bob := principalIDs{m: m, principal: "bob"}.Generate()
	if !m.owns("alice", first) {
		t.Fatalf("alice's first of %d sessions is forgotten", mcpSessionsPerPrincipal)
	}
	last := ids.Generate()
	if m.owns("alice", first) || !m.owns("alice", last) {
		t.Fatalf("past %d sessions: the first kept %v, the newest kept %v; want the oldest forgotten", mcpSessionsPerPrincipal, m.owns("alice", first), m.owns("alice", last))
	}
	if !m.owns("bob", bob) || m.owns("alice", bob) || m.owns("bob", last) {
		t.Fatal("one principal's sessions count as another's")
	}
	if _, err := ids.Validate(bob); err == nil {
		t.Fatal("alice validates bob's session")
	}
	if got := len(m.owner); got != mcpSessionsPerPrincipal+1 {
		t.Fatalf("%d ids recorded; want %d", got, mcpSessionsPerPrincipal+1)
	}
	ids.Terminate(last)
	if m.owns("alice", last) || len(m.byUser["alice"]) != mcpSessionsPerPrincipal-1 {
		t.Fatal(fmt.Sprint("Terminate did not forget the id: ", len(m.byUser["alice"])))
	}
}

package integration

// The HTTP transport through the real binary: `--http 127.0.0.1:0`, with
// mcp-go's streamable HTTP client, the token and Origin checks, one
// principal's sessions hidden from another, and /healthz.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

// httpServer is a running server on HTTP.
type httpServer struct {
	base   string       // http://127.0.0.1:PORT, or https://
	client *http.Client // trusts the server's certificate, for https
	stderr *syncBuffer
	// stateDir is the server's state directory.
	stateDir string
	cmd      *osexec.Cmd
	// exited is closed once the server has exited, with exitErr set.
	exited  chan struct{}
	exitErr error
}

// stop sends the server SIGTERM, unless it has exited, and waits up to d
// for its exit, which it returns; it kills a server still running then.
func (s *httpServer) stop(d time.Duration) error {
	select {
	case <-s.exited:
		return s.exitErr
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitErr
	case <-time.After(d):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("still running %s after SIGTERM; killed", d)
	}
}

// tokenFile writes a token file for the names and returns its path and
// each name's token.
func tokenFile(t *testing.T, names ...string) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var lines []string
	for _, n := range names {
		tokens[n] = httpauth.NewToken()
		lines = append(lines, httpauth.Line(n, tokens[n]))
	}
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, tokens
}

// connect initializes an MCP session over HTTP with token (none if empty).
func (s *httpServer) connect(t *testing.T, token string) *client.Client {
	t.Helper()
	return s.connectVersion(t, token, "")
}

// connectVersion is connect with protocol version (mcp-go's client picks
// its newest if it is "").
func (s *httpServer) connectVersion(t *testing.T, token, version string) *client.Client {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(s.client)}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	c, err := client.NewStreamableHttpClient(s.base+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      mcp.Implementation{Name: "integration-http", Version: "1"},
	}}); err != nil {
		t.Fatalf("initialize over HTTP: %v", err)
	}
	return c
}

// post sends an initialize request to /mcp with the given headers, and
// returns the status and body.
func (s *httpServer) post(t *testing.T, header map[string]string) (int, http.Header, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequestWithContext(testContext(t), "POST", s.base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestHTTPToolsAndRun(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	c := s.connect(t, tokens["alice"])
	ctx := testContext(t)
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"run_python_code", "run_js_code"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tools/list over HTTP: %v; want %s among them", names, want)
		}
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: code("print(6 * 7)")}})
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, res)
	if r.isError || r.out.Stdout != "42\n" || r.out.ExitCode != 0 {
		t.Errorf("run over HTTP: %q %+v; want stdout 42", r.text, r.out)
	}
}

func TestHTTPUnauthorized(t *testing.T) {
	path, _ := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"no token", nil},
		{"a wrong token", map[string]string{"Authorization": "Bearer " + httpauth.NewToken()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := s.post(t, tc.header)
			if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("got %d, WWW-Authenticate %q, %q; want 401 with a Bearer challenge", status, h.Get("WWW-Authenticate"), body)
			}
			if strings.Contains(body, "alice") {
				t.Errorf("the 401 names a client: %q", body)
			}
		})
	}
}

func TestHTTPOrigin(t *testing.T) {
	s := startHTTP(t, serverSpec{args: []string{"--allowed-origins", "https://ok.example"}})
	if status, _, body := s.post(t, map[string]string{"Origin": "https://evil.example"}); status != http.StatusForbidden {
		t.Errorf("a bad Origin: got %d %q; want 403", status, body)
	}
	if status, _, body := s.post(t, map[string]string{"Origin": "https://ok.example"}); status != http.StatusOK {
		t.Errorf("an allowed Origin: got %d %q; want 200", status, body)
	}
	if status, _, body := s.post(t, nil); status != http.StatusOK {
		t.Errorf("no Origin (not a browser): got %d %q; want 200", status, body)
	}
	// The server's own origin, the address the request reached, passes
	// though --allowed-origins does not name it; a rebinding page's,
	// its own name at the server's port, does not.
	if status, _, body := s.post(t, map[string]string{"Origin": s.base}); status != http.StatusOK {
		t.Errorf("the server's own Origin %s: got %d %q; want 200", s.base, status, body)
	}
	port := s.base[strings.LastIndex(s.base, ":"):]
	if status, _, body := s.post(t, map[string]string{"Origin": "http://evil.example" + port}); status != http.StatusForbidden {
		t.Errorf("a rebinding page's Origin: got %d %q; want 403", status, body)
	}
}

func TestHTTPPrincipalsDoNotShareSessions(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)
	var created createdSession
	if text, isErr := callRaw(ctx, t, alice, "create_session", map[string]any{"language": "python"}, &created); isErr || created.SessionID == "" {
		t.Fatalf("alice's create_session: %q %+v", text, created)
	}
	run := func(c *client.Client, id string) (string, bool) {
		return callRaw(ctx, t, c, "run_python_code", map[string]any{"code": "print(1)", "session_id": id}, nil)
	}
	if text, isErr := run(alice, created.SessionID); isErr {
		t.Fatalf("alice in her own session: %q", text)
	}
	theirs, isErr := run(bob, created.SessionID)
	if !isErr {
		t.Fatalf("bob ran in alice's session: %q", theirs)
	}
	unknown := strings.Repeat("0", len(created.SessionID))
	none, _ := run(bob, unknown)
	if a, b := strings.ReplaceAll(theirs, created.SessionID, "ID"), strings.ReplaceAll(none, unknown, "ID"); a != b {
		t.Errorf("bob's error for alice's session differs from an unknown one's:\n%q\n%q", a, b)
	}
	if text, _ := callRaw(ctx, t, bob, "list_sessions", map[string]any{}, nil); strings.Contains(text, created.SessionID) {
		t.Errorf("bob's list_sessions shows alice's session: %q", text)
	}
	if text, isErr := callRaw(ctx, t, alice, "close_session", map[string]any{"session_id": created.SessionID}, nil); isErr {
		t.Errorf("alice's close_session: %q", text)
	}
}

func TestHTTPHealthz(t *testing.T) {
	path, _ := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	var status int
	var body string
	// The images are imported already; the server prepares them at start.
	if !waitFor(60*time.Second, func() bool {
		resp, err := s.client.Get(s.base + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		status, body = resp.StatusCode, string(b)
		return status == http.StatusOK
	}) {
		t.Fatalf("/healthz: %d %q; want 200 ok within 60s", status, body)
	}
	if body != "ok\n" {
		t.Errorf("/healthz body %q; want ok", body)
	}
	if strings.Contains(body, pythonImage) || strings.Contains(body, nodejsImage) {
		t.Errorf("/healthz body %q names an image", body)
	}
}

func TestHTTPHealthzImageMissing(t *testing.T) {
	s := startHTTP(t, serverSpec{
		env:     []string{"CONTAINER_IMAGE=localhost/code-sandbox-mcp/absent:1", "CONTAINER_LANGUAGE=python"},
		sandbox: `pull = "never"`,
	})
	// /healthz needs no token: its body says what kind of problem there
	// is, and the log says which image.
	for range 3 {
		resp, err := s.client.Get(s.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || string(b) != "not ready: an image is not ready\n" {
			t.Errorf("/healthz with python's image missing: %d %q; want 503 saying an image is not ready", resp.StatusCode, b)
		}
		if strings.Contains(string(b), "absent") || strings.Contains(string(b), "localhost/") {
			t.Errorf("/healthz body %q names the image to a caller with no token", b)
		}
	}
	if n := strings.Count(s.stderr.String(), `msg="/healthz: not ready"`); n != 1 || !strings.Contains(s.stderr.String(), "absent:1") {
		t.Errorf("server log has %d /healthz warnings; want one, naming the image, for three probes:\n%s", n, s.stderr)
	}
}

// rawHTTP speaks JSON-RPC to the server's /mcp without an MCP client, one
// POST a message, as rawServer does on stdio.
type rawHTTP struct {
	s       *httpServer
	token   string
	session string           // Mcp-Session-Id, once initialize has answered
	queue   []map[string]any // the messages answered, not yet taken by next
}

// send POSTs msg and queues what the server answers: nothing for a
// notification (202), else one JSON-RPC message as the body
// (application/json) or as the events of a stream (text/event-stream).
// Either way each message must be one JSON value, on one data line for a
// stream: what a program printed may not break the framing.
func (r *rawHTTP) send(t *testing.T, msg string) {
	t.Helper()
	resp, body := r.post(t, msg)
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return
	case resp.StatusCode != http.StatusOK:
		t.Fatalf("POST %.100s: %s %q", msg, resp.Status, body)
	case ct == "application/json":
		r.queue = append(r.queue, oneMessage(t, body))
	case ct == "text/event-stream":
		for _, line := range strings.Split(string(body), "\n") {
			line = strings.TrimSuffix(line, "\r")
			data, isData := strings.CutPrefix(line, "data: ")
			switch {
			case isData:
				r.queue = append(r.queue, oneMessage(t, []byte(data)))
			case line == "", strings.HasPrefix(line, "event: "), strings.HasPrefix(line, "id: "), strings.HasPrefix(line, ":"):
			default:
				t.Fatalf("event stream line %q is no SSE field: the output broke the framing\nstream:\n%s", line, body)
			}
		}
	default:
		t.Fatalf("POST %.100s: Content-Type %q; want JSON or an event stream", msg, resp.Header.Get("Content-Type"))
	}
}

// post POSTs msg, in the session once initialize has answered, and
// returns the response, its body read, and takes the session's id.
func (r *rawHTTP) post(t *testing.T, msg string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), "POST", r.s.base+"/mcp", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+r.token)
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := r.s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		r.session = id
	}
	return resp, body
}

// oneMessage decodes b, which must be exactly one JSON-RPC 2.0 object
// (json.Unmarshal refuses anything after the first value).
func oneMessage(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["jsonrpc"] != "2.0" {
		t.Fatalf("%q is not one JSON-RPC 2.0 message (%v)", b, err)
	}
	return m
}

// next returns the next message the server answered.
func (r *rawHTTP) next(t *testing.T) map[string]any {
	t.Helper()
	if len(r.queue) == 0 {
		t.Fatalf("no message left from the server\nstderr:\n%s", r.s.stderr)
	}
	m := r.queue[0]
	r.queue = r.queue[1:]
	return m
}

package integration

// The HTTP transport through the real binary: `--http 127.0.0.1:0`, with
// mcp-go's streamable HTTP client, the token and Origin checks, one
// principal's sessions hidden from another, and /healthz.

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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
	base   string // http://127.0.0.1:PORT
	stderr *syncBuffer
}

// listenLine is the log line the server promises once it listens.
var listenLine = regexp.MustCompile(`msg="serving MCP over HTTP" listen=(\S+)`)

// startHTTP starts the binary of spec with --http on a port of its
// choosing, and waits for the line that says where it
// listens. When the test ends it gets SIGTERM, must exit 0, and leave
// nothing behind.
func startHTTP(t *testing.T, spec serverSpec) *httpServer {
	t.Helper()
	spec.args = append([]string{"--http", "127.0.0.1:0"}, spec.args...)
	cmd, stateDir := serverCommand(t, spec)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		assertNoLeftovers(t, stateDir)
		if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("server stderr has a panic or a race:\n%s", stderr)
		} else if t.Failed() {
			t.Logf("server stderr:\n%s", stderr)
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("server exit after SIGTERM: %v", err)
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("server still running 60s after SIGTERM")
		}
	})
	var addr string
	if !waitFor(30*time.Second, func() bool {
		if m := listenLine.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	}) {
		t.Fatalf("the server did not say where it listens within 30s; stderr:\n%s", stderr)
	}
	return &httpServer{base: "http://" + addr, stderr: stderr}
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
	var opts []transport.StreamableHTTPCOption
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
		ClientInfo: mcp.Implementation{Name: "integration-http", Version: "1"},
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
	resp, err := http.DefaultClient.Do(req)
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
		resp, err := http.Get(s.base + "/healthz")
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
		resp, err := http.Get(s.base + "/healthz")
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

package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func TestResolveHTTP(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(httpauth.Line("alice", httpauth.NewToken())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		f       HTTPFlags
		wantErr string // a part of the error; empty for none
	}{
		{"loopback without tokens", HTTPFlags{Addr: "127.0.0.1:0"}, ""},
		{"beyond loopback without tokens", HTTPFlags{Addr: "0.0.0.0:8080"}, "without --auth-tokens"},
		{"beyond loopback with tokens", HTTPFlags{Addr: "0.0.0.0:8080", AuthTokens: tokens}, ""},
		{"half a TLS pair", HTTPFlags{Addr: "127.0.0.1:0", TLSCert: "cert.pem"}, "go together"},
		{"a bad origin", HTTPFlags{Addr: "127.0.0.1:0", Origins: []string{"a.example"}, OriginsSet: true}, "--allowed-origins"},
		{"no port", HTTPFlags{Addr: "127.0.0.1"}, "HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolveHTTP(tc.f, config.Default())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("resolveHTTP: %v; want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("resolveHTTP: %v; want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestClientLimits(t *testing.T) {
	cfg, err := config.Parse("[sandbox]\nconcurrency = 6\n[http]\nrate_limit = 30\nrate_burst = 3\n[languages.python.limits]\ntimeout = \"10s\"\n", "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	cl := clientLimits(cfg, 2)
	want := map[string]time.Duration{"run_python_code": 10 * time.Second, "run_js_code": 30 * time.Second}
	if cl.Concurrency != 3 || cl.Rate != 30 || cl.Burst != 3 || !reflect.DeepEqual(cl.Tools, want) || cl.Principal == nil {
		t.Errorf("clientLimits = concurrency %d, rate %d, burst %d, tools %v; want 3, 30, 3, %v", cl.Concurrency, cl.Rate, cl.Burst, cl.Tools, want)
	}
	// A lone client has the whole server.
	if cl := clientLimits(cfg, 1); cl.Concurrency != 6 {
		t.Errorf("clientLimits of one client: concurrency %d; want 6, all of [sandbox] concurrency", cl.Concurrency)
	}
}

// /healthz needs no token, so its body says only what kind of problem
// there is; the reason, which names images, paths and the socket, goes to
// the log, once per change.
func TestHealthzSaysLittleAndLogsOnce(t *testing.T) {
	const secret = "localhost/private/python:1 at /var/lib/secret"
	var readyErr error
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := httpHandler(http.NotFoundHandler(), httpSettings{}, func(context.Context) error { return readyErr }, logger)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"image missing", fmt.Errorf("python: image %s: %w", secret, errdefs.ErrNotFound), "not ready: an image is not ready\n"},
		{"image failing", fmt.Errorf("python: prepare %s: %w", secret, errors.New("unpack: no space")), "not ready: an image is not ready\n"},
		{"containerd gone", fmt.Errorf("containerd does not answer: %w", status.Error(codes.Unavailable, "dial unix "+secret)), "not ready: containerd is not answering\n"},
		{"containerd hangs", fmt.Errorf("python: %w", fmt.Errorf("%w: %s", exec.ErrNotAnswering, secret)), "not ready: containerd is not answering\n"},
		{"not connected", fmt.Errorf("%w: %s", errNotConnected, secret), "not ready: containerd is not answering\n"},
		{"shutting down", errShuttingDown, "not ready: the server is shutting down\n"},
		{"ready", nil, "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readyErr = tc.err
			logs.Reset()
			for range 3 {
				code, body := get()
				if want := map[bool]int{true: 200, false: 503}[tc.err == nil]; code != want || body != tc.want {
					t.Errorf("got %d %q; want %d %q", code, body, want, tc.want)
				}
			}
			if tc.err == nil {
				if n := strings.Count(logs.String(), "ready again"); n != 1 {
					t.Errorf("log %q; want one line saying it is ready again", logs.String())
				}
				return
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), strings.ReplaceAll(tc.err.Error(), `"`, `\"`)) {
				t.Errorf("log %q; want the full reason once at warn for three probes", logs.String())
			}
		})
	}
}

// GET /mcp, and HEAD, get 405 with Allow: POST, DELETE and say why,
// whatever MCP session they name, once the token and Origin checks have
// passed them (without a token: 401; from a foreign origin: 403); POST
// and DELETE are served as before.
func TestMCPRefusesGET(t *testing.T) {
	ts, tok := mcpSessionsServer(t)
	if resp, body := mcpResponse(t, ts, http.MethodGet, "", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d %q; want 401", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok["alice"])
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET from a foreign origin: %d; want 403", resp.StatusCode)
	}

	code, alice, body := mcpRequest(t, ts, http.MethodPost, tok["alice"], "", initializeBody)
	if code != http.StatusOK || alice == "" {
		t.Fatalf("alice's initialize: %d, session %q, %s", code, alice, body)
	}
	madeUp := mcpSessionPrefix + strings.Repeat("0", 32)
	for _, tc := range []struct {
		name, method, token, id string
	}{
		{"GET without a session", http.MethodGet, "alice", ""},
		{"GET in alice's session", http.MethodGet, "alice", alice},
		{"bob's GET in alice's session", http.MethodGet, "bob", alice},
		{"GET in a made-up session", http.MethodGet, "alice", madeUp},
		{"HEAD in alice's session", http.MethodHead, "alice", alice},
	} {
		resp, body := mcpResponse(t, ts, tc.method, tok[tc.token], tc.id, "")
		want := noEventStreamText + "\n"
		if tc.method == http.MethodHead {
			want = ""
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || body != want {
			t.Errorf("%s: %d %q; want 405 %q", tc.name, resp.StatusCode, body, want)
		}
		if allow := resp.Header.Get("Allow"); allow != "POST, DELETE" {
			t.Errorf("%s: Allow %q; want POST, DELETE", tc.name, allow)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("%s: Content-Type %q; want text/plain", tc.name, ct)
		}
	}

	if code, _, body := mcpRequest(t, ts, http.MethodPost, tok["alice"], alice, pingBody); code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Errorf("alice's ping after the GETs: %d %s; want 200 and a result", code, body)
	}
	if code, _, body := mcpRequest(t, ts, http.MethodDelete, tok["alice"], alice, ""); code != http.StatusOK {
		t.Errorf("alice's DELETE: %d %s; want 200", code, body)
	}
}

// At SIGTERM the server waits for the calls in flight and for nothing
// else: a call's POST stream, begun with a notification, ends with the
// call's result, and the server is gone as soon as the call returns, long
// before the grace. (A GET, which would be a stream that never ends, is
// refused.)
func TestShutdownWaitsForCallsOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ms := server.NewMCPServer("test", "1", server.WithToolCapabilities(false))
	ms.AddTool(mcp.NewTool("wait"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The notification makes the answer an event stream.
		err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
			map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "message": "begun"})
		if err != nil {
			return nil, err
		}
		select {
		case <-release:
			return mcp.NewToolResultText("done"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- serveListener(ctx, ln, ms, func(context.Context) error { return nil },
			httpSettings{loopback: true, grace: 20 * time.Second, maxBody: 1 << 20}, slog.New(slog.DiscardHandler))
	}()
	base := "http://" + ln.Addr().String() + "/mcp"
	do := func(method, id, body string) *http.Response {
		req, _ := http.NewRequest(method, base, strings.NewReader(body))
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
		return resp
	}
	initialized := do(http.MethodPost, "", initializeBody)
	initialized.Body.Close()
	id := initialized.Header.Get(server.HeaderKeySessionID)
	if initialized.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q; want 200 and a session", initialized.StatusCode, id)
	}
	get := do(http.MethodGet, id, "")
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d; want 405", get.StatusCode)
	}
	call := do(http.MethodPost, id, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait","_meta":{"progressToken":"p"}}}`)
	defer call.Body.Close()
	if ct := call.Header.Get("Content-Type"); call.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("the call: %d, Content-Type %q; want 200 and an event stream", call.StatusCode, ct)
	}
	events := bufio.NewReader(call.Body)
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the call's stream ended before its notification: %v", err)
		}
		if strings.Contains(line, "notifications/progress") {
			break
		}
	}

	start := time.Now()
	cancel()
	// The shutdown has begun once the listener refuses connections.
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		if time.Since(start) > 5*time.Second {
			t.Fatal("the listener still accepts 5s after the shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("the server returned (%v) with a call in flight, within the grace", err)
	default:
	}
	close(release)
	rest, err := io.ReadAll(events)
	if err != nil || !strings.Contains(string(rest), `"done"`) {
		t.Errorf("the rest of the call's stream: %q, %v; want its result, and a clean end", rest, err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server still runs 10s after its last call returned")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the shutdown took %s with a call of a moment in flight; want about the call", d)
	}
}

// On loopback every endpoint but /healthz refuses a Host that is not
// loopback (DNS rebinding): /mcp, and /metrics beside it.
func TestHostCheckedButOnHealthz(t *testing.T) {
	tel, err := newTelemetry(HTTPFlags{}, config.Default(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpSettings{loopback: true, tel: tel}
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcp") })
	ts := httptest.NewServer(httpHandler(mcp, hs, func(context.Context) error { return nil }, slog.New(slog.DiscardHandler)))
	defer ts.Close()
	for _, tc := range []struct {
		path, host string
		want       int
	}{
		{"/mcp", "", http.StatusOK},
		{"/mcp", "evil.example", http.StatusForbidden},
		{"/metrics", "", http.StatusOK},
		{"/metrics", "evil.example:80", http.StatusForbidden},
		{"/healthz", "evil.example", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+tc.path, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with Host %s: %d; want %d", tc.path, req.Host, resp.StatusCode, tc.want)
		}
	}
}

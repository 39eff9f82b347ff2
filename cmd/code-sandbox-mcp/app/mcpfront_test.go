package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/clientlimit"
)

// zeros is an endless body of zeros.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// onlyReader hides all but Read of r, so that net/http does not learn
// its length: a request with it as its body is sent chunked.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestReadBody(t *testing.T) {
	const limit = 3*bodyPiece + 5
	for _, tc := range []struct {
		name    string
		size    int64
		chunked bool
		tooBig  bool
	}{
		{"empty", 0, false, false},
		{"one byte", 1, false, false},
		{"at the limit", limit, false, false},
		{"one byte over", limit + 1, false, true},
		{"chunked, empty", 0, true, false},
		{"chunked, a piece less a byte", bodyPiece - 1, true, false},
		{"chunked, a piece", bodyPiece, true, false},
		{"chunked, a piece and a byte", bodyPiece + 1, true, false},
		{"chunked, at the limit", limit, true, false},
		{"chunked, one byte over", limit + 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("0123456789abcdef"), int(tc.size/16)+1)[:tc.size]
			var read atomic.Int64
			body := io.Reader(&countingReader{r: bytes.NewReader(want), n: &read})
			req := httptest.NewRequest(http.MethodPost, "/mcp", body)
			req.ContentLength = tc.size
			if tc.chunked {
				req.ContentLength = -1
			}
			got, err := readBody(httptest.NewRecorder(), req, limit)
			var tooLarge *http.MaxBytesError
			switch {
			case tc.tooBig && !errors.As(err, &tooLarge):
				t.Fatalf("readBody: %d bytes, %v; want an *http.MaxBytesError", len(got), err)
			case tc.tooBig && !tc.chunked && read.Load() != 0:
				t.Errorf("read %d bytes of a body whose Content-Length is over the limit; want none", read.Load())
			case tc.tooBig && read.Load() > limit+1:
				t.Errorf("read %d bytes of a chunked body over the limit of %d; want at most one byte more", read.Load(), limit)
			case tc.tooBig:
			case err != nil:
				t.Fatalf("readBody: %v", err)
			case !bytes.Equal(got, want):
				t.Errorf("readBody: %d bytes, not the %d sent", len(got), len(want))
			case cap(got) != len(got):
				t.Errorf("readBody: a slice of %d bytes with a capacity of %d; want it exact", len(got), cap(got))
			}
		})
	}
}

// A body shorter than its Content-Length is an error, not a body.
func TestReadBodyShort(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("abc"))
	req.ContentLength = 10
	if b, err := readBody(httptest.NewRecorder(), req, 100); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("readBody: %q, %v; want io.ErrUnexpectedEOF", b, err)
	}
}

// countingReader counts in n the bytes read of r.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// frontServer serves a real mcp-go streamable HTTP server behind
// mcpSessions and mcpFront with limit, as serveListener does, and counts
// the bytes its handlers read of request bodies, and the MCP sessions
// mcp-go holds.
type frontServer struct {
	ts       *httptest.Server
	read     atomic.Int64
	sessions atomic.Int64
}

func newFrontServer(t *testing.T, limit int64, limits *clientlimit.Limiter) *frontServer {
	t.Helper()
	fs := &frontServer{}
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(context.Context, server.ClientSession) { fs.sessions.Add(1) })
	hooks.AddOnUnregisterSession(func(context.Context, server.ClientSession) { fs.sessions.Add(-1) })
	sessions := newMCPSessions()
	mcp := server.NewStreamableHTTPServer(server.NewMCPServer("test", "1", server.WithHooks(hooks)), server.WithEndpointPath("/mcp"),
		server.WithSessionIdManagerResolver(sessions), server.WithSessionIdleTTL(mcpSessionIdle))
	front := &mcpFront{mcp: mcp, limit: limit, logger: slog.New(slog.DiscardHandler)}
	if limits != nil {
		front.initialize = limits.Initialize
	}
	sessions.forgotten = front.end
	h := sessions.check(front)
	fs.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = io.NopCloser(&countingReader{r: r.Body, n: &fs.read})
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(fs.ts.Close)
	return fs
}

// post sends body to /mcp, in session id if not "", and returns the
// response, its body read.
func (fs *frontServer) post(t *testing.T, id string, body io.Reader, length int64) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fs.ts.URL+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set(server.HeaderKeySessionID, id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := fs.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestFrontRefusesABodyOverTheLimit(t *testing.T) {
	const limit = 64 << 10
	fs := newFrontServer(t, limit, nil)
	want := bodyTooLarge(limit) + "\n"
	if !strings.Contains(want, "at most 65536 bytes (0.1 MiB)") || !strings.Contains(want, "base64") || !strings.Contains(want, "max_request_bytes") {
		t.Errorf("the 413 says %q; want the limit, base64 and max_request_bytes", want)
	}
	for _, tc := range []struct {
		name   string
		length int64 // -1: chunked
	}{
		{"Content-Length", 256 << 20},
		{"chunked", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.read.Store(0)
			resp, body := fs.post(t, "", io.LimitReader(onlyReader{zeros{}}, 256<<20), tc.length)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || body != want {
				t.Errorf("got %d %q; want 413 %q", resp.StatusCode, body, want)
			}
			if !resp.Close {
				t.Errorf("the connection is kept after a 413; want it closed")
			}
			if n := fs.read.Load(); n > limit+1 || tc.length > 0 && n > 0 {
				t.Errorf("the server read %d bytes of the body; want none for a Content-Length over the limit, at most the limit and a byte for a chunked body", n)
			}
		})
	}
	// Just under it, mcp-go has the body whole, whichever way it is sent.
	padded := initializeBody + strings.Repeat(" ", limit-len(initializeBody))
	for _, length := range []int64{int64(len(padded)), -1} {
		resp, body := fs.post(t, "", onlyReader{strings.NewReader(padded)}, length)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(server.HeaderKeySessionID) == "" {
			t.Errorf("an initialize of exactly the limit (Content-Length %d): %d %q; want 200 and a session", length, resp.StatusCode, body)
		}
	}
}

// An initialize takes from its client's rate before mcp-go makes a
// session of it: past the burst it gets 429 with Retry-After, and mcp-go
// holds no session for it. Other requests are not counted here.
func TestFrontRateLimitsInitialize(t *testing.T) {
	limits := clientlimit.New(clientlimit.Config{Principal: principalOf, Rate: 6, Burst: 2}) // a token every 10 s
	fs := newFrontServer(t, 1<<20, limits)
	var id string
	for i := range 2 {
		resp, body := fs.post(t, "", strings.NewReader(initializeBody), int64(len(initializeBody)))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize %d in the burst: %d %q", i+1, resp.StatusCode, body)
		}
		id = resp.Header.Get(server.HeaderKeySessionID)
	}
	resp, body := fs.post(t, "", strings.NewReader(initializeBody), int64(len(initializeBody)))
	want := "Rate limit: each client may make 6 requests a minute (rate_limit), 2 at once (rate_burst), tool calls and MCP initializes together, so this initialize was refused and made no session. Retry in "
	if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(body, want) {
		t.Errorf("the 3rd initialize: %d %q; want 429 %q…", resp.StatusCode, body, want)
	}
	if got := resp.Header.Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After %q; want 10", got)
	}
	if n := fs.sessions.Load(); n != 2 {
		t.Errorf("mcp-go holds %d sessions; want the 2 initializes let through", n)
	}
	if resp, body := fs.post(t, id, strings.NewReader(pingBody), int64(len(pingBody))); resp.StatusCode != http.StatusOK {
		t.Errorf("a ping in a session, the bucket empty: %d %q; want 200", resp.StatusCode, body)
	}
}

// Past mcpSessionsPerPrincipal, the oldest session a principal has is
// forgotten by mcp-go too, not only by mcpSessions.
func TestFrontEndsForgottenSessions(t *testing.T) {
	fs := newFrontServer(t, 1<<20, nil)
	var first string
	for i := range mcpSessionsPerPrincipal + 10 {
		resp, body := fs.post(t, "", strings.NewReader(initializeBody), int64(len(initializeBody)))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize %d: %d %q", i+1, resp.StatusCode, body)
		}
		if i == 0 {
			first = resp.Header.Get(server.HeaderKeySessionID)
		}
	}
	if n := fs.sessions.Load(); n != mcpSessionsPerPrincipal {
		t.Errorf("after %d initializes mcp-go holds %d sessions; want %d", mcpSessionsPerPrincipal+10, n, mcpSessionsPerPrincipal)
	}
	if resp, _ := fs.post(t, first, strings.NewReader(pingBody), int64(len(pingBody))); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a ping in the first, forgotten session: %d; want 404", resp.StatusCode)
	}
}

// makesSession counts exactly the POSTs for which mcp-go makes a session:
// each case is also handed to mcp-go, which must agree.
func TestMakesSession(t *testing.T) {
	const modern = "2026-07-28"
	for _, tc := range []struct {
		name    string
		version string // Mcp-Protocol-Version; "" for none
		body    string
		want    bool
	}{
		{"initialize", "", initializeBody, true},
		{"initialize with a version header", "2025-06-18", initializeBody, true},
		{"initialize in capitals", "", strings.Replace(initializeBody, `"method"`, `"METHOD"`, 1), true},
		{"initialize with params not an object", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":"x"}`, true},
		{"initialize with an odd id", "", `{"jsonrpc":"2.0","id":{"a":[1]},"method":"initialize","params":{}}`, true},
		{"initialize, a modern header", modern, initializeBody, false},
		{"initialize, modern in _meta", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modern + `"}}}`, false},
		{"ping", "", pingBody, false},
		{"not JSON", "", `{"method":"initialize"`, false},
		{"a batch", "", "[" + initializeBody + "]", false},
		{"method not a string", "", `{"jsonrpc":"2.0","id":1,"method":7}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			header.Set("Content-Type", "application/json")
			header.Set("Accept", "application/json, text/event-stream")
			if tc.version != "" {
				header.Set("Mcp-Protocol-Version", tc.version)
			}
			if got := makesSession(header, []byte(tc.body)); got != tc.want {
				t.Errorf("makesSession: %v; want %v", got, tc.want)
			}
			ids := &countingIDs{}
			mcp := server.NewStreamableHTTPServer(server.NewMCPServer("test", "1"), server.WithSessionIdManagerResolver(ids))
			w := &discardWriter{header: http.Header{}}
			mcp.Handle(w, &server.HTTPRequest{Method: http.MethodPost, Header: header, Body: []byte(tc.body), Context: t.Context()})
			if made := ids.made.Load() > 0; made != tc.want {
				t.Errorf("mcp-go made a session: %v (status %d); want %v", made, w.code, tc.want)
			}
		})
	}
}

// countingIDs is a server.SessionIdManagerResolver that counts the
// sessions mcp-go makes.
type countingIDs struct{ made atomic.Int64 }

func (c *countingIDs) ResolveSessionIdManager(*http.Request) server.SessionIdManager { return c }
func (c *countingIDs) Generate() string                                              { return fmt.Sprint("s", c.made.Add(1)) }
func (c *countingIDs) Validate(string) (bool, error)                                 { return false, nil }
func (c *countingIDs) Terminate(string) (bool, error)                                { return false, nil }

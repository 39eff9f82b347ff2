package integration

// Issue 23's hostile HTTP clients through the real binary (items 1, 5
// and 8): a body over max_request_bytes is refused before it is read, a
// client's initializes count in its rate and the MCP sessions it holds
// past the bound are ended in mcp-go too, and the Host check against DNS
// rebinding covers /metrics as well as /mcp.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
)

// repeatByte is an endless stream of one byte.
type repeatByte byte

func (b repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// hugeCall is a tools/call of n bytes whose code is n bytes less its
// envelope of x, made as it is read: the test holds none of it.
func hugeCall(n int64) io.Reader {
	prefix := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"`
	suffix := `"}}}`
	return io.MultiReader(strings.NewReader(prefix), io.LimitReader(repeatByte('x'), n-int64(len(prefix)+len(suffix))), strings.NewReader(suffix))
}

// postMCP POSTs body to /mcp with token, in MCP session id, its length
// told (Content-Length) if length is not -1, else sent chunked, and
// returns the status, headers and body of the answer.
func (s *httpServer) postMCP(t *testing.T, token, id string, body io.Reader, length int64) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), "POST", s.base+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// initializeBody is a raw initialize request.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}`

func TestHTTPBodyOverTheLimit(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	// files_in_bytes is 1 MiB, not the default 10 MiB, so that the
	// largest call the limits allow is quick to decode under the race
	// detector (10 MiB took a minute); max_request_bytes follows it.
	const limits = "[limits]\nfiles_in_bytes = \"1MiB\"\n"
	cfg, err := config.Parse(limits, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, config: limits + noPools})
	token := tokens["alice"]
	status, h, body := s.postMCP(t, token, "", strings.NewReader(initializeBody), int64(len(initializeBody)))
	id := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %q, session %q", status, body, id)
	}
	limit := cfg.RequestBytes()
	want := fmt.Sprintf("request body too large: this server reads at most %d bytes (%.1f MiB) of a request ([http] max_request_bytes), so it did not read this one. ", limit, float64(limit)/(1<<20))

	// 256 MiB with its length told: refused before a byte is read.
	before := s.rss(t)
	status, _, body = s.postMCP(t, token, id, hugeCall(256<<20), 256<<20)
	grew := s.rss(t) - before
	if status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(body, want) || !strings.Contains(body, "base64") {
		t.Errorf("a 256 MiB call: %d %q; want 413 %q…, saying to send binary files as base64", status, body, want)
	}
	t.Logf("RSS %s before a 256 MiB call, %s more after its answer", mib(before), mib(grew))
	if grew >= 16<<20 {
		t.Errorf("the server's RSS grew by %s for a 256 MiB call; want less than 16 MiB", mib(grew))
	}

	// The same sent chunked: read up to the limit, no further.
	before = s.rss(t)
	status, _, body = s.postMCP(t, token, id, hugeCall(256<<20), -1)
	if status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(body, want) {
		t.Errorf("a 256 MiB call sent chunked: %d %q; want 413 %q…", status, body, want)
	}
	t.Logf("RSS %s more after a chunked 256 MiB call's answer (limit %s)", mib(s.rss(t)-before), mib(limit))

	// The largest call the limits allow still runs: a binary file of
	// files_in_bytes, as base64.
	data := bytes.Repeat([]byte{0, 1, 2, 0xff}, int(cfg.Limits.FilesInBytes)/4)
	c := s.connect(t, token)
	res, err := c.CallTool(testContext(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{
		"code":  "import os\nprint(os.path.getsize('blob.bin'))",
		"files": []map[string]any{{"path": "blob.bin", "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}},
	}}})
	if err != nil {
		t.Fatalf("a call with a file of files_in_bytes (%s): %v", mib(int64(len(data))), err)
	}
	if r := decodeResult(t, res); r.isError || r.out.Stdout != strconv.Itoa(len(data))+"\n" {
		t.Errorf("a call with a file of files_in_bytes: %q %+v; want it run, printing %d", r.text, r.out, len(data))
	}
}

// 3,000 initializes from one token, none refused, leave mcp-go holding
// no more sessions than our table does (mcpSessionsPerPrincipal, 256),
// so the heap stays within 8 MiB of where it started.
func TestHTTPInitializesHoldBoundedHeap(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, env: []string{lowGOGC},
		config: "[http]\nrate_limit = 1000000\nrate_burst = 100000\n" + noPools})
	token := tokens["alice"]
	s.heapBytes(t, token) // the first scrape sets up what every other reuses
	before := s.heapBytes(t, token)
	const n = 3000
	for i := range n {
		if status, _, body := s.postMCP(t, token, "", strings.NewReader(initializeBody), int64(len(initializeBody))); status != http.StatusOK {
			t.Fatalf("initialize %d: %d %q", i+1, status, body)
		}
	}
	after := s.heapBytes(t, token)
	t.Logf("heap %s before %d initializes, %s after", mib(before), n, mib(after))
	if after-before > 8<<20 {
		t.Errorf("after %d initializes the heap grew by %s; want at most 8 MiB", n, mib(after-before))
	}
}

// An initialize past the client's burst is refused with 429, before
// mcp-go makes a session of it, and says which limit and when to retry.
func TestHTTPInitializeRateLimited(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, config: "[http]\nrate_limit = 60\nrate_burst = 3\n" + noPools})
	token := tokens["alice"]
	for i := range 3 {
		if status, _, body := s.postMCP(t, token, "", strings.NewReader(initializeBody), int64(len(initializeBody))); status != http.StatusOK {
			t.Fatalf("initialize %d in the burst: %d %q", i+1, status, body)
		}
	}
	status, h, body := s.postMCP(t, token, "", strings.NewReader(initializeBody), int64(len(initializeBody)))
	want := "Rate limit: each client may make 60 requests a minute (rate_limit), 3 at once (rate_burst), tool calls and MCP initializes together, so this initialize was refused and made no session. Retry in "
	if status != http.StatusTooManyRequests || !strings.HasPrefix(body, want) {
		t.Errorf("the 4th initialize: %d %q; want 429 %q…", status, body, want)
	}
	if sec, err := strconv.Atoi(h.Get("Retry-After")); err != nil || sec != 1 {
		t.Errorf("Retry-After %q; want 1 (a token a second)", h.Get("Retry-After"))
	}
}

// On loopback a request whose Host is not loopback is refused on every
// endpoint but /healthz: /mcp, /metrics beside it, and /metrics on a
// listener of its own.
func TestHTTPHostChecked(t *testing.T) {
	get := func(t *testing.T, url, host string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), "GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	postHost := func(t *testing.T, s *httpServer, host string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), "POST", s.base+"/mcp", strings.NewReader(initializeBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Run("beside /mcp", func(t *testing.T) {
		s := startHTTP(t, serverSpec{config: noPools})
		hostPort := s.base[len("http://"):]
		evil := "evil.example:" + hostPort[strings.LastIndex(hostPort, ":")+1:]
		if got := postHost(t, s, evil); got != http.StatusForbidden {
			t.Errorf("POST /mcp with Host %s: %d; want 403", evil, got)
		}
		if got := postHost(t, s, hostPort); got != http.StatusOK {
			t.Errorf("POST /mcp with Host %s: %d; want 200", hostPort, got)
		}
		if got := get(t, s.base+"/metrics", evil); got != http.StatusForbidden {
			t.Errorf("GET /metrics with Host %s: %d; want 403", evil, got)
		}
		if got := get(t, s.base+"/metrics", hostPort); got != http.StatusOK {
			t.Errorf("GET /metrics with Host %s: %d; want 200", hostPort, got)
		}
		if got := get(t, s.base+"/healthz", evil); got != http.StatusOK && got != http.StatusServiceUnavailable {
			t.Errorf("GET /healthz with Host %s: %d; want it answered", evil, got)
		}
	})
	t.Run("--metrics-addr", func(t *testing.T) {
		s := startHTTP(t, serverSpec{args: []string{"--metrics-addr", "127.0.0.1:0"}, config: noPools})
		addr := metricsListen(t, s.stderr)
		evil := "evil.example:" + addr[strings.LastIndex(addr, ":")+1:]
		if got := get(t, "http://"+addr+"/metrics", evil); got != http.StatusForbidden {
			t.Errorf("GET /metrics on its own listener with Host %s: %d; want 403", evil, got)
		}
		if got := get(t, "http://"+addr+"/metrics", addr); got != http.StatusOK {
			t.Errorf("GET /metrics on its own listener with Host %s: %d; want 200", addr, got)
		}
		if got := postHost(t, s, evil); got != http.StatusForbidden {
			t.Errorf("POST /mcp with Host %s: %d; want 403", evil, got)
		}
	})
}

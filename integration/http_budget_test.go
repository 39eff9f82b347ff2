package integration

// The budget of large request bodies over HTTP (issue 23): a body is
// held, with what the server decodes of it, until its call returns, so
// the large bodies held at once are bounded in total, all clients
// together, by twice max_request_bytes; one that finds no room within
// half of read_timeout (the other half is its body's) is refused with
// 503, while small requests pass.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestHTTPLargeBodiesShareABudget(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, concurrency: 4,
		config: "[http]\nmax_request_bytes = \"1MiB\"\nread_timeout = \"6s\"\n" + noPools})
	ctx := testContext(t)

	// Two calls whose bodies take 700 KiB each hold 1.4 MiB of the 2 MiB
	// budget for as long as they run.
	pad := []map[string]any{{"path": "pad.txt", "content": strings.Repeat("a", 700<<10)}}
	var wg sync.WaitGroup
	for _, who := range []string{"alice", "bob"} {
		c := s.connect(t, tokens[who])
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code",
				Arguments: map[string]any{"code": "import time\ntime.sleep(10)\nprint('held')", "files": pad}}})
			if err != nil {
				t.Errorf("%s's call holding 700 KiB: %v", who, err)
				return
			}
			if r := decodeResult(t, res); r.isError || r.out.Stdout != "held\n" {
				t.Errorf("%s's call holding 700 KiB: %q; want held", who, r.text)
			}
		}()
	}
	if running := []string{}; !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) == 2 }) {
		t.Fatalf("the two calls are not both running within 30s: %v", running)
	}

	// A small request passes at once.
	begin := time.Now()
	if code, _, body := s.post(t, map[string]string{"Authorization": "Bearer " + tokens["alice"]}); code != http.StatusOK {
		t.Fatalf("a small initialize while the budget is held: %d %q; want 200", code, body)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("a small initialize took %s while the budget was held; want it not to wait", d)
	}

	// A third large body finds no room within half of read_timeout: 503.
	bigBody := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"},"pad":%q}}`,
		strings.Repeat("b", 700<<10))
	big := func() (int, http.Header, string) {
		return s.postMCP(t, tokens["bob"], "", strings.NewReader(bigBody), int64(len(bigBody)))
	}
	begin = time.Now()
	code, header, body := big()
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(body, "busy with other large requests") || !strings.Contains(body, "max_request_bytes") {
		t.Fatalf("a third 700 KiB body while two are held: %d, Retry-After %q, %q; want 503 saying the server is busy with large requests, with Retry-After",
			code, header.Get("Retry-After"), body)
	}
	if d := time.Since(begin); d < 3*time.Second {
		t.Errorf("refused after %s; want it to wait half of read_timeout (3s) for room first", d)
	}

	// Once the calls return, there is room again.
	wg.Wait()
	if code, _, body := big(); code != http.StatusOK {
		t.Errorf("a 700 KiB body once the calls returned: %d %q; want 200", code, body)
	}
}

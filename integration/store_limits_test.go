package integration

// What the file store keeps for clients, through the real binary over
// HTTP (issue 23): names count in file_retention_bytes, measured on the
// server's heap; each client keeps its files within its own share, so
// that one cannot evict another's; and a full server's session refusal
// tells a client nothing of another's sessions.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// longNamesCode leaves 200 empty files whose paths are 4015 bytes each:
// 15 directories and a file, each name 250 bytes (a name may have 255,
// a path 4095), one directory inside the other.
const longNamesCode = `import os
d = os.path.join(*['d%03d' % i + 'x' * 246 for i in range(15)])
os.makedirs(d)
os.chdir(d)
for i in range(200):
    open('f%03d' % i + 'y' * 246, 'w').close()
`

// longNamePath is the path of the ith file longNamesCode leaves.
func longNamePath(i int) string {
	var parts []string
	for j := range 15 {
		parts = append(parts, fmt.Sprintf("d%03d", j)+strings.Repeat("x", 246))
	}
	return strings.Join(append(parts, fmt.Sprintf("f%03d", i)+strings.Repeat("y", 246)), "/")
}

// callTool calls tool on c with args and decodes the result.
func callTool(ctx context.Context, t *testing.T, c *client.Client, tool string, args map[string]any) toolResult {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return decodeResult(t, res)
}

// settledHeap is the least of a few scrapes of the server's heap: the
// heap without most of the garbage a call left.
func settledHeap(t *testing.T, s *httpServer) int64 {
	t.Helper()
	least := s.heapBytes(t, "")
	for range 10 {
		least = min(least, s.heapBytes(t, ""))
	}
	return least
}

// With file_retention_bytes at 1 MiB, 12 runs of 200 empty files with
// 4 KB paths would keep 9.2 MiB of names if names were not counted: the
// server's heap must grow by no more than the cap and a little slack,
// and the early runs' files must be gone (their URIs read as expired)
// while the last run's read. (200 files a run, max_files_out raised for
// it, rather than the default's 100: half the sandboxes for the same
// names.)
func TestStoreCountsNames(t *testing.T) {
	const (
		retention = 1 << 20
		runs      = 12
		// slack is what the heap may grow by beyond the files kept:
		// garbage the collector has not yet taken (GOGC=10: a tenth of
		// the live heap) and buffers kept for reuse, which come and go
		// by the MiB (a gzip writer of /metrics' own is about 1 MiB).
		// Measured with 24 runs of 100 files: 1.6 to 3.0 MiB with the
		// names counted, 11.1 MiB without.
		slack = 4 << 20
	)
	s := startHTTP(t, serverSpec{env: []string{lowGOGC}, sandbox: "file_retention_bytes = \"1MiB\"\n", config: "[limits]\nmax_files_out = 200\n" + noPools})
	c := s.connect(t, "")
	// The runs go over an MCP session of their own (callLongNames), the
	// reads over c: without tokens both are the same client's.
	raw := &rawHTTP{s: s}
	raw.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"long-names","version":"1"}}}`)
	raw.next(t)
	raw.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// The heap is measured from after the first run, so that the start
	// counts what such a run leaves besides its files (the first
	// allocations of its code paths, buffers kept for reuse).
	var start int64
	var uris []string
	for i := range runs {
		r := callLongNames(t, raw, i+1)
		if r.IsError || len(r.StructuredContent.Files) != 200 || r.StructuredContent.FilesDropped != 0 {
			t.Fatalf("run %d: %d files, %d dropped; want 200, 0 (max_files_out, files_out_bytes and the workspace let them through): %.500s",
				i+1, len(r.StructuredContent.Files), r.StructuredContent.FilesDropped, r.text())
		}
		if p := r.StructuredContent.Files[0].Path; p != longNamePath(0) || len(p) != 4015 {
			t.Fatalf("run %d: the first file is %.80q… (%d bytes); want %.80q… (4015)", i+1, p, len(p), longNamePath(0))
		}
		links := r.links()
		if len(links) != 200 {
			t.Fatalf("run %d: %d links; want the files kept, 200 (a run of 200 names of 4 KB fits in 1 MiB): %.300s", i+1, len(links), r.text())
		}
		uris = append(uris, links[0])
		if i == 0 {
			start = settledHeap(t, s)
		}
	}
	// Right after a call the heap holds its result's garbage until the
	// next collection, which the scrapes' own allocations bring on: what
	// the server keeps is the heap once it falls, and it must fall within
	// the bound.
	end := s.heapBytes(t, "")
	if !waitFor(20*time.Second, func() bool {
		end = min(end, s.heapBytes(t, ""))
		return end-start <= retention+slack
	}) {
		t.Errorf("the heap grew by %s over %d runs of empty files with long names (%s to %s, the least in 20 s of scrapes); want at most file_retention_bytes (%s) + %s",
			mib(end-start), runs, mib(start), mib(end), mib(retention), mib(slack))
	}
	t.Logf("heap: %s at the start, %s after %d runs of 200 names of 4015 bytes (%s of names)",
		mib(start), mib(end), runs, mib(int64(runs*200*4015)))
	ctx := testContext(t)
	// A run's names take 0.8 MiB: each run evicts the one before.
	for i, uri := range uris[:runs-1] {
		if text := readErr(ctx, t, c, "the client", uri); !strings.Contains(text, "has expired or never existed") {
			t.Errorf("run %d's file: %q; want expired", i+1, text)
		}
	}
	got, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uris[runs-1]}})
	if err != nil || len(got.Contents) != 1 {
		t.Errorf("the last run's file: %+v, %v; want it kept", got, err)
	}
}

// longNamesResult is what TestStoreCountsNames reads of a run's result.
type longNamesResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		URI  string `json:"uri"`
	} `json:"content"`
	StructuredContent struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
		FilesDropped int `json:"files_dropped"`
	} `json:"structuredContent"`
}

// text is the result's text, its first content.
func (r longNamesResult) text() string {
	if len(r.Content) == 0 || r.Content[0].Type != "text" {
		return ""
	}
	return r.Content[0].Text
}

// links are the URIs of the result's resource links, in order.
func (r longNamesResult) links() []string {
	var uris []string
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			uris = append(uris, c.URI)
		}
	}
	return uris
}

// callLongNames runs longNamesCode in raw's MCP session, as
// JSON-RPC request id, and decodes the result once, into what the test
// reads. Through mcp-go's client, which decodes a result some five times
// over (the message, the result, each content), the race detector's
// instrumented decoding of a run's 200 names of 4 KB took the test
// binary some 7 s of CPU a run: 100 s of a lane, on a host whose CPU
// bounds the suite.
func callLongNames(t *testing.T, raw *rawHTTP, id int) longNamesResult {
	t.Helper()
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "run_python_code", "arguments": code(longNamesCode)}})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := raw.post(t, string(msg))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run %d: %s %.300q", id, resp.Status, body)
	}
	// One JSON message, or a stream whose last data line is the answer
	// (notifications, if any, come before it).
	if ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); ct == "text/event-stream" {
		var last []byte
		for line := range bytes.Lines(body) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				last = bytes.TrimRight(data, "\r\n")
			}
		}
		if last == nil {
			t.Fatalf("run %d: an event stream without data: %.300q", id, body)
		}
		body = last
	}
	var m struct {
		ID     int              `json:"id"`
		Result *longNamesResult `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.ID != id || m.Result == nil {
		t.Fatalf("run %d: answer id %d, result %v, error %+v, %v; want the result of request %d: %.300q", id, m.ID, m.Result != nil, m.Error, err, id, body)
	}
	return *m.Result
}

// Each client keeps its files within an equal share of
// file_retention_bytes: bob filling the store evicts his own runs, never
// alice's; bob's run over his share (though under the cap) is not kept,
// and its result says so; the environments resource gives the share.
func TestStoreSharesPerClient(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, sandbox: "file_retention_bytes = \"1MiB\"\n", config: noPools})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])

	r := callTool(testContext(t), t, alice, "run_python_code", code("open('a.txt', 'w').write('for alice')"))
	if r.isError || len(r.links) != 1 {
		t.Fatalf("alice's run: %q, %d links; want a.txt kept", r.text, len(r.links))
	}
	aliceURI := r.links[0].URI
	// Bob writes 200 KiB a run, 1.2 MiB in all: more than the whole cap.
	var bobURIs []string
	for i := range 6 {
		r := callTool(testContext(t), t, bob, "run_python_code", code("open('b.bin', 'wb').write(b'b' * 200 * 1024)"))
		if r.isError || len(r.links) != 1 {
			t.Fatalf("bob's run %d: %q, %d links; want b.bin kept", i+1, r.text, len(r.links))
		}
		bobURIs = append(bobURIs, r.links[0].URI)
	}
	ctx := testContext(t)
	got, err := alice.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: aliceURI}})
	if err != nil {
		t.Fatalf("alice's file after bob filled the store: %v; want it kept", err)
	}
	if text, ok := got.Contents[0].(mcp.TextResourceContents); !ok || text.Text != "for alice" {
		t.Errorf("alice's file: %+v; want the text she wrote", got.Contents[0])
	}
	if text := readErr(ctx, t, bob, "bob", bobURIs[0]); !strings.Contains(text, "has expired or never existed") ||
		!strings.Contains(text, "per client") {
		t.Errorf("bob's first file: %q; want it evicted, the error naming the per-client bound", text)
	}
	if _, err := bob.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: bobURIs[5]}}); err != nil {
		t.Errorf("bob's last file: %v; want it kept", err)
	}

	// 600 KiB: under the cap, over bob's share.
	r = callTool(testContext(t), t, bob, "run_python_code", code("open('big.bin', 'wb').write(b'b' * 600 * 1024)"))
	want := "not kept for reading back: together, with their names, they take 601.3KiB, over your share of file_retention_bytes (512.0KiB of 1MiB, shared by 2 clients)"
	if r.isError || len(r.links) != 0 || r.out.Files[0].URI != "" || !strings.Contains(r.text, want) {
		t.Errorf("bob's run over his share: %q, %d links; want no link and %q", r.text, len(r.links), want)
	}
	if _, err := bob.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: bobURIs[5]}}); err != nil {
		t.Errorf("bob's last file after a run over his share: %v; want it kept (nothing evicted)", err)
	}

	res, err := alice.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "sandbox://environments"}})
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Files map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &env); err != nil {
		t.Fatal(err)
	}
	if env.Files["retention_bytes"] != float64(1<<20) || env.Files["retention_bytes_per_client"] != float64(512<<10) {
		t.Errorf("environments files %v; want retention_bytes 1MiB, retention_bytes_per_client 512KiB", env.Files)
	}
}

// timestamp is an RFC 3339 time, as a session's expiry is written.
var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`)

// On a server with max_sessions = 1 that alice's session fills, bob's
// create_session is refused with a text that names max_sessions and
// tells him nothing of alice's session: no expiry, no count.
func TestStoreSessionRefusalTellsOnlyYours(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, config: "[sessions]\nmax_sessions = 1\n" + noPools})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)
	var created createdSession
	if text, isErr := callRaw(ctx, t, alice, "create_session", map[string]any{"language": "python"}, &created); isErr {
		t.Fatalf("alice's create_session: %q", text)
	}
	text, isErr := callRaw(ctx, t, bob, "create_session", map[string]any{"language": "python"}, nil)
	if !isErr || !strings.Contains(text, "max_sessions") || !strings.Contains(text, "none is yours") {
		t.Fatalf("bob's create_session: %q, isError %v; want a refusal naming max_sessions and that none is his", text, isErr)
	}
	if m := timestamp.FindString(text); m != "" || strings.Contains(text, created.ExpiresAt) || strings.Contains(text, "sessions are open") {
		t.Errorf("bob's refusal %q tells of alice's session (a time %q, her expiry %s, or a count); want nothing of hers", text, m, created.ExpiresAt)
	}
	text, isErr = callRaw(ctx, t, alice, "create_session", map[string]any{"language": "python"}, nil)
	if !isErr || !strings.Contains(text, "1 of them are yours") || !timestamp.MatchString(text) {
		t.Errorf("alice's second create_session: %q; want her own count and first expiry", text)
	}
}

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// readResource reads uri through the server's resources/read.
func (s *mcpServer) readResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return s.c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
}

// pngSize checks that an image block holds a PNG and returns its width
// and height, read from its IHDR chunk.
func pngSize(t *testing.T, img mcp.ImageContent) (w, h uint32) {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		t.Fatalf("image data: %v", err)
	}
	if img.MIMEType != "image/png" || len(data) < 24 || !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || string(data[12:16]) != "IHDR" {
		t.Fatalf("image %s of %d bytes, starting %q; want a PNG", img.MIMEType, len(data), data[:min(len(data), 16)])
	}
	return binary.BigEndian.Uint32(data[16:20]), binary.BigEndian.Uint32(data[20:24])
}

// runURI matches an output file's URI; its run id is 128 random bits.
var runURI = regexp.MustCompile(`^sandbox://runs/([0-9a-f]{32})/files/(.+)$`)

// A CSV goes in, pandas reads it, a CSV comes out: as a link, in the
// structured result with its size, type and sum, and through
// resources/read; the text lists it after the output.
func TestMCPFilesCSVInAndOut(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	args := code(`
import pandas as pd
df = pd.read_csv('sales.csv')
df.groupby('region').sum().to_csv('totals.csv')
print(len(df))
`)
	args["files"] = []map[string]any{{"path": "sales.csv", "content": "region,amount\nnorth,3\nsouth,4\nnorth,5\n"}}
	r := s.call(ctx, t, "run_python_code", args)
	if r.isError || r.out.Stdout != "3\n" {
		t.Fatalf("got %q (isError %v)", r.text, r.isError)
	}
	want := "region,amount\nnorth,8\nsouth,4\n"
	if !strings.HasPrefix(r.text, "3\n") || !strings.Contains(r.text, "totals.csv") || strings.Count(r.text, "\n") != 1 {
		t.Errorf("text %q; want the output, then one line listing totals.csv", r.text)
	}
	if len(r.out.Files) != 1 || len(r.links) != 1 || len(r.images) != 0 || r.out.FilesDropped != 0 {
		t.Fatalf("files %+v, links %+v, %d images; want totals.csv alone (sales.csv unchanged)", r.out.Files, r.links, len(r.images))
	}
	f, l := r.out.Files[0], r.links[0]
	sum := sha256.Sum256([]byte(want))
	if f.Path != "totals.csv" || f.Size != int64(len(want)) || f.MIMEType != "text/csv" || f.SHA256 != hex.EncodeToString(sum[:]) || f.URI != l.URI || !runURI.MatchString(f.URI) {
		t.Errorf("file %+v, link %+v", f, l)
	}
	res, err := s.readResource(ctx, f.URI)
	if err != nil {
		t.Fatalf("read %s: %v", f.URI, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("contents %+v", res.Contents)
	}
	if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != want || tc.URI != f.URI {
		t.Errorf("read back %+v; want the CSV as text", res.Contents[0])
	}
}

// A figure the program never saves comes back as a PNG image, and so do
// two figures, in the order they were made, shown with plt.show().
func TestMCPFiguresWithoutSavefig(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	r := s.call(ctx, t, "run_python_code", code(`
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [2, 4, 1])
plt.title('one')
`))
	if r.isError || len(r.images) != 1 || len(r.out.Files) != 1 || r.out.Files[0].Path != "figures/figure-1.png" {
		t.Fatalf("got %q, %d images, files %+v; want figures/figure-1.png as an image", r.text, len(r.images), r.out.Files)
	}
	if w, h := pngSize(t, r.images[0]); w != 640 || h != 480 {
		t.Errorf("figure %dx%d; want matplotlib's default 640x480", w, h)
	}
	if r.out.Stderr != "" || !strings.HasPrefix(r.text, "(The program finished without output") && !strings.HasPrefix(r.text, "Files in /workspace") {
		t.Errorf("text %q, stderr %q", r.text, r.out.Stderr)
	}

	r = s.call(ctx, t, "run_python_code", code(`
import matplotlib.pyplot as plt
a = plt.figure(figsize=(2, 2), dpi=100)
plt.plot([1, 2])
b = plt.figure(figsize=(4, 3), dpi=100)
plt.plot([2, 1])
plt.figure(a.number)
plt.show()
print('shown')
`))
	if r.isError || r.out.Stdout != "shown\n" || r.out.Stderr != "" || len(r.images) != 2 {
		t.Fatalf("got %q, stderr %q, %d images; want two figures and no warning", r.text, r.out.Stderr, len(r.images))
	}
	for i, want := range [][2]uint32{{200, 200}, {400, 300}} {
		if w, h := pngSize(t, r.images[i]); w != want[0] || h != want[1] {
			t.Errorf("image %d is %dx%d; want %dx%d (creation order)", i+1, w, h, want[0], want[1])
		}
	}
	if got := []string{r.out.Files[0].Path, r.out.Files[1].Path}; got[0] != "figures/figure-1.png" || got[1] != "figures/figure-2.png" {
		t.Errorf("files %v", got)
	}
}

// Binary input goes in as base64 and arrives byte for byte; a binary
// output is read back as a blob.
func TestMCPFilesBinary(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	in := make([]byte, 256)
	for i := range in {
		in[i] = byte(i)
	}
	args := code(`
import hashlib
data = open('bytes.bin', 'rb').read()
print(len(data), hashlib.sha256(data).hexdigest())
open('reversed.bin', 'wb').write(data[::-1])
`)
	args["files"] = []map[string]any{{"path": "bytes.bin", "content": base64.StdEncoding.EncodeToString(in), "encoding": "base64"}}
	r := s.call(ctx, t, "run_python_code", args)
	sum := sha256.Sum256(in)
	if want := "256 " + hex.EncodeToString(sum[:]) + "\n"; r.out.Stdout != want {
		t.Fatalf("got %q; want %q", r.out.Stdout, want)
	}
	if len(r.out.Files) != 1 || r.out.Files[0].Path != "reversed.bin" {
		t.Fatalf("files %+v", r.out.Files)
	}
	res, err := s.readResource(ctx, r.out.Files[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	blob, ok := res.Contents[0].(mcp.BlobResourceContents)
	if !ok {
		t.Fatalf("read back %T; want a blob", res.Contents[0])
	}
	got, _ := base64.StdEncoding.DecodeString(blob.Blob)
	if len(got) != 256 || got[0] != 255 || got[255] != 0 {
		t.Errorf("read back %d bytes: %v", len(got), got)
	}
}

// Bad files are refused with a result that names the entry, before any
// sandbox runs.
func TestMCPFilesRefused(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	w := s.watchCall(t)
	for _, tc := range []struct {
		files any
		want  string
	}{
		{[]map[string]any{{"path": "../etc/passwd", "content": "x"}}, "../etc/passwd"},
		{[]map[string]any{{"path": "/abs.txt", "content": "x"}}, "/abs.txt"},
		{[]map[string]any{{"path": "", "content": "x"}}, "path"},
		{[]map[string]any{{"path": "a\x00b", "content": "x"}}, "NUL"},
		{[]map[string]any{{"path": "a.txt", "content": "x"}, {"path": "a.txt", "content": "y"}}, "a.txt"},
		{[]map[string]any{{"path": "b.bin", "content": "not base64!", "encoding": "base64"}}, "b.bin"},
		{[]map[string]any{{"path": "c.txt", "content": "x", "encoding": "latin-1"}}, "encoding"},
		{"not an array", "files"},
	} {
		args := code("print(1)")
		args["files"] = tc.files
		r := s.call(ctx, t, "run_python_code", args)
		if !r.isError || !strings.Contains(r.text, tc.want) || !strings.Contains(r.text, "Nothing was run") {
			t.Errorf("files %v: got %q (isError %v); want an error naming %q", tc.files, r.text, r.isError, tc.want)
		}
	}
	// A ready sandbox's stub may start meanwhile; no program ran, so no
	// task ended.
	if ids := w.exitedIDs(); len(ids) != 0 {
		t.Errorf("refused calls ran %v", ids)
	}
}

// JavaScript's files come back too.
func TestMCPFilesJavaScript(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	r := s.call(ctx, t, "run_js_code", code(`require('fs').writeFileSync('out.json', JSON.stringify({ok: true})); console.log('wrote')`))
	if r.isError || len(r.out.Files) != 1 || r.out.Files[0].Path != "out.json" || r.out.Files[0].MIMEType != "application/json" {
		t.Fatalf("got %q, files %+v", r.text, r.out.Files)
	}
	res, err := s.readResource(ctx, r.out.Files[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != `{"ok":true}` {
		t.Errorf("read back %+v", res.Contents[0])
	}
}

// Past max_images, images are links only; past max_files_out, files are
// dropped and counted; the text says both.
func TestMCPFilesOverTheCaps(t *testing.T) {
	s := startMCP(t, serverSpec{config: "[languages.python.limits]\nmax_files_out = 5\nmax_images = 2\n"})
	ctx := testContext(t)
	r := s.call(ctx, t, "run_python_code", code(`
import matplotlib.pyplot as plt
for i in range(6):
    plt.figure(figsize=(1, 1))
    plt.plot([0, i])
`))
	if r.isError || len(r.out.Files) != 5 || r.out.FilesDropped != 1 || len(r.images) != 2 || len(r.links) != 5 {
		t.Fatalf("got %q: %d files, %d dropped, %d images, %d links; want 5 files, 1 dropped, 2 images", r.text, len(r.out.Files), r.out.FilesDropped, len(r.images), len(r.links))
	}
	if !strings.Contains(r.text, "max_files_out") || !strings.Contains(r.text, "max_images") {
		t.Errorf("text %q; want it to name both caps", r.text)
	}
}

// Past file_retention a link gives an error that says so.
func TestMCPFilesExpire(t *testing.T) {
	s := startMCP(t, serverSpec{sandbox: `file_retention = "2s"`})
	ctx := testContext(t)
	r := s.call(ctx, t, "run_python_code", code(`open('x.txt', 'w').write('x')`))
	if len(r.out.Files) != 1 {
		t.Fatalf("files %+v", r.out.Files)
	}
	uri := r.out.Files[0].URI
	if _, err := s.readResource(ctx, uri); err != nil {
		t.Fatalf("read at once: %v", err)
	}
	// Not synchronisation: the retention passing is what is tested.
	time.Sleep(2500 * time.Millisecond)
	_, err := s.readResource(ctx, uri)
	// mcp-go's client speaks 2026-07-28, whose resource not found is
	// -32602 (SEP-2164); earlier revisions' is -32002.
	if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "file_retention") {
		t.Errorf("read after 2.5s: %v; want resource not found (-32602 in 2026-07-28), saying it expired", err)
	}
}

// A link from an earlier server process, as each Inspector CLI call
// starts one: well inside file_retention, the new process does not hold
// it, and says why with the resource-not-found code of the protocol
// revision the Inspector speaks, 2025-11-25: -32002 (issue 29, item 6).
func TestMCPFileLinkOfAnEarlierServer(t *testing.T) {
	ctx := testContext(t)
	var stops []func()
	first := startMCPVersion(t, serverSpec{}, func(f func()) { stops = append(stops, f) }, mcp.ProtocolVersion20251125)
	r := first.call(ctx, t, "run_python_code", code(`open('x.txt', 'w').write('x')`))
	if len(r.out.Files) != 1 {
		t.Fatalf("files %+v", r.out.Files)
	}
	uri := r.out.Files[0].URI
	// The first process ends before the next starts, as the Inspector's
	// do.
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	later := startMCPVersion(t, serverSpec{}, t.Cleanup, mcp.ProtocolVersion20251125)
	_, err := later.readResource(ctx, uri)
	if !errors.Is(err, mcp.ErrResourceNotFound) || !strings.Contains(err.Error(), "memory of the server process that made them") || !strings.Contains(err.Error(), "file_retention") {
		t.Errorf("the later server's read of the link: %v; want resource not found (-32002), saying kept files end with their server", err)
	}
}

// Case 40: one run's files are not reachable through another run's URIs,
// and run ids are 128 random bits, never reused. In each mode of the
// isolation suite: in a session, each run is the first cell of a session
// of its own.
func TestIsolationFilesOfOtherRunsUnreachable(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, serverSpec{})
		ctx := testContext(t)
		run := func(src string) toolResult {
			args := code(src)
			if m.session {
				id := createSession(t, s, "python")
				defer closeSession(t, s, id)
				args["session_id"] = id
			}
			return s.call(ctx, t, "run_python_code", args)
		}
		a := run(`open('secret.txt', 'w').write('run a')`)
		b := run(`open('other.txt', 'w').write('run b')`)
		if len(a.out.Files) != 1 || len(b.out.Files) != 1 {
			t.Fatalf("files %+v, %+v", a.out.Files, b.out.Files)
		}
		ma, mb := runURI.FindStringSubmatch(a.out.Files[0].URI), runURI.FindStringSubmatch(b.out.Files[0].URI)
		if ma == nil || mb == nil || ma[1] == mb[1] {
			t.Fatalf("URIs %s and %s; want two distinct 128-bit run ids", a.out.Files[0].URI, b.out.Files[0].URI)
		}
		for _, uri := range []string{
			"sandbox://runs/" + mb[1] + "/files/secret.txt",
			"sandbox://runs/" + mb[1] + "/files/../" + ma[1] + "/files/secret.txt",
			"sandbox://runs/" + strings.Repeat("0", 32) + "/files/secret.txt",
		} {
			if res, err := s.readResource(ctx, uri); err == nil {
				t.Errorf("read %s: got %+v; want an error", uri, res.Contents)
			}
		}
	})
}

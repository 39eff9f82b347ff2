package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/internal/clocktest"
)

func TestFileStoreExpiry(t *testing.T) {
	clock := clocktest.New()
	s := newFileStore(time.Minute, 1<<20, 1, clock.Now, nil)
	id, ok := s.put("local", []exec.File{{Path: "a.txt", Data: []byte("a")}})
	if !ok || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("put: %q, %v; want 32 hex digits", id, ok)
	}
	clock.Advance(59 * time.Second)
	if data, ok := s.get("local", id, "a.txt"); !ok || string(data) != "a" {
		t.Errorf("get at 59s: %q, %v; want a", data, ok)
	}
	if _, ok := s.get("local", id, "b.txt"); ok {
		t.Error("get of a path the run did not leave: found")
	}
	clock.Advance(time.Second)
	if _, ok := s.get("local", id, "a.txt"); ok {
		t.Error("get at 60s: found; want expired")
	}
	if s.held() != 0 || len(s.shelves) != 0 || len(s.byID) != 0 {
		t.Errorf("after expiry: %d bytes, %d shelves, %d ids; want none", s.held(), len(s.shelves), len(s.byID))
	}
}

func TestFileStoreOwner(t *testing.T) {
	s := newFileStore(time.Minute, 1<<20, 2, clocktest.New().Now, nil)
	id, _ := s.put("alice", []exec.File{{Path: "a.txt", Data: []byte("a")}})
	if _, ok := s.get("bob", id, "a.txt"); ok {
		t.Error("bob got alice's file")
	}
	if data, ok := s.get("alice", id, "a.txt"); !ok || string(data) != "a" {
		t.Errorf("alice's get of her file: %q, %v; want a", data, ok)
	}
}

func TestFileStoreByteCap(t *testing.T) {
	clock := clocktest.New()
	four := []exec.File{{Path: "x", Data: []byte("1234")}}
	cost := runCost(four)
	s := newFileStore(time.Hour, 2*cost+cost/2, 1, clock.Now, nil)
	first, _ := s.put("local", four)
	second, _ := s.put("local", four)
	if first == second {
		t.Fatalf("two runs got the same id %q", first)
	}
	third, _ := s.put("local", four) // three runs' cost: the oldest goes
	if _, ok := s.get("local", first, "x"); ok {
		t.Error("the oldest run is kept past the cap")
	}
	for _, id := range []string{second, third} {
		if _, ok := s.get("local", id, "x"); !ok {
			t.Errorf("run %s is gone; want kept", id)
		}
	}
	if got := s.held(); got != 2*cost {
		t.Errorf("%d bytes held; want %d", got, 2*cost)
	}
	// A run over the whole cap is not kept, and evicts nothing.
	big := []exec.File{{Path: "big", Data: make([]byte, s.maxBytes)}}
	if id, ok := s.put("local", big); ok || id != "" {
		t.Errorf("put over the cap: %q, %v; want not kept", id, ok)
	}
	if _, ok := s.get("local", second, "x"); !ok {
		t.Error("a run over the cap evicted another")
	}
	// Exactly the cap fits, alone.
	full := []exec.File{{Path: "full", Data: make([]byte, s.maxBytes-runCost([]exec.File{{Path: "full"}}))}}
	if _, ok := s.put("local", full); !ok || s.held() != s.maxBytes || len(s.byID) != 1 {
		t.Errorf("put of the cap: %v, %d bytes, %d runs; want kept alone", ok, s.held(), len(s.byID))
	}
}

// A run's names and bookkeeping count, not only its data: runs of
// empty files with long names are bounded by file_retention_bytes as
// runs of large files are, the oldest evicted.
func TestFileStoreCountsNames(t *testing.T) {
	const maxBytes = 1 << 20
	s := newFileStore(time.Hour, maxBytes, 1, clocktest.New().Now, nil)
	files := make([]exec.File, 100)
	for i := range files {
		files[i].Path = strings.Repeat("d/", 1990) + fmt.Sprintf("f%03d", i) // 3984 bytes
	}
	if got, want := runCost(files), int64(runOverhead+100*(3984+fileOverhead)); got != want {
		t.Fatalf("runCost of 100 empty files of 3984-byte names: %d; want %d", got, want)
	}
	var ids []string
	for range 24 {
		id, ok := s.put("local", files)
		if !ok {
			t.Fatalf("a run of %d bytes is not kept within %d", runCost(files), maxBytes)
		}
		ids = append(ids, id)
		if got := s.held(); got > maxBytes {
			t.Fatalf("%d bytes held after %d runs; want at most %d", got, len(ids), maxBytes)
		}
	}
	fit := maxBytes / runCost(files)
	for i, id := range ids {
		_, ok := s.get("local", id, files[0].Path)
		if want := i >= len(ids)-int(fit); ok != want {
			t.Errorf("run %d of %d kept %v; want %v (the newest %d fit)", i+1, len(ids), ok, want, fit)
		}
	}
}

// Each principal's runs are kept within an equal share of the cap: one
// principal filling its share evicts only its own runs, a run over the
// share is not kept even though it fits in the cap, and the shares add
// up to at most the cap.
func TestFileStoreSharesPerPrincipal(t *testing.T) {
	one := []exec.File{{Path: "x", Data: make([]byte, 100)}}
	cost := runCost(one)
	s := newFileStore(time.Hour, 3*cost+2, 3, clocktest.New().Now, nil)
	if s.share != cost || s.clients != 3 {
		t.Fatalf("share %d of %d clients; want %d of 3", s.share, s.clients, cost)
	}
	alice, ok := s.put("alice", one)
	if !ok {
		t.Fatal("alice's run is not kept")
	}
	var bobs []string
	for range 5 {
		id, ok := s.put("bob", one)
		if !ok {
			t.Fatal("bob's run is not kept")
		}
		bobs = append(bobs, id)
	}
	if _, ok := s.get("alice", alice, "x"); !ok {
		t.Error("bob's runs evicted alice's")
	}
	if _, ok := s.get("bob", bobs[3], "x"); ok {
		t.Error("bob's older run is kept past his share")
	}
	if _, ok := s.get("bob", bobs[4], "x"); !ok {
		t.Error("bob's newest run is gone")
	}
	// Over a share, under the cap: not kept, and nothing evicted.
	two := []exec.File{{Path: "x", Data: make([]byte, 200)}}
	if runCost(two) > s.maxBytes {
		t.Fatalf("the test's run costs %d, over the cap %d", runCost(two), s.maxBytes)
	}
	if _, ok := s.put("carol", two); ok {
		t.Error("carol's run over her share is kept")
	}
	if _, ok := s.put("carol", one); !ok {
		t.Error("carol's run within her share is not kept")
	}
	if got := s.held(); got > s.maxBytes || got != 3*cost {
		t.Errorf("%d bytes held by three full shares; want %d, at most the cap %d", got, 3*cost, s.maxBytes)
	}
	for _, sh := range s.shelves {
		if sh.bytes > s.share {
			t.Errorf("a shelf holds %d bytes; want at most the share %d", sh.bytes, s.share)
		}
	}
}

func TestFileURIRoundTrip(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct{ path, uri string }{
		{"data.csv", "sandbox://runs/" + id + "/files/data.csv"},
		{"figures/figure-1.png", "sandbox://runs/" + id + "/files/figures/figure-1.png"},
		{"my data/a b+c.txt", "sandbox://runs/" + id + "/files/my%20data/a%20b%2Bc.txt"},
		{"100%?#.txt", "sandbox://runs/" + id + "/files/100%25%3F%23.txt"},
		{"ünï/files/x", "sandbox://runs/" + id + "/files/%C3%BCn%C3%AF/files/x"},
		{"a~b_c-d.e", "sandbox://runs/" + id + "/files/a~b_c-d.e"},
	} {
		uri := fileURI(id, tc.path)
		if uri != tc.uri {
			t.Errorf("fileURI(%q) = %q; want %q", tc.path, uri, tc.uri)
		}
		for _, u := range []string{uri, templateURI(id, tc.path)} {
			gotID, gotPath, ok := parseFileURI(u)
			if !ok || gotID != id || gotPath != tc.path {
				t.Errorf("parseFileURI(%q) = %q, %q, %v; want %q, %q", u, gotID, gotPath, ok, id, tc.path)
			}
		}
		// RFC 6570 expands the template to templateURI, which mcp-go's
		// matcher takes.
		tmpl := mcp.NewResourceTemplate(filesURITemplate, "x").URITemplate
		if u := templateURI(id, tc.path); !tmpl.Regexp().MatchString(u) {
			t.Errorf("%s does not match %s", u, filesURITemplate)
		}
	}
	for _, bad := range []string{"sandbox://environments", "sandbox://runs/", "sandbox://runs/x", "sandbox://runs/x/files/", "sandbox://runs//files/a", "sandbox://runs/x/files/%zz", "file:///etc/passwd"} {
		if id, path, ok := parseFileURI(bad); ok {
			t.Errorf("parseFileURI(%q) = %q, %q; want not a file URI", bad, id, path)
		}
	}
}

func TestFileMIMEType(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n...."
	for _, tc := range []struct{ path, data, want string }{
		{"plot.png", png, "image/png"},
		{"plot.dat", png, "image/png"}, // the bytes, not the name
		{"photo.jpg", "\xff\xd8\xff\xe0", "image/jpeg"},
		{"anim.gif", "GIF89a..", "image/gif"},
		{"x.webp", "RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"},
		{"fake.png", "not a png", "application/octet-stream"},
		{"data.csv", "a,b", "text/csv"},
		{"DATA.CSV", "a,b", "text/csv"},
		{"r.json", "{}", "application/json"},
		{"notes.md", "#", "text/markdown"},
		{"main.py", "x", "text/x-python"},
		{"main.js", "x", "text/javascript"},
		{"chart.svg", "<svg/>", "image/svg+xml"},
		{"page.html", "<p>", "text/html"},
		{"out", "plain words\n", "text/plain"},
		{"blob", "\x00\x01", "application/octet-stream"},
		{"bad", "\xff\xfe", "application/octet-stream"},
	} {
		if got := fileMIMEType(tc.path, []byte(tc.data)); got != tc.want {
			t.Errorf("fileMIMEType(%q, %q) = %q; want %q", tc.path, tc.data, got, tc.want)
		}
	}
}

// pngOf is a PNG's signature followed by n-8 bytes: enough for imageType.
func pngOf(n int) []byte {
	return append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, n-8)...)
}

func TestResultWithFiles(t *testing.T) {
	lim := pythonLimits(t)
	lim.MaxImages, lim.ImageBytes = 2, 100
	r := &exec.Result{
		Stdout: []byte("done\n"),
		Files: []exec.File{
			{Path: "data.csv", Data: []byte("a,b\n1,2\n")},
			{Path: "figures/figure-1.png", Data: pngOf(50)},
			{Path: "figures/figure-2.png", Data: pngOf(2000)},
			{Path: "figures/figure-3.png", Data: pngOf(60)},
			{Path: "figures/figure-4.png", Data: pngOf(70)},
		},
		FilesDropped: 2,
	}
	kept := retention{id: "abc", keep: 15 * time.Minute, maxBytes: 1 << 20}
	res := toolResult(r, lim, kept, "")

	wantText := "done\nFiles in /workspace: data.csv (8B), figures/figure-1.png (50B), figures/figure-2.png (2.0KiB), figures/figure-3.png (60B), figures/figure-4.png (70B); " +
		"2 more not returned: past max_files_out (100) or files_out_bytes (32MiB), or named with bytes that are not printable UTF-8; " +
		"links only, not shown inline: figures/figure-2.png is over image_bytes (100B) and figures/figure-4.png is past max_images (2)"
	if got := res.Content[0].(mcp.TextContent).Text; got != wantText {
		t.Errorf("text\n%q\nwant\n%q", got, wantText)
	}
	// text, 2 images (1 and 3), 5 links.
	if len(res.Content) != 1+2+5 {
		t.Fatalf("%d content blocks; want 8", len(res.Content))
	}
	for i, want := range []string{"figures/figure-1.png", "figures/figure-3.png"} {
		img, ok := res.Content[1+i].(mcp.ImageContent)
		data := r.Files[map[int]int{0: 1, 1: 3}[i]].Data
		if !ok || img.MIMEType != "image/png" || img.Data != base64.StdEncoding.EncodeToString(data) {
			t.Errorf("block %d: %+v; want %s inline", 1+i, res.Content[1+i], want)
		}
	}
	for i, f := range r.Files {
		link, ok := res.Content[3+i].(mcp.ResourceLink)
		if !ok || link.URI != fileURI("abc", f.Path) || link.Name != f.Path || link.Size == nil || *link.Size != int64(len(f.Data)) || link.MIMEType != fileMIMEType(f.Path, f.Data) {
			t.Errorf("block %d: %+v; want a link to %s", 3+i, res.Content[3+i], f.Path)
		}
	}
	out := res.StructuredContent.(runOutput)
	if out.FilesDropped != 2 || len(out.Files) != 5 {
		t.Fatalf("structured files %+v, dropped %d", out.Files, out.FilesDropped)
	}
	sum := sha256.Sum256([]byte("a,b\n1,2\n"))
	want := fileOutput{Path: "data.csv", Size: 8, MIMEType: "text/csv", SHA256: hex.EncodeToString(sum[:]), URI: "sandbox://runs/abc/files/data.csv"}
	if out.Files[0] != want {
		t.Errorf("files[0] %+v; want %+v", out.Files[0], want)
	}
}

// The files line follows the status line, and stands alone when the
// program printed nothing.
func TestResultTextFilesLine(t *testing.T) {
	lim := pythonLimits(t)
	kept := retention{id: "abc", keep: time.Minute, maxBytes: 1 << 20}
	f := []exec.File{{Path: "out.txt", Data: []byte("x")}}
	over := retention{keep: time.Minute, maxBytes: 1 << 20, share: 1 << 20, clients: 1, cost: 1<<20 + 1<<19}
	for _, tc := range []struct {
		name string
		r    exec.Result
		kept retention
		want string
	}{
		{"no output", exec.Result{Files: f}, kept, "Files in /workspace: out.txt (1B)"},
		{"no newline", exec.Result{Stdout: []byte("hi"), Files: f}, kept, "hi\nFiles in /workspace: out.txt (1B)"},
		{"failed", exec.Result{Stderr: []byte("boom\n"), ExitCode: 1, Files: f}, kept,
			"--- stderr ---\nboom\n--- exit code 1; 0.00s ---\nFiles in /workspace: out.txt (1B)"},
		{"only dropped", exec.Result{Stdout: []byte("hi\n"), FilesDropped: 3}, kept,
			"hi\nFiles in /workspace: none returned; 3 not returned: past max_files_out (100) or files_out_bytes (32MiB), or named with bytes that are not printable UTF-8"},
		{"not kept", exec.Result{Files: f}, over,
			"Files in /workspace: out.txt (1B); not kept for reading back: together, with their names, they take 1.5MiB, over file_retention_bytes (1MiB)"},
		{"not kept, shared", exec.Result{Files: f}, retention{keep: time.Minute, maxBytes: 3 << 20, share: 1 << 20, clients: 3, cost: 1<<20 + 1<<19},
			"Files in /workspace: out.txt (1B); not kept for reading back: together, with their names, they take 1.5MiB, over your share of file_retention_bytes (1.0MiB of 3MiB, shared by 3 clients)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := toolResult(&tc.r, lim, tc.kept, "")
			if got := res.Content[0].(mcp.TextContent).Text; got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	// Not kept: no links, and no URIs.
	res := toolResult(&exec.Result{Files: f}, lim, retention{}, "")
	if len(res.Content) != 1 || res.StructuredContent.(runOutput).Files[0].URI != "" {
		t.Errorf("files not kept: content %+v, structured %+v; want no link", res.Content, res.StructuredContent)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 1229: "1.2KiB", 20582: "20.1KiB", 5 << 20: "5.0MiB", 3 << 30: "3.0GiB", 2048 << 30: "2048.0GiB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q; want %q", n, got, want)
		}
	}
}

// filesClient is a client of a server whose python runs return files,
// and whose file store reads clock.
func filesClient(t *testing.T, clock *clocktest.Clock, files []exec.File) *client.Client {
	t.Helper()
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return &exec.Result{Language: req.Language, Stdout: []byte("ok\n"), Files: files}, nil
	}
	o := testOptions
	o.FileRetention, o.FileRetentionBytes, o.now = 15*time.Minute, 256<<20, clock.Now
	s, err := New(t.Context(), o, config.Default().Enabled(), run)
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, s, nil)
}

// Through the real server: a result's links read back as text or blob,
// in either form of the URI, until they expire.
func TestReadFileResource(t *testing.T) {
	clock := clocktest.New()
	png := pngOf(64)
	files := []exec.File{
		{Path: "data.csv", Data: []byte("a,b\n")},
		{Path: "figures/figure-1.png", Data: png},
		{Path: "my dir/x+y.json", Data: []byte(`{"a":1}`)},
	}
	c := filesClient(t, clock, files)

	templates, err := c.ListResourceTemplates(t.Context(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate.Raw() != filesURITemplate {
		t.Errorf("templates %+v; want exactly %s", templates.ResourceTemplates, filesURITemplate)
	}

	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var links []mcp.ResourceLink
	for _, b := range res.Content {
		if l, ok := b.(mcp.ResourceLink); ok {
			links = append(links, l)
		}
	}
	if len(links) != 3 {
		t.Fatalf("%d links in %+v; want 3", len(links), res.Content)
	}
	read := func(uri string) (mcp.ResourceContents, error) {
		t.Helper()
		r, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		if err != nil {
			return nil, err
		}
		if len(r.Contents) != 1 {
			t.Fatalf("%s: %d contents; want 1", uri, len(r.Contents))
		}
		return r.Contents[0], nil
	}
	id, _, _ := parseFileURI(links[0].URI)
	if want := "sandbox://runs/" + id + "/files/figures/figure-1.png"; links[1].URI != want {
		t.Errorf("link %q; want %q", links[1].URI, want)
	}
	for i, l := range links {
		for _, uri := range []string{l.URI, templateURI(id, files[i].Path)} {
			got, err := read(uri)
			if err != nil {
				t.Errorf("read %s: %v", uri, err)
				continue
			}
			switch files[i].Path {
			case "figures/figure-1.png":
				b, ok := got.(mcp.BlobResourceContents)
				if !ok || b.URI != l.URI || b.MIMEType != "image/png" || b.Blob != base64.StdEncoding.EncodeToString(png) {
					t.Errorf("read %s: %+v; want the PNG as a blob", uri, got)
				}
			default:
				text, ok := got.(mcp.TextResourceContents)
				if !ok || text.URI != l.URI || text.Text != string(files[i].Data) || text.MIMEType != l.MIMEType {
					t.Errorf("read %s: %+v; want %q as text", uri, got, files[i].Data)
				}
			}
		}
	}

	// A file not held is MCP's resource not found (-32002), not an
	// internal error (issue 29, item 6).
	if _, err := read("sandbox://runs/" + id + "/files/nope.txt"); !errors.Is(err, mcp.ErrResourceNotFound) || !strings.Contains(err.Error(), "has expired or never existed") {
		t.Errorf("read of a file the run did not leave: %v; want resource not found (-32002), expired or never existed", err)
	}
	clock.Advance(15 * time.Minute)
	_, err = read(links[1].URI)
	want := links[1].URI + " has expired or never existed here: kept files live in the memory of the server process that made them and end with it, so a link from an earlier server process (each Inspector CLI call starts a new one) cannot be read; within one server they are kept for 15m0s after their run (file_retention), within 256MiB in all (file_retention_bytes)"
	if !errors.Is(err, mcp.ErrResourceNotFound) || !strings.Contains(err.Error(), want) {
		t.Errorf("read after 15m: %v; want resource not found (-32002) and %q", err, want)
	}
}

// A link from an earlier server process, well inside file_retention: the
// files lived in that process's memory. The read is MCP's resource not
// found (-32002), and says so (issue 29, item 6).
func TestReadFileOfAnEarlierServer(t *testing.T) {
	clock := clocktest.New()
	first := filesClient(t, clock, []exec.File{{Path: "x.txt", Data: []byte("x")}})
	res, err := first.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var uri string
	for _, b := range res.Content {
		if l, ok := b.(mcp.ResourceLink); ok {
			uri = l.URI
		}
	}
	if uri == "" {
		t.Fatalf("no link in %+v", res.Content)
	}
	later := filesClient(t, clock, nil)
	_, err = later.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if !errors.Is(err, mcp.ErrResourceNotFound) || errors.Is(err, mcp.ErrInternalError) {
		t.Fatalf("read of an earlier server's link: %v; want resource not found (-32002)", err)
	}
	for _, w := range []string{uri, "memory of the server process that made them", "link from an earlier server process", "kept for 15m0s after their run (file_retention)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("read of an earlier server's link: %v; want it to say %q", err, w)
		}
	}
}

// Another principal's URI gets the error of the same URI once expired,
// word for word, and that of a run id that never existed but for the id:
// it does not tell that the run exists.
func TestReadFileOtherPrincipal(t *testing.T) {
	clock := clocktest.New()
	var who atomic.Value
	who.Store("alice")
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return &exec.Result{Language: req.Language, Files: []exec.File{{Path: "x.txt", Data: []byte("x")}}}, nil
	}
	o := testOptions
	o.now, o.Principal = clock.Now, func(context.Context) string { return who.Load().(string) }
	s, err := New(t.Context(), o, config.Default().Enabled(), run)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, s, nil)
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	uri := res.StructuredContent.(map[string]any)["files"].([]any)[0].(map[string]any)["uri"].(string)
	id, _, _ := parseFileURI(uri)
	read := func(uri string) string {
		t.Helper()
		_, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		if err == nil {
			t.Fatalf("%s read %s; want an error", who.Load(), uri)
		}
		return err.Error()
	}

	who.Store("bob")
	theirs := read(uri)
	unknownID := strings.Repeat("0", len(id))
	unknown := read(fileURI(unknownID, "x.txt"))
	if got, want := strings.ReplaceAll(unknown, unknownID, id), theirs; got != want {
		t.Errorf("bob's error for alice's file:\n%q\nfor an unknown run, id replaced:\n%q; want the same", want, got)
	}
	who.Store("alice")
	if r, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}}); err != nil || len(r.Contents) != 1 {
		t.Fatalf("alice's read of her file: %+v, %v", r, err)
	}
	clock.Advance(15 * time.Minute)
	if expired := read(uri); expired != theirs {
		t.Errorf("bob's error for alice's file:\n%q\nalice's once it expired:\n%q; want the same", theirs, expired)
	}
}

// The environments resource gives the file limits and retention.
func TestEnvironmentsFiles(t *testing.T) {
	env := readEnvironments(t, filesClient(t, clocktest.New(), nil))
	py := env.Languages["python"]
	l := py.Limits
	if !py.Figures || env.Languages["javascript"].Figures {
		t.Errorf("figures: python %v, javascript %v; want true, false", py.Figures, env.Languages["javascript"].Figures)
	}
	if js := env.Languages["javascript"]; !py.Warm || !slices.Equal(py.Preload, []string{"numpy", "pandas"}) || !js.Warm || len(js.Preload) != 0 {
		t.Errorf("warm: python %v %q, javascript %v %q; want true [numpy pandas], true []", py.Warm, py.Preload, js.Warm, js.Preload)
	}
	if l.Workspace != "/workspace" || l.WorkspaceBytes != 64<<20 || l.FilesInBytes != 10<<20 || l.MaxFilesIn != 100 ||
		l.FilesOutBytes != 32<<20 || l.MaxFilesOut != 100 || l.MaxImages != 4 || l.ImageBytes != 1<<20 {
		t.Errorf("python limits %+v", l)
	}
	if env.Files != (filesOutput{URITemplate: filesURITemplate, RetentionSeconds: 900, RetentionBytes: 256 << 20, RetentionBytesPerClient: 256 << 20}) {
		t.Errorf("files %+v", env.Files)
	}
}

// The SVG and HTML display() saves come back embedded, as text resources
// of their MIME type, among the images and before the links; a file over
// displayBytes, one that is not UTF-8, and files elsewhere are only
// listed and linked.
func TestResultEmbedsDisplayFiles(t *testing.T) {
	lim := pythonLimits(t)
	big := strings.Repeat("x", displayBytes+1)
	r := &exec.Result{
		Files: []exec.File{
			{Path: "display/display-1.html", Data: []byte("<b>hi</b>")},
			{Path: "display/display-2.svg", Data: []byte("<svg/>")},
			{Path: "display/display-3.html", Data: []byte(big)},
			{Path: "display/display-4.html", Data: []byte("\xff\xfe")},
			{Path: "display/sub/x.html", Data: []byte("<i>no</i>")},
			{Path: "page.html", Data: []byte("<i>no</i>")},
			{Path: "figures/figure-1.png", Data: pngOf(50)},
		},
	}
	for _, kept := range []retention{{id: "abc", keep: time.Minute, maxBytes: 1 << 30}, {maxBytes: 1}} {
		res := toolResult(r, lim, kept, "")
		var got []mcp.TextResourceContents
		images, links := 0, 0
		for i, c := range res.Content[1:] {
			switch c := c.(type) {
			case mcp.EmbeddedResource:
				if links > 0 {
					t.Errorf("block %d: a resource after a link", i+1)
				}
				tr, ok := c.Resource.(mcp.TextResourceContents)
				if !ok {
					t.Fatalf("block %d: resource %T; want text", i+1, c.Resource)
				}
				got = append(got, tr)
			case mcp.ImageContent:
				images++
			case mcp.ResourceLink:
				links++
			}
		}
		uri := func(p string) string {
			if kept.id == "" {
				return "file:///workspace/" + p
			}
			return fileURI(kept.id, p)
		}
		want := []mcp.TextResourceContents{
			{URI: uri("display/display-1.html"), MIMEType: "text/html", Text: "<b>hi</b>"},
			{URI: uri("display/display-2.svg"), MIMEType: "image/svg+xml", Text: "<svg/>"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("kept %q: embedded %+v; want %+v", kept.id, got, want)
		}
		wantLinks := len(r.Files)
		if kept.id == "" {
			wantLinks = 0
		}
		if images != 1 || links != wantLinks {
			t.Errorf("kept %q: %d images, %d links; want 1 and %d", kept.id, images, links, wantLinks)
		}
		text := res.Content[0].(mcp.TextContent).Text
		if !strings.Contains(text, "display/display-3.html is over 256KiB") || !strings.Contains(text, "display/display-4.html is not UTF-8") {
			t.Errorf("kept %q: text %q; want it to say why display-3 and display-4 are not embedded", kept.id, text)
		}
	}
}

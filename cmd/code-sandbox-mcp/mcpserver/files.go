package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// FilesURITemplate is the URI template of a run's output files, which
// resources/templates/list gives. A file's URI is the template with the
// run's id and the file's path, each segment of the path percent-encoded
// and its slashes kept, such as sandbox://runs/3f…/files/figures/figure-1.png.
// resources/read also takes the path as RFC 6570 expands {path}, its
// slashes encoded as %2F.
const FilesURITemplate = "sandbox://runs/{run_id}/files/{path}"

// runsURIPrefix begins every URI of FilesURITemplate.
const runsURIPrefix = "sandbox://runs/"

// fileStore keeps runs' output files for a while, so that a client can
// read them through their URIs after the call: each run's for keep, and
// all runs' together within maxBytes, the oldest run evicted first. A run
// whose files alone hold more than maxBytes is not kept. Expired runs are
// dropped when the store is next used. A run's files belong to the
// principal of its call: to any other, they are as unknown as a run id
// that never existed. It is safe for concurrent use.
type fileStore struct {
	keep     time.Duration
	maxBytes int64
	now      func() time.Time
	// owner names the principal of a call, who owns the files of its run.
	owner func(ctx context.Context) string

	mu    sync.Mutex
	runs  []*keptRun // oldest first
	byID  map[string]*keptRun
	bytes int64
}

// keptRun is one run's files in a fileStore.
type keptRun struct {
	id      string
	owner   string
	expires time.Time
	files   map[string][]byte
	bytes   int64
}

// newFileStore returns an empty store that keeps runs' files for keep,
// within maxBytes in all, reads the time from now and a call's principal
// from owner (nil: "local" for every call).
func newFileStore(keep time.Duration, maxBytes int64, now func() time.Time, owner func(context.Context) string) *fileStore {
	if owner == nil {
		owner = func(context.Context) string { return localPrincipal }
	}
	return &fileStore{keep: keep, maxBytes: maxBytes, now: now, owner: owner, byID: map[string]*keptRun{}}
}

// put keeps a run's files, owned by the principal owner, under a new run
// id, evicting the oldest runs for room. ok is false, and nothing kept,
// if the files alone hold more than the store's cap.
func (s *fileStore) put(owner string, files []exec.File) (id string, ok bool) {
	r := &keptRun{id: newRunID(), owner: owner, files: make(map[string][]byte, len(files))}
	for _, f := range files {
		r.files[f.Path] = f.Data
		r.bytes += int64(len(f.Data))
	}
	if r.bytes > s.maxBytes {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	for s.bytes+r.bytes > s.maxBytes {
		s.drop()
	}
	r.expires = now.Add(s.keep)
	s.runs = append(s.runs, r)
	s.byID[r.id] = r
	s.bytes += r.bytes
	return r.id, true
}

// get returns the file at path of the run id, if it is still kept and
// owner owns it.
func (s *fileStore) get(owner, id, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	r, ok := s.byID[id]
	if !ok || r.owner != owner {
		return nil, false
	}
	data, ok := r.files[path]
	return data, ok
}

// expire drops the runs whose time is up. Runs are kept for the same
// time, so they expire oldest first.
func (s *fileStore) expire(now time.Time) {
	for len(s.runs) > 0 && !now.Before(s.runs[0].expires) {
		s.drop()
	}
}

// drop forgets the oldest run.
func (s *fileStore) drop() {
	r := s.runs[0]
	s.runs = slices.Delete(s.runs, 0, 1)
	delete(s.byID, r.id)
	s.bytes -= r.bytes
}

// newRunID returns 16 random bytes in hex: a run's files are read by
// whoever has the id and is its principal, which every client of a
// server without tokens is ("local"), so it must not be guessable.
func newRunID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// fileURI is the URI of the file at path of the run id: FilesURITemplate
// with each of the path's segments percent-encoded and its slashes kept.
func fileURI(id, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = escapeUnreserved(s)
	}
	return runsURIPrefix + escapeUnreserved(id) + "/files/" + strings.Join(segs, "/")
}

// templateURI is the URI of the file at path of the run id as RFC 6570
// expands FilesURITemplate: its slashes encoded too.
func templateURI(id, path string) string {
	return runsURIPrefix + escapeUnreserved(id) + "/files/" + escapeUnreserved(path)
}

// parseFileURI reads the run id and the path of a file's URI, in the
// form of fileURI or of templateURI.
func parseFileURI(uri string) (id, path string, ok bool) {
	rest, ok := strings.CutPrefix(uri, runsURIPrefix)
	if !ok {
		return "", "", false
	}
	id, rest, ok = strings.Cut(rest, "/files/")
	if !ok || rest == "" {
		return "", "", false
	}
	id, err := url.PathUnescape(id)
	if err != nil || id == "" || strings.Contains(id, "/") {
		return "", "", false
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		if segs[i], err = url.PathUnescape(s); err != nil {
			return "", "", false
		}
	}
	return id, strings.Join(segs, "/"), true
}

// escapeUnreserved percent-encodes every byte of s but RFC 3986's
// unreserved characters, A-Z a-z 0-9 - . _ ~, which is what RFC 6570's
// simple expansion does.
func escapeUnreserved(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// matchFileTemplate is a resources/read hook that rewrites a file's URI
// in the form of fileURI into that of templateURI. mcp-go routes a read
// to a template by its RFC 6570 match, in which {path} never holds a "/",
// so that a file in a directory would otherwise find no handler.
func matchFileTemplate(_ context.Context, _ any, req *mcp.ReadResourceRequest) {
	if id, path, ok := parseFileURI(req.Params.URI); ok {
		req.Params.URI = templateURI(id, path)
	}
}

// readFile is the resources/read handler of FilesURITemplate: the file as
// text if it is UTF-8 of a textual type, else as a base64 blob, under the
// URI the run's result gave it. Another principal's file gets the error
// of an expired or unknown one, word for word, so that a URI does not
// tell whether it exists.
func (s *fileStore) readFile(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	id, path, ok := parseFileURI(req.Params.URI)
	if !ok {
		return nil, fmt.Errorf("%s is not a file's URI: want %s", req.Params.URI, FilesURITemplate)
	}
	uri := fileURI(id, path)
	data, ok := s.get(s.owner(ctx), id, path)
	if !ok {
		return nil, fmt.Errorf("%s has expired or never existed: output files are kept for %s after their run (file_retention), within %s in all (file_retention_bytes); run the program again to make it anew",
			uri, s.keep, config.Size(s.maxBytes))
	}
	mimeType := fileMIMEType(path, data)
	if isTextType(mimeType) && utf8.Valid(data) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mimeType, Text: string(data)}}, nil
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mimeType, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}

package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// filesURITemplate is the URI template of a run's output files, which
// resources/templates/list gives. A file's URI is the template with the
// run's id and the file's path, each segment of the path percent-encoded
// and its slashes kept, such as sandbox://runs/3f…/files/figures/figure-1.png.
// resources/read also takes the path as RFC 6570 expands {path}, its
// slashes encoded as %2F.
const filesURITemplate = "sandbox://runs/{run_id}/files/{path}"

// runsURIPrefix begins every URI of filesURITemplate.
const runsURIPrefix = "sandbox://runs/"

// What a kept file and a kept run cost the store beyond their bytes. The
// store counts them in file_retention_bytes with the files' paths and
// data, so that runs of many empty files with long names are bounded as
// runs of large files are.
const (
	// fileOverhead is what a file costs beyond its path and data: its
	// entry in its run's map (the path's string header, 16 bytes, and the
	// data's slice header, 24), the map's control byte and the spare
	// slots a map keeps as it grows (up to as many again), and the rounding
	// of the path's allocation to Go's size classes, rounded up to 256.
	fileOverhead = 256
	// runOverhead is what a run costs beyond its files: its keptRun (72
	// bytes), its id (32), its map's header and first group of slots
	// (about 380), and its entries in byID and its principal's list, with
	// their spare room (about 100), rounded up to 1 KiB.
	runOverhead = 1 << 10
)

// runCost is what a run's files cost the store: runOverhead, and for each
// file the length of its path and of its data and fileOverhead.
func runCost(files []exec.File) int64 {
	n := int64(runOverhead)
	for _, f := range files {
		n += int64(len(f.Path)) + int64(len(f.Data)) + fileOverhead
	}
	return n
}

// fileStore keeps runs' output files for a while, so that a client can
// read them through their URIs after the call: each run's for keep, and
// each principal's runs within an equal share of maxBytes, the
// principal's oldest run evicted first, so that one principal's runs never
// evict another's. What a run costs is runCost: names and bookkeeping
// count, not only the data. A run that costs more than a share is not
// kept. Expired runs are dropped when the store is next used. A run's
// files belong to the principal of its call: to any other, they are as
// unknown as a run id that never existed. It is safe for concurrent use.
type fileStore struct {
	keep time.Duration
	// maxBytes is file_retention_bytes, which clients principals share:
	// each one's runs cost at most share, maxBytes/clients, so that all
	// of them together hold at most maxBytes.
	maxBytes int64
	clients  int
	share    int64
	now      func() time.Time
	// owner names the principal of a call, who owns the files of its run.
	owner func(ctx context.Context) string

	mu      sync.Mutex
	shelves map[string]*shelf // by principal; none empty
	byID    map[string]*keptRun
}

// shelf is one principal's kept runs, oldest first, and what they cost.
type shelf struct {
	runs  []*keptRun
	bytes int64
}

// keptRun is one run's files in a fileStore, and what they cost.
type keptRun struct {
	id      string
	owner   string
	expires time.Time
	files   map[string][]byte
	bytes   int64
}

// newFileStore returns an empty store that keeps runs' files for keep,
// within maxBytes in all, shared equally by clients principals (0 is one),
// reads the time from now and a call's principal from owner (nil: "local"
// for every call). owner must name at most clients principals: each name
// it gives is kept within a share.
func newFileStore(keep time.Duration, maxBytes int64, clients int, now func() time.Time, owner func(context.Context) string) *fileStore {
	if owner == nil {
		owner = func(context.Context) string { return localPrincipal }
	}
	clients = max(clients, 1)
	return &fileStore{keep: keep, maxBytes: maxBytes, clients: clients, share: maxBytes / int64(clients),
		now: now, owner: owner, shelves: map[string]*shelf{}, byID: map[string]*keptRun{}}
}

// keepFiles keeps a run's files for owner, if it left any and they fit in
// a share, and says how: what reportFiles needs.
func (s *fileStore) keepFiles(owner string, files []exec.File) retention {
	kept := retention{keep: s.keep, maxBytes: s.maxBytes, share: s.share, clients: s.clients, cost: runCost(files)}
	if len(files) > 0 {
		kept.id, _ = s.put(owner, files)
	}
	return kept
}

// put keeps a run's files, owned by the principal owner, under a new run
// id, evicting owner's oldest runs for room, and no one else's. ok is
// false, and nothing kept or evicted, if the run costs more than a share.
func (s *fileStore) put(owner string, files []exec.File) (id string, ok bool) {
	cost := runCost(files)
	if cost > s.share {
		return "", false
	}
	r := &keptRun{id: newRunID(), owner: owner, files: make(map[string][]byte, len(files)), bytes: cost}
	for _, f := range files {
		// A copy of the path, so that the store holds its bytes and no
		// more, whatever string it was cut from.
		r.files[strings.Clone(f.Path)] = f.Data
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	sh := s.shelves[owner]
	if sh == nil {
		sh = &shelf{}
	}
	for sh.bytes+cost > s.share {
		s.drop(sh)
	}
	s.shelves[owner] = sh // again: drop forgets a shelf it empties
	r.expires = now.Add(s.keep)
	sh.runs = append(sh.runs, r)
	sh.bytes += cost
	s.byID[r.id] = r
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

// held is what all runs kept cost together.
func (s *fileStore) held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, sh := range s.shelves {
		n += sh.bytes
	}
	return n
}

// expire drops the runs whose time is up. Runs are kept for the same
// time, so each principal's expire oldest first.
func (s *fileStore) expire(now time.Time) {
	for _, sh := range s.shelves {
		for len(sh.runs) > 0 && !now.Before(sh.runs[0].expires) {
			s.drop(sh)
		}
	}
}

// drop forgets the oldest run of the shelf sh, and the shelf once it is
// empty.
func (s *fileStore) drop(sh *shelf) {
	r := sh.runs[0]
	sh.runs[0] = nil
	sh.runs = sh.runs[1:]
	delete(s.byID, r.id)
	sh.bytes -= r.bytes
	if len(sh.runs) == 0 {
		delete(s.shelves, r.owner)
	}
}

// bound says what bounds the kept files, for texts a client reads:
// "within 256MiB in all (file_retention_bytes)" with one principal, or
// "within 85.3MiB per client (file_retention_bytes, 256MiB, shared
// equally by 3 clients)".
func (s *fileStore) bound() string {
	if s.clients <= 1 {
		return fmt.Sprintf("within %s in all (file_retention_bytes)", config.Size(s.maxBytes))
	}
	return fmt.Sprintf("within %s per client (file_retention_bytes, %s, shared equally by %d clients)",
		humanSize(s.share), config.Size(s.maxBytes), s.clients)
}

// newRunID returns 16 random bytes in hex: a run's files are read by
// whoever has the id and is its principal, which every client of a
// server without tokens is ("local"), so it must not be guessable.
func newRunID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: see crypto/rand.Read
	return hex.EncodeToString(b[:])
}

// fileURI is the URI of the file at path of the run id: filesURITemplate
// with each of the path's segments percent-encoded and its slashes kept.
func fileURI(id, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = escapeUnreserved(s)
	}
	return runsURIPrefix + escapeUnreserved(id) + "/files/" + strings.Join(segs, "/")
}

// templateURI is the URI of the file at path of the run id as RFC 6570
// expands filesURITemplate: its slashes encoded too.
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

// routeRead is the resources/read hook that routes a read of a file's
// URI. A file the caller may read has its URI rewritten from the form of
// fileURI into that of templateURI: mcp-go routes a read to a template by
// its RFC 6570 match, in which {path} never holds a "/", so that a file
// in a directory would otherwise find no handler. A file this server
// does not hold for the caller has its URI rewritten into notHeld's
// text, which no template matches, so that mcp-go answers with the code
// MCP gives a resource not found (-32002; -32602 from protocol version
// 2026-07-28 on), its message quoting that text. A handler's error
// could only be an internal error (-32603).
func (s *fileStore) routeRead(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
	id, path, ok := parseFileURI(req.Params.URI)
	if !ok {
		return
	}
	if _, held := s.get(s.owner(ctx), id, path); !held {
		req.Params.URI = s.notHeld(fileURI(id, path))
		return
	}
	req.Params.URI = templateURI(id, path)
}

// notHeld says why uri, a file's, cannot be read: the same words whether
// it expired, never existed, or is another principal's, so that a URI
// does not tell whether it exists.
func (s *fileStore) notHeld(uri string) string {
	return fmt.Sprintf("%s has expired or never existed here: kept files live in the memory of the server process that made them and end with it, so a link from an earlier server process (each Inspector CLI call starts a new one) cannot be read; within one server they are kept for %s after their run (file_retention), %s; run the program again to make it anew",
		uri, s.keep, s.bound())
}

// readFile is the resources/read handler of filesURITemplate: the file as
// text if it is UTF-8 of a textual type, else as a base64 blob, under the
// URI the run's result gave it. routeRead sends it only files the caller
// may read; one that expired since gets notHeld's words.
func (s *fileStore) readFile(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	id, path, ok := parseFileURI(req.Params.URI)
	if !ok {
		return nil, fmt.Errorf("%s is not a file's URI: want %s", req.Params.URI, filesURITemplate)
	}
	uri := fileURI(id, path)
	data, ok := s.get(s.owner(ctx), id, path)
	if !ok {
		// Held when routeRead looked, and gone since.
		return nil, errors.New(s.notHeld(uri))
	}
	mimeType := fileMIMEType(path, data)
	if isTextType(mimeType) && utf8.Valid(data) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mimeType, Text: string(data)}}, nil
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mimeType, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}

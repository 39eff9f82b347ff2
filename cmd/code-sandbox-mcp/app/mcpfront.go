package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// bodyPiece is how much of a body of unknown length (chunked) mcpFront
// reads at a time.
const bodyPiece = 64 << 10

// mcpFront is /mcp, in front of mcp-go's streamable HTTP server, behind
// the checks of httpHandler and mcpSessions: it reads a POST's body
// itself, within limit, and counts an initialize in its client's rate,
// before mcp-go sees either, then hands the request to mcp-go's Handle.
// mcp-go's own ServeHTTP reads a body whole, however large, and
// registers the session an initialize makes before any hook could refuse
// it. Handle does what ServeHTTP does but for the three things ServeHTTP
// adds, none of which this server needs of it: CORS and protected
// resource metadata, which it does not configure, and the Host check
// against DNS rebinding, which httpHandler makes of every endpoint
// (httpauth.CheckHost).
type mcpFront struct {
	mcp *server.StreamableHTTPServer
	// limit bounds a request's body, in bytes ([http] max_request_bytes).
	limit int64
	// budget, if not nil, bounds the large bodies held at once, from
	// before one is read until its call returns.
	budget *bodyBudget
	// initialize, if not nil, counts an initialize of principal in its
	// rate; a refusal, if not "", says why it may not make a session,
	// and retry when it may.
	initialize func(principal string) (retry time.Duration, refusal string)
	logger     *slog.Logger
}

// ServeHTTP serves r: a POST whose body is over f.limit gets 413, one
// for whose body f.budget has no room in time 503 with Retry-After, an
// initialize past its client's rate 429 with Retry-After, and the rest
// what mcp-go answers.
func (f *mcpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Method == http.MethodPost {
		if f.budget != nil && r.ContentLength <= f.limit {
			n := r.ContentLength
			if n < 0 {
				n = f.limit // chunked: as large as it may be
			}
			release, refusal := f.budget.take(r.Context(), n)
			if refusal != "" {
				f.logger.Warn("request body refused: no room for it among the large bodies held", "remote", r.RemoteAddr, "principal", principalOf(r.Context()),
					"content_length", r.ContentLength)
				w.Header().Set("Retry-After", "2")
				http.Error(w, refusal, http.StatusServiceUnavailable)
				return
			}
			defer release()
		}
		var err error
		body, err = readBody(w, r, f.limit)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			f.logger.Warn("request body over max_request_bytes refused", "remote", r.RemoteAddr, "principal", principalOf(r.Context()),
				"content_length", r.ContentLength, "max_request_bytes", f.limit)
			http.Error(w, bodyTooLarge(f.limit), http.StatusRequestEntityTooLarge)
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, "the request body did not arrive within [http] read_timeout: send it faster, or ask the server's operator to raise read_timeout", http.StatusBadRequest)
			return
		case err != nil:
			http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusBadRequest)
			return
		}
		if f.initialize != nil && makesSession(r.Header, body) {
			if retry, refusal := f.initialize(principalOf(r.Context())); refusal != "" {
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
				http.Error(w, refusal, http.StatusTooManyRequests)
				return
			}
		}
	}
	f.mcp.Handle(newResponseWriter(w), &server.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Header, Body: body, Context: r.Context()})
}

// end makes mcp-go forget the MCP session id and everything it holds for
// it, as a client's DELETE of it does: mcpSessions calls it for an id it
// has forgotten to make room for a newer one, which mcp-go would
// otherwise keep until its idle sweep (mcpSessionIdle).
func (f *mcpFront) end(id string) {
	h := http.Header{}
	h.Set(server.HeaderKeySessionID, id)
	w := &discardWriter{header: http.Header{}}
	f.mcp.Handle(w, &server.HTTPRequest{Method: http.MethodDelete, Header: h, Context: context.Background()})
	if w.code != http.StatusOK {
		f.logger.Warn("mcp-go did not end a forgotten MCP session", "status", w.code, "session", id)
	}
}

// bodyTooLarge is the text of the 413 for a body over limit.
func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body too large: this server reads at most %d bytes (%.1f MiB) of a request ([http] max_request_bytes), so it did not read this one. "+
		"Send binary files as base64 (\"encoding\": \"base64\"), not as escaped text; send fewer or smaller files, or have the program make its data; or ask the server's operator to raise max_request_bytes.",
		limit, float64(limit)/(1<<20))
}

// readBody reads r's body, at most limit bytes: a body that says its
// length (Content-Length) into a slice of exactly that length, after
// refusing one over limit without reading any of it; one that does not
// (chunked) bodyPiece at a time, into a slice of exactly what it held
// once it ends, refusing it as soon as it passes limit. A body over
// limit is an *http.MaxBytesError, and net/http closes the connection
// after the reply (it must be left to do so: one closed while the client
// still sends would be reset, the reply lost).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var pieces [][]byte
	var n int
	for {
		p := make([]byte, bodyPiece)
		k, err := io.ReadFull(body, p)
		if k > 0 {
			pieces = append(pieces, p[:k])
			n += k
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, n)
	for i, p := range pieces {
		b = append(b, p...)
		pieces[i] = nil
	}
	return b, nil
}

// makesSession reports whether mcp-go makes an MCP session for a POST of
// header and body: an initialize of a protocol before 2026-07-28, which
// has no sessions. It reads the body as mcp-go does, so as to count every
// initialize mcp-go takes for one.
func makesSession(header http.Header, body []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result,omitempty"`
		Error  json.RawMessage `json:"error,omitempty"`
		Method mcp.MCPMethod   `json:"method,omitempty"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Method != mcp.MethodInitialize {
		return false
	}
	if mcp.IsModernProtocol(header.Get(mcp.HeaderProtocolVersion)) {
		return false
	}
	var wrapper struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &wrapper) != nil || !mcp.IsModernProtocol(wrapper.Params.Meta.ProtocolVersion())
}

// responseWriter is an http.ResponseWriter as the server.HTTPResponseWriter
// mcp-go's Handle writes to, as mcp-go's ServeHTTP adapts it: it streams
// if w can flush, and its writes can be given a deadline.
type responseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher // nil if w cannot stream
}

func newResponseWriter(w http.ResponseWriter) *responseWriter {
	f, _ := w.(http.Flusher)
	return &responseWriter{w: w, flusher: f}
}

func (a *responseWriter) Header() http.Header         { return a.w.Header() }
func (a *responseWriter) WriteHeader(code int)        { a.w.WriteHeader(code) }
func (a *responseWriter) Write(p []byte) (int, error) { return a.w.Write(p) }
func (a *responseWriter) CanStream() bool             { return a.flusher != nil }

// Flush sends what is written so far, if w can.
func (a *responseWriter) Flush() {
	if a.flusher != nil {
		a.flusher.Flush()
	}
}

// SetWriteDeadline bounds the writes to come (zero: no bound), which
// mcp-go sets while it writes to a client that may have stalled.
func (a *responseWriter) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(a.w).SetWriteDeadline(t)
}

// discardWriter is a server.HTTPResponseWriter that keeps only the
// status, for a request the server makes of mcp-go itself.
type discardWriter struct {
	header http.Header
	code   int
}

func (d *discardWriter) Header() http.Header { return d.header }
func (d *discardWriter) WriteHeader(code int) {
	if d.code == 0 {
		d.code = code
	}
}
func (d *discardWriter) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	return len(p), nil
}
func (d *discardWriter) Flush()          {}
func (d *discardWriter) CanStream() bool { return false }

package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// invalidIDAnswer is the answer to a request whose id is neither a string
// nor an integer: JSON-RPC's Invalid Request, with the id null because the
// request's own id cannot be echoed.
const invalidIDAnswer = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer"}}` + "\n"

// screenIDs stands between the client and mcp-go's stdio server, which
// serves a request whatever its id is (an object, an array, a boolean or a
// fraction, echoed back) and drops one whose id is null unanswered, taking
// it for a notification. MCP requires a string or an integer. screenIDs
// passes each line read from in on to the reader it returns, except such
// requests, which it answers with invalidIDAnswer on out instead. The
// writer it returns is out for the server's frames, made whole with
// respect to those answers so that no two are interleaved. Call stop once
// the server has stopped reading: a line read after it is neither passed on
// nor answered. The copy may still be blocked reading in then, as mcp-go's
// own reader may be; it ends when in does.
func screenIDs(in io.Reader, out io.Writer) (serverIn io.Reader, serverOut io.Writer, stop func()) {
	pr, pw := io.Pipe()
	w := &frameWriter{w: out}
	go func() {
		r := bufio.NewReader(in)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				if badID(line) {
					// A failed write is the client gone; package main
					// notices it on stdout and shuts the server down.
					w.answer([]byte(invalidIDAnswer))
				} else if _, werr := pw.Write(line); werr != nil {
					return // stopped
				}
			}
			if err != nil {
				pw.CloseWithError(err) // io.EOF: the server sees stdin end
				return
			}
		}
	}()
	return pr, w, func() {
		w.stop()
		pr.Close()
	}
}

// badID reports whether line is a JSON-RPC request (an object with a
// method) that has an id which is neither a string nor an integer. It reads
// line as mcp-go does (encoding/json, keys matched without regard to case,
// the last of duplicate keys winning), so that what it lets through is what
// mcp-go then serves. A line that is not a JSON object is mcp-go's to
// answer, and a message without a method is a response, which gets none.
func badID(line []byte) bool {
	var msg struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"` // "null" when present and null, nil when absent
	}
	if json.Unmarshal(line, &msg) != nil || msg.Method == nil || msg.ID == nil {
		return false
	}
	return msg.ID[0] != '"' && !isInteger(msg.ID)
}

// isInteger reports whether the valid JSON value v is an integer written
// as one: digits, perhaps after a minus sign, without a fraction or an
// exponent (1.0 and 1e3 are refused).
func isInteger(v []byte) bool {
	return (v[0] == '-' || '0' <= v[0] && v[0] <= '9') && !bytes.ContainsAny(v, ".eE")
}

// frameWriter writes whole frames to w, one a Write, from the stdio server
// and from screenIDs.
type frameWriter struct {
	w io.Writer

	mu      sync.Mutex
	stopped bool
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Write(p)
}

// answer writes p unless stop has been called.
func (f *frameWriter) answer(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.w.Write(p)
	}
}

func (f *frameWriter) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
}

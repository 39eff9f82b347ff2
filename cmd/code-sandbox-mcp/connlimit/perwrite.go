package connlimit

import (
	"net/http"
	"time"
)

// PerWrite returns next with each write of its responses bounded by d:
// the connection's write deadline is set d ahead before each Write,
// WriteHeader and Flush of next's and cleared once it returns, and set
// once more when next returns, for what net/http writes then (the
// buffered rest of the body, the last chunk). A client that does not
// read a response for d fails the write: over HTTP/1 net/http closes the
// connection, over HTTP/2 the stream is reset, and either way the
// request's context is cancelled. Between writes there is no deadline,
// so a long call that has not answered yet, or an event stream quiet for
// minutes, is not cut, as http.Server's WriteTimeout (a deadline from
// the end of the request's headers) would cut it. The deadline is
// cleared after each write because over HTTP/2 it is a timer that resets
// the stream when it fires, whether a write waits or not. d <= 0 returns
// next unchanged.
//
// The writer next gets implements http.Flusher whatever the connection's
// (a Flush it cannot do does nothing) and unwraps, for
// http.ResponseController, to net/http's.
func PerWrite(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &writer{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		next.ServeHTTP(pw, r)
		pw.arm()
	})
}

// writer is a ResponseWriter whose every write has d to finish.
type writer struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// arm sets the write deadline d ahead. An error (a hijacked connection,
// a writer with no deadlines) leaves the write unbounded, as it was.
func (w *writer) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

// disarm clears the write deadline.
func (w *writer) disarm() { _ = w.rc.SetWriteDeadline(time.Time{}) }

func (w *writer) Write(p []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(p)
}

func (w *writer) WriteHeader(code int) {
	w.arm()
	defer w.disarm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Flush() {
	w.arm()
	defer w.disarm()
	_ = w.rc.Flush()
}

// Unwrap returns net/http's writer, for http.ResponseController.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

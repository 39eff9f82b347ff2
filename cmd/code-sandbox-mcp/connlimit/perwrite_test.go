package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// d is the write timeout of these tests.
const d = 300 * time.Millisecond

// serve serves h bounded by PerWrite(d) over HTTP/1, or HTTP/2 over TLS.
func serve(t *testing.T, proto string, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(PerWrite(h, d))
	if proto == "HTTP/2" {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// smallWindow dials with a receive buffer of a few KiB, so that a
// response the client does not read fills it at once (the kernel would
// otherwise grow it to tens of MiB).
var smallWindow = net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	}); cerr != nil {
		return cerr
	}
	return err
}}

// A client that stops reading a response fails the write within about d,
// and the request's context is cancelled.
func TestPerWriteCutsAClientThatDoesNotRead(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			type outcome struct {
				err       error
				took      time.Duration
				cancelled bool
			}
			done := make(chan outcome, 1)
			s := serve(t, proto, func(w http.ResponseWriter, r *http.Request) {
				big := make([]byte, 64<<20)
				start := time.Now()
				_, err := w.Write(big)
				o := outcome{err: err, took: time.Since(start)}
				select {
				case <-r.Context().Done():
					o.cancelled = true
				case <-time.After(time.Second):
				}
				done <- o
			})
			if proto == "HTTP/2" {
				// Go's HTTP/2 client takes 4 MiB of a stream it does not
				// read, then its window is shut.
				resp, err := s.Client().Get(s.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 {
					t.Fatalf("the client speaks %s; want HTTP/2", resp.Proto)
				}
			} else {
				c, err := smallWindow.Dial("tcp", s.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", s.Listener.Addr())
			}
			select {
			case o := <-done:
				if !errors.Is(o.err, os.ErrDeadlineExceeded) && !strings.Contains(fmt.Sprint(o.err), "stream error") {
					t.Errorf("the write to a client that does not read: %v; want its deadline exceeded", o.err)
				}
				if o.took < d || o.took > d+2*time.Second {
					t.Errorf("the write failed after %s; want about %s", o.took, d)
				}
				if !o.cancelled {
					t.Error("the request's context is not cancelled after the write failed")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a write to a client that does not read still waits after 10s")
			}
		})
	}
}

// Between writes there is no deadline: a call that answers late, and a
// stream quiet for several times d between events, are not cut, and end
// cleanly.
func TestPerWriteLeavesQuietResponsesAlone(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			s := serve(t, proto, func(w http.ResponseWriter, r *http.Request) {
				// What is timed here is the quiet itself: the handler is a
				// call that takes 3d to answer, then a stream quiet for 3d
				// between two events.
				time.Sleep(3 * d)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: one\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(3 * d)
				io.WriteString(w, "data: two\n\n")
				w.(http.Flusher).Flush()
			})
			resp, err := s.Client().Get(s.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if want := map[string]int{"HTTP/1.1": 1, "HTTP/2": 2}[proto]; resp.ProtoMajor != want {
				t.Fatalf("the client speaks %s; want %s", resp.Proto, proto)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "data: one\n\ndata: two\n\n" {
				t.Errorf("the stream: %q, %v; want both events and a clean end", body, err)
			}
		})
	}
}

// mcp-go streams only to a writer that is an http.Flusher, and reaches
// the connection's deadlines through http.ResponseController.
func TestPerWriteKeepsFlusherAndUnwrap(t *testing.T) {
	got := make(chan string, 1)
	s := serve(t, "HTTP/1.1", func(w http.ResponseWriter, r *http.Request) {
		_, flusher := w.(http.Flusher)
		err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(time.Minute))
		got <- fmt.Sprintf("flusher %v, SetReadDeadline %v", flusher, err)
	})
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g, want := <-got, "flusher true, SetReadDeadline <nil>"; g != want {
		t.Errorf("the writer PerWrite gives: %s; want %s", g, want)
	}
}

func TestPerWriteOff(t *testing.T) {
	h := http.NotFoundHandler()
	if got := PerWrite(h, 0); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", h) {
		t.Error("PerWrite(h, 0) is not h")
	}
}

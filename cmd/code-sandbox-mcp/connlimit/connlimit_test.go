package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"code-sandbox-mcp/internal/logtest"
)

// served is a Listener on 127.0.0.1 whose accepted connections a
// goroutine hands to the test.
type served struct {
	l        *Listener
	accepted chan net.Conn
	mu       sync.Mutex
	refused  []string // the reasons Config.Refused was told
}

func listen(t *testing.T, c Config) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{accepted: make(chan net.Conn, 64)}
	c.Refused = func(reason string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refused = append(s.refused, reason)
	}
	s.l = New(ln, c)
	t.Cleanup(func() { s.l.Close() })
	go func() {
		for {
			c, err := s.l.Accept()
			if err != nil {
				close(s.accepted)
				return
			}
			s.accepted <- c
		}
	}()
	return s
}

// dial connects to s from the loopback address from (127.0.0.X).
func (s *served) dial(t *testing.T, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept returns the connection s accepted next.
func (s *served) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.accepted:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5s")
		return nil
	}
}

func (s *served) reasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// refusedWith reads what the server said to c, which it must have
// closed at once, and returns it.
func refusedWith(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("a refused connection: read %q, then %v; want the server to close it at once", b, err)
	}
	return string(b)
}

// waitOpen waits for l to count n connections open.
func waitOpen(t *testing.T, l *Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.inUse() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open after 5s; want %d", l.inUse(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestListenerBounds(t *testing.T) {
	s := listen(t, Config{Max: 3, PerClient: 2, PlainHTTP: true})
	s.dial(t, "127.0.0.1")
	s.dial(t, "127.0.0.1")
	first, _ := s.accept(t), s.accept(t)

	third := s.dial(t, "127.0.0.1")
	if got := refusedWith(t, third); !strings.HasPrefix(got, "HTTP/1.1 503 Service Unavailable\r\n") ||
		!strings.Contains(got, "Connection: close\r\n") || !strings.HasSuffix(got, "\r\n\r\ntoo many connections open from your address: close one, or reuse one, and retry\n") {
		t.Errorf("the third connection from one address was told %q; want a 503 that says so", got)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(refusedWith(t, s.dial(t, "127.0.0.1")))), nil)
	if err != nil {
		t.Fatalf("the refusal is no HTTP response: %v", err)
	}
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 503 || !resp.Close || !strings.Contains(string(body), "your address") {
		t.Errorf("the refusal: %d, close %v, %q; want 503, close, the reason", resp.StatusCode, resp.Close, body)
	}

	// Another address has its own count, up to the total.
	s.dial(t, "127.0.0.2")
	s.accept(t)
	if got := refusedWith(t, s.dial(t, "127.0.0.3")); !strings.Contains(got, "\r\n\r\nthe server has too many connections open: retry later\n") {
		t.Errorf("a connection past the total was told %q; want a 503 that says the server is full, and no count", got)
	}
	if got, want := strings.Join(s.reasons(), " "), "max_connections_per_client max_connections_per_client max_connections"; got != want {
		t.Errorf("refusals counted: %s; want %s", got, want)
	}

	// A connection closed frees its place, once however often it is
	// closed.
	first.Close()
	first.Close()
	waitOpen(t, s.l, 2)
	s.dial(t, "127.0.0.1")
	s.accept(t)
	if n := s.l.inUse(); n != 3 {
		t.Errorf("%d connections open; want 3", n)
	}
}

// A client past its own bound is told so, though the total is reached
// too: closing one of its own is what it can do.
func TestListenerTellsAClientOfItsOwnBoundFirst(t *testing.T) {
	s := listen(t, Config{Max: 2, PerClient: 2, PlainHTTP: true})
	for range 2 {
		s.dial(t, "127.0.0.1")
		s.accept(t)
	}
	if got := refusedWith(t, s.dial(t, "127.0.0.1")); !strings.Contains(got, "from your address") {
		t.Errorf("a client past both bounds was told %q; want its own bound", got)
	}
	if got := strings.Join(s.reasons(), " "); got != ReasonPerClient {
		t.Errorf("refusals counted: %s; want %s", got, ReasonPerClient)
	}
}

func TestListenerNoBounds(t *testing.T) {
	s := listen(t, Config{})
	for range 20 {
		s.dial(t, "127.0.0.1")
		s.accept(t)
	}
	if n, r := s.l.inUse(), s.reasons(); n != 20 || len(r) != 0 {
		t.Errorf("%d open, refused %v; want 20 open and none refused without bounds", n, r)
	}
}

// Over TLS a refused connection is closed without a word: the client
// expects a handshake.
func TestListenerRefusesSilentlyOverTLS(t *testing.T) {
	s := listen(t, Config{PerClient: 1})
	s.dial(t, "127.0.0.1")
	s.accept(t)
	if got := refusedWith(t, s.dial(t, "127.0.0.1")); got != "" {
		t.Errorf("a refused connection without PlainHTTP was told %q; want nothing", got)
	}
}

// A flood of refused connections logs one line, and the next line, once
// due, counts the refusals since.
func TestListenerLogsRefusalsAtABoundedRate(t *testing.T) {
	var buf logtest.Buffer
	s := listen(t, Config{PerClient: 1, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	s.dial(t, "127.0.0.1")
	s.accept(t)
	for range 30 {
		refusedWith(t, s.dial(t, "127.0.0.1"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=WARN msg="refused a connection: too many open" remote=127.0.0.1 limit=max_connections_per_client max=1 refused_since_last_line=1`) {
		t.Fatalf("30 refusals logged:\n%s\nwant one warning with the address and the limit", buf.String())
	}
	s.l.mu.Lock()
	s.l.lastLog = time.Time{}
	s.l.mu.Unlock()
	refusedWith(t, s.dial(t, "127.0.0.1"))
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "refused_since_last_line=30") {
		t.Errorf("the next line, once due:\n%s\nwant refused_since_last_line=30", buf.String())
	}
	if n := len(s.reasons()); n != 31 {
		t.Errorf("%d refusals counted; want all 31", n)
	}
}

// Every way net/http ends a connection releases its place: its idle and
// read timeouts, a handler that hijacks it, Shutdown, Close.
func TestListenerReleasesWhatHTTPCloses(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hijack" {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		io.WriteString(w, "ok")
	})
	serve := func(t *testing.T, srv *http.Server) (*Listener, string) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := New(ln, Config{Max: 10})
		srv.Handler = handler
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		t.Cleanup(func() {
			srv.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Error(err)
			}
		})
		return l, "http://" + ln.Addr().String()
	}
	get := func(t *testing.T, url string) {
		t.Helper()
		resp, err := (&http.Client{Transport: &http.Transport{}}).Get(url)
		if err != nil {
			if strings.HasSuffix(url, "/hijack") {
				return
			}
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	t.Run("timeouts and hijack", func(t *testing.T) {
		l, base := serve(t, &http.Server{IdleTimeout: 500 * time.Millisecond, ReadHeaderTimeout: 500 * time.Millisecond})
		get(t, base+"/")
		if n := l.inUse(); n != 1 {
			t.Fatalf("%d connections open after a GET; want its one, idle", n)
		}
		waitOpen(t, l, 0) // the idle timeout
		get(t, base+"/hijack")
		waitOpen(t, l, 0)
		silent, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		waitOpen(t, l, 1)
		waitOpen(t, l, 0) // the header timeout
	})
	for _, stop := range []string{"Shutdown", "Close"} {
		t.Run(stop, func(t *testing.T) {
			srv := &http.Server{}
			l, base := serve(t, srv)
			for range 3 {
				get(t, base+"/")
			}
			waitOpen(t, l, 3)
			if stop == "Shutdown" {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := srv.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				srv.Close()
			}
			waitOpen(t, l, 0)
		})
	}
}

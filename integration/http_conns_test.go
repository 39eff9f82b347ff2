package integration

// Issue 23's bounds on connections, through the real binary: a kept-alive
// connection closed after idle_timeout, a body trickled in cut at
// read_timeout, a client that does not read its answer cut within about
// write_timeout while a long call and a quiet call's event stream are not
// (over HTTP/1.1 and HTTP/2), and a connection past
// max_connections_per_client or max_connections closed at once, counted
// and logged at a bounded rate.

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The bounds of these tests, small so that each shows in seconds.
const (
	connIdle  = 2 * time.Second
	connRead  = 3 * time.Second
	connWrite = 2 * time.Second
	// connTimeouts is the [http] table of connIdle, connRead and
	// connWrite; connBigOutput lets a program print what fills a client's
	// buffers many times over.
	connTimeouts  = "[http]\nidle_timeout = \"2s\"\nread_timeout = \"3s\"\nwrite_timeout = \"2s\"\n"
	connBigOutput = "[limits]\noutput_bytes = \"16MiB\"\n"
	// printBig prints 12 MB: its answer is at least that, where the
	// kernel buffers of a loopback connection whose client does not read
	// hold a few MiB at most.
	printBig = "import sys; sys.stdout.write('x' * 12_000_000)"
)

// openFDs counts the file descriptors the process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// serverConns counts the connections s holds open on its port: those of
// /proc/net/tcp whose local end is s's and whose state is ESTABLISHED or
// CLOSE_WAIT (the client has closed, the server not yet). A connection
// the server has closed is in neither.
func (s *httpServer) serverConns(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(s.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscan(port, &p)
	local := fmt.Sprintf("0100007F:%04X", p)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && (f[3] == "01" || f[3] == "08") {
			n++
		}
	}
	return n
}

// hostPort is s's address, HOST:PORT.
func (s *httpServer) hostPort() string {
	_, hp, _ := strings.Cut(s.base, "://")
	return hp
}

// dialFrom connects to s from the loopback address from (127.0.0.X),
// with a receive buffer of a few KiB if small (so that an answer the
// test does not read fills it at once; the kernel would otherwise grow
// it to tens of MiB).
func dialFrom(t *testing.T, s *httpServer, from string, small bool) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	if small {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var err error
			if cerr := rc.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); cerr != nil {
				return cerr
			}
			return err
		}
	}
	c, err := d.Dial("tcp", s.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// healthz sends GET /healthz on c and reads the answer from r, which
// must keep the connection open.
func healthz(t *testing.T, s *httpServer, c net.Conn, r *bufio.Reader) {
	t.Helper()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", s.hostPort())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatalf("GET /healthz: %s with Connection: close; want the connection kept alive", resp.Status)
	}
	c.SetReadDeadline(time.Time{})
}

// closedBy waits up to d for the server to close c (read EOF or reset),
// and returns what it read and how long it waited.
func closedBy(t *testing.T, r io.Reader, c net.Conn, d time.Duration) ([]byte, time.Duration, error) {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	b, err := io.ReadAll(r)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	return b, time.Since(start), err
}

// initialized is a session of s, initialized, for raw requests.
func initialized(t *testing.T, s *httpServer) string {
	t.Helper()
	r := &rawHTTP{s: s}
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"conns","version":"1"}}}`)
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r.session == "" {
		t.Fatal("initialize answered no Mcp-Session-Id")
	}
	return r.session
}

// writeFailed matches mcp-go's log line of a response it could not write.
var writeFailed = regexp.MustCompile(`msg="Failed to write[^"]*" err=.*`)

// writeCut waits for the server to log a failed write past the first
// before of them, as it must once a client that does not read has held
// a write for write_timeout; want says what the test waits for.
func writeCut(t *testing.T, s *httpServer, before int, want string) {
	t.Helper()
	start := time.Now()
	var line string
	if !waitFor(connWrite+15*time.Second, func() bool {
		all := writeFailed.FindAllString(s.stderr.String(), -1)
		if len(all) > before {
			line = all[before]
			return true
		}
		return false
	}) {
		t.Fatalf("%s after the answer began, the server still writes to a client that does not read it; want %s at write_timeout (%s)",
			time.Since(start).Round(time.Millisecond), want, connWrite)
	}
	took := time.Since(start)
	t.Logf("the write was cut after %s: %s", took.Round(time.Millisecond), line)
	if took > connWrite+3*time.Second {
		t.Errorf("the write to a client that does not read was cut after %s; want about write_timeout (%s)", took, connWrite)
	}
}

func TestHTTPConnectionTimeouts(t *testing.T) {
	// Without pools, sandboxes live only while they run, so that the
	// server's goroutines and files are the same before and after.
	s := startHTTP(t, serverSpec{config: connTimeouts + connBigOutput + noPools})
	// A first run connects the server to containerd.
	if err := runsFortyTwo(t, s); err != nil {
		t.Fatal(err)
	}
	if !waitFor(connIdle+5*time.Second, func() bool { return s.serverConns(t) == 0 }) {
		t.Fatalf("the server holds %d connections %s after its first run", s.serverConns(t), connIdle+5*time.Second)
	}
	startFDs := openFDs(t, s.cmd.Process.Pid)
	startGoroutines := serverGoroutines(t, s)

	t.Run("idle connections are closed", func(t *testing.T) { idleConnectionsClosed(t, s) })
	t.Run("a slow body is cut", func(t *testing.T) { slowBodyCut(t, s) })
	t.Run("a client that does not read is cut", func(t *testing.T) { unreadAnswerCut(t, s) })
	t.Run("a long call whose client reads completes", func(t *testing.T) { longCallCompletes(t, s) })
	t.Run("the server still serves", func(t *testing.T) { stillServes(t, s, startFDs, startGoroutines) })

	// Last: the server is stopped while the call is quiet.
	t.Run("a quiet call's stream outlives read_timeout and write_timeout", func(t *testing.T) {
		quietCall(t, s, s.client, "HTTP/1.1")
	})
}

// idleConnectionsClosed checks that 20 idle connections to s are closed
// by the server at idle_timeout.
func idleConnectionsClosed(t *testing.T, s *httpServer) {
	type idle struct {
		c net.Conn
		r *bufio.Reader
	}
	var conns []idle
	for range 20 {
		c := dialFrom(t, s, "127.0.0.1", false)
		r := bufio.NewReader(c)
		healthz(t, s, c, r)
		conns = append(conns, idle{c, r})
	}
	if n := s.serverConns(t); n < 20 {
		t.Errorf("the server holds %d connections; want the test's 20 (and the scrape's)", n)
	}
	start := time.Now()
	for i, ic := range conns {
		b, _, err := closedBy(t, ic.r, ic.c, connIdle+6*time.Second)
		if err != nil || len(b) != 0 {
			t.Fatalf("idle connection %d: read %q, %v after %s; want EOF: the server closes it after idle_timeout (%s)",
				i, b, err, time.Since(start).Round(time.Millisecond), connIdle)
		}
	}
	took := time.Since(start)
	t.Logf("20 idle connections closed by the server within %s of the last answer", took.Round(time.Millisecond))
	if took > connIdle+3*time.Second {
		t.Errorf("the idle connections were closed after %s; want about idle_timeout (%s)", took, connIdle)
	}
	if n := s.serverConns(t); n > 1 {
		t.Errorf("the server holds %d connections once the 20 are closed; want none but the scrape's", n)
	}
}

// slowBodyCut checks that s cuts a body trickled at a byte a second at
// read_timeout.
func slowBodyCut(t *testing.T, s *httpServer) {
	c := dialFrom(t, s, "127.0.0.1", false)
	start := time.Now()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", s.hostPort())
	trickled := make(chan int, 1)
	go func() {
		n := 0
		for tick := time.NewTicker(time.Second); ; <-tick.C {
			if _, err := c.Write([]byte(" ")); err != nil {
				tick.Stop()
				trickled <- n
				return
			}
			n++
		}
	}()
	b, _, err := closedBy(t, c, c, connRead+10*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a body trickled at a byte a second: read %q, %v after %s; want the connection closed at read_timeout (%s)", b, err, took.Round(time.Millisecond), connRead)
	}
	c.Close()
	t.Logf("the body was cut after %s, %d bytes in; the server said %q", took.Round(time.Millisecond), <-trickled, b)
	if took > connRead+2*time.Second {
		t.Errorf("the slow body was cut after %s; want about read_timeout (%s)", took, connRead)
	}
}

// unreadAnswerCut checks that s cuts the answer to a client that stops
// reading it at write_timeout.
func unreadAnswerCut(t *testing.T, s *httpServer) {
	id := initialized(t, s)
	before := len(writeFailed.FindAllString(s.stderr.String(), -1))
	c := dialFrom(t, s, "127.0.0.1", true)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":%q}}}`, printBig)
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", s.hostPort(), id, len(body), body)
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the call's answer: %v", err)
	}
	// The answer has begun; from here the test reads nothing.
	writeCut(t, s, before, "the write cut")
	// What was sent before the cut arrives, then the end: the answer is
	// cut short.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= 12_000_000 {
		t.Errorf("read %d bytes of the answer, then %v; want it cut short", n, err)
	}
}

// longCallCompletes checks that a call of 8 s, longer than read_timeout
// and write_timeout, completes for a client that reads.
func longCallCompletes(t *testing.T, s *httpServer) {
	cl := s.connect(t, "")
	start := time.Now()
	res, err := cl.CallTool(testContext(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code",
		Arguments: code("import time; time.sleep(8); print('done')")}})
	if err != nil {
		t.Fatalf("a call of 8s with read_timeout %s and write_timeout %s: %v", connRead, connWrite, err)
	}
	if r := decodeResult(t, res); r.isError || r.out.Stdout != "done\n" {
		t.Errorf("the long call: %q %+v; want done", r.text, r.out)
	}
	t.Logf("the long call took %s", time.Since(start).Round(time.Millisecond))
}

// stillServes checks that s still serves once the other cases are done,
// and holds no more connections, files and goroutines than it had at
// their start: startFDs and startGoroutines.
func stillServes(t *testing.T, s *httpServer, startFDs int, startGoroutines float64) {
	cl := s.connect(t, "")
	res, err := cl.CallTool(testContext(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: code("print(6*7)")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeResult(t, res); r.isError || r.out.Stdout != "42\n" {
		t.Errorf("a run after the others: %q %+v; want 42", r.text, r.out)
	}
	cl.Close()
	// The test's own keep-alive connections end within idle_timeout.
	if !waitFor(connIdle+5*time.Second, func() bool { return s.serverConns(t) == 0 }) {
		t.Errorf("the server holds %d connections %s after the tests; want none", s.serverConns(t), connIdle+5*time.Second)
	}
	fds := openFDs(t, s.cmd.Process.Pid)
	if fds > startFDs+4 {
		t.Errorf("the server has %d files open after the tests; want about the %d it had at the start", fds, startFDs)
	}
	if g := serverGoroutines(t, s); g > startGoroutines+10 {
		t.Errorf("the server has %.0f goroutines after the tests; want about the %.0f it had at the start", g, startGoroutines)
	} else {
		t.Logf("goroutines: %.0f at the start, %.0f after; files open: %d, %d", startGoroutines, g, startFDs, fds)
	}
}

// serverGoroutines returns the goroutines of s, as its /metrics counts
// them.
func serverGoroutines(t *testing.T, s *httpServer) float64 {
	return getMetrics(t, s.base+"/metrics", "").value(t, "go_goroutines")
}

// sessionRequest is a request of method to s's /mcp in MCP session id,
// with body, as a 2025-06-18 client sends it.
func sessionRequest(t *testing.T, s *httpServer, id, method, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, s.base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	return req
}

// quietCall calls, with client, which must speak proto, in a new session
// of s, a program that prints a line, then is quiet for twice as long as
// read_timeout and write_timeout, then prints another, with a progress
// token: the call's answer is an event stream that begins with the first
// line's notification, then carries nothing for that long. It checks
// that a GET of /mcp in the session is refused (405: the server offers no
// standalone stream, so a call's POST stream is the only stream there
// is), that the quiet stream stays up, and that a SIGTERM while it is
// quiet lets the call finish: its result ends the stream cleanly, and the
// server exits.
func quietCall(t *testing.T, s *httpServer, client *http.Client, proto string) {
	t.Helper()
	id := initialized(t, s)
	newRequest := func(method, body string) *http.Request { return sessionRequest(t, s, id, method, body) }
	get, err := client.Do(newRequest("GET", ""))
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed || get.Header.Get("Allow") != "POST, DELETE" {
		t.Errorf("GET /mcp: %s, Allow %q; want 405 with Allow: POST, DELETE", get.Status, get.Header.Get("Allow"))
	}

	// What is tested is that nothing happens for this long.
	quiet := 2 * max(connRead, connWrite)
	// One write: print's text and its newline may be two writes, and
	// then two notifications, the second one in the quiet.
	src := fmt.Sprintf("import os, time; os.write(1, b'begun\\n'); time.sleep(%d); print('done')", int((quiet + 2*time.Second).Seconds()))
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":%q},"_meta":{"progressToken":"quiet"}}}`, src)
	resp, err := client.Do(newRequest("POST", body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || resp.Proto != proto || ct != "text/event-stream" {
		t.Fatalf("the call: %s over %s, Content-Type %q; want 200 over %s, an event stream", resp.Status, resp.Proto, ct, proto)
	}
	// Each message of the stream, as it comes; events is closed when the
	// stream ends, and then ended says how. One channel keeps the order:
	// a server in shutdown closes the connection right after the result,
	// and a select on two channels could see the end first.
	type event struct {
		msg map[string]any
		at  time.Time
	}
	events, ended := make(chan event, 16), make(chan error, 1)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var msg map[string]any
			if err := json.Unmarshal([]byte(data), &msg); err != nil {
				ended <- fmt.Errorf("an event of the stream is not JSON: %q: %v", data, err)
				return
			}
			events <- event{msg, time.Now()}
		}
		ended <- sc.Err()
	}()
	var begun event
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatalf("the call's stream ended before its first notification: %v", <-ended)
		}
		begun = e
	case <-time.After(60 * time.Second):
		t.Fatal("no notification on the call's stream within 60s")
	}
	if m, _ := begun.msg["method"].(string); m != "notifications/progress" || !strings.Contains(fmt.Sprint(begun.msg["params"]), "stdout: begun") {
		t.Fatalf("the stream's first message: %v; want the progress notification of the first line", begun.msg)
	}
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatalf("the quiet stream ended after less than %s: %v; want it up until the call returns", quiet, <-ended)
		}
		t.Fatalf("the quiet stream carried %v after %s; want nothing for %s", e.msg, e.at.Sub(begun.at).Round(time.Millisecond), quiet)
	case <-time.After(quiet):
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop(30 * time.Second) }()
	// The call goes on: the notification of its last line, then its
	// result, which ends the stream.
	for result := false; !result; {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended at the SIGTERM without the call's result: %v", <-ended)
			}
			_, result = e.msg["result"]
			switch {
			case result && (e.msg["id"] != 2.0 || !strings.Contains(fmt.Sprint(e.msg["result"]), "done")):
				t.Errorf("the call's result: %v; want the program's output", e.msg)
			case result:
				t.Logf("the result came %s after the first notification", e.at.Sub(begun.at).Round(time.Millisecond))
			case e.msg["method"] != "notifications/progress":
				t.Errorf("the stream carried %v after the SIGTERM; want the call's progress, then its result", e.msg)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no result on the stream 30s after the SIGTERM")
		}
	}
	select {
	case e, ok := <-events:
		if ok {
			t.Errorf("the stream carried %v after the call's result; want nothing", e.msg)
		} else if err := <-ended; err != nil {
			t.Errorf("the stream ended with %v after the result; want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the stream is still open 10s after the call's result")
	}
	if err := <-stopped; err != nil {
		t.Errorf("server exit after SIGTERM: %v", err)
	}
}

// Over HTTP/2 (TLS), a quiet call's stream stays up and a client that
// does not read its answer is cut within about write_timeout.
func TestHTTPConnectionTimeoutsOverHTTP2(t *testing.T) {
	ca := newTestCA(t)
	s := startHTTPWith(t, serverSpec{config: connTimeouts + connBigOutput}, httpOptions{tls: ca})
	h2 := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}}}
	s.client = h2
	defer h2.CloseIdleConnections()

	t.Run("a client that does not read is cut", func(t *testing.T) {
		id := initialized(t, s)
		before := len(writeFailed.FindAllString(s.stderr.String(), -1))
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":%q}}}`, printBig)
		resp, err := h2.Do(sessionRequest(t, s, id, "POST", body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("the call's answer came over %s; want HTTP/2", resp.Proto)
		}
		// Go's HTTP/2 client takes 4 MiB of a stream it does not read;
		// then the stream's window is shut and the server waits.
		writeCut(t, s, before, "the stream reset")
		if n, err := io.Copy(io.Discard, resp.Body); err == nil || n >= 12_000_000 {
			t.Errorf("read %d bytes of the answer, then %v; want it cut short", n, err)
		}
	})

	t.Run("a quiet call's stream outlives read_timeout and write_timeout", func(t *testing.T) {
		quietCall(t, s, h2, "HTTP/2.0")
	})
}

func TestHTTPConnectionCaps(t *testing.T) {
	s := startHTTP(t, serverSpec{args: []string{"--metrics-addr", "127.0.0.1:0"},
		config: "[http]\nmax_connections_per_client = 4\nmax_connections = 8\n"})
	metrics := "http://" + metricsListen(t, s.stderr) + "/metrics"

	var first []heldConn
	for range 4 {
		first = append(first, holdConn(t, s, "127.0.0.1"))
	}
	refusedConn(t, s, "127.0.0.1", refusedPerClient)
	for _, o := range first {
		healthz(t, s, o.c, o.r)
	}
	// Another address has its own four, up to the total of eight.
	for range 4 {
		holdConn(t, s, "127.0.0.2")
	}
	refusedConn(t, s, "127.0.0.3", refusedTotal)
	refusalFloodLoggedAndCounted(t, s, metrics)

	// A connection closed frees its place.
	first[0].c.Close()
	if !waitFor(10*time.Second, func() bool { return acceptedFrom(t, s, "127.0.0.1") }) {
		t.Fatal("no connection from 127.0.0.1 is accepted 10s after one of its four was closed")
	}

	// With all closed, the server serves as before. The server learns of
	// a close a moment later: a connection may be refused until then.
	for _, o := range first {
		o.c.Close()
	}
	var err error
	if !waitFor(10*time.Second, func() bool { err = runsFortyTwo(t, s); return err == nil }) {
		t.Fatalf("no run 10s after the test's connections from 127.0.0.1 were closed: %v", err)
	}
}

// What a connection past max_connections_per_client, and one past
// max_connections, is told.
const (
	refusedPerClient = "too many connections open from your address: close one, or reuse one, and retry"
	refusedTotal     = "the server has too many connections open: retry later"
)

// heldConn is a connection the test holds open, and its reader.
type heldConn struct {
	c net.Conn
	r *bufio.Reader
}

// holdConn opens a connection to s from the address from, on which a
// /healthz is answered.
func holdConn(t *testing.T, s *httpServer, from string) heldConn {
	c := dialFrom(t, s, from, false)
	o := heldConn{c, bufio.NewReader(c)}
	healthz(t, s, o.c, o.r)
	return o
}

// refusedConn checks that a connection to s from the address from is
// answered with a 503 that says want, and closed at once.
func refusedConn(t *testing.T, s *httpServer, from, want string) {
	t.Helper()
	c := dialFrom(t, s, from, false)
	b, took, err := closedBy(t, c, c, 5*time.Second)
	if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 503 Service Unavailable\r\n") || !strings.HasSuffix(string(b), "\r\n\r\n"+want+"\n") {
		t.Fatalf("a connection from %s past the bounds: read %q, %v after %s; want a 503 that says %q, and closed at once",
			from, b, err, took.Round(time.Millisecond), want)
	}
	if took > time.Second {
		t.Errorf("a connection past the bounds was closed after %s; want at once", took)
	}
}

// refusalFloodLoggedAndCounted checks that a flood of 50 more refused
// connections from 127.0.0.1 (52 in all, with one of each kind before)
// is logged in a line or two, not one a connection, and counted by
// reason at metrics.
func refusalFloodLoggedAndCounted(t *testing.T, s *httpServer, metrics string) {
	t.Helper()
	start := time.Now()
	for range 50 {
		refusedConn(t, s, "127.0.0.1", refusedPerClient)
	}
	lines := strings.Count(s.stderr.String(), `msg="refused a connection: too many open"`)
	if most := 1 + int(time.Since(start)/(10*time.Second)) + 1; lines < 1 || lines > most {
		t.Errorf("%d log lines for 52 refused connections; want 1 to %d, at most one every 10s", lines, most)
	}
	if !strings.Contains(s.stderr.String(), `remote=127.0.0.1 limit=max_connections_per_client max=4`) {
		t.Errorf("no warning names the address and the bound:\n%s", s.stderr)
	}
	sc := getMetrics(t, metrics, "")
	if got := sc.value(t, "code_sandbox_connections_refused_total", "reason=max_connections_per_client"); got != 51 {
		t.Errorf("refusals for max_connections_per_client: %v; want 51", got)
	}
	if got := sc.value(t, "code_sandbox_connections_refused_total", "reason=max_connections"); got != 1 {
		t.Errorf("refusals for max_connections: %v; want 1", got)
	}
}

// acceptedFrom reports whether a connection to s from the address from
// gets an answer to /healthz other than a refusal.
func acceptedFrom(t *testing.T, s *httpServer, from string) bool {
	c := dialFrom(t, s, from, false)
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", s.hostPort())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusServiceUnavailable || !resp.Close
}

// runsFortyTwo runs print(6*7) in a new MCP session of s, on a
// connection of its own that it closes, and returns any error on the way
// or a result that is not 42.
func runsFortyTwo(t *testing.T, s *httpServer) error {
	ctx := testContext(t)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	c, err := client.NewStreamableHttpClient(s.base+"/mcp", transport.WithHTTPBasicClient(hc))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return err
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "conns", Version: "1"}}}); err != nil {
		return err
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: code("print(6*7)")}})
	if err != nil {
		return err
	}
	if r, err := parseResult(res); err != nil || r.isError || r.out.Stdout != "42\n" {
		return fmt.Errorf("a run of print(6*7): %q %+v, %v; want 42", r.text, r.out, err)
	}
	return nil
}

package integration

// SIGTERM to the HTTP server: it stops accepting at once, lets a call in
// flight finish within --shutdown-grace, cancels one that outlives it,
// exits 0, and leaves nothing behind (startHTTP's cleanup checks).

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// drainCall is a call to run_python_code made in the background.
type drainCall struct {
	done chan struct{}
	res  *mcp.CallToolResult
	err  error
	at   time.Time // when it returned
}

// startDrain starts s's server and a call of src on it, and returns once
// the call's sandbox has started: the call is then in flight. python has
// no pool, so the one task that starts is the call's.
func startDrain(t *testing.T, grace string, src string) (*httpServer, *drainCall) {
	t.Helper()
	path, tokens := tokenFile(t, "alice")
	w := watchStarts(t)
	s := startHTTP(t, serverSpec{
		args:   []string{"--auth-tokens", path, "--shutdown-grace", grace},
		config: "[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n",
	})
	c := s.connect(t, tokens["alice"])
	call := &drainCall{done: make(chan struct{})}
	go func() {
		defer close(call.done)
		call.res, call.err = c.CallTool(testContext(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: code(src)}})
		call.at = time.Now()
	}()
	if !waitFor(30*time.Second, func() bool { return len(w.seen()) > 0 }) {
		t.Fatal("the call's sandbox did not start within 30s")
	}
	return s, call
}

// sigterm sends SIGTERM to s and returns once the server says it is
// shutting down, with when it was sent.
func sigterm(t *testing.T, s *httpServer) time.Time {
	t.Helper()
	sent := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "shutting down; in-flight calls may finish") }) {
		t.Fatalf("no shutdown line within 10s of SIGTERM:\n%s", s.stderr)
	}
	return sent
}

// refusesNew checks that new connections to s are refused while call is
// still in flight. The server logs its shutdown line just before it
// closes its listener, so a dial at once may still get through: it waits
// up to 5 s for the refusal.
func refusesNew(t *testing.T, s *httpServer, call *drainCall) {
	t.Helper()
	addr := strings.TrimPrefix(s.base, "http://")
	var err error
	waitFor(5*time.Second, func() bool {
		var conn net.Conn
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a new connection to %s after SIGTERM: %v; want connection refused", addr, err)
	}
	if resp, err := s.client.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a new request after SIGTERM: %s; want it refused", resp.Status)
	}
	select {
	case <-call.done:
		t.Errorf("the call in flight returned before new connections were refused; the test proves nothing of the drain")
	default:
	}
}

// waitExit waits for s to exit within d, which must be status 0.
func waitExit(t *testing.T, s *httpServer, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		t.Fatalf("the server is still running %s after SIGTERM", d)
	}
	if s.exitErr != nil {
		t.Errorf("server exit: %v; want status 0", s.exitErr)
	}
	return time.Now()
}

func TestHTTPDrainLetsCallsInFlightFinish(t *testing.T) {
	s, call := startDrain(t, "30s", `import time; time.sleep(3); print("done")`)
	sent := sigterm(t, s)
	refusesNew(t, s, call)
	select {
	case <-call.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight did not return within 30s of SIGTERM")
	}
	if call.err != nil {
		t.Fatalf("the call in flight at SIGTERM: %v; want it to finish", call.err)
	}
	if r := decodeResult(t, call.res); r.isError || r.out.Stdout != "done\n" {
		t.Errorf("the call in flight at SIGTERM: %q %+v; want done", r.text, r.out)
	}
	exit := waitExit(t, s, 30*time.Second)
	if exit.Before(call.at) {
		t.Errorf("the server exited before the call in flight returned")
	}
	t.Logf("SIGTERM to exit: %s", exit.Sub(sent).Round(time.Millisecond))
}

func TestHTTPDrainCancelsCallsPastTheGrace(t *testing.T) {
	const grace = 2 * time.Second
	s, call := startDrain(t, grace.String(), `import time; time.sleep(25); print("done")`)
	sent := sigterm(t, s)
	refusesNew(t, s, call)
	select {
	case <-call.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call past the grace did not end within 20s of SIGTERM")
	}
	if took := call.at.Sub(sent); took < grace {
		t.Errorf("the call ended %s after SIGTERM; want it let run for the grace, %s", took, grace)
	}
	if call.err == nil {
		if r := decodeResult(t, call.res); strings.Contains(r.text, "done") {
			t.Errorf("the call past the grace finished: %q; want it cancelled", r.text)
		}
	}
	exit := waitExit(t, s, 30*time.Second)
	if took := exit.Sub(sent); took < grace || took > grace+20*time.Second {
		t.Errorf("SIGTERM to exit: %s; want between the grace (%s) and 20s more", took, grace)
	}
	if !strings.Contains(s.stderr.String(), "calls still in flight after the grace period are cancelled") {
		t.Errorf("the server did not say it cancelled the call past the grace:\n%s", s.stderr)
	}
}

package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread inside the namespace mounted at path.
func inNetns(t *testing.T, path string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(path)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func mountedAt(path string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// A sandbox's namespace holds its loopback, up, and the listener, which
// the server serves from outside; nothing else is reachable from inside,
// and nothing is left once it is closed.
func TestNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	n, err := NewNetns(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	if !mountedAt(n.Path) {
		t.Errorf("no mount at %s", n.Path)
	}
	addr := n.Listener.Addr().String()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := n.Listener.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	inNetns(t, n.Path, func() {
		ifs, err := net.Interfaces()
		if err != nil {
			t.Error(err)
			return
		}
		if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
			t.Errorf("interfaces %+v; want lo alone, up", ifs)
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Errorf("dial the listener from inside: %v", err)
			return
		}
		c.Write([]byte("x"))
		c.Close()
		// No route out: these fail at once, before any packet exists.
		// (192.0.2.1 is a documentation address.)
		if _, err := net.DialTimeout("tcp", "192.0.2.1:80", time.Second); !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("TCP out: got %v; want ENETUNREACH", err)
		}
		u, err := net.Dial("udp", "192.0.2.1:53")
		if err == nil {
			_, err = u.Write([]byte("q"))
			u.Close()
		}
		if !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("UDP out: got %v; want ENETUNREACH", err)
		}
	})
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Error("the listener accepted nothing from inside")
	}

	// From the server's own namespace the same address is not this
	// listener.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Error("the listener accepted a connection from the host's namespace")
	case <-time.After(200 * time.Millisecond):
	}

	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if mountedAt(n.Path) {
		t.Errorf("%s is still mounted", n.Path)
	}
	if _, err := os.Stat(n.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: got %v; want it gone", n.Path, err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// The whole way out: a client inside the namespace, with the proxy as
// its HTTP proxy, reaches an allowed host and nothing else.
func TestProxyFromInsideANetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.Host)
	}))
	defer up.Close()
	n, err := NewNetns(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pol, err := NewPolicy([]string{"api.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{
		Policy:  pol,
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{upstreamAddr}, nil },
		Dial: func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", up.Listener.Addr().String())
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, n.Listener) }()
	defer func() {
		n.Listener.Close()
		cancel()
		<-done
	}()
	proxy := n.Listener.Addr().String()
	// By hand, on this thread: a Transport would dial from threads of
	// its own, outside the namespace.
	get := func(host string) (int, string, error) {
		c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
		if err != nil {
			return 0, "", err
		}
		defer c.Close()
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	inNetns(t, n.Path, func() {
		status, body, err := get("api.test")
		if err != nil || status != 200 || body != "hello api.test" {
			t.Errorf("allowed host from inside: got %d %q %v; want 200 %q", status, body, err, "hello api.test")
		}
		status, body, err = get("other.test")
		if err != nil || status != http.StatusForbidden {
			t.Errorf("denied host from inside: got %d %q %v; want 403", status, body, err)
		}
		// Around the proxy, straight to the upstream's address: nothing
		// listens there in this namespace.
		if c, err := net.DialTimeout("tcp", up.Listener.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Error("the host's loopback upstream was reachable from inside, around the proxy")
		}
	})
}

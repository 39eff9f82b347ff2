package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// listenNotify is systemd's side: a unixgram socket at a new path (or, if
// abstract, a new abstract name), and the env that names it.
func listenNotify(t *testing.T, abstract bool) (*net.UnixConn, lookupFunc) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdnotify-") // short: a socket path is 107 bytes at most
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	name := filepath.Join(dir, "notify")
	if abstract {
		name = fmt.Sprintf("@code-sandbox-mcp-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, func(k string) (string, bool) {
		if k == "NOTIFY_SOCKET" {
			return name, true
		}
		return "", false
	}
}

// next reads the next datagram, within 10 s.
func next(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read the notification socket: %v", err)
	}
	return string(buf[:n])
}

// fastRetry makes the readiness watch check again at once, for a test.
func fastRetry(t *testing.T) {
	old := readyRetry
	readyRetry = time.Millisecond
	t.Cleanup(func() { readyRetry = old })
}

func TestNotifySystemd(t *testing.T) {
	fastRetry(t)
	for _, abstract := range []bool{false, true} {
		t.Run(fmt.Sprintf("abstract=%v", abstract), func(t *testing.T) {
			sock, env := listenNotify(t, abstract)
			// Not ready twice (containerd down, then an image), then ready.
			var calls atomic.Int32
			ready := func(context.Context) error {
				switch calls.Add(1) {
				case 1:
					return errNotConnected
				case 2, 3:
					return errors.New("python: not prepared yet")
				}
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := notifySystemd(ctx, env, ready, slog.New(slog.DiscardHandler))
			defer stop()
			for _, want := range []string{
				"STATUS=not ready: containerd is not answering",
				// The third check fails for the same reason: not said again.
				"STATUS=not ready: an image is not ready",
				"READY=1\nSTATUS=ready",
			} {
				if got := next(t, sock); got != want {
					t.Fatalf("got %q; want %q", got, want)
				}
			}
			if n := calls.Load(); n != 4 {
				t.Errorf("ready was checked %d times; want 4 (none after it passed)", n)
			}
			cancel()
			if got, want := next(t, sock), "STOPPING=1\nSTATUS=shutting down"; got != want {
				t.Errorf("at shutdown: got %q; want %q", got, want)
			}
			stop()
		})
	}
}

// stop before ready passes (the server failed to serve) says STOPPING=1,
// never READY=1, and returns.
func TestNotifySystemdStopBeforeReady(t *testing.T) {
	fastRetry(t)
	sock, env := listenNotify(t, false)
	stop := notifySystemd(context.Background(), env, func(context.Context) error { return errNotConnected }, slog.New(slog.DiscardHandler))
	if got, want := next(t, sock), "STATUS=not ready: containerd is not answering"; got != want {
		t.Fatalf("got %q; want %q", got, want)
	}
	stop()
	if got, want := next(t, sock), "STOPPING=1\nSTATUS=shutting down"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// Without NOTIFY_SOCKET nothing is checked nor sent.
func TestNotifySystemdUnset(t *testing.T) {
	checked := false
	stop := notifySystemd(context.Background(), func(string) (string, bool) { return "", false },
		func(context.Context) error { checked = true; return nil }, slog.New(slog.DiscardHandler))
	stop()
	if checked {
		t.Error("readiness was checked without NOTIFY_SOCKET")
	}
	if err := (*sdNotifier)(nil).send("READY=1"); err != nil {
		t.Errorf("a nil notifier's send: %v; want nil", err)
	}
}

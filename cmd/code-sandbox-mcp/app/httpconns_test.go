package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/internal/logtest"
)

func TestConnBoundsOf(t *testing.T) {
	b := connBoundsOf(config.Default().HTTP)
	if want := (connBounds{read: time.Minute, idle: 30 * time.Second, write: time.Minute, max: 256, perClient: 64}); b != want {
		t.Errorf("the default bounds: %+v; want %+v", b, want)
	}
	if d := b.readHeaderTimeout(); d != readHeaderTimeout {
		t.Errorf("headers may take %s with read_timeout 1m; want %s", d, readHeaderTimeout)
	}
	if d := (connBounds{read: 3 * time.Second}).readHeaderTimeout(); d != 3*time.Second {
		t.Errorf("headers may take %s with read_timeout 3s; want 3s, the whole request's bound", d)
	}
	if d := (connBounds{}).readHeaderTimeout(); d != readHeaderTimeout {
		t.Errorf("headers may take %s without bounds; want %s", d, readHeaderTimeout)
	}

	cfg, err := config.Parse("[http]\nread_timeout = \"3s\"\nwrite_timeout = \"2s\"\nidle_timeout = \"1s\"\nmax_connections = 8\nmax_connections_per_client = 4\n", "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := connBounds{read: 3 * time.Second, write: 2 * time.Second, idle: time.Second, max: 8, perClient: 4}
	hs, err := resolveHTTP(HTTPFlags{Addr: "127.0.0.1:0"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := newTelemetry(HTTPFlags{MetricsAddr: "127.0.0.1:0"}, cfg, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if hs.conns != want || tel.conns != want {
		t.Errorf("the bounds of /mcp's listener %+v, of the metrics' %+v; want both %+v", hs.conns, tel.conns, want)
	}
}

// Both listeners, /mcp's and the metrics', close an idle connection after
// idle_timeout and answer a connection past max_connections_per_client
// 503, counted.
func TestListenersBoundConnections(t *testing.T) {
	bounds := connBounds{idle: 300 * time.Millisecond, perClient: 1}
	for _, name := range []string{"mcp", "metrics"} {
		t.Run(name, func(t *testing.T) {
			logs := &logtest.Buffer{}
			logger := slog.New(slog.NewTextHandler(logs, nil))
			cfg := config.Default()
			tel, err := newTelemetry(HTTPFlags{}, cfg, "dev")
			if err != nil {
				t.Fatal(err)
			}
			var addr string
			if name == "mcp" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr = ln.Addr().String()
				ctx, cancel := context.WithCancel(t.Context())
				served := make(chan error, 1)
				go func() {
					served <- serveListener(ctx, ln, server.NewMCPServer("test", "1"), func(context.Context) error { return nil },
						httpSettings{loopback: true, tel: tel, conns: bounds}, logger)
				}()
				t.Cleanup(func() {
					cancel()
					if err := <-served; err != nil {
						t.Error(err)
					}
				})
			} else {
				tel.addr, tel.loopback, tel.conns = "127.0.0.1:0", true, bounds
				stop, err := tel.serve(logger)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
				m := regexp.MustCompile(`msg="serving metrics" listen=(\S+)`).FindStringSubmatch(logs.String())
				if m == nil {
					t.Fatalf("no listen address in the log: %s", logs)
				}
				addr = m[1]
			}
			path := map[string]string{"mcp": "/healthz", "metrics": "/metrics"}[name]

			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
			r := bufio.NewReader(c)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("GET %s: %s, close %v; want 200 on a kept-alive connection", path, resp.Status, resp.Close)
			}

			// The connection is open: a second from the same address is
			// refused at once.
			second, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			second.SetReadDeadline(time.Now().Add(5 * time.Second))
			refusal, err := io.ReadAll(second)
			if err != nil || !strings.HasPrefix(string(refusal), "HTTP/1.1 503 Service Unavailable\r\n") {
				t.Errorf("a second connection with max_connections_per_client = 1: %q, %v; want 503 and closed", refusal, err)
			}
			if !strings.Contains(logs.String(), `msg="refused a connection: too many open" listen=`+addr+` remote=127.0.0.1 limit=max_connections_per_client max=1`) {
				t.Errorf("no warning of the refusal in the log:\n%s", logs)
			}
			if got := scrapeValue(t, tel, `code_sandbox_connections_refused_total{reason="max_connections_per_client"}`); got != "1" {
				t.Errorf("refusals counted: %s; want 1", got)
			}

			start := time.Now()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if b, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("the idle connection: read %q, %v; want EOF: the server closes it after idle_timeout", b, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the idle connection was closed after %s; want about 300ms", d)
			}
		})
	}
}

// scrapeValue returns the value of series in tel's metrics.
func scrapeValue(t *testing.T, tel *telemetry, series string) string {
	t.Helper()
	_, body := getPath(t, tel.m.Handler(), "/metrics", "")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in the metrics", series)
	return ""
}

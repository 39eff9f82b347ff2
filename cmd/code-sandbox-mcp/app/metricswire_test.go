package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/config"
)

// scraperTokens writes a token file with one client, prometheus, and
// returns its path and token.
func scraperTokens(t *testing.T) (path, token string) {
	t.Helper()
	token = httpauth.NewToken()
	path = filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(httpauth.Line("prometheus", token)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, token
}

func TestNewTelemetry(t *testing.T) {
	tokens, _ := scraperTokens(t)
	for _, tc := range []struct {
		name     string
		f        HTTPFlags
		cfgAddr  string
		wantAddr string
		wantErr  string // a part of the error; empty for none
	}{
		{"none", HTTPFlags{}, "", "", ""},
		{"none: tokens do not matter", HTTPFlags{AuthTokens: "/nonexistent"}, "", "", ""},
		{"loopback without tokens", HTTPFlags{MetricsAddr: "127.0.0.1:0"}, "", "127.0.0.1:0", ""},
		{"from the configuration", HTTPFlags{}, "[::1]:9464", "[::1]:9464", ""},
		{"the flag over the configuration", HTTPFlags{MetricsAddr: "localhost:1"}, "[::1]:9464", "localhost:1", ""},
		{"beyond loopback without tokens", HTTPFlags{MetricsAddr: ":9464"}, "", "", "without --auth-tokens"},
		{"beyond loopback with tokens", HTTPFlags{MetricsAddr: "0.0.0.0:9464", AuthTokens: tokens}, "", "0.0.0.0:9464", ""},
		{"a token file that is not there", HTTPFlags{MetricsAddr: "127.0.0.1:0", AuthTokens: "/nonexistent"}, "", "", "nonexistent"},
		{"no port", HTTPFlags{MetricsAddr: "127.0.0.1"}, "", "", "HOST:PORT"},
		{"a bad origin", HTTPFlags{MetricsAddr: "127.0.0.1:0", Origins: []string{"a.example"}, OriginsSet: true}, "", "", "--allowed-origins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.HTTP.MetricsAddr = tc.cfgAddr
			tel, err := newTelemetry(tc.f, cfg, "dev")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("newTelemetry: %v; want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("newTelemetry: %v; want an error with %q", err, tc.wantErr)
			case err == nil && tel.addr != tc.wantAddr:
				t.Errorf("addr %q; want %q", tel.addr, tc.wantAddr)
			}
		})
	}
}

// get sends GET path to h with token (none if empty) and returns the
// status and body.
func getPath(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func TestMetricsBesideMCP(t *testing.T) {
	path, token := scraperTokens(t)
	tel, err := newTelemetry(HTTPFlags{}, config.Default(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := resolveHTTP(HTTPFlags{Addr: "127.0.0.1:0", AuthTokens: path}, config.Default())
	if err != nil {
		t.Fatal(err)
	}
	hs.tel = tel
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcp") })
	h := httpHandler(mcp, hs, func(context.Context) error { return nil }, slog.New(slog.DiscardHandler))

	if code, _ := getPath(t, h, "/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d; want 401", code)
	}
	if code, _ := getPath(t, h, "/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a wrong token: %d; want 401", code)
	}
	if code, _ := getPath(t, h, "/mcp", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /mcp without a token: %d; want 401", code)
	}
	code, body := getPath(t, h, "/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics with the token: %d %q; want 200", code, body)
	}
	for _, line := range []string{
		`code_sandbox_auth_failures_total{reason="missing"} 2`,
		`code_sandbox_auth_failures_total{reason="invalid"} 1`,
		`code_sandbox_runs_total{language="python",outcome="ok"} 0`,
		`code_sandbox_sessions_open 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", "https://evil.example")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("GET /metrics from a foreign origin: %d; want 403", rec.Code)
	}
}

func TestMetricsNotBesideMCPWithTheirOwnListener(t *testing.T) {
	tel, err := newTelemetry(HTTPFlags{MetricsAddr: "127.0.0.1:0"}, config.Default(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpSettings{loopback: true, tel: tel}
	h := httpHandler(http.NotFoundHandler(), hs, func(context.Context) error { return nil }, slog.New(slog.DiscardHandler))
	if code, body := getPath(t, h, "/metrics", ""); code != http.StatusNotFound {
		t.Errorf("GET /metrics beside /mcp with --metrics-addr: %d %q; want 404", code, body)
	}
}

func TestMetricsListener(t *testing.T) {
	path, token := scraperTokens(t)
	tel, err := newTelemetry(HTTPFlags{MetricsAddr: "127.0.0.1:0", AuthTokens: path}, config.Default(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	stop, err := tel.serve(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="serving metrics" listen=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		stop()
		t.Fatalf("no listen address in the log: %s", logs.String())
	}
	scrape := func(token string) int {
		req, _ := http.NewRequest("GET", "http://"+m[1]+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("a scrape without the token: %d; want 401", code)
	}
	if code := scrape(token); code != http.StatusOK {
		t.Errorf("a scrape with the token: %d; want 200", code)
	}
	stop()
	if _, err := http.Get("http://" + m[1] + "/metrics"); err == nil {
		t.Errorf("the listener still answers after stop")
	}
}

// The listener of its own refuses, on loopback, a Host that is not
// loopback (DNS rebinding), as /metrics beside /mcp does.
func TestMetricsListenerChecksHost(t *testing.T) {
	tel, err := newTelemetry(HTTPFlags{MetricsAddr: "127.0.0.1:0"}, config.Default(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	stop, err := tel.serve(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m := regexp.MustCompile(`msg="serving metrics" listen=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no listen address in the log: %s", logs.String())
	}
	for host, want := range map[string]int{m[1]: http.StatusOK, "localhost": http.StatusOK, "evil.example:" + strings.Split(m[1], ":")[1]: http.StatusForbidden} {
		req, _ := http.NewRequest("GET", "http://"+m[1]+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a scrape with Host %s: %d; want %d", host, resp.StatusCode, want)
		}
	}
}

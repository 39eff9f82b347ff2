package httpauth

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckOrigin(t *testing.T) {
	allowed := []string{"https://app.example.com", "HTTP://Localhost:8080", "http://[::1]:80", "not an origin"}
	for _, tc := range []struct {
		name   string
		origin []string
		pass   bool
	}{
		{"absent", nil, true},
		{"allowed", []string{"https://app.example.com"}, true},
		{"case", []string{"HTTPS://APP.Example.COM"}, true},
		{"default port written", []string{"https://app.example.com:443"}, true},
		{"default port left out", []string{"http://[::1]"}, true},
		{"port", []string{"http://localhost:8080"}, true},
		{"other port", []string{"http://localhost:8081"}, false},
		{"port missing", []string{"http://localhost"}, false},
		{"other scheme", []string{"http://app.example.com"}, false},
		{"https default is not http default", []string{"https://[::1]"}, false},
		{"other host", []string{"https://evil.example"}, false},
		{"suffix", []string{"https://app.example.com.evil.example"}, false},
		{"null", []string{"null"}, false},
		{"path", []string{"https://app.example.com/x"}, false},
		{"user", []string{"https://u@app.example.com"}, false},
		{"empty", []string{""}, false},
		{"two", []string{"https://app.example.com", "https://evil.example"}, false},
		{"unparsable allowed entry matches nothing", []string{"not an origin"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := CheckOrigin(allowed, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for _, o := range tc.origin {
				req.Header.Add("Origin", o)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if ran != tc.pass {
				t.Errorf("Origin %q: handler ran %v; want %v", tc.origin, ran, tc.pass)
			}
			if !tc.pass {
				if rec.Code != http.StatusForbidden {
					t.Errorf("status: got %d; want 403", rec.Code)
				}
				if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || !strings.HasPrefix(rec.Body.String(), "forbidden: ") {
					t.Errorf("got %s %q; want a plain-text reason", ct, rec.Body.String())
				}
			}
		})
	}
}

func TestCheckOriginNoneAllowed(t *testing.T) {
	h := CheckOrigin(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	req.Header.Set("Origin", "http://localhost:8080")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("with no allowed origins, a browser origin: got %d; want 403", rec.Code)
	}
}

func TestParseOrigin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://Example.COM", "https://example.com"},
		{"https://example.com:443", "https://example.com"},
		{"http://example.com:80", "http://example.com"},
		{"http://example.com:443", "http://example.com:443"},
		{"https://example.com:80", "https://example.com:80"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://[::1]:80", "http://[::1]"},
		{"vscode-webview://abc", "vscode-webview://abc"},
		{"http://127.0.0.1:3000", "http://127.0.0.1:3000"},
	} {
		got, err := ParseOrigin(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseOrigin(%q): got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "null", "example.com", "https://", "https://example.com/", "https://example.com?x", "https://example.com#x", "https://u:p@example.com", "https://example.com:", "https://example.com:x", "mailto:a@b"} {
		if got, err := ParseOrigin(in); err == nil {
			t.Errorf("ParseOrigin(%q): got %q; want an error", in, got)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.1.2.3:8080", true},
		{"[::1]:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{"localhost:8080", true},
		{"LocalHost:0", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"[fe80::1%eth0]:8080", false},
		{"example.com:8080", false},
		{"localhost.example.com:8080", false},
		{"myhost:8080", false}, // a name is not resolved, even one that is loopback
	} {
		got, err := LoopbackOnly(tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("LoopbackOnly(%q): got %v, %v; want %v", tc.addr, got, err, tc.want)
		}
	}
	for _, addr := range []string{"", "localhost", "127.0.0.1", "::1", "[::1"} {
		if got, err := LoopbackOnly(addr); err == nil || got {
			t.Errorf("LoopbackOnly(%q): got %v, %v; want false and an error", addr, got, err)
		}
	}
}

// The server's own origin, scheme://address:port of the loopback
// address a request reached, passes with no --allowed-origins; what a
// DNS rebinding page sends, or any other origin, does not.
func TestCheckOriginOwn(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	v4other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8080}
	v6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}
	http80 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	for _, tc := range []struct {
		name   string
		local  net.Addr // nil: not known
		tls    bool
		origin string
		pass   bool
	}{
		{"127.0.0.1", v4, false, "http://127.0.0.1:8080", true},
		{"localhost", v4, false, "http://localhost:8080", true},
		{"localhost in capitals", v4, false, "HTTP://LocalHost:8080", true},
		{"::1", v6, false, "http://[::1]:8080", true},
		{"localhost on ::1", v6, false, "http://localhost:8080", true},
		{"https with TLS", v4, true, "https://127.0.0.1:8080", true},
		{"default port", http80, false, "http://127.0.0.1", true},
		{"other port", v4, false, "http://127.0.0.1:8081", false},
		{"port missing", v4, false, "http://127.0.0.1", false},
		{"https without TLS", v4, false, "https://127.0.0.1:8080", false},
		{"http with TLS", v4, true, "http://127.0.0.1:8080", false},
		{"other loopback address", v4other, false, "http://127.0.0.1:8080", false},
		{"::1 on 127.0.0.1", v4, false, "http://[::1]:8080", false},
		{"rebinding name", v4, false, "http://evil.example:8080", false},
		{"a name under localhost", v4, false, "http://localhost.evil.example:8080", false},
		{"address beyond loopback", lan, false, "http://192.0.2.7:8080", false},
		{"localhost, listener beyond loopback", lan, false, "http://localhost:8080", false},
		{"local address not known", nil, false, "http://127.0.0.1:8080", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := CheckOrigin(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
			target := "http://127.0.0.1:8080/mcp"
			if tc.tls {
				target = "https://127.0.0.1:8080/mcp"
			}
			req := httptest.NewRequest(http.MethodPost, target, nil)
			if tc.local != nil {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tc.local))
			}
			req.Header.Set("Origin", tc.origin)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if ran != tc.pass {
				t.Errorf("Origin %q on %v (TLS %v): handler ran %v; want %v", tc.origin, tc.local, tc.tls, ran, tc.pass)
			}
			if !tc.pass && rec.Code != http.StatusForbidden {
				t.Errorf("status: got %d; want 403", rec.Code)
			}
		})
	}
}

// Through a real loopback listener, with the Host check in front as the
// server has it: what the MCP conformance suite's dns-rebinding-protection
// scenario sends, the server's own Host and Origin, is served; the
// rebinding pair, evil.example as both, is refused.
func TestCheckOriginOwnOnALoopbackListener(t *testing.T) {
	ts := httptest.NewServer(CheckHost(CheckOrigin(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))))
	defer ts.Close()
	own := strings.TrimPrefix(ts.URL, "http://")
	_, port, err := net.SplitHostPort(own)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{own, "http://" + own, http.StatusOK},
		{"localhost:" + port, "http://localhost:" + port, http.StatusOK},
		{own, "http://localhost:" + port, http.StatusOK},
		{"evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{own, "http://evil.example:" + port, http.StatusForbidden},
		{own, "http://127.0.0.1:1", http.StatusForbidden},
	} {
		req, err := http.NewRequest(http.MethodPost, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		req.Header.Set("Origin", tc.origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q, Origin %q: got %d %q; want %d", tc.host, tc.origin, resp.StatusCode, b, tc.want)
		}
	}
}

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

func TestCheckHost(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	v6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	lan := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}
	for _, tc := range []struct {
		name  string
		local net.Addr // nil: not known
		host  string
		pass  bool
	}{
		{"localhost", v4, "localhost:8080", true},
		{"localhost without a port", v4, "localhost", true},
		{"localhost in capitals", v4, "LOCALHOST:8080", true},
		{"127.0.0.1", v4, "127.0.0.1:8080", true},
		{"elsewhere in 127/8", v4, "127.1.2.3:8080", true},
		{"::1", v6, "[::1]:8080", true},
		{"::1 without a port", v6, "[::1]", true},
		{"::1 bare", v6, "::1", true},
		{"mapped 127.0.0.1", v6, "[::ffff:127.0.0.1]:8080", true},
		{"a name", v4, "evil.example:8080", false},
		{"a name without a port", v6, "evil.example", false},
		{"a name under localhost", v4, "localhost.evil.example:8080", false},
		{"a name ending in localhost", v4, "evillocalhost:8080", false},
		{"an address beyond loopback", v4, "192.0.2.7:8080", false},
		{"unspecified", v4, "0.0.0.0:8080", false},
		{"empty", v4, "", false},
		{"a name, beyond loopback", lan, "evil.example:8080", true},
		{"a name, local address not known", nil, "evil.example:8080", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := CheckHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Host = tc.host
			if tc.local != nil {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tc.local))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if ran != tc.pass {
				t.Errorf("Host %q on %v: handler ran %v; want %v", tc.host, tc.local, ran, tc.pass)
			}
			if !tc.pass {
				want := "forbidden: Host " + `"` + tc.host + `"` + " is not a loopback name; on loopback this server answers only to localhost, 127.0.0.1 and [::1]\n"
				if rec.Code != http.StatusForbidden || rec.Body.String() != want {
					t.Errorf("got %d %q; want 403 %q", rec.Code, rec.Body.String(), want)
				}
			}
		})
	}
}

// Through a real listener on loopback, which is what puts the local
// address in a request's context.
func TestCheckHostOnALoopbackListener(t *testing.T) {
	ts := httptest.NewServer(CheckHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer ts.Close()
	for host, want := range map[string]int{"": http.StatusOK, "evil.example": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusForbidden) != strings.HasPrefix(string(b), "forbidden: ") {
			t.Errorf("Host %q: got %d %q; want %d", req.Host, resp.StatusCode, b, want)
		}
	}
}

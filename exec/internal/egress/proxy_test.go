package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests' upstreams listen on loopback; the proxy is told that the
// allowed names resolve to a documentation address (198.51.100.7, public
// to the Policy), and its Dial takes that address to the upstream. So the
// Policy is the one a user would write, and no traffic leaves loopback.
var upstreamAddr = netip.MustParseAddr("198.51.100.7")

type fixture struct {
	proxy    *Proxy
	url      *url.URL
	records  chan Record
	upstream atomic.Int64 // connections the Dial made
}

// newFixture starts a Proxy on loopback whose names resolve as names
// says and whose dials to upstreamAddr go to upstream (host:port).
func newFixture(t *testing.T, allow, deny []string, names map[string]netip.Addr, upstream string, lim Limits) *fixture {
	t.Helper()
	pol, err := NewPolicy(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{records: make(chan Record, 64)}
	f.proxy = &Proxy{
		Policy: pol,
		Limits: lim,
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if a, ok := names[host]; ok {
				return []netip.Addr{a}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
		Dial: func(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
			if to.Addr() != upstreamAddr {
				return nil, fmt.Errorf("the test dials %s only, not %s", upstreamAddr, to)
			}
			f.upstream.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upstream)
		},
		Record: func(r Record) { f.records <- r },
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.proxy.Serve(ctx, l) }()
	t.Cleanup(func() {
		l.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.url = &url.URL{Scheme: "http", Host: l.Addr().String()}
	return f
}

func (f *fixture) record(t *testing.T) Record {
	t.Helper()
	select {
	case r := <-f.records:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no record of the connection")
		return Record{}
	}
}

func (f *fixture) client(tlsConf *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: tlsConf, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func TestPlainHTTP(t *testing.T) {
	var seen sync.Map
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Host+" "+r.Header.Get("Proxy-Authorization"))
		io.WriteString(w, "hello from "+r.Host)
	}))
	defer up.Close()
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr, "other.test": upstreamAddr}, up.Listener.Addr().String(), Limits{})
	c := f.client(nil)

	req, _ := http.NewRequest("GET", "http://api.test/ok", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "hello from api.test" {
		t.Errorf("allowed: got %d %q; want 200 %q", res.StatusCode, body, "hello from api.test")
	}
	if v, _ := seen.Load("/ok"); v != "api.test " {
		t.Errorf("upstream saw host and Proxy-Authorization %q; want the host and no proxy header", v)
	}
	r := f.record(t)
	if !r.Allowed || r.Host != "api.test" || r.Port != 80 || r.Method != "GET" || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("record %+v; want allowed GET api.test:80 with bytes both ways", r)
	}

	res, err = c.Get("http://other.test/no")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "not on the allow list") {
		t.Errorf("denied: got %d %q; want 403 saying why", res.StatusCode, body)
	}
	if _, ok := seen.Load("/no"); ok {
		t.Error("a denied request reached the upstream")
	}
	if r := f.record(t); r.Allowed || r.Host != "other.test" || r.Reason == "" {
		t.Errorf("record %+v; want other.test refused with a reason", r)
	}
}

// A plain request whose URL and Host header name different hosts is
// refused: the Host header is what the origin serves by.
func TestPlainHTTPHostMismatch(t *testing.T) {
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr}, "127.0.0.1:1", Limits{})
	for _, eol := range []string{"\r\n", "\n"} {
		c, err := net.Dial("tcp", f.url.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET http://api.test/ HTTP/1.1%sHost: evil.test%s%s", eol, eol, eol)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("lines ending in %q: got %d; want 403", eol, res.StatusCode)
		}
	}
	if n := f.upstream.Load(); n != 0 {
		t.Errorf("%d upstream connections; want none", n)
	}
}

func TestConnectTLS(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure hello")
	}))
	defer up.Close()
	// httptest's certificate is for example.com.
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, up.Listener.Addr().String(), Limits{})
	roots := up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	res, err := f.client(&tls.Config{RootCAs: roots}).Get("https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "secure hello" {
		t.Errorf("got %q; want %q", body, "secure hello")
	}
	if r := f.record(t); !r.Allowed || r.Method != "CONNECT" || r.Host != "example.com" || r.Port != 443 || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("record %+v; want an allowed CONNECT example.com:443 with bytes both ways", r)
	}
}

// connectRaw sends CONNECT host to the proxy and returns the connection
// and the proxy's status.
func connectRaw(t *testing.T, f *fixture, host string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, res.StatusCode
}

// A CONNECT to an allowed host whose ClientHello names another never
// reaches the upstream; nor does one that speaks no TLS.
func TestConnectMustBeTLSForItsHost(t *testing.T) {
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, "127.0.0.1:1", Limits{})

	c, _, status := connectRaw(t, f, "example.com:443")
	if status != 200 {
		t.Fatalf("CONNECT: got %d; want 200", status)
	}
	err := tls.Client(c, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true}).Handshake()
	if err == nil {
		t.Error("a handshake for another name went through")
	}
	if r := f.record(t); r.Allowed || !strings.Contains(r.Reason, `names "evil.test"`) {
		t.Errorf("record %+v; want refused for the ClientHello's name", r)
	}

	c, _, _ = connectRaw(t, f, "example.com:443")
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if r := f.record(t); r.Allowed || !strings.Contains(r.Reason, "not a TLS handshake") {
		t.Errorf("record %+v; want refused as not TLS", r)
	}
	if n := f.upstream.Load(); n != 0 {
		t.Errorf("%d upstream connections; want none", n)
	}
}

// What the Policy refuses is refused before any upstream connection: a
// name not allowed, a denied one, an allowed name that resolves to
// loopback or a private address, an address not listed, a bad request.
func TestConnectRefusals(t *testing.T) {
	names := map[string]netip.Addr{
		"example.com": upstreamAddr,
		"loop.test":   netip.MustParseAddr("127.0.0.1"),
		"inside.test": netip.MustParseAddr("10.0.0.5"),
		"deny.test":   upstreamAddr,
		"mapped.test": netip.MustParseAddr("::ffff:192.168.0.1"),
		"meta.test":   netip.MustParseAddr("169.254.169.254"),
	}
	f := newFixture(t, []string{"example.com", "*.test"}, []string{"deny.test"}, names, "127.0.0.1:1", Limits{})
	for _, tc := range []struct {
		host   string
		status int
		why    string
	}{
		{"other.example:443", 403, "not on the allow list"},
		{"deny.test:443", 403, "deny list"},
		{"loop.test:443", 403, "loopback"},
		{"inside.test:443", 403, "private"},
		{"mapped.test:443", 403, "private"},
		{"meta.test:80", 403, "link-local"},
		{"198.51.100.7:443", 403, "not on the allow list"},
		{"[::1]:443", 403, "not on the allow list"},
		{"nowhere.test:443", 502, "cannot resolve"},
		{"example.com", 400, "host:port"},
		{"example.com:0", 400, "out of range"},
	} {
		_, br, status := connectRaw(t, f, tc.host)
		body, _ := io.ReadAll(br)
		if status != tc.status || !strings.Contains(string(body), tc.why) {
			t.Errorf("CONNECT %s: got %d %q; want %d saying %q", tc.host, status, body, tc.status, tc.why)
		}
		if r := f.record(t); r.Allowed {
			t.Errorf("CONNECT %s: record %+v says allowed", tc.host, r)
		}
	}
	if n := f.upstream.Load(); n != 0 {
		t.Errorf("%d upstream connections; want none", n)
	}
}

func TestConnectionLimit(t *testing.T) {
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, "127.0.0.1:1", Limits{MaxConns: 1})
	_, _, status := connectRaw(t, f, "example.com:443") // held open, waiting for a ClientHello
	if status != 200 {
		t.Fatalf("first: got %d; want 200", status)
	}
	_, br, status := connectRaw(t, f, "example.com:443")
	body, _ := io.ReadAll(br)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "1 connections at once") {
		t.Errorf("second: got %d %q; want 503 naming the limit", status, body)
	}
}

// Past MaxPerRun connections in a run, the next are closed as soon as
// accepted, unread, and recorded with the limit's reason; NewRun starts
// the count again.
func TestRunLimit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr}, up.Listener.Addr().String(), Limits{MaxPerRun: 3})
	get := func() (int, error) {
		res, err := f.client(nil).Get("http://api.test/")
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	const why = "over the limit of 3 connections in one run (max_connections_per_run)"
	for i := range 5 {
		status, err := get()
		r := f.record(t)
		if i < 3 && (status != 200 || !r.Allowed) {
			t.Errorf("connection %d: got %d %v, record %+v; want 200", i+1, status, err, r)
		}
		if i >= 3 && (err == nil || r.Allowed || r.Reason != why || !r.Limit) {
			t.Errorf("connection %d: got %d %v, record %+v; want it closed, and recorded with %q", i+1, status, err, r, why)
		}
	}
	if n := f.upstream.Load(); n != 3 {
		t.Errorf("%d connections upstream; want 3", n)
	}
	f.proxy.NewRun()
	if status, err := get(); status != 200 {
		t.Errorf("after NewRun: got %d %v; want 200", status, err)
	}
}

// New connections are served at PerSecond, in bursts of up to a
// second's worth; those over the rate are closed as soon as accepted,
// and recorded with the limit's reason.
func TestRateLimit(t *testing.T) {
	p := &Proxy{Limits: Limits{PerSecond: 10}}
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		if why := p.admit(t0); why != "" {
			t.Fatalf("connection %d of a burst of 10: refused (%s)", i+1, why)
		}
	}
	const why = "over the rate of 10 new connections a second (connections_per_second)"
	for _, tc := range []struct {
		at    time.Duration
		admit bool
	}{
		{0, false},
		{99 * time.Millisecond, false},
		{100 * time.Millisecond, true},
		{150 * time.Millisecond, false},
		{200 * time.Millisecond, true},
		{10 * time.Second, true}, // idle long enough for a whole burst again
	} {
		if got := p.admit(t0.Add(tc.at)); (got == "") != tc.admit || (!tc.admit && got != why) {
			t.Errorf("at %s: got %q; want admitted %v (or %q)", tc.at, got, tc.admit, why)
		}
	}
	for i := range 9 {
		if why := p.admit(t0.Add(10 * time.Second)); why != "" {
			t.Fatalf("connection %d of a second burst: refused (%s)", i+2, why)
		}
	}
	if p.admit(t0.Add(10*time.Second)) == "" {
		t.Error("an 11th connection of the second burst was admitted")
	}

	// Served: the second connection within a second, at 1 a second.
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, "127.0.0.1:1", Limits{PerSecond: 1})
	if _, _, status := connectRaw(t, f, "example.com:443"); status != 200 { // held open, waiting for a ClientHello
		t.Fatalf("first: got %d; want 200", status)
	}
	second, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := second.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("second: read %d bytes, %v; want the connection closed", n, err)
	}
	if r := f.record(t); r.Allowed || r.Reason != "over the rate of 1 new connections a second (connections_per_second)" || !r.Limit {
		t.Errorf("record %+v; want the refusal for the rate", r)
	}
}

func TestByteLimit(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big)
	}))
	defer up.Close()
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr}, up.Listener.Addr().String(), Limits{MaxBytes: 64 << 10})
	res, err := f.client(nil).Get("http://api.test/big")
	var got int
	if err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got = len(b)
	}
	if got >= len(big) {
		t.Errorf("got the whole %d bytes through a limit of %d", got, 64<<10)
	}
	if r := f.record(t); !strings.Contains(r.Reason, "limit of bytes") || r.BytesDown > 64<<10 {
		t.Errorf("record %+v; want ended at the byte limit with at most 64 KiB down", r)
	}
}

// An upstream that sends nothing is dropped after the idle timeout.
func TestIdleTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent, until the test ends
		}
	}()
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr}, l.Addr().String(), Limits{IdleTimeout: 200 * time.Millisecond})
	start := time.Now()
	res, err := f.client(nil).Get("http://api.test/")
	if err == nil {
		res.Body.Close()
		t.Errorf("got %d from a silent upstream; want an error", res.StatusCode)
	}
	r := f.record(t)
	if !strings.Contains(r.Reason, "timeout") {
		t.Errorf("record %+v; want ended by the idle timeout", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s; want the idle timeout's end", took)
	}
}

// A request head past maxHead is refused before it is all read.
func TestHeadLimit(t *testing.T) {
	f := newFixture(t, []string{"api.test"}, nil, map[string]netip.Addr{"api.test": upstreamAddr}, "127.0.0.1:1", Limits{})
	c, err := net.Dial("tcp", f.url.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		fmt.Fprintf(c, "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n")
		for i := 0; i < 2000; i++ {
			if _, err := fmt.Fprintf(c, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 60)); err != nil {
				return
			}
		}
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("got %d; want 400", res.StatusCode)
	}
	if r := f.record(t); !strings.Contains(r.Reason, "over 65536 bytes") {
		t.Errorf("record %+v; want refused for its head's size", r)
	}
}

// When its context ends, Serve's connections end with it, spliced ones
// and their upstreams included, long before any idle timeout, even with
// an upstream that never answers nor closes.
func TestServeEndsWithItsContext(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	pol, err := NewPolicy([]string{"example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dialed := make(chan struct{})
	p := &Proxy{
		Policy:  pol,
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{upstreamAddr}, nil },
		Dial: func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
			defer close(dialed)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", silent.Addr().String())
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	go tls.Client(c, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true}).Handshake()
	select {
	case <-dialed:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not connect upstream")
	}
	l.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s of its context's end")
	}
}

// A secret goes to its host alone, over plain HTTP, replacing what the
// program sent; a redirect to another host does not carry it; the
// record names the header and never holds the value.
func TestSecrets(t *testing.T) {
	const value = "Bearer s3cr3t-value"
	got := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- strings.ToLower(r.Host) + " " + r.Header.Get("Authorization")
		if strings.EqualFold(r.Host, "api.test") {
			http.Redirect(w, r, "http://other.test/next", http.StatusFound)
		}
	}))
	defer up.Close()
	names := map[string]netip.Addr{"api.test": upstreamAddr, "other.test": upstreamAddr}
	f := newFixture(t, []string{"api.test", "other.test"}, nil, names, up.Listener.Addr().String(), Limits{})
	f.proxy.Secrets = map[string]Secret{"api.test": {Header: "authorization", Value: value}}
	req, _ := http.NewRequest("GET", "http://API.test/", nil)
	req.Header.Set("Authorization", "Bearer from-the-program")
	res, err := f.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	next := func() string {
		select {
		case g := <-got:
			return g
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream got no request")
			return ""
		}
	}
	if g := next(); g != "api.test "+value {
		t.Errorf("its host got %q; want the secret in place of the program's header", g)
	}
	if g := next(); g != "other.test Bearer from-the-program" && g != "other.test " {
		t.Errorf("the redirect's host got %q; want no secret", g)
	}
	for range 2 {
		r := f.record(t)
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "s3cr3t") {
			t.Errorf("record %s holds the secret", b)
		}
		if want := map[string]string{"api.test": "Authorization", "other.test": ""}[r.Host]; r.Secret != want {
			t.Errorf("record for %s names header %q; want %q", r.Host, r.Secret, want)
		}
	}
}

// A download through CONNECT that outlasts the idle timeout, while its
// client sends nothing, is not idle: it goes on to its end.
func TestLongDownloadIsNotIdle(t *testing.T) {
	const chunks = 15
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range chunks {
			select {
			case <-r.Context().Done():
				return // the client's side closed
			case <-time.After(100 * time.Millisecond):
			}
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, up.Listener.Addr().String(), Limits{IdleTimeout: 600 * time.Millisecond})
	roots := up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	res, err := f.client(&tls.Config{RootCAs: roots}).Get("https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if n := strings.Count(string(body), "chunk "); n != chunks || err != nil {
		t.Errorf("got %d of %d chunks (%v) over %d ms with an idle timeout of 600 ms", n, chunks, err, chunks*100)
	}
}

// Pending counts the connections made and not yet accepted: those a run's
// end waits for, so that each is recorded.
func TestPending(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := &Proxy{listener: l}
	if n := p.Pending(); n != 0 {
		t.Errorf("pending before any connection: %d", n)
	}
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if n := p.Pending(); n != 3 {
		t.Errorf("pending after 3 connections: %d; want 3", n)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := p.Pending(); n != 2 {
		t.Errorf("pending after 1 of 3 accepted: %d; want 2", n)
	}
	if n := (&Proxy{}).Pending(); n != 0 {
		t.Errorf("pending without a listener: %d; want 0", n)
	}
}

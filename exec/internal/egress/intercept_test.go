package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// interceptFixture is a proxy that intercepts example.com (httptest's
// certificate's name), whose upstream echoes the host and the
// Authorization header it got, and the pool that trusts the proxy's CA.
func interceptFixture(t *testing.T, trustUpstream bool) (*fixture, *x509.CertPool) {
	t.Helper()
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Host, r.Header.Get("Authorization"))
	}))
	t.Cleanup(up.Close)
	f := newFixture(t, []string{"example.com"}, nil, map[string]netip.Addr{"example.com": upstreamAddr}, up.Listener.Addr().String(), Limits{})
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	f.proxy.CA = ca
	f.proxy.Intercept = map[string]bool{"example.com": true}
	f.proxy.Secrets = map[string]Secret{"example.com": {Header: "Authorization", Value: "Bearer s3cr3t"}}
	f.proxy.UpstreamRoots = x509.NewCertPool()
	if trustUpstream {
		f.proxy.UpstreamRoots = up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	return f, pool
}

// An intercepted host's HTTPS requests get its secret, each of them on a
// kept-alive connection, and the client sees the proxy's certificate.
func TestInterceptAddsTheSecret(t *testing.T) {
	f, pool := interceptFixture(t, true)
	tr := &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 2 {
		req, _ := http.NewRequest("GET", "https://example.com/", nil)
		req.Header.Set("Authorization", "Bearer from-the-program")
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(body) != "example.com Bearer s3cr3t" {
			t.Errorf("request %d: the upstream saw %q; want the secret in place of the program's header", i, body)
		}
		if res.TLS == nil || res.TLS.PeerCertificates[0].Issuer.CommonName == "" || !strings.HasPrefix(res.TLS.PeerCertificates[0].Issuer.CommonName, "code-sandbox-mcp proxy CA") {
			t.Errorf("request %d: the client saw a certificate not issued by the proxy's CA", i)
		}
	}
	tr.CloseIdleConnections()
	if r := f.record(t); !r.Allowed || r.Method != "CONNECT" || r.Secret != "Authorization" || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("record %+v; want an allowed CONNECT that set Authorization, with bytes both ways", r)
	}
	if f.upstream.Load() != 1 {
		t.Errorf("%d upstream connections; want 1 for both requests", f.upstream.Load())
	}
}

// A client that does not trust the proxy's CA fails its handshake; one
// that does gets 502 from an upstream whose certificate the proxy does
// not trust; a request inside the TLS that names another host gets 403.
func TestInterceptRefusals(t *testing.T) {
	f, pool := interceptFixture(t, true)
	if _, err := f.client(&tls.Config{RootCAs: x509.NewCertPool()}).Get("https://example.com/"); err == nil {
		t.Error("a client that trusts only the upstream's roots completed a handshake with the proxy")
	}
	f.record(t)

	untrusted, upool := interceptFixture(t, false)
	res, err := untrusted.client(&tls.Config{RootCAs: upool}).Get("https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d from an untrusted upstream; want 502", res.StatusCode)
	}
	if r := untrusted.record(t); !strings.Contains(r.Reason, "certificate") {
		t.Errorf("record %+v; want the upstream's certificate named in the reason", r)
	}

	c, _, status := connectRaw(t, f, "example.com:443")
	if status != http.StatusOK {
		t.Fatalf("CONNECT: %d", status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: pool})
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.example\r\n\r\n")
	res, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a request for another host inside the TLS got %d; want 403", res.StatusCode)
	}
}

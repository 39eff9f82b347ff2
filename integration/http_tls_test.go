package integration

// HTTPS: the binary with --tls-cert and --tls-key, a certificate for
// 127.0.0.1 signed by a CA the test makes, and clients that trust that CA
// only, or nothing.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// testCA is a certificate authority of one test, and a server
// certificate for 127.0.0.1 it signed, as PEM files.
type testCA struct {
	pool              *x509.CertPool // the CA alone
	certFile, keyFile string         // the server's
	// serverName, if set, is the name clients check the server's
	// certificate for, rather than the address they dial.
	serverName string
}

// newTestCA makes an ECDSA CA and a server certificate for 127.0.0.1 in
// t.TempDir.
func newTestCA(t *testing.T) *testCA {
	t.Helper()
	caDER, cert := issueCert(t, "127.0.0.1", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &testCA{pool: x509.NewCertPool(), certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server.key")}
	c.pool.AddCert(ca)
	if err := os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// issueCert makes an ECDSA CA, valid for an hour, and a server
// certificate it signs for names and ips, with common name cn; it returns
// the CA's DER and the certificate with its key.
func issueCert(t *testing.T, cn string, names []string, ips []net.IP) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "code-sandbox-mcp test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return caDER, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// client returns an HTTP client that trusts the CA and nothing else.
func (c *testCA) client() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.pool, ServerName: c.serverName, MinVersion: tls.VersionTLS12}}}
}

func TestHTTPTLS(t *testing.T) {
	ca := newTestCA(t)
	path, tokens := tokenFile(t, "alice")
	s := startHTTPWith(t, serverSpec{args: []string{"--auth-tokens", path}}, httpOptions{tls: ca})
	if !strings.HasPrefix(s.base, "https://") {
		t.Fatalf("base %q; want https", s.base)
	}
	if !strings.Contains(s.stderr.String(), "tls=true") {
		t.Errorf("the listen line does not say tls=true:\n%s", s.stderr)
	}

	t.Run("a client that trusts the CA runs a program", func(t *testing.T) {
		c := s.connect(t, tokens["alice"])
		res, err := c.CallTool(testContext(t), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: code("print('hello over TLS')")}})
		if err != nil {
			t.Fatal(err)
		}
		if r := decodeResult(t, res); r.isError || r.out.Stdout != "hello over TLS\n" {
			t.Errorf("run over HTTPS: %q %+v; want hello over TLS", r.text, r.out)
		}
	})

	t.Run("a client without the CA fails the handshake", func(t *testing.T) {
		// The system roots, which do not hold the test CA.
		plain := &http.Client{Transport: &http.Transport{}}
		resp, err := plain.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET /healthz without the CA: %s; want a handshake failure", resp.Status)
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("GET /healthz without the CA: %v; want x509: certificate signed by unknown authority", err)
		}
		// mcp-go's client, the same way.
		c, err := client.NewStreamableHttpClient(s.base+"/mcp", transport.WithHTTPBasicClient(plain),
			transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokens["alice"]}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := testContext(t)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "no-ca", Version: "1"}}})
		if err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("initialize without the CA: %v; want x509: certificate signed by unknown authority", err)
		}
	})

	t.Run("plain HTTP to the TLS port fails", func(t *testing.T) {
		plainURL := "http://" + strings.TrimPrefix(s.base, "https://")
		resp, err := (&http.Client{}).Get(plainURL + "/healthz")
		if err != nil {
			return // refused outright: fine
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// Go's TLS server answers plain HTTP with a 400 and closes.
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "ok") {
			t.Errorf("plain HTTP to the TLS port: %s %q; want 400 (an HTTP request to an HTTPS server)", resp.Status, b)
		}
	})
}

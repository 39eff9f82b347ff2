package egress

import (
	"crypto/tls"
	"net"
	"testing"
)

// clientHello returns the first TLS record crypto/tls sends for conf.
func clientHello(t *testing.T, conf *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go tls.Client(b, conf).Handshake()
	rec, _, err := readClientHello(a)
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestReadClientHello(t *testing.T) {
	for _, name := range []string{"api.example.com", ""} {
		rec := clientHello(t, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		got, err := helloServerName(rec[5:])
		if err != nil || got != name {
			t.Errorf("ServerName %q: got %q, %v", name, got, err)
		}
	}
}

// Every truncation of a real ClientHello, and a few bytes changed, give
// an error or a name, never a panic; a cut one is never read as whole.
func TestHelloServerNameMalformed(t *testing.T) {
	rec := clientHello(t, &tls.Config{ServerName: "api.example.com"})
	msg := rec[5:]
	for n := 0; n < len(msg); n++ {
		if _, err := helloServerName(msg[:n]); err == nil {
			t.Errorf("a ClientHello cut to %d of %d bytes parsed", n, len(msg))
		}
	}
	for i := range msg {
		b := append([]byte(nil), msg...)
		b[i] ^= 0xff
		helloServerName(b)
	}
}

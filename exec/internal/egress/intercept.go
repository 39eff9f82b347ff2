package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// intercept serves a CONNECT to a host whose TLS the proxy terminates
// (Proxy.Intercept): hello is the client's ClientHello, already read
// from br and checked to name the host. The proxy completes the client's
// handshake with a certificate its CA issues for the host, connects to
// the host over TLS verified against UpstreamRoots, and relays HTTP/1.1
// requests one at a time, each of which must name the host and gets the
// host's secret, as a plain-HTTP request does.
func (p *Proxy) intercept(ctx context.Context, c net.Conn, br *bufio.Reader, hello []byte, to netip.AddrPort, rec *Record) error {
	leaf, err := p.CA.Leaf(rec.Host)
	if err != nil {
		return err
	}
	// Read as the handshake goes: the ClientHello already read, then what
	// br holds, then the connection; each read and write restarts the
	// idle timeout.
	client := tls.Server(&idleConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), br), idle: p.idle()}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, p.connectTimeout())
	err = client.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the sandbox's TLS handshake with the proxy: %w", err)
	}
	up, err := p.dial(ctx, to)
	if err != nil {
		writeStatus(client, http.StatusBadGateway, fmt.Sprintf("connect to %s: %v", to, err))
		return fmt.Errorf("connect to %s: %w", to, err)
	}
	defer closeWith(ctx, up)()
	server := tls.Client(&idleConn{Conn: up, r: up, idle: p.idle()}, &tls.Config{
		ServerName: rec.Host,
		RootCAs:    p.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel = context.WithTimeout(ctx, p.connectTimeout())
	err = server.HandshakeContext(hctx)
	cancel()
	if err != nil {
		writeStatus(client, http.StatusBadGateway, fmt.Sprintf("TLS with %s: %v", rec.Host, err))
		return fmt.Errorf("TLS with %s: %w", rec.Host, err)
	}
	head := &headReader{r: client}
	cr, ur := bufio.NewReader(head), bufio.NewReader(server)
	for {
		head.left, head.seen = maxHead, bytes.Buffer{}
		req, err := http.ReadRequest(cr)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the client is done
			}
			return err
		}
		head.left = -1
		if h := hostOnly(req.Host); !strings.EqualFold(strings.TrimSuffix(h, "."), rec.Host) {
			err := fmt.Errorf("a request inside the TLS for %s names the host %q: %w", rec.Host, req.Host, ErrDenied)
			writeStatus(client, http.StatusForbidden, err.Error())
			return err
		}
		dropHopHeaders(req.Header)
		if sec, ok := p.Secrets[rec.Host]; ok && sec.Header != "" {
			req.Header.Set(sec.Header, sec.Value)
			rec.Secret = http.CanonicalHeaderKey(sec.Header)
		}
		req.RequestURI = ""
		if err := req.Write(&countingWriter{w: server, p: p, n: &rec.BytesUp}); err != nil {
			return err
		}
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return fmt.Errorf("%s switched protocols, which the proxy does not carry: %w", rec.Host, ErrDenied)
		}
		dropHopHeaders(resp.Header)
		err = resp.Write(&countingWriter{w: client, p: p, n: &rec.BytesDown})
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return err
		}
	}
}

// hostOnly is the host of a Host header, without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// dropHopHeaders removes the headers that concern one hop: those of
// hopHeaders, and those the Connection header names.
func dropHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// idleConn is a connection whose every read and write must move within
// idle; it reads from r, which may hold bytes read from it already.
type idleConn struct {
	net.Conn
	r    io.Reader
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.r.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}

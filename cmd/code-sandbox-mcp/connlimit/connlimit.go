// Package connlimit bounds what clients' connections can hold of an
// HTTP server: how many may be open at once, in total and from one
// remote address (Listener), and how long one write of a response may
// wait for a client that does not read it (PerWrite). It must not know
// MCP, flags or the configuration file: its caller gives the numbers.
package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The reasons a connection is refused, for Config.Refused and the log:
// a closed set, named after the settings a server's operator would raise.
const (
	// ReasonTotal: Config.Max connections were open, of all clients.
	ReasonTotal = "max_connections"
	// ReasonPerClient: Config.PerClient connections were open from the
	// connection's remote address.
	ReasonPerClient = "max_connections_per_client"
)

const (
	// logEvery is the least time between two log lines of refusals: a
	// flood of connections logs a line at its start and then one every
	// logEvery, each with the count refused since the line before.
	logEvery = 10 * time.Second
	// replyWait bounds the write of a refusal's answer. It goes to a
	// socket just accepted, whose send buffer is empty, so it never waits
	// in practice; the bound is there so that a refusal never holds the
	// accept loop.
	replyWait = 100 * time.Millisecond
)

// Config is what a Listener allows.
type Config struct {
	// Max bounds the connections open at once, all remote addresses
	// together; 0 is no bound.
	Max int
	// PerClient bounds the connections open at once from one remote IP
	// address; 0 is no bound.
	PerClient int
	// PlainHTTP says the listener serves HTTP without TLS: a refused
	// connection is then answered "503 Service Unavailable" with
	// "Connection: close" and a short reason before it is closed. Over
	// TLS leave it unset: the client expects a handshake, and a refused
	// connection is closed without a word.
	PlainHTTP bool
	// Refused, if set, is told of each refused connection, with its
	// reason (ReasonTotal or ReasonPerClient), to count it.
	Refused func(reason string)
	// Logger, if set, warns of refused connections with the remote
	// address, at most one line every 10 s whatever their number: the
	// first refusal of a flood, then one line every 10 s that counts the
	// refusals since the line before (refused_since_last_line).
	Logger *slog.Logger
}

// Listener is a net.Listener that refuses, at once, a connection past
// Config.Max or Config.PerClient: it closes it and accepts the next.
// Each connection it returns counts as open until its first Close, which
// every way net/http ends a connection calls: its own timeouts, Shutdown
// and Close, a handler that hijacked it.
type Listener struct {
	net.Listener
	c Config

	mu      sync.Mutex
	open    int
	perAddr map[netip.Addr]int
	// lastLog is when a refusal was last logged; unlogged counts the
	// refusals since.
	lastLog  time.Time
	unlogged int
	logEvery time.Duration
}

// New returns ln bounded by c.
func New(ln net.Listener, c Config) *Listener {
	return &Listener{Listener: ln, c: c, perAddr: map[netip.Addr]int{}, logEvery: logEvery}
}

// Accept returns the next connection within the bounds, refusing those
// past them on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteIP(c)
		reason, max := l.take(addr)
		if reason == "" {
			return &conn{Conn: c, l: l, addr: addr}, nil
		}
		l.refuse(c, addr, reason, max)
	}
}

// inUse returns how many connections the listener has returned that are
// not closed yet.
func (l *Listener) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// take counts a connection from addr as open, or returns why it may not
// be and the bound it would pass.
func (l *Listener) take(addr netip.Addr) (reason string, max int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A client past its own bound is told so, whatever the total.
	switch {
	case l.c.PerClient > 0 && l.perAddr[addr] >= l.c.PerClient:
		return ReasonPerClient, l.c.PerClient
	case l.c.Max > 0 && l.open >= l.c.Max:
		return ReasonTotal, l.c.Max
	}
	l.open++
	l.perAddr[addr]++
	return "", 0
}

// put counts a connection from addr as closed.
func (l *Listener) put(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perAddr[addr]--; l.perAddr[addr] <= 0 {
		delete(l.perAddr, addr)
	}
}

// refuse tells of c, then answers it, over plain HTTP, and closes it.
func (l *Listener) refuse(c net.Conn, addr netip.Addr, reason string, max int) {
	if l.c.Refused != nil {
		l.c.Refused(reason)
	}
	if l.c.Logger != nil {
		l.mu.Lock()
		l.unlogged++
		n, now := l.unlogged, time.Now()
		due := now.Sub(l.lastLog) >= l.logEvery
		if due {
			l.lastLog, l.unlogged = now, 0
		}
		l.mu.Unlock()
		if due {
			l.c.Logger.Warn("refused a connection: too many open", "remote", addr.String(), "limit", reason, "max", max,
				"refused_since_last_line", n)
		}
	}
	if l.c.PlainHTTP {
		_ = c.SetWriteDeadline(time.Now().Add(replyWait))
		_, _ = c.Write(refusal(reason))
	}
	_ = c.Close()
}

// refusal is the answer of a refused connection over plain HTTP: only
// what is the client's own business (the server-wide count is not).
func refusal(reason string) []byte {
	body := "the server has too many connections open: retry later\n"
	if reason == ReasonPerClient {
		body = "too many connections open from your address: close one, or reuse one, and retry\n"
	}
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"\r\n" + body)
}

// remoteIP is c's remote IP address, IPv4 in IPv6 unmapped and without
// a zone; the zero Addr for a connection that has none (all such count
// as one address).
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}

// conn is a connection the Listener counts as open until its first
// Close.
type conn struct {
	net.Conn
	l       *Listener
	addr    netip.Addr
	release sync.Once
}

// Close closes the connection and, the first time, counts it closed.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release.Do(func() { c.l.put(c.addr) })
	return err
}

// CloseWrite shuts down the writing side of the connection, as
// *net.TCPConn does; net/http calls it before closing a connection whose
// request body it did not read, so that the client sees the response.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

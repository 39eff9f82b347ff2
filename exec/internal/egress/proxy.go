package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Secret is one header the proxy sets for one host.
type Secret struct {
	Header string // such as "Authorization"
	Value  string // the whole value, such as "Bearer " and the key
}

// Limits bound what one Proxy (one sandbox) may use. A zero MaxConns,
// MaxBytes, MaxPerRun or PerSecond is no limit; a zero ConnectTimeout is
// 10 s, a zero IdleTimeout a minute.
type Limits struct {
	MaxConns       int           // connections open at once
	MaxBytes       int64         // bytes both ways over the proxy's life
	ConnectTimeout time.Duration // name resolution, and the upstream dial
	IdleTimeout    time.Duration // no byte from one side for this long ends a connection
	// MaxPerRun bounds the connections served in one run (from the
	// proxy's start or its last NewRun); PerSecond the rate at which new
	// ones are served, in bursts of up to a second's worth. A connection
	// past either is closed as soon as it is accepted, unread, and
	// recorded with the limit's reason.
	MaxPerRun int
	PerSecond int
}

// Record is what a Proxy tells of one connection a sandbox opened
// through it, allowed or not, once it ended.
type Record struct {
	Host      string        `json:"host"`
	Port      int           `json:"port"`
	Method    string        `json:"method"` // CONNECT, or the plain HTTP request's method
	Allowed   bool          `json:"allowed"`
	Reason    string        `json:"reason,omitempty"`        // why it was refused, or how it ended early
	Secret    string        `json:"secret_header,omitempty"` // the header the proxy set, by name only
	BytesUp   int64         `json:"bytes_up"`
	BytesDown int64         `json:"bytes_down"`
	Duration  time.Duration `json:"duration_ns"`
	// Limit is set where one of the proxy's limits refused or ended the
	// connection; Reason then says which, in the same words for every
	// connection it did.
	Limit bool `json:"-"`
}

// Proxy is one sandbox's way out: an HTTP proxy that speaks CONNECT (for
// TLS, whose ClientHello must name the host CONNECT named) and plain HTTP
// (absolute-form requests, one a connection), checks every destination
// against Policy, resolves names itself and connects only to addresses
// the Policy allows.
type Proxy struct {
	Policy *Policy
	Limits Limits
	// Resolve looks a name up; nil means the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address the Policy allowed; nil means a
	// net.Dialer.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Record, if set, is told of each connection as it ends.
	Record func(Record)
	// Secrets are headers the proxy sets on plain-HTTP requests to one
	// host each, keyed by the host's name in lower case without a
	// trailing dot (no wildcards): the program never holds their values,
	// and a header of the same name that it sent is replaced. A request to
	// any other host, a redirect's included, gets none. Requests inside
	// CONNECT are TLS, which the proxy does not read, and get none,
	// unless the host is one it intercepts.
	Secrets map[string]Secret
	// Intercept names the hosts, keyed as Secrets are, whose TLS the
	// proxy terminates with a certificate CA issues (the sandbox trusts
	// CA), so that their HTTPS requests get their secret too: the proxy
	// then connects to the host over TLS itself, verified against
	// UpstreamRoots (nil: the host's roots). Without a CA, none is.
	Intercept     map[string]bool
	CA            *CA
	UpstreamRoots *x509.CertPool

	conns sync.WaitGroup
	live  atomic.Int64 // connections accepted and not yet recorded
	open  atomic.Int64
	bytes atomic.Int64

	mu       sync.Mutex
	served   int          // connections served in this run (see MaxPerRun)
	due      time.Time    // when the next is due at PerSecond, with no burst
	listener net.Listener // Serve's
}

// Pending counts the connections that wait in the accept queue of the
// listener Serve accepts from: made by the client, not yet accepted. It
// is 0 where it cannot tell (no TCP listener, no TCP_INFO).
func (p *Proxy) Pending() int {
	p.mu.Lock()
	l := p.listener
	p.mu.Unlock()
	sc, ok := l.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		// For a listening socket, Linux gives the accept queue's length
		// as tcpi_unacked.
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int(info.Unacked)
		}
	})
	return n
}

// NewRun starts a new run for MaxPerRun: the connections served so far
// no longer count.
func (p *Proxy) NewRun() {
	p.mu.Lock()
	p.served = 0
	p.mu.Unlock()
}

// admit counts a new connection against MaxPerRun and PerSecond, or
// says why it is refused; a refused one counts against neither.
func (p *Proxy) admit(now time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.Limits.MaxPerRun; l > 0 && p.served >= l {
		return fmt.Sprintf("over the limit of %d connections in one run (max_connections_per_run)", l)
	}
	if r := p.Limits.PerSecond; r > 0 {
		// A virtual schedule (GCRA): each connection moves the next
		// one's due time on by 1/r; a connection may come up to a
		// second before it is due.
		every := time.Second / time.Duration(r)
		if p.due.Before(now) {
			p.due = now
		}
		if p.due.Sub(now)+every > time.Second {
			return fmt.Sprintf("over the rate of %d new connections a second (connections_per_second)", r)
		}
		p.due = p.due.Add(every)
	}
	p.served++
	return ""
}

// Live counts the connections accepted whose Record has not been told
// yet: those still open, and those closing.
func (p *Proxy) Live() int { return int(p.live.Load()) }

// Serve accepts connections on l until it is closed, and then waits for
// the connections under way, which end once ctx does.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	defer p.conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		// Past the run's bound or the rate, a connection is closed at
		// once, unread, in this loop: a flood of them costs the server
		// an accept and a close each, no goroutine, no read.
		if why := p.admit(time.Now()); why != "" {
			c.Close()
			if p.Record != nil {
				p.Record(Record{Reason: why, Limit: true})
			}
			continue
		}
		p.conns.Add(1)
		p.live.Add(1)
		go func() {
			defer p.conns.Done()
			defer p.live.Add(-1)
			p.serveConn(ctx, c)
		}()
	}
}

// refusal is a request refused with an HTTP status.
type refusal struct {
	status int
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

func refuse(status int, format string, args ...any) error {
	return &refusal{status, fmt.Errorf(format, args...)}
}

func (p *Proxy) serveConn(ctx context.Context, c net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer closeWith(ctx, c)()
	start := time.Now()
	rec := Record{}
	defer func() {
		rec.Duration = time.Since(start)
		if p.Record != nil {
			p.Record(rec)
		}
	}()
	if n := p.open.Add(1); p.Limits.MaxConns > 0 && n > int64(p.Limits.MaxConns) {
		p.open.Add(-1)
		rec.Reason, rec.Limit = fmt.Sprintf("over the limit of %d connections at once", p.Limits.MaxConns), true
		writeStatus(c, http.StatusServiceUnavailable, rec.Reason)
		return
	}
	defer p.open.Add(-1)
	c.SetReadDeadline(time.Now().Add(p.idle()))
	head := &headReader{r: c, left: maxHead}
	br := bufio.NewReader(head)
	req, err := http.ReadRequest(br)
	if err != nil {
		rec.Reason = "not an HTTP proxy request: " + err.Error()
		writeStatus(c, http.StatusBadRequest, rec.Reason)
		return
	}
	head.left = -1
	req.Header.Del("Host")
	if h, ok := hostLine(head.seen.Bytes()); ok {
		req.Header.Set("Host", h)
	}
	rec.Method = req.Method
	if req.Method == http.MethodConnect {
		err = p.connect(ctx, c, br, req, &rec)
	} else {
		err = p.plain(ctx, c, req, &rec)
	}
	if err != nil {
		rec.Reason = err.Error()
		if errors.Is(err, errBytes) {
			rec.Reason, rec.Limit = errBytes.Error(), true
		}
		var r *refusal
		if errors.As(err, &r) {
			writeStatus(c, r.status, r.err.Error())
		}
	}
}

func (p *Proxy) idle() time.Duration {
	if p.Limits.IdleTimeout > 0 {
		return p.Limits.IdleTimeout
	}
	return time.Minute
}

// maxHead bounds a request's line and headers.
const maxHead = 64 << 10

// headReader reads a request's head from r, keeping what it read, and
// fails past left bytes; left < 0 lifts both.
type headReader struct {
	r    io.Reader
	left int
	seen bytes.Buffer
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, fmt.Errorf("the request's head is over %d bytes", maxHead)
	}
	n, err := h.r.Read(b[:min(len(b), h.left)])
	h.left -= n
	h.seen.Write(b[:n])
	return n, err
}

// hostLine returns the Host header of the request head in b, which
// http.ReadRequest drops for a request in absolute form. Lines may end in
// a bare LF, as ReadRequest accepts.
func hostLine(b []byte) (string, bool) {
	head, _, _ := bytes.Cut(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n"))
	lines := strings.Split(string(head), "\n")
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Host") {
			return strings.TrimSpace(value), true
		}
	}
	return "", false
}

// writeStatus answers a refused request; the connection then closes.
func writeStatus(w io.Writer, status int, why string) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n",
		status, http.StatusText(status), len(why)+1, why)
}

// target checks host and port against the Policy, resolves the host and
// returns the first of its addresses the Policy allows.
func (p *Proxy) target(ctx context.Context, host string, port int, rec *Record) (netip.AddrPort, error) {
	rec.Host, rec.Port = Canonical(host), port
	if err := p.Policy.Host(host); err != nil {
		return netip.AddrPort{}, refuse(http.StatusForbidden, "%v", err)
	}
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, refuse(http.StatusBadRequest, "port %d is out of range", port)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, p.connectTimeout())
		addrs, err = p.resolve(rctx, rec.Host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return netip.AddrPort{}, refuse(http.StatusBadGateway, "cannot resolve %s: %v", rec.Host, err)
		}
	}
	a, err := p.Policy.First(addrs)
	if err != nil {
		return netip.AddrPort{}, refuse(http.StatusForbidden, "%s: %v", rec.Host, err)
	}
	rec.Allowed = true
	return netip.AddrPortFrom(a, uint16(port)), nil
}

func (p *Proxy) connectTimeout() time.Duration {
	if p.Limits.ConnectTimeout > 0 {
		return p.Limits.ConnectTimeout
	}
	return 10 * time.Second
}

func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.Resolve != nil {
		return p.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (p *Proxy) dial(ctx context.Context, to netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.connectTimeout())
	defer cancel()
	if p.Dial != nil {
		return p.Dial(ctx, to)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", to.String())
}

// connect serves a CONNECT: it answers 200 once the host is allowed, then
// reads the client's TLS ClientHello, which must name the same host (an
// address host may name none), and only then connects upstream and
// splices the two.
func (p *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request, rec *Record) error {
	host, portText, err := net.SplitHostPort(req.Host)
	if err != nil {
		rec.Host = req.Host
		return refuse(http.StatusBadRequest, "CONNECT %q: want host:port", req.Host)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		rec.Host = host
		return refuse(http.StatusBadRequest, "CONNECT %q: bad port", req.Host)
	}
	to, err := p.target(ctx, host, port, rec)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return err
	}
	hello, name, err := readClientHello(br)
	if err != nil {
		rec.Allowed = false
		return err
	}
	_, isAddr := netip.ParseAddr(strings.Trim(host, "[]"))
	if !strings.EqualFold(strings.TrimSuffix(name, "."), rec.Host) && !(isAddr == nil && name == "") {
		rec.Allowed = false
		return fmt.Errorf("the TLS ClientHello names %q, not the host CONNECT named: %w", name, ErrDenied)
	}
	if p.CA != nil && p.Intercept[rec.Host] {
		return p.intercept(ctx, c, br, hello, to, rec)
	}
	up, err := p.dial(ctx, to)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", to, err)
	}
	defer closeWith(ctx, up)()
	if err := p.count(int64(len(hello))); err != nil {
		return err
	}
	rec.BytesUp += int64(len(hello))
	if _, err := up.Write(hello); err != nil {
		return err
	}
	return p.splice(c, br, up, rec)
}

// hopHeaders are the headers that concern one hop, not the origin.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// plain serves one plain-HTTP request in absolute form: the URL's host
// and the Host header must agree, and the response is the connection's
// last.
func (p *Proxy) plain(ctx context.Context, c net.Conn, req *http.Request, rec *Record) error {
	u := req.URL
	if u.Scheme != "http" || u.Host == "" {
		rec.Host = req.Host
		return refuse(http.StatusBadRequest, "want an absolute http:// URL or CONNECT, got %q", req.RequestURI)
	}
	// The Host line as the client sent it (serveConn puts it back:
	// ReadRequest drops it for a request in absolute form). What is sent
	// on names the URL's host.
	if h := req.Header.Get("Host"); h != "" && !strings.EqualFold(h, u.Host) {
		rec.Host = u.Hostname()
		return refuse(http.StatusForbidden, "the URL's host %q and the Host header %q differ: %v", u.Host, h, ErrDenied)
	}
	port := 80
	if ps := u.Port(); ps != "" {
		var err error
		if port, err = strconv.Atoi(ps); err != nil {
			rec.Host = u.Hostname()
			return refuse(http.StatusBadRequest, "bad port %q", ps)
		}
	}
	to, err := p.target(ctx, u.Hostname(), port, rec)
	if err != nil {
		return err
	}
	up, err := p.dial(ctx, to)
	if err != nil {
		return refuse(http.StatusBadGateway, "connect to %s: %v", to, err)
	}
	defer closeWith(ctx, up)()
	dropHopHeaders(req.Header)
	req.Close = true
	if sec, ok := p.Secrets[rec.Host]; ok && sec.Header != "" {
		req.Header.Set(sec.Header, sec.Value)
		rec.Secret = http.CanonicalHeaderKey(sec.Header)
	}
	req.RequestURI = ""
	cu := &countingWriter{w: up, p: p, n: &rec.BytesUp}
	if err := req.Write(cu); err != nil {
		return err
	}
	var act activity
	act.touch()
	return p.copy(c, up, &rec.BytesDown, up, &act)
}

// splice copies both ways until either side ends or a limit is reached.
// A connection is idle when neither way has moved a byte for the idle
// timeout: a long download through TLS, whose client says nothing, is
// not.
func (p *Proxy) splice(c net.Conn, br *bufio.Reader, up net.Conn, rec *Record) error {
	var act activity
	act.touch()
	errc := make(chan error, 1)
	go func() {
		err := p.copy(up, br, &rec.BytesUp, c, &act)
		closeWrite(up)
		errc <- err
	}()
	err := p.copy(c, up, &rec.BytesDown, up, &act)
	closeWrite(c)
	if err != nil {
		// The other way may be blocked in a read of a client that waits
		// for what will not come.
		act.stopped.Store(true)
		c.SetReadDeadline(time.Now())
	}
	return errors.Join(err, <-errc)
}

// closeWith closes c when ctx ends, and returns what closes it now.
func closeWith(ctx context.Context, c net.Conn) (closeNow func()) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	return func() {
		stop()
		c.Close()
	}
}

// closeWrite ends c's sending side, where it has one to end alone.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// activity is when a connection last moved a byte either way, and
// whether its copies are to stop.
type activity struct {
	last    atomic.Int64 // Unix nanoseconds
	stopped atomic.Bool
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// errBytes is the proxy's byte limit reached.
var errBytes = errors.New("over the sandbox's limit of bytes through the network")

// count adds n to the bytes the proxy carried, failing past MaxBytes.
func (p *Proxy) count(n int64) error {
	if t := p.bytes.Add(n); p.Limits.MaxBytes > 0 && t > p.Limits.MaxBytes {
		return errBytes
	}
	return nil
}

// copy copies src (read from the connection from) to dst, counting into
// n and the proxy's total, until src ends, a limit is reached, or the
// connection has been idle (see activity) for the idle timeout.
func (p *Proxy) copy(dst io.Writer, src io.Reader, n *int64, from net.Conn, act *activity) error {
	buf := make([]byte, 32<<10)
	for {
		from.SetReadDeadline(time.Now().Add(p.idle()))
		k, rerr := src.Read(buf)
		if k > 0 {
			act.touch()
			if err := p.count(int64(k)); err != nil {
				return err
			}
			if _, err := dst.Write(buf[:k]); err != nil {
				return err
			}
			atomic.AddInt64(n, int64(k))
		}
		switch {
		case rerr == io.EOF:
			return nil
		case errors.Is(rerr, os.ErrDeadlineExceeded) && !act.stopped.Load() &&
			time.Since(time.Unix(0, act.last.Load())) < p.idle():
			// The other way moved: the connection is not idle.
		case rerr != nil:
			return rerr
		}
	}
}

// countingWriter counts what is written through it.
type countingWriter struct {
	w io.Writer
	p *Proxy
	n *int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if err := c.p.count(int64(len(b))); err != nil {
		return 0, err
	}
	k, err := c.w.Write(b)
	atomic.AddInt64(c.n, int64(k))
	return k, err
}

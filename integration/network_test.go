package integration

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// networkRecord is one entry of a result's network list.
type networkRecord struct {
	Host         string `json:"host"`
	Port         int    `json:"port"`
	Method       string `json:"method"`
	Allowed      bool   `json:"allowed"`
	Reason       string `json:"reason"`
	SecretHeader string `json:"secret_header"`
	BytesUp      int64  `json:"bytes_up"`
	BytesDown    int64  `json:"bytes_down"`
	DurationMs   int64  `json:"duration_ms"`
}

// networkTally is one entry of a result's network_rest list.
type networkTally struct {
	Host        string `json:"host"`
	Allowed     bool   `json:"allowed"`
	Connections int64  `json:"connections"`
	BytesUp     int64  `json:"bytes_up"`
	BytesDown   int64  `json:"bytes_down"`
	Reason      string `json:"reason"`
}

// The opt-in network (issue 31), on a network this test makes: two
// network namespaces of its own joined by a veth pair on 198.51.100.0/24,
// TEST-NET-2 (RFC 5737, documentation only, routed nowhere). The test
// serves HTTP and HTTPS at 198.51.100.7 in one; the server runs in the
// other (nsenter), so that its proxies reach the test's servers and
// nothing else: its namespace has no other interface and no default
// route. Names resolve through [network] hosts, never through a
// resolver.
const upstreamAddr = "198.51.100.7"

// upstream is the test's HTTP and HTTPS server in its network namespace.
type upstream struct {
	netns string // the namespace's path, for serverSpec.netns
	caPEM string // the CA that signed the HTTPS server's certificate

	mu       sync.Mutex
	requests []upstreamRequest
	release  chan struct{} // closed when the test ends: /hold returns
}

// upstreamRequest is what the test's server saw of one request.
type upstreamRequest struct {
	host, path, auth string
	tls              bool
}

// seen returns the requests so far.
func (u *upstream) seen() []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.requests)
}

// newUpstream makes the namespace and serves in it: /hello answers with
// the host it was asked for, /redirect sends the client to
// api2.test.example, /big sends 3 MiB, /hold waits until the test ends,
// /simple/ is a package index holding tinypkg.
// Every request is recorded, its Authorization header with it; none is
// echoed back.
func newUpstream(t *testing.T) *upstream {
	t.Helper()
	// Two namespaces joined by a veth pair: the server's, and the
	// upstream's. The upstream's address is not one of the server's own,
	// which its proxies refuse.
	name, upName := fmt.Sprintf("csm-net-%d", os.Getpid()), fmt.Sprintf("csm-up-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := osexec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s (the network tests need network namespaces and veth)", strings.Join(args, " "), err, out)
		}
	}
	for _, n := range []string{name, upName} {
		ip("netns", "add", n)
		t.Cleanup(func() {
			if out, err := osexec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", n, err, out)
			}
		})
		ip("-n", n, "link", "set", "lo", "up")
	}
	ip("-n", name, "link", "add", "csmnet0", "type", "veth", "peer", "name", "csmup0", "netns", upName)
	ip("-n", name, "addr", "add", "198.51.100.1/24", "dev", "csmnet0")
	ip("-n", upName, "addr", "add", upstreamAddr+"/24", "dev", "csmup0")
	ip("-n", name, "link", "set", "csmnet0", "up")
	ip("-n", upName, "link", "set", "csmup0", "up")

	u := &upstream{netns: filepath.Join("/run/netns", name), release: make(chan struct{})}
	t.Cleanup(func() { close(u.release) })
	caDER, cert := issueCert(t, "api.test.example", []string{"api.test.example", "api2.test.example"}, nil)
	u.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://api2.test.example/landed", http.StatusFound)
	})
	mux.HandleFunc("/landed", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "landed at %s", r.Host)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 48 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	// A package index holding tinypkg alone, for pip install.
	index := pipIndexHandler(t)
	mux.Handle("/simple/", index)
	mux.Handle("/files/", index)
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-u.release:
		case <-r.Context().Done():
		}
	})
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.mu.Lock()
			u.requests = append(u.requests, upstreamRequest{host: r.Host, path: r.URL.Path, auth: r.Header.Get("Authorization"), tls: r.TLS != nil})
			u.mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	for _, port := range []string{"80", "443"} {
		l := listenInNetns(t, upName, "tcp4", net.JoinHostPort(upstreamAddr, port))
		srv := &http.Server{Handler: record(mux), ReadHeaderTimeout: 10 * time.Second}
		if port == "443" {
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
			l = tls.NewListener(l, srv.TLSConfig)
		}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
	return u
}

// networkConfig allows api and api2 of test.example, and names that lead
// where the proxy must not go; other.test.example resolves to the
// test's server too, but is not allowed. The secret is api's alone, and
// the proxy intercepts api's TLS to add it to HTTPS requests too.
const networkConfig = `
[network]
allow = ["api.test.example", "api2.test.example", "loop.test.example", "priv.test.example", "meta.test.example", "pypi.test.example"]
max_connections = 4
max_bytes = "2MiB"
hosts = { "api.test.example" = "198.51.100.7", "api2.test.example" = "198.51.100.7", "other.test.example" = "198.51.100.7", "loop.test.example" = "127.0.0.1", "priv.test.example" = "10.254.0.1", "meta.test.example" = "169.254.169.254", "pypi.test.example" = "198.51.100.7" }
[network.secrets."api.test.example"]
header = "Authorization"
value_env = "CSM_TEST_API_KEY"
format = "Bearer {}"
intercept = true
`

// networkProbe is the hostile program: every way in and out it tries, one
// line each. It prints its whole environment and every process's, so
// that the test can look for the secret there.
const networkProbe = `
import errno, os, socket, ssl, urllib.request, urllib.error
def get(url, ctx=None):
    try:
        with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
            return '%d %s' % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return str(e.code)
    except Exception as e:
        return 'error ' + type(e).__name__
ca = ssl.create_default_context(cafile='ca.pem')
print('plain', get('http://api.test.example/hello'))
print('tls', get('https://api.test.example/hello', ssl.create_default_context()))
print('tls upstream ca', get('https://api.test.example/hello', ca))
print('tls2', get('https://api2.test.example/hello', ca))
print('denied', get('http://other.test.example/hello'))
print('ip', get('http://198.51.100.7/hello'))
print('loopback', get('http://loop.test.example/hello'))
print('private', get('http://priv.test.example/hello'))
print('metadata', get('http://meta.test.example/hello'))
print('redirect', get('http://api.test.example/redirect'))
s = socket.socket()
s.settimeout(5)
try:
    s.connect(('198.51.100.7', 80))
    print('direct connected')
except OSError as e:
    print('direct', errno.errorcode.get(e.errno, e.errno))
try:
    socket.getaddrinfo('api.test.example', 80)
    print('resolve ok')
except socket.gaierror:
    print('resolve gaierror')
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b'\0' * 12, ('198.51.100.7', 53))
    print('udp sent')
except OSError as e:
    print('udp', errno.errorcode.get(e.errno, e.errno))
host, port = os.environ['HTTPS_PROXY'].split('//')[1].rsplit(':', 1)
c = socket.create_connection((host, int(port)), timeout=10)
c.sendall(b'CONNECT api.test.example:443 HTTP/1.1\r\nHost: api.test.example:443\r\n\r\n')
head = c.recv(1024).split(b'\r\n')[0].decode()
try:
    ca.wrap_socket(c, server_hostname='other.test.example')
    print('sni', head, 'handshake done')
except (ssl.SSLError, OSError):
    print('sni', head, 'refused')
dump = [repr(dict(os.environ))]
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            dump.append(open('/proc/%s/environ' % p, 'rb').read().decode(errors='replace'))
            dump.append(open('/proc/%s/cmdline' % p, 'rb').read().decode(errors='replace'))
        except OSError:
            pass
# Where the server writes: the sandbox's mounts, and what runc makes.
for top in ('/sandbox', '/workspace', '/tmp', '/dev/shm', '/opt', '/etc', '/run'):
  for root, dirs, files in os.walk(top):
    for f in files:
      try:
        with open(os.path.join(root, f), 'rb') as fh:
          if b'CSM_SECRET' in fh.read(1 << 20):
            dump.append('file ' + os.path.join(root, f))
      except OSError:
        pass
print('dump', ' '.join(dump).replace('\n', ' '))
`

// networkCaps is the program that meets the caps: five connections at
// once against max_connections 4, then 3 MiB against max_bytes 2 MiB.
const networkCaps = `
import os, socket, time, urllib.request
host, port = os.environ['HTTP_PROXY'].split('//')[1].rsplit(':', 1)
socks, refused = [], 0
for i in range(5):
    c = socket.create_connection((host, int(port)), timeout=3)
    c.sendall(b'GET http://api.test.example/hold HTTP/1.1\r\nHost: api.test.example\r\n\r\n')
    socks.append(c)
time.sleep(1)
for c in socks:
    c.settimeout(0.2)
    try:
        if c.recv(64).startswith(b'HTTP/1.1 503'):
            refused += 1
    except socket.timeout:
        pass
for c in socks:
    c.close()
print('refused', refused)
try:
    with urllib.request.urlopen('http://api.test.example/big', timeout=10) as r:
        print('big', len(r.read()))
except Exception as e:
    print('big error', type(e).__name__)
`

// TestNetworkAllowlist runs the probe in a one-shot sandbox and as a
// session's cell, on a language with a network.
func TestNetworkAllowlist(t *testing.T) {
	up := newUpstream(t)
	secret := "CSM_SECRET_" + randomHex(t)
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	// The server's proxy trusts the test's CA, and only it, for the
	// upstreams it intercepts.
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, []byte(up.caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := serverSpec{
		netns:  up.netns,
		env:    []string{"CSM_TEST_API_KEY=" + secret, "SSL_CERT_FILE=" + roots},
		config: networkConfig + fmt.Sprintf("[audit]\npath = %q\n", auditLog),
	}
	s := startMCP(t, spec)
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			before := len(up.seen())
			files := []map[string]any{{"path": "ca.pem", "content": up.caPEM}}
			r := m.hostile(t, s, "python", networkProbe, func(a map[string]any) { a["files"] = files }, withTimeout(60))
			out := r.out.Stdout
			t.Logf("probe:\n%s\nrecords: %+v", out[:max(0, strings.Index(out, "\ndump "))], r.out.Network)
			for _, want := range []string{
				"plain 200 hello from api.test.example\n",
				"tls 200 hello from api.test.example\n",
				"tls upstream ca error URLError\n",
				"tls2 200 hello from api2.test.example\n",
				"denied 403\n",
				"ip 403\n",
				"loopback 403\n",
				"private 403\n",
				"metadata 403\n",
				"redirect 200 landed at api2.test.example\n",
				"direct ENETUNREACH\n",
				"resolve gaierror\n",
				"udp ENETUNREACH\n",
				"sni HTTP/1.1 200 Connection established refused\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the probe's output lacks %q:\n%s\nstderr:\n%s", want, out, r.out.Stderr)
				}
			}
			if !strings.Contains(out, "\ndump ") {
				t.Errorf("the probe did not dump its environment:\n%s\nstderr:\n%s", out, r.out.Stderr)
			}
			if strings.Contains(r.text, secret) || strings.Contains(out, "CSM_SECRET") {
				t.Errorf("the secret, or a file holding it, is in the sandbox:\n%s", out)
			}

			// What the test's server saw: the secret on api's requests,
			// plain and (intercepted) TLS; not on the redirect to api2,
			// nor on api2's TLS, which the proxy does not read.
			var apiPlain, apiTLS, api2 int
			for _, req := range up.seen()[before:] {
				switch {
				case req.host == "api.test.example":
					if req.tls {
						apiTLS++
					} else {
						apiPlain++
					}
					if req.auth != "Bearer "+secret {
						t.Errorf("request to api.test.example%s (tls %v) had Authorization %q; want the secret", req.path, req.tls, req.auth)
					}
				case req.auth != "":
					t.Errorf("request to %s%s (tls %v) had Authorization %q; want none", req.host, req.path, req.tls, req.auth)
				}
				if req.host == "api2.test.example" {
					api2++
				}
				if req.host != "api.test.example" && req.host != "api2.test.example" {
					t.Errorf("the test's server got a request for %s%s; the proxy should have refused it", req.host, req.path)
				}
			}
			if apiPlain != 2 || apiTLS != 1 || api2 != 2 {
				t.Errorf("the test's server saw %d plain and %d TLS requests to api.test.example and %d to api2; want 2 (hello, redirect), 1 and 2 (the redirect's, TLS)", apiPlain, apiTLS, api2)
			}

			// The result's records: every connection, allowed or not.
			want := []struct {
				host    string
				method  string
				allowed bool
				reason  *regexp.Regexp
			}{
				{"api.test.example", "GET", true, nil},
				{"api.test.example", "CONNECT", true, nil},
				{"other.test.example", "GET", false, regexp.MustCompile(`not on the allow list`)},
				{"198.51.100.7", "GET", false, regexp.MustCompile(`not on the allow list`)},
				{"loop.test.example", "GET", false, regexp.MustCompile(`loopback`)},
				{"priv.test.example", "GET", false, regexp.MustCompile(`private`)},
				{"meta.test.example", "GET", false, regexp.MustCompile(`link-local`)},
				{"api2.test.example", "GET", true, nil},
				{"api.test.example", "CONNECT", false, regexp.MustCompile(`other\.test\.example`)},
			}
			recs := r.out.Network
			for _, w := range want {
				i := slices.IndexFunc(recs, func(rec networkRecord) bool {
					return rec.Host == w.host && rec.Method == w.method && rec.Allowed == w.allowed && (w.reason == nil || w.reason.MatchString(rec.Reason))
				})
				if i < 0 {
					t.Errorf("no network record of %s %s allowed %v (reason %v) in %+v", w.method, w.host, w.allowed, w.reason, recs)
					continue
				}
				if rec := recs[i]; w.allowed && (rec.BytesDown == 0 || rec.BytesUp == 0) {
					t.Errorf("record %+v: an allowed connection moved bytes both ways", rec)
				}
			}
			for _, rec := range recs {
				// A request that reached api got the secret: its plain
				// ones, and the intercepted TLS one that the sandbox's
				// bundle let through.
				if rec.Host == "api.test.example" && rec.Allowed && rec.BytesDown > 0 && rec.Reason == "" && rec.SecretHeader != "Authorization" {
					t.Errorf("record %+v: want secret_header Authorization", rec)
				}
				if rec.Host != "api.test.example" && rec.SecretHeader != "" {
					t.Errorf("record %+v: want no secret_header", rec)
				}
			}
			if !slices.ContainsFunc(recs, func(rec networkRecord) bool {
				return rec.Host == "api.test.example" && rec.Method == "CONNECT" && rec.SecretHeader == "Authorization"
			}) {
				t.Errorf("no record of an intercepted CONNECT to api.test.example that set the secret in %+v", recs)
			}
			if !strings.Contains(r.text, "[network: the sandbox's proxy refused ") {
				t.Errorf("the text does not tell of the refused connections:\n%s", r.text)
			}
			afterCase(t, s, r)
		})
	}

	t.Run("caps", func(t *testing.T) {
		r := modes[0].hostile(t, s, "python", networkCaps, withTimeout(60))
		if !strings.Contains(r.out.Stdout, "refused 1\n") {
			t.Errorf("5 connections at once against max_connections 4: got %q; want 1 refused (stderr %q)", r.out.Stdout, r.out.Stderr)
		}
		if strings.Contains(r.out.Stdout, fmt.Sprintf("big %d\n", 48*64<<10)) || !strings.Contains(r.out.Stdout, "big ") {
			t.Errorf("3 MiB against max_bytes 2 MiB: got %q; want it cut", r.out.Stdout)
		}
		if !slices.ContainsFunc(r.out.Network, func(rec networkRecord) bool { return strings.Contains(rec.Reason, "connections at once") }) {
			t.Errorf("no record of the connection over the limit in %+v", r.out.Network)
		}
		afterCase(t, s, r)
	})

	t.Run("pip install in a session", func(t *testing.T) {
		// The index is plain HTTP, so pip must be told to trust it; an
		// HTTPS index goes through CONNECT as any other host. Installed in
		// one cell, the package imports in the same interpreter and in
		// the next cell, from the user site under HOME.
		ctx := testContext(t)
		id := createSession(t, s, "python")
		defer closeSession(t, s, id)
		r := s.call(ctx, t, "run_python_code", map[string]any{"session_id": id, "timeout_seconds": 120, "code": `
import os, subprocess, sys
p = subprocess.run([sys.executable, '-m', 'pip', 'install', '--index-url', 'http://pypi.test.example/simple/',
                    '--trusted-host', 'pypi.test.example', 'tinypkg'], capture_output=True, text=True)
print('pip', p.returncode)
if p.returncode:
    print(p.stdout, p.stderr)
import tinypkg
print(tinypkg.VALUE)
p = subprocess.run([sys.executable, '-m', 'pip', 'install', '--target', '/tmp/t', '--index-url', 'http://pypi.test.example/simple/',
                    '--trusted-host', 'pypi.test.example', 'tinypkg'], capture_output=True, text=True)
print('target', p.returncode, os.path.exists('/tmp/t/tinypkg/__init__.py'))
`})
		if r.isError || r.out.Stdout != "pip 0\ntinypkg says hello\ntarget 0 True\n" {
			t.Fatalf("pip install in a cell: %q (isError %v, stderr %q); want pip 0, the package imported, and an install with --target", r.out.Stdout, r.isError, r.out.Stderr)
		}
		if !slices.ContainsFunc(r.out.Network, func(rec networkRecord) bool {
			return rec.Host == "pypi.test.example" && rec.Allowed && rec.BytesDown > 0
		}) {
			t.Errorf("no record of pip's connection to pypi.test.example in %+v", r.out.Network)
		}
		r = s.call(ctx, t, "run_python_code", map[string]any{"session_id": id, "code": "import tinypkg; print(tinypkg.__file__)"})
		if r.isError || !strings.HasPrefix(r.out.Stdout, "/tmp/.local/lib/python3") {
			t.Errorf("the next cell: %q (isError %v, stderr %q); want tinypkg from the user site under /tmp", r.out.Stdout, r.isError, r.out.Stderr)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		// Node.js 20 has no proxy support of its own: a program names the
		// proxy, as a library that reads HTTP_PROXY does.
		r := modes[0].hostile(t, s, "javascript", `
const http = require('http');
const u = new URL(process.env.HTTP_PROXY);
http.get({ host: u.hostname, port: u.port, path: 'http://api.test.example/hello', headers: { Host: 'api.test.example' } }, (res) => {
  let b = '';
  res.on('data', (d) => (b += d));
  res.on('end', () => console.log(res.statusCode, b));
});
require('net').connect(80, '198.51.100.7').on('error', (e) => console.log('direct', e.code));
`, withTimeout(30))
		if !strings.Contains(r.out.Stdout, "200 hello from api.test.example\n") || !strings.Contains(r.out.Stdout, "direct ENETUNREACH\n") {
			t.Errorf("got %q; want a proxied 200 and an unreachable direct connection (stderr %q)", r.out.Stdout, r.out.Stderr)
		}
		afterCase(t, s, r)
	})

	// The server's log and the audit log never hold the secret.
	if strings.Contains(s.stderr.String(), secret) {
		t.Errorf("the server's log holds the secret")
	}
	if data, err := os.ReadFile(auditLog); err != nil {
		t.Errorf("read the audit log: %v", err)
	} else if strings.Contains(string(data), secret) || len(data) == 0 {
		t.Errorf("the audit log (%d bytes) holds the secret, or nothing", len(data))
	} else if !strings.Contains(string(data), `"host":"other.test.example"`) || !strings.Contains(string(data), `"secret_header":"Authorization"`) {
		t.Errorf("the audit log's run_ended records lack the runs' connections:\n%s", data)
	}
}

// randomHex is 16 random hex digits.
func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A server killed with sandboxes that have a network leaves their
// namespaces mounted in its state directory; the next server's sweep
// unmounts them with the rest, and nothing is left.
func TestFaultServerKilledWithNetworkSandboxes(t *testing.T) {
	onBothDaemons(t, daemonLifecycle)
	d := newPrivateDaemon(t)
	stateDir := newStateDir(t)
	// No traffic: nothing connects.
	const network = "[network]\nallow = [\"fault.invalid\"]\n"
	s := startFaultServer(t, d, stateDir, network)
	if !waitFor(90*time.Second, func() bool { return d.tasks(t).waiting() == 2 }) {
		t.Fatalf("the pool did not fill in 90 s: %+v", d.tasks(t))
	}
	netns := func() []string {
		return slices.DeleteFunc(mountsUnder(stateDir), func(m string) bool { return filepath.Base(m) != "netns" })
	}
	if n := netns(); len(n) != 2 {
		t.Fatalf("namespace mounts %v; want one per ready sandbox (2)", n)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	s.killClient()
	left := netns()
	if len(left) != 2 {
		t.Fatalf("namespace mounts after the kill %v; want the 2 of the dead server's sandboxes", left)
	}
	s2 := startFaultServer(t, d, stateDir, network)
	if !waitFor(10*time.Second, func() bool {
		return !slices.ContainsFunc(netns(), func(m string) bool { return slices.Contains(left, m) })
	}) {
		t.Fatalf("10 s after a new server started, the dead server's namespace mounts %v are still there (%v)", left, netns())
	}
	start := time.Now()
	s2.stdin.Close()
	s2.waitExit(t, exitBound, start)
	d.assertNoLeftovers(t, stateDir)
	if n := netns(); len(n) != 0 {
		t.Errorf("namespace mounts %v after the second server exited; want none", n)
	}
}

// TestNetworkHostAddressAddedLater: an address the server's host gains
// after the server started (DHCP, a VPN, a bridge would add one) is
// refused as the host's own through an allowed name pinned to it, from
// the moment it is there: the proxy reads the host's addresses at each
// connection, not once at the start. The host is the server's network
// namespace, which newUpstream made; the address is added to its veth,
// and a listener of the test's waits there, which no connection reaches.
func TestNetworkHostAddressAddedLater(t *testing.T) {
	onBothDaemons(t, daemonTasks) // the sandbox joins its namespace through the runtime the shim runs
	up := newUpstream(t)
	const late = "198.51.100.50"
	s := startMCP(t, serverSpec{netns: up.netns, config: `
[network]
allow = ["api.test.example", "late.test.example"]
hosts = { "api.test.example" = "198.51.100.7", "late.test.example" = "` + late + `" }
`})
	ctx := testContext(t)
	name := filepath.Base(up.netns)
	if out, err := osexec.Command("ip", "-n", name, "addr", "add", late+"/32", "dev", "csmnet0").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s in %s: %v: %s", late, name, err, out)
	}
	var accepts atomic.Int64
	countAccepts(t, listenInNetns(t, name, "tcp4", net.JoinHostPort(late, "80")), &accepts)

	r := s.call(ctx, t, "run_python_code", code(`
import urllib.request, urllib.error
for host in ('api', 'late'):
    try:
        with urllib.request.urlopen('http://%s.test.example/hello' % host, timeout=10) as r:
            print(host, r.status)
    except urllib.error.HTTPError as e:
        print(host, e.code)
    except Exception as e:
        print(host, 'error', type(e).__name__)
`))
	if want := "api 200\nlate 403\n"; r.out.Stdout != want {
		t.Errorf("the program printed %q (stderr %q); want %q: api reached, late refused by the proxy", r.out.Stdout, r.out.Stderr, want)
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("the listener at the host's new address %s accepted %d connections; want none", late, n)
	}
	wantReason := "address " + late + " is one of the host's own addresses, and no allow entry lists it"
	if !slices.ContainsFunc(r.out.Network, func(rec networkRecord) bool {
		return rec.Host == "late.test.example" && !rec.Allowed && strings.Contains(rec.Reason, wantReason)
	}) {
		t.Errorf("no record of late.test.example refused with %q in %+v", wantReason, r.out.Network)
	}
}

// floodProgram opens a connection to its sandbox's proxy and closes it
// at once, as fast as it can, for the seconds given (%d), and prints how
// many it made and how many failed: one is open at a time, so
// max_connections never applies.
const floodProgram = `
import os, socket, time
host, port = os.environ['HTTP_PROXY'].split('//')[1].rsplit(':', 1)
made = failed = 0
end = time.monotonic() + %d
while time.monotonic() < end:
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        made += 1
    except OSError:
        failed += 1
print('made', made, 'failed', failed)
`

// A program that only opens and closes connections to its proxy, as fast
// as it can, for 12 s (issue 44; ~145,000 connections before the bounds,
// a result and an audit record of 18 MiB each, 260 MiB more for the
// server) leaves the server's memory within 20 MiB of what it was, and
// every message under 1 MiB: the result lists the first max_records (100)
// connections, and tallies the rest per host and verdict, the refusals
// for max_connections_per_run (1000) and connections_per_second (100)
// apart, so that they are counted, and say so. The audit record and the
// metrics count the same. Then the same in two cells of a session,
// 4 s each: each cell's records are its own. The client keeps its
// connection throughout.
func TestNetworkFloodIsBounded(t *testing.T) {
	onBothDaemons(t, daemonTasks) // as TestNetworkHostAddressAddedLater
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	// lowGOGC, as the memory tests: at the default GOGC the peak RSS
	// counted garbage not yet collected, 4 to 14 MiB over 24 runs of
	// make test and once 20.8 (the bound is 20; the fault was 260).
	s := startMCP(t, serverSpec{env: []string{lowGOGC}, config: "[network]\nallow = [\"api.test.example\"]\n" + fmt.Sprintf("[audit]\npath = %q\n", auditLog)})
	ctx := testContext(t)
	pid := s.cmd.Process.Pid
	flood := func(seconds int, session string) (toolResult, int64) {
		t.Helper()
		args := map[string]any{"code": fmt.Sprintf(floodProgram, seconds), "timeout_seconds": scaled(seconds + 30)}
		if session != "" {
			args["session_id"] = session
		}
		r := s.call(ctx, t, "run_python_code", args)
		var made, failed int64
		if _, err := fmt.Sscanf(r.out.Stdout, "made %d failed %d\n", &made, &failed); err != nil || r.isError {
			t.Fatalf("the flood printed %q (stderr %q, error %v): %v", r.out.Stdout, r.out.Stderr, r.isError, err)
		}
		var counted int64 = int64(len(r.out.Network))
		for _, tl := range r.out.NetworkRest {
			counted += tl.Connections
		}
		t.Logf("%d s: made %d connections (%d failed), recorded %d: %d listed, %d tallies %+v", seconds, made, failed, counted, len(r.out.Network), len(r.out.NetworkRest), r.out.NetworkRest)
		// Each connection made is counted once, in this run: those the
		// proxy had not accepted yet when the program ended may be left
		// out, and those that failed on the program's side after the
		// proxy had them may be in.
		if counted > made+failed || counted < made-made/50 {
			t.Errorf("%d connections made (%d failed), %d recorded; want each counted once", made, failed, counted)
		}
		if len(r.out.Network) != 100 {
			t.Errorf("%d connections listed; want the first 100 (max_records)", len(r.out.Network))
		}
		return r, made
	}
	hasTally := func(r toolResult, reason string) bool {
		return slices.ContainsFunc(r.out.NetworkRest, func(tl networkTally) bool { return !tl.Allowed && tl.Reason == reason && tl.Connections > 0 })
	}
	const (
		overRun  = "over the limit of 1000 connections in one run (max_connections_per_run)"
		overRate = "over the rate of 100 new connections a second (connections_per_second)"
	)

	// Its start: after a first run, which builds what a server builds
	// once (the tools' schemas, the audit log's writer) and a proxy.
	flood(1, "")
	base, err := rssOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	peak.Store(base)
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v, err := rssOf(pid); err == nil && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	r, _ := flood(12, "")
	id := createSession(t, s, "python")
	cells := []toolResult{}
	for range 2 {
		c, _ := flood(4, id)
		cells = append(cells, c)
	}
	closeSession(t, s, id)
	close(stop)
	<-sampled
	t.Logf("server RSS: %d KiB at its start, %d KiB at the most during the floods", base>>10, peak.Load()>>10)
	if grew := peak.Load() - base; grew > 20<<20 {
		t.Errorf("the server's RSS grew by %d KiB during the floods; want at most 20 MiB", grew>>10)
	}
	if !hasTally(r, overRun) || !hasTally(r, overRate) {
		t.Errorf("the 12 s flood's tallies %+v; want refusals for %q and for %q", r.out.NetworkRest, overRun, overRate)
	}
	for i, c := range cells {
		if !hasTally(c, overRate) {
			t.Errorf("cell %d's tallies %+v; want refusals for %q", i+1, c.out.NetworkRest, overRate)
		}
	}
	if !strings.Contains(r.text, "[network: the sandbox's proxy refused") || !strings.Contains(r.text, "more]") {
		t.Errorf("the result's text %q does not say how many connections the proxy refused", r.text)
	}
	if n := s.frames.Longest(); n >= 1<<20 {
		t.Errorf("the server sent a message of %d bytes; want every one under 1 MiB", n)
	}

	// The client keeps its connection, and the server goes on.
	if after := s.call(ctx, t, "run_python_code", code("print('still here')")); after.out.Stdout != "still here\n" {
		t.Errorf("a run after the floods printed %q (stderr %q)", after.out.Stdout, after.out.Stderr)
	}
	lines, recs := readAudit(t, auditLog)
	ended := 0
	for i, rec := range recs {
		if rec["event"] != "run_ended" {
			continue
		}
		ended++
		if len(lines[i]) >= 1<<20 {
			t.Errorf("audit record %d (run_ended) is %d bytes; want under 1 MiB", i, len(lines[i]))
		}
	}
	if ended < 5 {
		t.Errorf("%d run_ended records in the audit log; want one for each of the 5 runs", ended)
	}
	// The 12 s flood's record (the one run past max_connections_per_run)
	// counts what its result does.
	var found [][]networkTally
	for _, a := range recs {
		data, _ := json.Marshal(a["network_rest"])
		var tallies []networkTally
		if a["event"] == "run_ended" && json.Unmarshal(data, &tallies) == nil &&
			slices.ContainsFunc(tallies, func(tl networkTally) bool { return tl.Reason == overRun }) {
			found = append(found, tallies)
		}
	}
	if len(found) != 1 || !slices.Equal(found[0], r.out.NetworkRest) {
		t.Errorf("the audit log's run_ended records past max_connections_per_run have network_rest %+v; want one, the 12 s flood's %+v", found, r.out.NetworkRest)
	}
}

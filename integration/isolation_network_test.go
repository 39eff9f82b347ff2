package integration

import (
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The isolation suite, cases 12, 13 and 21 of issue 4: what a hostile
// program can reach. The sandbox has loopback only: no host or
// neighbouring listener over IPv4 or IPv6, no raw, packet, AF_ALG or
// AF_VSOCK socket, no io_uring, and no daemon's socket by path or in the
// abstract namespace; each case runs through the real server on a real
// containerd, and then the host is checked by afterCase.

// netnsTarget is a network namespace the test made, joined to the host by
// a veth pair, with a TCP listener on each of its two addresses.
type netnsTarget struct {
	v4, v6   string // the namespace's addresses
	l4, l6   net.Listener
	accepted *atomic.Int64
}

// newNetnsTarget makes a network namespace with a veth pair to the host.
// The addresses are link-local IPv4 (169.254.0.0/16) and a ULA prefix of
// our own, on a /30 and a /64 that exist only on this veth pair and are
// routed nowhere else; the third octet and the fourth ULA group come from
// the pid, so that two suites running at once do not collide. Everything
// is removed when the test ends.
func newNetnsTarget(t *testing.T) *netnsTarget {
	t.Helper()
	if _, err := osexec.LookPath("ip"); err != nil {
		t.Fatalf("case 12 needs iproute2's ip to make a network namespace: %v", err)
	}
	pid := os.Getpid()
	name := fmt.Sprintf("csm-iso-%d", pid)
	hostIf, nsIf := fmt.Sprintf("csmi%dh", pid%1000000), fmt.Sprintf("csmi%dn", pid%1000000)
	octet := 20 + pid%200
	hostV4, nsV4 := fmt.Sprintf("169.254.%d.1", octet), fmt.Sprintf("169.254.%d.2", octet)
	prefix := fmt.Sprintf("fdc5:a4d1:7e3b:%x", pid%0xffff)
	hostV6, nsV6 := prefix+"::1", prefix+"::2"
	ip := func(args ...string) {
		t.Helper()
		if out, err := osexec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s (case 12 needs network namespaces and veth)", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() {
		osexec.Command("ip", "link", "del", hostIf).Run()
		if out, err := osexec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", name)
	ip("addr", "add", hostV4+"/30", "dev", hostIf)
	ip("-6", "addr", "add", hostV6+"/64", "dev", hostIf, "nodad")
	ip("link", "set", hostIf, "up")
	ip("-n", name, "addr", "add", nsV4+"/30", "dev", nsIf)
	ip("-n", name, "-6", "addr", "add", nsV6+"/64", "dev", nsIf, "nodad")
	ip("-n", name, "link", "set", nsIf, "up")
	ip("-n", name, "link", "set", "lo", "up")

	n := &netnsTarget{v4: nsV4, v6: nsV6, accepted: &atomic.Int64{}}
	n.l4 = listenInNetns(t, name, "tcp4", net.JoinHostPort(nsV4, "0"))
	n.l6 = listenInNetns(t, name, "tcp6", net.JoinHostPort(nsV6, "0"))
	for _, l := range []net.Listener{n.l4, n.l6} {
		countAccepts(t, l, n.accepted)
	}
	return n
}

// listenInNetns listens in the named network namespace, from a thread that
// joins it and returns to ours; should the return fail, the thread stays
// locked and dies with its goroutine.
func listenInNetns(t *testing.T, name, network, addr string) net.Listener {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(filepath.Join("/run/netns", name))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		l, err := net.Listen(network, addr)
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen on %s in netns %s: %v", addr, name, r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l
}

// countAccepts accepts and closes connections on l, counting them.
func countAccepts(t *testing.T, l net.Listener, n *atomic.Int64) {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
}

// hostListeners listens on the host's loopback, over IPv4 and IPv6, and
// checks that the host reaches those listeners and target's, so that a
// refusal from a sandbox is then the sandbox's doing. It returns the
// host's listeners and their count of connections, both counts reset.
func hostListeners(t *testing.T, target *netnsTarget) ([]net.Listener, *atomic.Int64) {
	t.Helper()
	hostAccepted := &atomic.Int64{}
	var host []net.Listener
	for _, a := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		l, err := net.Listen(a.network, a.addr)
		if err != nil {
			t.Fatalf("listen on the host's %s: %v", a.addr, err)
		}
		countAccepts(t, l, hostAccepted)
		host = append(host, l)
	}
	for _, l := range append(host, target.l4, target.l6) {
		c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("from the host, dial %s: %v; want the listener to answer", l.Addr(), err)
		}
		c.Close()
	}
	if !waitFor(5*time.Second, func() bool { return hostAccepted.Load() == 2 && target.accepted.Load() == 2 }) {
		t.Fatalf("listeners accepted %d (host) and %d (netns) of the host's dials; want 2 and 2", hostAccepted.Load(), target.accepted.Load())
	}
	hostAccepted.Store(0)
	target.accepted.Store(0)
	return host, hostAccepted
}

// networkProbePython, formatted with the host's two loopback ports and
// the target's IPv4 address, itself, its port, itself, its port, then
// the same of IPv6, reports the sandbox's interfaces, whether a name
// resolves, and what a TCP connection and a UDP datagram to each get.
const networkProbePython = `
import errno, os, socket
print('sys/class/net:', sorted(os.listdir('/sys/class/net')))
print('if_nameindex:', [n for _, n in socket.if_nameindex()])
try:
    servers = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')]
except FileNotFoundError:
    servers = []
if all(s.startswith('127.') or s == '::1' for s in servers):
    try:
        socket.getaddrinfo('code-sandbox-isolation.invalid', 80)
        print('resolve: resolved')
    except socket.gaierror as e:
        print('resolve: gaierror', e.errno in (socket.EAI_AGAIN, socket.EAI_NONAME))
else:
    print('resolve: not tried, nameservers', servers)
def connect(family, addr, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((addr, port))
        return 'connected'
    except OSError as e:
        return errno.errorcode.get(e.errno, repr(e))
    finally:
        s.close()
def send_udp(family, addr, port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.sendto(b'x', (addr, port))
        return 'sent'
    except OSError as e:
        return errno.errorcode.get(e.errno, repr(e))
    finally:
        s.close()
print('host 127.0.0.1:', connect(socket.AF_INET, '127.0.0.1', %d))
print('host ::1:', connect(socket.AF_INET6, '::1', %d))
print('netns %s:', connect(socket.AF_INET, '%s', %d), send_udp(socket.AF_INET, '%s', %d))
print('netns %s:', connect(socket.AF_INET6, '%s', %d), send_udp(socket.AF_INET6, '%s', %d))
`

// networkProbeNode, formatted with the host's two loopback ports, the
// target's IPv4 address and port, then its IPv6 address and port, prints
// what a TCP connection from Node to each gets.
const networkProbeNode = `
const net = require('net');
const targets = [['127.0.0.1', %d], ['::1', %d], [%q, %d], [%q, %d]];
(async () => {
  for (const [host, port] of targets) {
    const got = await new Promise((resolve) => {
      const c = net.connect({ host, port, timeout: 3000 }, () => { c.destroy(); resolve('connected'); });
      c.on('error', (e) => resolve(e.code));
      c.on('timeout', () => { c.destroy(); resolve('timeout'); });
    });
    console.log(host, got);
  }
})();
`

// Case 12: the sandbox has only loopback. Name resolution fails, and
// neither a listener on the host's loopback nor one in a network namespace
// on the other end of a veth is reachable, over IPv4 or IPv6. Every
// address aimed at is on this machine: the host's loopback, and the
// link-local and ULA addresses this test gave its own veth pair.
func TestIsolationNetwork(t *testing.T) {
	target := newNetnsTarget(t)
	host, hostAccepted := hostListeners(t, target)

	port := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		// The program refuses to resolve a name if a nameserver is not on
		// loopback: a broken sandbox would then send the query off the
		// machine. The name is under .invalid, which never resolves.
		r := m.hostile(t, s, "python", fmt.Sprintf(networkProbePython, port(host[0]), port(host[1]),
			target.v4, target.v4, port(target.l4), target.v4, port(target.l4),
			target.v6, target.v6, port(target.l6), target.v6, port(target.l6)), withTimeout(20))
		// 127.0.0.1 and ::1 are the sandbox's own loopback, where nothing
		// listens: the host's listeners are not there to refuse or accept.
		// The veth's addresses have no route at all.
		want := "sys/class/net: ['lo']\nif_nameindex: ['lo']\nresolve: gaierror True\n" +
			"host 127.0.0.1: ECONNREFUSED\nhost ::1: ECONNREFUSED\n" +
			"netns " + target.v4 + ": ENETUNREACH ENETUNREACH\nnetns " + target.v6 + ": ENETUNREACH ENETUNREACH\n"
		if r.text != want {
			t.Errorf("got %q; want %q", r.text, want)
		}

		js := m.hostile(t, s, "javascript", fmt.Sprintf(networkProbeNode, port(host[0]), port(host[1]), target.v4, port(target.l4), target.v6, port(target.l6)), withTimeout(20))
		wantJS := "127.0.0.1 ECONNREFUSED\n::1 ECONNREFUSED\n" + target.v4 + " ENETUNREACH\n" + target.v6 + " ENETUNREACH\n"
		if js.text != wantJS {
			t.Errorf("javascript: got %q; want %q", js.text, wantJS)
		}

		if h, n := hostAccepted.Load(), target.accepted.Load(); h != 0 || n != 0 {
			t.Errorf("listeners accepted %d (host loopback) and %d (netns) connections from the sandbox; want none", h, n)
		}
		afterCase(t, s, r, js)
	})
}

// Case 13: raw and packet sockets, AF_ALG, AF_VSOCK and io_uring are
// refused.
func TestIsolationSocketFamiliesAndIOURing(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		// Raw and packet sockets are allowed by seccomp and refused by the
		// kernel for want of CAP_NET_RAW; AF_ALG, AF_VSOCK and io_uring_setup
		// are not in containerd's default profile, whose default action is
		// EPERM.
		r := m.hostile(t, s, "python", `
import ctypes, errno, socket
def sock(what, *args):
    try:
        socket.socket(*args).close()
        print(what, 'opened')
    except OSError as e:
        print(what, errno.errorcode[e.errno])
sock('raw ipv4', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock('raw ipv6', socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
sock('raw tcp', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
sock('packet raw', socket.AF_PACKET, socket.SOCK_RAW, 0)
sock('packet dgram', socket.AF_PACKET, socket.SOCK_DGRAM, 0)
sock('alg', 38, socket.SOCK_SEQPACKET, 0)
sock('vsock', 40, socket.SOCK_STREAM, 0)
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)  # io_uring_setup, the same number on x86_64 and arm64
print('io_uring_setup', fd if fd >= 0 else errno.errorcode[ctypes.get_errno()])
`)
		want := "raw ipv4 EPERM\nraw ipv6 EPERM\nraw tcp EPERM\npacket raw EPERM\npacket dgram EPERM\nalg EPERM\nvsock EPERM\nio_uring_setup EPERM\n"
		if r.text != want {
			t.Errorf("got %q; want %q", r.text, want)
		}
		afterCase(t, s, r)
	})
}

// Case 21: neither containerd's, docker's nor a shim's socket is
// reachable, by path or in the abstract namespace.
func TestIsolationNoDaemonSockets(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		// A listener of our own in the host's abstract namespace: the host
		// reaches it, the sandbox, in its own network namespace, must not.
		abstract := "@" + marker(t)
		l, err := net.Listen("unix", abstract)
		if err != nil {
			t.Fatal(err)
		}
		var accepted atomic.Int64
		countAccepts(t, l, &accepted)
		if c, err := net.Dial("unix", abstract); err != nil {
			t.Fatalf("the host cannot reach its own abstract socket %s: %v", abstract, err)
		} else {
			c.Close()
		}

		paths := []string{"/run/containerd/containerd.sock", "/run/containerd/containerd.sock.ttrpc",
			"/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", testAddress, testAddress + ".ttrpc"}
		// Shim sockets (containerd 1.5 and later put them here, not in the
		// abstract namespace).
		shims, _ := filepath.Glob("/run/containerd/s/*")
		paths = append(paths, shims...)
		abstracts := append(hostAbstractSockets(t), abstract)
		want := map[string]string{}
		for _, p := range paths {
			want[p] = "ENOENT"
		}
		for _, a := range abstracts {
			want[a] = "ECONNREFUSED"
		}

		r := m.hostile(t, s, "python", pyProbe+`
import socket
def dial(addr):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(2)
    try:
        c.connect('\0' + addr[1:] if addr.startswith('@') else addr)
    finally:
        c.close()
for a in `+pyList(slices.Concat(paths, abstracts))+`:
    check(a, lambda a=a: dial(a))
`+pyReport)
		assertReport(t, probeReport(t, r), want)

		js := m.hostile(t, s, "javascript", `
const net = require('net');
const addrs = `+pyList(slices.Concat(paths, abstracts))+`;
const out = {};
let left = addrs.length;
new Promise((finished) => { // the last expression: see case 1
  for (const a of addrs) {
    const c = net.createConnection({ path: a.startsWith('@') ? '\0' + a.slice(1) : a });
    const done = (v) => { if (!(a in out)) { out[a] = v; c.destroy(); if (--left === 0) { console.log(JSON.stringify(out)); finished(); } } };
    c.on('connect', () => done('ok'));
    c.on('error', (e) => done(e.code));
  }
});
`)
		assertReport(t, probeReport(t, js), want)
		// Our listener saw the host's own dial, and nothing from the sandbox.
		if n := accepted.Load(); n != 1 {
			t.Errorf("abstract listener %s accepted %d connections; want 1 (the host's)", abstract, n)
		}
		afterCase(t, s, r, js)
	})
}

// hostAbstractSockets lists the abstract unix sockets the host's network
// namespace has, as "@name", without ours (the server's and the tests').
func hostAbstractSockets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 8 && strings.HasPrefix(f[7], "@") && !slices.Contains(out, f[7]) && !strings.Contains(f[7], "csm-marker-") {
			out = append(out, f[7])
		}
	}
	return out
}

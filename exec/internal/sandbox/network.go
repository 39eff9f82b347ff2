package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/egress"
	sandboxoci "code-sandbox-mcp/oci"
)

// NetworkRecord is one connection a sandbox opened through its proxy.
type NetworkRecord = egress.Record

// NetworkTally sums the connections of one host and verdict past a run's
// first records (config.Network.MaxRecords).
type NetworkTally = egress.Tally

// Egress is how the sandboxes of one language reach out, read once from
// its configuration: the proxy's policy, its limits, the names it pins
// and the secrets it adds. Each sandbox gets a proxy of its own on it.
type Egress struct {
	Policy  *egress.Policy
	Limits  egress.Limits
	Keep    int // records kept in full per run (config.Network.MaxRecords)
	Hosts   map[string]netip.Addr
	Secrets map[string]egress.Secret
	// Intercept names the hosts whose TLS the proxy terminates, with
	// certificates of CA; Bundle is what the sandbox then trusts: the
	// host's roots and CA. Both nil without interception.
	Intercept map[string]bool
	CA        *egress.CA
	Bundle    []byte
}

// NewEgress reads n (a language's network, see config.Language.Network):
// its allow and deny lists, its pinned names, and its secrets' values,
// which lookup (os.LookupEnv) reads from the server's environment. A
// secret whose variable is unset, or also passed into every sandbox (a
// name in pass), is an error: the proxy could not keep it from the
// program. ca is the server's CA, for the secrets that intercept their
// host's TLS (nil if none does); hostRoots are the host's trusted roots
// (PEM), which the sandbox trusts beside it.
func NewEgress(n *config.Network, lookup func(string) (string, bool), pass []string, ca *egress.CA, hostRoots []byte) (*Egress, error) {
	if _, err := hostPrefixes(); err != nil {
		return nil, err
	}
	return newEgress(n, lookup, pass, ca, hostRoots, hostPrefixes)
}

// newEgress is NewEgress, with own reading the host's own addresses,
// which the proxy refuses (hostPrefixes, called at each connection).
func newEgress(n *config.Network, lookup func(string) (string, bool), pass []string, ca *egress.CA, hostRoots []byte, own func() ([]netip.Prefix, error)) (*Egress, error) {
	p, err := egress.NewPolicy(n.Allow, n.Deny)
	if err != nil {
		return nil, err
	}
	p.RefuseHost(own)
	keep := n.MaxRecords
	if keep == 0 {
		keep = config.DefaultNetworkRecords
	}
	e := &Egress{
		Policy: p,
		Limits: egress.Limits{
			MaxConns:    n.MaxConnections,
			MaxBytes:    int64(n.MaxBytes),
			IdleTimeout: time.Duration(n.IdleTimeout),
			MaxPerRun:   n.MaxConnectionsPerRun,
			PerSecond:   n.ConnectionsPerSecond,
		},
		Keep:    keep,
		Hosts:   map[string]netip.Addr{},
		Secrets: map[string]egress.Secret{},
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(n.Hosts)) {
		a, err := netip.ParseAddr(n.Hosts[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("hosts: %s: %w", name, err))
			continue
		}
		e.Hosts[egress.Canonical(name)] = a
	}
	for _, host := range slices.Sorted(maps.Keys(n.Secrets)) {
		s := n.Secrets[host]
		if slices.Contains(pass, s.ValueEnv) {
			errs = append(errs, fmt.Errorf("secrets.%q: %s is also passed into every sandbox (pass_through_env, --pass-through-env), which would hand the program the secret the proxy keeps from it; pass one or the other", host, s.ValueEnv))
			continue
		}
		v, ok := s.Value(lookup)
		if !ok {
			errs = append(errs, fmt.Errorf("secrets.%q: the server's environment variable %s is unset or empty; set it where the server starts", host, s.ValueEnv))
			continue
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, fmt.Errorf("secrets.%q: the value of %s holds a line break or a NUL, which no header may", host, s.ValueEnv))
			continue
		}
		e.Secrets[egress.Canonical(host)] = egress.Secret{Header: s.Header, Value: v}
		if s.Intercept {
			if ca == nil {
				errs = append(errs, fmt.Errorf("secrets.%q: intercept needs the proxy's CA, and there is none", host))
				continue
			}
			if e.Intercept == nil {
				e.Intercept, e.CA = map[string]bool{}, ca
				e.Bundle = append(append(slices.Clip(hostRoots), '\n'), ca.PEM...)
			}
			e.Intercept[egress.Canonical(host)] = true
		}
	}
	return e, errors.Join(errs...)
}

// NewEgresses reads the network of every language in langs that has
// one, by name (see NewEgress): one CA for them all, made only if a
// secret intercepts TLS. The host's own addresses are read once here, so
// that a host where they cannot be read fails at the start, and then at
// each connection.
func NewEgresses(langs []config.Language, lookup func(string) (string, bool), pass []string) (map[string]*Egress, error) {
	var ca *egress.CA
	var roots []byte
	out := map[string]*Egress{}
	for _, l := range langs {
		if l.Network == nil {
			continue
		}
		if len(out) == 0 {
			if _, err := hostPrefixes(); err != nil {
				return nil, err
			}
		}
		if l.Network.Intercepts() && ca == nil {
			var err error
			if ca, err = egress.NewCA(); err != nil {
				return nil, err
			}
			roots = HostRoots()
		}
		e, err := newEgress(l.Network, lookup, pass, ca, roots, hostPrefixes)
		if err != nil {
			return nil, fmt.Errorf("the network of %s: %w", l.Name, err)
		}
		out[l.Name] = e
	}
	return out, nil
}

// hostPrefixes are the host's own addresses, those of the server's
// network namespace, each as a one-address prefix, as the kernel has
// them now: the proxy calls it at each connection (see
// egress.Policy.RefuseHost), so that an address added after the server
// started is refused from the moment it is there. Nothing is cached, so
// nothing can be stale; it costs a netlink dump of the addresses and
// links, tens of microseconds (BenchmarkHostAddrCheck).
func hostPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				ip = ip.Unmap()
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return out, nil
}

// network is a sandbox's way out: a network namespace of its own whose
// loopback holds the proxy's listener, and the proxy, served by the
// server from its own namespace.
type network struct {
	trust  string // host directory of the certificates it trusts; "" without interception
	ns     *egress.Netns
	proxy  *egress.Proxy
	cancel context.CancelFunc
	served chan struct{}

	records *egress.Records // since the last Network
}

// openNetwork makes the network of a sandbox whose language has one: its
// namespace, in the sandbox's directory, and its proxy, which serves
// until closeNetwork.
func (s *Sandbox) openNetwork() error {
	e := s.h.Egress[s.lang.Name]
	if s.lang.Network == nil {
		return nil
	}
	var err error
	if e == nil {
		return fmt.Errorf("language %s has a network, but the server read none for it", s.lang.Name)
	}
	n := &network{}
	if e.CA != nil {
		if n.trust, err = writeTrust(s.dir, e); err != nil {
			return err
		}
	}
	ns, err := egress.NewNetns(s.dir)
	if err != nil {
		return err
	}
	n.ns, n.served = ns, make(chan struct{})
	n.records = &egress.Records{Keep: e.Keep}
	n.proxy = &egress.Proxy{
		Policy:    e.Policy,
		Limits:    e.Limits,
		Secrets:   e.Secrets,
		Intercept: e.Intercept,
		CA:        e.CA,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if a, ok := e.Hosts[egress.Canonical(host)]; ok {
				return []netip.Addr{a}, nil
			}
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		Record: func(r egress.Record) {
			if n.records.Add(r) && r.Limit {
				// One line a limit and run: a flood makes thousands.
				s.h.Log.Info("a sandbox's network reached a limit", "run", s.id, "reason", r.Reason)
			}
			if !r.Limit {
				s.h.Log.Debug("network connection", "run", s.id, "host", r.Host, "port", r.Port, "method", r.Method,
					"allowed", r.Allowed, "reason", r.Reason, "bytes_up", r.BytesUp, "bytes_down", r.BytesDown, "took", r.Duration)
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		defer close(n.served)
		if err := n.proxy.Serve(ctx, ns.Listener); err != nil {
			s.h.Log.Warn("network proxy stopped", "run", s.id, "err", err)
		}
	}()
	s.net = n
	return nil
}

// proxyEnv are the variables that point a sandbox's programs at its
// proxy: curl's, Python's (urllib, requests, pip) and npm's, in both
// cases, and Node.js's own from version 24 (NODE_USE_ENV_PROXY).
func (n *network) proxyEnv() []string {
	url := "http://" + n.ns.Listener.Addr().String()
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"} {
		env = append(env, k+"="+url)
	}
	return append(env, "NODE_USE_ENV_PROXY=1")
}

// withNetwork has policy join the sandbox's network namespace, if it has
// one, with the proxy's variables in its environment, which replace any
// of the same name, and pip's (pipEnv), which the language's replace.
func (s *Sandbox) withNetwork(policy *sandboxoci.Policy) {
	if s.net == nil {
		return
	}
	policy.Netns = s.net.ns.Path
	policy.Env = sandboxoci.Env(pipEnv, policy.Env, s.net.proxyEnv())
	if s.net.trust != "" {
		policy.TrustHostDir = s.net.trust
		policy.Env = sandboxoci.Env(policy.Env, trustEnv, nil)
	}
}

// pipEnv lets pip install into the user site, under HOME (/tmp), the one
// place a sandbox can write that is not the workspace, whose files are the
// run's output. PEP 668 refuses any install into Debian's Python unless
// PIP_BREAK_SYSTEM_PACKAGES is set; the system's packages are on the
// read-only root, which nothing can change, so pip, finding it not
// writable, installs into the user site ("Defaulting to user
// installation"), and --target or --prefix work as ever. No cache (it
// would fill /tmp), and no check for a newer pip (a connection the allow
// list may refuse). The start-up hook makes the user site and puts it on
// sys.path (userSiteMarker), so that a package installed later is
// importable in the same interpreter. The language's own variables
// replace these.
var pipEnv = []string{
	"PIP_BREAK_SYSTEM_PACKAGES=1",
	"PIP_NO_CACHE_DIR=1",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
}

// trustEnv points a sandbox's TLS clients at the certificates it trusts
// with TLS interception: OpenSSL's (Python's ssl and urllib, curl),
// requests', pip's, and Node.js's, which adds the CA to its own roots.
var trustEnv = []string{
	"SSL_CERT_FILE=" + sandboxoci.TrustDir + "/bundle.pem",
	"REQUESTS_CA_BUNDLE=" + sandboxoci.TrustDir + "/bundle.pem",
	"CURL_CA_BUNDLE=" + sandboxoci.TrustDir + "/bundle.pem",
	"PIP_CERT=" + sandboxoci.TrustDir + "/bundle.pem",
	"NODE_EXTRA_CA_CERTS=" + sandboxoci.TrustDir + "/ca.pem",
}

// writeTrust writes the certificates a sandbox with TLS interception
// trusts into dir/trust, readable by any uid: ca.pem and bundle.pem.
func writeTrust(dir string, e *Egress) (string, error) {
	trust := filepath.Join(dir, "trust")
	if err := os.Mkdir(trust, 0o755); err != nil {
		return "", fmt.Errorf("write the trusted certificates: %w", err)
	}
	for name, data := range map[string][]byte{"ca.pem": e.CA.PEM, "bundle.pem": e.Bundle} {
		f := filepath.Join(trust, name)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return "", fmt.Errorf("write the trusted certificates: %w", err)
		}
		// WriteFile is subject to the umask.
		if err := os.Chmod(f, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(trust, 0o755); err != nil {
		return "", err
	}
	return trust, nil
}

// HostRoots reads the host's trusted roots, PEM, from the first of the
// usual bundles there is; nil if none is.
func HostRoots() []byte {
	for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
		if b, err := os.ReadFile(f); err == nil {
			return b
		}
	}
	return nil
}

// settleTimeout bounds Network's wait for the connections that are
// closing, or open, to end; acceptTimeout the wait of Network and
// closeNetwork for the proxy to accept those made and not accepted yet,
// which a flood leaves (the proxy closes and records those past its
// limits in its accept loop, thousands a second).
const (
	settleTimeout = 200 * time.Millisecond
	acceptTimeout = 2 * time.Second
)

// awaitAccepts waits up to acceptTimeout for the proxy's accept queue to empty.
func (n *network) awaitAccepts() {
	for deadline := time.Now().Add(acceptTimeout); n.proxy.Pending() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// Network returns what the proxy told of the connections that ended
// since the last call, the run's, and starts a new run for the proxy's
// per-run bound: the first records (Egress.Keep) in the order they
// ended, and the rest tallied per host and verdict; nil and nil for a
// sandbox with no network, and an empty list of records for a run that
// opened no connection. It waits up to acceptTimeout for the proxy to
// accept the connections made, and then up to settleTimeout for those
// still open, or closing, to end: a cell's program closed its connections as
// it finished, but the proxy sees each end a moment later. One still
// open then (a process left running holds it) is in a later call's
// records.
func (s *Sandbox) Network() ([]NetworkRecord, []NetworkTally) {
	n := s.net
	if n == nil {
		return nil, nil
	}
	n.awaitAccepts()
	for deadline := time.Now().Add(settleTimeout); n.proxy.Live() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	n.proxy.NewRun()
	out, rest := n.records.Take()
	if out == nil {
		out = []NetworkRecord{}
	}
	return out, rest
}

// closeNetwork waits up to acceptTimeout for the proxy to accept the
// connections made, ends them, stops its proxy and removes its
// namespace's mount; the namespace goes with its last
// process. It is a no-op for a sandbox with no network, or once done.
func (s *Sandbox) closeNetwork() {
	n := s.net
	if n == nil || n.cancel == nil {
		return
	}
	n.awaitAccepts()
	n.cancel()
	n.cancel = nil
	if err := n.ns.Close(); err != nil {
		s.h.Log.Warn("close the sandbox's network", "run", s.id, "err", err)
	}
	<-n.served
}

package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Network is a [network] or [languages.NAME.network] table: a way out of
// the sandbox, through an HTTP proxy of the server's that lets through
// only the hosts Allow names (see SECURITY.md). A sandbox whose language
// has no Allow entry has no network at all.
type Network struct {
	// Allow lists the destinations the proxy lets through: host names
	// ("api.example.com"), every name under a domain ("*.example.com"),
	// IP addresses and prefixes, each only as written. Deny wins over
	// Allow.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
	// Hosts pins names to addresses, as /etc/hosts does, for the proxy
	// alone: it connects there without asking the host's resolver. An
	// address still has to be one the proxy may reach.
	Hosts map[string]string `toml:"hosts"`
	// MaxConnections bounds one sandbox's connections open at once
	// through the proxy, and MaxBytes the bytes of all of them, both
	// ways, over the sandbox's life; IdleTimeout ends a connection on
	// which nothing moved for that long.
	MaxConnections int      `toml:"max_connections"`
	MaxBytes       Size     `toml:"max_bytes"`
	IdleTimeout    Duration `toml:"idle_timeout"`
	// MaxConnectionsPerRun bounds the connections one run (a session's
	// cell, a task) opens through the proxy, and ConnectionsPerSecond the
	// rate at which it opens them, in bursts of up to a second's worth:
	// a connection past either gets 503 at once, saying which.
	MaxConnectionsPerRun int `toml:"max_connections_per_run"`
	ConnectionsPerSecond int `toml:"connections_per_second"`
	// MaxRecords bounds the connections a run's result and audit record
	// list one by one; the rest are summed per host and verdict, in at
	// most as many tallies again.
	MaxRecords int `toml:"max_records"`
	// Secrets are headers the proxy sets on the requests to one host
	// each, keyed by the host's name: the sandbox never holds their
	// values.
	Secrets map[string]NetworkSecret `toml:"secrets"`
}

// NetworkSecret is one header the proxy sets for one host: Header, with
// the value of the server's environment variable ValueEnv, put in
// Format where it says "{}" ("Bearer {}"; "" is the value alone).
// Without Intercept it goes on plain-HTTP requests only; with it, the
// proxy terminates the host's TLS with a certificate of its own CA, which
// the sandbox trusts, and sets it on HTTPS requests too.
type NetworkSecret struct {
	Header    string `toml:"header"`
	ValueEnv  string `toml:"value_env"`
	Format    string `toml:"format"`
	Intercept bool   `toml:"intercept"`
}

// Network defaults.
const (
	DefaultNetworkConnections = 16
	DefaultNetworkBytes       = 256 << 20
	DefaultNetworkIdle        = time.Minute
	DefaultNetworkPerRun      = 1000
	DefaultNetworkPerSecond   = 100
	DefaultNetworkRecords     = 100
)

// On reports whether n lets anything out.
func (n *Network) On() bool { return n != nil && len(n.Allow) > 0 }

// Value returns the header's value: Format with the variable's value in
// place of "{}". lookup is os.LookupEnv; ok is false if the variable is
// unset or empty.
func (s NetworkSecret) Value(lookup func(string) (string, bool)) (string, bool) {
	v, ok := lookup(s.ValueEnv)
	if !ok || v == "" {
		return "", false
	}
	if s.Format == "" {
		return v, true
	}
	return strings.Replace(s.Format, "{}", v, 1), true
}

// clone returns a deep copy of n, with its defaults filled in; nil for
// nil.
func (n *Network) clone() *Network {
	if n == nil {
		return nil
	}
	c := *n
	c.Allow = slices.Clone(n.Allow)
	c.Deny = slices.Clone(n.Deny)
	c.Hosts = maps.Clone(n.Hosts)
	c.Secrets = maps.Clone(n.Secrets)
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultNetworkConnections
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultNetworkBytes
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = Duration(DefaultNetworkIdle)
	}
	if c.MaxConnectionsPerRun == 0 {
		c.MaxConnectionsPerRun = DefaultNetworkPerRun
	}
	if c.ConnectionsPerSecond == 0 {
		c.ConnectionsPerSecond = DefaultNetworkPerSecond
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultNetworkRecords
	}
	return &c
}

// networkFor is the network of language name: its own table if it has
// one, else [network]; nil if that lets nothing out.
func (c *Config) networkFor(name string) *Network {
	n := c.Network
	if t, ok := c.Languages[name]; ok && t.Network != nil {
		n = t.Network
	}
	if !n.On() {
		return nil
	}
	return n.clone()
}

// Intercepts reports whether a secret of n has the proxy intercept its
// host's TLS.
func (n *Network) Intercepts() bool {
	if n == nil {
		return false
	}
	for _, s := range n.Secrets {
		if s.Intercept {
			return true
		}
	}
	return false
}

// SecretEnv names the server's environment variables that hold the
// network secrets of [network] and of every enabled language, sorted,
// each once.
func (c *Config) SecretEnv() []string {
	var names []string
	add := func(n *Network) {
		if n == nil {
			return
		}
		for _, s := range n.Secrets {
			if !slices.Contains(names, s.ValueEnv) {
				names = append(names, s.ValueEnv)
			}
		}
	}
	add(c.Network)
	for _, name := range c.Names() {
		add(c.Languages[name].Network)
	}
	slices.Sort(names)
	return names
}

// headerName is what an HTTP header's name may hold (RFC 9110's token).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// check reports the problems of a network table at key. The entries of
// Allow and Deny are checked by the executor, which reads them (a bad one
// stops the server's start); here, their shape.
func (n *Network) check(key string) []error {
	if n == nil {
		return nil
	}
	var errs []error
	bad := reporter(&errs, "")
	for _, list := range []struct {
		name    string
		entries []string
	}{{"allow", n.Allow}, {"deny", n.Deny}} {
		for _, e := range list.entries {
			if e == "" || strings.TrimSpace(e) != e || strings.Contains(e, "://") {
				bad(key+"."+list.name, "%q; want a host name (\"api.example.com\"), a domain's names (\"*.example.com\"), an IP address or a prefix (\"192.0.2.0/24\")", e)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(n.Hosts)) {
		if _, err := netip.ParseAddr(n.Hosts[name]); err != nil || name == "" || strings.Contains(name, "*") {
			bad(key+".hosts", "%s = %q; want a host name and an IP address, such as \"api.internal\" = \"192.0.2.10\"", name, n.Hosts[name])
		}
	}
	if n.MaxConnections < 0 {
		bad(key+".max_connections", "%d; want a positive number (0 is the default, %d)", n.MaxConnections, DefaultNetworkConnections)
	}
	if n.MaxBytes < 0 {
		bad(key+".max_bytes", "%s; want a positive size (0 is the default, %s)", n.MaxBytes, Size(DefaultNetworkBytes))
	}
	if n.IdleTimeout < 0 {
		bad(key+".idle_timeout", "%s; want a positive duration (0 is the default, %s)", time.Duration(n.IdleTimeout), DefaultNetworkIdle)
	}
	for _, c := range []struct {
		name   string
		v, def int
		max    int
		maxWhy string
	}{
		{"max_connections_per_run", n.MaxConnectionsPerRun, DefaultNetworkPerRun, 1 << 20, ""},
		{"connections_per_second", n.ConnectionsPerSecond, DefaultNetworkPerSecond, 100000, ""},
		{"max_records", n.MaxRecords, DefaultNetworkRecords, 1000, "; each record is kept in memory and sent in the run's result, whose size it bounds"},
	} {
		if c.v < 0 || c.v > c.max {
			bad(key+"."+c.name, "%d; want 1 to %d (0 is the default, %d)%s", c.v, c.max, c.def, c.maxWhy)
		}
	}
	for _, host := range slices.Sorted(maps.Keys(n.Secrets)) {
		s := n.Secrets[host]
		k := fmt.Sprintf("%s.secrets.%q", key, host)
		if host == "" || strings.Contains(host, "*") || strings.Contains(host, "/") {
			bad(k, "a secret is for one host, named in full (no wildcard)")
		}
		if !headerName(s.Header) {
			bad(k+".header", "%q; want an HTTP header's name, such as \"Authorization\"", s.Header)
		}
		if !envName.MatchString(s.ValueEnv) {
			bad(k+".value_env", "%q; want the name of the server's environment variable that holds the value", s.ValueEnv)
		}
		if s.Format != "" && strings.Count(s.Format, "{}") != 1 {
			bad(k+".format", "%q; want the header's value with one \"{}\" where the secret goes, such as \"Bearer {}\"", s.Format)
		}
	}
	return errs
}

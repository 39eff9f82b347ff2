// Package egress is a sandbox's way out, for a language given a network
// (issue 31): a Policy built from its allow and deny lists answers for a
// host name as a client asked for it, and then for each address the name
// resolved to; a Proxy, one per sandbox, serves HTTP CONNECT and plain
// HTTP on a listener it is given, and connects only where the Policy
// allows. It knows nothing of network namespaces, containerd or MCP: the
// sandbox's side (a listener the sandbox can reach, and nothing else) is
// its caller's. Nothing uses it yet.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Policy is an allowlist of destinations with a denylist that wins over
// it. Its zero value allows nothing.
type Policy struct {
	allow, deny rules
	host        func() ([]netip.Prefix, error) // reads the host's own addresses: see RefuseHost
}

// rules is one list: exact names, wildcard suffixes ("*.example.com"
// kept as ".example.com"), and addresses or prefixes written as such.
type rules struct {
	names    map[string]bool
	suffixes []string
	prefixes []netip.Prefix
}

// ErrDenied marks every refusal of a Policy.
var ErrDenied = errors.New("not allowed by the sandbox's network policy")

// NewPolicy builds a Policy from allow and deny entries, each a domain
// name ("api.example.com"), a wildcard that matches any name under a
// domain but not the domain itself ("*.example.com"), an IP address, or
// a prefix ("192.0.2.0/24"). Names are matched without regard to case or
// a trailing dot. It reports every bad entry, each with its list.
func NewPolicy(allow, deny []string) (*Policy, error) {
	var errs []error
	p := &Policy{}
	p.allow, errs = parseRules("allow", allow, errs)
	p.deny, errs = parseRules("deny", deny, errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

func parseRules(list string, entries []string, errs []error) (rules, []error) {
	r := rules{names: map[string]bool{}}
	for _, e := range entries {
		if pfx, err := netip.ParsePrefix(e); err == nil {
			r.prefixes = append(r.prefixes, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			r.prefixes = append(r.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		wild := strings.HasPrefix(e, "*.")
		name := Canonical(strings.TrimPrefix(e, "*."))
		if err := checkName(name); err != nil {
			errs = append(errs, fmt.Errorf("%s entry %q: %w", list, e, err))
			continue
		}
		if wild {
			r.suffixes = append(r.suffixes, "."+name)
		} else {
			r.names[name] = true
		}
	}
	return r, errs
}

// Canonical is a name as it is compared: lower case, without a trailing
// dot. The proxy looks up pinned names, secrets and intercepted hosts
// by it too.
func Canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// checkName reports whether name (canonical) is a host name this policy
// can hold: dot-separated labels of letters, digits and hyphens, 1 to 63
// bytes each and 253 in all, with no label starting or ending with a
// hyphen. Internationalised names are written in their ASCII (xn--)
// form. A name that parses as an address is one only when written as one
// (NewPolicy tries that first), so "1.2.3" is refused here.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("want a domain name of 1 to 253 characters, a *.domain wildcard, an IP address or a prefix")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("each dot-separated label must be 1 to 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("label %q holds %q: write internationalised names in their xn-- form", l, c)
			}
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return errors.New("its last label is all digits: write an address as an address")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// matches reports whether r holds name (canonical) or, for an address
// host, an entry that contains it.
func (r rules) matches(name string) bool {
	if a, err := netip.ParseAddr(name); err == nil {
		return r.holds(a)
	}
	if r.names[name] {
		return true
	}
	for _, s := range r.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// holds reports whether an address or prefix entry of r contains a.
func (r rules) holds(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Host reports whether a client may ask for host (a name, or an address
// literal, as in a CONNECT line or a Host header, without its port): it
// must match an allow entry and no deny entry. An address literal
// matches only address and prefix entries: listing a name does not let
// a program reach its addresses by number.
func (p *Policy) Host(host string) error {
	name := Canonical(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if a, err := netip.ParseAddr(name); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("%q names an interface of the host: %w", host, ErrDenied)
		}
		name = a.Unmap().String()
	} else if checkName(name) != nil {
		return fmt.Errorf("%q is not a host name: %w", host, ErrDenied)
	}
	if p.deny.matches(name) {
		return fmt.Errorf("%s is on the deny list: %w", name, ErrDenied)
	}
	if !p.allow.matches(name) {
		return fmt.Errorf("%s is not on the allow list: %w", name, ErrDenied)
	}
	return nil
}

// Addr reports whether the proxy may connect to a, an address that an
// allowed host resolved to (or the host itself, written as an address).
// A denied prefix refuses it. An address that is not public (see
// Special), or is one of the host's own (see RefuseHost), is refused
// unless an allow entry written as an address or a prefix contains it: a
// name on the allow list that resolves to the host's loopback, or into a
// private network, is not reached through it.
func (p *Policy) Addr(a netip.Addr) error {
	_, err := p.First([]netip.Addr{a})
	return err
}

// First returns the first of addrs that Addr allows, unmapped, or the
// refusal of the first of them. It reads the host's own addresses at
// most once, and only if an address needs them.
func (p *Policy) First(addrs []netip.Addr) (netip.Addr, error) {
	own := sync.OnceValues(p.hostAddrs)
	var first error
	for _, a := range addrs {
		err := p.addr(a.Unmap(), own)
		if err == nil {
			return a.Unmap(), nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("no address to connect to: %w", ErrDenied)
	}
	return netip.Addr{}, first
}

// addr is Addr, the host's own addresses read by own.
func (p *Policy) addr(a netip.Addr, own func() ([]netip.Prefix, error)) error {
	if a.Zone() != "" {
		return fmt.Errorf("address %s names an interface of the host: %w", a, ErrDenied)
	}
	if p.deny.holds(a) {
		return fmt.Errorf("address %s is on the deny list: %w", a, ErrDenied)
	}
	if p.allow.holds(a) {
		return nil
	}
	why := Special(a)
	if why == "" {
		host, err := own()
		if err != nil {
			return fmt.Errorf("address %s: the host's own addresses, which it may be one of, could not be read: %v: %w", a, err, ErrDenied)
		}
		if slices.ContainsFunc(host, func(h netip.Prefix) bool { return h.Contains(a) }) {
			why = "one of the host's own addresses"
		}
	}
	if why != "" {
		return fmt.Errorf("address %s is %s, and no allow entry lists it: %w", a, why, ErrDenied)
	}
	return nil
}

// RefuseHost makes Addr refuse the host's own addresses, as it does
// private ones, unless an allow entry lists them: a service that listens
// on the host's public address is the host's, not the Internet's. own
// reads them, and is called at each check that needs them (once per
// connection at most: see First), so that an address the host gains
// after the server started (DHCP, a VPN, a bridge) is refused from the
// moment the host has it. An error from own refuses the address. The
// package makes no call to the system itself: own is its caller's.
func (p *Policy) RefuseHost(own func() ([]netip.Prefix, error)) {
	p.host = own
}

// hostAddrs reads the host's own addresses; none without RefuseHost.
func (p *Policy) hostAddrs() ([]netip.Prefix, error) {
	if p.host == nil {
		return nil, nil
	}
	return p.host()
}

// special lists the ranges, beyond those netip classifies, that no public
// service lives in, or that lead to another address. The documentation
// ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)
// are not among them: nothing answers there outside a network made for
// a test, which is what they are for.
var special = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "in \"this network\" (0.0.0.0/8)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "in the carrier-grade NAT range (100.64.0.0/10)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "in the IETF protocol assignments (192.0.0.0/24)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "in the benchmarking range (198.18.0.0/15)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4, broadcast among them)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address, which may lead to any IPv4 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address, which embeds an IPv4 one"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address, which embeds an IPv4 one"},
}

// Special says why a is not a public address, or "" if it is: loopback,
// unspecified, link-local, multicast, private (RFC 1918 and unique local
// IPv6), and the ranges in special.
func Special(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsPrivate():
		return "a private address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.why
		}
	}
	return ""
}

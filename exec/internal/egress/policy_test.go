package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestHost(t *testing.T) {
	p, err := NewPolicy(
		[]string{"api.example.com", "*.pypi.example", "files.example.org.", "198.51.100.7", "203.0.113.0/28", "2001:db8::/64"},
		[]string{"secret.pypi.example", "203.0.113.8"},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"api.example.com", true},
		{"API.Example.COM.", true},     // case and a trailing dot
		{"example.com", false},         // the parent of an exact name
		{"x.api.example.com", false},   // a child of an exact name
		{"files.example.org", true},    // listed with a trailing dot
		{"pypi.example", false},        // a wildcard is not its own domain
		{"a.pypi.example", true},       // one level under
		{"a.b.pypi.example", true},     // two levels under
		{"evilpypi.example", false},    // a suffix that is not a label
		{"secret.pypi.example", false}, // deny wins
		{"198.51.100.7", true},         // an address listed as such
		{"[198.51.100.7]", true},       // bracketed, as in a URL
		{"198.51.100.8", false},        // another address
		{"203.0.113.5", true},          // in a listed prefix
		{"203.0.113.8", false},         // denied inside an allowed prefix
		{"203.0.113.16", false},        // past the prefix
		{"[2001:db8::1]", true},        // IPv6 in a listed prefix
		{"::ffff:198.51.100.7", true},  // an IPv4-mapped form of a listed address
		{"[2001:db8::1%eth0]", false},  // a zone: an interface of the host
		{"", false},                    // nothing
		{"api.example.com:443", false}, // a port is the caller's to strip
		{"api.example.com/x", false},   // not a host name
		{"api..example.com", false},    // an empty label
		{"-api.example.com", false},    // a leading hyphen
		{strings.Repeat("a", 64) + ".example.com", false},
	} {
		err := p.Host(tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("Host(%q): got %v; want allowed %v", tc.host, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("Host(%q): %v does not wrap ErrDenied", tc.host, err)
		}
	}
}

// A name on the allow list does not let a program reach that name's
// addresses by number: address hosts match address entries only.
func TestHostAddressNeedsAnAddressEntry(t *testing.T) {
	p, err := NewPolicy([]string{"api.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Host("198.51.100.7"); err == nil {
		t.Error("an address was allowed by a name entry")
	}
}

func TestZeroPolicyAllowsNothing(t *testing.T) {
	var p Policy
	if err := p.Host("api.example.com"); err == nil {
		t.Error("the zero Policy allowed a host")
	}
	if err := p.Addr(netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Error("the zero Policy allowed loopback")
	}
}

func TestAddr(t *testing.T) {
	p, err := NewPolicy([]string{"api.example.com", "10.1.2.0/24", "fd00::5"}, []string{"198.51.100.66"})
	if err != nil {
		t.Fatal(err)
	}
	p.RefuseHost(static(netip.MustParsePrefix("198.51.100.1/32")))
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"198.51.100.7", true},         // public (documentation ranges count as public)
		{"2001:db8::7", true},          // public IPv6
		{"127.0.0.1", false},           // loopback
		{"127.8.9.1", false},           // all of 127/8
		{"::1", false},                 // IPv6 loopback
		{"::ffff:127.0.0.1", false},    // IPv4-mapped loopback
		{"0.0.0.0", false},             // unspecified
		{"0.1.2.3", false},             // this network
		{"10.0.0.1", false},            // private
		{"10.1.2.3", true},             // private, but in an allowed prefix
		{"172.16.0.1", false},          // private
		{"192.168.1.1", false},         // private
		{"100.64.0.1", false},          // carrier-grade NAT
		{"169.254.169.254", false},     // link-local: cloud metadata
		{"fe80::1", false},             // IPv6 link-local
		{"fd00::1", false},             // unique local
		{"fd00::5", true},              // unique local, listed
		{"224.0.0.1", false},           // multicast
		{"ff02::1", false},             // IPv6 multicast
		{"255.255.255.255", false},     // broadcast
		{"198.18.0.1", false},          // benchmarking
		{"192.0.0.170", false},         // IETF protocol assignments
		{"64:ff9b::a00:1", false},      // NAT64 of 10.0.0.1
		{"2002:a00:1::1", false},       // 6to4 of 10.0.0.1
		{"2001:0:a00:1::1", false},     // Teredo
		{"198.51.100.66", false},       // denied
		{"198.51.100.1", false},        // the host's own
		{"::ffff:198.51.100.1", false}, // the host's own, IPv4-mapped
		{"2001:db8::7%eth0", false},    // a zone: an interface of the host
	} {
		err := p.Addr(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok {
			t.Errorf("Addr(%s): got %v; want allowed %v", tc.addr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("Addr(%s): %v does not wrap ErrDenied", tc.addr, err)
		}
	}
}

// An allow entry for the host's own address lets it through, as for a
// private one.
func TestAddrHostListed(t *testing.T) {
	p, err := NewPolicy([]string{"198.51.100.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.RefuseHost(static(netip.MustParsePrefix("198.51.100.0/24")))
	if err := p.Addr(netip.MustParseAddr("198.51.100.1")); err != nil {
		t.Errorf("a listed host address: %v", err)
	}
	if err := p.Addr(netip.MustParseAddr("198.51.100.2")); err == nil {
		t.Error("an unlisted host address was allowed")
	}
}

// static reads the host's own addresses as prefixes, always the same.
func static(prefixes ...netip.Prefix) func() ([]netip.Prefix, error) {
	return func() ([]netip.Prefix, error) { return prefixes, nil }
}

// The host's own addresses are read at each check, not once: an address
// the host gains is refused from the next check on, and one it loses is
// allowed again. A check reads them once however many addresses it
// weighs, and not at all where they cannot matter (a special, listed or
// denied address). An error reading them refuses, with the reason.
func TestAddrHostReadAtEachCheck(t *testing.T) {
	p, err := NewPolicy([]string{"api.example.com", "198.51.100.9"}, []string{"198.51.100.66"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		own   []netip.Prefix
		fail  error
		reads int
	)
	p.RefuseHost(func() ([]netip.Prefix, error) {
		reads++
		return own, fail
	})
	late := netip.MustParseAddr("198.51.100.7")
	if err := p.Addr(late); err != nil {
		t.Fatalf("Addr(%s) before the host has it: %v", late, err)
	}
	own = []netip.Prefix{netip.PrefixFrom(late, 32)}
	if err := p.Addr(late); err == nil || !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "198.51.100.7 is one of the host's own addresses") {
		t.Errorf("Addr(%s) once the host has it: %v; want it refused as the host's own", late, err)
	}
	own = nil
	if err := p.Addr(late); err != nil {
		t.Errorf("Addr(%s) once the host no longer has it: %v", late, err)
	}

	own, reads = []netip.Prefix{netip.PrefixFrom(late, 32)}, 0
	addrs := []netip.Addr{late, netip.MustParseAddr("198.51.100.8"), netip.MustParseAddr("198.51.100.10")}
	if a, err := p.First(addrs); err != nil || a != addrs[1] || reads != 1 {
		t.Errorf("First(%v) = %v, %v after %d reads; want %v after 1", addrs, a, err, reads, addrs[1])
	}
	reads = 0
	for _, a := range []string{"10.0.0.1", "127.0.0.1", "198.51.100.9", "198.51.100.66"} {
		p.Addr(netip.MustParseAddr(a))
	}
	if reads != 0 {
		t.Errorf("checks of private, loopback, listed and denied addresses read the host's %d times; want none", reads)
	}

	own, fail = nil, errors.New("netlink: no buffer space")
	if err := p.Addr(late); err == nil || !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "could not be read: netlink: no buffer space") {
		t.Errorf("Addr(%s) when the host's addresses cannot be read: %v; want it refused, saying why", late, err)
	}
	if err := p.Addr(netip.MustParseAddr("198.51.100.9")); err != nil {
		t.Errorf("Addr of a listed address when the host's addresses cannot be read: %v; want it allowed", err)
	}
	if _, err := p.First(nil); err == nil || !errors.Is(err, ErrDenied) {
		t.Errorf("First(nil): %v; want a refusal", err)
	}
}

func TestNewPolicyErrors(t *testing.T) {
	_, err := NewPolicy([]string{"ok.example", "bad_name.example", "*.", "1.2.3", "ünicode.example"}, []string{"", "x.-y.example"})
	if err == nil {
		t.Fatal("got no error")
	}
	for _, want := range []string{
		`allow entry "bad_name.example"`,
		`allow entry "*."`,
		`allow entry "1.2.3"`,
		`allow entry "ünicode.example"`,
		"xn--",
		`deny entry ""`,
		`deny entry "x.-y.example"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.example") {
		t.Errorf("error %q names a good entry", err)
	}
}

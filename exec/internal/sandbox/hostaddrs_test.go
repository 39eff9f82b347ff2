package sandbox

import (
	"net/netip"
	"testing"

	"code-sandbox-mcp/exec/internal/egress"
)

// BenchmarkHostAddrCheck is the cost of the check of one connection's
// address against the host's own addresses: "static" with a list read
// once at the start (before issue 44), "live" with hostPrefixes read at
// each connection (now).
func BenchmarkHostAddrCheck(b *testing.B) {
	own, err := hostPrefixes()
	if err != nil {
		b.Fatal(err)
	}
	// A public address, which is checked against the host's own.
	to := netip.MustParseAddr("203.0.113.77")
	for _, bc := range []struct {
		name string
		own  func() ([]netip.Prefix, error)
	}{
		{"static", func() ([]netip.Prefix, error) { return own, nil }},
		{"live", hostPrefixes},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := egress.NewPolicy([]string{"api.example.com"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			p.RefuseHost(bc.own)
			for b.Loop() {
				if err := p.Addr(to); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

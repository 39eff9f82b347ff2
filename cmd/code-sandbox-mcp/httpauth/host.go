package httpauth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// CheckHost serves next only the requests that, when they arrive on a
// loopback connection (the local address of http.LocalAddrContextKey),
// name a loopback host in their Host header: localhost, an address of
// 127.0.0.0/8 or ::1, with or without a port. It is the other half, with
// CheckOrigin, of MCP's defence against DNS rebinding, where a web page
// gets the user's browser to call a server on the user's machine under a
// name the attacker controls, which the browser sends as Host. Any other
// request on loopback gets 403 with a short plain-text reason. A request
// on a connection beyond loopback passes, as does one whose local address
// is not known: rebinding reaches only servers on the user's own machine.
// The rule is mcp-go's, which applies it to the requests its
// StreamableHTTPServer.ServeHTTP serves; CheckHost applies it to every
// endpoint that wants it.
func CheckHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if ok && local != nil && isLoopbackHost(local.String()) && !isLoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not a loopback name; on loopback this server answers only to localhost, 127.0.0.1 and [::1]", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether s, a host or host:port (an IPv6 address
// in brackets, or bare without a port), is localhost or a loopback
// address. Like LoopbackOnly it resolves no name.
func isLoopbackHost(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

package httpauth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// CheckOrigin serves next only the requests whose Origin header, if they
// have one, is one of allowed or the server's own (see ownOrigin): MCP's
// defence against DNS rebinding, where a web page the user visits gets
// its browser to call a server on the user's machine under a name the
// attacker controls. Origins are compared as ParseOrigin writes them, so
// case and default ports do not matter; an entry of allowed that
// ParseOrigin refuses matches nothing. A request with more than one
// Origin header, an unparsable one, or one neither allowed nor the
// server's own (the opaque "null" included) gets 403 with a short
// plain-text reason. A request without Origin, as from any client that
// is not a browser, passes.
func CheckOrigin(allowed []string, next http.Handler) http.Handler {
	ok := map[string]bool{}
	for _, a := range allowed {
		if o, err := ParseOrigin(a); err == nil {
			ok[o] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values("Origin")
		switch {
		case len(values) == 0:
			next.ServeHTTP(w, r)
			return
		case len(values) > 1:
			http.Error(w, "forbidden: more than one Origin header", http.StatusForbidden)
			return
		}
		o, err := ParseOrigin(values[0])
		if err != nil {
			http.Error(w, "forbidden: malformed Origin header", http.StatusForbidden)
			return
		}
		if !ok[o] && !ownOrigin(o, r) {
			http.Error(w, fmt.Sprintf("forbidden: origin %s is not allowed (--allowed-origins)", o), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin reports whether o, as ParseOrigin writes it, is the origin of
// the loopback address r reached: r's connection is on loopback (the
// local address of http.LocalAddrContextKey), o's scheme is https with
// TLS and http without, its port (or its scheme's default) is the local
// address's, and its host is that address's IP or localhost. MCP asks a
// server to accept its own origin, and the conformance suite sends it.
//
// It is judged against the listener's address, never against the Host
// header, which the browser takes from the page's URL: a rebinding page
// at http://evil.example:PORT sends Host evil.example:PORT and that very
// name as its Origin, and its Origin names no loopback address (nor does
// its Host pass CheckHost). An origin this passes is a page served from
// the listener's own address and port, and this server serves no pages;
// or, through localhost, from the other loopback family's address at the
// same port, which only a process on this machine can listen on.
func ownOrigin(o string, r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	lip, err := netip.ParseAddr(lhost)
	if err != nil || !lip.Unmap().IsLoopback() {
		return false
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	scheme, port := "http", u.Port()
	if r.TLS != nil {
		scheme = "https"
	}
	if u.Scheme != scheme {
		return false
	}
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if port != lport {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.Unmap() == lip.Unmap()
}

// ParseOrigin returns the origin s in the form CheckOrigin compares:
// scheme://host[:port], scheme and host in lower case, and the port left
// out where it is the scheme's default (80 for http, 443 for https). It
// refuses anything that is not an origin: no scheme or host, or a user,
// path, query or fragment.
func ParseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port]", s)
	}
	if u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] and nothing after it", s)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("origin %q: empty port", s)
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

// LoopbackOnly reports whether the listen address addr (host:port) listens
// on loopback alone: its host is "localhost" or a loopback IP address,
// such as 127.0.0.1 or ::1. It resolves no name: "localhost" is taken to
// be loopback, as RFC 6761 says it is, and any other name is not; neither
// is an empty host or an unspecified address (":8080", "0.0.0.0:8080",
// "[::]:8080"), which listen on every interface.
func LoopbackOnly(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listen address %q: want HOST:PORT, such as 127.0.0.1:8080", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil
	}
	return ip.Unmap().IsLoopback(), nil
}

package app

import (
	"log/slog"
	"net"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/connlimit"
	"code-sandbox-mcp/config"
)

// connBounds are [http]'s bounds on the connections of one listener, the
// /mcp listener's and the metrics listener's alike (each counts its
// own). The zero value bounds only the time a request's headers take
// (readHeaderTimeout).
type connBounds struct {
	// read bounds a whole request, headers and body (http.Server's
	// ReadTimeout); idle a kept-alive connection's wait for its next
	// request; write each write of a response (connlimit.PerWrite).
	read, idle, write time.Duration
	// max bounds the connections open at once, perClient those from one
	// remote address; 0 is no bound.
	max, perClient int
}

// connBoundsOf returns the bounds of h.
func connBoundsOf(h config.HTTP) connBounds {
	return connBounds{
		read: time.Duration(h.ReadTimeout), idle: time.Duration(h.IdleTimeout), write: time.Duration(h.WriteTimeout),
		max: h.MaxConnections, perClient: h.MaxConnectionsPerClient,
	}
}

// readHeaderTimeout is how long a request's headers may take:
// readHeaderTimeout, or the whole request's bound if that is shorter.
func (b connBounds) readHeaderTimeout() time.Duration {
	if b.read > 0 && b.read < readHeaderTimeout {
		return b.read
	}
	return readHeaderTimeout
}

// listen returns ln with b's bounds on its open connections; a
// connection past one is closed at once (answered 503 first if
// plainHTTP), counted in tel, and logged at a bounded rate.
func (b connBounds) listen(ln net.Listener, plainHTTP bool, tel *telemetry, logger *slog.Logger) net.Listener {
	return connlimit.New(ln, connlimit.Config{
		Max: b.max, PerClient: b.perClient, PlainHTTP: plainHTTP,
		Refused: tel.connRefused, Logger: logger.With("listen", ln.Addr().String()),
	})
}

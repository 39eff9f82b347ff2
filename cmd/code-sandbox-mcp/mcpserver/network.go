package mcpserver

import (
	"fmt"
	"strings"

	"code-sandbox-mcp/exec"
)

// Connection is one connection through a sandbox's proxy, as a tool
// result's structuredContent and the audit log's run_ended list it.
type Connection struct {
	Host         string `json:"host"`
	Port         int    `json:"port"`
	Method       string `json:"method"`
	Allowed      bool   `json:"allowed"`
	Reason       string `json:"reason,omitempty"`
	SecretHeader string `json:"secret_header,omitempty"`
	BytesUp      int64  `json:"bytes_up"`
	BytesDown    int64  `json:"bytes_down"`
	DurationMs   int64  `json:"duration_ms"`
}

// Connections converts a run's records; nil (left out) for a run with no
// network, [] for one that opened no connection.
func Connections(recs []exec.NetworkRecord) []Connection {
	if recs == nil {
		return nil
	}
	out := make([]Connection, 0, len(recs))
	for _, r := range recs {
		out = append(out, Connection{
			Host: r.Host, Port: r.Port, Method: r.Method, Allowed: r.Allowed, Reason: r.Reason,
			SecretHeader: r.Secret, BytesUp: r.BytesUp, BytesDown: r.BytesDown, DurationMs: r.Duration.Milliseconds(),
		})
	}
	return out
}

// maxRefusedShown bounds the refusals networkLine names.
const maxRefusedShown = 3

// networkLine tells a model which of its connections the proxy refused,
// and why, since the program may only see a status 403 or a reset; "" if
// none was. A tally is named as its host, times its count.
func networkLine(r *exec.Result) string {
	var refused []string
	var n, named int64 // refused, and of those the ones named
	name := func(what string, count int64) {
		n += count
		if len(refused) < maxRefusedShown {
			refused = append(refused, what)
			named += count
		}
	}
	for _, rec := range r.Network {
		if !rec.Allowed {
			name(fmt.Sprintf("%s (%s)", hostPort(rec.Host, rec.Port), rec.Reason), 1)
		}
	}
	for _, t := range r.NetworkRest {
		if !t.Allowed {
			name(fmt.Sprintf("%s %d times (%s)", hostPort(t.Host, 0), t.Connections, t.Reason), t.Connections)
		}
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > named {
		more = fmt.Sprintf(" and %d more", n-named)
	}
	return fmt.Sprintf("[network: the sandbox's proxy refused %s%s]", strings.Join(refused, "; "), more)
}

// hostPort is host:port, or what the proxy read of it: nothing from a
// connection refused before its request (past a limit), or whose request
// it could not read.
func hostPort(host string, port int) string {
	switch {
	case host == "":
		return "a connection whose request it did not read"
	case port == 0:
		return host
	}
	return fmt.Sprintf("%s:%d", host, port)
}

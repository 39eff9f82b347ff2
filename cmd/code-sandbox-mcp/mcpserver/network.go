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
// none was.
func networkLine(r *exec.Result) string {
	var refused []string
	n := 0
	for _, rec := range r.Network {
		if rec.Allowed {
			continue
		}
		n++
		if len(refused) < maxRefusedShown {
			refused = append(refused, fmt.Sprintf("%s (%s)", hostPort(rec.Host, rec.Port), rec.Reason))
		}
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > len(refused) {
		more = fmt.Sprintf(" and %d more", n-len(refused))
	}
	return fmt.Sprintf("[network: the sandbox's proxy refused %s%s]", strings.Join(refused, "; "), more)
}

// hostPort is host:port, or what the proxy could read of it.
func hostPort(host string, port int) string {
	switch {
	case host == "":
		return "a request it could not read"
	case port == 0:
		return host
	}
	return fmt.Sprintf("%s:%d", host, port)
}

package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

const (
	// mcpSessionIdle is how long an MCP session over HTTP may go without
	// a request before mcp-go forgets it; a client that comes back later
	// gets 404 and, as MCP requires, initializes a new one. Sandbox
	// sessions belong to the principal, not to the MCP session, and
	// outlive this.
	mcpSessionIdle = 2 * time.Hour
	// mcpSessionsPerPrincipal bounds the MCP sessions one principal holds
	// at once; its oldest is forgotten to make room for a new one.
	mcpSessionsPerPrincipal = 256
	// mcpSessionPrefix starts the MCP session ids this server makes.
	mcpSessionPrefix = "mcp-session-"
)

// mcpSessions binds each MCP session over HTTP (its Mcp-Session-Id) to the
// principal whose initialize made it. mcp-go alone accepts any well-formed
// id, and on GET or DELETE does not check it at all: with several clients,
// one could listen on another's stream or end its session. check answers a
// request that names an id this server did not make, or another
// principal's, exactly as one naming an unknown id (404), so that it does
// not learn the id exists. It is also mcp-go's SessionIdManagerResolver, so
// that the ids mcp-go makes are recorded, and forgotten when mcp-go ends
// them; when it forgets an id of its own accord (past
// mcpSessionsPerPrincipal) it calls forgotten, which makes mcp-go forget
// it too.
type mcpSessions struct {
	mu     sync.Mutex
	owner  map[string]string   // id → principal
	byUser map[string][]string // principal → its ids, oldest first
	// forgotten, if not nil, is called with each id add forgets, outside
	// mu; it is set before the first request.
	forgotten func(id string)
}

func newMCPSessions() *mcpSessions {
	return &mcpSessions{owner: map[string]string{}, byUser: map[string][]string{}}
}

// check wraps next, an MCP handler behind the authentication that names
// the principal in a request's context.
func (m *mcpSessions) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		if id != "" && !m.owns(principalOf(r.Context()), id) {
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// owns reports whether id is a live MCP session of principal.
func (m *mcpSessions) owns(principal, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner, ok := m.owner[id]
	return ok && owner == principal
}

// add records a new id of principal, forgetting its oldest past the
// bound, and telling forgotten of it.
func (m *mcpSessions) add(principal, id string) {
	if old := m.record(principal, id); old != "" && m.forgotten != nil {
		m.forgotten(old)
	}
}

// record is add under mu; it returns the id it forgot, "" if none.
func (m *mcpSessions) record(principal, id string) (forgot string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := append(m.byUser[principal], id)
	if len(ids) > mcpSessionsPerPrincipal {
		forgot = ids[0]
		delete(m.owner, forgot)
		ids = ids[1:]
	}
	m.byUser[principal] = ids
	m.owner[id] = principal
	return forgot
}

// remove forgets id.
func (m *mcpSessions) remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	principal, ok := m.owner[id]
	if !ok {
		return
	}
	delete(m.owner, id)
	ids := m.byUser[principal]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(m.byUser, principal)
	} else {
		m.byUser[principal] = ids
	}
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// ids of r's principal; r is nil when mcp-go ends sessions of its own
// accord (idle, shutdown).
func (m *mcpSessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	var ctx context.Context = context.Background()
	if r != nil {
		ctx = r.Context()
	}
	return principalIDs{m: m, principal: principalOf(ctx)}
}

// principalIDs is mcpSessions seen by one principal.
type principalIDs struct {
	m         *mcpSessions
	principal string
}

var errNoMCPSession = errors.New("no such MCP session")

// Generate makes and records a new id: 128 random bits.
func (p principalIDs) Generate() string {
	b := make([]byte, 16)
	rand.Read(b)
	id := mcpSessionPrefix + hex.EncodeToString(b)
	p.m.add(p.principal, id)
	return id
}

// Validate accepts a live id of the principal.
func (p principalIDs) Validate(id string) (bool, error) {
	if !p.m.owns(p.principal, id) {
		return false, errNoMCPSession
	}
	return false, nil
}

// Terminate forgets id; check has made sure a client's DELETE names one
// of its own.
func (p principalIDs) Terminate(id string) (bool, error) {
	p.m.remove(id)
	return false, nil
}

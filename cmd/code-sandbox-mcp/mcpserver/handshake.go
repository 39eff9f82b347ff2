package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// handshake refuses a session's requests until initialize has succeeded
// on it, except initialize and ping: the MCP lifecycle has the client
// initialize first, and says a server should serve nothing else before
// that. mcp-go serves any request at any time, so New adds handshake's
// hooks to the server. A request that carries a protocol version of
// 2026-07-28 or later in its _meta is let through: those versions have no
// initialize, and mcp-go checks such a request's version and capabilities
// itself.
type handshake struct {
	done sync.Map // ids of the sessions whose initialize succeeded
}

// addTo adds the handshake's hooks to hooks. A refused request gets the
// JSON-RPC error mcp-go gives any request a hook refuses: -32600 Invalid
// Request, with the request's id.
func (h *handshake) addTo(hooks *server.Hooks) {
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		h.done.Store(sessionID(ctx), struct{}{})
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		h.done.Delete(s.SessionID())
	})
	hooks.AddOnRequestInitialization(h.check)
}

// check returns an error for a request that must wait for initialize.
func (h *handshake) check(ctx context.Context, _ any, message any) error {
	if _, ok := h.done.Load(sessionID(ctx)); ok {
		return nil
	}
	data, ok := message.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(message); err != nil {
			return err
		}
	}
	var req struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(data, &req) == nil && (req.Method == string(mcp.MethodInitialize) || req.Method == string(mcp.MethodPing)) {
		return nil
	}
	var versioned struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &versioned) == nil && mcp.IsModernProtocol(versioned.Params.Meta.ProtocolVersion()) {
		return nil
	}
	return fmt.Errorf("%q before initialize: send initialize first, and other requests after its result", req.Method)
}

// sessionID is the id of ctx's session; "" if it has none.
func sessionID(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

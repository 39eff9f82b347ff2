package mcpserver

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
)

// The server declares MCP's logging capability, so that logging/setLevel
// answers rather than -32601, as the conformance suite's
// logging-set-level checks.
func TestLoggingCapability(t *testing.T) {
	c, ctx := start(t, newServer(t, config.Default().Enabled(), noRun(t)), nil)
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: t.Name(), Version: "test"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if res.Capabilities.Logging == nil {
		t.Fatalf("initialize declares no logging capability: %+v", res.Capabilities)
	}
	if err := setLevel(ctx, c, mcp.LoggingLevelInfo); err != nil {
		t.Errorf("logging/setLevel info: %v", err)
	}
	if err := setLevel(ctx, c, "loud"); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Errorf("logging/setLevel loud: got %v; want an error that names the level", err)
	}
	// mcp-go's stdio session is one for the whole process, and so is its
	// level: put back the default, error, for the tests after this one.
	if err := setLevel(ctx, c, mcp.LoggingLevelError); err != nil {
		t.Errorf("logging/setLevel error: %v", err)
	}
}

// setLevel sends logging/setLevel. mcp-go marks it deprecated: protocol
// 2026-07-28 dropped it for a level per request. The clients of 2025-11-25
// and before, which the server serves, still send it.
func setLevel(ctx context.Context, c *client.Client, l mcp.LoggingLevel) error {
	var req mcp.SetLevelRequest
	req.Params.Level = l
	//lint:ignore SA1019 the server serves clients of protocols that have logging/setLevel
	return c.SetLevel(ctx, req)
}

// logClient is an mcp-go client over streamable HTTP that keeps the
// levels of the log records it gets.
type logClient struct {
	*client.Client
	mu     sync.Mutex
	levels []mcp.LoggingLevel
}

func (c *logClient) got() []mcp.LoggingLevel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.levels)
}

// The level a client sets is kept for its MCP session alone: over
// streamable HTTP, where one server has many sessions, each session's
// level is the one it set, error (mcp-go's default) if it set none,
// whatever another session asked for; and no record below it reaches
// the session.
//
// A tool of the test's reports the level of its call's session and sends
// a record at each level to it. The levels are read from the session
// itself, not from which records arrive: mcp-go v1.2.1 can drop a record
// sent just before a call's result (its forwarder may have taken it off
// the session's queue when the call's end closes the stream), so an
// expected record's absence would make the test flaky. A record that
// arrives below the level is a failure whatever the timing.
func TestLoggingLevelPerSession(t *testing.T) {
	s := newServer(t, config.Default().Enabled(), noRun(t))
	levels := []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelWarning, mcp.LoggingLevelError}
	s.AddTool(mcp.NewTool("level"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sl, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging)
		if !ok {
			return mcp.NewToolResultError("the session keeps no log level"), nil
		}
		for _, l := range levels {
			if err := s.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "test", string(l))); err != nil {
				return nil, err
			}
		}
		return mcp.NewToolResultText(string(sl.GetLogLevel())), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	ctx := t.Context()

	connectHTTP := func(name string) *logClient {
		tr, err := transport.NewStreamableHTTP(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		c := &logClient{Client: client.NewClient(tr)}
		t.Cleanup(func() { c.Close() })
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method != string(mcp.MethodNotificationMessage) {
				return
			}
			level, _ := n.Params.AdditionalFields["level"].(string)
			c.mu.Lock()
			c.levels = append(c.levels, mcp.LoggingLevel(level))
			c.mu.Unlock()
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		var init mcp.InitializeRequest
		init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "test"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		return c
	}
	set := func(c *logClient, l mcp.LoggingLevel) {
		t.Helper()
		if err := setLevel(ctx, c.Client, l); err != nil {
			t.Fatalf("logging/setLevel %s: %v", l, err)
		}
	}
	check := func(name string, c *logClient, want mcp.LoggingLevel) {
		t.Helper()
		var req mcp.CallToolRequest
		req.Params.Name = "level"
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := mcp.GetTextFromContent(res.Content[0]); res.IsError || got != string(want) {
			t.Errorf("session %s: its level is %q (error result %v); want %s", name, got, res.IsError, want)
		}
		for _, l := range c.got() {
			if !l.ShouldSendTo(want) {
				t.Errorf("session %s, at level %s, got a record at %s", name, want, l)
			}
		}
	}

	info, warning, none := connectHTTP("info"), connectHTTP("warning"), connectHTTP("none")
	set(info, mcp.LoggingLevelInfo)
	set(warning, mcp.LoggingLevelWarning)
	check("info", info, mcp.LoggingLevelInfo)
	check("warning", warning, mcp.LoggingLevelWarning)
	check("none", none, mcp.LoggingLevelError)

	// A session's level changes when it sets another, and only its own.
	set(info, mcp.LoggingLevelError)
	info.mu.Lock()
	info.levels = nil
	info.mu.Unlock()
	check("info, then error", info, mcp.LoggingLevelError)
	check("warning", warning, mcp.LoggingLevelWarning)
	check("none", none, mcp.LoggingLevelError)
}

package clientlimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/internal/clocktest"
)

type principalKey struct{}

// as is a context whose principal is p.
func as(p string) context.Context {
	return context.WithValue(context.Background(), principalKey{}, p)
}

func principal(ctx context.Context) string { return ctx.Value(principalKey{}).(string) }

// newLimiter returns a Limiter of c on a fake clock, with the principal
// of as, and that clock.
func newLimiter(c Config) (*Limiter, *clocktest.Clock) {
	clock := clocktest.New()
	c.Principal, c.Now = principal, clock.Now
	return New(c), clock
}

// callTool calls tool through l's middleware as p, with args, into a handler
// that counts its calls in ran, and returns the result's text and
// isError.
func callTool(t *testing.T, l *Limiter, p, tool string, args map[string]any, ran *int) (string, bool) {
	t.Helper()
	next := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		*ran++
		return mcp.NewToolResultText("ran"), nil
	}
	res, err := l.Middleware(next)(as(p), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(mcp.TextContent).Text, res.IsError
}

func TestRate(t *testing.T) {
	l, clock := newLimiter(Config{Rate: 6, Burst: 2}) // a token every 10 s
	ran := 0
	for i := range 2 {
		if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); isErr {
			t.Fatalf("call %d in the burst: %q", i+1, text)
		}
	}
	want := "Rate limit: each client may make 6 tool calls a minute (rate_limit), 2 at once (rate_burst), so this call was not run. Retry in 10.0 s."
	if text, isErr := callTool(t, l, "alice", "run_python_code", nil, &ran); !isErr || text != want {
		t.Errorf("the 3rd call: %q, isError %v; want %q", text, isErr, want)
	}
	if ran != 2 {
		t.Errorf("the handler ran %d times; want 2: a refused call runs nothing", ran)
	}
	if text, isErr := callTool(t, l, "bob", "list_sessions", nil, &ran); isErr {
		t.Errorf("bob, while alice is refused: %q", text)
	}
	clock.Advance(7650 * time.Millisecond)
	if text, _ := callTool(t, l, "alice", "list_sessions", nil, &ran); text != want[:len(want)-7]+"2.4 s." {
		t.Errorf("after 7.65 s: %q; want retry in 2.4 s (rounded up)", text)
	}
	clock.Advance(2350 * time.Millisecond)
	if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); isErr {
		t.Errorf("after 10 s: %q; want it run", text)
	}
	// A quiet spell fills the bucket to the burst, no more.
	clock.Advance(time.Hour)
	for i := range 3 {
		text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran)
		if isErr != (i == 2) {
			t.Errorf("call %d after an hour: %q, isError %v", i+1, text, isErr)
		}
	}
}

func TestNoRate(t *testing.T) {
	l, _ := newLimiter(Config{})
	ran := 0
	for range 1000 {
		if text, isErr := callTool(t, l, "alice", "run_python_code", nil, &ran); isErr {
			t.Fatalf("no limits: %q", text)
		}
	}
}

func TestConcurrency(t *testing.T) {
	tools := map[string]time.Duration{"run_python_code": 30 * time.Second, "run_js_code": 0}
	l, clock := newLimiter(Config{Concurrency: 2, Tools: tools})
	done1, refusal := l.admit("alice", "run_python_code", map[string]any{"timeout_seconds": float64(20)})
	if refusal != "" {
		t.Fatal(refusal)
	}
	clock.Advance(2 * time.Second)
	done2, refusal := l.admit("alice", "run_js_code", nil)
	if refusal != "" {
		t.Fatal(refusal)
	}
	clock.Advance(5 * time.Second)

	ran := 0
	want := "Too many calls at once: you have 2 calls running, the per-client limit (per_client_concurrency = 2), so this call was not run. " +
		"Retry when one finishes, at the latest when one reaches its time limit, in 13.0 s (plus any time it waited for a free sandbox)."
	if text, isErr := callTool(t, l, "alice", "run_python_code", map[string]any{"code": "x"}, &ran); !isErr || text != want {
		t.Errorf("alice's 3rd call: %q, isError %v; want %q", text, isErr, want)
	}
	if ran != 0 {
		t.Error("the refused call ran")
	}
	// Other tools, and other clients, are not held back.
	if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); isErr {
		t.Errorf("alice's list_sessions: %q", text)
	}
	if text, isErr := callTool(t, l, "bob", "run_python_code", nil, &ran); isErr {
		t.Errorf("bob's run: %q", text)
	}
	done1()
	// With one of unknown time limit, the known one bounds the wait.
	done3, refusal := l.admit("alice", "run_python_code", nil)
	if refusal != "" {
		t.Fatalf("after one finished: %q", refusal)
	}
	if _, refusal := l.admit("alice", "run_js_code", nil); !strings.HasSuffix(refusal, "in 30.0 s (plus any time it waited for a free sandbox).") {
		t.Errorf("with a call of unknown limit and one of 30 s: %q", refusal)
	}
	// With only calls of unknown time limit, no time is promised.
	done3()
	if _, refusal := l.admit("alice", "run_js_code", nil); refusal != "" {
		t.Fatalf("after the second finished: %q", refusal)
	}
	want = "Too many calls at once: you have 2 calls running, the per-client limit (per_client_concurrency = 2), so this call was not run. Retry when one finishes."
	if _, refusal := l.admit("alice", "run_js_code", nil); refusal != want {
		t.Errorf("with two calls of unknown limit: %q; want %q", refusal, want)
	}
	done2()
}

// A call's place is given back when its handler returns, panic or not.
func TestConcurrencyThroughMiddleware(t *testing.T) {
	l, _ := newLimiter(Config{Concurrency: 1, Tools: map[string]time.Duration{"run_python_code": time.Minute}})
	started, release := make(chan struct{}), make(chan struct{})
	blocking := l.Middleware(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-release
		return mcp.NewToolResultText("ran"), nil
	})
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code"}}
	first := make(chan *mcp.CallToolResult)
	go func() {
		res, _ := blocking(as("alice"), req)
		first <- res
	}()
	<-started
	ran := 0
	want := "you have 1 call running, the per-client limit (per_client_concurrency = 1)"
	if text, isErr := callTool(t, l, "alice", "run_python_code", nil, &ran); !isErr || !strings.Contains(text, want) || ran != 0 {
		t.Errorf("alice's 2nd call while the 1st runs: %q, isError %v, ran %d; want refused, saying %q", text, isErr, ran, want)
	}
	close(release)
	if res := <-first; res.IsError {
		t.Errorf("the 1st call: %+v", res)
	}
	if text, isErr := callTool(t, l, "alice", "run_python_code", nil, &ran); isErr || ran != 1 {
		t.Errorf("after the 1st returned: %q", text)
	}
	panicking := l.Middleware(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
	func() {
		defer func() { recover() }()
		panicking(as("alice"), req)
	}()
	if text, isErr := callTool(t, l, "alice", "run_python_code", nil, &ran); isErr {
		t.Errorf("after a handler panicked: %q", text)
	}
}

// Idle clients are forgotten; busy ones, and ones whose bucket is not
// yet full again, are kept.
func TestForget(t *testing.T) {
	l, clock := newLimiter(Config{Rate: 60, Burst: 10, Concurrency: 1, Tools: map[string]time.Duration{"run": 0}})
	for i := range 100 {
		if _, refusal := l.admit(fmt.Sprint("idle", i), "other", nil); refusal != "" {
			t.Fatal(refusal)
		}
	}
	busyDone, _ := l.admit("busy", "run", nil)
	clock.Advance(forgetAfter - 5*time.Second)
	for range 10 {
		l.admit("drained", "other", nil) // a token a second back: full in 10 s
	}
	clock.Advance(5 * time.Second)
	l.admit("new", "other", nil)
	l.mu.Lock()
	_, busy := l.clients["busy"]
	_, drained := l.clients["drained"]
	n := len(l.clients)
	l.mu.Unlock()
	if !busy || !drained || n != 3 {
		t.Errorf("after a minute: %d clients, busy kept %v, drained kept %v; want busy, drained and new", n, busy, drained)
	}
	busyDone()
	clock.Advance(forgetAfter)
	l.admit("new", "other", nil)
	l.mu.Lock()
	n = len(l.clients)
	l.mu.Unlock()
	if n != 1 {
		t.Errorf("after another minute: %d clients; want only the one calling", n)
	}
}

// An initialize takes a token from the bucket the tool calls take from:
// past the burst of both together, either is refused, and the
// initialize's refusal says when to retry.
func TestInitialize(t *testing.T) {
	l, clock := newLimiter(Config{Rate: 6, Burst: 3}) // a token every 10 s
	ran := 0
	if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); isErr {
		t.Fatalf("a call in the burst: %q", text)
	}
	for i := range 2 {
		if retry, refusal := l.Initialize("alice"); retry != 0 || refusal != "" {
			t.Fatalf("initialize %d in the burst: %v %q; want it taken", i+1, retry, refusal)
		}
	}
	want := "Rate limit: each client may make 6 requests a minute (rate_limit), 3 at once (rate_burst), tool calls and MCP initializes together, so this initialize was refused and made no session. Retry in 10.0 s."
	if retry, refusal := l.Initialize("alice"); retry != 10*time.Second || refusal != want {
		t.Errorf("the 4th request, an initialize: %v %q; want 10s %q", retry, refusal, want)
	}
	if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); !isErr || !strings.HasPrefix(text, "Rate limit:") {
		t.Errorf("a call after the initializes emptied the bucket: %q, isError %v; want refused", text, isErr)
	}
	if retry, refusal := l.Initialize("bob"); refusal != "" {
		t.Errorf("bob's initialize while alice is refused: %v %q", retry, refusal)
	}
	clock.Advance(7650 * time.Millisecond)
	if retry, _ := l.Initialize("alice"); retry != 2400*time.Millisecond {
		t.Errorf("after 7.65 s: retry in %v; want 2.4s (rounded up)", retry)
	}
	clock.Advance(2350 * time.Millisecond)
	if retry, refusal := l.Initialize("alice"); refusal != "" {
		t.Errorf("after 10 s: %v %q; want it taken", retry, refusal)
	}
	// A refused initialize took nothing: the next token comes 10 s after
	// the last one taken.
	clock.Advance(10 * time.Second)
	if text, isErr := callTool(t, l, "alice", "list_sessions", nil, &ran); isErr {
		t.Errorf("10 s later: %q; want it run", text)
	}
}

func TestInitializeNoRate(t *testing.T) {
	l, _ := newLimiter(Config{})
	for range 1000 {
		if retry, refusal := l.Initialize("alice"); retry != 0 || refusal != "" {
			t.Fatalf("no limits: %v %q", retry, refusal)
		}
	}
}

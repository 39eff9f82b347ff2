// Package clientlimit bounds what each client of a server with many
// clients may ask of it: a share of the runs in flight, and a rate of
// tool calls and MCP initializes. A call past either is refused before
// its handler is called, so nothing runs, with an error result that says
// which limit it hit, the limit's value and when to retry; an initialize
// past the rate is refused by the transport, with the text Initialize
// gives it. Clients are told apart by a principal function; the package
// knows mcp-go's tool calls, not the transport, the tokens that name the
// clients, or the executor.
package clientlimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// forgetAfter is how often a Limiter forgets the clients whose state is
// that of a client never seen: no call in flight and a full bucket.
const forgetAfter = time.Minute

// Config is what a Limiter bounds, and how it tells clients apart.
type Config struct {
	// Principal names the client of a call.
	Principal func(ctx context.Context) string
	// Concurrency is how many calls of Tools one client may have in
	// flight, from when a call arrives until its handler returns; 0 is
	// no bound.
	Concurrency int
	// Tools are the tools whose calls Concurrency counts, each with the
	// time limit its calls have unless they ask for another with the
	// argument timeout_seconds; 0 if it is not known.
	Tools map[string]time.Duration
	// Rate is how many tool calls, of any tool, and initializes one
	// client may make a minute, together; 0 is no limit. Burst is how many it may make at once after
	// a quiet spell: the size of its token bucket.
	Rate  int
	Burst int
	// Now reads the clock; nil is time.Now.
	Now func() time.Time
}

// Limiter keeps each client's calls in flight and token bucket. It is
// safe for concurrent use.
type Limiter struct {
	c Config

	mu      sync.Mutex
	clients map[string]*client
	// forgot is when idle clients were last forgotten.
	forgot time.Time
}

// client is one principal's state.
type client struct {
	// tokens is what its bucket held at filled.
	tokens float64
	filled time.Time
	// running are its calls of the counted tools in flight.
	running map[*call]bool
}

// call is one call in flight.
type call struct {
	// limit is when its time limit ends at the latest, counted from its
	// arrival; zero if not known.
	limit time.Time
}

// New returns a Limiter of c.
func New(c Config) *Limiter {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rate > 0 && c.Burst < 1 {
		c.Burst = 1
	}
	return &Limiter{c: c, clients: map[string]*client{}, forgot: c.Now()}
}

// Middleware is a server.ToolHandlerMiddleware: it refuses a call past
// its client's rate or share of runs with an error result, and hands the
// others to next.
func (l *Limiter) Middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		done, refusal := l.admit(l.c.Principal(ctx), req.Params.Name, req.GetArguments())
		if refusal != "" {
			return mcp.NewToolResultError(refusal), nil
		}
		defer done()
		return next(ctx, req)
	}
}

// admit takes a token from principal's bucket for a call of tool with
// args and, if the tool is counted, a place among its calls in flight;
// done gives the place back. refusal, if not "", says why the call may
// not run, and nothing is taken but, past the rate, the token.
func (l *Limiter) admit(principal, tool string, args map[string]any) (done func(), refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.c.Now()
	c := l.client(principal, now)
	if wait := l.take(c, now); wait > 0 {
		return nil, fmt.Sprintf("Rate limit: each client may make %d tool calls a minute (rate_limit), %d at once (rate_burst), so this call was not run. Retry in %.1f s.",
			l.c.Rate, l.c.Burst, wait.Seconds())
	}
	def, counted := l.c.Tools[tool]
	if !counted || l.c.Concurrency <= 0 {
		return func() {}, ""
	}
	if n := len(c.running); n >= l.c.Concurrency {
		return nil, concurrencyRefusal(n, l.c.Concurrency, c.earliest(), now)
	}
	k := &call{}
	if d := timeout(args, def); d > 0 {
		k.limit = now.Add(d)
	}
	c.running[k] = true
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(c.running, k)
	}, ""
}

// Initialize takes a token from principal's bucket for an MCP
// initialize, which is not a tool call but makes the server hold a
// session, and so counts in the same rate as the tool calls (rate_limit,
// rate_burst). If the bucket is empty it takes nothing and returns how
// long until a token is there, rounded up to a tenth of a second, and the
// refusal's text; else 0 and "".
func (l *Limiter) Initialize(principal string) (retry time.Duration, refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.c.Now()
	wait := l.take(l.client(principal, now), now)
	if wait == 0 {
		return 0, ""
	}
	return wait, fmt.Sprintf("Rate limit: each client may make %d requests a minute (rate_limit), %d at once (rate_burst), tool calls and MCP initializes together, so this initialize was refused and made no session. Retry in %.1f s.",
		l.c.Rate, l.c.Burst, wait.Seconds())
}

// client is principal's state, made if there is none; l.mu is held.
func (l *Limiter) client(principal string, now time.Time) *client {
	l.forget(now)
	c := l.clients[principal]
	if c == nil {
		c = &client{tokens: float64(l.c.Burst), filled: now, running: map[*call]bool{}}
		l.clients[principal] = c
	}
	return c
}

// take takes a token from c's bucket if the rate is limited, and returns
// 0; or, if the bucket is empty, takes nothing and returns how long until
// a token is there, rounded up to a tenth of a second. l.mu is held.
func (l *Limiter) take(c *client, now time.Time) time.Duration {
	if l.c.Rate <= 0 {
		return 0
	}
	l.fill(c, now)
	if c.tokens < 1 {
		wait := (1 - c.tokens) / l.perSecond()
		return time.Duration(math.Ceil(wait*10)) * time.Second / 10
	}
	c.tokens--
	return 0
}

// concurrencyRefusal is the text of a call refused because its client has
// n calls in flight, the limit; earliest is when the first of them whose
// time limit is known reaches it, zero if none is known.
func concurrencyRefusal(n, limit int, earliest, now time.Time) string {
	calls := "calls"
	if n == 1 {
		calls = "call"
	}
	s := fmt.Sprintf("Too many calls at once: you have %d %s running, the per-client limit (per_client_concurrency = %d), so this call was not run. Retry when one finishes",
		n, calls, limit)
	if earliest.IsZero() {
		return s + "."
	}
	wait := max(0, earliest.Sub(now).Seconds())
	return s + fmt.Sprintf(", at the latest when one reaches its time limit, in %.1f s (plus any time it waited for a free sandbox).", math.Ceil(wait*10)/10)
}

// earliest is when the first of c's calls in flight whose time limit is
// known reaches it; zero if none is known.
func (c *client) earliest() time.Time {
	var t time.Time
	for k := range c.running {
		if !k.limit.IsZero() && (t.IsZero() || k.limit.Before(t)) {
			t = k.limit
		}
	}
	return t
}

// timeout is the time limit of a call with args: its timeout_seconds if
// that is a positive number, def otherwise (the handler refuses a bad
// one).
func timeout(args map[string]any, def time.Duration) time.Duration {
	if f, ok := args["timeout_seconds"].(float64); ok && f > 0 && f <= math.MaxInt32 {
		return time.Duration(f * float64(time.Second))
	}
	return def
}

// perSecond is the rate at which a bucket fills.
func (l *Limiter) perSecond() float64 {
	return float64(l.c.Rate) / 60
}

// fill adds to c's bucket what it gained since it was last filled.
func (l *Limiter) fill(c *client, now time.Time) {
	if d := now.Sub(c.filled); d > 0 {
		c.tokens = math.Min(float64(l.c.Burst), c.tokens+d.Seconds()*l.perSecond())
		c.filled = now
	}
}

// forget drops, at most once every forgetAfter, the clients with no
// call in flight and a full bucket: one made anew at their next call
// is the same, so memory holds only the clients that are busy or were
// lately.
func (l *Limiter) forget(now time.Time) {
	if now.Sub(l.forgot) < forgetAfter {
		return
	}
	l.forgot = now
	for p, c := range l.clients {
		if len(c.running) > 0 {
			continue
		}
		if l.c.Rate > 0 {
			l.fill(c, now)
			if c.tokens < float64(l.c.Burst) {
				continue
			}
		}
		delete(l.clients, p)
	}
}

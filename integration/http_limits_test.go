package integration

// Issue 14's per-client rules over HTTP, through the real binary and
// mcp-go's streamable HTTP client: one principal's output files are
// unknown to another, and each client has its share of the runs and its
// rate of calls, refused calls running nothing.

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// noPools makes every sandbox on demand, so that a container created is
// a run's.
const noPools = "[languages.python]\npool = 0\n[languages.javascript]\npool = 0\n"

// readErr reads uri as c and returns the error it must give.
func readErr(ctx context.Context, t *testing.T, c *client.Client, who, uri string) string {
	t.Helper()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err == nil {
		t.Fatalf("%s read %s: %+v; want an error", who, uri, res.Contents)
	}
	return err.Error()
}

func TestHTTPFilesBetweenPrincipals(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)
	res, err := alice.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code",
		Arguments: code("open('x.txt', 'w').write('for alice')")}})
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResult(t, res)
	if r.isError || len(r.out.Files) != 1 || len(r.links) != 1 || r.links[0].URI != r.out.Files[0].URI {
		t.Fatalf("alice's run: %q %+v, links %+v; want x.txt and its link", r.text, r.out, r.links)
	}
	uri := r.links[0].URI
	m := regexp.MustCompile(`^sandbox://runs/([0-9a-f]{32})/files/x\.txt$`).FindStringSubmatch(uri)
	if m == nil {
		t.Fatalf("link %q; want sandbox://runs/ID/files/x.txt", uri)
	}
	id := m[1]

	theirs := readErr(ctx, t, bob, "bob", uri)
	madeUp := strings.Repeat("0", len(id))
	unknown := readErr(ctx, t, bob, "bob", strings.Replace(uri, id, madeUp, 1))
	if a, b := strings.ReplaceAll(theirs, id, "ID"), strings.ReplaceAll(unknown, madeUp, "ID"); a != b {
		t.Errorf("bob's error for alice's file differs from a made-up run's:\n%q\n%q", a, b)
	}
	if !strings.Contains(theirs, "has expired or never existed") || strings.Contains(theirs, "alice") {
		t.Errorf("bob's error %q; want expired or never existed, and no word of alice", theirs)
	}

	got, err := alice.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		t.Fatalf("alice's read of her own file: %v", err)
	}
	if len(got.Contents) != 1 {
		t.Fatalf("alice's read: %+v; want one content", got.Contents)
	}
	if text, ok := got.Contents[0].(mcp.TextResourceContents); !ok || text.Text != "for alice" {
		t.Errorf("alice's read: %+v; want the text she wrote", got.Contents[0])
	}
}

// retryText is the concurrency refusal's last sentence, with its seconds.
var retryText = regexp.MustCompile(`Retry when one finishes, at the latest when one reaches its time limit, in ([0-9.]+) s \(plus any time it waited for a free sandbox\)\.$`)

func TestHTTPLimitsConcurrency(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, concurrency: 4,
		config: "[http]\nper_client_concurrency = 1\n" + noPools})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)

	// Alice's first call sleeps; her second, while it runs, is refused.
	type outcome struct {
		text  string
		isErr bool
	}
	first := make(chan outcome, 1)
	go func() {
		res, err := alice.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code",
			Arguments: map[string]any{"code": "import time\ntime.sleep(5)\nprint('slept')", "timeout_seconds": 20}}})
		if err != nil {
			first <- outcome{text: err.Error(), isErr: true}
			return
		}
		r, err := parseResult(res)
		if err != nil {
			first <- outcome{text: err.Error(), isErr: true}
			return
		}
		first <- outcome{r.out.Stdout, r.isError}
	}()
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) == 1 }) {
		t.Fatalf("alice's first program is not running within 30s: %v", running)
	}
	watch := watchStarts(t)
	text, isErr := callRaw(ctx, t, alice, "run_js_code", map[string]any{"code": "console.log('second')"}, nil)
	want := "Too many calls at once: you have 1 call running, the per-client limit (per_client_concurrency = 1), so this call was not run. "
	m := retryText.FindStringSubmatch(text)
	if !isErr || !strings.HasPrefix(text, want) || m == nil {
		t.Fatalf("alice's second call while her first runs: %q, isError %v; want %q, then when to retry", text, isErr, want)
	}
	if sec, _ := strconv.ParseFloat(m[1], 64); sec <= 0 || sec > 20 {
		t.Errorf("retry in %v s; want within the first call's 20 s time limit", sec)
	}
	watch.flush(t)
	if c := watch.createdContainers(); len(c) > 0 {
		t.Errorf("the refused call created containers %v", c)
	}

	// Bob's call runs meanwhile, to its end before alice's first.
	r := decodeCall(ctx, t, bob, "run_python_code", code("print('bob')"))
	if r.isError || r.out.Stdout != "bob\n" {
		t.Errorf("bob's call while alice's runs: %q %+v; want it run", r.text, r.out)
	}
	select {
	case o := <-first:
		t.Fatalf("alice's first call ended before bob's did (%+v): the test shows no overlap; lengthen its sleep", o)
	default:
	}

	if o := <-first; o.isErr || o.text != "slept\n" {
		t.Fatalf("alice's first call: %+v; want it run", o)
	}
	r = decodeCall(ctx, t, alice, "run_js_code", code("console.log('third')"))
	if r.isError || r.out.Stdout != "third\n" {
		t.Errorf("alice's call once her first ended: %q %+v; want it run", r.text, r.out)
	}
}

// A lone client (one token) on a 2-slot server with no
// per_client_concurrency has both slots: its second call, made while the
// first runs, runs too (issue 29, item 3; the half-share would refuse it).
func TestHTTPLimitsLoneClientHasAllSlots(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, concurrency: 2, config: noPools})
	alice := s.connect(t, tokens["alice"])
	ctx := testContext(t)
	first := make(chan toolResult, 1)
	go func() {
		res, err := alice.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code",
			Arguments: map[string]any{"code": "import time\ntime.sleep(5)\nprint('first')", "timeout_seconds": 20}}})
		if err != nil {
			first <- toolResult{text: err.Error(), isError: true}
			return
		}
		r, err := parseResult(res)
		if err != nil {
			first <- toolResult{text: err.Error(), isError: true}
			return
		}
		first <- r
	}()
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) == 1 }) {
		t.Fatalf("the first program is not running within 30s: %v", running)
	}
	if r := decodeCall(ctx, t, alice, "run_python_code", code("print('second')")); r.isError || r.out.Stdout != "second\n" {
		t.Errorf("the second call while the first runs: %q %+v; want it run", r.text, r.out)
	}
	if r := <-first; r.isError || r.out.Stdout != "first\n" {
		t.Errorf("the first call: %q %+v; want it run", r.text, r.out)
	}
	if !strings.Contains(s.stderr.String(), "per_client_concurrency=2") {
		t.Errorf("the server's log does not say per_client_concurrency=2:\n%s", s.stderr)
	}
}

// retryIn is the rate refusal's last sentence, with its seconds.
var retryIn = regexp.MustCompile(`Retry in ([0-9.]+) s\.$`)

func TestHTTPLimitsRate(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path},
		config: "[http]\nrate_limit = 15\nrate_burst = 2\n" + noPools})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)
	for i := range 2 {
		if text, isErr := callRaw(ctx, t, alice, "list_sessions", map[string]any{}, nil); isErr {
			t.Fatalf("alice's call %d, within the burst: %q", i+1, text)
		}
	}
	watch := watchStarts(t)
	text, isErr := callRaw(ctx, t, alice, "run_python_code", code("print('third')"), nil)
	want := "Rate limit: each client may make 15 tool calls a minute (rate_limit), 2 at once (rate_burst), so this call was not run. "
	m := retryIn.FindStringSubmatch(text)
	if !isErr || !strings.HasPrefix(text, want) || m == nil {
		t.Fatalf("alice's 3rd quick call: %q, isError %v; want %q, then Retry in N s.", text, isErr, want)
	}
	sec, _ := strconv.ParseFloat(m[1], 64)
	if sec <= 0 || sec > 4 {
		t.Errorf("retry in %v s; want at most 4 s, a call's worth at 15 a minute", sec)
	}
	watch.flush(t)
	if c := watch.createdContainers(); len(c) > 0 {
		t.Errorf("the refused call created containers %v", c)
	}

	r := decodeCall(ctx, t, bob, "run_python_code", code("print('bob')"))
	if r.isError || r.out.Stdout != "bob\n" {
		t.Errorf("bob's call while alice is refused: %q %+v; want it run", r.text, r.out)
	}

	// The wait the refusal named is enough. Not synchronisation: that
	// wait, and no more, is what is tested.
	time.Sleep(time.Duration(sec * float64(time.Second)))
	r = decodeCall(ctx, t, alice, "run_python_code", code("print('later')"))
	if r.isError || r.out.Stdout != "later\n" {
		t.Errorf("alice's call %v s later, as told: %q %+v; want it run", sec, r.text, r.out)
	}
}

// decodeCall calls tool with args as c and decodes the result.
func decodeCall(ctx context.Context, t *testing.T, c *client.Client, tool string, args map[string]any) toolResult {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return decodeResult(t, res)
}

// TestHTTPLimitsSessions: one client cannot take every session. With
// max_sessions = 3 and per_client_sessions = 1, alice's second
// create_session is refused with a text that says why, while bob still
// gets one; once alice closes hers she may create another.
func TestHTTPLimitsSessions(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path},
		config: "[sessions]\nmax_sessions = 3\n[http]\nper_client_sessions = 1\n" + noPools})
	alice, bob := s.connect(t, tokens["alice"]), s.connect(t, tokens["bob"])
	ctx := testContext(t)
	create := func(c *client.Client) (createdSession, string, bool) {
		var created createdSession
		text, isErr := callRaw(ctx, t, c, "create_session", map[string]any{"language": "python"}, &created)
		return created, text, isErr
	}
	first, text, isErr := create(alice)
	if isErr || first.SessionID == "" {
		t.Fatalf("alice's first create_session: %q", text)
	}
	before := containerCount(t)
	_, text, isErr = create(alice)
	if !isErr || !strings.Contains(text, "per_client_sessions") || !strings.Contains(text, "1 of your sessions are open") {
		t.Fatalf("alice's second create_session: %q, isError %v; want a refusal naming per_client_sessions", text, isErr)
	}
	if n := containerCount(t); n != before {
		t.Errorf("the refused create_session changed the containers from %d to %d", before, n)
	}
	if b, text, isErr := create(bob); isErr || b.SessionID == "" {
		t.Fatalf("bob's create_session while alice holds her share: %q", text)
	}
	if text, isErr := callRaw(ctx, t, alice, "close_session", map[string]any{"session_id": first.SessionID}, nil); isErr {
		t.Fatalf("alice's close_session: %q", text)
	}
	if again, text, isErr := create(alice); isErr || again.SessionID == "" {
		t.Fatalf("alice's create_session after closing hers: %q", text)
	}
}

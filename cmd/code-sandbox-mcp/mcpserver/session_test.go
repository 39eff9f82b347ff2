package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// defaultSessionLimits are the bounds of config.Default's [sessions].
func defaultSessionLimits() exec.SessionConfig {
	s := config.Default().Sessions
	return exec.SessionConfig{Max: s.MaxSessions, IdleTimeout: time.Duration(s.IdleTimeout), MaxLifetime: time.Duration(s.MaxLifetime)}
}

// fakeSessions is a SessionManager that records its calls. Its open
// sessions are by owner and id; CreateSession makes "s1", "s2", ...
type fakeSessions struct {
	limits    exec.SessionConfig
	createErr error
	now       time.Time

	mu      sync.Mutex
	calls   []string
	open    map[string]exec.SessionInfo // by owner + "/" + id
	counter int
}

func (f *fakeSessions) record(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeSessions) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSessions) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error) {
	f.record("create %s %s %s", owner, language, idle)
	if f.createErr != nil {
		return exec.SessionInfo{}, f.createErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counter++
	if idle == 0 {
		idle = f.limits.IdleTimeout
	}
	info := exec.SessionInfo{
		ID: fmt.Sprintf("s%d", f.counter), Owner: owner, Language: language,
		Created: f.now, LastUsed: f.now, ExpiresAt: f.now.Add(idle),
		IdleTimeout: idle, MaxLifetime: f.limits.MaxLifetime, MemoryBytes: -1,
	}
	if f.open == nil {
		f.open = map[string]exec.SessionInfo{}
	}
	f.open[owner+"/"+info.ID] = info
	return info, nil
}

func (f *fakeSessions) CloseSession(owner, id string) bool {
	f.record("close %s %s", owner, id)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.open[owner+"/"+id]
	delete(f.open, owner+"/"+id)
	return ok
}

func (f *fakeSessions) Sessions(owner string) []exec.SessionInfo {
	f.record("list %s", owner)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []exec.SessionInfo
	for i := 1; i <= f.counter; i++ {
		if info, ok := f.open[fmt.Sprintf("%s/s%d", owner, i)]; ok {
			out = append(out, info)
		}
	}
	return out
}

func (f *fakeSessions) SessionLimits() exec.SessionConfig { return f.limits }

// newSessionServer builds the server of langs on run, with sessions from
// m and the principal p.
func newSessionServer(t *testing.T, langs []config.Language, run RunFunc, m SessionManager, p func(context.Context) string) *server.MCPServer {
	t.Helper()
	o := testOptions
	o.Sessions, o.Principal = m, p
	s, err := New(t.Context(), o, langs, run)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// toolsJSON lists the tools of s as a client sees them.
func toolsJSON(t *testing.T, s *server.MCPServer) map[string]string {
	t.Helper()
	res, err := connect(t, s, nil).ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tool := range res.Tools {
		data, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = string(data)
	}
	return out
}

// Without a session manager, or with max_sessions 0, there are no session
// tools and the language tools are those of a server without sessions.
func TestNoSessions(t *testing.T) {
	langs := config.Default().Enabled()
	none := toolsJSON(t, newServer(t, langs, noRun(t)))
	if len(none) != 2 {
		t.Fatalf("tools %v; want the two language tools", none)
	}
	for name, tool := range none {
		if strings.Contains(tool, "session") {
			t.Errorf("%s mentions sessions without any: %s", name, tool)
		}
	}
	off := toolsJSON(t, newSessionServer(t, langs, noRun(t), &fakeSessions{limits: exec.SessionConfig{Max: 0, IdleTimeout: time.Minute, MaxLifetime: time.Hour}}, nil))
	if fmt.Sprint(off) != fmt.Sprint(none) {
		t.Errorf("max_sessions 0 gives tools\n%v\nwant those without a session manager\n%v", off, none)
	}
	c := runClient(t, noRun(t))
	text, isErr, _ := callTool(t, t.Context(), c, "run_python_code", map[string]any{"code": "x", "session_id": "s1"})
	if !isErr || !strings.Contains(text, "offers no sessions") || !strings.Contains(text, "Nothing was run") {
		t.Errorf("session_id without sessions: %q, isError %v; want a refusal", text, isErr)
	}
	if got := instructions(nil, nil); strings.Contains(got, "session") {
		t.Errorf("instructions without sessions mention them: %q", got)
	}
}

// sessionLangs are the default languages and sh, which has no session
// driver.
func sessionLangs(t *testing.T) []config.Language {
	t.Helper()
	c, err := config.Parse("[languages.sh]\nimage = \"example.test/sh:1\"\ncommand = [\"sh\"]\nfile = \"main.sh\"\n", "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	return c.Enabled()
}

func TestSessionToolsList(t *testing.T) {
	tools := toolsJSON(t, newSessionServer(t, sessionLangs(t), noRun(t), &fakeSessions{limits: defaultSessionLimits()}, nil))
	for _, name := range []string{"create_session", "close_session", "list_sessions", "run_python_code", "run_js_code", "run_sh_code"} {
		if tools[name] == "" {
			t.Errorf("no tool %s in %v", name, tools)
		}
	}
	if !strings.Contains(tools["create_session"], `"enum":["javascript","python"]`) {
		t.Errorf("create_session's languages are not those with a driver: %s", tools["create_session"])
	}
	if !strings.Contains(tools["create_session"], `"maximum":3600`) {
		t.Errorf("create_session's idle_timeout_seconds is not bounded by max_lifetime: %s", tools["create_session"])
	}
	for _, name := range []string{"run_python_code", "run_js_code"} {
		if !strings.Contains(tools[name], `"session_id"`) || !strings.Contains(tools[name], "Sessions: with session_id") {
			t.Errorf("%s takes no session_id: %s", name, tools[name])
		}
	}
	if strings.Contains(tools["run_sh_code"], "session") {
		t.Errorf("run_sh_code, without a driver, mentions sessions: %s", tools["run_sh_code"])
	}
}

func TestParseCreateArgs(t *testing.T) {
	s := newSessions(Options{Sessions: &fakeSessions{limits: defaultSessionLimits()}}, sessionLangs(t))
	for _, tc := range []struct {
		name    string
		raw     any
		want    createArgs
		wantErr string
	}{
		{"language", map[string]any{"language": "python"}, createArgs{language: "python"}, ""},
		{"idle", map[string]any{"language": "javascript", "idle_timeout_seconds": 60}, createArgs{language: "javascript", idle: time.Minute}, ""},
		{"idle at max", map[string]any{"language": "python", "idle_timeout_seconds": 3600}, createArgs{language: "python", idle: time.Hour}, ""},
		{"no language", map[string]any{}, createArgs{}, `missing argument "language": one of "javascript", "python"`},
		{"no arguments", nil, createArgs{}, `missing argument "language"`},
		{"number language", map[string]any{"language": 3}, createArgs{}, "must be a string"},
		{"no driver", map[string]any{"language": "sh"}, createArgs{}, `"sh", which has no sessions here; want one of "javascript", "python"`},
		{"unknown language", map[string]any{"language": "ruby"}, createArgs{}, "has no sessions here"},
		{"zero idle", map[string]any{"language": "python", "idle_timeout_seconds": 0}, createArgs{}, "from 1 to 3600"},
		{"idle over lifetime", map[string]any{"language": "python", "idle_timeout_seconds": 3601}, createArgs{}, "from 1 to 3600 (max_lifetime)"},
		{"fractional idle", map[string]any{"language": "python", "idle_timeout_seconds": 1.5}, createArgs{}, "whole number"},
		{"string idle", map[string]any{"language": "python", "idle_timeout_seconds": "60"}, createArgs{}, "not a string"},
		{"unknown arg", map[string]any{"language": "python", "code": "x"}, createArgs{}, `unknown argument "code"`},
		{"not an object", json.RawMessage(`["python"]`), createArgs{}, "must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.parseCreateArgs(tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v; want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A session's life through the tools: create, run, list, close twice; the
// owner each call passes is the principal's.
func TestSessionTools(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := &fakeSessions{limits: defaultSessionLimits(), now: now}
	var got exec.Request
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		got = req
		return &exec.Result{Language: req.Language, Image: "img", Stdout: []byte("2\n"), Timeout: 30 * time.Second,
			Session: &exec.SessionResult{ID: req.Session, ExecutionCount: 3, ExpiresAt: now.Add(20 * time.Minute)}}, nil
	}
	principal := func(ctx context.Context) string { return "alice" }
	c := connect(t, newSessionServer(t, sessionLangs(t), run, f, principal), nil)
	ctx := t.Context()

	text, isErr, sc := callTool(t, ctx, c, "create_session", map[string]any{"language": "python", "idle_timeout_seconds": 120})
	want := map[string]any{"session_id": "s1", "language": "python", "tool": "run_python_code", "expires_at": "2026-12-01T10:02:00Z",
		"idle_timeout_seconds": 120.0, "max_lifetime_seconds": 3600.0}
	if isErr || fmt.Sprint(sc) != fmt.Sprint(want) {
		t.Errorf("create_session: isError %v, structuredContent %v; want %v", isErr, sc, want)
	}
	for _, w := range []string{"s1", "run_python_code", `"session_id": "s1"`, "2026-12-01T10:02:00Z", "close_session"} {
		if !strings.Contains(text, w) {
			t.Errorf("create_session text has no %q: %q", w, text)
		}
	}

	text, isErr, sc = callTool(t, ctx, c, "run_python_code", map[string]any{"code": "x + 1", "session_id": "s1"})
	if isErr || text != "2\n" {
		t.Errorf("run in a session: %q, isError %v; want exactly stdout", text, isErr)
	}
	if got.Session != "s1" || got.Owner != "alice" || got.Code != "x + 1" {
		t.Errorf("Run got %+v; want session s1 of alice", got)
	}
	if sc["session_id"] != "s1" || sc["execution_count"] != 3.0 || sc["expires_at"] != "2026-12-01T10:20:00Z" || sc["session_ended"] != "" || sc["stdout"] != "2\n" {
		t.Errorf("structuredContent %v; want the run's and the session's fields", sc)
	}

	text, isErr, sc = callTool(t, ctx, c, "list_sessions", map[string]any{})
	list, _ := sc["sessions"].([]any)
	if isErr || len(list) != 1 || sc["max_sessions"] != 4.0 {
		t.Fatalf("list_sessions: %q, isError %v, %v; want one session", text, isErr, sc)
	}
	wantItem := map[string]any{"session_id": "s1", "language": "python", "tool": "run_python_code", "created": "2026-12-01T10:00:00Z",
		"last_used": "2026-12-01T10:00:00Z", "expires_at": "2026-12-01T10:02:00Z", "execution_count": 0.0, "memory_bytes": -1.0}
	if fmt.Sprint(list[0]) != fmt.Sprint(wantItem) {
		t.Errorf("list_sessions item %v; want %v", list[0], wantItem)
	}
	if !strings.Contains(text, "s1: python (run_python_code)") || !strings.Contains(text, "memory unknown") {
		t.Errorf("list_sessions text %q", text)
	}

	text, isErr, sc = callTool(t, ctx, c, "close_session", map[string]any{"session_id": "s1"})
	if isErr || sc["was_open"] != true || !strings.Contains(text, "was open and is now closed") {
		t.Errorf("close_session: %q, isError %v, %v; want it closed", text, isErr, sc)
	}
	text, isErr, sc = callTool(t, ctx, c, "close_session", map[string]any{"session_id": "s1"})
	if isErr || sc["was_open"] != false || !strings.Contains(text, "was not open") {
		t.Errorf("close_session again: %q, isError %v, %v; want no error, and that it was not open", text, isErr, sc)
	}
	text, _, sc = callTool(t, ctx, c, "list_sessions", nil)
	if list, _ := sc["sessions"].([]any); list == nil || len(list) != 0 || !strings.Contains(text, "no open sessions") {
		t.Errorf("list_sessions after close: %q, %v; want an empty list", text, sc)
	}

	wantCalls := []string{"create alice python 2m0s", "list alice", "close alice s1", "close alice s1", "list alice"}
	if calls := f.recorded(); fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Errorf("calls %q; want %q", calls, wantCalls)
	}
}

// Without a Principal, the owner is "local"; a one-shot run has none.
func TestSessionOwnerLocal(t *testing.T) {
	f := &fakeSessions{limits: defaultSessionLimits()}
	var reqs []exec.Request
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		reqs = append(reqs, req)
		return &exec.Result{Language: req.Language}, nil
	}
	c := connect(t, newSessionServer(t, config.Default().Enabled(), run, f, nil), nil)
	callTool(t, t.Context(), c, "create_session", map[string]any{"language": "javascript"})
	callTool(t, t.Context(), c, "run_js_code", map[string]any{"code": "1", "session_id": "s1"})
	callTool(t, t.Context(), c, "run_js_code", map[string]any{"code": "1"})
	if calls := f.recorded(); len(calls) != 1 || calls[0] != "create local javascript 0s" {
		t.Errorf("calls %q; want one create by local with the default idle timeout", calls)
	}
	if len(reqs) != 2 || reqs[0].Owner != "local" || reqs[0].Session != "s1" || reqs[1].Owner != "" || reqs[1].Session != "" {
		t.Errorf("requests %+v; want the first in s1 of local, the second one-shot", reqs)
	}
}

// Bad arguments of the session tools and of session_id: error results,
// nothing called.
func TestSessionBadArguments(t *testing.T) {
	f := &fakeSessions{limits: defaultSessionLimits()}
	c := connect(t, newSessionServer(t, sessionLangs(t), noRun(t), f, nil), nil)
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{"run_python_code", map[string]any{"code": "x", "session_id": 5}, `"session_id" must be a string`},
		{"run_python_code", map[string]any{"code": "x", "session_id": ""}, `"session_id" is empty`},
		{"run_python_code", map[string]any{"code": "x", "extra": 1}, `"files" (array) and "session_id" (string)`},
		{"run_sh_code", map[string]any{"code": "x", "session_id": "s1"}, "sh has no sessions; only javascript (run_js_code) and python (run_python_code) do"},
		{"close_session", map[string]any{}, `missing argument "session_id"`},
		{"close_session", map[string]any{"session_id": nil}, `must be a string`},
		{"close_session", map[string]any{"session_id": "s1", "force": true}, `unknown argument "force"`},
		{"list_sessions", map[string]any{"owner": "bob"}, `unknown argument "owner"`},
		{"create_session", map[string]any{"language": "sh"}, "No session was started"},
	} {
		text, isErr, _ := callTool(t, t.Context(), c, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: %q, isError %v; want an error with %q", tc.tool, tc.args, text, isErr, tc.want)
		}
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Errorf("calls %q; want none", calls)
	}
}

// Errors about sessions: what happened, that nothing ran, what to do.
func TestSessionErrors(t *testing.T) {
	f := &fakeSessions{limits: defaultSessionLimits()}
	var runErr error
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) { return nil, runErr }
	c := connect(t, newSessionServer(t, sessionLangs(t), run, f, nil), nil)
	for _, tc := range []struct {
		name      string
		tool      string
		args      map[string]any
		runErr    error
		createErr error
		want      []string
		notWant   []string
	}{
		{"unknown", "run_python_code", map[string]any{"code": "x", "session_id": "s9"},
			fmt.Errorf("run: %w", &exec.NoSessionError{ID: "s9"}), nil,
			[]string{`no open session "s9"`, "unknown, closed or expired", "Nothing was run", "create_session"}, []string{"retrying may help"}},
		{"ended", "run_python_code", map[string]any{"code": "x", "session_id": "s2"},
			&exec.NoSessionError{ID: "s2", Ended: "idle for 10m0s at 10:10"}, nil,
			[]string{`no open session "s2"`, "it has ended: idle for 10m0s at 10:10", "Nothing was run", "create_session"}, nil},
		{"too many", "create_session", map[string]any{"language": "python"},
			nil, fmt.Errorf("create: %w", exec.ErrTooManySessions),
			[]string{"max_sessions (4)", "list_sessions", "close_session", "wait for one to expire"}, []string{"state_dir", "no room", "sessions are open"}},
		{"no driver", "create_session", map[string]any{"language": "python"},
			nil, fmt.Errorf("python: %w", exec.ErrNoSessions),
			[]string{"python has no sessions", "javascript (run_js_code) and python (run_python_code)"}, []string{"retrying may help"}},
		{"image missing", "create_session", map[string]any{"language": "python"},
			nil, fmt.Errorf("image x: %w", errdefs.ErrNotFound),
			[]string{"image is missing", testOptions.ImportHint}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runErr, f.createErr = tc.runErr, tc.createErr
			text, isErr, _ := callTool(t, t.Context(), c, tc.tool, tc.args)
			if !isErr {
				t.Errorf("isError false; want true")
			}
			checkText(t, text, tc.want, tc.notWant)
		})
	}
}

// A run in a session: its text says whether the session lives on.
func TestSessionResultText(t *testing.T) {
	lim := pythonLimits(t)
	exp := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		r    exec.Result
		want string
	}{
		{"clean", exec.Result{Stdout: []byte("2\n"), Session: &exec.SessionResult{ID: "s1", ExecutionCount: 2, ExpiresAt: exp}}, "2\n"},
		{"no output", exec.Result{Session: &exec.SessionResult{ID: "s1"}}, "(The cell finished without output; session s1 keeps its state.)"},
		{"interrupted", exec.Result{Stdout: []byte("tick\n"), ExitCode: 1, TimedOut: true, Timeout: 2 * time.Second, Duration: 2 * time.Second,
			Session: &exec.SessionResult{ID: "s1", Interrupted: true}},
			"tick\n--- timed out after 2s and was interrupted; the session and its state remain; 2.00s ---"},
		{"interrupt ignored", exec.Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true, Timeout: 2 * time.Second, Duration: 4 * time.Second,
			Session: &exec.SessionResult{ID: "s1", Ended: "it ignored its interrupt for 2s and was killed"}},
			"--- timed out after 2s and was killed; 4.00s ---\nSession s1 has ended: it ignored its interrupt for 2s and was killed. Its state is gone; create_session starts a new one."},
		{"oom", exec.Result{ExitCode: -1, Signal: "SIGKILL", OOMKilled: true,
			Session: &exec.SessionResult{ID: "s1", Ended: "out of memory"}},
			"--- killed: out of memory (limit 512MiB); 0.00s ---\nSession s1 has ended: out of memory. Its state is gone; create_session starts a new one."},
		{"exit", exec.Result{Stdout: []byte("bye"), Session: &exec.SessionResult{ID: "s1", Ended: "the interpreter exited"}},
			"bye\nSession s1 has ended: the interpreter exited. Its state is gone; create_session starts a new one."},
		{"a background process killed for its memory", exec.Result{Stdout: []byte("42\n"), Session: &exec.SessionResult{ID: "s1", BackgroundOOMKills: 1}},
			"42\nSince the previous cell, the kernel killed 1 process in this session's sandbox for running out of memory (limit 512MiB): a process that an earlier cell left running in the background is gone; the interpreter and its state remain."},
		{"two, and no output", exec.Result{Session: &exec.SessionResult{ID: "s1", BackgroundOOMKills: 2}},
			"(The cell finished without output; session s1 keeps its state.)\nSince the previous cell, the kernel killed 2 processes in this session's sandbox for running out of memory (limit 512MiB): processes that earlier cells left running in the background are gone; the interpreter and its state remain."},
		{"one, and the session ended", exec.Result{ExitCode: 4, Session: &exec.SessionResult{ID: "s1", BackgroundOOMKills: 1, Ended: "the interpreter exited with status 4"}},
			"--- exit code 4; 0.00s ---\nSince the previous cell, the kernel killed 1 process in this session's sandbox for running out of memory (limit 512MiB): a process that an earlier cell left running in the background is gone.\nSession s1 has ended: the interpreter exited with status 4. Its state is gone; create_session starts a new one."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultText(&tc.r, lim, "", ""); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// A session run's structuredContent passes its tool's outputSchema (the
// server validates it), including a session that ended.
func TestSessionResultSchema(t *testing.T) {
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return &exec.Result{Language: req.Language, ExitCode: -1, OOMKilled: true, Files: []exec.File{{Path: "a.txt", Data: []byte("a")}},
			Session: &exec.SessionResult{ID: req.Session, ExecutionCount: 1, ExpiresAt: time.Unix(0, 0), Ended: "out of memory", BackgroundOOMKills: 1}}, nil
	}
	c := connect(t, newSessionServer(t, config.Default().Enabled(), run, &fakeSessions{limits: defaultSessionLimits()}, nil), nil)
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "x", "session_id": "s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "Session s1 has ended: out of memory") || !strings.Contains(text, "Files in /workspace: a.txt") {
		t.Errorf("result %q, isError %v", text, res.IsError)
	}
	data, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(data), `"session_ended":"out of memory"`) || !strings.Contains(string(data), `"expires_at":"1970-01-01T00:00:00Z"`) ||
		!strings.Contains(string(data), `"background_oom_kills":1`) {
		t.Errorf("structuredContent %s", data)
	}
}

func TestSessionEnvironments(t *testing.T) {
	c := connect(t, newSessionServer(t, sessionLangs(t), noRun(t), &fakeSessions{limits: defaultSessionLimits()}, nil), nil)
	env := readEnvironments(t, c)
	if want := (sessionsOutput{MaxSessions: 4, IdleTimeoutSeconds: 600, MaxLifetimeSeconds: 3600}); env.Sessions != want {
		t.Errorf("sessions %+v; want %+v", env.Sessions, want)
	}
	for name, want := range map[string]bool{"python": true, "javascript": true, "sh": false} {
		if got := env.Languages[name].Sessions; got != want {
			t.Errorf("%s sessions %v; want %v", name, got, want)
		}
	}
	if env := readEnvironments(t, newClient(t, config.Default().Enabled())); env.Sessions != (sessionsOutput{}) || env.Languages["python"].Sessions {
		t.Errorf("without sessions: %+v; want none", env)
	}
}

func TestSessionInstructions(t *testing.T) {
	s := newSessions(Options{Sessions: &fakeSessions{limits: defaultSessionLimits()}}, sessionLangs(t))
	got := instructions(nil, s)
	for _, w := range []string{"create_session", "javascript (run_js_code) and python (run_python_code)", "per call", "fresh sandbox"} {
		if !strings.Contains(got, w) {
			t.Errorf("instructions have no %q: %q", w, got)
		}
	}
}

package app

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/audit"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/internal/jsontest"
)

// testSecret is the value of a pass-through variable; it must never
// reach the log.
const testSecret = "s3cr3t-value-4f1c9a"

// newTestAuditor opens an audit log in a temporary directory for the
// default configuration with SECRET_X passed through.
func newTestAuditor(t *testing.T, includeCode bool) (*auditor, *config.Config, string) {
	t.Helper()
	cfg := config.Default()
	cfg.Sandbox.PassThroughEnv = []string{"SECRET_X", "UNSET_Y"}
	cfg.Audit = config.Audit{Path: filepath.Join(t.TempDir(), "audit.log"), IncludeCode: includeCode}
	a, err := openAuditor(cfg, "dev", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	return a, cfg, cfg.Audit.Path
}

// records reads the log at path, verifies its chain, and returns its
// records decoded, and its text.
func records(t *testing.T, path string) ([]map[string]any, string) {
	t.Helper()
	if _, err := audit.Verify(path); err != nil {
		t.Fatalf("the log does not verify: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := jsontest.Lines(t, path, data)
	return recs, string(data)
}

func sha(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// noSecret fails if log holds the secret, plainly or in base64.
func noSecret(t *testing.T, log string) {
	t.Helper()
	for _, s := range []string{testSecret, base64.StdEncoding.EncodeToString([]byte(testSecret)), hex.EncodeToString([]byte(testSecret))} {
		if strings.Contains(log, s) {
			t.Errorf("the audit log holds the pass-through value %q:\n%s", s, log)
		}
	}
}

func TestAuditRunRecords(t *testing.T) {
	for _, includeCode := range []bool{false, true} {
		t.Run(map[bool]string{false: "without code", true: "with code"}[includeCode], func(t *testing.T) {
			a, cfg, path := newTestAuditor(t, includeCode)
			env := envMap(map[string]string{"SECRET_X": testSecret})
			if err := a.start(cfg, env, "stdio", ""); err != nil {
				t.Fatal(err)
			}
			const code = "import os\nprint(os.environ['SECRET_X'])"
			var started bool
			run := a.wrapRun(func(ctx context.Context, req exec.Request) (*exec.Result, error) {
				recs, _ := records(t, path)
				started = recs[len(recs)-1]["event"] == eventRunStarted
				return &exec.Result{
					Language: "python", Image: "img:1", ImageDigest: "sha256:abc",
					Stdout: []byte(testSecret + "\n"), StdoutDropped: 5, Stderr: []byte("e"),
					ExitCode: 137, Signal: "SIGKILL", OOMKilled: true, Duration: 1500 * time.Millisecond,
					Files: []exec.File{{Path: "out.txt", Data: []byte("result")}}, FilesDropped: 2,
				}, nil
			}, func(context.Context) string { return "alice" })
			if _, err := run(t.Context(), exec.Request{Language: "python", Code: code, Timeout: 7 * time.Second,
				Files: []exec.File{{Path: "in.csv", Data: []byte("a,b\n")}}}); err != nil {
				t.Fatal(err)
			}
			if !started {
				t.Error("run_started was not on disk when the program ran")
			}
			a.shutdown(t.Context(), nil)
			recs, log := records(t, path)
			var events []string
			for _, r := range recs {
				events = append(events, r["event"].(string))
			}
			if got, want := strings.Join(events, " "), "start run_started run_ended shutdown"; got != want {
				t.Fatalf("events %s; want %s", got, want)
			}
			st, rs, re := recs[0], recs[1], recs[2]
			if got := st["pass_through_env"]; len(got.([]any)) != 1 || got.([]any)[0] != "SECRET_X" {
				t.Errorf("start pass_through_env %v; want [SECRET_X]", got)
			}
			if st["transport"] != "stdio" || st["include_code"] != includeCode {
				t.Errorf("start %v", st)
			}
			lim, _ := cfg.Language("python")
			for _, r := range []map[string]any{rs, re} {
				for k, want := range map[string]any{
					"principal": "alice", "tool": lim.Tool, "language": "python",
					"code.sha256": sha(code), "code.size": float64(len(code)),
					"limits.timeout_seconds": 7.0, "limits.memory_bytes": float64(lim.Limits.MemoryBytes),
				} {
					if got := jsontest.Get(r, k); got != want {
						t.Errorf("%s %s = %v; want %v", r["event"], k, got, want)
					}
				}
				in := jsontest.Get(r, "files_in").([]any)
				if len(in) != 1 || jsontest.Get(in[0].(map[string]any), "sha256") != sha("a,b\n") || jsontest.Get(in[0].(map[string]any), "path") != "in.csv" {
					t.Errorf("%s files_in %v", r["event"], in)
				}
			}
			if rs["run_id"] == "" || rs["run_id"] != re["run_id"] {
				t.Errorf("run ids %v, %v; want one, the same", rs["run_id"], re["run_id"])
			}
			if got := jsontest.Get(rs, "code.text"); includeCode && got != code || !includeCode && got != nil {
				t.Errorf("run_started code.text %v with include_code %v", got, includeCode)
			}
			if includeCode != strings.Contains(log, `print(os.environ['SECRET_X'])`) {
				t.Errorf("code text in the log: %v; want %v", !includeCode, includeCode)
			}
			if jsontest.Get(re, "code.text") != nil {
				t.Errorf("run_ended repeats the code")
			}
			for k, want := range map[string]any{
				"image": "img:1", "image_digest": "sha256:abc",
				"outcome.exit_code": 137.0, "outcome.signal": "SIGKILL", "outcome.oom_killed": true, "outcome.timed_out": false,
				"outcome.duration_ms": 1500.0, "outcome.stdout_bytes": float64(len(testSecret) + 1 + 5),
				"outcome.stdout_truncated_bytes": 5.0, "outcome.stderr_bytes": 1.0, "outcome.files_dropped": 2.0,
			} {
				if got := jsontest.Get(re, k); got != want {
					t.Errorf("run_ended %s = %v; want %v", k, got, want)
				}
			}
			out := jsontest.Get(re, "files_out").([]any)
			if len(out) != 1 || jsontest.Get(out[0].(map[string]any), "sha256") != sha("result") || jsontest.Get(out[0].(map[string]any), "size") != 6.0 {
				t.Errorf("files_out %v", out)
			}
			noSecret(t, log)
		})
	}
}

func TestAuditRunError(t *testing.T) {
	a, _, path := newTestAuditor(t, false)
	run := a.wrapRun(func(context.Context, exec.Request) (*exec.Result, error) {
		return nil, errors.New("image x is missing")
	}, nil)
	if _, err := run(t.Context(), exec.Request{Language: "python", Code: "1"}); err == nil || err.Error() != "image x is missing" {
		t.Fatalf("got %v; want the run's own error", err)
	}
	recs, _ := records(t, path)
	re := recs[1]
	if re["principal"] != "local" || jsontest.Get(re, "outcome.error") != "image x is missing" || re["image_digest"] != "" {
		t.Errorf("run_ended %v; want principal local, the error, no digest", re)
	}
	if len(jsontest.Get(re, "files_out").([]any)) != 0 {
		t.Errorf("files_out %v; want []", re["files_out"])
	}
}

// countingRun counts its runs.
type countingRun struct{ n atomic.Int32 }

func (c *countingRun) run(context.Context, exec.Request) (*exec.Result, error) {
	c.n.Add(1)
	return &exec.Result{}, nil
}

// A run whose record cannot be written is not run, and the caller is
// told why; a lost run_ended does not withhold the result.
func TestAuditFailsClosed(t *testing.T) {
	t.Run("run_started", func(t *testing.T) {
		a, _, _ := newTestAuditor(t, false)
		var c countingRun
		run := a.wrapRun(c.run, nil)
		a.log.Close()
		_, err := run(t.Context(), exec.Request{Language: "python", Code: "1"})
		if err == nil || c.n.Load() != 0 {
			t.Fatalf("got %v after %d runs; want an error and no run", err, c.n.Load())
		}
		if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "audit log") || !strings.Contains(err.Error(), "Nothing was run") {
			t.Errorf("got %v; want Unavailable, saying the audit log cannot be written", err)
		}
	})
	t.Run("run_ended", func(t *testing.T) {
		a, _, _ := newTestAuditor(t, false)
		run := a.wrapRun(func(context.Context, exec.Request) (*exec.Result, error) {
			a.log.Close() // the disk goes while the program runs
			return &exec.Result{ExitCode: 3}, nil
		}, nil)
		res, err := run(t.Context(), exec.Request{Language: "python", Code: "1"})
		if err != nil || res == nil || res.ExitCode != 3 {
			t.Errorf("got %+v, %v; want the result", res, err)
		}
	})
	t.Run("session_created", func(t *testing.T) {
		a, _, _ := newTestAuditor(t, false)
		m := &fakeSessions{}
		s := a.wrapSessions(m)
		a.log.Close()
		if _, err := s.CreateSession(t.Context(), "bob", "python", 0); !errdefs.IsUnavailable(err) {
			t.Errorf("got %v; want the session refused", err)
		}
		if m.closed != "s1" {
			t.Errorf("the session created was not closed again")
		}
	})
	t.Run("start", func(t *testing.T) {
		a, cfg, _ := newTestAuditor(t, false)
		a.log.Close()
		if err := a.start(cfg, envMap(nil), "stdio", ""); err == nil || !strings.Contains(err.Error(), "does not start") {
			t.Errorf("got %v; want the server not to start", err)
		}
	})
}

// The text a model reads when its run is refused says why.
func TestAuditRefusalReachesTheModel(t *testing.T) {
	a, cfg, _ := newTestAuditor(t, false)
	a.log.Close()
	var ran atomic.Bool
	newExecutor := func(context.Context) (executor, error) {
		return runFunc(func(context.Context, exec.Request) (*exec.Result, error) {
			ran.Store(true)
			return &exec.Result{}, nil
		}), nil
	}
	c, stop := serveOverPipes(t, cfg, newExecutor, a)
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "print(1)"}}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "cannot write to it") || !strings.Contains(text, "audit log") {
		t.Errorf("result %q (isError %v); want one saying the audit log cannot be written", text, res.IsError)
	}
	t.Logf("the model reads: %s", res.Content[0].(mcp.TextContent).Text)
	if ran.Load() {
		t.Error("the program ran without its record")
	}
	stop()
}

// runFunc is an executor that runs with f and has no sessions.
type runFunc func(context.Context, exec.Request) (*exec.Result, error)

func (f runFunc) Run(ctx context.Context, req exec.Request) (*exec.Result, error) { return f(ctx, req) }
func (runFunc) Close() error                                                      { return nil }
func (runFunc) Ready(context.Context) error                                       { return nil }
func (runFunc) CreateSession(context.Context, string, string, time.Duration) (exec.SessionInfo, error) {
	return exec.SessionInfo{}, errors.New("no sessions")
}
func (runFunc) CloseSession(owner, id string) bool       { return false }
func (runFunc) Sessions(owner string) []exec.SessionInfo { return nil }
func (runFunc) Inventory(context.Context, string) (*inventory.Inventory, error) {
	return nil, errors.New("no inventory")
}

// fakeSessions creates session s1 and remembers what it closed.
type fakeSessions struct{ closed string }

func (f *fakeSessions) CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error) {
	if language != "python" {
		return exec.SessionInfo{}, errors.New("no sessions of " + language)
	}
	return exec.SessionInfo{ID: "s1", Owner: owner, Language: language, IdleTimeout: time.Minute, MaxLifetime: time.Hour}, nil
}
func (f *fakeSessions) CloseSession(owner, id string) bool       { f.closed = id; return id == "s1" }
func (f *fakeSessions) Sessions(owner string) []exec.SessionInfo { return nil }
func (f *fakeSessions) SessionLimits() exec.SessionConfig        { return exec.SessionConfig{Max: 1} }

func TestAuditSessionsAndAuth(t *testing.T) {
	a, _, path := newTestAuditor(t, false)
	s := a.wrapSessions(&fakeSessions{})
	if _, err := s.CreateSession(t.Context(), "bob", "python", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(t.Context(), "bob", "ruby", 0); err == nil {
		t.Fatal("want the fake's error")
	}
	if !s.CloseSession("bob", "s1") {
		t.Fatal("want s1 closed")
	}
	var ended int
	ec := a.observe(exec.Config{Hooks: exec.Hooks{SessionEnded: func(exec.SessionInfo, string) { ended++ }}})
	ec.Hooks.SessionEnded(exec.SessionInfo{ID: "s1", Owner: "bob", Language: "python", ExecutionCount: 4}, "closed by close_session")
	if ended != 1 {
		t.Errorf("the hook observe wrapped was called %d times; want 1", ended)
	}
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.RemoteAddr = "192.0.2.1:5555"
	r.Header.Set("Authorization", "Bearer "+testSecret)
	a.authFailed(r, "unknown token")

	recs, log := records(t, path)
	want := []map[string]any{
		{"event": eventSessionCreated, "principal": "bob", "language": "python", "session": "s1", "idle_timeout_seconds": 60.0, "max_lifetime_seconds": 3600.0},
		{"event": eventSessionCreated, "principal": "bob", "language": "ruby", "error": "no sessions of ruby"},
		{"event": eventSessionClosed, "principal": "bob", "session": "s1", "was_open": true},
		{"event": eventSessionEnded, "principal": "bob", "language": "python", "session": "s1", "why": "closed by close_session", "execution_count": 4.0},
		{"event": eventAuthFailed, "remote": "192.0.2.1:5555", "reason": "unknown token"},
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d records; want %d:\n%s", len(recs), len(want), log)
	}
	for i, w := range want {
		for k, v := range w {
			if recs[i][k] != v {
				t.Errorf("record %d %s = %v; want %v", i+1, k, recs[i][k], v)
			}
		}
		if len(recs[i]) != len(w)+2 { // + time, prev
			t.Errorf("record %d has fields %v; want only %v", i+1, recs[i], w)
		}
	}
	noSecret(t, log)
}

func TestAuditNilDoesNothing(t *testing.T) {
	var a *auditor
	var c countingRun
	if _, err := a.wrapRun(c.run, nil)(t.Context(), exec.Request{}); err != nil || c.n.Load() != 1 {
		t.Errorf("a nil auditor's run: %v, %d runs", err, c.n.Load())
	}
	m := &fakeSessions{}
	if a.wrapSessions(m) != m {
		t.Error("a nil auditor wraps the sessions")
	}
	if ec := a.observe(exec.Config{}); ec.Hooks.SessionEnded != nil {
		t.Error("a nil auditor adds a hook")
	}
	if err := a.start(config.Default(), envMap(nil), "stdio", ""); err != nil {
		t.Error(err)
	}
	a.shutdown(t.Context(), nil)
	a.authFailed(httptest.NewRequest("GET", "/", nil), "x")
	a.close()
	if got, err := openAuditor(config.Default(), "dev", slog.New(slog.DiscardHandler)); got != nil || err != nil {
		t.Errorf("openAuditor without a path: %v, %v; want nil, nil", got, err)
	}
}

func TestAuditShutdownReason(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		cancel          error
		err             error
		want            string
	}{
		{"stdin closed", "stdio", nil, nil, "stdin closed: the client is gone"},
		{"signal", "http", errors.New("terminated signal received"), nil, "terminated signal received"},
		{"error", "http", nil, errors.New("serve HTTP: boom"), "serve HTTP: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, cfg, path := newTestAuditor(t, false)
			a.start(cfg, envMap(nil), tc.transport, "")
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tc.cancel != nil {
				cancel(tc.cancel)
			}
			a.shutdown(ctx, tc.err)
			recs, _ := records(t, path)
			if got := recs[len(recs)-1]; got["event"] != eventShutdown || got["reason"] != tc.want {
				t.Errorf("got %v; want shutdown, reason %q", got, tc.want)
			}
		})
	}
}

// A run still going when the transport returns is recorded as ended
// before shutdown.
func TestAuditShutdownWaitsForRuns(t *testing.T) {
	a, _, path := newTestAuditor(t, false)
	release, running := make(chan struct{}), make(chan struct{})
	run := a.wrapRun(func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		close(running)
		<-release
		return nil, context.Canceled
	}, nil)
	go run(t.Context(), exec.Request{Language: "python", Code: "1"})
	<-running
	done := make(chan struct{})
	go func() {
		a.shutdown(t.Context(), nil)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("shutdown did not wait for the run in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	recs, _ := records(t, path)
	var events []string
	for _, r := range recs {
		events = append(events, r["event"].(string))
	}
	if got, want := strings.Join(events, " "), "run_started run_ended shutdown"; got != want {
		t.Errorf("events %s; want %s", got, want)
	}
}

// A flood of bad tokens writes at most authFailedBurst records at once,
// then authFailedPerSecond; the next record counts those left out.
func TestAuditAuthFailedRationed(t *testing.T) {
	a, _, path := newTestAuditor(t, false)
	now := time.Unix(1_000_000, 0)
	a.now = func() time.Time { return now }
	r := httptest.NewRequest("POST", "/mcp", nil)
	for range 1000 {
		a.authFailed(r, "missing")
	}
	recs, _ := records(t, path)
	if len(recs) != authFailedBurst {
		t.Fatalf("1000 failures at once wrote %d records; want %d", len(recs), authFailedBurst)
	}
	now = now.Add(time.Second / authFailedPerSecond)
	a.authFailed(r, "missing")
	recs, _ = records(t, path)
	last := recs[len(recs)-1]
	if len(recs) != authFailedBurst+1 || last["suppressed"] != float64(1000-authFailedBurst) {
		t.Fatalf("after a second: %d records, the last %v; want %d, suppressed %d", len(recs), last, authFailedBurst+1, 1000-authFailedBurst)
	}
}

// A pass-through value is redacted from every string the log records,
// whatever field holds it: file paths in and out, the code's text, an
// error, a session's why and id; hashes are kept as computed, the chain
// verifies, and a value too short to redact is named in start.
func TestAuditRedactsPassThroughValues(t *testing.T) {
	a, cfg, path := newTestAuditor(t, true)
	cfg.Sandbox.PassThroughEnv = []string{"SECRET_X", "SHORT_Y", "EMPTY_Z", "UNSET_Y"}
	// A value with bytes json escapes, and one that is not UTF-8, which
	// json writes with U+FFFD.
	const quoted, notUTF8 = `q"<&>\` + testSecret, "\xff\xfe" + testSecret + "-raw"
	env := envMap(map[string]string{"SECRET_X": testSecret, "SHORT_Y": "ab", "EMPTY_Z": "", "QUOTED": quoted, "RAW": notUTF8})
	cfg.Sandbox.PassThroughEnv = append(cfg.Sandbox.PassThroughEnv, "QUOTED", "RAW")
	if err := a.start(cfg, env, "stdio", ""); err != nil {
		t.Fatal(err)
	}
	code := "open(os.environ['SECRET_X'], 'w') # " + testSecret
	out := []byte("data " + testSecret)
	run := a.wrapRun(func(_ context.Context, req exec.Request) (*exec.Result, error) {
		if req.Language == "javascript" {
			return nil, errors.New("open " + quoted + ": denied; " + notUTF8)
		}
		return &exec.Result{Files: []exec.File{{Path: "out/" + testSecret + ".txt", Data: out}}}, nil
	}, nil)
	in := []exec.File{{Path: testSecret + "/in.csv", Data: []byte("a")}}
	if _, err := run(t.Context(), exec.Request{Language: "python", Code: code, Files: in}); err != nil {
		t.Fatal(err)
	}
	run(t.Context(), exec.Request{Language: "javascript", Code: "1"})
	s := a.wrapSessions(&fakeSessions{})
	s.CloseSession("bob", testSecret)
	a.observe(exec.Config{}).Hooks.SessionEnded(exec.SessionInfo{ID: "s1", Owner: "bob", Language: "python"}, "crashed: "+testSecret)
	a.shutdown(t.Context(), nil)

	recs, log := records(t, path)
	noSecret(t, log)
	for _, v := range []string{quoted, notUTF8, strings.ToValidUTF8(notUTF8, "\uFFFD")} {
		enc, _ := json.Marshal(v)
		if strings.Contains(log, v) || strings.Contains(log, string(enc[1:len(enc)-1])) {
			t.Errorf("the log holds the value %q, raw or as JSON writes it:\n%s", v, log)
		}
	}
	if got := recs[0]["pass_through_env_not_redacted"]; len(got.([]any)) != 1 || got.([]any)[0] != "SHORT_Y" {
		t.Errorf("start pass_through_env_not_redacted %v; want [SHORT_Y]", got)
	}
	x := redactMarker("SECRET_X")
	re := recs[2]
	for k, want := range map[string]any{
		"code.text": nil, "code.sha256": sha(code),
	} {
		if got := jsontest.Get(re, k); got != want {
			t.Errorf("run_ended %s = %v; want %v", k, got, want)
		}
	}
	if got := jsontest.Get(recs[1], "code.text"); got != "open(os.environ['SECRET_X'], 'w') # "+x {
		t.Errorf("run_started code.text %v; want the value redacted", got)
	}
	f := jsontest.Get(re, "files_out").([]any)[0].(map[string]any)
	if f["path"] != "out/"+x+".txt" || f["sha256"] != sha(string(out)) || f["size"] != float64(len(out)) {
		t.Errorf("files_out %v; want the path redacted, the hash and size as they are", f)
	}
	if got := jsontest.Get(jsontest.Get(re, "files_in").([]any)[0].(map[string]any), "path"); got != x+"/in.csv" {
		t.Errorf("files_in path %v; want %s/in.csv", got, x)
	}
	if got, want := jsontest.Get(recs[4], "outcome.error"), "open "+redactMarker("QUOTED")+": denied; "+redactMarker("RAW"); got != want {
		t.Errorf("run_ended outcome.error %q; want %q", got, want)
	}
	if recs[5]["session"] != x || recs[6]["why"] != "crashed: "+x {
		t.Errorf("session_closed %v, session_ended %v; want the value redacted", recs[5], recs[6])
	}
}

// A longer value wins over one it holds, and a value too short is left
// alone and named.
func TestNewRedactor(t *testing.T) {
	cfg := config.Default()
	cfg.Sandbox.PassThroughEnv = []string{"A", "AB", "S", "N"}
	redact, short := newRedactor(cfg, envMap(map[string]string{"A": "token", "AB": "token-long", "S": "abc", "N": "nope"}))
	if !slices.Equal(short, []string{"S"}) {
		t.Errorf("too short: %v; want [S]", short)
	}
	for in, want := range map[string]string{
		"x token-long y token abc": "x [redacted AB] y [redacted A] abc",
		"nopetoken":                "[redacted N][redacted A]",
		"":                         "",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q; want %q", in, got, want)
		}
	}
	if redact, _ := newRedactor(cfg, envMap(nil)); redact != nil {
		t.Error("a redactor with nothing to redact; want nil")
	}
}

// The network secrets' values are redacted too: no sandbox holds them,
// but an upstream that reflects its request could hand one to a program.
func TestRedactorKnowsNetworkSecrets(t *testing.T) {
	cfg, err := config.Parse("[network.secrets.\"api.example.com\"]\nheader = \"X-Key\"\nvalue_env = \"API_KEY\"\n[languages.python.network]\nallow = [\"a.example\"]\n[languages.python.network.secrets.\"a.example\"]\nheader = \"X-Key\"\nvalue_env = \"PY_KEY\"\n", "test")
	if err != nil {
		t.Fatal(err)
	}
	redact, _ := newRedactor(cfg, envMap(map[string]string{"API_KEY": "secret-one", "PY_KEY": "secret-two"}))
	if redact == nil {
		t.Fatal("no redactor")
	}
	if got := redact("a secret-one b secret-two"); got != "a [redacted API_KEY] b [redacted PY_KEY]" {
		t.Errorf("redact = %q", got)
	}
	if got := notificationSecrets(cfg, envMap(map[string]string{"API_KEY": "secret-one"}), slog.New(slog.DiscardHandler)); len(got) != 1 || got[0].Name != "API_KEY" {
		t.Errorf("notification secrets %+v; want API_KEY's", got)
	}
}

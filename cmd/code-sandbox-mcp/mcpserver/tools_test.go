package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/hint"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func TestParseArgs(t *testing.T) {
	lim := pythonLimits(t)
	for _, tc := range []struct {
		name    string
		raw     any
		want    toolArgs
		wantErr string
	}{
		{"code", json.RawMessage(`{"code":"print(1)"}`), toolArgs{code: "print(1)"}, ""},
		{"map", map[string]any{"code": "print(1)", "timeout_seconds": 5.0}, toolArgs{code: "print(1)", timeout: 5 * time.Second}, ""},
		{"timeout", json.RawMessage(`{"code":"x","timeout_seconds":120}`), toolArgs{code: "x", timeout: 120 * time.Second}, ""},
		{"null timeout", json.RawMessage(`{"code":"x","timeout_seconds":null}`), toolArgs{}, "not null; leave it out"},
		{"missing", nil, toolArgs{}, "missing arguments"},
		{"not an object", json.RawMessage(`["print(1)"]`), toolArgs{}, "must be a JSON object"},
		{"no code", json.RawMessage(`{}`), toolArgs{}, `missing argument "code"`},
		{"number code", json.RawMessage(`{"code":5}`), toolArgs{}, "must be a string holding the python program, not a number"},
		{"null code", json.RawMessage(`{"code":null}`), toolArgs{}, "not null"},
		{"empty code", json.RawMessage(`{"code":""}`), toolArgs{}, "is empty"},
		{"blank code", json.RawMessage(`{"code":"  \n"}`), toolArgs{}, "is empty"},
		{"big code", map[string]any{"code": strings.Repeat("#", 1<<20+1)}, toolArgs{}, "the limit is 1MiB"},
		{"unknown arg", json.RawMessage(`{"code":"x","language":"python"}`), toolArgs{}, `unknown argument "language"`},
		{"string timeout", json.RawMessage(`{"code":"x","timeout_seconds":"5"}`), toolArgs{}, "not a string"},
		{"fractional timeout", json.RawMessage(`{"code":"x","timeout_seconds":1.5}`), toolArgs{}, "whole number"},
		{"zero timeout", json.RawMessage(`{"code":"x","timeout_seconds":0}`), toolArgs{}, "from 1 to 120"},
		{"timeout over max", json.RawMessage(`{"code":"x","timeout_seconds":121}`), toolArgs{}, "from 1 to 120"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseArgs(tc.raw, "python", lim, nil, false, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v; want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// callTool calls a tool through c and returns its text, isError and
// structuredContent, decoded.
func callTool(t *testing.T, ctx context.Context, c *client.Client, name string, args any) (string, bool, map[string]any) {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("tools/call %s: %v; want a result", name, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("tools/call %s: no content", name)
	}
	text, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("tools/call %s: content %T; want text", name, res.Content[0])
	}
	var sc map[string]any
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &sc); err != nil {
			t.Fatal(err)
		}
	}
	return text.Text, res.IsError, sc
}

func TestToolCall(t *testing.T) {
	cfg := config.Default()
	var got exec.Request
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		got = req
		return &exec.Result{Language: req.Language, Image: cfg.Languages[req.Language].Image, Stdout: []byte("42\n"),
			Timeout: 30 * time.Second, Duration: 1500 * time.Millisecond}, nil
	}
	text, isErr, sc := callTool(t, t.Context(), runClient(t, run), "run_js_code", map[string]any{"code": "console.log(42)", "timeout_seconds": 7})
	if text != "42\n" || isErr {
		t.Errorf("text %q, isError %v; want exactly stdout and no error", text, isErr)
	}
	if got.Language != "javascript" || got.Code != "console.log(42)" || got.Timeout != 7*time.Second {
		t.Errorf("Run got %+v", got)
	}
	want := map[string]any{"stdout": "42\n", "stderr": "", "exit_code": 0.0, "signal": "", "timed_out": false, "oom_killed": false,
		"stdout_truncated_bytes": 0.0, "stderr_truncated_bytes": 0.0, "duration_ms": 1500.0, "timeout_seconds": 30.0,
		"language": "javascript", "image": "localhost/code-sandbox-mcp/nodejs:trixie", "files": []any{}, "files_dropped": 0.0}
	if fmt.Sprint(sc) != fmt.Sprint(want) {
		t.Errorf("structuredContent %v; want %v", sc, want)
	}
}

// Bad arguments: an error result, nothing run, not a JSON-RPC error.
func TestToolCallBadArguments(t *testing.T) {
	c := runClient(t, noRun(t))
	for _, args := range []any{map[string]any{"code": 1}, map[string]any{"code": "x", "extra": true}, map[string]any{"code": ""}, "just a string"} {
		if text, isErr, _ := callTool(t, t.Context(), c, "run_python_code", args); !isErr || !strings.Contains(text, "Nothing was run") {
			t.Errorf("%v: %q, isError %v; want an error result", args, text, isErr)
		}
	}
}

// Sandbox errors: an error result that says what is wrong, whose fault
// it is, whether retrying helps, and the one thing to do.
func TestToolCallSandboxErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		want    []string
		notWant []string
	}{
		{"bad request", fmt.Errorf("timeout 200s is over the maximum of 2m0s: %w", errdefs.ErrInvalidArgument),
			[]string{"Invalid request: timeout 200s", "Nothing was run", "fix the arguments"}, []string{"doctor", "import"}},
		{"missing image", fmt.Errorf("image x for python is not in containerd namespace %q: %w", "test-ns", errdefs.ErrNotFound),
			[]string{"image x for python", "not of your code", "retrying will not help", "ask the user to import", testOptions.ImportHint}, []string{"doctor", "retrying may help"}},
		{"bad set-up", fmt.Errorf("start python in image x: exec: python: not found: %w", errdefs.ErrFailedPrecondition),
			[]string{"python: not found", "not of your code", "retrying will not help", testOptions.DoctorHint}, []string{"import", "retrying may help"}},
		{"pull refused", fmt.Errorf("pull image x: tls: certificate signed by unknown authority: %w", errdefs.ErrFailedPrecondition),
			[]string{"certificate", "retrying will not help", testOptions.DoctorHint}, []string{"retrying may help"}},
		{"containerd down", fmt.Errorf("connect: socket missing: %w", errdefs.ErrUnavailable),
			[]string{"socket missing", "not of your code", "retrying will not help", testOptions.DoctorHint}, []string{"retrying may help"}},
		{"containerd denies", fmt.Errorf("connect: %w", errdefs.ErrPermissionDenied),
			[]string{"not of your code", testOptions.DoctorHint}, []string{"retrying may help"}},
		{"containerd restarting", fmt.Errorf("%w: look up image x: %w", exec.ErrNotAnswering, errdefs.ErrUnavailable),
			[]string{"did not answer", "restarting", "retry in a moment", testOptions.DoctorHint}, []string{"will not help"}},
		{"disk full", fmt.Errorf("write the program (14 bytes) to state directory /s, which has 0 bytes free: %w", errdefs.ErrResourceExhausted),
			[]string{"no room", "0 bytes free", "state_dir"}, []string{"set up wrongly", "will not help"}},
		{"no uid", fmt.Errorf("every uid of uid_range 1-2 is held: widen [limits] uid_range: %w", exec.ErrNoUID),
			[]string{"Every sandbox is in use", "not a problem of your code", "retry once", "uid_range"}, []string{"no room", "state_dir", "will not help"}},
		{"deadline", fmt.Errorf("create task: %w", context.DeadlineExceeded),
			[]string{"create task", "not a problem of your code", "retrying may help"}, []string{"doctor", "will not help"}},
		{"other", errors.New("shim died"),
			[]string{"shim died", "retrying may help"}, []string{"doctor", "will not help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(context.Context, exec.Request) (*exec.Result, error) { return nil, tc.err }
			text, isErr, _ := callTool(t, t.Context(), runClient(t, run), "run_python_code", map[string]any{"code": "x"})
			if !isErr {
				t.Errorf("isError false; want true")
			}
			checkText(t, text, tc.want, tc.notWant)
		})
	}
}

// A call the client gives up on is cancelled on the server: the run's
// context ends, which is what kills its sandbox.
func TestAbandonedCallCancelsTheRun(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	}
	c := runClient(t, run)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "x"}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool: %v; want context.Canceled", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the run's context was not cancelled 10s after the client gave up on the call")
	}
}

// A cancelled call's result says so.
func TestCancelledCallText(t *testing.T) {
	started := make(chan struct{})
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := toolHandler(pythonLanguage(t), run, testOptions.fileStore(), testOptions, nil)
	go func() {
		<-started
		cancel()
	}()
	res, err := h(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Arguments: map[string]any{"code": "x"}}})
	if err != nil || !res.IsError {
		t.Fatalf("got %+v, %v; want an error result", res, err)
	}
	// The sandbox's removal runs on after the call returns: the text may
	// not claim it is done.
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "cancelled") || !strings.Contains(text, "is being removed") {
		t.Errorf("text %q; want one saying the call was cancelled and its sandbox is being removed", text)
	}
}

func TestResultText(t *testing.T) {
	lim := pythonLimits(t)
	head := int(lim.OutputBytes) / 2
	for _, tc := range []struct {
		name string
		r    exec.Result
		want string
	}{
		{"clean", exec.Result{Stdout: []byte("hi\n")}, "hi\n"},
		{"clean no newline", exec.Result{Stdout: []byte("hi")}, "hi"},
		{"no output", exec.Result{}, "(The program finished without output. Print the results you need to stdout.)"},
		{"stderr", exec.Result{Stdout: []byte("out\n"), Stderr: []byte("warn\n"), Duration: time.Second},
			"out\n--- stderr ---\nwarn\n--- exit code 0; 1.00s ---"},
		{"exception", exec.Result{Stderr: []byte("Traceback\nZeroDivisionError"), ExitCode: 1, Duration: 20 * time.Millisecond},
			"--- stderr ---\nTraceback\nZeroDivisionError\n--- exit code 1; 0.02s ---"},
		{"exit code", exec.Result{Stdout: []byte("partial"), ExitCode: 3},
			"partial\n--- exit code 3; 0.00s ---"},
		{"timeout", exec.Result{Stdout: []byte("tick\n"), ExitCode: -1, Signal: "SIGKILL", TimedOut: true, Timeout: 2 * time.Second, Duration: 2 * time.Second},
			"tick\n--- timed out after 2s and was killed; 2.00s ---"},
		{"oom", exec.Result{ExitCode: -1, Signal: "SIGKILL", OOMKilled: true},
			"--- killed: out of memory (limit 512MiB); 0.00s ---"},
		{"signal", exec.Result{ExitCode: -1, Signal: "SIGSEGV"},
			"--- killed by SIGSEGV; 0.00s ---"},
		// Over 128, the program's own status as the kernel said.
		{"exit over 128", exec.Result{ExitCode: 139},
			"--- exit code 139; 0.00s ---"},
		// Over 128 where nobody could tell: a signal, or the program's own
		// exit status.
		{"exit over 128, unknown", exec.Result{ExitCode: 139, SignalUnknown: true},
			"--- exit code 139 (128+11: killed by SIGSEGV, or the program's own exit status); 0.00s ---"},
		{"exit over 128, unknown, no signal name", exec.Result{ExitCode: 128 + 40, SignalUnknown: true},
			"--- exit code 168 (128+40: killed by signal 40, or the program's own exit status); 0.00s ---"},
		{"exit over 192", exec.Result{ExitCode: 200},
			"--- exit code 200; 0.00s ---"},
		{"truncated", exec.Result{Stdout: []byte(strings.Repeat("a", head) + strings.Repeat("b", 3)), StdoutDropped: 100},
			strings.Repeat("a", head) + "\n[... 100 bytes dropped ...]\nbbb\n--- exit code 0; stdout truncated: 100 bytes dropped from the middle; 0.00s ---"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultText(&tc.r, lim, "", ""); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestToolResultFlags(t *testing.T) {
	lim := pythonLimits(t)
	for _, tc := range []struct {
		r       exec.Result
		isError bool
	}{
		{exec.Result{Stdout: []byte("x")}, false},
		{exec.Result{Stderr: []byte("warning")}, false},
		{exec.Result{ExitCode: 1}, true},
		{exec.Result{TimedOut: true, ExitCode: -1}, true},
		{exec.Result{OOMKilled: true, ExitCode: -1}, true},
		{exec.Result{Stdout: []byte{0xff, 'a'}, StderrDropped: 5}, false},
	} {
		res := toolResult(&tc.r, lim, retention{}, "")
		if res.IsError != tc.isError {
			t.Errorf("%+v: isError %v; want %v", tc.r, res.IsError, tc.isError)
		}
		out := res.StructuredContent.(runOutput)
		if out.StderrTruncatedBytes != tc.r.StderrDropped || !utf8.ValidString(out.Stdout) {
			t.Errorf("%+v: structured %+v", tc.r, out)
		}
	}
}

// pythonLimits are the default limits of python.
func pythonLimits(t *testing.T) config.Limits {
	t.Helper()
	return pythonLanguage(t).Limits
}

// pythonLanguage is the default python.
func pythonLanguage(t *testing.T) config.Language {
	t.Helper()
	l, ok := config.Default().Language("python")
	if !ok {
		t.Fatal("no python in the defaults")
	}
	return l
}

// A run that fails on a missing module gets the hint once, as the text's
// last line and as structuredContent's hint, naming the similar modules
// that Options.Modules returns; a clean run gets neither.
func TestToolResultHint(t *testing.T) {
	stderr := "Traceback (most recent call last):\n  File \"/sandbox/main.py\", line 1, in <module>\n    import seaborn\nModuleNotFoundError: No module named 'seaborn'\n"
	results := map[string]*exec.Result{
		"import seaborn": {Stderr: []byte(stderr), ExitCode: 1},
		"print(stderr)":  {Stdout: []byte(stderr)},
	}
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return results[req.Code], nil
	}
	o := testOptions
	var asked []string
	o.Modules = func(language string) []string {
		asked = append(asked, language)
		return []string{"seaborn2", "numpy"}
	}
	h := toolHandler(pythonLanguage(t), run, o.fileStore(), o, nil)
	call := func(code string) (string, runOutput) {
		t.Helper()
		res, err := h(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Arguments: map[string]any{"code": code}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(mcp.TextContent).Text, res.StructuredContent.(runOutput)
	}
	text, out := call("import seaborn")
	want := hint.For(results["import seaborn"], pythonLanguage(t), []string{"seaborn2", "numpy"})
	if !strings.Contains(want, "similar modules there: seaborn2.") {
		t.Fatalf("hint %q; want it to name seaborn2", want)
	}
	if out.Hint != want || !strings.HasSuffix(text, "---\n"+want) || strings.Count(text, "hint:") != 1 {
		t.Errorf("text %q, hint %q; want the text to end with the hint %q, once", text, out.Hint, want)
	}
	if !slices.Equal(asked, []string{"python"}) {
		t.Errorf("Modules asked for %q; want python", asked)
	}
	text, out = call("print(stderr)")
	if out.Hint != "" || strings.Contains(text, "hint:") {
		t.Errorf("a clean run printing the words: text %q, hint %q; want no hint", text, out.Hint)
	}
	data, err := json.Marshal(out)
	if err != nil || strings.Contains(string(data), `"hint"`) {
		t.Errorf("structuredContent %s; want no hint field when there is none", data)
	}
}

// checkText fails unless text holds every string of want and none of
// notWant.
func checkText(t *testing.T, text string, want, notWant []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("text has no %q:\n%s", w, text)
		}
	}
	for _, w := range notWant {
		if strings.Contains(text, w) {
			t.Errorf("text has %q:\n%s", w, text)
		}
	}
}

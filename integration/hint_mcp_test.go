package integration

import (
	"strings"
	"testing"
)

// A program that fails on a module its image does not hold, or on the
// network the sandbox does not have, gets one hint line, at the end of the
// text and as structuredContent's hint; one that prints the same words, or
// catches the error, gets none. One-shot runs and session cells alike.
func TestMCPHints(t *testing.T) {
	s := startMCP(t, serverSpec{config: "[sessions]\nmax_sessions = 1\n"})
	ctx := testContext(t)
	const (
		module  = "hint: the module '"
		network = "hint: the sandbox has no network, by design"
		refused = "hint: the connection was refused: the sandbox has no network, and its localhost is its own"
	)
	tests := []struct {
		name, tool, code string
		want             string // the hint's start; "" for none
		wantIn           string
	}{
		{name: "python missing module", tool: "run_python_code", code: "import seaborn_not_here",
			want: module + "seaborn_not_here' is not in this sandbox's image", wantIn: "images build --from python --pip seaborn_not_here"},
		{name: "javascript missing module", tool: "run_js_code", code: "require('left-pad-not-here')",
			want: module + "left-pad-not-here' is not in this sandbox's image"},
		{name: "python name resolution", tool: "run_python_code", code: "import socket; socket.getaddrinfo('example.invalid', 80)",
			want: network},
		// The sandbox's loopback is up and nothing listens on it, so a
		// connection to it is refused (one elsewhere is unreachable).
		{name: "python requests to the loopback", tool: "run_python_code", code: "import requests; requests.get('http://127.0.0.1:9/')",
			want: refused},
		{name: "javascript fetch", tool: "run_js_code", code: "await fetch('http://example.com/')",
			want: network},
		{name: "python words on stdout", tool: "run_python_code", code: "print(\"ModuleNotFoundError: No module named 'x'\")"},
		{name: "python caught", tool: "run_python_code", code: "try:\n    import seaborn_not_here\nexcept ImportError as e:\n    print('no seaborn:', e)"},
		{name: "python words on stderr, exit 0", tool: "run_python_code",
			code: "import sys\nprint(\"Traceback (most recent call last):\\nsocket.gaierror: [Errno -3] Temporary failure in name resolution\", file=sys.stderr)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.call(ctx, t, tt.tool, code(tt.code))
			checkHint(t, r, tt.want, tt.wantIn)
		})
	}

	// A session's cell: its driver shows the error otherwise.
	var py createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &py); isErr {
		t.Fatalf("create_session: %q", text)
	}
	r := s.call(ctx, t, "run_python_code", map[string]any{"code": "import seaborn_not_here", "session_id": py.SessionID})
	checkHint(t, r, module+"seaborn_not_here'", "")
	r = s.call(ctx, t, "run_python_code", map[string]any{"code": "import requests\nrequests.get('http://example.com/')", "session_id": py.SessionID})
	checkHint(t, r, network, "")
	if r.out.SessionID != py.SessionID || r.out.ExecutionCount != 2 {
		t.Errorf("structured %+v; want cell 2 of %s", r.out, py.SessionID)
	}
}

// checkHint fails unless r has exactly one hint line, starting with want
// and holding wantIn, as its text's last line and as its hint; with want
// "", unless it has none.
func checkHint(t *testing.T, r toolResult, want, wantIn string) {
	t.Helper()
	if n := strings.Count(r.text, "hint:"); want == "" && (n != 0 || r.out.Hint != "") {
		t.Fatalf("text %q, hint %q; want no hint", r.text, r.out.Hint)
	} else if want == "" {
		return
	} else if n != 1 {
		t.Fatalf("text %q has %d hints; want one", r.text, n)
	}
	h := r.out.Hint
	if !strings.HasPrefix(h, want) || !strings.Contains(h, wantIn) || strings.Contains(h, "\n") {
		t.Errorf("hint %q; want one line starting %q, holding %q", h, want, wantIn)
	}
	if !strings.HasSuffix(r.text, "\n"+h) {
		t.Errorf("text %q; want it to end with the hint", r.text)
	}
	if !r.isError || r.out.ExitCode == 0 {
		t.Errorf("isError %v, exit %d; want a failed run", r.isError, r.out.ExitCode)
	}
}

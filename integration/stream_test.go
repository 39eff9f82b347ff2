package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// streamNote is a notification of a run's output as a client got it:
// notifications/progress (Progress set) or notifications/message, its
// stream, its text, and when it came, since the call.
type streamNote struct {
	Method   string
	Stream   string
	Text     string
	Progress float64
	At       time.Duration
}

// noteRecorder keeps the notifications an mcp-go client gets. mcp-go's
// clients hand them over in the order they were read, before they read
// the response that follows them.
type noteRecorder struct {
	mu    sync.Mutex
	began time.Time
	notes []streamNote
}

// recordNotes records c's notifications from now on.
func recordNotes(c *client.Client) *noteRecorder {
	r := &noteRecorder{began: time.Now()}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		f := n.Params.AdditionalFields
		note := streamNote{Method: n.Method}
		switch n.Method {
		case "notifications/progress":
			msg, _ := f["message"].(string)
			note.Stream, note.Text, _ = strings.Cut(msg, ": ")
			note.Progress, _ = f["progress"].(float64)
		case "notifications/message":
			note.Stream, _ = f["logger"].(string)
			note.Text, _ = f["data"].(string)
			if lvl, _ := f["level"].(string); lvl != "info" {
				note.Text = "level " + lvl + ": " + note.Text
			}
		default:
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		note.At = time.Since(r.began)
		r.notes = append(r.notes, note)
	})
	return r
}

// take returns the notes so far and forgets them; the next are timed
// from now.
func (r *noteRecorder) take() []streamNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	notes := r.notes
	r.notes, r.began = nil, time.Now()
	return notes
}

// callStreaming calls tool with args and a progress token, and returns
// the result and the notifications that came before it.
func callStreaming(ctx context.Context, t *testing.T, c *client.Client, r *noteRecorder, tool string, args map[string]any) (toolResult, []streamNote) {
	t.Helper()
	r.take()
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "progress-" + tool}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return decodeResult(t, res), r.take()
}

// streamed is what notes of method say came on stream, in order.
func streamed(notes []streamNote, method, stream string) string {
	var b strings.Builder
	for _, n := range notes {
		if n.Method == method && n.Stream == stream {
			b.WriteString(n.Text)
		}
	}
	return b.String()
}

// Programs that print a line on stdout and one on stderr each second for
// 5 s, flushing each.
const (
	pythonTicks = "import sys, time\nfor i in range(5):\n    print(f'out {i}', flush=True)\n    print(f'err {i}', file=sys.stderr, flush=True)\n    time.sleep(1)\n"
	jsTicks     = "let i = 0;\nconst t = setInterval(() => {\n  console.log(`out ${i}`);\n  console.error(`err ${i}`);\n  if (++i === 5) clearInterval(t);\n}, 1000);\n"
	ticksOut    = "out 0\nout 1\nout 2\nout 3\nout 4\n"
	ticksErr    = "err 0\nerr 1\nerr 2\nerr 3\nerr 4\n"
)

// checkTicks checks the notifications of a ticks program's call, which
// lasted took: at least 4 progress notifications, each stream's lines in
// order and whole, the first of them seconds before the result (streamed,
// not sent at the end), progress increasing.
func checkTicks(t *testing.T, notes []streamNote, took time.Duration) {
	t.Helper()
	var progress []streamNote
	for _, n := range notes {
		if n.Method == "notifications/progress" {
			progress = append(progress, n)
		}
	}
	if len(progress) < 4 {
		t.Fatalf("%d progress notifications before the result; want at least 4: %+v", len(progress), notes)
	}
	if got := streamed(notes, "notifications/progress", "stdout"); got != ticksOut {
		t.Errorf("stdout streamed as %q; want %q", got, ticksOut)
	}
	if got := streamed(notes, "notifications/progress", "stderr"); got != ticksErr {
		t.Errorf("stderr streamed as %q; want %q", got, ticksErr)
	}
	if first := progress[0].At; took-first < 3*time.Second {
		t.Errorf("the first notification came %s into a call of %s; want it seconds before the result", first, took)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Progress <= progress[i-1].Progress {
			t.Errorf("progress %v after %v; want it increasing", progress[i].Progress, progress[i-1].Progress)
		}
	}
}

// A program that prints a line a second streams its lines to an mcp-go
// client as they come, before the result, which is the same as without
// streaming: over stdio (Python) and streamable HTTP (JavaScript, on the
// POST's own event stream: mcp-go's client opens no other).
func TestStreamTicks(t *testing.T) {
	t.Run("stdio python", func(t *testing.T) {
		s := startMCP(t, serverSpec{})
		r := recordNotes(s.c)
		began := time.Now()
		res, notes := callStreaming(testContext(t), t, s.c, r, "run_python_code", code(pythonTicks))
		checkTicks(t, notes, time.Since(began))
		if res.isError || res.out.Stdout != ticksOut || res.out.Stderr != ticksErr {
			t.Errorf("result %q %+v; want the program's output", res.text, res.out)
		}
	})
	t.Run("http javascript", func(t *testing.T) {
		s := startMCPHTTP(t, serverSpec{})
		r := recordNotes(s.c)
		began := time.Now()
		res, notes := callStreaming(testContext(t), t, s.c, r, "run_js_code", code(jsTicks))
		checkTicks(t, notes, time.Since(began))
		if res.isError || res.out.Stdout != ticksOut || res.out.Stderr != ticksErr {
			t.Errorf("result %q %+v; want the program's output", res.text, res.out)
		}
	})
}

// A run in a sandbox made on demand (no pool: started by containerd's
// Start, no warm driver) streams as a warm one does.
func TestStreamColdRun(t *testing.T) {
	s := startMCP(t, serverSpec{config: "[languages.python]\npool = 0\n"})
	r := recordNotes(s.c)
	began := time.Now()
	res, notes := callStreaming(testContext(t), t, s.c, r, "run_python_code", code(
		"import time\nfor i in range(3):\n    print(f'cold {i}', flush=True)\n    time.sleep(0.6)\n"))
	took := time.Since(began)
	if got, want := streamed(notes, "notifications/progress", "stdout"), "cold 0\ncold 1\ncold 2\n"; got != want {
		t.Errorf("streamed %q; want %q (%+v)", got, want, notes)
	}
	if len(notes) < 2 || took-notes[0].At < time.Second {
		t.Errorf("notifications %+v in a call of %s; want the first a second or more before the result", notes, took)
	}
	if res.out.Stdout != "cold 0\ncold 1\ncold 2\n" {
		t.Errorf("result %+v; want the program's output", res.out)
	}
}

// A session's cell streams its output as a one-shot run does.
func TestStreamSessionCell(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	var py createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &py); isErr {
		t.Fatalf("create_session: %s", text)
	}
	r := recordNotes(s.c)
	callStreaming(ctx, t, s.c, r, "run_python_code", map[string]any{"code": "n = 3", "session_id": py.SessionID})
	began := time.Now()
	res, notes := callStreaming(ctx, t, s.c, r, "run_python_code", map[string]any{
		"code":       "import time\nfor i in range(n):\n    print(f'cell {i}', flush=True)\n    time.sleep(0.6)\n",
		"session_id": py.SessionID,
	})
	took := time.Since(began)
	if got, want := streamed(notes, "notifications/progress", "stdout"), "cell 0\ncell 1\ncell 2\n"; got != want {
		t.Errorf("the cell streamed %q; want %q (%+v)", got, want, notes)
	}
	if len(notes) < 2 || took-notes[0].At < time.Second {
		t.Errorf("notifications %+v in a call of %s; want the first a second or more before the result", notes, took)
	}
	if res.out.Stdout != "cell 0\ncell 1\ncell 2\n" || res.out.SessionID != py.SessionID {
		t.Errorf("result %+v; want the cell's output", res.out)
	}
}

// A program that floods 50 MiB streams a bounded part of it, in a bounded
// number of notifications, and the server's memory stays bounded; the
// result is bounded as ever.
func TestStreamFloodIsBounded(t *testing.T) {
	path, tokens := tokenFile(t, "flood")
	h := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
	c := h.connect(t, tokens["flood"])
	r := recordNotes(c)
	ctx := testContext(t)
	// A first run, so that the server's pools and caches are what they
	// are in use before the baseline.
	callStreaming(ctx, t, c, r, "run_python_code", code("print('warm')"))
	before := h.rss(t)
	var peak int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := rssOf(h.cmd.Process.Pid); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	began := time.Now()
	res, notes := callStreaming(ctx, t, c, r, "run_python_code", code(
		"import sys\nline = 'x' * 1023 + '\\n'\nblock = line * 1024\nfor _ in range(50):\n    sys.stdout.write(block)\nsys.stdout.flush()\nprint('the end', file=sys.stderr)\n"))
	took := time.Since(began)
	close(stop)
	<-sampled
	if res.isError || res.out.StdoutTruncatedBytes == 0 {
		t.Fatalf("result %q %+v; want 50 MiB of stdout, truncated", res.text, res.out)
	}
	var text int
	var last float64
	for _, n := range notes {
		text += len(n.Text)
		last = n.Progress
	}
	// A send at most every 250 ms, the first at once and the last at
	// the end; each at most 10 notifications (8 of output, then for each
	// stream that had more the count of bytes dropped and its last KiB)
	// and 6 KiB of output (4 KiB, two tails), and the counts' lines.
	sends := int(took/(250*time.Millisecond)) + 2
	if perSend := 6<<10 + 2*64; len(notes) > 10*sends || text > perSend*sends {
		t.Errorf("%d notifications, %d bytes in %s; want at most %d and %d", len(notes), text, took, 10*sends, perSend*sends)
	}
	if !strings.Contains(streamed(notes, "notifications/progress", "stdout"), "bytes of stdout not streamed ...]") {
		t.Error("no notification says what was not streamed")
	}
	if want := float64(50<<20 + len("the end\n")); last != want {
		t.Errorf("last progress %v; want %v, every byte streamed or said to be dropped", last, want)
	}
	// The end of each stream is streamed.
	if !strings.HasSuffix(streamed(notes, "notifications/progress", "stderr"), "the end\n") {
		t.Errorf("stderr's last line was not streamed: %+v", notes[max(0, len(notes)-3):])
	}
	if !strings.HasSuffix(streamed(notes, "notifications/progress", "stdout"), "xxx\n") {
		t.Errorf("stdout's last line was not streamed")
	}
	// The server keeps 4 KiB of a call's output for its notifications and
	// the result's head and tail of each stream; 50 MiB through it must
	// not show. 16 MiB is room for the Go runtime's own growth.
	const bound = 16 << 20
	if peak-before > bound {
		t.Errorf("the server's RSS went from %s to %s during the flood; want at most %s more", mib(before), mib(peak), mib(bound))
	}
	t.Logf("50 MiB in %s: %d notifications, %d bytes of output streamed; RSS %s before, %s at most", took, len(notes), text, mib(before), mib(peak))
}

// rssOf is the resident set of the process pid (VmRSS), or an error.
func rssOf(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// streamSecret is the pass-through value the redaction tests print.
const streamSecret = "value-of-secret-5678"

// logging/setLevel works, and a run then streams log messages at info;
// a pass-through value the program prints, whole, split across writes or
// on stderr, is in no notification, while the result has it.
func TestStreamLogLevelAndRedaction(t *testing.T) {
	s := startMCP(t, serverSpec{
		args: []string{"--pass-through-env", "SECRET_TOKEN"},
		env:  []string{"SECRET_TOKEN=" + streamSecret},
	})
	ctx := testContext(t)
	r := recordNotes(s.c)
	printer := code("import os, sys, time\nv = os.environ['SECRET_TOKEN']\nprint('whole', v, flush=True)\nsys.stdout.write('split ' + v[:7]); sys.stdout.flush()\ntime.sleep(0.4)\nprint(v[7:], flush=True)\nprint('err', v, file=sys.stderr, flush=True)\n")
	// No progress token, and mcp-go's default level (error): nothing is
	// streamed.
	if text, _ := callRaw(ctx, t, s.c, "run_python_code", printer, nil); !strings.Contains(text, streamSecret) {
		t.Fatalf("result %q; want the program's output, not redacted", text)
	}
	if notes := r.take(); len(notes) > 0 {
		t.Errorf("notifications to a client that asked for none: %+v", notes)
	}
	//lint:ignore SA1019 logging/setLevel is the 2025-11-25 protocol's, which the clients deployed today speak
	if err := s.c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	res, notes := callStreaming(ctx, t, s.c, r, "run_python_code", printer)
	if !strings.Contains(res.out.Stdout, "split "+streamSecret) {
		t.Errorf("result stdout %q; want the program's output, not redacted", res.out.Stdout)
	}
	for _, n := range notes {
		if strings.Contains(n.Text, streamSecret) {
			t.Errorf("a notification carries the pass-through value: %+v", n)
		}
	}
	const wantOut, wantErr = "whole [redacted SECRET_TOKEN]\nsplit [redacted SECRET_TOKEN]\n", "err [redacted SECRET_TOKEN]\n"
	for _, method := range []string{"notifications/progress", "notifications/message"} {
		if got := streamed(notes, method, "stdout"); got != wantOut {
			t.Errorf("%s: stdout %q; want %q", method, got, wantOut)
		}
		if got := streamed(notes, method, "stderr"); got != wantErr {
			t.Errorf("%s: stderr %q; want %q", method, got, wantErr)
		}
	}
	if strings.Contains(s.stderr.String(), streamSecret) {
		t.Errorf("the server logged the pass-through value:\n%s", s.stderr)
	}
}

// tsResult is what testdata/stream.mjs prints.
type tsResult struct {
	Progress []struct {
		Progress float64 `json:"progress"`
		Message  string  `json:"message"`
		Ms       int64   `json:"ms"`
	} `json:"progress"`
	Logs []struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
		Data   string `json:"data"`
	} `json:"logs"`
	ResultMs int64  `json:"resultMs"`
	Text     string `json:"text"`
	// Requests are the HTTP requests the transport made, over HTTP.
	Requests []struct {
		Method      string   `json:"method"`
		RPC         string   `json:"rpc"`
		Status      int      `json:"status"`
		ContentType string   `json:"contentType"`
		Events      []string `json:"events"`
	} `json:"requests"`
}

// runStreamScript runs testdata/stream.mjs with Node.js 22 against the
// server transport names, with server and call as its STREAM_SERVER and
// STREAM_CALL, and returns what it printed.
func runStreamScript(t *testing.T, transport string, server, call any) tsResult {
	t.Helper()
	node, modules := nodeTools(t)
	srv, _ := json.Marshal(server)
	cl, _ := json.Marshal(call)
	script, err := filepath.Abs(filepath.Join("testdata", "stream.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, node, script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SANDBOX_NODE_MODULES=" + modules,
		"STREAM_TRANSPORT=" + transport, "STREAM_SERVER=" + string(srv), "STREAM_CALL=" + string(cl)}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr (the client's, and over stdio the server's):\n%s", node, script, err, stdout.String(), stderr.String())
	}
	var r tsResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("stream.mjs printed %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	return r
}

// checkTSTicks checks what the TypeScript SDK's client got of a ticks
// program: at least 4 progress notifications before the result, each
// stream's lines in order, the first seconds before the result, a call
// that lived past its 4 s timeout because each notification reset it, and
// progress increasing as the notifications came. Over streamable HTTP too
// they come in the order they were sent: the server refuses the GET
// stream the SDK's client asks for beside its POSTs, so the call's POST
// stream is the only stream that takes from mcp-go's queue of the MCP
// session's notifications (checkTSPostStream).
func checkTSTicks(t *testing.T, r tsResult) {
	t.Helper()
	if len(r.Progress) < 4 {
		t.Fatalf("%d progress notifications; want at least 4: %+v", len(r.Progress), r)
	}
	var out, errs strings.Builder
	for i, p := range r.Progress {
		stream, text, _ := strings.Cut(p.Message, ": ")
		switch stream {
		case "stdout":
			out.WriteString(text)
		case "stderr":
			errs.WriteString(text)
		default:
			t.Errorf("progress message %q names no stream", p.Message)
		}
		if i > 0 && p.Progress <= r.Progress[i-1].Progress {
			t.Errorf("progress %v after %v; want it increasing", p.Progress, r.Progress[i-1].Progress)
		}
	}
	if out.String() != ticksOut || errs.String() != ticksErr {
		t.Errorf("streamed stdout %q, stderr %q; want %q and %q", out.String(), errs.String(), ticksOut, ticksErr)
	}
	if r.ResultMs-r.Progress[0].Ms < 3000 {
		t.Errorf("the first notification came at %d ms, the result at %d ms; want it seconds before", r.Progress[0].Ms, r.ResultMs)
	}
	if r.ResultMs < 4500 {
		t.Errorf("the result came at %d ms; want the whole 5 s run, past the 4 s timeout", r.ResultMs)
	}
	if !strings.Contains(r.Text, "out 4") {
		t.Errorf("result %q; want the program's output", r.Text)
	}
}

// checkTSPostStream checks, of what the TypeScript SDK's client did over
// streamable HTTP, that its GET of the server's stream got 405, which it
// took as no stream, and that every notification it got of its call came
// on the call's POST stream, before the call's result, the stream's last
// message.
func checkTSPostStream(t *testing.T, r tsResult) {
	t.Helper()
	gets, calls := 0, 0
	for _, q := range r.Requests {
		switch {
		case q.Method == "GET":
			gets++
			if q.Status != http.StatusMethodNotAllowed {
				t.Errorf("the client's GET: %d %s; want 405", q.Status, q.ContentType)
			}
		case q.Method == "POST" && q.RPC == "tools/call":
			calls++
			if !strings.HasPrefix(q.ContentType, "text/event-stream") {
				t.Errorf("the call's answer: %d %s; want an event stream", q.Status, q.ContentType)
			}
			var progress, logs int
			for i, e := range q.Events {
				switch {
				case e == "notifications/progress":
					progress++
				case e == "notifications/message":
					logs++
				case e == "result" && i == len(q.Events)-1:
				default:
					t.Errorf("the call's stream: %q at %d of %v; want notifications, then the result last", e, i, q.Events)
				}
			}
			if progress != len(r.Progress) || logs != len(r.Logs) {
				t.Errorf("the call's stream carried %d progress notifications and %d log messages; the client got %d and %d: want all of them on it",
					progress, logs, len(r.Progress), len(r.Logs))
			}
		default:
			for _, e := range q.Events {
				if e != "result" {
					t.Errorf("a %s of %q carried %v; want the call's notifications on the call's stream alone", q.Method, q.RPC, q.Events)
					break
				}
			}
		}
	}
	if gets == 0 || calls != 1 {
		t.Errorf("the client made %d GETs and %d calls: %+v; want a GET (which the SDK makes after initialize) and the one call", gets, calls, r.Requests)
	}
	t.Logf("the client's requests: %+v", r.Requests)
}

// The official TypeScript SDK's client, with onprogress and
// resetTimeoutOnProgress and a timeout shorter than the run, gets the
// output of a program that prints a line a second as it comes, over stdio
// and streamable HTTP; with a log level of info it gets log messages too,
// and no notification carries the pass-through value.
func TestStreamTypeScriptClient(t *testing.T) {
	call := map[string]any{"name": "run_python_code", "arguments": code(pythonTicks), "timeoutMs": 4000}
	t.Run("stdio", func(t *testing.T) {
		cmd, stateDir := serverCommand(t, serverSpec{})
		r := runStreamScript(t, "stdio", map[string]any{"command": cmd.Path, "args": cmd.Args[1:], "env": envMap(cmd.Env)}, call)
		checkTSTicks(t, r)
		// The client closed the server's stdin; it exits, and leaves
		// nothing.
		assertNoLeftovers(t, stateDir)
	})
	t.Run("http", func(t *testing.T) {
		path, tokens := tokenFile(t, "ts")
		h := startHTTP(t, serverSpec{
			args: []string{"--auth-tokens", path, "--pass-through-env", "SECRET_TOKEN"},
			env:  []string{"SECRET_TOKEN=" + streamSecret},
		})
		server := map[string]any{"url": h.base + "/mcp", "token": tokens["ts"]}
		r := runStreamScript(t, "http", server, call)
		checkTSTicks(t, r)
		checkTSPostStream(t, r)

		r = runStreamScript(t, "http", server, map[string]any{
			"name": "run_python_code", "timeoutMs": 30000, "logLevel": "info",
			"arguments": code("import os\nprint('the value is', os.environ['SECRET_TOKEN'])"),
		})
		if !strings.Contains(r.Text, streamSecret) {
			t.Errorf("result %q; want the program's output, not redacted", r.Text)
		}
		var logged strings.Builder
		for _, l := range r.Logs {
			if l.Level != "info" || l.Logger != "stdout" {
				t.Errorf("log message %+v; want level info, logger stdout", l)
			}
			logged.WriteString(l.Data)
		}
		if got, want := logged.String(), "the value is [redacted SECRET_TOKEN]\n"; got != want {
			t.Errorf("log messages say %q; want %q", got, want)
		}
		checkTSPostStream(t, r)
		for _, p := range r.Progress {
			if strings.Contains(p.Message, streamSecret) {
				t.Errorf("a progress notification carries the pass-through value: %q", p.Message)
			}
		}
	})
}

// envMap is env, KEY=value lines, as a map.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func TestRedactorAcrossChunks(t *testing.T) {
	red := newRedactor([]Secret{{"SHORT", "s3cr3t-value"}, {"LONG", "s3cr3t-value-longer"}, {"EMPTY", ""}})
	in := "a s3cr3t-value b s3cr3t-value-longer c s3cr3t-valu s3cr"
	want := "a [redacted SHORT] b [redacted LONG] c s3cr3t-valu s3cr"
	for size := 1; size <= len(in); size++ {
		var out, held []byte
		for s := in; len(s) > 0; {
			k := min(size, len(s))
			var o []byte
			o, held = red.redact(append(held, s[:k]...), false)
			out = append(out, o...)
			s = s[k:]
		}
		o, _ := red.redact(held, true)
		out = append(out, o...)
		if string(out) != want {
			t.Fatalf("chunks of %d: got %q; want %q", size, out, want)
		}
	}
	if newRedactor([]Secret{{"EMPTY", ""}}) != nil {
		t.Error("a redactor of no values is not nil")
	}
}

// recorder keeps the notices an outputStream sends.
type recorder struct {
	mu      sync.Mutex
	notices []notice
}

func (r *recorder) send(n notice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, n)
}

func (r *recorder) all() []notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notice(nil), r.notices...)
}

// joined is what the notices say, stream by stream in order: "stdout:a|stderr:b".
func joined(ns []notice) string {
	var parts []string
	for _, n := range ns {
		if k := len(parts); k > 0 && strings.HasPrefix(parts[k-1], n.stream+":") {
			parts[k-1] += n.text
			continue
		}
		parts = append(parts, n.stream+":"+n.text)
	}
	return strings.Join(parts, "|")
}

func TestOutputStreamKeepsOrderAndNamesStreams(t *testing.T) {
	var r recorder
	o := newOutputStream(nil, r.send)
	o.Output("stdout", []byte("out 1\n"))
	o.Output("stderr", []byte("err 1\n"))
	o.Output("stdout", []byte("out 2\n"))
	o.Close()
	o.Output("stdout", []byte("after the close\n"))
	ns := r.all()
	if got, want := joined(ns), "stdout:out 1\n|stderr:err 1\n|stdout:out 2\n"; got != want {
		t.Errorf("notices say %q; want %q", got, want)
	}
	if last := ns[len(ns)-1].progress; last != 18 {
		t.Errorf("last progress %d; want 18, the bytes of output", last)
	}
}

func TestOutputStreamPacesSends(t *testing.T) {
	var r recorder
	o := newOutputStream(nil, r.send)
	defer o.Close()
	o.Output("stdout", []byte("first\n"))
	// The first output after a quiet spell goes at once; what follows
	// within streamEvery waits for the next send.
	deadline := time.Now().Add(5 * time.Second)
	for len(r.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	sent := time.Now()
	o.Output("stdout", []byte("second\n"))
	for len(r.all()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ns := r.all()
	if len(ns) != 2 || ns[0].text != "first\n" || ns[1].text != "second\n" {
		t.Fatalf("notices %+v; want first, then second", ns)
	}
	if took := time.Since(sent); took < streamEvery-20*time.Millisecond {
		t.Errorf("second sent %s after the first; want about %s", took, streamEvery)
	}
}

func TestOutputStreamBoundsAFlood(t *testing.T) {
	var r recorder
	o := newOutputStream(newRedactor([]Secret{{"TOKEN", "hunter2-secret"}}), r.send)
	chunk := bytes.Repeat([]byte("flood hunter2-secret line\n"), 32<<10/26)
	const total = 50 << 20
	began := time.Now()
	written := 0
	for written < total {
		stream := "stdout"
		if written/len(chunk)%3 == 0 {
			stream = "stderr"
		}
		o.Output(stream, chunk)
		written += len(chunk)
	}
	o.Close()
	sends := int(time.Since(began)/streamEvery) + 2 // the first send is at once, and Close's
	ns := r.all()
	var text, summaries int
	var last int64
	for _, n := range ns {
		if n.progress <= last {
			t.Fatalf("progress %d after %d; want it to increase with each notification", n.progress, last)
		}
		last = n.progress
		if strings.Contains(n.text, "hunter2-secret") {
			t.Fatalf("a notification carries the secret: %q", n.text)
		}
		if strings.HasPrefix(n.text, "[... ") {
			summaries++
		}
		text += len(n.text)
	}
	perSend := streamBytes + 2*streamTail + 2*64 // the summaries' lines
	if text > sends*perSend*2 {                  // a marker is longer than its secret
		t.Errorf("%d bytes in %d notifications over %d sends; want at most %d a send", text, len(ns), sends, perSend)
	}
	if len(ns) > sends*(streamParts+2) {
		t.Errorf("%d notifications over %d sends; want at most %d a send", len(ns), sends, streamParts+2)
	}
	if summaries == 0 {
		t.Error("no notification says what was not streamed")
	}
	// The end of the flood is streamed: each stream's tail.
	if !strings.HasSuffix(ns[len(ns)-1].text, "\nflood [redacted TOKEN] line\n") {
		t.Errorf("the last notification %q does not end as the flood did", ns[len(ns)-1].text)
	}
	// Progress counts the output after redaction: each line's secret is
	// its marker, two bytes longer.
	lines := written / 26
	if want := int64(written + 2*lines); last != want {
		t.Errorf("last progress %d; want %d, every byte sent or said to be dropped", last, want)
	}
	t.Logf("%d MiB in %s: %d notifications, %d bytes of output streamed", written>>20, time.Since(began), len(ns), text)
}

func TestOutputStreamRedactsASecretSplitAcrossSends(t *testing.T) {
	var r recorder
	o := newOutputStream(newRedactor([]Secret{{"TOKEN", "hunter2-secret"}}), r.send)
	o.Output("stdout", []byte("key: hunter2-"))
	o.flush()
	o.Output("stdout", []byte("secret\nend hunter"))
	o.Close()
	if got, want := joined(r.all()), "stdout:key: [redacted TOKEN]\nend hunter"; got != want {
		t.Errorf("notices say %q; want %q", got, want)
	}
}

// streamingServer is a server whose one run prints lines through its
// request's Output, and whose Secrets hold the value of SECRET_X.
func streamingServer(t *testing.T, lines ...string) (*wire, *client.Client) {
	t.Helper()
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		var out bytes.Buffer
		for i, l := range lines {
			stream := "stdout"
			if i%2 == 1 {
				stream = "stderr"
			}
			if req.Output != nil {
				req.Output(stream, []byte(l))
			}
			out.WriteString(l)
		}
		return &exec.Result{Language: req.Language, Stdout: out.Bytes(), Timeout: time.Second}, nil
	}
	o := testOptions
	o.Secrets = []Secret{{"SECRET_X", "s3cr3t-of-the-host"}}
	s, err := New(t.Context(), o, config.Default().Enabled(), run)
	if err != nil {
		t.Fatal(err)
	}
	w := new(wire)
	return w, connect(t, s, w)
}

func TestProgressNotificationsComeBeforeTheResult(t *testing.T) {
	w, c := streamingServer(t, "line 1\n", "warn 1\n", "the secret is s3cr3t-of-the-host\n")
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python_code"
	req.Params.Arguments = map[string]any{"code": "print(1)"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The result is the program's output as it was: not redacted.
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "s3cr3t-of-the-host") {
		t.Errorf("result %q lacks the program's output", text)
	}
	var said []string
	var progress []float64
	resultAt := -1
	for i, line := range strings.Split(w.String(), "\n") {
		var msg struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Params struct {
				Token    any     `json:"progressToken"`
				Progress float64 `json:"progress"`
				Message  string  `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &msg) != nil {
			continue
		}
		if strings.Contains(line, "s3cr3t-of-the-host") && msg.Result == nil {
			t.Errorf("a notification carries the secret: %s", line)
		}
		switch {
		case msg.Method == "notifications/progress":
			if resultAt >= 0 {
				t.Errorf("a progress notification after the result: %s", line)
			}
			if msg.Params.Token != "tok-1" {
				t.Errorf("progressToken %v; want tok-1", msg.Params.Token)
			}
			said = append(said, msg.Params.Message)
			progress = append(progress, msg.Params.Progress)
		case msg.Method == "notifications/message":
			t.Errorf("a log message, unasked for: %s", line)
		case msg.Result != nil && strings.Contains(string(msg.Result), "structuredContent"):
			resultAt = i
		}
	}
	if got, want := strings.Join(said, ""), "stdout: line 1\nstderr: warn 1\nstdout: the secret is [redacted SECRET_X]\n"; got != want {
		t.Errorf("progress messages %q; want %q", got, want)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] <= progress[i-1] {
			t.Errorf("progress %v; want it increasing", progress)
		}
	}
}

func TestLogMessagesOnlyAtInfo(t *testing.T) {
	w, c := streamingServer(t, "hello\n", "s3cr3t-of-the-host\n")
	call := func() {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_python_code"
		req.Params.Arguments = map[string]any{"code": "print(1)"}
		if _, err := c.CallTool(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	// mcp-go's default level is error: a run streams nothing.
	call()
	if strings.Contains(w.String(), "notifications/") {
		t.Fatalf("notifications sent to a client that asked for none:\n%s", w.String())
	}
	//lint:ignore SA1019 logging/setLevel is the 2025-11-25 protocol's, which the clients deployed today speak
	if err := c.SetLevel(t.Context(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	call()
	var records []string
	for _, line := range strings.Split(w.String(), "\n") {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Level  string `json:"level"`
				Logger string `json:"logger"`
				Data   string `json:"data"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &msg) != nil || msg.Method != "notifications/message" {
			continue
		}
		if msg.Params.Level != "info" {
			t.Errorf("level %q; want info", msg.Params.Level)
		}
		records = append(records, msg.Params.Logger+": "+msg.Params.Data)
	}
	if got, want := strings.Join(records, ""), "stdout: hello\nstderr: [redacted SECRET_X]\n"; got != want {
		t.Errorf("log records %q; want %q", got, want)
	}
}

func TestOutputStreamWaitsForTheEndOfALine(t *testing.T) {
	var r recorder
	o := newOutputStream(nil, r.send)
	// A line's text and its newline, written apart: one notification.
	o.Output("stdout", []byte("hello"))
	time.Sleep(lineWait / 4)
	o.Output("stdout", []byte("\n"))
	deadline := time.Now().Add(5 * time.Second)
	for len(r.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// A line that does not end goes out after lineWait.
	o.Output("stdout", []byte("50% done\r"))
	time.Sleep(streamEvery + 2*lineWait)
	ns := r.all()
	o.Close()
	if got := joined(ns); len(ns) != 2 || got != "stdout:hello\n50% done\r" {
		t.Errorf("notices %+v; want hello's line, then the unfinished one", ns)
	}
}

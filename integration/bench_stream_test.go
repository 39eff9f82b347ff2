package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The "stream" part of the benchmark: what streaming a run's output costs
// on a hello, side by side with the same hello unstreamed, and how long a
// line the program prints takes to reach the client as a notification.
const (
	// overProgress is the runtime of the hello rows called with a
	// progress token, beside "ours, pool N" paced.
	overProgress = "ours, pool %d, progress token"
	// notifyProgram prints the host's clock (the sandbox shares it) every
	// 300 ms, which is past the server's 250 ms between sends: each line
	// is sent as it comes.
	notifyProgram = "import time\nfor _ in range(20):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.3)\n"
	notifyLines   = 20
)

// notifyRow is the latency from a print in the sandbox to its
// notification at the client (mcp-go's, over stdio).
type notifyRow struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	MaxMs float64 `json:"max_ms"`
}

func (r *notifyRow) String() string {
	return fmt.Sprintf("from a print in the sandbox to its notifications/progress at the client (stdio): p50 %.1f ms, p95 %.1f ms, max %.1f ms (%d lines).",
		r.P50Ms, r.P95Ms, r.MaxMs, r.N)
}

// streamRows measures, on one server with the default pool, n paced
// Python hellos without a progress token and n with one, alternating so
// that both see the same machine; then the latency from print to
// notification over max(n/notifyLines, 2) runs of notifyProgram.
func streamRows(b *testing.B, bin string, pool, n int, rep *benchReport) {
	s := startBench(b, bin, "concurrency = 16\n")
	defer s.close(b)
	var mu sync.Mutex
	var arrived []time.Time
	var said []string
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/progress" {
			return
		}
		now := time.Now()
		msg, _ := n.Params.AdditionalFields["message"].(string)
		mu.Lock()
		defer mu.Unlock()
		arrived, said = append(arrived, now), append(said, msg)
	})
	take := func() ([]time.Time, []string) {
		mu.Lock()
		defer mu.Unlock()
		a, m := arrived, said
		arrived, said = nil, nil
		return a, m
	}
	call := func(p benchProgram, token bool) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: p.tool, Arguments: code(p.code)}}
		if token {
			req.Params.Meta = &mcp.Meta{ProgressToken: "bench"}
		}
		res, err := s.c.CallTool(ctx, req)
		runs.Add(1)
		if err != nil || res.IsError || len(res.Content) == 0 {
			b.Fatalf("%s (progress token %v): %v %+v\nstderr tail:\n%s", p.name, token, err, res, tail(s.stderr.String(), 2000))
		}
		text, _ := res.Content[0].(mcp.TextContent)
		return text.Text
	}

	p := benchPrograms[0]
	s.waitQuiet(b, 2*pool)
	call(p, true) // warm the page cache and the client
	take()
	var plain, streamed []time.Duration
	for range n {
		for _, token := range []bool{false, true} {
			s.waitQuiet(b, 2*pool)
			start := time.Now()
			text := call(p, token)
			d := time.Since(start)
			_, got := take()
			switch {
			case text != p.want:
				b.Fatalf("%s: %q; want %q", p.name, text, p.want)
			case !token && len(got) > 0:
				b.Fatalf("%s without a progress token: notifications %q", p.name, got)
			case token && streamedText(got) != p.want:
				b.Fatalf("%s with a progress token: notifications %q; want its output", p.name, got)
			}
			if token {
				streamed = append(streamed, d)
			} else {
				plain = append(plain, d)
			}
		}
	}
	for _, row := range []latencyRow{summarize(fmt.Sprintf("ours, pool %d", pool)+", paced beside streaming", p.name, plain), summarize(fmt.Sprintf(overProgress, pool), p.name, streamed)} {
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.1f ms\n", row.Runtime, row.Program, row.P50Ms)
		rep.Latency = append(rep.Latency, row)
	}

	var lat []time.Duration
	for range max(n/notifyLines, 2) {
		s.waitQuiet(b, 2*pool)
		call(benchProgram{name: "clock lines", tool: "run_python_code", code: notifyProgram}, true)
		at, got := take()
		// A line counts from the notification that ends it: a busy
		// host may cut a print's text from its newline.
		var line strings.Builder
		for i, m := range got {
			text, ok := strings.CutPrefix(m, "stdout: ")
			if !ok {
				b.Fatalf("notification %q: want stdout", m)
			}
			for {
				before, after, ended := strings.Cut(text, "\n")
				line.WriteString(before)
				if !ended {
					break
				}
				ns, err := strconv.ParseInt(line.String(), 10, 64)
				if err != nil {
					b.Fatalf("line %q of the notifications %q: want a clock reading", line.String(), got)
				}
				lat = append(lat, at[i].Sub(time.Unix(0, ns)))
				line.Reset()
				text = after
			}
		}
		if n := len(lat) % notifyLines; n != 0 || line.Len() > 0 {
			b.Fatalf("notifications %q: want %d whole lines", got, notifyLines)
		}
	}
	rep.StreamNotify = &notifyRow{N: len(lat), P50Ms: ms(percentile(lat, 50)), P95Ms: ms(percentile(lat, 95)), MaxMs: ms(percentile(lat, 100))}
	fmt.Fprintf(os.Stderr, "bench: %s\n", rep.StreamNotify)
}

// streamedText is what progress messages say, without their streams'
// names.
func streamedText(messages []string) string {
	var b strings.Builder
	for _, m := range messages {
		_, text, _ := strings.Cut(m, ": ")
		b.WriteString(text)
	}
	return b.String()
}

// judgeStream adds the target of streaming's cost on a hello.
func (r *benchReport) judgeStream(add func(name string, known bool, got string, met bool)) {
	py := benchPrograms[0].name
	plain, streamed := r.row(fmt.Sprintf("ours, pool %d", r.Pool)+", paced beside streaming", py), r.row(fmt.Sprintf(overProgress, r.Pool), py)
	if plain == nil || streamed == nil {
		return
	}
	d := streamed.P50Ms - plain.P50Ms
	add("python hello p50 with a progress token within 1 ms of without", true,
		fmt.Sprintf("%.1f ms vs %.1f ms: %+.1f ms", streamed.P50Ms, plain.P50Ms, d), d <= 1)
}

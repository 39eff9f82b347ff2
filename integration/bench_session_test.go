package integration

// The session rows of the benchmark (issue 13): a cell such as x = x + 1
// in a warm session, through MCP, beside a one-shot Python hello on the
// same server, and the memory an idle session holds.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// besideSessions names the one-shot row measured beside the sessions.
const besideSessions = "ours, pool %d, beside sessions"

// sessionCells are the cells the session rows time, after its setup.
var sessionCells = []struct {
	lang, tool, setup, cell string
}{
	{"python", "run_python_code", "x = 0", "x = x + 1"},
	{"javascript", "run_js_code", "var x = 0", "x = x + 1; undefined"},
}

// sessionRows measures the session rows on a fresh server: a Python hello
// paced as the pool rows are, then n cells of each language's session,
// back to back, then the memory of each session, idle.
func sessionRows(b *testing.B, bin string, pool, n int, rep *benchReport) {
	s := startBench(b, bin, "concurrency = 16\n")
	defer s.close(b)
	s.waitQuiet(b, 2*pool)
	rep.Latency = append(rep.Latency, s.latency(b, fmt.Sprintf(besideSessions, pool), benchPrograms[0], n, 2*pool))
	rep.SessionMemMiB = map[string]float64{}
	var ids []string
	for _, c := range sessionCells {
		id := s.createSession(b, c.lang)
		ids = append(ids, id)
		s.sessionCall(b, c.tool, id, c.setup)
		for range 10 {
			s.sessionCall(b, c.tool, id, c.cell) // warm
		}
		lat := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			s.sessionCall(b, c.tool, id, c.cell)
			lat = append(lat, time.Since(start))
		}
		row := summarize("ours, "+c.lang+" session", c.lang+" cell "+c.cell, lat)
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.2f ms\n", row.Runtime, row.Program, row.P50Ms)
		rep.Latency = append(rep.Latency, row)
	}
	time.Sleep(time.Second) // idle
	for _, info := range s.listSessions(b) {
		rep.SessionMemMiB[info.Language] = round(float64(info.MemoryBytes) / (1 << 20))
	}
	for _, id := range ids {
		s.closeSession(b, id)
	}
	// What create_session costs: a sandbox created and its interpreter
	// started, on the response path (sessions are not pooled). Each is
	// closed, untimed, before the next.
	for _, c := range sessionCells {
		lat := make([]time.Duration, 0, nCreate)
		for range nCreate {
			start := time.Now()
			id := s.createSession(b, c.lang)
			lat = append(lat, time.Since(start))
			s.closeSession(b, id)
		}
		row := summarize("ours, create_session", c.lang, lat)
		fmt.Fprintf(os.Stderr, "bench: %-32s %-20s p50 %7.2f ms\n", row.Runtime, row.Program, row.P50Ms)
		rep.Latency = append(rep.Latency, row)
	}
}

// nCreate is how many sessions of each language the create_session row
// times.
const nCreate = 20

func (s *benchServer) tool(b *testing.B, name string, args map[string]any, out any) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		b.Fatalf("%s %v: %s", name, args, text)
	}
	if out != nil {
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
	return text
}

func (s *benchServer) createSession(b *testing.B, lang string) string {
	var out struct {
		SessionID string `json:"session_id"`
	}
	s.tool(b, "create_session", map[string]any{"language": lang}, &out)
	return out.SessionID
}

func (s *benchServer) sessionCall(b *testing.B, tool, id, code string) {
	s.tool(b, tool, map[string]any{"code": code, "session_id": id}, nil)
	runs.Add(1)
}

type benchSessionInfo struct {
	Language    string `json:"language"`
	MemoryBytes int64  `json:"memory_bytes"`
}

func (s *benchServer) listSessions(b *testing.B) []benchSessionInfo {
	var out struct {
		Sessions []benchSessionInfo `json:"sessions"`
	}
	s.tool(b, "list_sessions", map[string]any{}, &out)
	return out.Sessions
}

func (s *benchServer) closeSession(b *testing.B, id string) {
	s.tool(b, "close_session", map[string]any{"session_id": id}, nil)
}

// judgeSessions adds the session targets.
func (r *benchReport) judgeSessions(add func(name string, known bool, got string, met bool)) {
	cell := r.row("ours, python session", "python cell x = x + 1")
	if cell == nil {
		return
	}
	add("python session cell p50 < 5 ms through MCP", true, fmt.Sprintf("%.2f ms", cell.P50Ms), cell.P50Ms < 5)
	if hello := r.row(fmt.Sprintf(besideSessions, r.Pool), benchPrograms[0].name); hello != nil {
		x := hello.P50Ms / cell.P50Ms
		add("python session cell p50 > 10x below a one-shot python hello", true, fmt.Sprintf("%.1f ms vs %.2f ms: %.1fx", hello.P50Ms, cell.P50Ms, x), x > 10)
	}
}

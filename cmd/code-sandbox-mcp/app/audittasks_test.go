package app

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/exec"
)

// A task's creation and end are records, and the run it makes names it:
// task_created (working), run_started and run_ended with the task's id,
// task_ended (completed), in that order, and the log verifies.
func TestAuditTaskRecords(t *testing.T) {
	a, cfg, path := newTestAuditor(t, false)
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		return &exec.Result{Language: req.Language, Stdout: []byte("hi\n"), Duration: time.Millisecond}, nil
	}
	tasks := &mcpserver.Tasks{Max: 4, Retention: time.Minute, Event: a.taskEvents()}
	ms, err := mcpserver.New(t.Context(), mcpserver.Options{Version: "test", Tasks: tasks}, cfg.Enabled(), a.wrapRun(run, nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(ms)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	res, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("task-1"), Method: "tools/call",
		Params: map[string]any{"name": "run_python_code", "arguments": map[string]any{"code": "print('hi')"}, "task": map[string]any{}}})
	if err != nil || res.Error != nil {
		t.Fatalf("tools/call as a task: %v %+v", err, res)
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(res.Result, &created); err != nil {
		t.Fatal(err)
	}
	id := created.Task.TaskId
	if _, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}}); err != nil {
		t.Fatal(err)
	}
	if err := tasks.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs, log := records(t, path)
	want := []map[string]any{
		{"event": eventTaskCreated, "principal": "local", "task": id, "tool": "run_python_code", "status": "working"},
		{"event": eventRunStarted, "principal": "local", "task": id},
		{"event": eventRunEnded, "principal": "local", "task": id},
		{"event": eventTaskEnded, "principal": "local", "task": id, "tool": "run_python_code", "status": "completed"},
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
	}
	if ttl, _ := recs[0]["ttl_seconds"].(float64); ttl <= 60 {
		t.Errorf("task_created ttl_seconds %v; want more than the retention's 60", recs[0]["ttl_seconds"])
	}
}

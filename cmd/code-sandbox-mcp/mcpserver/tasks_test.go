package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// taskServer builds a server of the default languages on run, with tasks
// as ts says and the principal p (nil: "local").
func taskServer(t *testing.T, ts *Tasks, run RunFunc, p func(context.Context) string) *server.MCPServer {
	t.Helper()
	o := testOptions
	o.Tasks, o.Principal = ts, p
	s, err := New(t.Context(), o, config.Default().Enabled(), run)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// taskEvents collects what a Tasks tells its Event.
type taskEvents struct {
	mu     sync.Mutex
	events []TaskEvent
}

func (e *taskEvents) add(ev TaskEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *taskEvents) statuses() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s []string
	for _, ev := range e.events {
		s = append(s, ev.Status)
	}
	return s
}

// rawIDs numbers rawCall's requests.
var rawIDs atomic.Int64

// rawCall sends method with params through c's transport and returns the
// result, or the JSON-RPC error as a Go error: mcp-go's client has no call
// that returns a task.
func rawCall(t *testing.T, c *client.Client, method string, params any) (json.RawMessage, error) {
	t.Helper()
	res, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fmt.Sprintf("raw-%d", rawIDs.Add(1))), Method: method, Params: params,
	})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, errors.New(res.Error.Message)
	}
	return res.Result, nil
}

// callAsTask calls tool with args as a task and returns the task.
func callAsTask(t *testing.T, c *client.Client, tool string, args map[string]any) (mcp.Task, error) {
	t.Helper()
	raw, err := rawCall(t, c, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}})
	if err != nil {
		return mcp.Task{}, err
	}
	var res mcp.CreateTaskResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Task.TaskId == "" {
		t.Fatalf("tools/call as a task returned %s; want a task", raw)
	}
	return res.Task, nil
}

// waitStatus polls tasks/get until the task's status is want.
func waitStatus(t *testing.T, c *client.Client, id string, want mcp.TaskStatus) *mcp.GetTaskResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.GetTask(t.Context(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s (%q); want %s", id, got.Status, got.StatusMessage, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A call run as a task returns the task at once; its run goes on after
// the request that made it has ended (mcp-go would cancel it with that
// request); tasks/get shows the output so far; tasks/result is the usual
// result; and the events are its creation and end.
func TestTaskRunsPastItsCall(t *testing.T) {
	printed, release := make(chan struct{}), make(chan struct{})
	var runErr atomic.Value
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		if req.Output == nil {
			t.Error("a task's request has no Output")
		} else {
			req.Output("stdout", []byte("step 1 of 3\n"))
			req.Output("stderr", []byte("warming up\n"))
		}
		close(printed)
		<-release
		runErr.Store(errors.Join(ctx.Err(), errors.New("checked")))
		if TaskID(ctx) == "" {
			t.Error("the run's context names no task")
		}
		return &exec.Result{Language: req.Language, Stdout: []byte("done\n"), Timeout: req.Timeout, Duration: time.Second}, nil
	}
	var ev taskEvents
	c := connect(t, taskServer(t, &Tasks{Max: 4, Retention: time.Minute, Event: ev.add}, run, nil), nil)
	task, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)", "timeout_seconds": 100})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != mcp.TaskStatusWorking || task.TTL == nil || task.PollInterval == nil {
		t.Errorf("created task %+v; want working, with a ttl and a poll interval", task)
	}
	if want := (100*time.Second + taskWait + time.Minute).Milliseconds(); task.TTL != nil && *task.TTL != want {
		t.Errorf("ttl %d ms; want %d (timeout, taskWait and result_retention)", *task.TTL, want)
	}
	<-printed
	got := waitStatus(t, c, task.TaskId, mcp.TaskStatusWorking)
	for _, want := range []string{"Running for", "timeout 1m40s", "stdout so far (12 bytes):\nstep 1 of 3", "stderr so far (11 bytes):\nwarming up"} {
		if !strings.Contains(got.StatusMessage, want) {
			t.Errorf("statusMessage %q lacks %q", got.StatusMessage, want)
		}
	}
	close(release)
	res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := runErr.Load().(error); e == nil || e.Error() != "checked" {
		t.Errorf("the run's context ended before the run: %v", e)
	}
	if res.IsError || len(res.Content) == 0 || res.Content[0].(mcp.TextContent).Text != "done\n" {
		t.Errorf("tasks/result %+v; want the run's usual result", res)
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCompleted)
	if got, want := strings.Join(ev.statuses(), " "), "working completed"; got != want {
		t.Errorf("events %q; want %q", got, want)
	}
}

// tasks/cancel kills the run as a cancelled call's is killed: its context
// is cancelled, saying why; the task is cancelled.
func TestTaskCancel(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		close(started)
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	var ev taskEvents
	c := connect(t, taskServer(t, &Tasks{Max: 4, Retention: time.Minute, Event: ev.add}, run, nil), nil)
	task, err := callAsTask(t, c, "run_js_code", map[string]any{"code": "for(;;){}"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}}); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-ended:
		if !errors.Is(why, errCancelledByClient) {
			t.Errorf("the run was cancelled by %v; want %v", why, errCancelledByClient)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tasks/cancel did not cancel the run")
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCancelled)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Join(ev.statuses(), " ") != "working cancelled" {
		if time.Now().After(deadline) {
			t.Fatalf("events %q; want working cancelled", ev.statuses())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A task is its principal's: to another, get, result and cancel say "task
// not found" as for a task that does not exist, and tasks/list leaves it
// out. The principal changes here within one MCP session, so that what
// is checked is the principal, not mcp-go's session check.
func TestTaskBelongsToItsPrincipal(t *testing.T) {
	release := make(chan struct{})
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		<-release
		return &exec.Result{Language: req.Language, Stdout: []byte("mine\n")}, nil
	}
	var who atomic.Value
	who.Store("alice")
	principal := func(context.Context) string { return who.Load().(string) }
	c := connect(t, taskServer(t, &Tasks{Max: 4, Retention: time.Minute}, run, principal), nil)
	task, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)

	who.Store("bob")
	_, missing := rawCall(t, c, "tasks/get", map[string]any{"taskId": "no-such-task"})
	if missing == nil {
		t.Fatal("tasks/get of an unknown task succeeded")
	}
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		_, err := rawCall(t, c, method, map[string]any{"taskId": task.TaskId})
		if err == nil || err.Error() != missing.Error() {
			t.Errorf("%s of alice's task by bob: %v; want %q, as for a task that does not exist", method, err, missing)
		}
	}
	list, err := c.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 0 {
		t.Errorf("bob lists %+v; want none", list.Tasks)
	}

	who.Store("alice")
	list, err = c.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 || list.Tasks[0].TaskId != task.TaskId || list.Tasks[0].Status != mcp.TaskStatusWorking {
		t.Errorf("alice lists %+v; want her working task", list.Tasks)
	}
}

// Past a principal's share of max_tasks, a call as a task is refused with
// an error that says what to do; a plain call still runs.
func TestTaskMaxTasks(t *testing.T) {
	release := make(chan struct{})
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		if TaskID(ctx) != "" {
			<-release
		}
		return &exec.Result{Language: req.Language, Stdout: []byte("ok\n")}, nil
	}
	c := connect(t, taskServer(t, &Tasks{Max: 2, Retention: time.Minute}, run, nil), nil)
	defer close(release)
	for range 2 {
		if _, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)"})
	if err == nil {
		t.Fatal("a third task was started; want max_tasks 2 to refuse it")
	}
	for _, want := range []string{"max_tasks", "no task was started", "without \"task\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "print(1)"}}})
	if err != nil || res.IsError {
		t.Errorf("a plain call past max_tasks: %v %+v; want it run", err, res)
	}
}

// timeout_seconds above max_timeout is accepted only as a task, up to
// max_task_timeout; a plain call asking for it is told how to get it.
func TestTaskTimeoutCap(t *testing.T) {
	var got atomic.Int64
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		got.Store(int64(req.Timeout))
		return &exec.Result{Language: req.Language}, nil
	}
	c := connect(t, taskServer(t, &Tasks{Max: 4, Retention: time.Minute}, run, nil), nil)
	lim := config.Default().Enabled()[0].Limits
	over := int(lim.MaxTimeout/time.Second) + 1
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "run_python_code", Arguments: map[string]any{"code": "print(1)", "timeout_seconds": over}}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "run the call as an MCP task") || !strings.Contains(text, "max_task_timeout") {
		t.Errorf("a plain call over max_timeout: %q; want it refused, pointing to tasks", text)
	}
	task, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)", "timeout_seconds": over})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCompleted)
	if time.Duration(got.Load()) != time.Duration(over)*time.Second {
		t.Errorf("the task ran with timeout %s; want %ds", time.Duration(got.Load()), over)
	}
	task, err = callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)", "timeout_seconds": int(lim.MaxTaskTimeout/time.Second) + 1})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCompleted)
	r, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "timeout_seconds") {
		t.Errorf("a task over max_task_timeout: %+v; want it refused", r.Content)
	}
}

// Close cancels the tasks in flight and returns once their handlers have;
// a task asked for after it is refused.
func TestTaskClose(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // the sandbox's kill
		ended <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	ts := &Tasks{Max: 4, Retention: time.Minute}
	c := connect(t, taskServer(t, ts, run, nil), nil)
	task, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := ts.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-ended:
		if !errors.Is(why, errShutdown) {
			t.Errorf("the run was cancelled by %v; want %v", why, errShutdown)
		}
	default:
		t.Fatal("Close returned before the task's run did")
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCancelled)
	if _, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)"}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("a task after Close: %v; want it refused", err)
	}
}

// The language tools and create_session declare optional task support,
// and say which timeout cap is whose; without tasks they declare none.
func TestTaskToolsList(t *testing.T) {
	for _, tasks := range []bool{true, false} {
		o := testOptions
		o.Sessions = &fakeSessions{limits: defaultSessionLimits()}
		if tasks {
			o.Tasks = &Tasks{Max: 4, Retention: time.Minute}
		}
		s, err := New(t.Context(), o, config.Default().Enabled(), noRun(t))
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range toolsJSON(t, s) {
			declares := strings.Contains(data, `"execution":{"taskSupport":"optional"}`)
			want := tasks && (name == "run_python_code" || name == "run_js_code" || name == createSessionTool)
			if declares != want {
				t.Errorf("tasks %v: %s declares task support %v; want %v", tasks, name, declares, want)
			}
			if tasks && strings.HasPrefix(name, "run_") && !strings.Contains(data, "up to 3600 when the client runs the call as an MCP task") {
				t.Errorf("%s's description does not say the task cap: %s", name, data)
			}
		}
	}
}

// A client on protocol 2026-07-28 sees no task support, and a call of its
// with "task" runs as a plain call.
func TestTaskModernClient(t *testing.T) {
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		if TaskID(ctx) != "" {
			t.Error("a 2026-07-28 call ran as a task")
		}
		return &exec.Result{Language: req.Language, Stdout: []byte("plain\n")}, nil
	}
	s := taskServer(t, &Tasks{Max: 4, Retention: time.Minute}, run, nil)
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "t", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	send := func(method string, params map[string]any) map[string]any {
		params["_meta"] = meta
		msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(s.HandleMessage(t.Context(), msg))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		if out["error"] != nil {
			t.Fatalf("%s: %s", method, data)
		}
		return out["result"].(map[string]any)
	}
	tools := send("tools/list", map[string]any{})
	data, _ := json.Marshal(tools)
	if strings.Contains(string(data), "taskSupport") {
		t.Errorf("tools/list of a 2026-07-28 client declares task support: %s", data)
	}
	res := send("tools/call", map[string]any{"name": "run_python_code", "arguments": map[string]any{"code": "print(1)"}, "task": map[string]any{}})
	if _, isTask := res["task"]; isTask || res["structuredContent"] == nil {
		t.Errorf("a 2026-07-28 call with task: %v; want the plain result", res)
	}
}

// create_session runs as a task too, for its principal: the session is
// the caller's, and tasks/result is create_session's usual result.
func TestTaskCreateSession(t *testing.T) {
	m := &fakeSessions{limits: defaultSessionLimits()}
	o := testOptions
	o.Sessions, o.Tasks = m, &Tasks{Max: 4, Retention: time.Minute}
	o.Principal = func(context.Context) string { return "alice" }
	s, err := New(t.Context(), o, sessionLangs(t), noRun(t))
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, s, nil)
	task, err := callAsTask(t, c, createSessionTool, map[string]any{"language": "python"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "Session s1 (python) is open") {
		t.Errorf("tasks/result of create_session: %+v", res.Content)
	}
	if got := m.recorded(); len(got) != 1 || !strings.HasPrefix(got[0], "create alice python") {
		t.Errorf("session calls %v; want one create for alice", got)
	}
}

// A run that has not ended by its deadline (its timeout plus the wait for
// a sandbox) is cancelled, saying why; result_retention later the task is
// forgotten, result and all, and tasks/get says "task not found".
func TestTaskDeadlineAndExpiry(t *testing.T) {
	ended := make(chan error, 1)
	run := func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		<-ctx.Done() // a run that waits for a sandbox that does not come
		ended <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	ts := &Tasks{Max: 4, Retention: time.Second, wait: 200 * time.Millisecond}
	c := connect(t, taskServer(t, ts, run, nil), nil)
	task, err := callAsTask(t, c, "run_python_code", map[string]any{"code": "print(1)", "timeout_seconds": 1})
	if err != nil {
		t.Fatal(err)
	}
	if task.TTL == nil || *task.TTL != 2200 {
		t.Errorf("ttl %v; want 2200 ms: 1s of timeout, 200ms of wait, 1s of retention", task.TTL)
	}
	select {
	case why := <-ended:
		if !errors.Is(why, errTooLate) {
			t.Errorf("the run was cancelled by %v; want %v", why, errTooLate)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run was not cancelled at its deadline")
	}
	waitStatus(t, c, task.TaskId, mcp.TaskStatusCancelled)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.GetTask(t.Context(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
		if err != nil && strings.Contains(err.Error(), errTaskNotFound.Error()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks/get 5s after the task's ttl: %v; want %q", err, errTaskNotFound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.mu.Lock()
	kept := len(ts.byKey) + len(ts.byID)
	ts.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d tasks still kept after their expiry", kept)
	}
}

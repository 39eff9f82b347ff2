package integration

// Calls run as MCP tasks, through the real binary with mcp-go's client:
// a 90 s run that no request waits for, tasks/cancel and SIGTERM leaving
// nothing running, one principal's tasks hidden from another, max_tasks,
// and timeout_seconds past max_timeout only as a task. The clients speak
// protocol 2025-11-25 (taskProtocol), whose tasks mcp-go implements: with
// 2026-07-28, mcp-go's client's default, a server offers none.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// taskProtocol is the protocol version of the tasks the server offers.
const taskProtocol = mcp.LATEST_LEGACY_PROTOCOL_VERSION

// taskRequestIDs numbers the requests taskRequest sends.
var taskRequestIDs atomic.Int64

// taskRequest sends method with params through c's transport, which is
// how a task-augmented tools/call is sent (mcp-go's client has no call
// for it), and returns the result, or the JSON-RPC error as an error, and
// how long the request took.
func taskRequest(t *testing.T, c *client.Client, method string, params any) (json.RawMessage, time.Duration, error) {
	t.Helper()
	start := time.Now()
	res, err := c.GetTransport().SendRequest(testContext(t), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fmt.Sprintf("task-%d", taskRequestIDs.Add(1))), Method: method, Params: params,
	})
	took := time.Since(start)
	if err != nil {
		return nil, took, err
	}
	if res.Error != nil {
		return nil, took, errors.New(res.Error.Message)
	}
	return res.Result, took, nil
}

// startTask calls tool with args as a task and returns the task.
func startTask(t *testing.T, c *client.Client, tool string, args map[string]any) (mcp.Task, error) {
	t.Helper()
	raw, took, err := taskRequest(t, c, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}})
	if err != nil {
		return mcp.Task{}, err
	}
	var res mcp.CreateTaskResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Task.TaskId == "" {
		t.Fatalf("tools/call as a task: %s (%v); want a task", raw, err)
	}
	if took > 5*time.Second {
		t.Errorf("tools/call as a task took %s; want the task at once", took)
	}
	return res.Task, nil
}

// getTask is tasks/get of id.
func getTask(t *testing.T, c *client.Client, id string) (mcp.Task, time.Duration, error) {
	t.Helper()
	raw, took, err := taskRequest(t, c, "tasks/get", map[string]any{"taskId": id})
	if err != nil {
		return mcp.Task{}, took, err
	}
	var res mcp.GetTaskResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res.Task, took, nil
}

// waitTask polls tasks/get of id until its status is want, for up to d.
func waitTask(t *testing.T, c *client.Client, id string, want mcp.TaskStatus, d time.Duration) mcp.Task {
	t.Helper()
	var last mcp.Task
	if !waitFor(d, func() bool {
		task, _, err := getTask(t, c, id)
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		last = task
		return task.Status == want
	}) {
		t.Fatalf("task %s is %s (%q) after %s; want %s", id, last.Status, last.StatusMessage, d, want)
	}
	return last
}

// A call that runs as a task for three times max_timeout, with a timeout
// past max_timeout, which a plain call may not ask for, completes through
// tasks/get and tasks/result, and no request lasts more than a few
// seconds. max_timeout is 4 s here, not its default 120 s, so that the run
// takes 12 s, not the minutes a client's own request timeout (60 s in the
// TypeScript SDK) would cut a plain call at: what is shown is the same.
func TestTaskLongRun(t *testing.T) {
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, config: "[limits]\ntimeout = \"4s\"\nmax_timeout = \"4s\"\n"})
	c := s.connectVersion(t, tokens["alice"], taskProtocol)
	code := "import time\nfor i in range(6):\n    print(f'line {i}', flush=True)\n    time.sleep(2)\nprint('done')"
	args := map[string]any{"code": code, "timeout_seconds": 30} // max_timeout is 4s, max_task_timeout 1h

	text, isErr := callRaw(testContext(t), t, c, "run_python_code", args, nil)
	if !isErr || !strings.Contains(text, "run the call as an MCP task") {
		t.Fatalf("a plain call asking for 30 s: %q; want it refused, pointing to tasks", text)
	}

	task, err := startTask(t, c, "run_python_code", args)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var longest time.Duration
	var polls int
	for {
		got, took, err := getTask(t, c, task.TaskId)
		if err != nil {
			t.Fatalf("tasks/get after %s: %v", time.Since(start), err)
		}
		polls++
		longest = max(longest, took)
		if got.Status != mcp.TaskStatusWorking {
			if got.Status != mcp.TaskStatusCompleted {
				t.Fatalf("task %s after %s; want completed", got.Status, time.Since(start))
			}
			break
		}
		if !strings.Contains(got.StatusMessage, "Running for") {
			t.Errorf("a working task's statusMessage %q does not say how long it has run", got.StatusMessage)
		}
		if time.Since(start) > 28*time.Second {
			t.Fatalf("still working after %s: %q", time.Since(start), got.StatusMessage)
		}
		time.Sleep(time.Second)
	}
	ran := time.Since(start)
	raw, took, err := taskRequest(t, c, "tasks/result", map[string]any{"taskId": task.TaskId})
	if err != nil {
		t.Fatal(err)
	}
	longest = max(longest, took)
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent struct {
			Stdout         string  `json:"stdout"`
			ExitCode       int     `json:"exit_code"`
			TimeoutSeconds float64 `json:"timeout_seconds"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.StructuredContent.ExitCode != 0 || res.StructuredContent.TimeoutSeconds != 30 ||
		!strings.HasPrefix(res.StructuredContent.Stdout, "line 0\n") || !strings.HasSuffix(res.StructuredContent.Stdout, "line 5\ndone\n") {
		t.Errorf("tasks/result %s; want the usual result of the whole run", raw)
	}
	if ran < 11*time.Second {
		t.Errorf("the task completed after %s; want about 12s, three times max_timeout", ran)
	}
	if longest > 5*time.Second {
		t.Errorf("the longest request took %s; want none over a few seconds", longest)
	}
	t.Logf("task run: %d polls, longest request %s, completed after %s", polls, longest, ran)
}

// tasks/cancel kills the run as a cancelled call's is killed: its sandbox
// is gone at once, and nothing of it is left (startMCP's checks).
func TestTaskCancelLeavesNothing(t *testing.T) {
	s := startMCPVersion(t, serverSpec{}, t.Cleanup, taskProtocol)
	task, err := startTask(t, s.c, "run_python_code", map[string]any{"code": "import time\nprint('up', flush=True)\ntime.sleep(120)", "timeout_seconds": 100})
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) == 1 }) {
		t.Fatalf("running sandboxes %v; want the task's one", running)
	}
	raw, _, err := taskRequest(t, s.c, "tasks/cancel", map[string]any{"taskId": task.TaskId})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"cancelled"`) {
		t.Errorf("tasks/cancel answered %s; want the task cancelled", raw)
	}
	if !waitFor(10*time.Second, func() bool { return gone(t, running) }) {
		t.Errorf("the cancelled task's sandbox %v is still there 10s later", running)
	}
	if r := runningSandboxes(t); len(r) != 0 {
		t.Errorf("running sandboxes after tasks/cancel: %v", r)
	}
	if got := waitTask(t, s.c, task.TaskId, mcp.TaskStatusCancelled, 5*time.Second); !strings.Contains(got.StatusMessage, "cancel") {
		t.Errorf("cancelled task's statusMessage %q", got.StatusMessage)
	}
}

// A task is its principal's: another gets, for get, result and cancel,
// the error of a task that does not exist, and does not list it; and
// past a principal's share of max_tasks a task is refused.
func TestTaskPrincipals(t *testing.T) {
	path, tokens := tokenFile(t, "alice", "bob")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, config: "[tasks]\nmax_tasks = 2\n"})
	alice, bob := s.connectVersion(t, tokens["alice"], taskProtocol), s.connectVersion(t, tokens["bob"], taskProtocol)
	task, err := startTask(t, alice, "run_python_code", map[string]any{"code": "import time\ntime.sleep(60)", "timeout_seconds": 90})
	if err != nil {
		t.Fatal(err)
	}
	_, _, missing := taskRequest(t, bob, "tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"})
	if missing == nil {
		t.Fatal("tasks/get of a task that does not exist succeeded")
	}
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if _, _, err := taskRequest(t, bob, method, map[string]any{"taskId": task.TaskId}); err == nil || err.Error() != missing.Error() {
			t.Errorf("bob's %s of alice's task: %v; want %q, as for a task that does not exist", method, err, missing)
		}
	}
	raw, _, err := taskRequest(t, bob, "tasks/list", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), task.TaskId) {
		t.Errorf("bob's tasks/list shows alice's task: %s", raw)
	}
	raw, _, err = taskRequest(t, alice, "tasks/list", map[string]any{})
	if err != nil || !strings.Contains(string(raw), task.TaskId) {
		t.Errorf("alice's tasks/list: %s %v; want her task", raw, err)
	}
	if got, _, err := getTask(t, alice, task.TaskId); err != nil || got.Status != mcp.TaskStatusWorking {
		t.Errorf("alice's tasks/get: %+v %v; want her task working", got, err)
	}

	// max_tasks 2 over two clients: one each. Alice's second is refused;
	// bob's first is not.
	if _, err := startTask(t, alice, "run_python_code", map[string]any{"code": "print(1)"}); err == nil || !strings.Contains(err.Error(), "max_tasks") {
		t.Errorf("alice's second task: %v; want it refused by max_tasks", err)
	}
	other, err := startTask(t, bob, "run_python_code", map[string]any{"code": "print('bob')"})
	if err != nil {
		t.Fatalf("bob's first task: %v", err)
	}
	waitTask(t, bob, other.TaskId, mcp.TaskStatusCompleted, 30*time.Second)

	if _, _, err := taskRequest(t, alice, "tasks/cancel", map[string]any{"taskId": task.TaskId}); err != nil {
		t.Errorf("alice's tasks/cancel: %v", err)
	}
	waitTask(t, alice, task.TaskId, mcp.TaskStatusCancelled, 10*time.Second)
}

// A task in flight when the server gets SIGTERM is cancelled, its end
// recorded, and its sandbox deleted before the server exits 0 (startHTTP
// checks that nothing is left).
func TestTaskSIGTERM(t *testing.T) {
	log := t.TempDir() + "/audit.log"
	path, tokens := tokenFile(t, "alice")
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path, "--audit-log", log}})
	c := s.connectVersion(t, tokens["alice"], taskProtocol)
	task, err := startTask(t, c, "run_python_code", map[string]any{"code": "import time\nprint('up', flush=True)\ntime.sleep(120)", "timeout_seconds": 100})
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) == 1 }) {
		t.Fatalf("running sandboxes %v; want the task's one", running)
	}
	start := time.Now()
	if err := s.stop(60 * time.Second); err != nil {
		t.Fatalf("the server's exit after SIGTERM: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the server took %s to exit after SIGTERM with a task in flight", took)
	}
	if !gone(t, running) {
		t.Errorf("the task's sandbox %v outlived the server", running)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["task"] == task.TaskId {
			events = append(events, fmt.Sprint(rec["event"], ":", rec["status"]))
			if rec["event"] == "task_ended" && !strings.Contains(fmt.Sprint(rec["reason"]), "shutting down") {
				t.Errorf("task_ended %v; want the shutdown as its reason", rec)
			}
		}
	}
	if got, want := strings.Join(events, " "), "task_created:working run_started:<nil> run_ended:<nil> task_ended:cancelled"; got != want {
		t.Errorf("the task's audit records: %s; want %s", got, want)
	}
}

// A call run as a task through the official TypeScript SDK's client
// (testdata/tasks-sdk.mjs), over stdio and over HTTP with a token: the
// tools declare task support, callToolStream gets the task at once, sees
// it working with how long it has run, then completed, and its result is
// the usual one; nothing is left. It runs once: the daemon does not change
// what the client sees.
func TestTaskTypeScriptSDK(t *testing.T) {
	node, modules := nodeTools(t)
	t.Run("stdio", func(t *testing.T) {
		cmd, stateDir := serverCommand(t, serverSpec{})
		env := map[string]string{}
		for _, kv := range cmd.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		sdkTask(t, node, modules, map[string]any{"command": cmd.Path, "args": cmd.Args[1:], "env": env})
		assertNoLeftovers(t, stateDir)
	})
	t.Run("http", func(t *testing.T) {
		path, tokens := tokenFile(t, "sdk")
		s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}})
		sdkTask(t, node, modules, map[string]any{"url": s.base + "/mcp", "token": tokens["sdk"]})
	})
}

// sdkTask runs testdata/tasks-sdk.mjs with node against server and checks
// what it saw.
func sdkTask(t *testing.T, node, modules string, server map[string]any) {
	t.Helper()
	serverJSON, err := json.Marshal(server)
	if err != nil {
		t.Fatal(err)
	}
	call, err := json.Marshal(map[string]any{"name": "run_python_code", "arguments": map[string]any{
		"code": "import time\nfor i in range(4):\n    print(f'tick {i}', flush=True)\n    time.sleep(1)", "timeout_seconds": 30}})
	if err != nil {
		t.Fatal(err)
	}
	script := osexec.CommandContext(testContext(t), node, "testdata/tasks-sdk.mjs")
	script.Env = []string{"PATH=" + os.Getenv("PATH"), "SANDBOX_NODE_MODULES=" + modules, "TASKS_SDK_SERVER=" + string(serverJSON), "TASKS_SDK_CALL=" + string(call)}
	var stderr syncBuffer
	script.Stderr = &stderr
	out, err := script.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", script, err, &stderr)
	}
	var got struct {
		TaskTools []string `json:"taskTools"`
		TaskID    string   `json:"taskId"`
		Statuses  []struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"statuses"`
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script printed %q: %v\nstderr:\n%s", out, err, &stderr)
	}
	if want := "create_session run_js_code run_python_code"; strings.Join(got.TaskTools, " ") != want {
		t.Errorf("tools with task support %v; want %s", got.TaskTools, want)
	}
	if got.TaskID == "" || got.Error != nil || got.Result == nil {
		t.Fatalf("callToolStream: %s; want a task and its result\nstderr:\n%s", out, &stderr)
	}
	n := len(got.Statuses)
	if n < 2 || got.Statuses[0].Status != "working" || !strings.Contains(got.Statuses[0].Message, "Running for") || got.Statuses[n-1].Status != "completed" {
		t.Errorf("statuses %+v; want working (saying how long it has run), then completed", got.Statuses)
	}
	if got.Result.IsError || len(got.Result.Content) == 0 || got.Result.Content[0].Text != "tick 0\ntick 1\ntick 2\ntick 3\n" {
		t.Errorf("result %+v; want the usual result", got.Result)
	}
}

package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tasks are the MCP tasks (protocol 2025-11-25) of a server: a client
// that sends "task" with a call of a language tool or create_session
// gets the task at once, while the call runs on; tasks/get tells its
// status, how long it has run and the end of its output so far (as the
// executor tells it to exec.Request.Output),
// tasks/result gives the call's usual result, tasks/cancel kills its run
// as a cancelled call's is killed.
//
// mcp-go routes those requests and keeps each task's status and result,
// but its store does not fit as it is, so Tasks wraps it with mcp-go's
// hooks and a tool middleware:
//   - it runs a task's handler on the context of the tools/call request,
//     which ends, cancelled, as soon as the task is returned: the run
//     would be killed at once. Tasks runs it on a context of its own, which
//     tasks/cancel, the task's expiry and Close cancel.
//   - it tells tasks apart by MCP session, and not at all where a request
//     has none (a 2026-07-28 request), and keeps a task without a ttl
//     forever. A task here belongs to its principal: any other gets "task
//     not found", whether the task exists or not, and tasks/list shows a
//     principal its own. mcp-go's session check still applies on top.
//   - it bounds running tasks, not kept ones. Tasks bounds those it keeps,
//     running or ended, server-wide and per principal, and sets each
//     task's ttl so that mcp-go forgets it, result and all,
//     result_retention after its run's deadline.
//   - it cannot say a running task's progress; Tasks writes it into the
//     statusMessage of tasks/get.
//
// A client on protocol 2026-07-28, where tasks became an extension mcp-go
// does not implement, sees no task support on the tools, and a call of
// its that sends "task" anyway runs as a plain call.
//
// What mcp-go does that Tasks cannot change: it sends each task's
// notifications/tasks/status (its id, status and, for a failed or
// cancelled one, a reason of the server's) to every initialized session,
// not to its owner's alone.
type Tasks struct {
	// Max is how many tasks are kept at once, all principals together,
	// each holding at most an equal share of it among the clients of
	// Options (at least 1); Retention how long a task is kept after its
	// run's deadline.
	Max       int
	Retention time.Duration
	// Event, if not nil, is told of each task's creation and end, for
	// the audit log. It is called on the goroutine of the request or of
	// the run, never with a lock of Tasks or of mcp-go held.
	Event func(TaskEvent)

	share     int
	principal func(ctx context.Context) string
	// wait is taskWait; a test shortens it.
	wait time.Duration
	// timeouts are the default timeouts of the language tools, by name.
	timeouts map[string]time.Duration
	now      func() time.Time

	mu sync.Mutex
	// byKey holds every task by the TaskParams of its call, which mcp-go
	// hands to the handler, from the call until the task is forgotten;
	// byID those mcp-go has named.
	byKey  map[*mcp.TaskParams]*task
	byID   map[string]*task
	closed bool
	// running counts the task handlers that have not returned.
	running sync.WaitGroup
}

// TaskEvent is a task's creation (Status "working") or its end (Status
// "completed", "failed" or "cancelled"): a task has no other status.
type TaskEvent struct {
	Task      string
	Principal string
	Tool      string
	Status    string
	// IsError is set on a completed task whose result is an error (a
	// program that failed, a call refused), as on a plain call's result.
	IsError bool
	// Reason says why a task failed or was cancelled.
	Reason string
	// TTL is how long the task is kept from its creation (creation only);
	// Duration how long it ran (end only).
	TTL      time.Duration
	Duration time.Duration
}

// Task statuses, as MCP names them.
const (
	taskWorking   = string(mcp.TaskStatusWorking)
	taskCompleted = string(mcp.TaskStatusCompleted)
	taskFailed    = string(mcp.TaskStatusFailed)
	taskCancelled = string(mcp.TaskStatusCancelled)
)

// taskWait is what a task's run may take beyond its timeout, to wait for
// a run slot and a sandbox: its deadline is its creation plus both.
const taskWait = 5 * time.Minute

// taskPollInterval is the interval between polls tasks/get suggests.
const taskPollInterval = 1000 // milliseconds

// taskOutputTail is how much of the end of each stream tasks/get shows.
const taskOutputTail = 2 << 10

// errTaskNotFound is the error of any task request a principal may not
// make: of another's task, as of one that does not exist.
var errTaskNotFound = errors.New("task not found")

// Why a task's run was cancelled; each is a context.Canceled, which
// mcp-go takes for a cancelled task.
var (
	errCancelledByClient = fmt.Errorf("cancelled by tasks/cancel: %w", context.Canceled)
	errShutdown          = fmt.Errorf("cancelled: the server is shutting down: %w", context.Canceled)
	errExpired           = fmt.Errorf("cancelled: the task expired (result_retention) before its run ended: %w", context.Canceled)
	errTooLate           = fmt.Errorf("cancelled: the run did not end within its timeout plus %s of waiting for a sandbox: %w", taskWait, context.Canceled)
)

// task is one task, from its call until it expires.
type task struct {
	id        string // "" until mcp-go names it
	principal string
	tool      string
	created   time.Time
	deadline  time.Time
	ttl       time.Duration
	// timeout is the run's, for tasks/get.
	timeout time.Duration
	// refusal, if not "", is why the task may not run: its call came past
	// the principal's share, or after Close.
	refusal string
	// named is closed once id is set.
	named  chan struct{}
	expiry *time.Timer

	mu     sync.Mutex
	cancel context.CancelCauseFunc // nil until it runs, and once it ended
	// why is the first reason the task was stopped for, if it was; a
	// task stopped before its run began is cancelled as it begins.
	why error
	out [2]outputTail // stdout, stderr
}

// outputTail is the end of one stream's output so far, and its size.
type outputTail struct {
	tail  []byte
	total int64
}

// add appends p, keeping the last taskOutputTail bytes.
func (s *outputTail) add(p []byte) {
	s.total += int64(len(p))
	if len(p) >= taskOutputTail {
		s.tail = append(s.tail[:0], p[len(p)-taskOutputTail:]...)
		return
	}
	if over := len(s.tail) + len(p) - taskOutputTail; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
	s.tail = append(s.tail, p...)
}

// output is the task's exec.Request.Output: it keeps the end of each
// stream for tasks/get.
func (t *task) output(stream string, p []byte) {
	i := 0
	if stream == "stderr" {
		i = 1
	}
	t.mu.Lock()
	t.out[i].add(p)
	t.mu.Unlock()
}

// progress is a running task's statusMessage: how long it has run, of
// what timeout, and the end of each stream's output so far.
func (t *task) progress(now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Running for %s", now.Sub(t.created).Round(time.Second))
	if t.timeout > 0 {
		fmt.Fprintf(&b, " (timeout %s)", t.timeout)
	}
	b.WriteString(".")
	for i, name := range []string{"stdout", "stderr"} {
		s := t.out[i]
		if s.total == 0 {
			fmt.Fprintf(&b, " No %s yet.", name)
			continue
		}
		tail := s.tail
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		if int64(len(s.tail)) < s.total {
			fmt.Fprintf(&b, "\n%s so far: %d bytes; the last %d:\n", name, s.total, len(tail))
		} else {
			fmt.Fprintf(&b, "\n%s so far (%d bytes):\n", name, s.total)
		}
		b.WriteString(strings.ToValidUTF8(string(tail), "\uFFFD"))
	}
	return b.String()
}

// taskKey is the context key of the task a handler runs for.
type taskKey struct{}

// taskOf returns the task ctx's call runs as, or nil for a plain call.
func taskOf(ctx context.Context) *task {
	t, _ := ctx.Value(taskKey{}).(*task)
	return t
}

// TaskID returns the id of the MCP task ctx's call runs as, or "" for a
// plain call: the audit log records it with the run.
func TaskID(ctx context.Context) string {
	if t := taskOf(ctx); t != nil {
		return t.id
	}
	return ""
}

// offered reports whether t offers tasks.
func (t *Tasks) offered() bool {
	return t != nil && t.Max > 0
}

// setUp readies t for a server of o whose language tools' default
// timeouts are timeouts, by tool name, and adds its hooks to hooks. New
// adds its middleware and the tasks capability.
func (t *Tasks) setUp(o Options, timeouts map[string]time.Duration, hooks *server.Hooks) {
	t.share = max(1, t.Max/max(1, o.Clients))
	t.principal = o.Principal
	t.timeouts = timeouts
	t.now = time.Now
	if t.wait == 0 {
		t.wait = taskWait
	}
	t.byKey = map[*mcp.TaskParams]*task{}
	t.byID = map[string]*task{}
	hooks.AddOnRequestInitialization(t.check)
	hooks.AddBeforeCallTool(t.beforeCall)
	hooks.AddAfterCallTool(t.afterCall)
	hooks.AddOnError(t.onError)
	hooks.AddAfterGetTask(func(ctx context.Context, _ any, _ *mcp.GetTaskRequest, res *mcp.GetTaskResult) {
		t.describe(&res.Task)
	})
	hooks.AddAfterListTasks(t.afterList)
	hooks.AddAfterCancelTask(func(ctx context.Context, _ any, req *mcp.CancelTaskRequest, _ *mcp.CancelTaskResult) {
		t.stop(req.Params.TaskId, errCancelledByClient)
	})
	hooks.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		// A 2026-07-28 client would take taskSupport for the tasks
		// extension, which mcp-go does not implement.
		if server.IsModernRequest(ctx) {
			for i := range res.Tools {
				res.Tools[i].Execution = nil
			}
		}
	})
}

// owner names ctx's principal.
func (t *Tasks) owner(ctx context.Context) string {
	if t.principal == nil {
		return localPrincipal
	}
	return t.principal(ctx)
}

// check refuses, before mcp-go reads it, a task request for a task that
// is not the caller's, and a call as a task past the caller's share.
func (t *Tasks) check(ctx context.Context, _ any, message any) error {
	data, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var req struct {
		Method string `json:"method"`
		Params struct {
			TaskID string          `json:"taskId"`
			Task   json.RawMessage `json:"task"`
			Meta   *mcp.Meta       `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &req) != nil {
		return nil
	}
	switch mcp.MCPMethod(req.Method) {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
		t.mu.Lock()
		tk := t.byID[req.Params.TaskID]
		t.mu.Unlock()
		if tk == nil || tk.principal != t.owner(ctx) {
			return errTaskNotFound
		}
	case mcp.MethodToolsCall:
		if len(req.Params.Task) == 0 || isNull(req.Params.Task) || mcp.IsModernProtocol(req.Params.Meta.ProtocolVersion()) {
			return nil
		}
		t.mu.Lock()
		refusal := t.refusal(t.owner(ctx))
		t.mu.Unlock()
		if refusal != "" {
			return errors.New(refusal)
		}
	}
	return nil
}

// refusal says why principal may not start a task now, or "". t.mu is
// held.
func (t *Tasks) refusal(principal string) string {
	if t.closed {
		return "the server is shutting down: no task was started; retry once it is back"
	}
	total, own := 0, 0
	for _, tk := range t.byKey {
		if tk.refusal == "" {
			total++
			if tk.principal == principal {
				own++
			}
		}
	}
	switch {
	case own >= t.share:
		return fmt.Sprintf("you hold %d tasks, your share of this server's [tasks] max_tasks (%d), running or ended and kept for result_retention (%s): no task was started. "+
			"Fetch the results you need with tasks/result and retry once older tasks expire, or call the tool without \"task\"",
			own, t.Max, t.Retention)
	case total >= t.Max:
		return fmt.Sprintf("this server holds %d tasks, its [tasks] max_tasks, running or ended and kept for result_retention (%s): no task was started. "+
			"Retry once older tasks expire, or call the tool without \"task\"", total, t.Retention)
	}
	return ""
}

// beforeCall takes up a call as a task: a 2026-07-28 call runs as a plain
// one; any other gets a task of t's, whose ttl replaces the client's.
func (t *Tasks) beforeCall(ctx context.Context, _ any, req *mcp.CallToolRequest) {
	if req.Params.Task == nil {
		return
	}
	if server.IsModernRequest(ctx) {
		req.Params.Task = nil
		return
	}
	now := t.now()
	timeout, ok := t.timeouts[req.Params.Name]
	if ok {
		if a, ok := req.GetArguments()["timeout_seconds"].(float64); ok && a >= 1 {
			timeout = time.Duration(a) * time.Second
		}
	}
	tk := &task{
		principal: t.owner(ctx), tool: req.Params.Name, created: now, timeout: timeout,
		deadline: now.Add(timeout + t.wait), named: make(chan struct{}),
	}
	tk.ttl = timeout + t.wait + t.Retention
	ttl := tk.ttl.Milliseconds()
	key := &mcp.TaskParams{TTL: &ttl}
	req.Params.Task = key
	t.mu.Lock()
	defer t.mu.Unlock()
	tk.refusal = t.refusal(tk.principal)
	t.byKey[key] = tk
}

// afterCall names the task mcp-go made of a call, and has it forgotten
// when mcp-go forgets it.
func (t *Tasks) afterCall(ctx context.Context, _ any, req *mcp.CallToolRequest, result any) {
	created, ok := result.(*mcp.CreateTaskResult)
	if !ok || req.Params.Task == nil {
		return
	}
	poll := int64(taskPollInterval)
	created.Task.PollInterval = &poll
	t.mu.Lock()
	key := req.Params.Task
	tk := t.byKey[key]
	if tk == nil || tk.id != "" {
		t.mu.Unlock()
		return
	}
	tk.id = created.Task.TaskId
	t.byID[tk.id] = tk
	id := tk.id
	// mcp-go forgets the task ttl after its creation (scheduleTaskCleanup),
	// and cancels a run still going, which here is tk's own to cancel.
	tk.expiry = time.AfterFunc(time.Until(tk.created.Add(tk.ttl)), func() {
		t.mu.Lock()
		delete(t.byKey, key)
		delete(t.byID, id)
		t.mu.Unlock()
		tk.stop(errExpired)
	})
	t.mu.Unlock()
	// Recorded before the run may begin (it waits for named), so that the
	// task's creation comes before its run in the audit log.
	if tk.refusal == "" {
		t.event(TaskEvent{Task: id, Principal: tk.principal, Tool: tk.tool, Status: taskWorking, TTL: tk.ttl})
	}
	close(tk.named)
}

// onError forgets a call as a task that mcp-go refused (an unknown tool).
func (t *Tasks) onError(_ context.Context, _ any, method mcp.MCPMethod, message any, _ error) {
	req, ok := message.(*mcp.CallToolRequest)
	if method != mcp.MethodToolsCall || !ok || req.Params.Task == nil {
		return
	}
	t.mu.Lock()
	if tk := t.byKey[req.Params.Task]; tk != nil && tk.id == "" {
		delete(t.byKey, req.Params.Task)
	}
	t.mu.Unlock()
}

// describe writes a running task's progress into its statusMessage, and
// the poll interval t suggests.
func (t *Tasks) describe(task *mcp.Task) {
	poll := int64(taskPollInterval)
	task.PollInterval = &poll
	if task.Status != mcp.TaskStatusWorking {
		return
	}
	t.mu.Lock()
	tk := t.byID[task.TaskId]
	t.mu.Unlock()
	if tk != nil {
		task.StatusMessage = tk.progress(t.now())
	}
}

// afterList keeps in tasks/list the caller's own tasks.
func (t *Tasks) afterList(ctx context.Context, _ any, _ *mcp.ListTasksRequest, res *mcp.ListTasksResult) {
	owner := t.owner(ctx)
	t.mu.Lock()
	own := res.Tasks[:0]
	for _, task := range res.Tasks {
		if tk := t.byID[task.TaskId]; tk != nil && tk.principal == owner {
			own = append(own, task)
		}
	}
	t.mu.Unlock()
	res.Tasks = own
	for i := range res.Tasks {
		t.describe(&res.Tasks[i])
	}
}

// stop cancels the run of task id, if it is running, with why.
func (t *Tasks) stop(id string, why error) {
	t.mu.Lock()
	tk := t.byID[id]
	t.mu.Unlock()
	if tk != nil {
		tk.stop(why)
	}
}

// stop cancels t's run, if it is running, with why.
func (tk *task) stop(why error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.why == nil {
		tk.why = why
	}
	if tk.cancel != nil {
		tk.cancel(why)
	}
}

// middleware runs a call as a task: on a context of its own, which the
// request's end does not cancel and which carries the task (taskOf),
// within the task's deadline; and tells Event how it ended. A plain call
// goes through as it is. It is the outermost of the tool middlewares, so
// what the others do (the per-client limits) is part of the task.
func (t *Tasks) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Task == nil {
			return next(ctx, req)
		}
		t.mu.Lock()
		tk := t.byKey[req.Params.Task]
		t.mu.Unlock()
		if tk == nil {
			return next(ctx, req)
		}
		<-tk.named
		if tk.refusal != "" {
			return mcp.NewToolResultError(tk.refusal + "."), nil
		}
		runCtx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), taskKey{}, tk))
		runCtx, stopDeadline := context.WithDeadlineCause(runCtx, tk.deadline, errTooLate)
		defer stopDeadline()
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			cancel(nil)
			t.event(TaskEvent{Task: tk.id, Principal: tk.principal, Tool: tk.tool, Status: taskCancelled, Reason: errShutdown.Error()})
			return nil, errShutdown
		}
		t.running.Add(1)
		t.mu.Unlock()
		defer t.running.Done()
		tk.mu.Lock()
		tk.cancel = cancel
		if tk.why != nil {
			cancel(tk.why)
		}
		tk.mu.Unlock()
		defer func() {
			tk.mu.Lock()
			tk.cancel = nil
			tk.mu.Unlock()
			cancel(nil)
		}()

		began := t.now()
		res, err := next(runCtx, req)
		ev := TaskEvent{Task: tk.id, Principal: tk.principal, Tool: tk.tool, Duration: t.now().Sub(began)}
		switch {
		case runCtx.Err() != nil:
			// Cancelled: by tasks/cancel, Close, the expiry or the
			// deadline. mcp-go marks the task cancelled with this error.
			err = context.Cause(runCtx)
			ev.Status, ev.Reason = taskCancelled, err.Error()
			res = nil
		case err != nil:
			ev.Status, ev.Reason = taskFailed, err.Error()
		default:
			ev.Status = taskCompleted
			ev.IsError = res != nil && res.IsError
		}
		t.event(ev)
		return res, err
	}
}

// event tells Event of e.
func (t *Tasks) event(e TaskEvent) {
	if t.Event != nil {
		t.Event(e)
	}
}

// Close refuses new tasks, cancels the runs of those in flight, and waits
// until their handlers have returned (their sandboxes killed, and their
// deletion begun) or ctx is done. It is safe on a nil *Tasks.
func (t *Tasks) Close(ctx context.Context) error {
	if !t.offered() || t.byID == nil {
		return nil
	}
	t.mu.Lock()
	t.closed = true
	tasks := make([]*task, 0, len(t.byID))
	for _, tk := range t.byID {
		tasks = append(tasks, tk)
		if tk.expiry != nil {
			tk.expiry.Stop()
		}
	}
	t.mu.Unlock()
	for _, tk := range tasks {
		tk.stop(errShutdown)
	}
	done := make(chan struct{})
	go func() {
		t.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tasks still running at shutdown: %w", context.Cause(ctx))
	}
}

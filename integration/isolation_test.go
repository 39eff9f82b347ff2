package integration

// Helpers shared by the isolation suite, whose cases are in a file a
// theme: isolation_resources_test.go (what one run may use up),
// isolation_escapes_test.go (what it may read, write, call and leave
// behind), isolation_network_test.go (what it may reach),
// isolation_uid_budgets_test.go (budgets the kernel keeps per user or for
// the whole host) and isolation_workspace_test.go (the files the server
// reads back). Here: the two modes every case runs in (a sandbox of its
// own, a cell of a fresh session), a hostile program run through the real
// server in either, with the ids of the sandboxes it ran in, the Python
// probe and its report, and afterCase, what the host must look like
// afterwards.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"

	sandboxoci "code-sandbox-mcp/oci"
)

// toolFor maps a language to its tool.
var toolFor = map[string]string{"python": "run_python_code", "javascript": "run_js_code"}

// hostileRun is one hostile program's result and what ran it.
type hostileRun struct {
	toolResult
	// ids are the sandboxes whose task exited while the call was in
	// flight: the one that ran the program, and those of any call made at
	// the same time on the same daemon. (Exits, not starts: a pool's
	// sandbox is started ahead, on its stub, before the call.)
	ids []string
	// took is the call's wall-clock time, as the client saw it.
	took time.Duration
	// watch saw the exits and the creations during the call; what it
	// knows of each sandbox's start (cgroup and limits) comes from the
	// server's own watch.
	watch *startWatch
}

// hostileOpt changes how hostile calls the tool.
type hostileOpt func(args map[string]any)

// withTimeout asks for a run of at most sec seconds (timeout_seconds),
// scaled by SANDBOX_TEST_TIME_SCALE (see scaled): stoppedAtDeadline, given
// the same sec, expects the scaled deadline.
func withTimeout(sec int) hostileOpt {
	return func(args map[string]any) { args["timeout_seconds"] = scaled(sec) }
}

// mode is how the isolation suite runs a hostile program: in a sandbox of
// its own (one-shot), as the first cell of a fresh session (issue 13),
// whose sandbox is built exactly as a one-shot one is but whose process
// is the session driver (exec/internal/sandbox/drivers), the program running inside it, or
// one-shot through the server's streamable HTTP transport (issue 14)
// instead of stdio, with a token, as a remote client would.
// Every case runs in each mode, as subtests named after the mode, with
// the same assertions; where a session legitimately differs, the case
// says so next to the difference. The two stdio modes share one server
// (m.start), the http mode has its own.
type mode struct {
	name    string // "oneshot", "session" or "http": the subtest's name
	session bool
	http    bool // the server serves --http, the client is mcp-go's streamable HTTP one
	// pythonOnly runs a case's python programs alone: so
	// TestIsolationBuiltImage runs the cases, python running in the image
	// it built, while Node.js would run in the unchanged image that the
	// suite's own runs of the cases cover. A case asks m.runs before it
	// runs a program of another language.
	pythonOnly bool
	// stdio is the test's server over stdio, shared by its stdio modes.
	stdio *stdioServer
}

var modes = []mode{{name: "oneshot"}, {name: "session", session: true}, {name: "http", http: true}}

// runs reports whether m runs the programs of lang.
func (m mode) runs(lang string) bool { return !m.pythonOnly || lang == "python" }

// eachModeRuns are the modes eachMode runs: modes, but for
// TestIsolationBuiltImage's run of the cases.
var eachModeRuns = modes

// eachMode runs f once per mode, as the subtests TEST/oneshot,
// TEST/session and TEST/http. The stdio modes share one server, as the
// suite had one server per test before the http mode: a server's start
// and exit, with its pool, cost a second or more, per test and mode. It
// stops before TEST/http, so that one server runs at a time (serverPID),
// or after the last mode (or when TEST ends, if a mode stopped it short).
func eachMode(t *testing.T, f func(t *testing.T, m mode)) {
	t.Helper()
	stdio := &stdioServer{t: t}
	t.Cleanup(stdio.stop)
	for _, m := range eachModeRuns {
		m.stdio = stdio
		if m.http {
			stdio.stop()
		}
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
	// Before the test's cleanups, which check its state directory: a run
	// of the stdio modes alone has no http mode to stop it first.
	stdio.stop()
}

// stdioServer is a test's one server over stdio, started by the first
// stdio mode that asks and stopped by stop (in the test's goroutine),
// which then checks what its exit left as startMCP's cleanup does.
type stdioServer struct {
	t     *testing.T // the test, which owns the server
	spec  serverSpec
	s     *mcpServer
	stops []func()
}

// get returns the server of spec, starting it if need be; t is the
// subtest asking.
func (x *stdioServer) get(t *testing.T, spec serverSpec) *mcpServer {
	t.Helper()
	if x.s != nil {
		if !reflect.DeepEqual(spec, x.spec) {
			t.Fatalf("the stdio modes of %s ask for two servers (%+v, %+v); they share one", x.t.Name(), x.spec, spec)
		}
		return x.s
	}
	x.spec = spec
	x.s = startMCPUntil(x.t, spec, func(f func()) { x.stops = append(x.stops, f) })
	return x.s
}

// stop stops the server, if one runs, and runs the checks of its exit.
func (x *stdioServer) stop() {
	for i := len(x.stops) - 1; i >= 0; i-- {
		x.stops[i]()
	}
	x.stops, x.s = nil, nil
}

// start starts the server of spec for mode m: over stdio, shared by the
// stdio modes of the test (startMCP's), or over HTTP (startMCPHTTP).
// Either way nothing may be left when its server exits. The server keeps
// ready sandboxes (serverSpec.ready), as by default: a hostile program
// runs where a one-shot run of a default server does, in a sandbox
// started ahead. start returns once they have started (awaitPools).
func (m mode) start(t *testing.T, spec serverSpec) *mcpServer {
	t.Helper()
	spec.ready = true
	var s *mcpServer
	switch {
	case m.http:
		s = startMCPHTTP(t, spec)
	case m.stdio == nil:
		s = startMCP(t, spec)
	default:
		s = m.stdio.get(t, spec)
	}
	awaitPools(t, s, spec)
	return s
}

// awaitPools waits until s, a server of spec, has started its ready
// sandboxes: a case's first run then takes one, as a run on a server
// that has been up a while does. Without the wait, a case with a
// deadline of a few seconds that ran at once on a loaded host met the
// pool's sandbox still being made, and its deadline, which counts the
// wait for a sandbox, ended before its program began (seen in
// TestIsolationBuiltImage, 2026-12-06: the built image's inventory and
// the pool's sandbox took 4.3 and 6.6 s at the server's start). Only the
// test pools' default is known (one a language, testPoolsTOML): a spec
// with pools of its own is not waited for.
func awaitPools(t *testing.T, s *mcpServer, spec serverSpec) {
	t.Helper()
	if !spec.ready || testNoPools || testPoolsTOML(spec.config, spec.ready) == "" {
		return
	}
	if !waitFor(60*time.Second, func() bool { return len(s.watch.seen()) >= len(toolFor) }) {
		t.Fatalf("the server's %d ready sandboxes did not start within 60 s (started: %v)", len(toolFor), s.watch.seen())
	}
}

// rawClient speaks JSON-RPC to a server without an MCP client: lines on
// stdio (rawServer), or POSTs to /mcp (rawHTTP).
type rawClient interface {
	send(t *testing.T, msg string)
	next(t *testing.T) map[string]any
}

// startRaw starts a server for a raw client of mode m.
func (m mode) startRaw(t *testing.T) rawClient {
	t.Helper()
	if m.http {
		return startRawHTTP(t)
	}
	if m.stdio != nil {
		// One server at a time: what the raw one's exit leaves is checked
		// across the namespace.
		m.stdio.stop()
	}
	return startRaw(t)
}

// program is the path of the file the sandbox's first process runs: the
// program (one-shot), or the session driver (session).
func (m mode) program(lang string) string {
	name := map[string]string{"python": "main.py", "javascript": "main.js"}[lang]
	if m.session {
		name = map[string]string{"python": "session.py", "javascript": "session.js"}[lang]
	}
	return "/sandbox/" + name
}

// programCmdline is the command line of the sandbox's program process,
// the child of its init, as /proc/PID/cmdline shows it with spaces: the
// interpreter running the program (one-shot), or the session driver,
// which runs the program in its own process (session). One-shot Node.js
// sandboxes are warm (the default), and node is given the warm start
// with --require.
func (m mode) programCmdline(lang string) string {
	switch {
	case lang == "python":
		return "python3 " + m.program(lang)
	case m.session:
		return "node --expose-internals " + m.program(lang)
	}
	return "node --require " + sandboxoci.NodeHooksDir + "/warm.js " + m.program(lang)
}

// createSession creates a session of lang on s and returns its id.
func createSession(t *testing.T, s *mcpServer, lang string) string {
	t.Helper()
	var c createdSession
	text, isErr := callRaw(testContext(t), t, s.c, "create_session", map[string]any{"language": lang}, &c)
	if isErr || c.SessionID == "" {
		t.Fatalf("create_session %s: %q", lang, text)
	}
	return c.SessionID
}

// closeSession closes session id on s; a session that ended already is
// no error (close_session is idempotent).
func closeSession(t *testing.T, s *mcpServer, id string) {
	t.Helper()
	if text, isErr := callRaw(testContext(t), t, s.c, "close_session", map[string]any{"session_id": id}, nil); isErr {
		t.Errorf("close_session %s: %q", id, text)
	}
}

// hostile runs src in lang ("python" or "javascript") on s in mode m, and
// returns the result with the ids of the sandboxes that ran meanwhile. It
// fails the test if none did, since then the case proved nothing about
// one.
//
// In a session, the program is the first cell of a session created for
// it, which is closed once the call returns: the session's sandbox task
// starts with create_session and exits only when the session ends, so
// its exit is waited for after close_session, and what the sandbox left
// is checked (afterCase) once the session is gone. The result must be
// the session's.
func (m mode) hostile(t *testing.T, s *mcpServer, lang, src string, opts ...hostileOpt) hostileRun {
	t.Helper()
	tool, ok := toolFor[lang]
	if !ok {
		t.Fatalf("hostile: unknown language %q", lang)
	}
	if !m.runs(lang) {
		t.Fatalf("hostile: mode %s runs python alone; the case must ask m.runs(%q) before it runs %s", m.name, lang, lang)
	}
	args := code(src)
	for _, o := range opts {
		o(args)
	}
	w := s.watchCall(t)
	var session string
	var started []string // the session's sandbox among them
	if m.session {
		session = createSession(t, s, lang)
		args["session_id"] = session
		w.flush(t)
		// The containers created too, not only the tasks started: the
		// daemon publishes /containers/create itself, before Create
		// returns, so the flush has it; a 1.6 shim forwards /tasks/start
		// in the background, and it once came after the flush's probe.
		started = append(w.seen(), w.createdContainers()...)
	}
	start := time.Now()
	r := s.call(testContext(t), t, tool, args)
	took := time.Since(start)
	if m.session {
		if r.out.SessionID != session {
			t.Errorf("%s call returned %q (session_id %q); want a cell of session %s", tool, r.text, r.out.SessionID, session)
		}
		closeSession(t, s, session)
		// Destroying the sandbox comes after close_session returns.
		if !waitFor(15*time.Second, func() bool {
			return slices.ContainsFunc(w.exitedIDs(), func(id string) bool { return slices.Contains(started, id) })
		}) {
			t.Fatalf("session %s closed, but none of the sandboxes created or started as it was created (%v) exited in 15s", session, started)
		}
		return hostileRun{toolResult: r, ids: w.exitedIDs(), took: took, watch: w}
	}
	// The result takes the kernel's exit status: containerd's word of the
	// exit, and the delete, may reach this subscriber later, seconds later
	// on a busy host (as for a session, above).
	if !waitFor(15*time.Second, func() bool { return len(w.exitedIDs()) > 0 }) {
		t.Fatalf("%s call returned %q (isError %v) but no sandbox task exited in 15s", tool, r.text, r.isError)
	}
	return hostileRun{toolResult: r, ids: w.exitedIDs(), took: took, watch: w}
}

// stoppedAtDeadline checks that r was stopped by the server at its time
// limit of sec seconds, and the call back within a bound that allows for
// a busy 2-core host. One-shot: the sandbox is killed (timed out,
// SIGKILL, exit 137). Session: the cell is interrupted first (timed out,
// SIGINT, exit 130, the session lives on and the text says so), and
// killed with its session only if it does not stop within 2 s of that
// (SIGKILL, exit 137, session_ended); either is a stop at the deadline,
// and which one the driver managed is the session tests' business
// (session_test.go). What a session's cell left running is then killed
// by close_session (hostile), and afterCase checks that it is gone.
func (m mode) stoppedAtDeadline(t *testing.T, r hostileRun, sec int) {
	t.Helper()
	sec = scaled(sec)
	o := r.out
	switch {
	case !m.session:
		if !r.isError || !o.TimedOut || o.Signal != "SIGKILL" || o.ExitCode != 137 || o.OOMKilled {
			t.Errorf("got %+v; want timed_out, SIGKILL, exit 137, not oom_killed", o)
		}
	case o.Signal == "SIGINT":
		if !r.isError || !o.TimedOut || o.ExitCode != 130 || o.OOMKilled || o.SessionEnded != "" || !strings.Contains(r.text, "interrupted; the session and its state remain") {
			t.Errorf("got %q %+v; want timed_out, SIGINT, exit 130, not oom_killed, the session alive and the text saying so", r.text, o)
		}
	default:
		t.Logf("the cell did not stop within 2s of its interrupt; its session was ended: %q", o.SessionEnded)
		if !r.isError || !o.TimedOut || o.Signal != "SIGKILL" || o.ExitCode != 137 || o.OOMKilled || !strings.Contains(o.SessionEnded, "did not stop") {
			t.Errorf("got %+v; want timed_out, and either SIGINT or SIGKILL with session_ended saying the cell did not stop, not oom_killed", o)
		}
	}
	if !strings.Contains(r.text, "timed out after "+strconv.Itoa(sec)+"s") {
		t.Errorf("text %q; want it to say it timed out after %ds", r.text, sec)
	}
	if min, max := time.Duration(sec)*time.Second, time.Duration(sec+15)*time.Second; r.took < min || r.took > max {
		t.Errorf("call took %s; want between %s and %s", r.took.Round(time.Millisecond), min, max)
	}
}

// endedSession checks, in a session, that r's call ended its session (an
// OOM kill or a crash of the interpreter, which is the driver) and that
// the text tells the model so. A one-shot run has no session to end.
func (m mode) endedSession(t *testing.T, r hostileRun) {
	t.Helper()
	if m.session && (r.out.SessionEnded == "" || !strings.Contains(r.text, "has ended")) {
		t.Errorf("got %q, session_ended %q; want the session ended, and the text saying so", r.text, r.out.SessionEnded)
	}
}

// startWatch records the tasks that start and exit in testNamespace,
// whether a starting task's cgroup was where cgroupDirs says at that
// moment, and the containers created.
type startWatch struct {
	mu     sync.Mutex
	ids    []string
	cgroup map[string]bool // id: every directory of cgroupDirs existed at start
	limits map[string]map[string]string
	exited []string
	// created are the containers created meanwhile, sandboxes of a pool
	// included; images, their images.
	created []string
	images  map[string]string
	// server, if set, is the watch of the whole server's life: it saw the
	// starts of sandboxes started before this watch began.
	server *startWatch

	// since is when the watch began: a task whose exit or delete comes
	// after it counts as exited during it only if it exited after it.
	since time.Time
	// ended are the sandboxes whose task had ended, or that had none,
	// as the watch began: their exit or delete meanwhile is not an exit
	// during the watch (an earlier call's sandbox, destroyed in the
	// background), unless their task started meanwhile.
	ended map[string]bool
	// deleted are the containers deleted meanwhile.
	deleted []string

	probe   string      // the topic of the watch's own events
	flushed chan string // the marker of each flush's probe, as it arrives
	flushes int
}

// flush returns once the watch has seen every event containerd published
// before flush was called. It publishes a probe event with a marker of its
// own and waits for it: containerd's exchange hands events to a
// subscriber in the order it published them, so what came before the
// probe has been recorded when the probe arrives. A test that asserts
// something did not happen flushes first, instead of sleeping. A task's
// /tasks/start and /tasks/exit come from its shim, which forwards them
// in the background: the daemon may publish them after a flush begun
// once the call that caused them returned (seen on 1.6). What the daemon
// publishes itself, such as /containers/create and /containers/delete,
// is in order.
func (w *startWatch) flush(t *testing.T) {
	t.Helper()
	w.flushes++
	marker := fmt.Sprintf("flush-%d", w.flushes)
	ctx := testContext(t)
	if err := testClient.EventService().Publish(ctx, w.probe, &apievents.TaskStart{ContainerID: marker}); err != nil {
		t.Fatalf("publish a flush event: %v", err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-w.flushed:
			if m == marker {
				return
			}
		case <-timeout:
			t.Fatalf("the flush event %s did not come back in 10s", marker)
		}
	}
}

// watchCall is a watch for one call to s: it answers for starts from the
// watch m.start (startMCP or startMCPHTTP) began before the server.
func (s *mcpServer) watchCall(t *testing.T) *startWatch {
	w := watchStarts(t)
	w.server = s.watch
	return w
}

// watchStarts subscribes to task starts, exits and deletes, and container
// creations; it returns once the subscription is live, so no event after
// it is missed. It ends with the test.
func watchStarts(t *testing.T) *startWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	t.Cleanup(cancel)
	const probe = "/code-sandbox-test/watch-ready"
	// Taken before the subscription: a task that ends between the two
	// counts as ending during the watch.
	since, ended := time.Now(), endedTasks(t)
	evs, errs := testClient.Subscribe(ctx, `topic=="/tasks/start"`, `topic=="/tasks/exit"`, `topic=="/tasks/delete"`, `topic=="/containers/create"`, `topic=="/containers/delete"`, `topic==`+fmt.Sprintf("%q", probe))
	w := &startWatch{cgroup: map[string]bool{}, limits: map[string]map[string]string{}, images: map[string]string{}, flushed: make(chan string, 1), probe: probe, since: since, ended: ended}
	ready := make(chan struct{})
	go w.follow(evs, errs, ready)
	// Publish probes until one comes back: then the stream is live.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := testClient.EventService().Publish(ctx, probe, &apievents.TaskStart{ContainerID: "probe"}); err != nil {
			t.Fatalf("publish a probe event: %v", err)
		}
		select {
		case <-ready:
			return w
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the containerd event subscription did not become live in 10s")
		}
	}
}

// follow reads the events until the subscription ends: the probes,
// which say the stream is live (closing ready), and the test namespace's
// task and container events.
func (w *startWatch) follow(evs <-chan *events.Envelope, errs <-chan error, ready chan struct{}) {
	for {
		select {
		case env, ok := <-evs:
			if !ok {
				return
			}
			if env.Topic == w.probe {
				w.probed(env, ready)
				continue
			}
			if env.Namespace != testNamespace {
				continue
			}
			if v, err := typeurl.UnmarshalAny(env.Event); err == nil {
				w.record(v)
			}
		case <-errs:
			return
		}
	}
}

// probed takes a probe back: the first closes ready; one a test published
// to flush the stream names the container it waits for.
func (w *startWatch) probed(env *events.Envelope, ready chan struct{}) {
	select {
	case <-ready:
	default:
		close(ready)
	}
	if v, err := typeurl.UnmarshalAny(env.Event); err == nil {
		if e, ok := v.(*apievents.TaskStart); ok && e.ContainerID != "probe" {
			select {
			case w.flushed <- e.ContainerID:
			default:
			}
		}
	}
}

// record counts one task or container event of the test namespace.
func (w *startWatch) record(v any) {
	switch e := v.(type) {
	case *apievents.TaskStart:
		w.add(e.ContainerID)
	case *apievents.TaskExit:
		// Only the task's init process: an exec's exit has an id of its
		// own. And only an exit while the watch ran: a shim forwards its
		// events to the daemon in the background, so the exit of a task
		// whose container was gone before the watch began (not in ended)
		// may come after it began (seen on 1.6: a closed session's).
		if e.ID == e.ContainerID && (e.ExitedAt == nil || !e.ExitedAt.AsTime().Before(w.since)) {
			w.exit(e.ContainerID)
		}
	case *apievents.TaskDelete:
		// A deleted task has exited. It counts if the task exited while
		// the watch ran.
		if (e.ID == "" || e.ID == e.ContainerID) && e.ExitedAt != nil && !e.ExitedAt.AsTime().Before(w.since) {
			w.exit(e.ContainerID)
		}
	case *apievents.ContainerCreate:
		w.mu.Lock()
		w.created = append(w.created, e.ID)
		w.images[e.ID] = e.Image
		w.mu.Unlock()
	case *apievents.ContainerDelete:
		// containerd 2.x now and then loses both a task's /tasks/exit and
		// its /tasks/delete: its shim sends them, and may exit before they
		// are through. The daemon itself publishes /containers/delete, and
		// a sandbox's container is deleted only after its task.
		w.mu.Lock()
		w.deleted = append(w.deleted, e.ID)
		w.mu.Unlock()
	}
}

func (w *startWatch) add(id string) {
	all := true
	for _, d := range cgroupDirs(id) {
		if _, err := os.Stat(d); err != nil {
			all = false
		}
	}
	limits := map[string]string{}
	for name, path := range cgroupLimitFiles(id) {
		if b, err := os.ReadFile(path); err == nil {
			limits[name] = strings.TrimSpace(string(b))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.ids, id) {
		w.ids = append(w.ids, id)
	}
	w.cgroup[id] = all
	w.limits[id] = limits
}

// cgroupLimits returns the limit files of sandbox id's cgroup as read when
// its task started, by their file name (v1: memory.limit_in_bytes,
// memory.memsw.limit_in_bytes, pids.max, cpu.cfs_quota_us,
// cpu.cfs_period_us; v2: memory.max, memory.swap.max, pids.max, cpu.max).
// A file that could not be read is absent.
func (w *startWatch) cgroupLimits(id string) map[string]string {
	return heard(w, id, func(w *startWatch) map[string]map[string]string { return w.limits })
}

// heard returns what w's field says of sandbox id, or, where it says
// nothing, what its server's watch does (it saw the sandboxes made
// before w began).
func heard[V any](w *startWatch, id string, field func(*startWatch) map[string]V) V {
	w.mu.Lock()
	v, ok := field(w)[id]
	w.mu.Unlock()
	if !ok && w.server != nil {
		return heard(w.server, id, field)
	}
	return v
}

// image returns the image of sandbox id, as its container was created,
// or "" if neither this watch nor its server's saw the creation.
func (w *startWatch) image(id string) string {
	return heard(w, id, func(w *startWatch) map[string]string { return w.images })
}

// cgroupLimitFiles maps the limit files cgroupLimits reads to their paths.
func cgroupLimitFiles(id string) map[string]string {
	out := map[string]string{}
	if cgroupV2() {
		for _, f := range []string{"memory.max", "memory.swap.max", "pids.max", "cpu.max"} {
			out[f] = filepath.Join(sandboxCgroup("", testNamespace, id), f)
		}
		return out
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "pids.max", "cpu.cfs_quota_us", "cpu.cfs_period_us"} {
		controller, _, _ := strings.Cut(f, ".")
		out[f] = filepath.Join(sandboxCgroup(controller, testNamespace, id), f)
	}
	return out
}

// seen returns the ids of the tasks started so far.
func (w *startWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

// exit records that the task of container id exited, unless it had
// ended before the watch began.
func (w *startWatch) exit(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.endedBefore(id) && !slices.Contains(w.exited, id) {
		w.exited = append(w.exited, id)
	}
}

// endedBefore reports whether the task of container id had ended, or
// there was none, as the watch began, and none started since; w.mu is
// held.
func (w *startWatch) endedBefore(id string) bool {
	return w.ended[id] && !slices.Contains(w.ids, id)
}

// exitedIDs returns the ids of the tasks that exited while the watch ran
// (or whose task or container was deleted, which they are only once
// exited) so far.
func (w *startWatch) exitedIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := slices.Clone(w.exited)
	for _, id := range w.deleted {
		if !w.endedBefore(id) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// endedTasks returns the containers of testNamespace whose task has ended,
// by containerd's word or the kernel's (a sandbox's result may come from
// the kernel's before containerd has it), or that have no task.
func endedTasks(t *testing.T) map[string]bool {
	t.Helper()
	ctx := testContext(t)
	cs, err := testClient.Containers(ctx)
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	ended := map[string]bool{}
	for _, c := range cs {
		task, err := c.Task(ctx, nil)
		if err != nil {
			ended[c.ID()] = true
			continue
		}
		st, err := task.Status(ctx)
		if err != nil || st.Status == containerd.Stopped || !running(int(task.Pid())) {
			ended[c.ID()] = true
		}
	}
	return ended
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// createdContainers returns the ids of the containers created so far.
func (w *startWatch) createdContainers() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.created)
}

func (w *startWatch) sawCgroup(id string) bool {
	return heard(w, id, func(w *startWatch) map[string]bool { return w.cgroup })
}

// cpuUsage returns the CPU time, in nanoseconds, that sandbox id's cgroup
// has used: cpuacct.usage (v1), usage_usec of cpu.stat (v2).
func cpuUsage(t *testing.T, id string) int64 {
	t.Helper()
	if cgroupV2() {
		b, err := os.ReadFile(filepath.Join(sandboxCgroup("", testNamespace, id), "cpu.stat"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n * 1000
			}
		}
		t.Fatalf("cpu.stat of %s has no usage_usec", id)
	}
	b, err := os.ReadFile(filepath.Join(sandboxCgroup("cpuacct", testNamespace, id), "cpuacct.usage"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cgroupV2 reports whether the host mounts the unified hierarchy alone at
// /sys/fs/cgroup. A hybrid host (v1 controllers, unified at
// /sys/fs/cgroup/unified) counts as v1: runc puts the limits in v1 there.
func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// cgroupDirs returns the cgroup directories of sandbox id, where the test
// cgroup driver puts them (see sandboxCgroup): on v1 under each
// controller's hierarchy (we look at the ones our limits use), on v2
// under the unified root.
func cgroupDirs(id string) []string {
	if cgroupV2() {
		return []string{sandboxCgroup("", testNamespace, id)}
	}
	var out []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		out = append(out, sandboxCgroup(c, testNamespace, id))
	}
	return out
}

// afterCase checks the host after hostile runs: the server answers a
// normal run promptly; each run's sandbox container is gone and so is its
// cgroup, which was seen while a run lived (so the check looks in the
// right place). With no runs it checks only the normal run. What
// m.start's cleanup checks when the server exits (tasks, snapshots,
// shims, mounts, state directory) comes on top.
func afterCase(t *testing.T, s *mcpServer, runs ...hostileRun) {
	t.Helper()
	var ids []string
	sawCgroup := false
	for _, run := range runs {
		for _, id := range run.ids {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			if run.watch != nil && run.watch.sawCgroup(id) {
				sawCgroup = true
			}
		}
	}
	// A short program may be gone, cgroup and all, before its start event
	// reaches the watcher on a busy host (a sandbox created for the call;
	// a pool's was started ahead). Then the normal run lasts a second,
	// long enough to show where the cgroups are.
	src := "print(1)"
	var w *startWatch
	if len(ids) > 0 && !sawCgroup {
		w = s.watchCall(t)
		src = "import time\ntime.sleep(1)\nprint(1)"
	}

	// A hostile run is destroyed in the background, and a normal run must
	// not wait for that. 2 cores, maybe another suite at once: a fresh
	// python start takes well under a second; 10 s is a hung server.
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	start := time.Now()
	r := s.call(ctx, t, "run_python_code", code(src))
	if took, within := time.Since(start), time.Duration(scaled(10))*time.Second; r.text != "1\n" || r.isError || took > within {
		t.Errorf("normal run after the hostile one: %q (isError %v) in %s; want 1 within %s", r.text, r.isError, took.Round(time.Millisecond), within)
	}

	if len(ids) == 0 {
		return // a case that must not start a sandbox
	}
	if w != nil {
		waitFor(5*time.Second, func() bool { return len(w.exitedIDs()) > 0 })
		for _, id := range w.exitedIDs() {
			sawCgroup = sawCgroup || w.sawCgroup(id)
		}
	}
	if !sawCgroup {
		t.Errorf("no cgroup such as %v existed while its run started, not even a normal run's; the cgroup checks look in the wrong place", cgroupDirs(ids[0]))
	}
	if left := awaitGone(t, ids); len(left) > 0 {
		t.Errorf("30s after the run: got %v; want no container or cgroup of runs %v", left, ids)
	}
}

// awaitGone waits up to 30 s until nothing is left of the sandboxes ids
// (leftOf), and returns what still is.
func awaitGone(t *testing.T, ids []string) []string {
	t.Helper()
	var left []string
	waitFor(30*time.Second, func() bool {
		left = leftOf(t, ids)
		return len(left) == 0
	})
	return left
}

// hostileRuns gathers the runs of parallel subtests, for afterCase.
type hostileRuns struct {
	mu   sync.Mutex
	runs []hostileRun
}

func (h *hostileRuns) add(r hostileRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, r)
}

// leftOf lists what remains of the sandboxes ids: their containers and
// cgroup directories.
func leftOf(t *testing.T, ids []string) []string {
	t.Helper()
	var left []string
	for _, id := range ids {
		_, err := testClient.LoadContainer(testContext(t), id)
		if !errdefs.IsNotFound(err) {
			left = append(left, "container "+id)
		}
		for _, d := range cgroupDirs(id) {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				left = append(left, "cgroup "+d)
			}
		}
	}
	return left
}

// serverPID returns the pid of the one running code-sandbox-mcp binary this
// test run built: tests of a package run one at a time, and each mode of
// the isolation suite starts one server (startMCP or startMCPHTTP).
func serverPID(t *testing.T) int {
	t.Helper()
	bin := mcpBinary(t)
	var pids []int
	for pid, args := range processes() {
		if args[0] == bin {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("processes running %s: %v; want exactly one server", bin, pids)
	}
	return pids[0]
}

// procStatusKB reads a "Key:   N kB" field of /proc/PID/status.
func procStatusKB(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			var n int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &n); err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %v", pid, key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}

// pyProbe starts every Python probe: raw system calls by number, and a
// report that maps each attempt to its outcome, "ok" or an errno name,
// printed as one JSON line at the end by pyReport.
const pyProbe = `
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}

def ename(n):
    return errno.errorcode.get(n, str(n))

def sys_(nr, *args):
    ctypes.set_errno(0)
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == 0 and nr in (56,):  # a clone that succeeded: the child leaves
        os._exit(0)
    return 'ok' if r != -1 else ename(ctypes.get_errno())

def check(name, f):
    try:
        v = f()
        out[name] = 'ok' if v is None else str(v)
    except OSError as e:
        out[name] = ename(e.errno)
`

const pyReport = `
print(json.dumps(out), flush=True)
`

// probeReport decodes the last line of a probe's stdout as its report.
func probeReport(t *testing.T, r hostileRun) map[string]string {
	t.Helper()
	if r.isError || r.out.ExitCode != 0 {
		t.Fatalf("probe failed: %q %+v", r.text, r.out)
	}
	lines := strings.Split(strings.TrimSpace(r.out.Stdout), "\n")
	var got map[string]string
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("probe report %q: %v", r.out.Stdout, err)
	}
	return got
}

// assertReport checks every outcome of want, and that the report has
// nothing want does not mention.
func assertReport(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: not reported; want %s", k, w)
		} else if g != w {
			t.Errorf("%s: got %s; want %s", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: got %s; want no such attempt (add it to the test)", k, g)
		}
	}
}

// pyList renders strings as a Python list literal (JSON is one).
func pyList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// marker returns a string unique to this test run, to find processes by.
func marker(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	return "csm-marker-" + hex.EncodeToString(b)
}

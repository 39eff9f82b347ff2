package integration

// These tests drive the real code-sandbox-mcp binary over stdio, as an MCP
// client would, against the harness's containerd.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/internal/jsontest"
	"code-sandbox-mcp/internal/logtest"
	sandboxoci "code-sandbox-mcp/oci"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	// serverBuildFlags are go build's flags for the server: -race when
	// the suite itself is built with it (see race_test.go).
	serverBuildFlags []string
	// raceEnv is what serverEnv adds to the environment of a program
	// the tests start from the server's binary: GORACE, when the server
	// is built with -race (see race_test.go).
	raceEnv []string
)

// serverEnv is env, for a program the tests run from the server's binary
// (mcpBinary) with an environment of their own, with raceEnv added.
func serverEnv(env ...string) []string {
	return append(env, raceEnv...)
}

// mcpBinary builds the binary once per run, into the harness directory
// (or takes SANDBOX_PREBUILT's).
func mcpBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir := filepath.Join(testDir, "bin")
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		binPath = filepath.Join(dir, "code-sandbox-mcp")
		binErr = goBuild("..", "code-sandbox-mcp", binPath, "code-sandbox-mcp/cmd/code-sandbox-mcp", serverBuildFlags, nil)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var unpackOnce sync.Once

// unpackImages unpacks the test images once, before the first server
// starts, so that no test's time limit is spent on the first unpack (which
// a server stopped mid-way would still finish before it exits).
func unpackImages(t *testing.T) {
	t.Helper()
	unpackOnce.Do(func() {
		ctx := testContext(t)
		for _, ref := range testImages {
			img, err := testClient.GetImage(ctx, ref)
			if err != nil {
				t.Fatalf("image %s: %v", ref, err)
			}
			if err := img.Unpack(ctx, ""); err != nil {
				t.Fatalf("unpack %s: %v", ref, err)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once:
// the name the suite gives logtest.Buffer, for the servers' stderr and
// the executors' logs.
type syncBuffer = logtest.Buffer

// mcpServer is a running server with an MCP client on its stdio.
type mcpServer struct {
	c      *client.Client
	stderr *syncBuffer
	// watch saw every task start of the server's life, a pool's included.
	watch *startWatch
	// stateDir is the server's state directory, which holds each run's
	// program directory.
	stateDir string
	// cmd is the server's process, over stdio; nil over HTTP.
	cmd *osexec.Cmd
	// frames measures what the server sent on stdout; nil over HTTP.
	frames *lineMeter
}

// lineMeter reads through to r, and keeps the length of the longest line
// read: over stdio, the largest message the server sent.
type lineMeter struct {
	r       io.Reader
	mu      sync.Mutex
	current int64 // bytes of the line under way
	longest int64
}

func (m *lineMeter) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range p[:n] {
		if b == '\n' {
			m.longest = max(m.longest, m.current)
			m.current = 0
			continue
		}
		m.current++
	}
	m.longest = max(m.longest, m.current)
	return n, err
}

// Longest is the length of the longest line read so far, its newline
// left out.
func (m *lineMeter) Longest() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.longest
}

// toolResult is a call's result, decoded.
type toolResult struct {
	text    string
	isError bool
	out     struct {
		Stdout               string  `json:"stdout"`
		Stderr               string  `json:"stderr"`
		ExitCode             int     `json:"exit_code"`
		Signal               string  `json:"signal"`
		TimedOut             bool    `json:"timed_out"`
		OOMKilled            bool    `json:"oom_killed"`
		StdoutTruncatedBytes int64   `json:"stdout_truncated_bytes"`
		StderrTruncatedBytes int64   `json:"stderr_truncated_bytes"`
		DurationMs           int64   `json:"duration_ms"`
		TimeoutSeconds       float64 `json:"timeout_seconds"`
		Language             string  `json:"language"`
		Image                string  `json:"image"`
		Files                []struct {
			Path     string `json:"path"`
			Size     int64  `json:"size"`
			MIMEType string `json:"mime_type"`
			SHA256   string `json:"sha256"`
			URI      string `json:"uri"`
		} `json:"files"`
		FilesDropped int    `json:"files_dropped"`
		Hint         string `json:"hint"`
		// A run in a session adds these.
		SessionID          string `json:"session_id"`
		ExecutionCount     int    `json:"execution_count"`
		ExpiresAt          string `json:"expires_at"`
		SessionEnded       string `json:"session_ended"`
		BackgroundOOMKills int    `json:"background_oom_kills"`
		// A language with a network adds these.
		Network     []networkRecord `json:"network"`
		NetworkRest []networkTally  `json:"network_rest"`
	}
	hasOut bool
	// images, resources and links are the blocks after the text: the
	// output files (resources: the SVG and HTML of display()).
	images    []mcp.ImageContent
	resources []mcp.TextResourceContents
	links     []mcp.ResourceLink
}

func (s *mcpServer) call(ctx context.Context, t *testing.T, tool string, args any) toolResult {
	t.Helper()
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return decodeResult(t, res)
}

func decodeResult(t *testing.T, res *mcp.CallToolResult) toolResult {
	t.Helper()
	r, err := parseResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// parseResult decodes res, which must be one text, then the output files'
// images and links, with, if any, structured content of toolResult.out's
// fields only.
func parseResult(res *mcp.CallToolResult) (toolResult, error) {
	var r toolResult
	r.isError = res.IsError
	if len(res.Content) == 0 {
		return r, fmt.Errorf("no content; want one text")
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		return r, fmt.Errorf("content %T; want text", res.Content[0])
	}
	r.text = tc.Text
	for _, c := range res.Content[1:] {
		switch c := c.(type) {
		case mcp.ImageContent:
			if len(r.links) > 0 {
				return r, fmt.Errorf("an image after a link; want the images first")
			}
			r.images = append(r.images, c)
		case mcp.EmbeddedResource:
			tr, ok := c.Resource.(mcp.TextResourceContents)
			if !ok || len(r.links) > 0 {
				return r, fmt.Errorf("an embedded %T after %d links; want text resources, before the links", c.Resource, len(r.links))
			}
			r.resources = append(r.resources, tr)
		case mcp.ResourceLink:
			r.links = append(r.links, c)
		default:
			return r, fmt.Errorf("content %T after the text; want images, embedded resources and resource links only", c)
		}
	}
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return r, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r.out); err != nil {
			return r, fmt.Errorf("structuredContent %s: %v", data, err)
		}
		r.hasOut = true
	}
	return r, nil
}

func code(c string) map[string]any { return map[string]any{"code": c} }

func TestMCPToolsList(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		names[tool.Name] = tool
	}
	for _, want := range []string{"run_python_code", "run_js_code"} {
		tool, ok := names[want]
		if !ok {
			t.Errorf("tools %v: no %s", res.Tools, want)
			continue
		}
		in := tool.InputSchema
		if in.Type != "object" || len(in.Required) != 1 || in.Required[0] != "code" || in.AdditionalProperties != false {
			t.Errorf("%s input schema %+v; want an object requiring code, no other properties", want, in)
		}
		if p, _ := in.Properties["code"].(map[string]any); p["type"] != "string" {
			t.Errorf("%s code property %v; want a string", want, in.Properties["code"])
		}
		if tool.OutputSchema.Type != "object" && len(tool.RawOutputSchema) == 0 {
			t.Errorf("%s has no output schema", want)
		}
		if !strings.Contains(tool.Description, "no network") {
			t.Errorf("%s description %q does not tell the model about the sandbox", want, tool.Description)
		}
	}
	// Schemas are valid JSON objects and every array has items.
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, path := range jsontest.ArraysWithoutItems("tools/list", v) {
		t.Errorf("%s: array schema without items", path)
	}

	rr, err := s.c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "sandbox://environments"}})
	if err != nil {
		t.Fatal(err)
	}
	text := rr.Contents[0].(mcp.TextResourceContents).Text
	if !strings.Contains(text, pythonImage) || !strings.Contains(text, "run_js_code") {
		t.Errorf("sandbox://environments = %s; want the languages, images and tools", text)
	}
}

func TestMCPRuns(t *testing.T) {
	s := startMCP(t, serverSpec{ready: true})
	ctx := testContext(t)
	tests := []struct {
		name, tool, code string
		wantText         string // exact, if not empty
		wantInText       []string
		isError          bool
		exit             int
	}{
		{name: "python", tool: "run_python_code", code: "print(sum(range(10)))", wantText: "45\n"},
		{name: "javascript", tool: "run_js_code", code: "console.log([1,2,3].map(x => x * 2).join(','))", wantText: "2,4,6\n"},
		{name: "python stderr", tool: "run_python_code", code: "import sys\nprint('out')\nprint('careful', file=sys.stderr)",
			wantInText: []string{"out\n", "--- stderr ---\ncareful\n", "exit code 0"}},
		{name: "python exception", tool: "run_python_code", code: "x = 1 / 0",
			wantInText: []string{"--- stderr ---", "ZeroDivisionError", "exit code 1"}, isError: true, exit: 1},
		{name: "javascript exception", tool: "run_js_code", code: "null.x",
			wantInText: []string{"TypeError", "exit code 1"}, isError: true, exit: 1},
		{name: "javascript exit", tool: "run_js_code", code: "console.log('bye'); process.exit(3)",
			wantInText: []string{"bye\n", "exit code 3"}, isError: true, exit: 3},
		{name: "unicode", tool: "run_python_code", code: "print('héllo 世界 🎉')", wantText: "héllo 世界 🎉\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.call(ctx, t, tt.tool, code(tt.code))
			if tt.wantText != "" && r.text != tt.wantText {
				t.Errorf("text %q; want exactly %q", r.text, tt.wantText)
			}
			for _, w := range tt.wantInText {
				if !strings.Contains(r.text, w) {
					t.Errorf("text %q; want it to contain %q", r.text, w)
				}
			}
			if r.isError != tt.isError || !r.hasOut || r.out.ExitCode != tt.exit {
				t.Errorf("isError %v, structured %v %+v; want isError %v, exit %d", r.isError, r.hasOut, r.out, tt.isError, tt.exit)
			}
			lang := map[string]string{"run_python_code": "python", "run_js_code": "javascript"}[tt.tool]
			img := map[string]string{"python": pythonImage, "javascript": nodejsImage}[lang]
			if r.out.Language != lang || r.out.Image != img || r.out.TimeoutSeconds != 30 {
				t.Errorf("structured %+v; want language %s, image %s, timeout 30", r.out, lang, img)
			}
		})
	}
}

func TestMCPTimeout(t *testing.T) {
	s := startMCP(t, serverSpec{})
	start := time.Now()
	r := s.call(testContext(t), t, "run_python_code", map[string]any{
		"code":            "import time\nprint('started', flush=True)\ntime.sleep(60)",
		"timeout_seconds": 2,
	})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("call took %s; want about 2s", took)
	}
	if !r.isError || !r.out.TimedOut || r.out.TimeoutSeconds != 2 || !strings.Contains(r.text, "started\n") || !strings.Contains(r.text, "timed out after 2s") {
		t.Errorf("got %q %+v; want a timed-out error result with the output so far", r.text, r.out)
	}
}

// containerCount is the number of containers in the test namespace,
// those the server's pools keep ready included.
func containerCount(t *testing.T) int {
	t.Helper()
	cs, err := testClient.Containers(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// runningSandboxes returns the ids of the sandboxes whose program runs.
func runningSandboxes(t *testing.T) []string {
	t.Helper()
	ts, err := sandboxTasks(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return ts.running
}

// taskSet sorts the tasks of the test namespace by what they do.
type taskSet struct {
	running []string // the program runs
	// A pool's ready sandboxes: created and not started, or started ahead
	// and still in the stub (oci.StubScript), which the program replaces,
	// or warm: the interpreter waits in our driver, its standard input
	// still the server's pipe (a program's is /dev/null).
	created, stub, warm []string
	// warming are sandboxes started a moment ago whose program has not
	// yet started (runc's init, or the init without its child), and warm
	// drivers still starting or importing their preloads: neither ready
	// nor running a program.
	warming []string
}

func (s taskSet) waiting() int { return len(s.created) + len(s.stub) + len(s.warm) }

func sandboxTasks(ctx context.Context) (taskSet, error) {
	return tasksOf(ctx, testClient)
}

// tasksOf is sandboxTasks for client's daemon, in ctx's namespace.
func tasksOf(ctx context.Context, client *containerd.Client) (taskSet, error) {
	var set taskSet
	ts, err := client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return set, err
	}
	stub := strings.Join(sandboxoci.StubArgs(nil), "\x00") + "\x00"
	for _, task := range ts.Tasks {
		switch task.Status {
		case tasktypes.Status_CREATED:
			set.created = append(set.created, task.ID)
		case tasktypes.Status_RUNNING:
			pid, b, err := programOf(task.Pid)
			switch cmdline := string(b); {
			case err != nil:
				// Gone since the list: neither.
			case pid == 0:
				// The init has not yet forked the program (the stub
				// or the interpreter): started a moment ago, as below.
				set.warming = append(set.warming, task.ID)
			case len(b) == 0:
				// In the middle of an execve (the new image's arguments
				// are not yet set up) or a zombie: not yet known, so
				// neither; callers poll. Counted as running, a stub
				// caught exec'ing from runc init once passed for the
				// call's sandbox.
			case strings.HasPrefix(cmdline, stub):
				set.stub = append(set.stub, task.ID)
			case strings.HasPrefix(cmdline, "runc\x00init\x00"):
				// Started a moment ago: runc's init has not yet
				// exec'd the process (the stub or the program). Not
				// ready: the program is still to start (a warm
				// driver, to import its preloads), and counted as
				// ready, a paced call of make bench once ran beside
				// that start.
				set.warming = append(set.warming, task.ID)
			case isWarmDriver(pid, cmdline):
				if isWarmWaiting(pid) {
					set.warm = append(set.warm, task.ID)
				} else {
					set.warming = append(set.warming, task.ID)
				}
			default:
				set.running = append(set.running, task.ID)
			}
		}
	}
	return set, nil
}

// programOf returns the pid and command line of the program of the
// sandbox whose task's process is pid: the init's child (every sandbox
// runs its program under the init, oci.InitPath), or pid itself while
// runc's init has not yet exec'd the init. The pid is 0, with the init's
// command line, while the init has not yet forked the program.
func programOf(pid uint32) (uint32, []byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.HasPrefix(string(b), sandboxoci.InitPath+"\x00") {
		return pid, b, err
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, b, err
	}
	f := strings.Fields(string(children))
	if len(f) == 0 {
		return 0, b, nil
	}
	child, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		return 0, b, err
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
	return uint32(child), b, err
}

// isWarmDriver reports whether the process pid, with cmdline, is a warm
// driver that has not yet run its program: its standard input is still a
// pipe (a program's is /dev/null), and it is no session's driver (whose
// input is a pipe for good).
func isWarmDriver(pid uint32, cmdline string) bool {
	in, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid))
	return err == nil && strings.HasPrefix(in, "pipe:") && !strings.Contains(cmdline, sandboxoci.CodeDir+"/session.")
}

// isWarmWaiting reports whether the warm driver pid is ready: blocked
// reading its standard input (read(2) on descriptor 0, as
// /proc/PID/syscall shows it), not still starting or importing.
func isWarmWaiting(pid uint32) bool {
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	return err == nil && strings.HasPrefix(string(sc), "0 0x0 ")
}

// gone reports whether none of the containers ids exists any more.
func gone(t *testing.T, ids []string) bool {
	t.Helper()
	for _, id := range ids {
		if _, err := testClient.LoadContainer(testContext(t), id); !errdefs.IsNotFound(err) {
			return false
		}
	}
	return true
}

// waitFor polls cond every 50ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// sandboxTmpFile returns the host's path, through /proc/PID/root, of a
// file in some process's /tmp whose name matches pattern, or "" if there
// is none: how a test sees that a program in a sandbox got as far as
// creating it.
func sandboxTmpFile(pattern string) string {
	matches, _ := filepath.Glob("/proc/[0-9]*/root/tmp/" + pattern)
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

func TestMCPCancellationKillsTheRun(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() {
		_, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{
			Name: "run_python_code", Arguments: code("import time\ntime.sleep(60)"),
		}})
		done <- err
	}()
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) > 0 }) {
		t.Fatal("no sandbox ran within 30s")
	}
	// The program runs (its interpreter is the task's process), so the
	// server is inside the call: cancel now, with no sleep first.
	cancel()
	if err := <-done; err == nil {
		t.Error("cancelled call returned no error")
	}
	if !waitFor(15*time.Second, func() bool { return gone(t, running) }) {
		t.Errorf("sandbox %v is still there 15s after the call was cancelled", running)
	}
	// The server is still serving.
	if r := s.call(testContext(t), t, "run_python_code", code("print('after')")); r.text != "after\n" {
		t.Errorf("after the cancellation: %q; want after", r.text)
	}
}

func TestMCPConcurrentCalls(t *testing.T) {
	s := startMCP(t, serverSpec{})
	ctx := testContext(t)
	const n = 20
	var wg sync.WaitGroup
	results := make([]toolResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			tool, src := "run_python_code", fmt.Sprintf("import time\ntime.sleep(0.5)\nprint(%d)", i)
			if i%2 == 1 {
				tool, src = "run_js_code", fmt.Sprintf("setTimeout(() => console.log(%d), 500)", i)
			}
			res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: code(src)}})
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = decodeResult(t, res)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("call %d: %v", i, errs[i])
			continue
		}
		if want := fmt.Sprintf("%d\n", i); results[i].text != want || results[i].isError {
			t.Errorf("call %d: %q (isError %v); want %q", i, results[i].text, results[i].isError, want)
		}
	}
}

func TestMCPPassThroughEnv(t *testing.T) {
	s := startMCP(t, serverSpec{
		args: []string{"--pass-through-env", "API_KEY,SECRET_TOKEN,UNSET_ONE"},
		env:  []string{"API_KEY=value-of-api-key-1234", "SECRET_TOKEN=value-of-secret-5678", "NOT_LISTED=leak"},
	})
	r := s.call(testContext(t), t, "run_python_code", code(
		"import os\nfor k in ['API_KEY', 'SECRET_TOKEN', 'UNSET_ONE', 'NOT_LISTED']:\n    print(k, os.environ.get(k, '<absent>'))"))
	want := "API_KEY value-of-api-key-1234\nSECRET_TOKEN value-of-secret-5678\nUNSET_ONE <absent>\nNOT_LISTED <absent>\n"
	if r.text != want {
		t.Errorf("got %q; want %q", r.text, want)
	}
	for _, secret := range []string{"value-of-api-key-1234", "value-of-secret-5678"} {
		if strings.Contains(s.stderr.String(), secret) {
			t.Errorf("the server logged the value of a passed-through variable:\n%s", s.stderr)
		}
	}
}

func TestMCPContainerImageOverride(t *testing.T) {
	// The python image under a second name: the override must run that name.
	ctx := testContext(t)
	const alias = "localhost/code-sandbox-mcp/python:override-test"
	img, err := testClient.ImageService().Get(ctx, pythonImage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testClient.ImageService().Create(ctx, images.Image{Name: alias, Target: img.Target}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testClient.ImageService().Delete(context.WithoutCancel(ctx), alias) })

	s := startMCP(t, serverSpec{env: []string{"CONTAINER_IMAGE=" + alias, "CONTAINER_LANGUAGE=python"}})
	if r := s.call(ctx, t, "run_python_code", code("print('ok')")); r.text != "ok\n" || r.out.Image != alias {
		t.Errorf("python: %q image %q; want ok from %s", r.text, r.out.Image, alias)
	}
	if r := s.call(ctx, t, "run_js_code", code("console.log('ok')")); r.text != "ok\n" || r.out.Image != nodejsImage {
		t.Errorf("javascript: %q image %q; want ok from its own %s", r.text, r.out.Image, nodejsImage)
	}
}

func TestMCPContainerLanguageAloneIsAnError(t *testing.T) {
	cmd, _ := serverCommand(t, serverSpec{env: []string{"CONTAINER_LANGUAGE=python"}})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || stdout.Len() > 0 || !strings.Contains(stderr.String(), "CONTAINER_IMAGE") {
		t.Errorf("got %v, stdout %q, stderr %q; want a failure naming CONTAINER_IMAGE, nothing on stdout", err, stdout.String(), stderr.String())
	}
}

func TestMCPConfiguredLanguage(t *testing.T) {
	s := startMCP(t, serverSpec{config: fmt.Sprintf(`
[languages.bash]
image = %q
command = ["bash"]
file = "main.sh"
tool = "run_bash_code"
description = "Run a bash script."
`, pythonImage)})
	ctx := testContext(t)
	tools, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		// A configured language has no session driver unless it names
		// one: its tool takes no session_id.
		if _, ok := tool.InputSchema.Properties["session_id"]; strings.HasPrefix(tool.Name, "run_") && ok != (tool.Name != "run_bash_code") {
			t.Errorf("tool %s: session_id declared %v", tool.Name, ok)
		}
	}
	slices.Sort(names)
	if want := []string{"close_session", "create_session", "list_sessions", "run_bash_code", "run_js_code", "run_python_code"}; !slices.Equal(names, want) {
		t.Errorf("tools %v; want %v", names, want)
	}
	r := s.call(ctx, t, "run_bash_code", code("echo $((6 * 7)) from $0"))
	if !strings.HasPrefix(r.text, "42 from ") || r.isError || r.out.Language != "bash" {
		t.Errorf("got %q %+v; want 42 from bash", r.text, r.out)
	}
}

func TestMCPMissingImageIsActionable(t *testing.T) {
	const missing = "localhost/code-sandbox-mcp/missing:none"
	s := startMCP(t, serverSpec{sandbox: `pull = "never"`, config: fmt.Sprintf("[languages.python]\nimage = %q\n", missing)})
	r := s.call(testContext(t), t, "run_python_code", code("print(1)"))
	if !r.isError || !strings.Contains(r.text, missing) || !strings.Contains(r.text, "images import") {
		t.Errorf("got %q (isError %v); want an error naming %s and how to import it", r.text, r.isError, missing)
	}
	// The other language is unaffected.
	if r := s.call(testContext(t), t, "run_js_code", code("console.log(1)")); r.text != "1\n" {
		t.Errorf("javascript: %q; want 1", r.text)
	}
}

// rawServer speaks JSON-RPC lines to the binary without an MCP client.
type rawServer struct {
	cmd    *osexec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	first  chan byte // the first byte on stdout
	stderr *syncBuffer
}

func (r *rawServer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message on stdout, which must be a JSON-RPC 2.0
// object.
func (r *rawServer) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			t.Fatalf("stdout closed\nstderr:\n%s", r.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("stdout line %q is not a JSON-RPC 2.0 message (%v)", line, err)
		}
		return m
	case <-time.After(60 * time.Second):
		t.Fatalf("no message on stdout within 60s\nstderr:\n%s", r.stderr)
	}
	return nil
}

func TestMCPStdoutIsProtocolOnlyAndSurvivesBadInput(t *testing.T) {
	r := startRaw(t)
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	select {
	case b := <-r.first:
		if b != '{' {
			t.Fatalf("first byte on stdout %q; want the start of a JSON-RPC response", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no response to initialize within 30s")
	}
	if m := r.next(t); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("first message %v; want the initialize response", m)
	}
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// One message at a time, so responses come in order.
	r.send(t, `this is not JSON`)
	if m := r.next(t); m["error"] == nil || m["error"].(map[string]any)["code"] != -32700.0 {
		t.Errorf("malformed line: %v; want a parse error", m)
	}
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":["print(1)"]}}}`)
	if m := r.next(t); m["id"] != 2.0 || m["result"].(map[string]any)["isError"] != true {
		t.Errorf("code as an array: %v; want an error result", m)
	}
	r.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"print(1)","timeout_seconds":"soon"}}}`)
	if m := r.next(t); m["id"] != 3.0 || m["result"].(map[string]any)["isError"] != true {
		t.Errorf("timeout_seconds as a string: %v; want an error result", m)
	}
	r.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if m := r.next(t); m["id"] != 4.0 || m["error"] == nil {
		t.Errorf("unknown tool: %v; want a JSON-RPC error", m)
	}
	r.send(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"print(6 * 7)"}}}`)
	m := r.next(t)
	content, _ := m["result"].(map[string]any)["content"].([]any)
	if m["id"] != 5.0 || len(content) != 1 || content[0].(map[string]any)["text"] != "42\n" {
		t.Errorf("after the bad input: %v; want 42", m)
	}
}

func TestMCPSIGTERMEndsRunsAndExitsCleanly(t *testing.T) {
	r := startRaw(t)
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.next(t)
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"code":"import time\ntime.sleep(60)"}}}`)
	var running []string
	if !waitFor(30*time.Second, func() bool { running = runningSandboxes(t); return len(running) > 0 }) {
		t.Fatal("no sandbox ran within 30s")
	}
	start := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The cleanup waits for a zero exit and checks for leftovers.
	if !waitFor(20*time.Second, func() bool { return gone(t, running) && containerCount(t) == 0 }) {
		t.Errorf("sandboxes are still there 20s after SIGTERM")
	}
	t.Logf("sandbox gone %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

func TestRunSubcommand(t *testing.T) {
	cmd, _ := serverCommand(t, serverSpec{})
	cmd.Args = append(cmd.Args, "run", "--language", "python", "--code", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*osexec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 3 || stdout.String() != "out\n" || !strings.Contains(stderr.String(), "err\n") {
		t.Errorf("exit %d (%v), stdout %q, stderr %q; want 3, out, err", code, err, stdout.String(), stderr.String())
	}
}

func TestDoctor(t *testing.T) {
	// Hello world runs with the default timeout, scaled under emulation
	// (SANDBOX_TEST_TIME_SCALE) as every other deadline is: what is
	// checked here is the doctor's report, not how fast a sandbox is made.
	// In CI's cgroup v2 VM (runc on 2.x, systemd driver) a python sandbox
	// once took over the default's 30 s to be made; it takes 1 to 3 s
	// there.
	var spec serverSpec
	if testTimeScale > 1 {
		def := int(time.Duration(config.Default().Limits.Timeout) / time.Second)
		spec.config = fmt.Sprintf("[limits]\ntimeout = \"%ds\"\n", scaled(def))
	}
	cmd, _ := serverCommand(t, spec)
	cmd.Args = append(cmd.Args, "doctor")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	for _, want := range []string{"OK    sandbox uids: " + testUIDs.String(), "OK    containerd socket", "OK    containerd version", "OK    image python", "OK    image javascript", "OK    hello world python", "OK    hello world javascript"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output has no %q:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
	if err != nil && !strings.Contains(out, "FAIL") {
		t.Errorf("doctor failed (%v) without a FAIL line:\n%s", err, out)
	}
	t.Logf("doctor:\n%s", out)
}

// run --file puts a local file at its workspace path, and --out saves what
// the program wrote, at its path, but not the input it left as it was.
func TestRunSubcommandFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,1\nb,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	cmd, _ := serverCommand(t, serverSpec{})
	cmd.Dir = dir
	cmd.Args = append(cmd.Args, "run", "--language", "python", "--file", "data.csv:in/data.csv", "--out", out, "--code",
		"rows = open('in/data.csv').read().split()\nopen('out.txt', 'w').write(str(sum(int(r.split(',')[1]) for r in rows)))\nprint('done')")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "done\n" {
		t.Fatalf("exit %v, stdout %q, stderr %q; want 0 and done", err, stdout.String(), stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(out, "out.txt")); err != nil || string(b) != "3" {
		t.Errorf("out.txt holds %q (%v); want 3", b, err)
	}
	if _, err := os.Stat(filepath.Join(out, "in")); !os.IsNotExist(err) {
		t.Errorf("the input left as it was was saved (%v); want only out.txt", err)
	}
	if !strings.Contains(stderr.String(), "saved 1 output file to "+out) {
		t.Errorf("stderr %q; want the summary line", stderr.String())
	}
}

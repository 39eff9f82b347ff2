package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/hint"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// runOutput is a tool result's structuredContent; outputSchema declares it.
type runOutput struct {
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
	// Files is never nil, so that it is sent as [] when there are none.
	Files        []fileOutput `json:"files"`
	FilesDropped int          `json:"files_dropped"`
	// Hint is the one line of advice on a failure the program cannot fix
	// itself (see hint.For); "" and left out if none.
	Hint string `json:"hint,omitempty"`
	// Network lists the connections through the sandbox's proxy; left
	// out for a language with no network.
	Network []Connection `json:"network,omitzero"`
	// NetworkRest sums the connections past the first max_records that
	// Network lists, per host and verdict; left out if there were none.
	NetworkRest []exec.NetworkTally `json:"network_rest,omitempty"`
	// sessionRun is there for a run in a session only.
	*sessionRun
}

// outputSchema is the JSON Schema of runOutput.
const outputSchema = `{
  "type": "object",
  "properties": {
    "stdout": {"type": "string", "description": "The program's standard output (head and tail kept if it was too long)."},
    "stderr": {"type": "string", "description": "The program's standard error (head and tail kept if it was too long)."},
    "exit_code": {"type": "integer", "description": "The program's exit status; 128+N if signal N killed it."},
    "signal": {"type": "string", "description": "The signal that killed the program, such as SIGKILL; empty if none."},
    "timed_out": {"type": "boolean", "description": "The run hit its time limit and was killed."},
    "oom_killed": {"type": "boolean", "description": "The run hit its memory limit and was killed."},
    "stdout_truncated_bytes": {"type": "integer", "minimum": 0, "description": "Bytes dropped from the middle of stdout."},
    "stderr_truncated_bytes": {"type": "integer", "minimum": 0, "description": "Bytes dropped from the middle of stderr."},
    "duration_ms": {"type": "integer", "minimum": 0, "description": "Wall-clock time of the run."},
    "timeout_seconds": {"type": "number", "description": "The time limit the run had."},
    "language": {"type": "string"},
    "image": {"type": "string", "description": "The container image the program ran in."},
    "files": {
      "type": "array",
      "description": "Every file the program created or changed under /workspace, in path order, within the caps.",
      "items": {
        "type": "object",
        "properties": {
          "path": {"type": "string", "description": "Relative to /workspace."},
          "size": {"type": "integer", "minimum": 0, "description": "In bytes."},
          "mime_type": {"type": "string"},
          "sha256": {"type": "string", "description": "Of the content, in hex."},
          "uri": {"type": "string", "description": "Where resources/read gets the file while it is kept; empty if the run's files were not kept."}
        },
        "required": ["path", "size", "mime_type", "sha256", "uri"],
        "additionalProperties": false
      }
    },
    "files_dropped": {"type": "integer", "minimum": 0, "description": "Files left out of files: past max_files_out or files_out_bytes, or with a name that is not printable UTF-8."},
    "network": {
      "type": "array",
      "description": "Present only for a language with a network: the connections the program opened through the sandbox's proxy, allowed or refused, in the order they ended; the first max_records of them (100 by default), the rest summed in network_rest.",
      "items": {
        "type": "object",
        "properties": {
          "host": {"type": "string", "description": "The host the program asked for."},
          "port": {"type": "integer"},
          "method": {"type": "string", "description": "CONNECT (HTTPS), or the plain HTTP request's method."},
          "allowed": {"type": "boolean", "description": "The proxy connected it upstream."},
          "reason": {"type": "string", "description": "Why it was refused, or how it ended early; empty if it ended normally."},
          "secret_header": {"type": "string", "description": "The header the proxy added (its name only); the program never sees its value."},
          "bytes_up": {"type": "integer", "minimum": 0},
          "bytes_down": {"type": "integer", "minimum": 0},
          "duration_ms": {"type": "integer", "minimum": 0}
        },
        "required": ["host", "port", "method", "allowed", "bytes_up", "bytes_down", "duration_ms"],
        "additionalProperties": false
      }
    },
    "network_rest": {
      "type": "array",
      "description": "Present only when the run opened more connections than network lists: those past them, summed per host and verdict in the order each was first seen; past as many hosts as network lists, the other hosts are summed as \"(other hosts)\".",
      "items": {
        "type": "object",
        "properties": {
          "host": {"type": "string", "description": "The host the program asked for; empty for requests the proxy could not read."},
          "allowed": {"type": "boolean", "description": "The proxy connected them upstream."},
          "connections": {"type": "integer", "minimum": 1},
          "bytes_up": {"type": "integer", "minimum": 0},
          "bytes_down": {"type": "integer", "minimum": 0},
          "reason": {"type": "string", "description": "Why the first of them was refused, or how it ended early; empty if none was."}
        },
        "required": ["host", "allowed", "connections", "bytes_up", "bytes_down"],
        "additionalProperties": false
      }
    },
    "hint": {"type": "string", "description": "Present only when the program failed on an uncaught error it cannot fix itself: a module the sandbox's image does not hold, or a use of the network the sandbox does not have. One line saying what to do instead; also the text's last line."}
  },
  "required": ["stdout", "stderr", "exit_code", "signal", "timed_out", "oom_killed", "stdout_truncated_bytes", "stderr_truncated_bytes", "duration_ms", "timeout_seconds", "language", "image", "files", "files_dropped"],
  "additionalProperties": false
}`

// newTool describes one language's tool: the configured description with
// what every run gets appended, so that what the model reads follows the
// config and the spec; what the image holds is added at each tools/list
// (see inventories.describeTools). keep is how long output files are
// kept; sess says whether the tool takes a session_id, tasks whether it
// may run as a task (whose timeout_seconds may go up to max_task_timeout,
// which the schema then allows, the description saying which cap is
// whose).
func newTool(l config.Language, sb sandbox, keep time.Duration, sess *sessions, tasks bool) mcp.Tool {
	name, lim := l.Name, l.Limits
	maxSec := int(lim.MaxTimeout / time.Second)
	timeoutText := fmt.Sprintf("Wall-clock limit in seconds; default %d, at most %d.", int(lim.Timeout/time.Second), maxSec)
	if tasks {
		maxSec = int(lim.RunCap() / time.Second)
		timeoutText = fmt.Sprintf("Wall-clock limit in seconds; default %d, at most %d for a plain call, and at most %d for a call run as a task.",
			int(lim.Timeout/time.Second), int(lim.MaxTimeout/time.Second), maxSec)
	}
	desc := toolDescription(l, sb, keep, sess, tasks, nil)
	schema := json.RawMessage(outputSchema)
	var session []mcp.ToolOption
	if sess.offers(name) {
		schema = sessionOutputSchema
		session = append(session, mcp.WithString("session_id",
			mcp.MinLength(1),
			mcp.Description("Run the code as the next cell of this session (see "+createSessionTool+"), whose state persists; leave it out for a fresh sandbox."),
		))
	}
	opts := []mcp.ToolOption{
		mcp.WithDescription(desc),
		mcp.WithString("code",
			mcp.Required(),
			mcp.MinLength(1),
			mcp.Description(fmt.Sprintf("The complete %s program to run, as source text (at most %s).", name, config.Size(lim.CodeBytes))),
		),
		mcp.WithInteger("timeout_seconds",
			mcp.Min(1),
			mcp.Max(maxSec),
			mcp.Description(timeoutText),
		),
		mcp.WithArray("files",
			mcp.MaxItems(lim.MaxFilesIn),
			mcp.Items(filesItemSchema),
			mcp.Description(fmt.Sprintf("Files to write into %s, the program's working directory, before it starts: at most %d, %s in all once decoded.",
				oci.WorkspaceDir, lim.MaxFilesIn, config.Size(lim.FilesInBytes))),
		),
	}
	opts = append(opts, session...)
	opts = append(opts,
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(schema),
		mcp.WithTitleAnnotation("Run "+name+" code in a sandbox"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		taskSupport(tasks),
	)
	return mcp.NewTool(l.Tool, opts...)
}

// toolDescription is the description of l's tool: the configured one,
// what its image holds as inv tells (nil: not known, and nothing said of
// its packages), its limits, its files and its sessions.
func toolDescription(l config.Language, sb sandbox, keep time.Duration, sess *sessions, tasks bool, inv *inventory.Inventory) string {
	desc := strings.TrimSpace(l.Description+" "+imageSentence(l, sb, inv)) + "\n\n" + limitsSentence(l.Limits, sb, tasks) + " " + filesSentence(l, keep)
	if sess.offers(l.Name) {
		desc += " " + sess.sessionSentence(l.Name)
	}
	return desc
}

// taskSupport declares that a tool may run as an MCP task, if tasks:
// optional, so a plain call works as ever.
func taskSupport(tasks bool) mcp.ToolOption {
	if !tasks {
		return func(*mcp.Tool) {}
	}
	return mcp.WithTaskSupport(mcp.TaskSupportOptional)
}

// limitsSentence tells a model what every run of a language gets: the
// network, files, memory, CPU and processes as its spec enforces them (sb),
// the time and output limits as the executor enforces them (l); with
// tasks, the longer timeout a call run as a task may ask for.
func limitsSentence(l config.Limits, sb sandbox, tasks bool) string {
	timeouts := fmt.Sprintf("timeout_seconds up to %d", int(l.MaxTimeout/time.Second))
	if tasks {
		timeouts = fmt.Sprintf("timeout_seconds up to %d for a plain call; up to %d when the client runs the call as an MCP task, polling tasks/get and tasks/result instead of waiting on the call",
			int(l.MaxTimeout/time.Second), int(l.RunCap()/time.Second))
	}
	return fmt.Sprintf("Each call runs in a brand-new, isolated container that is deleted afterwards: %s, no files from the host or from earlier calls, "+
		"%s. Limits: %s memory, %s, %d processes, %s per run by default (%s). "+
		"stdout and stderr are each cut to their first and last %s past %s.",
		sb.networkPhrase(), sb.filesPhrase(), config.Size(sb.MemoryBytes), sb.cpusPhrase(), sb.Pids, l.Timeout, timeouts,
		config.Size(l.OutputBytes/2), config.Size(l.OutputBytes))
}

// filesSentence tells a model where a language's program runs, which
// files it gets in and which come back, and how; keep is how long output
// files are kept.
func filesSentence(l config.Language, keep time.Duration) string {
	lim := l.Limits
	s := "Files: the program runs in " + oci.WorkspaceDir
	if lim.MaxFilesIn > 0 && lim.FilesInBytes > 0 {
		s += fmt.Sprintf("; the files argument puts up to %d files there first (%s in all)", lim.MaxFilesIn, config.Size(lim.FilesInBytes))
	}
	if lim.MaxFilesOut == 0 || lim.FilesOutBytes == 0 {
		return s + "; no files come back."
	}
	s += fmt.Sprintf("; every file it creates or changes there comes back as a link readable for %s (up to %d files, %s in all)",
		keep, lim.MaxFilesOut, config.Size(lim.FilesOutBytes))
	if lim.MaxImages > 0 && lim.ImageBytes > 0 {
		s += fmt.Sprintf(", PNG, JPEG, GIF and WebP images also inline (up to %d, %s each)", lim.MaxImages, config.Size(lim.ImageBytes))
	}
	if l.Figures {
		s += "; so do the matplotlib figures it shows or leaves open, saved as figures/figure-N.png. " +
			"display(obj) shows obj where it is called, as in a notebook: a pandas DataFrame or Series (or anything with _repr_markdown_) as a Markdown table in the output, " +
			"a figure or _repr_png_ as an image, _repr_svg_ and _repr_html_ as embedded resources, anything else as its repr"
	}
	return s + "."
}

// toolArgs are a call's validated arguments.
type toolArgs struct {
	code    string
	timeout time.Duration
	files   []exec.File
	// session is the session to run in; "" for a fresh sandbox.
	session string
}

// parseArgs validates a call's arguments, with messages a model can act
// on. raw is what the client sent: JSON, or an already decoded map. A
// session_id is taken if sess offers sessions of lang. timeout_seconds may
// go up to max_timeout, or for a call run as a task (task) up to
// max_task_timeout; tasks says whether the server offers tasks, which a
// plain call asking for more is told.
func parseArgs(raw any, lang string, lim config.Limits, sess *sessions, task, tasks bool) (toolArgs, error) {
	var data []byte
	switch v := raw.(type) {
	case nil:
		return toolArgs{}, errors.New(`missing arguments: send {"code": "<the program>"}`)
	case json.RawMessage:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return toolArgs{}, fmt.Errorf("arguments: %v", err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return toolArgs{}, errors.New(`arguments must be a JSON object: {"code": "<the program>"}, optionally with "timeout_seconds"`)
	}
	for k := range m {
		switch {
		case k == "session_id" && !sess.offers(lang):
			return toolArgs{}, errors.New(sess.refusal(lang))
		case k == "session_id" || k == "code" || k == "timeout_seconds" || k == "files":
		case sess.offers(lang):
			return toolArgs{}, fmt.Errorf("unknown argument %q: this tool takes \"code\" (string) and optionally \"timeout_seconds\" (integer), \"files\" (array) and \"session_id\" (string)", k)
		default:
			return toolArgs{}, fmt.Errorf("unknown argument %q: this tool takes \"code\" (string) and optionally \"timeout_seconds\" (integer) and \"files\" (array)", k)
		}
	}
	var a toolArgs
	rc, ok := m["code"]
	if !ok {
		return a, fmt.Errorf(`missing argument "code": the %s program to run, as a string`, lang)
	}
	if err := json.Unmarshal(rc, &a.code); err != nil || isNull(rc) {
		return a, fmt.Errorf(`argument "code" must be a string holding the %s program, not %s`, lang, jsonKind(rc))
	}
	if strings.TrimSpace(a.code) == "" {
		return a, errors.New(`argument "code" is empty: send the program's source`)
	}
	if n := len(a.code); int64(n) > lim.CodeBytes {
		return a, fmt.Errorf(`argument "code" is %d bytes; the limit is %s (%d bytes): send a shorter program`, n, config.Size(lim.CodeBytes), lim.CodeBytes)
	}
	maxSec := int64(lim.MaxTimeout / time.Second) // a count of seconds, as the argument is
	if task {
		maxSec = int64(lim.RunCap() / time.Second)
	}
	if rt, ok := m["timeout_seconds"]; ok {
		// null is not a number: the schema says integer. Leaving the
		// argument out is how a call asks for the default.
		var f float64
		if err := json.Unmarshal(rt, &f); err != nil || isNull(rt) {
			return a, fmt.Errorf(`argument "timeout_seconds" must be a whole number of seconds from 1 to %d, not %s; leave it out for the default of %d`, maxSec, jsonKind(rt), int64(lim.Timeout/time.Second))
		}
		if taskSec := int64(lim.RunCap() / time.Second); !task && tasks && f == math.Trunc(f) && f > float64(maxSec) && f <= float64(taskSec) {
			return a, fmt.Errorf(`argument "timeout_seconds" is %v; a plain call may ask for 1 to %d seconds (max_timeout): ask for %d or less, or run the call as an MCP task (send "task" with tools/call, then poll tasks/get and tasks/result), which may ask for up to %d (max_task_timeout)`,
				f, maxSec, maxSec, taskSec)
		}
		if f != math.Trunc(f) || f < 1 || f > float64(maxSec) {
			return a, fmt.Errorf(`argument "timeout_seconds" is %v; want a whole number of seconds from 1 to %d`, f, maxSec)
		}
		a.timeout = time.Duration(f) * time.Second
	}
	if rf, ok := m["files"]; ok {
		files, err := parseFiles(rf, lim)
		if err != nil {
			return a, err
		}
		a.files = files
	}
	if rs, ok := m["session_id"]; ok {
		id, err := parseSessionID(rs)
		if err != nil {
			return a, err
		}
		a.session = id
	}
	return a, nil
}

// jsonKind names the JSON type of a value, for error messages.
func jsonKind(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid JSON"
	}
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// toolHandler adapts one language's tool to the executor: validate the
// arguments, run, keep the output files in store, build the result. Every
// failure is a result with isError set, never a Go error, so the model
// reads it. The run's output is streamed to a client that asked for
// progress or info logs (see callStream), o.Secrets redacted, and the
// last of it is sent before the result, which adds a hint on a failure
// the program cannot fix itself (see hint.For).
func toolHandler(l config.Language, run RunFunc, store *fileStore, o Options, sess *sessions) server.ToolHandlerFunc {
	lang, lim := l.Name, l.Limits
	red := newRedactor(o.Secrets)
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tk := taskOf(ctx)
		// A 2026-07-28 client has no tasks here: a refusal does not point it
		// to them.
		a, err := parseArgs(req.GetRawArguments(), lang, lim, sess, tk != nil, o.Tasks.offered() && !server.IsModernRequest(ctx))
		if err != nil {
			return mcp.NewToolResultError(err.Error() + ". Nothing was run."), nil
		}
		r := exec.Request{Language: lang, Code: a.code, Timeout: a.timeout, Files: a.files}
		if tk != nil {
			r.Output = tk.output // the output so far, for tasks/get
		}
		if a.session != "" {
			r.Session, r.Owner = a.session, sess.owner(ctx)
		}
		out := callStream(ctx, req, red)
		switch {
		case out != nil && tk != nil:
			r.Output = func(stream string, p []byte) {
				tk.output(stream, p)
				out.Output(stream, p)
			}
		case out != nil:
			r.Output = out.Output
		}
		res, err := run(ctx, r)
		if out != nil {
			out.Close()
		}
		if err != nil {
			if a.session != "" && ctx.Err() != nil {
				return mcp.NewToolResultError(fmt.Sprintf("The call was cancelled before the cell finished, so there is no result; the cell is being interrupted, and session %s lives on if its interpreter comes back (%s tells).",
					a.session, listSessionsTool)), nil
			}
			return mcp.NewToolResultError(sandboxErrorText(ctx, lang, err, o, sess)), nil
		}
		var modules []string
		if o.Modules != nil {
			modules = o.Modules(lang)
		}
		return toolResult(res, lim, store.keepFiles(store.owner(ctx), res.Files), hint.For(res, l, modules)), nil
	}
}

// sandboxErrorText explains why the sandbox could not run a program: what
// is wrong, whether it is the code's fault, whether retrying helps, and
// the one thing to do. The kind of failure is the errdefs class of err,
// once errors about sessions (of sess) are told apart.
func sandboxErrorText(ctx context.Context, lang string, err error, o Options, sess *sessions) string {
	ask := func(what, command string) string {
		if command == "" {
			return "ask the user to " + what + "."
		}
		return fmt.Sprintf("ask the user to %s: `%s`.", what, command)
	}
	if ctx.Err() == nil {
		var r *Refusal
		if errors.As(err, &r) {
			return r.Text
		}
		if text := sess.sessionErrorText(lang, err); text != "" {
			return text
		}
	}
	switch {
	case ctx.Err() != nil:
		return "The call was cancelled before the program finished, so there is no result; its sandbox is being removed."
	case errdefs.IsInvalidArgument(err):
		return fmt.Sprintf("Invalid request: %v. Nothing was run: fix the arguments and call again.", err)
	case errors.Is(err, exec.ErrNotAnswering):
		return fmt.Sprintf("containerd, which runs the sandboxes, did not answer (it may be restarting), so there is no result: %v. This is not a problem of your code: retry in a moment; if it persists, %s",
			err, ask("diagnose it", o.DoctorHint))
	case errdefs.IsNotFound(err):
		return fmt.Sprintf("The %s sandbox image is missing, so nothing was run: %v. This is a set-up problem of the server, not of your code, and retrying will not help until the image is there: %s",
			lang, err, ask("import it", o.ImportHint))
	case errors.Is(err, exec.ErrNoUID):
		return fmt.Sprintf("Every sandbox is in use, so nothing was run: %v. This is not a problem of your code: retry once other calls have ended; if it persists, %s",
			err, "ask the user to widen [limits] uid_range.")
	case errdefs.IsResourceExhausted(err):
		return fmt.Sprintf("The server has no room for the %s program, so nothing was run: %v. A shorter program may fit; otherwise %s",
			lang, err, "ask the user to free space where the server keeps its run directories (sandbox.state_dir).")
	case errdefs.IsFailedPrecondition(err):
		return fmt.Sprintf("The server's %s sandbox is set up wrongly, so the program could not run: %v. This is a problem of the server's set-up, not of your code, and retrying will not help until it is fixed: %s",
			lang, err, ask("diagnose it", o.DoctorHint))
	case errdefs.IsUnavailable(err), errdefs.IsPermissionDenied(err):
		return fmt.Sprintf("The sandbox runtime cannot be used, so the program could not run: %v. This is a set-up problem of the server, not of your code, and retrying will not help until it is fixed: %s",
			err, ask("diagnose it", o.DoctorHint))
	default:
		return fmt.Sprintf("The sandbox failed to run the program: %v. This is not a problem of your code; retrying may help.", err)
	}
}

// toolResult builds a finished run's result: text a model reads well,
// then the output files' images and links (see reportFiles), and the same
// facts as structuredContent. kept is how the files were kept; hint is
// the line of advice on the run's failure, if not "".
func toolResult(r *exec.Result, lim config.Limits, kept retention, hint string) *mcp.CallToolResult {
	files := reportFiles(r, lim, kept)
	out := runOutput{
		Stdout:               strings.ToValidUTF8(string(r.Stdout), "\uFFFD"),
		Stderr:               strings.ToValidUTF8(string(r.Stderr), "\uFFFD"),
		ExitCode:             r.ExitCode,
		Signal:               r.Signal,
		TimedOut:             r.TimedOut,
		OOMKilled:            r.OOMKilled,
		StdoutTruncatedBytes: r.StdoutDropped,
		StderrTruncatedBytes: r.StderrDropped,
		DurationMs:           r.Duration.Milliseconds(),
		TimeoutSeconds:       r.Timeout.Seconds(),
		Language:             r.Language,
		Image:                r.Image,
		Files:                files.files,
		FilesDropped:         r.FilesDropped,
		Hint:                 hint,
		Network:              Connections(r.Network),
		NetworkRest:          r.NetworkRest,
		sessionRun:           newSessionRun(r),
	}
	res := mcp.NewToolResultStructured(out, resultText(r, lim, files.line, hint))
	res.Content = append(res.Content, files.content...)
	res.IsError = r.Failed()
	return res
}

// resultText is what the model reads: on a clean run with nothing on
// stderr exactly the program's stdout; otherwise stdout, then stderr
// under a label, then one status line. Next come, each on a line of its
// own where it applies: in a session, the processes the kernel killed for
// their memory while no cell ran; the connections the sandbox's proxy
// refused; filesLine, if not ""; for a run whose
// session ended, a line saying so; and hint, if not "".
func resultText(r *exec.Result, lim config.Limits, filesLine, hint string) string {
	text := outputText(r, lim, filesLine == "")
	for _, line := range []string{backgroundOOMLine(r, lim), networkLine(r), filesLine, sessionLine(r), hint} {
		switch {
		case line == "":
		case text == "" || strings.HasSuffix(text, "\n"):
			text += line
		default:
			text += "\n" + line
		}
	}
	return text
}

// outputText is resultText without the files line. A clean run without
// output gives "" unless nudge, then a hint to print.
func outputText(r *exec.Result, lim config.Limits, nudge bool) string {
	stdout := withMarker(r.Stdout, r.StdoutDropped, int(lim.OutputBytes)/2)
	stderr := withMarker(r.Stderr, r.StderrDropped, int(lim.OutputBytes)/2)
	clean := !r.Failed() && len(r.Stderr) == 0 && r.StdoutDropped == 0
	if clean {
		if len(r.Stdout) == 0 && nudge && r.Session != nil {
			if r.Session.Ended != "" {
				return "(The cell finished without output.)"
			}
			return fmt.Sprintf("(The cell finished without output; session %s keeps its state.)", r.Session.ID)
		}
		if len(r.Stdout) == 0 && nudge {
			return "(The program finished without output. Print the results you need to stdout.)"
		}
		return stdout
	}
	var b strings.Builder
	b.WriteString(stdout)
	if len(r.Stderr) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(stdout, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("--- stderr ---\n")
		b.WriteString(stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("--- " + StatusLine(r, lim) + " ---")
	return b.String()
}

// StatusLine sums up how a run ended, in one line, such as "exit code 1;
// 0.12s". lim are the run's language's limits.
func StatusLine(r *exec.Result, lim config.Limits) string {
	var parts []string
	switch {
	case r.TimedOut && r.Session != nil && r.Session.Interrupted && r.Session.Ended == "":
		parts = append(parts, fmt.Sprintf("timed out after %s and was interrupted; the session and its state remain", r.Timeout.Round(time.Millisecond)))
	case r.TimedOut:
		parts = append(parts, fmt.Sprintf("timed out after %s and was killed", r.Timeout.Round(time.Millisecond)))
	case r.OOMKilled:
		parts = append(parts, fmt.Sprintf("killed: out of memory (limit %s)", config.Size(lim.MemoryBytes)))
	case r.Signal != "":
		parts = append(parts, "killed by "+r.Signal)
	default:
		parts = append(parts, exitCodeText(r.ExitCode, r.SignalUnknown))
	}
	if r.OOMKilled && r.TimedOut {
		parts = append(parts, fmt.Sprintf("out of memory (limit %s)", config.Size(lim.MemoryBytes)))
	}
	if r.StdoutDropped > 0 {
		parts = append(parts, fmt.Sprintf("stdout truncated: %d bytes dropped from the middle", r.StdoutDropped))
	}
	if r.StderrDropped > 0 {
		parts = append(parts, fmt.Sprintf("stderr truncated: %d bytes dropped from the middle", r.StderrDropped))
	}
	parts = append(parts, fmt.Sprintf("%.2fs", r.Duration.Seconds()))
	return strings.Join(parts, "; ")
}

// exitCodeText names an exit status. One from 129 to 192 is what a
// signal 1 to 64 leaves when it kills a program, and also a status the
// program may exit with itself; where the executor could not tell which
// (unknown), the text says both.
func exitCodeText(code int, unknown bool) string {
	s := fmt.Sprintf("exit code %d", code)
	if n := code - 128; unknown && n >= 1 && n <= 64 {
		name := unix.SignalName(syscall.Signal(n))
		if name == "" {
			name = fmt.Sprintf("signal %d", n)
		}
		s += fmt.Sprintf(" (128+%d: killed by %s, or the program's own exit status)", n, name)
	}
	return s
}

// withMarker returns the kept output as text, with a line saying how much
// was dropped where the executor cut it: after the head of half the cap.
func withMarker(kept []byte, dropped int64, head int) string {
	if dropped == 0 || head <= 0 || head > len(kept) {
		return strings.ToValidUTF8(string(kept), "\uFFFD")
	}
	h, t := kept[:head], kept[head:]
	// Do not split a UTF-8 sequence at the cut: move it to a rune start.
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	s := strings.ToValidUTF8(string(h), "\uFFFD")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	s += fmt.Sprintf("[... %d bytes dropped ...]\n", dropped)
	return s + strings.ToValidUTF8(string(t), "\uFFFD")
}

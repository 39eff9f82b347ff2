package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// SessionManager opens, closes and lists sessions; *exec.Executor is one.
type SessionManager interface {
	CreateSession(ctx context.Context, owner, language string, idle time.Duration) (exec.SessionInfo, error)
	CloseSession(owner, id string) bool
	Sessions(owner string) []exec.SessionInfo
	SessionLimits() exec.SessionConfig
}

// localPrincipal owns every session and output file when
// Options.Principal is nil: the one client of a server over stdio.
const localPrincipal = "local"

// Names of the session tools.
const (
	createSessionTool = "create_session"
	closeSessionTool  = "close_session"
	listSessionsTool  = "list_sessions"
)

// sessions is what a server offers of sessions. A nil *sessions offers
// none: its methods say so.
type sessions struct {
	m      SessionManager
	limits exec.SessionConfig
	// langs are the languages that have a session driver, by name.
	langs     []config.Language
	principal func(ctx context.Context) string
}

// newSessions returns what o offers of sessions for langs: nil if o has
// no SessionManager, its Max is 0, or no language has a driver.
func newSessions(o Options, langs []config.Language) *sessions {
	if o.Sessions == nil {
		return nil
	}
	lim := o.Sessions.SessionLimits()
	if lim.Max <= 0 {
		return nil
	}
	s := &sessions{m: o.Sessions, limits: lim, principal: o.Principal}
	for _, l := range langs {
		if l.SessionDriver != "" {
			s.langs = append(s.langs, l)
		}
	}
	if len(s.langs) == 0 {
		return nil
	}
	slices.SortFunc(s.langs, func(a, b config.Language) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// offers reports whether lang's tool takes a session_id.
func (s *sessions) offers(lang string) bool {
	return s != nil && slices.ContainsFunc(s.langs, func(l config.Language) bool { return l.Name == lang })
}

// owner names the client of ctx, whose sessions a call may use.
func (s *sessions) owner(ctx context.Context) string {
	if s == nil || s.principal == nil {
		return localPrincipal
	}
	return s.principal(ctx)
}

// names lists the languages that offer sessions, with their tools, such
// as "javascript (run_js_code) and python (run_python_code)".
func (s *sessions) names() string {
	if s == nil {
		return ""
	}
	var n []string
	for _, l := range s.langs {
		n = append(n, fmt.Sprintf("%s (%s)", l.Name, l.Tool))
	}
	return joinAnd(n)
}

// tool returns the tool of lang, or "" if it offers no sessions.
func (s *sessions) tool(lang string) string {
	if s == nil {
		return ""
	}
	for _, l := range s.langs {
		if l.Name == lang {
			return l.Tool
		}
	}
	return ""
}

// refusal says why lang's tool takes no session_id and what to do.
func (s *sessions) refusal(lang string) string {
	if s == nil {
		return `argument "session_id": this server offers no sessions; leave it out: each call runs in a fresh sandbox`
	}
	return fmt.Sprintf(`argument "session_id": %s has no sessions; only %s do. Leave session_id out to run in a fresh sandbox`, lang, s.names())
}

// noSessionsText explains ErrNoSessions: the language has no session
// driver, or the server no sessions.
func (s *sessions) noSessionsText(lang string, err error) string {
	if s == nil {
		return fmt.Sprintf("This server offers no sessions (%v), so nothing was started. Call the language's tool without session_id: each call runs in a fresh sandbox.", err)
	}
	return fmt.Sprintf("%s has no sessions (%v), so nothing was started: only %s support them. Call %s's tool without session_id to run in a fresh sandbox, or create a session of one of those.",
		lang, err, s.names(), lang)
}

// sessionErrorText explains an error about a session, or returns "" if
// err is none.
func (s *sessions) sessionErrorText(lang string, err error) string {
	var no *exec.NoSessionError
	switch {
	case errors.As(err, &no):
		why := "it is unknown, closed or expired"
		if no.Ended != "" {
			why = "it has ended: " + no.Ended
		}
		return fmt.Sprintf("There is no open session %q: %s. Nothing was run, and its state, if it had any, is gone. Call %s to start a new session, or leave session_id out to run in a fresh sandbox.",
			no.ID, why, createSessionTool)
	case errors.Is(err, exec.ErrTooManyOwnSessions):
		return fmt.Sprintf("No session was started: you have as many sessions as one client may (%v). %s lists yours; %s one you no longer need, or wait for one to expire, then call %s again. Without session_id a call runs in a fresh sandbox, which needs no session.",
			err, listSessionsTool, closeSessionTool, createSessionTool)
	case errors.Is(err, exec.ErrTooManySessions):
		max := 0
		if s != nil {
			max = s.limits.Max
		}
		return fmt.Sprintf("No session was started: the server is at max_sessions (%d), its bound on sessions at once (%v). %s lists yours; %s one you no longer need, or wait for one to expire, then call %s again. Without session_id a call runs in a fresh sandbox, which needs no session.",
			max, err, listSessionsTool, closeSessionTool, createSessionTool)
	case errors.Is(err, exec.ErrNoSessions):
		return s.noSessionsText(lang, err)
	}
	return ""
}

// sessionSentence tells a model how lang's tool runs code in a session;
// "" if it offers none.
func (s *sessions) sessionSentence(lang string) string {
	if !s.offers(lang) {
		return ""
	}
	return "Sessions: with session_id (from " + createSessionTool + ") the code runs as the next cell of that session instead, " +
		"a sandbox of its own with the same limits that lives across calls: names, imports and " + oci.WorkspaceDir + " persist, " +
		"and the value of a last expression is shown (as display() shows it, where the language has display()); files in and out work per call. Without session_id each call starts from scratch."
}

// sessionRun is what structuredContent adds for a run in a session.
type sessionRun struct {
	SessionID      string `json:"session_id"`
	ExecutionCount int    `json:"execution_count"`
	ExpiresAt      string `json:"expires_at"`
	SessionEnded   string `json:"session_ended"`
	// BackgroundOOMKills is exec.SessionResult.BackgroundOOMKills.
	BackgroundOOMKills int `json:"background_oom_kills"`
}

// sessionRunProperties are the properties of sessionRun, added to
// outputSchema as optional for the tools that offer sessions.
const sessionRunProperties = `{
  "session_id": {"type": "string", "description": "The session the code ran in; absent for a run in a fresh sandbox."},
  "execution_count": {"type": "integer", "minimum": 0, "description": "The cell's number in its session."},
  "expires_at": {"type": "string", "format": "date-time", "description": "When the session ends unless used again (RFC 3339)."},
  "session_ended": {"type": "string", "description": "Why the session ended with this call; empty while it lives on."},
  "background_oom_kills": {"type": "integer", "minimum": 0, "description": "Processes in the session's sandbox that the kernel killed for running out of memory since the previous cell, before this one began: processes an earlier cell left running in the background."}
}`

// sessionOutputSchema is outputSchema with sessionRun's properties.
var sessionOutputSchema = func() json.RawMessage {
	var schema map[string]any
	var props map[string]any
	if err := json.Unmarshal([]byte(outputSchema), &schema); err != nil {
		panic(err)
	}
	if err := json.Unmarshal([]byte(sessionRunProperties), &props); err != nil {
		panic(err)
	}
	for k, v := range props {
		schema["properties"].(map[string]any)[k] = v
	}
	data, err := json.Marshal(schema)
	if err != nil {
		panic(err)
	}
	return data
}()

// newSessionRun is what r adds to structuredContent; nil for a one-shot
// run.
func newSessionRun(r *exec.Result) *sessionRun {
	if r.Session == nil {
		return nil
	}
	return &sessionRun{
		SessionID:          r.Session.ID,
		ExecutionCount:     r.Session.ExecutionCount,
		ExpiresAt:          rfc3339(r.Session.ExpiresAt),
		SessionEnded:       r.Session.Ended,
		BackgroundOOMKills: r.Session.BackgroundOOMKills,
	}
}

// sessionLine is the text's last line on a run in a session that ended;
// "" if it lives on (a timed-out cell's status line says so).
func sessionLine(r *exec.Result) string {
	if r.Session == nil || r.Session.Ended == "" {
		return ""
	}
	return fmt.Sprintf("Session %s has ended: %s. Its state is gone; %s starts a new one.", r.Session.ID, r.Session.Ended, createSessionTool)
}

// backgroundOOMLine is the text's line on the processes that the kernel
// killed for their memory in a session's sandbox while no cell ran
// (exec.SessionResult.BackgroundOOMKills); "" if it killed none. lim are
// the session's language's limits.
func backgroundOOMLine(r *exec.Result, lim config.Limits) string {
	if r.Session == nil || r.Session.BackgroundOOMKills == 0 {
		return ""
	}
	what, left := "1 process", "a process that an earlier cell left running in the background is gone"
	if n := r.Session.BackgroundOOMKills; n > 1 {
		what, left = fmt.Sprintf("%d processes", n), "processes that earlier cells left running in the background are gone"
	}
	line := fmt.Sprintf("Since the previous cell, the kernel killed %s in this session's sandbox for running out of memory (limit %s): %s",
		what, config.Size(lim.MemoryBytes), left)
	if r.Session.Ended != "" {
		return line + "."
	}
	return line + "; the interpreter and its state remain."
}

// rfc3339 writes t as RFC 3339, in UTC to the second.
func rfc3339(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// seconds is d in whole seconds.
func seconds(d time.Duration) int64 {
	return int64(d / time.Second)
}

// createOutput is create_session's structuredContent.
type createOutput struct {
	SessionID          string `json:"session_id"`
	Language           string `json:"language"`
	Tool               string `json:"tool"`
	ExpiresAt          string `json:"expires_at"`
	IdleTimeoutSeconds int64  `json:"idle_timeout_seconds"`
	MaxLifetimeSeconds int64  `json:"max_lifetime_seconds"`
}

const createOutputSchema = `{
  "type": "object",
  "properties": {
    "session_id": {"type": "string", "description": "Pass it as session_id to the language's tool."},
    "language": {"type": "string"},
    "tool": {"type": "string", "description": "The tool that runs code in the session."},
    "expires_at": {"type": "string", "format": "date-time", "description": "When the session ends unless used (RFC 3339); each call renews it, up to max_lifetime_seconds after creation."},
    "idle_timeout_seconds": {"type": "integer", "minimum": 1, "description": "The session ends after this long without a call."},
    "max_lifetime_seconds": {"type": "integer", "minimum": 1, "description": "The session ends this long after it was created, busy or not."}
  },
  "required": ["session_id", "language", "tool", "expires_at", "idle_timeout_seconds", "max_lifetime_seconds"],
  "additionalProperties": false
}`

// closeOutput is close_session's structuredContent.
type closeOutput struct {
	SessionID string `json:"session_id"`
	WasOpen   bool   `json:"was_open"`
}

const closeOutputSchema = `{
  "type": "object",
  "properties": {
    "session_id": {"type": "string"},
    "was_open": {"type": "boolean", "description": "The session was open and is now closed; false if it was unknown, closed or expired already."}
  },
  "required": ["session_id", "was_open"],
  "additionalProperties": false
}`

// sessionOutput is one session in list_sessions' structuredContent.
type sessionOutput struct {
	SessionID      string `json:"session_id"`
	Language       string `json:"language"`
	Tool           string `json:"tool"`
	Created        string `json:"created"`
	LastUsed       string `json:"last_used"`
	ExpiresAt      string `json:"expires_at"`
	ExecutionCount int    `json:"execution_count"`
	MemoryBytes    int64  `json:"memory_bytes"`
}

// listOutput is list_sessions' structuredContent.
type listOutput struct {
	// Sessions is never nil, so that it is sent as [] when there are none.
	Sessions    []sessionOutput `json:"sessions"`
	MaxSessions int             `json:"max_sessions"`
}

const listOutputSchema = `{
  "type": "object",
  "properties": {
    "sessions": {
      "type": "array",
      "description": "The caller's open sessions, oldest first.",
      "items": {
        "type": "object",
        "properties": {
          "session_id": {"type": "string"},
          "language": {"type": "string"},
          "tool": {"type": "string", "description": "The tool that runs code in the session."},
          "created": {"type": "string", "format": "date-time"},
          "last_used": {"type": "string", "format": "date-time", "description": "When its last call ended; created before the first."},
          "expires_at": {"type": "string", "format": "date-time", "description": "When it ends unless used again."},
          "execution_count": {"type": "integer", "minimum": 0, "description": "Cells run so far."},
          "memory_bytes": {"type": "integer", "minimum": -1, "description": "Memory it holds now; -1 if unknown."}
        },
        "required": ["session_id", "language", "tool", "created", "last_used", "expires_at", "execution_count", "memory_bytes"],
        "additionalProperties": false
      }
    },
    "max_sessions": {"type": "integer", "minimum": 1, "description": "How many sessions may be open at once on the server, all clients together."}
  },
  "required": ["sessions", "max_sessions"],
  "additionalProperties": false
}`

// addTools adds the session tools to srv.
func (s *sessions) addTools(srv *server.MCPServer, o Options) {
	names := make([]string, len(s.langs))
	for i, l := range s.langs {
		names[i] = l.Name
	}
	maxLife := seconds(s.limits.MaxLifetime)
	srv.AddTool(mcp.NewTool(createSessionTool,
		mcp.WithDescription(fmt.Sprintf("Start a session: one sandbox of a language, with the same isolation and limits as a one-shot run, whose interpreter stays alive across calls, like a notebook. "+
			"Pass the session_id it returns to the language's tool: each call's code then runs as the next cell, with the names, imports and %s of the earlier ones. "+
			"Languages with sessions: %s. A session ends after %s without a call (idle_timeout_seconds), %s after it started, or with %s; at most %d are open at once. "+
			"Use a session only when state must persist: without session_id every call runs in a fresh sandbox.",
			oci.WorkspaceDir, s.names(), s.limits.IdleTimeout, s.limits.MaxLifetime, closeSessionTool, s.limits.Max)),
		mcp.WithString("language",
			mcp.Required(),
			mcp.Enum(names...),
			mcp.Description("The session's language."),
		),
		mcp.WithInteger("idle_timeout_seconds",
			mcp.Min(1),
			mcp.Max(float64(maxLife)),
			mcp.Description(fmt.Sprintf("End the session after this many seconds without a call; default %d, at most %d.", seconds(s.limits.IdleTimeout), maxLife)),
		),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(json.RawMessage(createOutputSchema)),
		mcp.WithTitleAnnotation("Start a sandbox session whose state persists across calls"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		taskSupport(o.Tasks.offered()),
	), s.createHandler(o))
	srv.AddTool(mcp.NewTool(closeSessionTool,
		mcp.WithDescription("End a session and delete its sandbox, with all its state. Closing a session that is not open (unknown, closed or expired) is not an error."),
		mcp.WithString("session_id",
			mcp.Required(),
			mcp.MinLength(1),
			mcp.Description("The session to end, as "+createSessionTool+" returned it."),
		),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(json.RawMessage(closeOutputSchema)),
		mcp.WithTitleAnnotation("End a sandbox session"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), s.closeHandler())
	srv.AddTool(mcp.NewTool(listSessionsTool,
		mcp.WithDescription("List your open sessions: id, language, when each was created and last used, when it expires, its cells run so far and the memory it holds."),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(json.RawMessage(listOutputSchema)),
		mcp.WithTitleAnnotation("List your sandbox sessions"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), s.listHandler())
}

// objectArgs decodes a call's arguments as a JSON object, refusing any
// key not in known; usage says what the tool takes.
func objectArgs(raw any, usage string, known ...string) (map[string]json.RawMessage, error) {
	var data []byte
	switch v := raw.(type) {
	case nil:
		data = []byte("{}")
	case json.RawMessage:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || (m == nil && !isNull(data)) {
		return nil, fmt.Errorf("arguments must be a JSON object: %s", usage)
	}
	for k := range m {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("unknown argument %q: this tool takes %s", k, usage)
		}
	}
	return m, nil
}

// parseSessionID decodes a session_id argument.
func parseSessionID(raw json.RawMessage) (string, error) {
	var id string
	if err := json.Unmarshal(raw, &id); err != nil || isNull(raw) {
		return "", fmt.Errorf(`argument "session_id" must be a string, as %s returned it, not %s`, createSessionTool, jsonKind(raw))
	}
	if id == "" {
		return "", fmt.Errorf(`argument "session_id" is empty: pass the session_id %s returned`, createSessionTool)
	}
	return id, nil
}

// createArgs are create_session's validated arguments.
type createArgs struct {
	language string
	idle     time.Duration
}

// parseCreateArgs validates create_session's arguments.
func (s *sessions) parseCreateArgs(raw any) (createArgs, error) {
	usage := `"language" (string) and optionally "idle_timeout_seconds" (integer)`
	var a createArgs
	m, err := objectArgs(raw, usage, "language", "idle_timeout_seconds")
	if err != nil {
		return a, err
	}
	names := make([]string, len(s.langs))
	for i, l := range s.langs {
		names[i] = fmt.Sprintf("%q", l.Name)
	}
	rl, ok := m["language"]
	if !ok {
		return a, fmt.Errorf(`missing argument "language": one of %s`, strings.Join(names, ", "))
	}
	if err := json.Unmarshal(rl, &a.language); err != nil || isNull(rl) {
		return a, fmt.Errorf(`argument "language" must be a string, one of %s, not %s`, strings.Join(names, ", "), jsonKind(rl))
	}
	if !s.offers(a.language) {
		return a, fmt.Errorf(`argument "language" is %q, which has no sessions here; want one of %s`, a.language, strings.Join(names, ", "))
	}
	maxSec := seconds(s.limits.MaxLifetime)
	if rt, ok := m["idle_timeout_seconds"]; ok {
		var f float64
		if err := json.Unmarshal(rt, &f); err != nil || isNull(rt) {
			return a, fmt.Errorf(`argument "idle_timeout_seconds" must be a whole number of seconds from 1 to %d, not %s; leave it out for the default of %d`,
				maxSec, jsonKind(rt), seconds(s.limits.IdleTimeout))
		}
		if f != math.Trunc(f) || f < 1 || f > float64(maxSec) {
			return a, fmt.Errorf(`argument "idle_timeout_seconds" is %v; want a whole number of seconds from 1 to %d (max_lifetime)`, f, maxSec)
		}
		a.idle = time.Duration(f) * time.Second
	}
	return a, nil
}

// createHandler is create_session's handler.
func (s *sessions) createHandler(o Options) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := s.parseCreateArgs(req.GetRawArguments())
		if err != nil {
			return mcp.NewToolResultError(err.Error() + ". No session was started."), nil
		}
		info, err := s.m.CreateSession(ctx, s.owner(ctx), a.language, a.idle)
		if err != nil {
			return mcp.NewToolResultError(sandboxErrorText(ctx, a.language, err, o, s)), nil
		}
		idle, life := info.IdleTimeout, info.MaxLifetime
		if idle <= 0 {
			idle = s.limits.IdleTimeout
		}
		if life <= 0 {
			life = s.limits.MaxLifetime
		}
		out := createOutput{
			SessionID: info.ID, Language: info.Language, Tool: s.tool(info.Language), ExpiresAt: rfc3339(info.ExpiresAt),
			IdleTimeoutSeconds: seconds(idle), MaxLifetimeSeconds: seconds(life),
		}
		text := fmt.Sprintf("Session %s (%s) is open. To run code in it, call %s with \"session_id\": %q: names, imports and %s persist from one call to the next. "+
			"It expires at %s unless used; each call renews that, by %d seconds without a call, up to %d seconds after it started. %s ends it sooner.",
			out.SessionID, out.Language, out.Tool, out.SessionID, oci.WorkspaceDir, out.ExpiresAt, out.IdleTimeoutSeconds, out.MaxLifetimeSeconds, closeSessionTool)
		return mcp.NewToolResultStructured(out, text), nil
	}
}

// closeHandler is close_session's handler: closing a session that is not
// open is no error.
func (s *sessions) closeHandler() server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		m, err := objectArgs(req.GetRawArguments(), `"session_id" (string)`, "session_id")
		if err == nil && m["session_id"] == nil {
			err = errors.New(`missing argument "session_id": the session to end, as ` + createSessionTool + ` returned it`)
		}
		var id string
		if err == nil {
			id, err = parseSessionID(m["session_id"])
		}
		if err != nil {
			return mcp.NewToolResultError(err.Error() + ". Nothing was closed."), nil
		}
		out := closeOutput{SessionID: id, WasOpen: s.m.CloseSession(s.owner(ctx), id)}
		text := fmt.Sprintf("Session %s was open and is now closed: its sandbox and state are gone.", id)
		if !out.WasOpen {
			text = fmt.Sprintf("Session %s was not open (unknown, already closed or expired): there was nothing to close.", id)
		}
		return mcp.NewToolResultStructured(out, text), nil
	}
}

// listHandler is list_sessions' handler.
func (s *sessions) listHandler() server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, err := objectArgs(req.GetRawArguments(), "no arguments: send {}"); err != nil {
			return mcp.NewToolResultError(err.Error() + "."), nil
		}
		list := s.m.Sessions(s.owner(ctx))
		out := listOutput{Sessions: make([]sessionOutput, 0, len(list)), MaxSessions: s.limits.Max}
		var b strings.Builder
		for _, i := range list {
			so := sessionOutput{
				SessionID: i.ID, Language: i.Language, Tool: s.tool(i.Language),
				Created: rfc3339(i.Created), LastUsed: rfc3339(i.LastUsed), ExpiresAt: rfc3339(i.ExpiresAt),
				ExecutionCount: i.ExecutionCount, MemoryBytes: i.MemoryBytes,
			}
			if so.MemoryBytes < 0 {
				so.MemoryBytes = -1
			}
			out.Sessions = append(out.Sessions, so)
			mem := "memory unknown"
			if so.MemoryBytes >= 0 {
				mem = humanSize(so.MemoryBytes) + " of memory"
			}
			fmt.Fprintf(&b, "%s: %s (%s), created %s, last used %s, expires %s, %d cells run, %s\n",
				so.SessionID, so.Language, so.Tool, so.Created, so.LastUsed, so.ExpiresAt, so.ExecutionCount, mem)
		}
		if len(list) == 0 {
			b.WriteString("You have no open sessions; " + createSessionTool + " starts one.\n")
		}
		fmt.Fprintf(&b, "The server holds at most %d sessions at once, of all clients.", s.limits.Max)
		return mcp.NewToolResultStructured(out, b.String()), nil
	}
}

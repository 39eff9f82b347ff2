// Package mcpserver is the MCP face of code-sandbox-mcp: it builds the
// server that offers one tool per language and the environments resource,
// validates a call's arguments and files, hands the program to a RunFunc
// and turns what came back into a result a model can read and act on,
// keeping the run's output files for a while behind filesURITemplate,
// whose resources/read it serves. What it says
// about a sandbox (network, writable paths, memory, CPUs, processes) is
// read back from the OCI spec package oci generates for the language. It
// must not know containerd, flags or a transport: it never talks to
// containerd (runs go through the RunFunc it is given, and the commands
// its advice names come in Options), and a caller serves the server New
// returns over stdio, or over another transport by calling New again.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// environmentsURI is the resource that lists the configured languages.
const environmentsURI = "sandbox://environments"

// serverName is the name the server gives at initialize.
const serverName = "code-sandbox-mcp"

// RunFunc runs one program; (*exec.Executor).Run is one.
type RunFunc func(ctx context.Context, req exec.Request) (*exec.Result, error)

// A Refusal is an error a RunFunc or a SessionManager returns to refuse a
// call before anything ran, for a reason of the server's own (an audit
// log it cannot write, say). The model reads Text as it is, so it says
// what happened, whose problem it is and what to do.
type Refusal struct {
	Text string
	Err  error
}

func (r *Refusal) Error() string { return r.Text }
func (r *Refusal) Unwrap() error { return r.Err }

// Options are what the server says about itself, and the commands its
// advice names, which only its caller knows.
type Options struct {
	// Version is reported at initialize and in the environments resource.
	Version string
	// ImportHint is the command that imports a missing image, such as
	// "code-sandbox-mcp --namespace code-sandbox images import FILE"; a
	// result reporting a missing image tells the model to ask the user
	// to run it.
	ImportHint string
	// DoctorHint is the command that diagnoses the server's set-up, such
	// as "code-sandbox-mcp --namespace code-sandbox doctor"; a result
	// reporting a set-up problem names it.
	DoctorHint string
	// FileRetention is how long a run's output files can be read through
	// their URIs; FileRetentionBytes caps what all runs' kept files cost
	// together, names and bookkeeping included, shared equally by Clients
	// principals, each one's oldest run evicted first. Zero takes the
	// default of config.Default.
	FileRetention      time.Duration
	FileRetentionBytes int64
	// Clients is how many principals Principal can name (the clients of
	// the token file); 0 is one, "local".
	Clients int
	// Sessions opens, closes and lists sessions. Nil, or one whose
	// SessionLimits().Max is 0, offers none: no session tools, and no
	// session_id argument.
	Sessions SessionManager
	// Principal names the client a call comes from, which owns the
	// sessions it creates, the output files of its runs and its tasks, and
	// alone may use them; nil names every caller "local", the one client
	// of a server over stdio.
	Principal func(ctx context.Context) string
	// Tasks, if not nil and its Max is not 0, lets the language tools and
	// create_session run as MCP tasks; the caller closes it at shutdown,
	// before the executor (Tasks.Close). A Tasks serves one server.
	Tasks *Tasks
	// Inventory, if not nil, tells what each language's image holds:
	// tools/list and the environments resource name its packages, after
	// waiting for it a few seconds at most. Nil names none.
	Inventory InventoryFunc
	// Secrets are the values no notification of a run's output may carry
	// (the pass-through variables'): each is replaced by "[redacted
	// NAME]". Results are not redacted: they are the program's output.
	Secrets []Secret
	// Modules returns the top-level names a program of language can
	// import from its image, from which a result's hint on a missing
	// module names similar ones (see hint.For); it must not wait. Nil, or
	// nil names, name none.
	Modules func(language string) []string

	// now reads the clock of the file store; nil is time.Now.
	now func() time.Time
}

// fileStore returns the store of output files o asks for.
func (o Options) fileStore() *fileStore {
	d := config.Default().Sandbox
	keep, maxBytes, now := o.FileRetention, o.FileRetentionBytes, o.now
	if keep <= 0 {
		keep = time.Duration(d.FileRetention)
	}
	if maxBytes <= 0 {
		maxBytes = int64(d.FileRetentionBytes)
	}
	if now == nil {
		now = time.Now
	}
	return newFileStore(keep, maxBytes, o.Clients, now, o.Principal)
}

// New builds the MCP server: one tool per language in langs, each running
// its programs through run, the environments resource and the template of
// the runs' output files (filesURITemplate), kept as o says. What both say
// about a language's sandbox is read from the OCI spec its limits
// generate; an error means a language's spec cannot be generated. opts
// are applied after the server's own options, so a caller can override
// them. A session's requests other than initialize and ping are refused
// until its initialize has succeeded (see handshake); hooks a caller
// passes in opts are kept, and that check is added to them.
func New(ctx context.Context, o Options, langs []config.Language, run RunFunc, opts ...server.ServerOption) (*server.MCPServer, error) {
	sandboxes := make([]sandbox, len(langs))
	for i, l := range langs {
		sb, err := describeSandbox(ctx, l)
		if err != nil {
			return nil, err
		}
		sandboxes[i] = sb
	}
	sess := newSessions(o, langs)
	store := o.fileStore()
	inv := newInventories(o.Inventory, langs)
	if o.Modules == nil {
		o.Modules = inv.Modules
	}
	texts := map[string]toolText{}
	for i, l := range langs {
		texts[l.Tool] = toolText{language: l.Name, text: func(got *inventory.Inventory) string {
			return toolDescription(l, sandboxes[i], store.keep, sess, o.Tasks.offered(), got)
		}}
	}
	own := []server.ServerOption{
		server.WithToolFilter(inv.describeTools(texts)),
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		// Runs stream their output as info log messages to a client that
		// asks (logging/setLevel): see callStream.
		server.WithLogging(),
		server.WithRecovery(),
		server.WithOutputSchemaValidation(),
		server.WithInstructions(instructions(sandboxes, sess)),
	}
	if o.Tasks.offered() {
		// The tasks' middleware comes before the caller's, so that it is
		// the outermost: a task's run includes what those do.
		own = append(own, server.WithTaskCapabilities(true, true, true), server.WithToolHandlerMiddleware(o.Tasks.middleware))
	}
	opts = append(own, opts...)
	s := server.NewMCPServer(serverName, o.Version, opts...)
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	new(handshake).addTo(hooks)
	hooks.AddBeforeReadResource(store.routeRead)
	hooks.AddBeforeListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest) { inv.refresh(ctx) })
	if o.Tasks.offered() {
		timeouts := map[string]time.Duration{}
		for _, l := range langs {
			timeouts[l.Tool] = l.Limits.Timeout
		}
		o.Tasks.setUp(o, timeouts, hooks)
	}
	for i, l := range langs {
		s.AddTool(newTool(l, sandboxes[i], store.keep, sess, o.Tasks.offered()), toolHandler(l, run, store, o, sess))
	}
	if sess != nil {
		sess.addTools(s, o)
	}
	s.AddResourceTemplate(
		mcp.NewResourceTemplate(filesURITemplate, "run files",
			mcp.WithTemplateDescription(fmt.Sprintf("A file a run left in %s, which its tool result links to; kept for %s after the run (file_retention), %s, names included, a client's oldest run evicted first.",
				oci.WorkspaceDir, store.keep, store.bound())),
		),
		store.readFile,
	)
	s.AddResource(
		mcp.NewResource(environmentsURI, "environments",
			mcp.WithResourceDescription("The languages this server runs: tool, image, command, limits and what the image holds (language version, Debian, Python and npm packages) of each."),
			mcp.WithMIMEType("application/json"),
		),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			inv.refresh(ctx)
			data, err := json.MarshalIndent(environments(o.Version, store, langs, sandboxes, sess, o.Tasks, inv), "", "  ")
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{
				URI: environmentsURI, MIMEType: "application/json", Text: string(data),
			}}, nil
		},
	)
	return s, nil
}

// instructions tells a model what the server is for; "network-less" only
// if no language's spec gives a network, sessions only if sess offers
// them.
func instructions(sandboxes []sandbox, sess *sessions) string {
	kind := "fresh, isolated"
	if !slices.ContainsFunc(sandboxes, func(sb sandbox) bool { return sb.Network }) {
		kind += ", network-less"
	}
	s := "Runs code in " + kind + " sandboxes: one tool per language. " +
		"Print the results you need; each call starts from scratch. " +
		"The resource " + environmentsURI + " lists the languages, images and limits. " +
		"Files a program leaves in " + oci.WorkspaceDir + " come back as links to " + filesURITemplate + "."
	if sess != nil {
		s += " To keep state across calls (names, imports, " + oci.WorkspaceDir + "), " + createSessionTool +
			" starts a session of " + sess.names() + " whose session_id the language's tool takes; files in and out still work per call, " +
			listSessionsTool + " and " + closeSessionTool + " manage sessions, and without session_id a call still gets a fresh sandbox."
	}
	return s
}

// environment is one language in the environments resource.
type environment struct {
	Tool        string   `json:"tool"`
	Image       string   `json:"image"`
	Command     []string `json:"command"`
	File        string   `json:"file"`
	Description string   `json:"description"`
	Figures     bool     `json:"figures"`
	// Warm says whether ready sandboxes wait with the interpreter started
	// (and Preload imported); see config.Language.Warm.
	Warm    bool     `json:"warm"`
	Preload []string `json:"preload,omitempty"`
	// Sessions says whether the language's tool takes a session_id.
	Sessions bool         `json:"sessions"`
	Limits   limitsOutput `json:"limits"`
	// ImageContents is what the image holds; nil if that is not known.
	ImageContents *contentsOutput `json:"image_contents,omitempty"`
}

// contentsOutput is what a language's image holds (inventory.Inventory):
// the language's version, if the image has it; the notable packages,
// which the tool's description names; every Debian package, Python
// distribution and global npm package, by name.
type contentsOutput struct {
	LanguageVersion string              `json:"language_version,omitempty"`
	Notable         []inventory.Package `json:"notable"`
	Python          []inventory.Package `json:"python"`
	NPM             []inventory.Package `json:"npm"`
	Debian          []inventory.Package `json:"debian"`
}

// contents is the contentsOutput of l's image, as inv tells it; nil if
// inv is.
func contents(l config.Language, inv *inventory.Inventory) *contentsOutput {
	if inv == nil {
		return nil
	}
	c := &contentsOutput{Notable: inv.Notable, Python: inv.Pip, NPM: inv.NPM, Debian: inv.Debian}
	switch l.Interpreter() {
	case "python":
		c.LanguageVersion = inv.Python
	case "node":
		c.LanguageVersion = inv.Node
	}
	for _, ps := range []*[]inventory.Package{&c.Notable, &c.Python, &c.NPM, &c.Debian} {
		if *ps == nil {
			*ps = []inventory.Package{}
		}
	}
	return c
}

// limitsOutput is what every run of a language gets. Network, the file
// system, memory, CPUs and pids are read from the language's spec.
type limitsOutput struct {
	MemoryBytes       int64   `json:"memory_bytes"`
	CPUs              float64 `json:"cpus"`
	Pids              int64   `json:"pids"`
	FileBytes         int64   `json:"file_bytes"`
	OpenFiles         uint64  `json:"open_files"`
	TimeoutSeconds    float64 `json:"timeout_seconds"`
	MaxTimeoutSeconds float64 `json:"max_timeout_seconds"`
	// MaxTaskTimeoutSeconds is what a call run as a task may ask for; 0
	// if the server offers no tasks.
	MaxTaskTimeoutSeconds float64          `json:"max_task_timeout_seconds"`
	OutputBytesPerStream  int64            `json:"output_bytes_per_stream"`
	CodeBytes             int64            `json:"code_bytes"`
	Network               bool             `json:"network"`
	ReadOnlyRootFS        bool             `json:"read_only_rootfs"`
	Writable              []writableOutput `json:"writable"`
	Home                  string           `json:"home"`
	Workspace             string           `json:"workspace"`
	WorkspaceBytes        int64            `json:"workspace_bytes"`
	FilesInBytes          int64            `json:"files_in_bytes"`
	MaxFilesIn            int              `json:"max_files_in"`
	FilesOutBytes         int64            `json:"files_out_bytes"`
	MaxFilesOut           int              `json:"max_files_out"`
	MaxImages             int              `json:"max_images"`
	ImageBytes            int64            `json:"image_bytes"`
}

// writableOutput is a path a run can write to, and its size; 0 when the
// spec does not bound it.
type writableOutput struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// environmentsOutput is the environments resource.
type environmentsOutput struct {
	Languages map[string]environment `json:"languages"`
	Server    string                 `json:"server"`
	Version   string                 `json:"version"`
	// Files is how runs' output files are kept.
	Files filesOutput `json:"files"`
	// Sessions bounds the sessions; MaxSessions is 0 if there are none.
	Sessions sessionsOutput `json:"sessions"`
	// Tasks bounds the tasks; MaxTasks is 0 if there are none.
	Tasks tasksOutput `json:"tasks"`
}

// tasksOutput bounds the tasks, server-wide: see Tasks.
type tasksOutput struct {
	MaxTasks               int     `json:"max_tasks"`
	ResultRetentionSeconds float64 `json:"result_retention_seconds"`
}

// sessionsOutput bounds the sessions, server-wide.
type sessionsOutput struct {
	MaxSessions        int   `json:"max_sessions"`
	IdleTimeoutSeconds int64 `json:"idle_timeout_seconds"`
	MaxLifetimeSeconds int64 `json:"max_lifetime_seconds"`
}

// filesOutput is how runs' output files are kept: RetentionBytes is
// file_retention_bytes, what all clients' kept files cost together,
// names included, and RetentionBytesPerClient each client's equal share
// of it, which is what one client's runs may hold.
type filesOutput struct {
	URITemplate             string  `json:"uri_template"`
	RetentionSeconds        float64 `json:"retention_seconds"`
	RetentionBytes          int64   `json:"retention_bytes"`
	RetentionBytesPerClient int64   `json:"retention_bytes_per_client"`
}

// environments is the environments resource of a server of version,
// whose output files store keeps, which offers sess and tasks, and whose
// images hold what inv last said.
func environments(version string, store *fileStore, langs []config.Language, sandboxes []sandbox, sess *sessions, tasks *Tasks, inv *inventories) environmentsOutput {
	out := environmentsOutput{
		Server: serverName, Version: version, Languages: map[string]environment{},
		Files: filesOutput{URITemplate: filesURITemplate, RetentionSeconds: store.keep.Seconds(),
			RetentionBytes: store.maxBytes, RetentionBytesPerClient: store.share},
	}
	if sess != nil {
		out.Sessions = sessionsOutput{MaxSessions: sess.limits.Max,
			IdleTimeoutSeconds: seconds(sess.limits.IdleTimeout), MaxLifetimeSeconds: seconds(sess.limits.MaxLifetime)}
	}
	if tasks.offered() {
		out.Tasks = tasksOutput{MaxTasks: tasks.Max, ResultRetentionSeconds: tasks.Retention.Seconds()}
	}
	for i, l := range langs {
		lim, sb := l.Limits, sandboxes[i]
		var maxTask float64
		if tasks.offered() {
			maxTask = lim.RunCap().Seconds()
		}
		writable := make([]writableOutput, 0, len(sb.Writable))
		for _, w := range sb.Writable {
			writable = append(writable, writableOutput{Path: w.Path, Bytes: w.Bytes})
		}
		out.Languages[l.Name] = environment{
			Tool: l.Tool, Image: l.Image, Command: l.Command, File: l.File, Description: l.Description, Figures: l.Figures,
			Warm: l.Warm && l.Pool > 0 && l.Interpreter() != "", Preload: l.Preload, Sessions: sess.offers(l.Name),
			ImageContents: contents(l, inv.get(l.Name)),
			Limits: limitsOutput{
				MemoryBytes: sb.MemoryBytes, CPUs: sb.CPUs, Pids: sb.Pids,
				FileBytes: lim.FileBytes, OpenFiles: lim.OpenFiles,
				TimeoutSeconds:        lim.Timeout.Seconds(),
				MaxTimeoutSeconds:     lim.MaxTimeout.Seconds(),
				MaxTaskTimeoutSeconds: maxTask,
				OutputBytesPerStream:  lim.OutputBytes, CodeBytes: lim.CodeBytes,
				Network: sb.Network, ReadOnlyRootFS: sb.ReadOnlyRoot, Writable: writable, Home: sb.Home,
				Workspace: oci.WorkspaceDir, WorkspaceBytes: lim.WorkspaceBytes,
				FilesInBytes: lim.FilesInBytes, MaxFilesIn: lim.MaxFilesIn,
				FilesOutBytes: lim.FilesOutBytes, MaxFilesOut: lim.MaxFilesOut,
				MaxImages: lim.MaxImages, ImageBytes: lim.ImageBytes,
			},
		}
	}
	return out
}

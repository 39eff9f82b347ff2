// Package config reads code-sandbox-mcp's TOML configuration (the embedded
// defaults of default.toml, with a user's file decoded strictly on top:
// an unknown key is an error that names it) into typed values, and turns
// each language's tables into Language, the one model of a language and
// its limits that the executor, the spec policy and the MCP layer all
// read; Config.Language and Config.Enabled produce it, in one place. It
// imports nothing else of this module.
package config

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

//go:embed default.toml
var defaultTOML string

// Config is the whole configuration.
type Config struct {
	Containerd Containerd               `toml:"containerd"`
	Sandbox    Sandbox                  `toml:"sandbox"`
	Limits     LimitsTable              `toml:"limits"`
	Sessions   Sessions                 `toml:"sessions"`
	HTTP       HTTP                     `toml:"http"`
	Audit      Audit                    `toml:"audit"`
	Languages  map[string]LanguageTable `toml:"languages"`
}

// Containerd says how to reach the daemon.
type Containerd struct {
	// Address is containerd's socket.
	Address string `toml:"address"`
	// Namespace is the containerd namespace all our objects live in.
	Namespace string `toml:"namespace"`
	// Snapshotter is empty for the daemon's default.
	Snapshotter string `toml:"snapshotter"`
	// Runtime is the containerd runtime (shim) that runs the sandboxes;
	// empty is RuncShim.
	Runtime string `toml:"runtime"`
	// RuntimeBinary is the OCI runtime the runc shim runs: a name looked
	// up on containerd's PATH ("runc", "crun") or an absolute path; empty
	// is the shim's default, runc. Only RuncShim takes it.
	RuntimeBinary string `toml:"runtime_binary"`
	// CgroupDriver is how the runtime makes each sandbox's cgroup:
	// CgroupDriverCgroupfs (itself, at /NAMESPACE/ID) or
	// CgroupDriverSystemd (through systemd, as the transient unit
	// NAMESPACE-ID.scope in system.slice). Only RuncShim takes systemd.
	CgroupDriver string `toml:"cgroup_driver"`
}

// RuncShim is containerd's runc shim, the default runtime, the one that
// takes runtime_binary and the systemd cgroup driver.
const RuncShim = "io.containerd.runc.v2"

// Cgroup drivers.
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// Sandbox holds the server's own settings.
type Sandbox struct {
	// StateDir is the host directory for per-run program files.
	StateDir string `toml:"state_dir"`
	// Concurrency bounds runs in flight; 0 means the number of CPUs.
	Concurrency int `toml:"concurrency"`
	// Pull is "missing" (pull an image absent from containerd's store) or
	// "never".
	Pull string `toml:"pull"`
	// PassThroughEnv names host environment variables given to every run.
	PassThroughEnv []string `toml:"pass_through_env"`
	// UIDLockDir is the host-wide directory where each sandbox's uid is
	// claimed; every server on the host must use the same one.
	UIDLockDir string `toml:"uid_lock_dir"`
	// FileRetention is how long a run's output files can be read back
	// through their sandbox:// URIs; FileRetentionBytes caps what all
	// runs' retained files hold together, the oldest run's evicted first.
	FileRetention      Duration `toml:"file_retention"`
	FileRetentionBytes Size     `toml:"file_retention_bytes"`
}

// Sessions bounds the sessions: sandboxes that keep one interpreter alive
// across calls, for the languages that have a session driver.
type Sessions struct {
	// MaxSessions is how many may be open at once, all owners together;
	// 0 disables sessions.
	MaxSessions int `toml:"max_sessions"`
	// IdleTimeout ends a session that ran nothing for that long (a
	// create_session call may ask for another, up to MaxLifetime);
	// MaxLifetime ends any session that old, busy or not.
	IdleTimeout Duration `toml:"idle_timeout"`
	MaxLifetime Duration `toml:"max_lifetime"`
}

// HTTP holds the settings of the streamable HTTP transport (--http);
// stdio heeds only MetricsAddr, and AuthTokens and AllowedOrigins for its
// listener.
type HTTP struct {
	// AuthTokens is the token file: one client a line, "NAME SHA256HEX".
	// Empty means no authentication, which only a loopback listener
	// allows.
	AuthTokens string `toml:"auth_tokens"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call the server; a request with any other Origin is refused.
	AllowedOrigins []string `toml:"allowed_origins"`
	// PerClientConcurrency bounds one client's calls of the language
	// tools in flight at once; 0 is half of [sandbox] concurrency, at
	// least 1 (see Config.ClientConcurrency). Over stdio there is one
	// client, and no such share.
	PerClientConcurrency int `toml:"per_client_concurrency"`
	// RateLimit is how many tool calls a client may make a minute, on
	// average; 0 is no limit. RateBurst is how many it may make at once
	// after a quiet spell.
	RateLimit int `toml:"rate_limit"`
	RateBurst int `toml:"rate_burst"`
	// PerClientSessions bounds one client's open sessions; 0 is half of
	// [sessions] max_sessions, at least 1 (see Config.ClientSessions).
	PerClientSessions int `toml:"per_client_sessions"`
	// MetricsAddr, if set, serves GET /metrics on a listener of its own
	// (HOST:PORT), over HTTP or stdio, instead of beside /mcp; it asks for
	// the tokens of AuthTokens if there are any, and without them must be
	// loopback.
	MetricsAddr string `toml:"metrics_addr"`
	// MaxRequestBytes bounds a request's body; a larger one is refused
	// with 413 before it is read. 0 is a little over what the largest
	// call the languages' limits accept can take (see
	// Config.RequestBytes).
	MaxRequestBytes Size `toml:"max_request_bytes"`
	// ReadTimeout bounds how long a client may take to send a whole
	// request, headers and body; WriteTimeout how long one write of a
	// response may wait for a client that does not read; IdleTimeout how
	// long a kept-alive connection may wait for its next request.
	ReadTimeout  Duration `toml:"read_timeout"`
	WriteTimeout Duration `toml:"write_timeout"`
	IdleTimeout  Duration `toml:"idle_timeout"`
	// MaxConnections bounds the connections open at once, all clients
	// together; MaxConnectionsPerClient those from one remote address.
	// 0 is no bound.
	MaxConnections          int `toml:"max_connections"`
	MaxConnectionsPerClient int `toml:"max_connections_per_client"`
}

// jsonEscapeFactor is how many bytes of a request's JSON one byte of code
// or of a file's content may take: base64 takes 4/3, and a JSON string
// escapes a tab, a newline, a quote or a backslash in 2.
const jsonEscapeFactor = 2

// requestSlack is what RequestBytes allows beyond a call's code, files
// and paths: the JSON-RPC envelope and the other arguments.
const requestSlack = 1 << 20

// RequestBytes is the largest request body the HTTP transport reads:
// [http] max_request_bytes, or, if that is 0, what the largest call of an
// enabled language may send (its code_bytes and files_in_bytes, each byte
// taking up to jsonEscapeFactor in JSON, and max_files_in paths of the
// longest) plus requestSlack.
func (c *Config) RequestBytes() int64 {
	if c.HTTP.MaxRequestBytes > 0 {
		return int64(c.HTTP.MaxRequestBytes)
	}
	var most int64
	for _, l := range c.Enabled() {
		lim := l.Limits
		n := jsonEscapeFactor*(lim.CodeBytes+lim.FilesInBytes) + int64(lim.MaxFilesIn)*jsonEscapeFactor*maxFilePathBytes
		most = max(most, n)
	}
	return most + requestSlack
}

// maxFilePathBytes is the longest path a file of a call's files argument
// may have (PATH_MAX).
const maxFilePathBytes = 4096

// Concurrency is how many runs are in flight at most: [sandbox]
// concurrency, or the number of CPUs if that is 0.
func (c *Config) Concurrency() int {
	if c.Sandbox.Concurrency > 0 {
		return c.Sandbox.Concurrency
	}
	return runtime.NumCPU()
}

// ClientConcurrency is how many calls of the language tools one HTTP
// client may have in flight: [http] per_client_concurrency, or half of
// Concurrency, at least 1, if that is 0.
func (c *Config) ClientConcurrency() int {
	if c.HTTP.PerClientConcurrency > 0 {
		return c.HTTP.PerClientConcurrency
	}
	return max(1, c.Concurrency()/2)
}

// ClientSessions is how many sessions one HTTP client may have open:
// [http] per_client_sessions, or half of [sessions] max_sessions, at
// least 1, if that is 0. It is 0 when sessions are off.
func (c *Config) ClientSessions() int {
	switch {
	case c.Sessions.MaxSessions <= 0:
		return 0
	case c.HTTP.PerClientSessions > 0:
		return c.HTTP.PerClientSessions
	}
	return max(1, c.Sessions.MaxSessions/2)
}

// Audit is the audit log of a serving server: what it ran, for whom,
// and how it ended, one hash-chained JSON record per event.
type Audit struct {
	// Path is the log file, appended to; "-" is stderr and "" keeps no
	// log.
	Path string `toml:"path"`
	// IncludeCode puts each run's code text in its records, not only its
	// SHA-256 and size.
	IncludeCode bool `toml:"include_code"`
}

// Pull policies.
const (
	PullMissing = "missing"
	PullNever   = "never"
)

// LimitsTable is the [limits] table, and each language's limits once its
// overrides are applied, as the file spells them; Limits is what the rest
// of the program reads.
type LimitsTable struct {
	Memory      Size     `toml:"memory"`
	CPUs        float64  `toml:"cpus"`
	Pids        int64    `toml:"pids"`
	TmpSize     Size     `toml:"tmp_size"`
	ShmSize     Size     `toml:"shm_size"`
	FileSize    Size     `toml:"file_size"`
	OpenFiles   uint64   `toml:"open_files"`
	Timeout     Duration `toml:"timeout"`
	MaxTimeout  Duration `toml:"max_timeout"`
	OutputBytes Size     `toml:"output_bytes"`
	CodeBytes   Size     `toml:"code_bytes"`
	// PendingSignals, MsgQueueSize and LockedMemory are the rlimits
	// RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE and RLIMIT_MEMLOCK.
	PendingSignals uint64 `toml:"pending_signals"`
	MsgQueueSize   Size   `toml:"msgqueue_size"`
	LockedMemory   Size   `toml:"locked_memory"`
	// Ptys is how many pseudo-terminals a run may hold; 0 gives it no
	// /dev/pts at all.
	Ptys int `toml:"ptys"`
	// WorkspaceSize sizes the run's /workspace; FilesInBytes and
	// MaxFilesIn cap the files a call writes there, FilesOutBytes and
	// MaxFilesOut the files it gets back; MaxImages and ImageBytes cap the
	// images among those returned inline.
	WorkspaceSize Size `toml:"workspace_size"`
	FilesInBytes  Size `toml:"files_in_bytes"`
	MaxFilesIn    int  `toml:"max_files_in"`
	FilesOutBytes Size `toml:"files_out_bytes"`
	MaxFilesOut   int  `toml:"max_files_out"`
	MaxImages     int  `toml:"max_images"`
	ImageBytes    Size `toml:"image_bytes"`
	// UIDRange is the host uids (and gids) the sandboxes are given, one
	// each, as "FIRST-LAST". It is read from [limits] only: the range is
	// the server's, not a language's.
	UIDRange string `toml:"uid_range"`
}

// LimitOverrides are one language's changes to [limits]; a nil field keeps
// the global value.
type LimitOverrides struct {
	Memory      *Size     `toml:"memory"`
	CPUs        *float64  `toml:"cpus"`
	Pids        *int64    `toml:"pids"`
	TmpSize     *Size     `toml:"tmp_size"`
	ShmSize     *Size     `toml:"shm_size"`
	FileSize    *Size     `toml:"file_size"`
	OpenFiles   *uint64   `toml:"open_files"`
	Timeout     *Duration `toml:"timeout"`
	MaxTimeout  *Duration `toml:"max_timeout"`
	OutputBytes *Size     `toml:"output_bytes"`
	CodeBytes   *Size     `toml:"code_bytes"`

	PendingSignals *uint64 `toml:"pending_signals"`
	MsgQueueSize   *Size   `toml:"msgqueue_size"`
	LockedMemory   *Size   `toml:"locked_memory"`
	Ptys           *int    `toml:"ptys"`

	WorkspaceSize *Size `toml:"workspace_size"`
	FilesInBytes  *Size `toml:"files_in_bytes"`
	MaxFilesIn    *int  `toml:"max_files_in"`
	FilesOutBytes *Size `toml:"files_out_bytes"`
	MaxFilesOut   *int  `toml:"max_files_out"`
	MaxImages     *int  `toml:"max_images"`
	ImageBytes    *Size `toml:"image_bytes"`
}

// Apply returns l with o's set fields replacing l's.
func (o LimitOverrides) Apply(l LimitsTable) LimitsTable {
	if o.Memory != nil {
		l.Memory = *o.Memory
	}
	if o.CPUs != nil {
		l.CPUs = *o.CPUs
	}
	if o.Pids != nil {
		l.Pids = *o.Pids
	}
	if o.TmpSize != nil {
		l.TmpSize = *o.TmpSize
	}
	if o.ShmSize != nil {
		l.ShmSize = *o.ShmSize
	}
	if o.FileSize != nil {
		l.FileSize = *o.FileSize
	}
	if o.OpenFiles != nil {
		l.OpenFiles = *o.OpenFiles
	}
	if o.Timeout != nil {
		l.Timeout = *o.Timeout
	}
	if o.MaxTimeout != nil {
		l.MaxTimeout = *o.MaxTimeout
	}
	if o.OutputBytes != nil {
		l.OutputBytes = *o.OutputBytes
	}
	if o.CodeBytes != nil {
		l.CodeBytes = *o.CodeBytes
	}
	if o.PendingSignals != nil {
		l.PendingSignals = *o.PendingSignals
	}
	if o.MsgQueueSize != nil {
		l.MsgQueueSize = *o.MsgQueueSize
	}
	if o.LockedMemory != nil {
		l.LockedMemory = *o.LockedMemory
	}
	if o.Ptys != nil {
		l.Ptys = *o.Ptys
	}
	for _, f := range []struct {
		from *Size
		to   *Size
	}{{o.WorkspaceSize, &l.WorkspaceSize}, {o.FilesInBytes, &l.FilesInBytes}, {o.FilesOutBytes, &l.FilesOutBytes}, {o.ImageBytes, &l.ImageBytes}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	for _, f := range []struct {
		from *int
		to   *int
	}{{o.MaxFilesIn, &l.MaxFilesIn}, {o.MaxFilesOut, &l.MaxFilesOut}, {o.MaxImages, &l.MaxImages}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return l
}

// LanguageTable is a [languages.NAME] table: how one language's programs
// are run, and the MCP tool that offers it, as the file spells them.
// Language is what the rest of the program reads.
type LanguageTable struct {
	// Image is the image reference in containerd's image store.
	Image string `toml:"image"`
	// Command is the interpreter's argv; the program's path is appended.
	Command []string `toml:"command"`
	// File is the program's file name in the sandbox, such as "main.py".
	File string `toml:"file"`
	// Env is added to the image's own environment, as KEY=value.
	Env []string `toml:"env"`
	// Runtime overrides [containerd] runtime for this language, and
	// RuntimeBinary [containerd] runtime_binary.
	Runtime       string `toml:"runtime"`
	RuntimeBinary string `toml:"runtime_binary"`
	// Tool is the MCP tool's name; empty means "run_NAME_code".
	Tool string `toml:"tool"`
	// Description tells a model what the language's sandbox offers; the
	// server appends the limits to it.
	Description string `toml:"description"`
	// Disabled leaves the language out entirely.
	Disabled bool `toml:"disabled"`
	// Pool is how many sandboxes are kept created, started ahead and
	// waiting for a program, each used once; 0 creates every sandbox on
	// demand.
	Pool int `toml:"pool"`
	// Figures saves every matplotlib figure a Python program shows or
	// leaves open as /workspace/figures/figure-N.png.
	Figures bool `toml:"figures"`
	// SessionDriver is the session driver of the interpreter Command
	// starts, one of SessionDrivers; "" offers no sessions.
	SessionDriver string `toml:"session_driver"`
	// Warm makes the language's ready sandboxes wait with the interpreter
	// already started, in a driver of ours, for the one program each
	// runs.
	Warm bool `toml:"warm"`
	// Preload names the modules a warm ready sandbox imports before its
	// program arrives.
	Preload []string `toml:"preload"`
	// Limits overrides [limits] for this language.
	Limits LimitOverrides `toml:"limits"`
}

// Default returns the embedded defaults.
func Default() *Config {
	c := &Config{}
	if err := c.decode(defaultTOML, "embedded defaults"); err != nil {
		panic("config: embedded defaults: " + err.Error())
	}
	c.fill()
	return c
}

// Load returns the embedded defaults with the file at path decoded on top,
// validated. An empty path means the defaults alone.
func Load(path string) (*Config, error) {
	c := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := c.decode(string(data), path); err != nil {
			return nil, err
		}
	}
	c.fill()
	if err := c.Validate(); err != nil {
		if path == "" {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes data, in the same way as a file named name, on top of the
// embedded defaults and validates the result.
func Parse(data, name string) (*Config, error) {
	c := Default()
	if err := c.decode(data, name); err != nil {
		return nil, err
	}
	c.fill()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// decode merges the TOML in data into c: keys present replace c's values,
// a language table merges into the language of the same name.
func (c *Config) decode(data, name string) error {
	f := struct {
		Containerd *Containerd               `toml:"containerd"`
		Sandbox    *Sandbox                  `toml:"sandbox"`
		Limits     *LimitsTable              `toml:"limits"`
		Sessions   *Sessions                 `toml:"sessions"`
		HTTP       *HTTP                     `toml:"http"`
		Audit      *Audit                    `toml:"audit"`
		Languages  map[string]toml.Primitive `toml:"languages"`
	}{&c.Containerd, &c.Sandbox, &c.Limits, &c.Sessions, &c.HTTP, &c.Audit, nil}
	md, err := toml.Decode(data, &f)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if c.Languages == nil {
		c.Languages = map[string]LanguageTable{}
	}
	names := make([]string, 0, len(f.Languages))
	for n := range f.Languages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := c.Languages[n]
		l.Command = append([]string(nil), l.Command...)
		l.Env = append([]string(nil), l.Env...)
		if err := md.PrimitiveDecode(f.Languages[n], &l); err != nil {
			return fmt.Errorf("%s: languages.%s: %w", name, n, err)
		}
		c.Languages[n] = l
	}
	if u := md.Undecoded(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, k := range u {
			keys[i] = k.String()
			if last := k[len(k)-1]; len(k) >= 2 && k[len(k)-2] == "limits" && (last == "uid" || last == "gid") {
				return fmt.Errorf("%s: %s: sandboxes no longer share one uid and gid: each gets its own from [limits] uid_range; remove uid and gid (see sandbox.toml.example)", name, k)
			}
		}
		return fmt.Errorf("%s: unknown key %s; see sandbox.toml.example for the keys there are", name, strings.Join(keys, ", "))
	}
	return nil
}

// fill supplies the values that follow from others.
func (c *Config) fill() {
	for n, l := range c.Languages {
		if l.Tool == "" {
			l.Tool = "run_" + n + "_code"
		}
		if l.Description == "" {
			l.Description = "Run " + n + " code and return its standard output and standard error."
		}
		c.Languages[n] = l
	}
}

// Names returns the enabled languages' names, sorted.
func (c *Config) Names() []string {
	var names []string
	for n, l := range c.Languages {
		if !l.Disabled {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// limitsFor returns the limits a language's runs get: [limits] with the
// language's overrides applied.
func (c *Config) limitsFor(name string) LimitsTable {
	return c.Languages[name].Limits.Apply(c.Limits)
}

var (
	toolName      = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	languageName  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	moduleName    = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@/:-]{0,127}$`)
	namespaceName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,74}[A-Za-z0-9])?$`)
)

// maxPool bounds a language's pool of ready sandboxes: each holds a shim
// and a waiting process.
const maxPool = 32

// maxPtys bounds a run's pseudo-terminals: the kernel's kernel.pty.max
// (4096 by default, 1024 of them kept for the host's own /dev/pts) is
// shared by every container on the host.
const maxPtys = 64

// maxFiles bounds the counts of files in and out, and of images, per run.
const maxFiles = 10000

// minWorkspace is the least size of a run's /workspace.
const minWorkspace = 1 << 20

// maxSessions bounds [sessions] max_sessions: each open session holds a
// sandbox, its shim and an interpreter for as long as it lives.
const maxSessions = 64

// minMemory is the least memory limit runc can start a container with,
// with room for an interpreter.
const minMemory = 8 << 20

// Validate reports every problem in c, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.Containerd.Address == "" {
		bad("containerd.address", "empty; want containerd's socket, such as /run/containerd/containerd.sock")
	}
	if !namespaceName.MatchString(c.Containerd.Namespace) {
		bad("containerd.namespace", "%q is not a valid containerd namespace (letters, digits, '_', '.', '-')", c.Containerd.Namespace)
	}
	if !strings.HasPrefix(c.Sandbox.StateDir, "/") {
		bad("sandbox.state_dir", "%q is not an absolute path", c.Sandbox.StateDir)
	}
	if !strings.HasPrefix(c.Sandbox.UIDLockDir, "/") {
		bad("sandbox.uid_lock_dir", "%q is not an absolute path", c.Sandbox.UIDLockDir)
	}
	if c.Sandbox.Concurrency < 0 {
		bad("sandbox.concurrency", "%d is negative; 0 means the number of CPUs", c.Sandbox.Concurrency)
	}
	if c.Sandbox.FileRetention <= 0 {
		bad("sandbox.file_retention", "%s must be greater than 0", c.Sandbox.FileRetention)
	}
	if c.Sandbox.FileRetentionBytes <= 0 {
		bad("sandbox.file_retention_bytes", "must be greater than 0")
	}
	if c.Sandbox.Pull != PullMissing && c.Sandbox.Pull != PullNever {
		bad("sandbox.pull", "%q; want %q or %q", c.Sandbox.Pull, PullMissing, PullNever)
	}
	seen := map[string]bool{}
	for _, n := range c.Sandbox.PassThroughEnv {
		if !envName.MatchString(n) {
			bad("sandbox.pass_through_env", "%q is not an environment variable name", n)
		}
		if seen[n] {
			bad("sandbox.pass_through_env", "%q is listed twice", n)
		}
		seen[n] = true
	}
	errs = append(errs, c.validateRuntime()...)
	errs = append(errs, validateLimits("limits", c.Limits)...)
	errs = append(errs, validateSessions(c.Sessions)...)
	errs = append(errs, c.validateHTTP()...)
	if p := c.Audit.Path; strings.ContainsRune(p, 0) || strings.TrimSpace(p) != p || strings.HasSuffix(p, "/") {
		bad("audit.path", "%q; want a file's path, \"-\" for stderr, or \"\" for no audit log", p)
	}
	if _, err := ParseUIDRange(c.Limits.UIDRange); err != nil {
		bad("limits.uid_range", "%v", err)
	}

	names := c.Names()
	if len(names) == 0 {
		bad("languages", "no language is configured and enabled")
	}
	tools := map[string]string{}
	for _, n := range names {
		l := c.Languages[n]
		key := "languages." + n
		if !languageName.MatchString(n) {
			bad(key, "the name %q must be 1 to 32 letters, digits, '_' or '-'", n)
		}
		if l.Image == "" {
			bad(key+".image", "empty; want an image reference, such as \"localhost/code-sandbox-mcp/python:trixie\"")
		}
		if len(l.Command) == 0 || l.Command[0] == "" {
			bad(key+".command", "empty; want the interpreter's argv, such as [\"python3\"]")
		}
		for _, a := range l.Command {
			if a == "" {
				bad(key+".command", "has an empty argument")
				break
			}
		}
		if l.File == "" || strings.Contains(l.File, "/") || l.File == "." || l.File == ".." {
			bad(key+".file", "%q; want a plain file name, such as \"main.py\"", l.File)
		}
		for _, e := range l.Env {
			k, _, ok := strings.Cut(e, "=")
			if !ok || !envName.MatchString(k) {
				bad(key+".env", "%q; want KEY=value", e)
			}
		}
		if !toolName.MatchString(l.Tool) {
			bad(key+".tool", "%q; want 1 to 64 letters, digits, '_' or '-'", l.Tool)
		} else if other, dup := tools[l.Tool]; dup {
			bad(key+".tool", "%q is also the tool of languages.%s; tool names must be unique", l.Tool, other)
		}
		tools[l.Tool] = n
		if l.Pool < 0 || l.Pool > maxPool {
			bad(key+".pool", "%d; want 0 (create on demand) to %d", l.Pool, maxPool)
		}
		if l.SessionDriver != "" && !slices.Contains(SessionDrivers, l.SessionDriver) {
			bad(key+".session_driver", "%q is not a session driver; want one of %s (the interpreter the command starts), or \"\" for no sessions",
				l.SessionDriver, quoteAll(SessionDrivers))
		}
		for _, m := range l.Preload {
			if !moduleName.MatchString(m) {
				bad(key+".preload", "%q; want a module name, such as \"numpy\" or \"os.path\" (letters, digits, '_', '-', '.', '/', '@', ':')", m)
			}
		}
		errs = append(errs, validateLimits(key+".limits", c.limitsFor(n))...)
	}
	return errors.Join(errs...)
}

// validateRuntime checks the runtime keys of [containerd] and of each
// enabled language: the cgroup driver is one there is, a runtime binary
// is a name or an absolute path, and runtime_binary and the systemd
// driver go with the runc shim only, the one whose options they are.
func (c *Config) validateRuntime() []error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	ct := c.Containerd
	systemd := ct.CgroupDriver == CgroupDriverSystemd
	if ct.CgroupDriver != CgroupDriverCgroupfs && !systemd {
		bad("containerd.cgroup_driver", "%q; want %q (the runtime makes the cgroups itself, the default) or %q (through systemd, as containerd's SystemdCgroup = true does)",
			ct.CgroupDriver, CgroupDriverCgroupfs, CgroupDriverSystemd)
	}
	if err := checkRuntimeBinary(ct.RuntimeBinary); err != nil {
		bad("containerd.runtime_binary", "%v", err)
	}
	notRunc := func(rt string) bool { return rt != "" && rt != RuncShim }
	if notRunc(ct.Runtime) {
		if ct.RuntimeBinary != "" {
			bad("containerd.runtime_binary", "%q is an option of the runc shim, but containerd.runtime is %q; set runtime = \"\" (or %q), or remove runtime_binary",
				ct.RuntimeBinary, ct.Runtime, RuncShim)
		}
		if systemd {
			bad("containerd.cgroup_driver", "%q is an option of the runc shim, but containerd.runtime is %q; set runtime = \"\" (or %q), or cgroup_driver = %q",
				ct.CgroupDriver, ct.Runtime, RuncShim, CgroupDriverCgroupfs)
		}
	}
	for _, n := range c.Names() {
		t := c.Languages[n]
		key := "languages." + n
		if err := checkRuntimeBinary(t.RuntimeBinary); err != nil {
			bad(key+".runtime_binary", "%v", err)
		}
		if t.Runtime == "" && t.RuntimeBinary == "" {
			// [containerd]'s, checked above.
			continue
		}
		rt, bin := cmp.Or(t.Runtime, ct.Runtime), cmp.Or(t.RuntimeBinary, ct.RuntimeBinary)
		if !notRunc(rt) {
			continue
		}
		if bin != "" {
			k := key + ".runtime"
			if t.Runtime == "" {
				k = key + ".runtime_binary"
			}
			bad(k, "the runtime %q is not the runc shim (%q), but the runtime_binary is %q (the language's own or [containerd]'s), an option of that shim only; set runtime = \"\", or remove runtime_binary",
				rt, RuncShim, bin)
		}
		if systemd {
			bad(key+".runtime", "%q is not the runc shim (%q), but containerd.cgroup_driver is %q, an option of that shim only; set runtime = \"\", or cgroup_driver = %q",
				rt, RuncShim, ct.CgroupDriver, CgroupDriverCgroupfs)
		}
	}
	return errs
}

// checkRuntimeBinary checks a runtime_binary: empty, a plain name, or an
// absolute path.
func checkRuntimeBinary(b string) error {
	switch {
	case b == "":
		return nil
	case strings.TrimSpace(b) != b || strings.ContainsAny(b, "\x00\n"):
		return fmt.Errorf("%q has spaces around it or a control character; want a name such as \"crun\", or an absolute path", b)
	case b == "." || b == "..":
		return fmt.Errorf("%q is not a program; want a name such as \"crun\", or an absolute path", b)
	case !strings.Contains(b, "/"):
		return nil
	case !strings.HasPrefix(b, "/"):
		return fmt.Errorf("%q is a relative path, which the shim would resolve against a directory of its own; want a name looked up on containerd's PATH, such as \"crun\", or an absolute path, such as \"/usr/bin/crun\"", b)
	case strings.HasSuffix(b, "/"):
		return fmt.Errorf("%q is a directory; want the program's absolute path, such as \"/usr/bin/crun\"", b)
	}
	return nil
}

// validateSessions checks the [sessions] table.
func validateSessions(s Sessions) []error {
	var errs []error
	bad := func(k, format string, a ...any) {
		errs = append(errs, fmt.Errorf("sessions.%s: %s", k, fmt.Sprintf(format, a...)))
	}
	if s.MaxSessions < 0 || s.MaxSessions > maxSessions {
		bad("max_sessions", "%d; want 0 (no sessions) to %d", s.MaxSessions, maxSessions)
	}
	if s.IdleTimeout <= 0 {
		bad("idle_timeout", "%s must be greater than 0", s.IdleTimeout)
	}
	if s.MaxLifetime <= 0 {
		bad("max_lifetime", "%s must be greater than 0", s.MaxLifetime)
	}
	if s.IdleTimeout > s.MaxLifetime {
		bad("idle_timeout", "%s is more than max_lifetime (%s)", s.IdleTimeout, s.MaxLifetime)
	}
	return errs
}

// validateHTTP checks the limits of the [http] table.
func (c *Config) validateHTTP() []error {
	var errs []error
	bad := func(k, format string, a ...any) {
		errs = append(errs, fmt.Errorf("http.%s: %s", k, fmt.Sprintf(format, a...)))
	}
	h := c.HTTP
	switch n := c.Concurrency(); {
	case h.PerClientConcurrency < 0:
		bad("per_client_concurrency", "%d is negative; want 1 to sandbox.concurrency (%d), or 0 for half of it", h.PerClientConcurrency, n)
	case h.PerClientConcurrency > n:
		what := "sandbox.concurrency"
		if c.Sandbox.Concurrency == 0 {
			what = "sandbox.concurrency, here the number of CPUs,"
		}
		bad("per_client_concurrency", "%d is more than %s (%d), which bounds all clients' runs together; want 1 to %d, or 0 for half of it",
			h.PerClientConcurrency, what, n, n)
	}
	if h.RateLimit < 0 {
		bad("rate_limit", "%d is negative; want tool calls a minute per client, or 0 for no limit", h.RateLimit)
	}
	if h.RateLimit > 0 && h.RateBurst < 1 {
		bad("rate_burst", "%d; want at least 1 call at once while rate_limit is on (%d a minute)", h.RateBurst, h.RateLimit)
	}
	if m := c.Sessions.MaxSessions; h.PerClientSessions < 0 || (m > 0 && h.PerClientSessions > m) {
		bad("per_client_sessions", "%d; want 1 to sessions.max_sessions (%d), or 0 for half of it", h.PerClientSessions, m)
	}
	for k, d := range map[string]Duration{"read_timeout": h.ReadTimeout, "write_timeout": h.WriteTimeout, "idle_timeout": h.IdleTimeout} {
		if d <= 0 {
			bad(k, "%s must be greater than 0", d)
		}
	}
	if h.MaxConnections < 0 {
		bad("max_connections", "%d is negative; want the connections open at once, or 0 for no bound", h.MaxConnections)
	}
	switch {
	case h.MaxConnectionsPerClient < 0:
		bad("max_connections_per_client", "%d is negative; want the connections one address may have open, or 0 for no bound", h.MaxConnectionsPerClient)
	case h.MaxConnections > 0 && h.MaxConnectionsPerClient > h.MaxConnections:
		bad("max_connections_per_client", "%d is more than max_connections (%d)", h.MaxConnectionsPerClient, h.MaxConnections)
	}
	return errs
}

// quoteAll quotes each of s and joins them, as in "a", "b" or "c".
func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func validateLimits(key string, l LimitsTable) []error {
	var errs []error
	bad := func(k, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", key, k, fmt.Sprintf(format, a...)))
	}
	positive := func(k string, s Size) {
		if s <= 0 {
			bad(k, "must be greater than 0")
		}
	}
	if l.Memory < minMemory {
		bad("memory", "%s is too small; want at least %s", l.Memory, Size(minMemory))
	}
	if l.CPUs <= 0 {
		bad("cpus", "%g must be greater than 0", l.CPUs)
	}
	if l.Pids <= 0 {
		bad("pids", "%d must be greater than 0", l.Pids)
	}
	positive("tmp_size", l.TmpSize)
	positive("shm_size", l.ShmSize)
	positive("file_size", l.FileSize)
	if l.OpenFiles == 0 {
		bad("open_files", "must be greater than 0")
	}
	if l.Timeout <= 0 {
		bad("timeout", "%s must be greater than 0", l.Timeout)
	}
	if l.MaxTimeout <= 0 {
		bad("max_timeout", "%s must be greater than 0", l.MaxTimeout)
	}
	if l.Timeout > l.MaxTimeout {
		bad("timeout", "%s is more than max_timeout (%s)", l.Timeout, l.MaxTimeout)
	}
	positive("output_bytes", l.OutputBytes)
	if l.OutputBytes > 1<<30 {
		bad("output_bytes", "%s is more than 1GiB", l.OutputBytes)
	}
	positive("code_bytes", l.CodeBytes)
	if l.CodeBytes > 1<<30 {
		bad("code_bytes", "%s is more than 1GiB", l.CodeBytes)
	}
	if l.PendingSignals == 0 {
		bad("pending_signals", "must be greater than 0")
	}
	positive("msgqueue_size", l.MsgQueueSize)
	if l.LockedMemory < 0 {
		bad("locked_memory", "must not be negative")
	}
	if l.Ptys < 0 || l.Ptys > maxPtys {
		bad("ptys", "%d; want 0 (no /dev/pts) to %d", l.Ptys, maxPtys)
	}
	if l.WorkspaceSize < minWorkspace {
		bad("workspace_size", "%s is too small; want at least %s", l.WorkspaceSize, Size(minWorkspace))
	}
	if l.FilesInBytes < 0 || l.FilesInBytes > l.WorkspaceSize {
		bad("files_in_bytes", "%s; want 0 (no files in) to workspace_size (%s)", l.FilesInBytes, l.WorkspaceSize)
	}
	if l.FilesOutBytes < 0 || l.FilesOutBytes > 1<<30 {
		bad("files_out_bytes", "%s; want 0 (no files back) to 1GiB", l.FilesOutBytes)
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"max_files_in", l.MaxFilesIn}, {"max_files_out", l.MaxFilesOut}, {"max_images", l.MaxImages}} {
		if n.v < 0 || n.v > maxFiles {
			bad(n.key, "%d; want 0 to %d", n.v, maxFiles)
		}
	}
	if l.ImageBytes < 0 || l.ImageBytes > l.FilesOutBytes {
		bad("image_bytes", "%s; want 0 to files_out_bytes (%s)", l.ImageBytes, l.FilesOutBytes)
	}
	return errs
}

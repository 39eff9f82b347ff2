// Package config reads code-sandbox-mcp's TOML configuration (the embedded
// defaults of default.toml, with a user's file decoded strictly on top:
// an unknown key is an error that names it) into typed values, and turns
// each language's tables into Language, the one model of a language and
// its limits that the executor, the spec policy and the MCP layer all
// read; Config.Language and Config.Enabled produce it, in one place. It
// imports nothing else of this module.
package config

import (
	_ "embed"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"

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
	Tasks      Tasks                    `toml:"tasks"`
	HTTP       HTTP                     `toml:"http"`
	Audit      Audit                    `toml:"audit"`
	Network    *Network                 `toml:"network"`
	Languages  map[string]LanguageTable `toml:"languages"`
	// File is the path Load read, "" for the defaults alone: commands
	// that must read the same file name it.
	File string `toml:"-"`
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
	// Init is the host path of the static init that runs as pid 1 of
	// every sandbox, mounted read-only into each; empty (the default) is
	// code-sandbox-init beside the server's executable, else Debian's
	// /usr/bin/tini-static (exec.Config.Init).
	Init string `toml:"init"`
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

// Tasks bounds the calls run as MCP tasks: a client that sends a task
// with its call gets the task at once and polls for the result, which
// the server keeps for it.
type Tasks struct {
	// MaxTasks is how many tasks are kept at once, running or ended and
	// not yet expired, all clients together, each client holding an equal
	// share; 0 offers no tasks.
	MaxTasks int `toml:"max_tasks"`
	// ResultRetention is how long an ended task, and its result, are kept
	// after its run's deadline.
	ResultRetention Duration `toml:"result_retention"`
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
	// tools in flight at once; 0 is all of [sandbox] concurrency with one
	// client (or none) in the token file, half of it, at least 1, with
	// several (see Config.ClientConcurrency). Over stdio there is one
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
// client may have in flight among principals clients (the token file's
// names; 0 without one): [http] per_client_concurrency, or if that is 0,
// all of Concurrency for a lone client, and half of it, at least 1, when
// there are several to share it.
func (c *Config) ClientConcurrency(principals int) int {
	switch {
	case c.HTTP.PerClientConcurrency > 0:
		return c.HTTP.PerClientConcurrency
	case principals <= 1:
		return c.Concurrency()
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
	// starts, "python" or "node"; "" offers no sessions.
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
	// Packages are added to Image by `images build --configured`; the
	// language then runs in the image built, PackagesImage's.
	Packages Packages `toml:"packages"`
	// Network, if set, replaces [network] for this language: the
	// language's sandboxes reach what it allows, and no more; one that
	// allows nothing has no network.
	Network *Network `toml:"network"`
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
	c.File = path
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
		Tasks      *Tasks                    `toml:"tasks"`
		HTTP       *HTTP                     `toml:"http"`
		Audit      *Audit                    `toml:"audit"`
		Network    **Network                 `toml:"network"`
		Languages  map[string]toml.Primitive `toml:"languages"`
	}{&c.Containerd, &c.Sandbox, &c.Limits, &c.Sessions, &c.Tasks, &c.HTTP, &c.Audit, &c.Network, nil}
	md, err := toml.Decode(data, &f)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if c.Languages == nil {
		c.Languages = map[string]LanguageTable{}
	}
	known := make([]string, 0, len(c.Languages))
	for n := range c.Languages {
		known = append(known, n)
	}
	sort.Strings(known)
	names := make([]string, 0, len(f.Languages))
	for n := range f.Languages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := c.Languages[n]
		l.Command = append([]string(nil), l.Command...)
		l.Env = append([]string(nil), l.Env...)
		l.Packages = l.Packages.clone()
		if err := md.PrimitiveDecode(f.Languages[n], &l); err != nil {
			return fmt.Errorf("%s: languages.%s: %w", name, n, err)
		}
		c.Languages[n] = l
	}
	// A typo'd language's keys may be unknown too: its name is the news.
	if err := c.typoLanguages(name, known, names); err != nil {
		return err
	}
	if u := md.Undecoded(); len(u) > 0 {
		for _, k := range u {
			if last := k[len(k)-1]; len(k) >= 2 && k[len(k)-2] == "limits" && (last == "uid" || last == "gid") {
				return fmt.Errorf("%s: %s: sandboxes no longer share one uid and gid: each gets its own from [limits] uid_range; remove uid and gid (see sandbox.toml.example)", name, k)
			}
		}
		return fmt.Errorf("%s: unknown key %s; see sandbox.toml.example for the keys there are", name, unknownKeys(reflect.TypeFor[Config](), u))
	}
	return nil
}

// typoLanguages refuses a table of names, those the file has, that is
// not a language already known and does not make a new one (it sets no
// image or no command), when its name is a typo of a known language's:
// [languages.pyton] would otherwise be told it lacks an image, a command
// and a file.
func (c *Config) typoLanguages(name string, known, names []string) error {
	for _, n := range names {
		l := c.Languages[n]
		if slices.Contains(known, n) || (l.Image != "" && len(l.Command) > 0) {
			continue
		}
		if near := nearest(n, known); near != "" {
			return fmt.Errorf("%s: unknown language %q in [languages.%s]: did you mean %s? (a new language must set image and command)", name, n, n, near)
		}
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

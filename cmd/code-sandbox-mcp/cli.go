package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"strings"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// Exit statuses of the binary itself. `run` otherwise exits with the
// program's own status (128+N when a signal N killed it).
const (
	exitOK      = 0
	exitFailure = 1   // a subcommand failed (doctor found a problem, images failed)
	exitUsage   = 2   // bad flags or arguments
	exitSandbox = 125 // the sandbox could not run the program (as `docker run`)
)

const usage = `code-sandbox-mcp runs code in fresh, hardened containerd containers.

usage:
  code-sandbox-mcp [GLOBAL FLAGS]                  serve MCP over stdio
  code-sandbox-mcp [GLOBAL FLAGS] --http ADDR [--auth-tokens FILE] [--allowed-origins A,B]
                   [--tls-cert FILE --tls-key FILE] [--shutdown-grace D]
                                                   serve MCP over streamable HTTP at /mcp
                                                   (GET /healthz: 200 once every image is ready;
                                                   GET /metrics: Prometheus metrics, same checks as /mcp)
  code-sandbox-mcp [GLOBAL FLAGS] run --language NAME [--timeout D] [--file LOCAL[:PATH]]... [--out DIR]
                                      [--code STRING | FILE | -]
                                                   run one program; exit with its status
  code-sandbox-mcp [GLOBAL FLAGS] images import FILE... | list | pack | build ...
                                                   manage the sandbox images (images help)
  code-sandbox-mcp token new NAME [--append FILE]  make a client's token for --auth-tokens (token help)
  code-sandbox-mcp [GLOBAL FLAGS] doctor           check this host and run hello world per language
  code-sandbox-mcp audit verify [--after HASH] FILE...
                                                   check an audit log's hash chain
  code-sandbox-mcp version                         print the version
  code-sandbox-mcp help                            print this help

global flags (before the subcommand; run and doctor accept them after it too):
  --config FILE             TOML configuration (env CODE_SANDBOX_CONFIG); see sandbox.toml.example
  --address PATH            containerd socket (env CONTAINERD_ADDRESS)
  --namespace NAME          containerd namespace (env CONTAINERD_NAMESPACE)
  --pass-through-env A,B    host variables every run gets (only these; unset ones are skipped)
  --log-level LEVEL         debug, info, warn or error (default info); logs go to stderr

serve flags (stdio and --http; before any subcommand):
  --audit-log FILE          append an audit log of runs, sessions and failed authentications
                            to FILE, hash-chained JSON Lines ("-": stderr; config [audit] path);
                            SIGHUP reopens FILE instead of stopping the server

HTTP flags (serving only: with --http, and no subcommand):
  --http ADDR               serve streamable HTTP on ADDR (HOST:PORT) instead of stdio
  --auth-tokens FILE        token file, "NAME SHA256HEX" a line (config [http] auth_tokens);
                            without it ADDR must be loopback
  --allowed-origins A,B     browser origins allowed to call (config [http] allowed_origins),
                            besides the server's own on loopback
  --tls-cert FILE, --tls-key FILE
                            serve HTTPS with this certificate and key
  --shutdown-grace D        on SIGTERM, how long calls in flight may finish before
                            they are cancelled (default 30s; 0 cancels them at once)
  --metrics-addr ADDR       serve GET /metrics on ADDR (HOST:PORT) instead, also over stdio
                            (config [http] metrics_addr); it asks for --auth-tokens' tokens
                            if given, and without them ADDR must be loopback

environment:
  CONTAINER_IMAGE, CONTAINER_LANGUAGE   run CONTAINER_LANGUAGE's code in CONTAINER_IMAGE

precedence: flags > environment > config file > built-in defaults.

run exits with the program's exit status, 128+N if signal N killed it,
124 if it timed out, 125 if the sandbox could not run it, 2 on usage errors,
1 if --out could not save every output file. run --help explains --file.
audit verify exits 0 if the chain is intact, 1 at its first broken record
(printed as FILE:LINE: why), 2 on usage errors.
`

// globals are the flags every subcommand accepts.
type globals struct {
	configPath string
	address    string
	namespace  string
	passEnv    namesFlag
	logLevel   string
	// http, origins and auditLog are set before the subcommand only: they
	// are for serving.
	http     app.HTTPFlags
	origins  namesFlag
	auditLog string
}

// register adds the global flags to fs, bound to g.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.configPath, "config", g.configPath, "TOML configuration `file`")
	fs.StringVar(&g.address, "address", g.address, "containerd socket `path`")
	fs.StringVar(&g.namespace, "namespace", g.namespace, "containerd `namespace`")
	fs.Var(&g.passEnv, "pass-through-env", "comma-separated `names` of host variables every run gets")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log `level`: debug, info, warn, error")
}

// namesFlag is a comma-separated list of names; it may be given more than
// once. Set reports whether it was given at all.
type namesFlag struct {
	names []string
	set   bool
}

func (n *namesFlag) String() string { return strings.Join(n.names, ",") }

func (n *namesFlag) Set(s string) error {
	n.set = true
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			n.names = append(n.names, name)
		}
	}
	return nil
}

// newGlobalFlagSet returns the flag set of the global flags, which come
// before the subcommand.
func newGlobalFlagSet(g *globals, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("code-sandbox-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	g.register(fs)
	fs.StringVar(&g.http.Addr, "http", "", "serve streamable HTTP on `addr` (HOST:PORT) instead of stdio")
	fs.StringVar(&g.http.AuthTokens, "auth-tokens", "", "token `file` for --http")
	fs.Var(&g.origins, "allowed-origins", "comma-separated browser `origins` allowed to call --http")
	fs.StringVar(&g.http.TLSCert, "tls-cert", "", "TLS certificate `file` for --http")
	fs.StringVar(&g.http.TLSKey, "tls-key", "", "TLS key `file` for --http")
	fs.StringVar(&g.http.MetricsAddr, "metrics-addr", "", "serve /metrics on `addr` (HOST:PORT)")
	fs.StringVar(&g.auditLog, "audit-log", "", "audit log `file` (\"-\": stderr)")
	fs.DurationVar(&g.http.Grace, "shutdown-grace", app.DefaultGrace, "on SIGTERM, how long calls in flight may finish (`duration`)")
	return fs
}

// httpFlagNames are the flags newGlobalFlagSet adds for serving over
// HTTP: they mean nothing without --http, nor to a subcommand; but
// --auth-tokens and --allowed-origins also guard --metrics-addr.
var httpFlagNames = []string{"http", "auth-tokens", "allowed-origins", "tls-cert", "tls-key", "shutdown-grace"}

// serveFlagNames are the flags that mean something to serving only, over
// stdio or HTTP.
var serveFlagNames = append([]string{"metrics-addr", "audit-log"}, httpFlagNames...)

// misplacedHTTPFlags checks where the serving flags that fs (the global
// flag set, parsed) was given go: to serving, and among them the HTTP
// ones with --http (or, for those that guard it, --metrics-addr). cmd is
// the subcommand, "" for none.
func misplacedHTTPFlags(fs *flag.FlagSet, cmd string) error {
	var given, needHTTP []string
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range serveFlagNames {
		if !set[name] {
			continue
		}
		given = append(given, "--"+name)
		guardsMetrics := name == "auth-tokens" || name == "allowed-origins"
		if slices.Contains(httpFlagNames, name) && name != "http" && !(guardsMetrics && set["metrics-addr"]) {
			needHTTP = append(needHTTP, "--"+name)
		}
	}
	switch {
	case len(given) == 0:
		return nil
	case cmd != "" && cmd != "serve":
		return fmt.Errorf("%s is for serving, and %s does not serve: drop it, or serve with `code-sandbox-mcp [--http ADDR] ...` and no subcommand", strings.Join(given, ", "), cmd)
	case len(needHTTP) > 0 && !set["http"]:
		return fmt.Errorf("%s is for the HTTP transport: give --http ADDR too, or drop it to serve over stdio", strings.Join(needHTTP, ", "))
	}
	return nil
}

// refuseHTTPFlags adds the HTTP flags to fs, a subcommand's flag set, as
// flags that refuse any value and say where they go: after a subcommand
// they would otherwise be "not defined", which does not say that.
func refuseHTTPFlags(fs *flag.FlagSet, cmd string) {
	for _, name := range serveFlagNames {
		fs.Func(name, "serving only", func(string) error {
			return fmt.Errorf("--%s is for serving, and %s does not serve: serve with `code-sandbox-mcp --http ADDR ...` and no subcommand", name, cmd)
		})
	}
}

// lookupFunc reads an environment variable, as os.LookupEnv does.
type lookupFunc func(string) (string, bool)

// newLogger returns a text slog logger on w at the given level.
func newLogger(w io.Writer, level string, env lookupFunc) (*slog.Logger, error) {
	if level == "" {
		level, _ = env("CODE_SANDBOX_LOG_LEVEL")
	}
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
		}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// loadConfig reads the configuration and applies the environment and the
// flags on top: flags > environment > file > embedded defaults.
func loadConfig(g globals, env lookupFunc) (*config.Config, error) {
	path := g.configPath
	if path == "" {
		path, _ = env("CODE_SANDBOX_CONFIG")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}

	if v, ok := env("CONTAINERD_ADDRESS"); ok && v != "" {
		cfg.Containerd.Address = v
	}
	if v, ok := env("CONTAINERD_NAMESPACE"); ok && v != "" {
		cfg.Containerd.Namespace = v
	}
	image, _ := env("CONTAINER_IMAGE")
	lang, _ := env("CONTAINER_LANGUAGE")
	switch {
	case image == "" && lang != "":
		return nil, fmt.Errorf("CONTAINER_LANGUAGE=%s is set without CONTAINER_IMAGE; set both (the image to run and the language it runs), or neither", lang)
	case image != "" && lang == "":
		return nil, fmt.Errorf("CONTAINER_IMAGE=%s is set without CONTAINER_LANGUAGE; set CONTAINER_LANGUAGE to the language that image runs: %s", image, strings.Join(cfg.Names(), " or "))
	case image != "":
		l, ok := cfg.Languages[lang]
		if !ok || l.Disabled {
			return nil, fmt.Errorf("CONTAINER_LANGUAGE=%s is not a configured language; want %s", lang, strings.Join(cfg.Names(), " or "))
		}
		l.Image = image
		cfg.Languages[lang] = l
	}

	if g.address != "" {
		cfg.Containerd.Address = g.address
	}
	if g.namespace != "" {
		cfg.Containerd.Namespace = g.namespace
	}
	if g.passEnv.set {
		cfg.Sandbox.PassThroughEnv = g.passEnv.names
	}
	if g.auditLog != "" {
		cfg.Audit.Path = g.auditLog
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration after flags and environment: %w", err)
	}
	return cfg, nil
}

// oneShot adapts an executor configuration for a command that runs a few
// programs and exits (run, doctor): it keeps only the named languages, if
// given and configured, and no pools, which would only create sandboxes
// that nobody uses.
func oneShot(ec exec.Config, only ...string) exec.Config {
	var langs []config.Language
	for _, l := range ec.Languages {
		if len(only) == 0 || slices.Contains(only, l.Name) {
			l.Pool = 0
			langs = append(langs, l)
		}
	}
	if len(langs) > 0 {
		ec.Languages = langs
	}
	return ec
}

// oneVerb reads the verb of subcommand cmd, whose only verb is want, off
// args and returns the arguments after it, and the verb's flag set, which
// prints usage on stderr. ok is false, with the exit
// status to return, where there is nothing to run: help was asked for (the
// usage on stdout), or the verb is missing or unknown (the usage and why
// on stderr).
func oneVerb(cmd, want string, args []string, usage string, stdout, stderr io.Writer) (fs *flag.FlagSet, rest []string, status int, ok bool) {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		fmt.Fprintf(stderr, "code-sandbox-mcp %s: missing verb; want %s\n", cmd, want)
		return nil, nil, exitUsage, false
	}
	switch verb := args[0]; verb {
	case want:
		fs := flag.NewFlagSet(cmd+" "+want, flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.Usage = func() { fmt.Fprint(stderr, usage) }
		return fs, args[1:], exitOK, true
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil, nil, exitOK, false
	default:
		fmt.Fprint(stderr, usage)
		fmt.Fprintf(stderr, "code-sandbox-mcp %s: unknown verb %q; want %s\n", cmd, verb, want)
		return nil, nil, exitUsage, false
	}
}

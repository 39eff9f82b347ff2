// Package app is the server of code-sandbox-mcp: it serves MCP over stdio
// or streamable HTTP, the two transports of one serveMCP, on an executor
// it makes at the first use and again after a failure, with what serving
// needs around it: HTTP's authentication, MCP sessions, connection and
// body bounds, request ids over stdio, Prometheus metrics, the audit log
// and systemd's readiness protocol. It must not know the command line:
// package main parses the flags, resolves the configuration (flags over
// environment over file), owns the signals and the subcommands, and hands
// the server a checked configuration and the serving flags, which New
// applies over the configuration's http table.
package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// DefaultGrace is how long a SIGTERM lets in-flight HTTP calls finish
// before they are cancelled (which kills their sandboxes), unless
// --shutdown-grace says otherwise.
const DefaultGrace = 30 * time.Second

// Options are what the server takes besides its configuration.
type Options struct {
	// Version is the program's version, for the log, the metrics, the
	// audit log and the MCP handshake.
	Version string
	// Env reads the environment, as os.LookupEnv does: the pass-through
	// variables and NOTIFY_SOCKET.
	Env func(string) (string, bool)
	// Logger gets every log line; it must not write to the stdout that
	// Serve serves on.
	Logger *slog.Logger
	// HTTP are the flags of the HTTP transport; HTTP.Addr empty serves
	// stdio.
	HTTP HTTPFlags
}

// HTTPFlags are the serving flags; those that [http] also sets win over
// it. The zero value serves stdio with [http]'s settings.
type HTTPFlags struct {
	// Addr is --http, HOST:PORT; empty serves stdio.
	Addr string
	// AuthTokens is --auth-tokens, the token file; empty is [http]
	// auth_tokens.
	AuthTokens string
	// Origins is --allowed-origins if OriginsSet, even empty; otherwise
	// [http] allowed_origins counts.
	Origins    []string
	OriginsSet bool
	// TLSCert and TLSKey are --tls-cert and --tls-key: both or neither.
	TLSCert, TLSKey string
	// Grace is --shutdown-grace: how long calls in flight may finish
	// after SIGTERM.
	Grace time.Duration
	// MetricsAddr is --metrics-addr, the listener of /metrics's own;
	// empty is [http] metrics_addr.
	MetricsAddr string
}

// lookupFunc reads an environment variable, as os.LookupEnv does.
type lookupFunc func(string) (string, bool)

// Server is a server checked and ready to serve, once.
type Server struct {
	cfg     *config.Config
	env     lookupFunc
	version string
	logger  *slog.Logger
	// tel are the server's metrics; nil: none.
	tel *telemetry
	// hs are the settings of the HTTP transport; nil: stdio.
	hs *httpSettings
	// aud is the audit log, once OpenAudit opened one; nil: none.
	aud *auditor
}

// New checks where the flags, over cfg's [http], say to serve: a
// listener beyond loopback without tokens, half a TLS pair, an origin
// that is not one, a token file that cannot be read are errors of the
// configuration. It opens nothing yet.
func New(cfg *config.Config, o Options) (*Server, error) {
	s := &Server{cfg: cfg, env: o.Env, version: o.Version, logger: o.Logger}
	var err error
	if s.tel, err = newTelemetry(o.HTTP, cfg, o.Version); err != nil {
		return nil, err
	}
	if o.HTTP.Addr != "" {
		hs, err := resolveHTTP(o.HTTP, cfg)
		if err != nil {
			return nil, err
		}
		hs.tel = s.tel
		s.hs = &hs
	}
	return s, nil
}

// OpenAudit opens the configuration's audit log ([audit] path), if it
// has one, and returns what reopens it (SIGHUP: logrotate moved it away),
// nil without one. Close closes it.
func (s *Server) OpenAudit() (reopen func(), err error) {
	if s.aud, err = openAuditor(s.cfg, s.version, s.logger); err != nil || s.aud == nil {
		return nil, err
	}
	return s.aud.rotate, nil
}

// Close closes the audit log, if OpenAudit opened one.
func (s *Server) Close() {
	s.aud.close()
}

// Serve serves MCP until ctx is cancelled (SIGINT, SIGTERM) or, over
// stdio, stdin ends: over streamable HTTP if New was given HTTPFlags.Addr,
// else over stdin and stdout, which then carries protocol frames only.
// Either way it closes the executor, which kills the runs still going and
// deletes every sandbox, before it returns.
func (s *Server) Serve(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	set, unset := passEnvNames(s.cfg, s.env)
	s.logger.Info("starting", "version", s.version, "address", s.cfg.Containerd.Address, "namespace", s.cfg.Containerd.Namespace,
		"languages", s.cfg.Names(), "pass_through_env", set, "pass_through_env_unset", unset)
	if s.hs != nil {
		return s.serveHTTP(ctx)
	}
	return s.serveStdio(ctx, stdin, stdout)
}

// ExecConfig translates the configuration for the executor, as the
// server makes it; run and doctor start from it too, so that what they
// run is what the server would. Only the pass-through variables that env
// sets reach it, as KEY=value.
func ExecConfig(cfg *config.Config, env func(string) (string, bool), logger *slog.Logger) exec.Config {
	ec := exec.Config{
		Address:     cfg.Containerd.Address,
		Namespace:   cfg.Containerd.Namespace,
		Snapshotter: cfg.Containerd.Snapshotter,
		StateDir:    cfg.Sandbox.StateDir,
		Concurrency: cfg.Concurrency(),
		Languages:   cfg.Enabled(),
		UIDs:        cfg.UIDs(),
		UIDLockDir:  cfg.Sandbox.UIDLockDir,
		Init:        cfg.Sandbox.Init,
		Pull:        cfg.Sandbox.Pull == config.PullMissing,
		Sessions:    sessionConfig(cfg),
		LookupEnv:   env,
		Logger:      logger,
	}
	for _, name := range cfg.Sandbox.PassThroughEnv {
		if v, ok := env(name); ok {
			ec.PassEnv = append(ec.PassEnv, name+"="+v)
		}
	}
	return ec
}

// sessionConfig is what [sessions] bounds, for the executor.
func sessionConfig(cfg *config.Config) exec.SessionConfig {
	return exec.SessionConfig{
		Max:         cfg.Sessions.MaxSessions,
		IdleTimeout: time.Duration(cfg.Sessions.IdleTimeout),
		MaxLifetime: time.Duration(cfg.Sessions.MaxLifetime),
	}
}

// passEnvNames lists the pass-through variables that are set, for logs:
// names only, never values.
func passEnvNames(cfg *config.Config, env lookupFunc) (set, unset []string) {
	for _, name := range cfg.Sandbox.PassThroughEnv {
		if _, ok := env(name); ok {
			set = append(set, name)
		} else {
			unset = append(unset, name)
		}
	}
	return set, unset
}

// command is the command line of this program with args, against the
// containerd of cfg: with --namespace always, so that it acts on the
// server's namespace whatever the environment of whoever runs it, and
// with --address when the socket is not the default one. Every hint that
// names a command (import an image, run doctor) is built here, so that
// they all say the same.
func command(cfg *config.Config, args ...string) string {
	parts := []string{"code-sandbox-mcp"}
	if a := cfg.Containerd.Address; a != config.Default().Containerd.Address {
		parts = append(parts, "--address", a)
	}
	parts = append(parts, "--namespace", cfg.Containerd.Namespace)
	return strings.Join(append(parts, args...), " ")
}

// ImportHint is the command that imports an image into cfg's namespace,
// which the server tells a model and doctor and run tell a user.
func ImportHint(cfg *config.Config) string {
	return command(cfg, "images", "import", "FILE")
}

// BuildHint is the command that builds the images of cfg's languages'
// packages tables.
func BuildHint(cfg *config.Config) string {
	args := []string{"images", "build", "--configured"}
	if cfg.File != "" {
		args = append([]string{"--config", cfg.File}, args...)
	}
	return command(cfg, args...)
}

// DoctorHint is the command that diagnoses cfg's set-up.
func DoctorHint(cfg *config.Config) string {
	return command(cfg, "doctor")
}

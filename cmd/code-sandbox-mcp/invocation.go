package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
)

// invocation is one run of a command that talks to containerd: its
// global flags, environment and streams, and its SIGHUP.
type invocation struct {
	g      *globals
	env    lookupFunc
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	hup    *hangup
}

// startInvocation starts watching for the shutdown of a command that
// talks to containerd, and returns the context it cancels and what
// stops the watch. A shutdown is a signal (SIGINT, SIGTERM, or SIGHUP:
// the terminal or the client went away; but with an audit log SIGHUP
// reopens it) or a broken stdout or stderr (the client died and its
// pipes with it). Either way the server kills its programs and deletes
// its sandboxes before it exits, and logs nothing to a dead pipe.
func startInvocation(g *globals, env lookupFunc, stdin io.Reader, stdout, stderr io.Writer) (context.Context, *invocation, func()) {
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	ctx, shutdown := context.WithCancelCause(ctx)
	hup := onHangup(func() { shutdown(errHangup) })
	iv := &invocation{g: g, env: env, stdin: stdin, hup: hup,
		stdout: &brokenPipe{w: stdout, gone: func() { shutdown(errors.New("stdout is closed: the client is gone")) }},
		stderr: &brokenPipe{w: stderr, gone: func() { shutdown(errors.New("stderr is closed: the client is gone")) }},
	}
	return ctx, iv, func() {
		hup.stop()
		shutdown(nil)
		stopSignals()
	}
}

// logger makes the logger on stderr at --log-level. It is made after the
// subcommand's flags are parsed, so that --log-level after the
// subcommand counts.
func (iv *invocation) logger() *slog.Logger {
	l, err := newLogger(iv.stderr, iv.g.logLevel, iv.env)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: %v; using info\n", err)
		l, _ = newLogger(iv.stderr, "info", iv.env)
	}
	return l
}

// command runs cmd, one of the commands that talk to containerd ("" and
// serve are serving), and returns its exit status.
func (iv *invocation) command(ctx context.Context, cmd string, args []string) int {
	// run and doctor accept the global flags after their name too; images
	// parses its own verbs, and serve takes no arguments.
	sub := flag.NewFlagSet(cmd, flag.ContinueOnError)
	sub.SetOutput(iv.stderr)
	iv.g.register(sub)
	refuseHTTPFlags(sub, cmd)

	switch cmd {
	case "", "serve":
		return iv.serve(ctx, args)
	case "run":
		return runCommand(ctx, iv, sub, args)
	case "doctor":
		return iv.doctor(ctx, sub, args)
	case "images":
		return iv.images(ctx, args)
	default:
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
}

// serve serves MCP, over stdio or HTTP, until a shutdown.
func (iv *invocation) serve(ctx context.Context, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: unexpected arguments %q\n%s", args, usage)
		return exitUsage
	}
	log := iv.logger()
	cfg, err := loadConfig(*iv.g, iv.env)
	if err != nil {
		log.Error("configuration", "err", err)
		return exitUsage
	}
	http := iv.g.http
	http.Origins, http.OriginsSet = iv.g.origins.names, iv.g.origins.set
	srv, err := app.New(cfg, app.Options{Version: version, Env: iv.env, Logger: log, HTTP: http})
	if err != nil {
		log.Error("configuration", "err", err)
		return exitUsage
	}
	reopen, err := srv.OpenAudit()
	if err != nil {
		log.Error("audit log", "err", err)
		return exitFailure
	}
	iv.hup.claim(reopen)
	defer srv.Close()
	defer iv.hup.claim(nil)
	if err := srv.Serve(ctx, iv.stdin, iv.stdout); err != nil {
		log.Error("server stopped", "err", err)
		return exitFailure
	}
	return exitOK
}

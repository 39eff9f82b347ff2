// Command code-sandbox-mcp is an MCP server that runs Python and JavaScript
// (and any language its configuration adds) in fresh, hardened containerd
// containers, one per run.
//
// With no arguments it serves MCP over stdio; stdout then carries protocol
// frames only, and every log line goes to stderr. See `code-sandbox-mcp
// help` for the subcommands.
//
// Package main is the command line: its flags, their precedence over the
// environment and the configuration file, the signals, and the
// subcommands (run, doctor, images, token, audit). The server it starts
// is package app.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// A write to a closed stdout or stderr fails with EPIPE instead of
	// killing the process: the client died, and the server must still
	// clean up (realMain shuts down on it).
	signal.Ignore(syscall.SIGPIPE)
	code := realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	// realMain has cleaned up and stopped handling signals; a client's
	// SIGTERM now would only turn this exit into a death by signal.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(code)
}

// realMain is the whole program; it returns the exit status.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer, env lookupFunc) int {
	var g globals
	cmd, args, status, ok := parseCommandLine(&g, args, stderr)
	if !ok {
		return status
	}
	if status, ok := offlineCommand(cmd, args, stdout, stderr); ok {
		return status
	}
	ctx, iv, stop := startInvocation(&g, env, stdin, stdout, stderr)
	defer stop()
	return iv.command(ctx, cmd, args)
}

// parseCommandLine parses the global flags of args into g and splits
// off the subcommand ("" for none) and its arguments; ok is false if the
// program is to exit with status now.
func parseCommandLine(g *globals, args []string, stderr io.Writer) (cmd string, rest []string, status int, ok bool) {
	fs := newGlobalFlagSet(g, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, exitOK, false
		}
		return "", nil, exitUsage, false
	}
	rest = fs.Args()
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	if cmd != "help" && cmd != "-h" && cmd != "--help" {
		if err := misplacedHTTPFlags(fs, cmd); err != nil {
			fmt.Fprintf(stderr, "code-sandbox-mcp: %v\n", err)
			return "", nil, exitUsage, false
		}
	}
	return cmd, rest, exitOK, true
}

// offlineCommand runs cmd if it is one that needs no containerd, no
// configuration and no shutdown (help, token, version, audit), and
// reports whether it was.
func offlineCommand(cmd string, args []string, stdout, stderr io.Writer) (status int, ok bool) {
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK, true
	case "token":
		// token makes a secret and writes a file: no containerd, no configuration.
		return tokenCommand(args, stdout, stderr), true
	case "version":
		fmt.Fprintf(stdout, "code-sandbox-mcp %s\n", version)
		return exitOK, true
	case "audit":
		// audit reads files only: no containerd, no configuration.
		return auditCommand(args, stdout, stderr), true
	}
	return exitOK, false
}

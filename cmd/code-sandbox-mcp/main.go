// Command code-sandbox-mcp is an MCP server that runs Python and JavaScript
// (and any language its configuration adds) in fresh, hardened containerd
// containers, one per run.
//
// With no arguments it serves MCP over stdio; stdout then carries protocol
// frames only, and every log line goes to stderr. See `code-sandbox-mcp
// help` for the subcommands.
package main

import (
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

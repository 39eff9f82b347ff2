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
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

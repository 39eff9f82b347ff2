//go:build race

package integration

import "os"

// Built with -race, the suite builds the server it starts with -race too,
// so that the MCP tests check the server's goroutines, not only the
// executor's in this process; unless SANDBOX_SERVER_RACE=0, which
// scripts/integration sets for its second daemon: a race-built server
// takes about twice as long on the suite's calls, and its races do not
// depend on the daemon's version, so one run with it is enough.
func init() {
	if os.Getenv("SANDBOX_SERVER_RACE") != "0" {
		serverBuildFlags = append(serverBuildFlags, "-race")
	}
}

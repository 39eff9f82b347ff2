//go:build race

package integration

import (
	"os"
	"strings"
)

// Built with -race, the suite builds the server it starts with -race too,
// so that the MCP tests check the server's goroutines, not only the
// executor's in this process.
//
// A program built with -race sleeps for GORACE's atexit_sleep_ms before
// it exits, a second by default: some 380 servers a run, each stopped by
// its test, which waits for its exit. The servers get GORACE with
// atexit_sleep_ms=0 (serverEnv), and so does every program that inherits
// this process's environment; a GORACE of one's own is kept, with
// atexit_sleep_ms=0 added unless it sets that too. Races are reported as
// they happen, and the exit status is 66 after one either way.
func init() {
	serverBuildFlags = append(serverBuildFlags, "-race")
	gorace := os.Getenv("GORACE")
	if !strings.Contains(gorace, "atexit_sleep_ms") {
		gorace = strings.TrimSpace(gorace + " atexit_sleep_ms=0")
	}
	os.Setenv("GORACE", gorace)
	raceEnv = []string{"GORACE=" + gorace}
}

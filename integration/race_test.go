//go:build race

package integration

// Built with -race, the suite builds the server it starts with -race too,
// so that the MCP tests check the server's goroutines, not only the
// executor's in this process.
func init() { serverBuildFlags = append(serverBuildFlags, "-race") }

package sandbox

import (
	"embed"
	"fmt"
	"path/filepath"

	"github.com/containerd/errdefs"

	sandboxoci "code-sandbox-mcp/oci"
)

// sessionDrivers are the drivers that keep a session's interpreter alive:
// drivers/session.py for Python, drivers/session.js for Node.js. See the
// files' own comments for what they do, and package session for how the server
// speaks to them.
//
// drivers/warm.js is the Node.js warm start (see warm.go).
//
//go:embed drivers/session.py drivers/session.js drivers/warm.js
var sessionDrivers embed.FS

// driverFiles are each driver's file, and the arguments that follow the
// language's command to run it (the driver's path last).
var driverFiles = map[string]struct {
	file  string
	flags []string
}{
	"python": {file: "session.py"},
	// Node.js's own REPL transform of top-level await, and the parser it
	// bundles, are internal modules.
	"node": {file: "session.js", flags: []string{"--expose-internals"}},
}

// writeDriver writes the session driver called name into the directory
// code, which the sandbox sees at oci.CodeDir, and returns the arguments
// that run it.
func writeDriver(code, name string) ([]string, error) {
	d, ok := driverFiles[name]
	if !ok {
		return nil, fmt.Errorf("no session driver called %q: %w", name, errdefs.ErrInvalidArgument)
	}
	data, err := sessionDrivers.ReadFile("drivers/" + d.file)
	if err == nil {
		err = writeReadable(filepath.Join(code, d.file), data, 0o444)
	}
	if err != nil {
		return nil, fmt.Errorf("write the session driver: %w", err)
	}
	return append(append([]string(nil), d.flags...), sandboxoci.ProgramPath(d.file)), nil
}

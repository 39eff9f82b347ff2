package exec

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// pythonHook is the Python hook that saves a program's matplotlib figures
// into its workspace: sitecustomize.py, which Python runs at start-up and
// which does almost nothing, and code_sandbox_mcp_figures.py, which it
// loads only once the program imports matplotlib.pyplot. See the files'
// own comments.
//
//go:embed pyhooks/*.py
var pythonHook embed.FS

// writePythonHook writes the Python hook into the run directory dir, under
// hooks/, for the sandbox to mount read-only, and returns that directory.
// Each run has its own copy: it goes with the run directory, and a server
// never changes another's.
func writePythonHook(dir string) (string, error) {
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		return "", fmt.Errorf("create the Python hook directory: %w", err)
	}
	// Mkdir is subject to the umask; the sandbox's user must read the
	// directory it sees mounted (the host's parents are not in its path).
	if err := os.Chmod(hooks, 0o755); err != nil {
		return "", fmt.Errorf("create the Python hook directory: %w", err)
	}
	files, err := fs.Glob(pythonHook, "pyhooks/*.py")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		data, err := pythonHook.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(hooks, filepath.Base(f)), data, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("write the Python hook: %w", err)
		}
	}
	return hooks, nil
}

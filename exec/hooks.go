package exec

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// pythonHook is the sitecustomize module that saves a Python program's
// matplotlib figures into its workspace: see the file's own comment.
//
//go:embed pyhooks/sitecustomize.py
var pythonHook []byte

// writePythonHook writes the Python start-up hook into the run directory
// dir, as hooks/sitecustomize.py, for the sandbox to mount read-only, and
// returns that directory. Each run has its own copy: it goes with the run
// directory, and a server never changes another's.
func writePythonHook(dir string) (string, error) {
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		return "", fmt.Errorf("create the Python hook directory: %w", err)
	}
	// Mkdir is subject to the umask; the sandbox's user must read the
	// directory it sees mounted (the host's parents are not in its path).
	err := os.Chmod(hooks, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(hooks, "sitecustomize.py"), pythonHook, 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("write the Python hook: %w", err)
	}
	return hooks, nil
}

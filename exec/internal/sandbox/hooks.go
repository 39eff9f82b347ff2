package sandbox

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// pythonHook is the Python start-up hook: sitecustomize.py, which Python
// runs at start-up and which does almost nothing unless asked (it is also
// the warm start's driver: see warm.go), and code_sandbox_mcp_figures.py,
// which saves a program's matplotlib figures into its workspace, loaded
// only once the program imports matplotlib.pyplot. See the files' own
// comments.
//
//go:embed pyhooks/*.py
var pythonHook embed.FS

// userSiteMarker is the file whose presence in the hook's directory has
// sitecustomize.py make pip's user site and put it on sys.path.
const userSiteMarker = "code_sandbox_mcp_user_site"

// writePythonHook writes the Python hook into the run directory dir, under
// hooks/, for the sandbox to mount read-only, and returns that directory:
// sitecustomize.py, with figures the figure hook, and with userSite the
// marker that has the hook make pip's user site (see pipEnv). Each run
// has its own copy: it goes with the run directory, and a server never
// changes another's.
func writePythonHook(dir string, figures, userSite bool) (string, error) {
	hooks, err := makeHookDir(dir)
	if err != nil {
		return "", err
	}
	files, err := fs.Glob(pythonHook, "pyhooks/*.py")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if !figures && filepath.Base(f) == "code_sandbox_mcp_figures.py" {
			continue // sitecustomize.py looks for it
		}
		data, err := pythonHook.ReadFile(f)
		if err == nil {
			err = writeReadable(filepath.Join(hooks, filepath.Base(f)), data, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("write the Python hook: %w", err)
		}
	}
	if userSite {
		if err := writeReadable(filepath.Join(hooks, userSiteMarker), nil, 0o644); err != nil {
			return "", fmt.Errorf("write the Python hook: %w", err)
		}
	}
	return hooks, nil
}

// writeNodeHook writes the Node.js warm start (drivers/warm.js) into the
// run directory dir, under hooks/, for the sandbox to mount read-only at
// oci.NodeHooksDir, and returns that directory.
func writeNodeHook(dir string) (string, error) {
	hooks, err := makeHookDir(dir)
	if err != nil {
		return "", err
	}
	data, err := sessionDrivers.ReadFile("drivers/warm.js")
	if err == nil {
		err = writeReadable(filepath.Join(hooks, "warm.js"), data, 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("write the Node.js warm start: %w", err)
	}
	return hooks, nil
}

func makeHookDir(dir string) (string, error) {
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		return "", fmt.Errorf("create the hook directory: %w", err)
	}
	// Mkdir is subject to the umask; the sandbox's user must read the
	// directory it sees mounted (the host's parents are not in its path).
	if err := os.Chmod(hooks, 0o755); err != nil {
		return "", fmt.Errorf("create the hook directory: %w", err)
	}
	return hooks, nil
}

// writeReadable writes a file that the sandbox's user reads through a
// read-only mount, with mode perm whatever the server's umask: a service
// run with UMask=0077 would otherwise leave it unreadable to that user.
func writeReadable(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// What the server writes for the sandbox's user to read keeps its mode
// under a umask of 0077 (a service's UMask=0077): before, the hooks came
// out 0600, owned by root, and every warm start failed to read them.
func TestFilesForTheSandboxIgnoreTheUmask(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := t.TempDir()
	for _, d := range []string{"py", "node", "code"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	py, err := writePythonHook(filepath.Join(dir, "py"), true, true)
	if err != nil {
		t.Fatal(err)
	}
	node, err := writeNodeHook(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	code := filepath.Join(dir, "code")
	if _, err := writeDriver(code, "python"); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		py:                                    0o755 | os.ModeDir,
		filepath.Join(py, "sitecustomize.py"): 0o644,
		filepath.Join(py, "code_sandbox_mcp_figures.py"): 0o644,
		filepath.Join(py, "code_sandbox_mcp_display.py"): 0o644,
		filepath.Join(py, userSiteMarker):                0o644,
		node:                                             0o755 | os.ModeDir,
		filepath.Join(node, "warm.js"):                   0o644,
		filepath.Join(code, driverFiles["python"].file):  0o444,
	}
	for path, mode := range want {
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v; want %v", path, fi.Mode(), mode)
		}
	}
}

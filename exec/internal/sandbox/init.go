package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/containers/sandboxinit"
)

// TiniStatic is Debian's static build of tini (package tini), the init a
// sandbox runs where the server has no code-sandbox-init beside it.
const TiniStatic = "/usr/bin/tini-static"

// DefaultInit returns the host path of the init every sandbox runs as its
// pid 1 unless configured otherwise: code-sandbox-init beside the
// server's own executable where there is one, else TiniStatic. Both reap
// orphans, forward signals and exit with the program's status; ours also
// lets go of its copies of the output pipes, so that a run ends with its
// program rather than with the init (see Sandbox.waitExit).
func DefaultInit() string {
	if exe, err := os.Executable(); err == nil {
		ours := filepath.Join(filepath.Dir(exe), sandboxinit.Name)
		if _, err := os.Stat(ours); err == nil {
			return ours
		}
	}
	return TiniStatic
}

// CheckInit checks that path (DefaultInit if empty) is an init that a
// sandbox can run whatever its image holds, and returns the path: an
// absolute path to a regular, executable, statically linked ELF file,
// writable by its owner alone, since it is mounted into every sandbox
// and runs as its pid 1.
func CheckInit(path string) (string, error) {
	if path == "" {
		path = DefaultInit()
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("the sandboxes' init %q is not an absolute path: %w", path, errdefs.ErrInvalidArgument)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the sandboxes' init %s does not exist: build code-sandbox-init beside the server (make build), or install tini (on Debian and Ubuntu `apt-get install tini`, which has /usr/bin/tini-static), or set [sandbox] init to a static init that runs what follows its \"--\" as its child: %w", path, errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return "", fmt.Errorf("the sandboxes' init: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("the sandboxes' init %s is not a regular file: %w", path, errdefs.ErrFailedPrecondition)
	case fi.Mode().Perm()&0o111 != 0o111:
		return "", fmt.Errorf("the sandboxes' init %s is not executable by everyone (mode %v): each sandbox runs it as a uid of its own: %w", path, fi.Mode().Perm(), errdefs.ErrFailedPrecondition)
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("the sandboxes' init %s is writable by its group or others (mode %v): it runs in every sandbox, so only its owner may change it: %w", path, fi.Mode().Perm(), errdefs.ErrFailedPrecondition)
	}
	if err := checkStatic(path); err != nil {
		return "", err
	}
	return path, nil
}

// checkStatic checks that the ELF file at path needs no dynamic loader:
// an image need not hold the host's.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the sandboxes' init %s is not an executable this server can read: %v: %w", path, err, errdefs.ErrFailedPrecondition)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the sandboxes' init %s is dynamically linked, and an image need not hold its loader and libraries: use a static build, such as tini-static: %w", path, errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}

// initFatal is the reason the init gave on stderr for a program it could
// not start ("exec python3 failed: No such file or directory", from tini's
// "[FATAL tini (7)] exec python3 failed: ..."), or a sentence saying it
// gave none.
func initFatal(stderr []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(stderr)), "\n")
	if _, why, ok := strings.Cut(line, "] "); ok && strings.HasPrefix(line, "[FATAL ") {
		line = why
	}
	if line == "" {
		return "the init could not exec it and said nothing"
	}
	return "the init could not exec it: " + line
}

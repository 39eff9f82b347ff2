// Package sandboxinit builds code-sandbox-init, the init that runs as pid 1
// of every sandbox (src/init.c says what it does), from the C source it embeds (src/init.c).
package sandboxinit

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Name is the init's file name. The server runs the one beside its own
// executable by default (exec/internal/sandbox: DefaultInit), where make
// setup builds it.
const Name = "code-sandbox-init"

//go:embed src/init.c
var source []byte

// Build compiles the init, statically linked, to out with the host's C
// compiler (cc; gcc and libc6-dev on Debian), as scripts/setup does.
func Build(out string) error {
	dir, err := os.MkdirTemp("", "sandboxinit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "init.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return err
	}
	cmd := exec.Command("cc", append(Flags(), "-o", out, src)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s with cc (on Debian: apt-get install gcc libc6-dev): %v\n%s", Name, err, b)
	}
	return os.Chmod(out, 0o755)
}

// Flags are the C compiler's flags for the init: static, so that an image
// need not hold a C library, and warnings as errors.
func Flags() []string {
	return []string{"-static", "-O2", "-Wall", "-Wextra", "-Werror"}
}

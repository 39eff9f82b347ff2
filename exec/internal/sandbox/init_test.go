package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckInit takes Debian's static tini (and code-sandbox-init, which the
// integration suite's servers have beside them), and refuses, saying
// why, an init a sandbox could not run or that others could change.
func TestCheckInit(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, want string
		mode             os.FileMode
	}{
		{name: "missing", path: filepath.Join(dir, "none"), want: "apt-get install tini"},
		{name: "relative", path: "bin/tini", want: "not an absolute path"},
		{name: "directory", path: dir, want: "not a regular file"},
		{name: "a script", path: script, want: "not an executable this server can read"},
		{name: "not executable", path: script, mode: 0o644, want: "not executable by everyone"},
		{name: "writable by others", path: script, mode: 0o777, want: "writable by its group or others"},
		{name: "dynamically linked", path: "/bin/sh", want: "dynamically linked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.mode != 0 {
				if err := os.Chmod(c.path, c.mode); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(c.path, 0o755)
			}
			_, err := CheckInit(c.path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CheckInit(%s): %v; want an error saying %q", c.path, err, c.want)
			}
		})
	}
	// The test binary has no code-sandbox-init beside it: the default is
	// Debian's tini.
	if _, err := os.Stat(TiniStatic); err != nil {
		t.Fatalf("this test needs %s (apt-get install tini): %v", TiniStatic, err)
	}
	if got, err := CheckInit(""); got != TiniStatic || err != nil {
		t.Errorf("CheckInit(\"\") = %q, %v; want %s, nil", got, err, TiniStatic)
	}
}

// initFatal gives tini's reason for a program it could not start, without
// its prefix, and says so where the init said nothing.
func TestInitFatal(t *testing.T) {
	for _, c := range []struct{ stderr, want string }{
		{"[FATAL tini (7)] exec python3 failed: No such file or directory\n", "the init could not exec it: exec python3 failed: No such file or directory"},
		{"something else\nand more\n", "the init could not exec it: something else"},
		{"", "the init could not exec it and said nothing"},
	} {
		if got := initFatal([]byte(c.stderr)); got != c.want {
			t.Errorf("initFatal(%q) = %q; want %q", c.stderr, got, c.want)
		}
	}
}

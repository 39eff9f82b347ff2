package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// writeCgroupFile never creates a file: on cgroup v2 a missing cpu.shares
// must read as missing, so that Foreground goes on to cpu.weight.
func TestWriteCgroupFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "cpu.shares")
	if err := writeCgroupFile(missing, "1024"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writeCgroupFile created %s", missing)
	}
	there := filepath.Join(dir, "cpu.weight")
	if err := os.WriteFile(there, []byte("5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeCgroupFile(there, "100"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(there); string(b) != "100" {
		t.Errorf("cpu.weight holds %q; want 100", b)
	}
}

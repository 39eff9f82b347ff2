package watch

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupDirOf(t *testing.T) {
	for _, tc := range []struct{ name, proc, want string }{
		{"v1 hybrid", "12:pids:/code-sandbox/csm-1\n7:cpu,cpuacct:/code-sandbox/csm-1\n5:memory:/code-sandbox/csm-1\n0::/\n", "/r/memory/code-sandbox/csm-1"},
		{"v2", "0::/code-sandbox/csm-1\n", "/r/code-sandbox/csm-1"},
		{"none", "garbage\n", ""},
	} {
		if got := cgroupDirOf(tc.proc, "/r", "memory"); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}
	if got, want := cgroupDirOf("7:cpu,cpuacct:/code-sandbox/csm-1\n5:memory:/x\n", "/r", "cpu"), "/r/cpu/code-sandbox/csm-1"; got != want {
		t.Errorf("cpu: got %q; want %q", got, want)
	}
}

func TestOOMKills(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(v1, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 0o644)
	os.WriteFile(filepath.Join(v2, "memory.events"), []byte("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644)
	if n, ok := oomKills(v1); n != 3 || !ok {
		t.Errorf("v1: got %d, %v; want 3", n, ok)
	}
	if n, ok := oomKills(v2); n != 2 || !ok {
		t.Errorf("v2: got %d, %v; want 2", n, ok)
	}
	if _, ok := oomKills(t.TempDir()); ok {
		t.Error("no files: got ok; want not ok")
	}
}

// On this host, the test's own memory cgroup is found and its OOM kills
// can be read: the path and the file are the kernel's, not a fixture's.
func TestOwnMemoryCgroupHasAnOOMCount(t *testing.T) {
	dir := MemoryCgroup(uint32(os.Getpid()))
	if _, err := os.Stat(dir); dir == "" || err != nil {
		t.Fatalf("memory cgroup of this process: %q (%v); want an existing directory", dir, err)
	}
	if _, ok := oomKills(dir); !ok {
		t.Errorf("%s: no oom_kill count in memory.events or memory.oom_control", dir)
	}
}

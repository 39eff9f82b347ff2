package exec

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryCgroupOf(t *testing.T) {
	for _, tc := range []struct{ name, proc, want string }{
		{"v1 hybrid", "12:pids:/code-sandbox/csm-1\n7:cpu,cpuacct:/code-sandbox/csm-1\n5:memory:/code-sandbox/csm-1\n0::/\n", "/r/memory/code-sandbox/csm-1"},
		{"v2", "0::/code-sandbox/csm-1\n", "/r/code-sandbox/csm-1"},
		{"none", "garbage\n", ""},
	} {
		if got := memoryCgroupOf(tc.proc, "/r"); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
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

// A run killed at its deadline whose OOM event never came (a shim that
// went away first) is still reported OOM-killed when its memory cgroup
// counted a kill, and not otherwise.
func TestExplainReadsTheCgroupsOOMCount(t *testing.T) {
	for _, kills := range []int{0, 1} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+string(rune('0'+kills))+"\n"), 0o644)
		s := &sandbox{oom: make(chan struct{}), memCgroup: dir, ooms: (&oomWatch{}).track(dir)}
		res := &Result{TimedOut: true}
		s.explain(res, 137)
		if res.OOMKilled != (kills > 0) || res.Signal != "SIGKILL" {
			t.Errorf("%d kills counted: got OOMKilled %v, signal %q; want %v, SIGKILL", kills, res.OOMKilled, res.Signal, kills > 0)
		}
	}
}

// In a session, kills told before the cell (oomsTold) are not the
// interpreter's: an exit after them is an exit, though the OOM event
// came, and a kill past them is an OOM kill.
func TestExplainLeavesOutKillsTold(t *testing.T) {
	for _, tc := range []struct {
		name          string
		counted, told uint64
		code          uint32
		want          bool
	}{
		{"an exit after a kill told", 1, 1, 4, false},
		{"a kill past those told", 2, 1, 4, true},
		{"no kill told, the event came", 1, 0, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "memory.events"), fmt.Appendf(nil, "oom 1\noom_kill %d\n", tc.counted), 0o644)
			oom := make(chan struct{})
			close(oom) // the event of the first kill
			s := &sandbox{oom: oom, memCgroup: dir, ooms: (&oomWatch{}).track(dir)}
			s.oomsTold.Store(tc.told)
			res := &Result{ExitCode: int(tc.code)}
			s.explain(res, tc.code)
			if res.OOMKilled != tc.want {
				t.Errorf("%d kills counted, %d told, status %d: got OOMKilled %v; want %v", tc.counted, tc.told, tc.code, res.OOMKilled, tc.want)
			}
		})
	}
}

// On this host, the test's own memory cgroup is found and its OOM kills
// can be read: the path and the file are the kernel's, not a fixture's.
func TestOwnMemoryCgroupHasAnOOMCount(t *testing.T) {
	dir := memoryCgroup(uint32(os.Getpid()))
	if _, err := os.Stat(dir); dir == "" || err != nil {
		t.Fatalf("memory cgroup of this process: %q (%v); want an existing directory", dir, err)
	}
	if _, ok := oomKills(dir); !ok {
		t.Errorf("%s: no oom_kill count in memory.events or memory.oom_control", dir)
	}
}

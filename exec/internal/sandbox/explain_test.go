package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"code-sandbox-mcp/exec/internal/watch"
)

// A run killed at its deadline whose OOM event never came (a shim that
// went away first) is still reported OOM-killed when its memory cgroup
// counted a kill, and not otherwise.
func TestExplainReadsTheCgroupsOOMCount(t *testing.T) {
	for _, kills := range []int{0, 1} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+string(rune('0'+kills))+"\n"), 0o644)
		s := &Sandbox{oom: make(chan struct{}), memCgroup: dir, ooms: (&watch.OOMs{}).Track(dir)}
		res := &Result{TimedOut: true}
		s.Explain(res, 137)
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
			s := &Sandbox{oom: oom, memCgroup: dir, ooms: (&watch.OOMs{}).Track(dir)}
			s.oomsTold.Store(tc.told)
			res := &Result{ExitCode: int(tc.code)}
			s.Explain(res, tc.code)
			if res.OOMKilled != tc.want {
				t.Errorf("%d kills counted, %d told, status %d: got OOMKilled %v; want %v", tc.counted, tc.told, tc.code, res.OOMKilled, tc.want)
			}
		})
	}
}

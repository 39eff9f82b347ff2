package sweep

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOrphaned(t *testing.T) {
	me := Owner{instance: "me", boot: "boot-a", pidNS: "pid:[1]", pid: 1, start: "1"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	past := now.Add(-time.Second).Format(time.RFC3339)
	future := now.Add(time.Hour).Format(time.RFC3339)

	// A live process, ours, with its real start time, and a pid no
	// process can have: one above the kernel's pid_max.
	live := os.Getpid()
	liveStart, err := startTime(live)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	dead := pidMax + 1
	label := func(boot, pidNS string, pid int, start string) string {
		return Owner{boot: boot, pidNS: pidNS, pid: pid, start: start}.Label()
	}

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"own instance, deadline passed and owner dead", map[string]string{
			LabelInstance: "me", LabelDeadline: past, LabelOwner: label("boot-b", "pid:[1]", dead, "1"),
		}, false},
		{"deadline passed, owner alive in another pid namespace", map[string]string{
			LabelInstance: "other", LabelDeadline: past, LabelOwner: label("boot-a", "pid:[2]", live, liveStart),
		}, true},
		{"deadline passed, owner alive here", map[string]string{
			LabelInstance: "other", LabelDeadline: past, LabelOwner: label("boot-a", "pid:[1]", live, liveStart),
		}, true},
		{"another boot, deadline to come", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-b", "pid:[1]", live, liveStart),
		}, true},
		{"same boot and pid namespace, owner dead", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-a", "pid:[1]", dead, liveStart),
		}, true},
		{"same boot and pid namespace, owner dead, label without a start time", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-a", "pid:[1]", dead, ""),
		}, true},
		{"same boot and pid namespace, owner alive", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-a", "pid:[1]", live, liveStart),
		}, false},
		{"same boot and pid namespace, pid reused by a later process", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-a", "pid:[1]", live, liveStart+"0"),
		}, true},
		{"another pid namespace, no deadline", map[string]string{
			LabelInstance: "other", LabelOwner: label("boot-a", "pid:[2]", dead, "1"),
		}, false},
		{"another pid namespace, deadline to come", map[string]string{
			LabelInstance: "other", LabelDeadline: future, LabelOwner: label("boot-a", "pid:[2]", dead, "1"),
		}, false},
		{"owner label of three parts", map[string]string{
			LabelInstance: "other", LabelOwner: "boot-b/pid:[1]/" + strconv.Itoa(dead),
		}, false},
		{"owner label with a pid that is not a number", map[string]string{
			LabelInstance: "other", LabelOwner: "boot-a/pid:[1]/x/1",
		}, false},
		{"no owner label, no deadline", map[string]string{LabelInstance: "other"}, false},
		{"deadline not RFC 3339, owner alive here", map[string]string{
			LabelInstance: "other", LabelDeadline: "yesterday", LabelOwner: label("boot-a", "pid:[1]", live, liveStart),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := orphaned(tc.labels, me, now); got != tc.want {
				t.Errorf("orphaned(%v) by %+v at %s: got %v; want %v", tc.labels, me, now.Format(time.RFC3339), got, tc.want)
			}
		})
	}
}

func TestStartTime(t *testing.T) {
	got, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.ParseUint(got, 10, 64); err != nil || n == 0 {
		t.Errorf("start time of this process: got %q; want a positive number of clock ticks", got)
	}
	if got2, _ := startTime(os.Getpid()); got2 != got {
		t.Errorf("start time read twice: got %q then %q; want the same", got, got2)
	}
}

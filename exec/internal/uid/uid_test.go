package uid

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
)

// testRange is a range no account of this machine uses.
var testRange = config.UIDRange{First: 2100000000, Last: 2100000002}

func newTestUIDs(t *testing.T, r config.UIDRange, dir string) *Claims {
	t.Helper()
	u, err := New(r, dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Abandon)
	return u
}

func TestUIDClaimsAreExclusiveAcrossClaimants(t *testing.T) {
	dir := t.TempDir()
	a := newTestUIDs(t, testRange, dir)
	b := newTestUIDs(t, testRange, dir)
	var got []uint32
	for i := 0; i < testRange.Size(); i++ {
		uid, err := a.Claim("run-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if !testRange.Contains(uid) || slices.Contains(got, uid) {
			t.Fatalf("claim %d gave %d; want a uid of %v not given before (%v)", i, uid, testRange, got)
		}
		got = append(got, uid)
	}
	// Another claimant on the same directory, another server in effect,
	// finds none free, and neither does the first.
	if uid, err := b.Claim("other"); !errdefs.IsResourceExhausted(err) {
		t.Fatalf("second claimant: got uid %d, err %v; want every uid held", uid, err)
	}
	if _, err := a.Claim("more"); !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "uid_range") {
		t.Fatalf("first claimant: got %v; want an error naming uid_range", err)
	}
	a.Release(got[1])
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(int(got[1])))); !os.IsNotExist(err) {
		t.Errorf("released uid's claim file: stat gave %v; want it removed", err)
	}
	uid, err := b.Claim("other")
	if err != nil || uid != got[1] {
		t.Fatalf("after a release: got %d, %v; want the released %d", uid, err, got[1])
	}
	b.Release(uid)
}

func TestUIDOfALeftClaimIsTakenOnlyWithoutProcesses(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, as make test does: it starts a process as another uid")
	}
	dir := t.TempDir()
	r := config.UIDRange{First: testRange.First, Last: testRange.First + 1}
	// A dead server's claims: files with a record, locked by nobody.
	for _, uid := range []uint32{r.First, r.Last} {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(int(uid))), []byte("pid 1 run gone\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An orphan's process still runs as the first.
	orphan := osexec.Command("sleep", "60")
	orphan.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: r.First, Gid: r.First}}
	u := newTestUIDs(t, r, dir) // before the orphan: it is not busy from the start
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill(); orphan.Wait() })
	for range 2 {
		uid, err := u.Claim("new")
		if err != nil || uid != r.Last {
			t.Fatalf("got %d, %v; want %d, the left claim without a process", uid, err, r.Last)
		}
		u.Release(uid)
		os.WriteFile(filepath.Join(dir, strconv.Itoa(int(r.Last))), []byte("pid 1 run gone\n"), 0o600)
	}
	// Once the sweep deleted the orphan, its uid is free again.
	orphan.Process.Kill()
	orphan.Wait()
	u.ClearStale(r.First)
	held, err := u.Claim("a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := u.Claim("b")
	if err != nil {
		t.Fatal(err)
	}
	if !(held == r.First || other == r.First) {
		t.Errorf("got %d and %d; want %d among them once its orphan is gone", held, other, r.First)
	}
}

func TestUIDOfARunningProcessIsNeverGiven(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, as make test does: it starts a process as another uid")
	}
	r := config.UIDRange{First: testRange.First, Last: testRange.First + 1}
	p := osexec.Command("sleep", "60")
	p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: r.First, Gid: r.First}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	u := newTestUIDs(t, r, t.TempDir())
	uid, err := u.Claim("a")
	if err != nil || uid != r.Last {
		t.Fatalf("got %d, %v; want %d: %d is a running process's", uid, err, r.Last, r.First)
	}
	if uid, err := u.Claim("b"); err == nil {
		t.Fatalf("got %d; want no uid: the other is a running process's", uid)
	}
}

func TestUIDRangeClearOfHostIDs(t *testing.T) {
	etc := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("passwd", "root:x:0:0:root:/root:/bin/sh\nalice:x:100500:100500::/home/alice:/bin/sh\n")
	write("group", "root:x:0:\nstaff:x:200100:\n")
	write("subuid", "alice:300000:65536\n")
	write("subgid", "# comment\nalice:400000:65536\n")
	for _, tc := range []struct {
		r    config.UIDRange
		want string // "" for accepted
	}{
		{config.UIDRange{First: 100000, Last: 100999}, "passwd has alice with id 100500"},
		{config.UIDRange{First: 200100, Last: 200100}, "group has staff with id 200100"},
		{config.UIDRange{First: 365535, Last: 365600}, "subuid gives alice the ids 300000-365535"},
		{config.UIDRange{First: 350000, Last: 450000}, "subgid gives alice the ids 400000-465535"},
		{config.UIDRange{First: 465536, Last: 500000}, ""},
	} {
		err := checkHostIDs(tc.r, etc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v; want it accepted", tc.r, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "uid_range")):
			t.Errorf("%v: got %v; want an error naming uid_range and %q", tc.r, err, tc.want)
		}
	}
	// The machine's own databases: root's range is refused by config, but
	// daemon accounts such as bin (2) sit low.
	if err := checkHostIDs(config.UIDRange{First: 1, Last: 10}, "/etc"); err == nil {
		t.Error("range 1-10: accepted; want it refused for the host's system accounts")
	}
}

func TestUIDStatusCountsLiveClaims(t *testing.T) {
	dir := t.TempDir()
	u := newTestUIDs(t, testRange, dir)
	held, err := Status(testRange, dir)
	if err != nil || held != 0 {
		t.Fatalf("no claims: got %d, %v; want 0", held, err)
	}
	a, err := u.Claim("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Claim("b"); err != nil {
		t.Fatal(err)
	}
	// A claim its holder left behind is not held.
	for uid := testRange.First; uid <= testRange.Last; uid++ {
		f := filepath.Join(dir, strconv.Itoa(int(uid)))
		if _, err := os.Stat(f); os.IsNotExist(err) {
			os.WriteFile(f, []byte("pid 1 run gone\n"), 0o600)
		}
	}
	if held, err := Status(testRange, dir); err != nil || held != 2 {
		t.Errorf("two claims: got %d, %v; want 2", held, err)
	}
	u.Release(a)
	if held, err := Status(testRange, dir); err != nil || held != 1 {
		t.Errorf("after a release: got %d, %v; want 1", held, err)
	}
	if _, err := Status(config.UIDRange{First: 1, Last: 10}, dir); err == nil {
		t.Error("range 1-10: got no error; want it refused for the host's system accounts")
	}
}

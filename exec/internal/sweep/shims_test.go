package sweep

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestIsShimOf(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "ns", "-id", "csm-1", "-address", "/run/containerd/containerd.sock"}, true},
		{[]string{"containerd-shim-runc-v2", "--namespace=ns", "--id=csm-1"}, true},
		{[]string{"containerd-shim-runc-v2", "-namespace", "other", "-id", "csm-1"}, false},
		{[]string{"containerd-shim-runc-v2", "-namespace", "ns", "-id", "csm-2"}, false},
		{[]string{"containerd-shim-runc-v2", "-namespace", "ns", "-id"}, false},
		{[]string{"/usr/bin/python3", "-namespace", "ns", "-id", "csm-1"}, false},
		{[]string{"containerd", "-namespace", "ns", "-id", "csm-1"}, false},
		{nil, false},
	} {
		if got := isShimOf(tt.args, "ns", "csm-1"); got != tt.want {
			t.Errorf("isShimOf(%q): got %v; want %v", tt.args, got, tt.want)
		}
	}
}

// sameProcess tells a live process from one that has exited (a zombie,
// not yet waited for) and from one that is gone.
func TestSameProcess(t *testing.T) {
	self := os.Getpid()
	start, err := startTime(self)
	if err != nil {
		t.Fatal(err)
	}
	if !sameProcess(self, start) {
		t.Error("this process: got not the same")
	}
	if sameProcess(self, start+"0") {
		t.Error("this process with another start time: got the same")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	childStart, err := startTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sameProcess(pid, childStart) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if sameProcess(pid, childStart) {
		t.Error("an exited child not yet waited for: got still the same process")
	}
	cmd.Wait()
	if sameProcess(pid, childStart) {
		t.Error("a child waited for: got still the same process")
	}
}

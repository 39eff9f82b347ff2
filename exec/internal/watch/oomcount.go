package watch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the host's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// MemoryCgroup returns the host directory of the memory cgroup that the
// process pid is in, read from /proc/PID/cgroup: the memory controller's
// own hierarchy on cgroup v1 (or hybrid), the unified one on v2. It
// returns "" if it cannot tell.
func MemoryCgroup(pid uint32) string { return CgroupDir(pid, "memory") }

// CgroupDir returns the host directory of the cgroup of controller (such
// as "memory" or "cpu") that the process pid is in: the controller's own
// hierarchy on cgroup v1 (or hybrid), the unified one on v2; "" if it
// cannot tell.
func CgroupDir(pid uint32, controller string) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/cgroup")
	if err != nil {
		return ""
	}
	return cgroupDirOf(string(b), cgroupRoot, controller)
}

// cgroupDirOf finds controller's cgroup directory under root in the
// content of a /proc/PID/cgroup file. A v1 hierarchy is mounted at
// root/CONTROLLER (Debian and systemd link cpu and cpuacct to their
// shared cpu,cpuacct).
func cgroupDirOf(procCgroup, root, controller string) string {
	var unified string
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			unified = filepath.Join(root, f[2])
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == controller {
				return filepath.Join(root, controller, f[2])
			}
		}
	}
	return unified
}

// oomKills reads how many processes the kernel's OOM killer has killed in
// the memory cgroup at dir: the oom_kill line of memory.oom_control
// (cgroup v1) or of memory.events (v2). ok is false if neither says.
func oomKills(dir string) (n uint64, ok bool) {
	if dir == "" {
		return 0, false
	}
	for _, name := range []string{"memory.events", "memory.oom_control"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(line, "oom_kill "); found {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

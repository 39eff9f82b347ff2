package integration

// The isolation suite, case 41 of issue 24: the run's cgroup, as the
// program sees it, on cgroup v1 and v2 alike.

import (
	"testing"
)

// Case 41: the program sees no cgroup file system (the spec mounts none at
// /sys/fs/cgroup, which stays the read-only sysfs's empty directory) and
// cannot mount one, and in its cgroup namespace every hierarchy's path is
// "/": it learns neither the host's cgroup tree nor its own run id, and
// has no file through which to change a limit or leave its cgroup.
func TestIsolationOwnCgroup(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, serverSpec{})
		r := m.hostile(t, s, "python", pyProbe+`
paths = set(l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().split())
out['paths'] = ','.join(sorted(paths))
# Field 9 of a mountinfo line (after the separator "-") is the type.
types = [l.split(' - ')[1].split()[0] for l in open('/proc/self/mountinfo').read().splitlines()]
out['cgroup mounts'] = str(sum(t in ('cgroup', 'cgroup2') for t in types))
check('list /sys/fs/cgroup', lambda: ','.join(sorted(os.listdir('/sys/fs/cgroup'))))
os.makedirs('/tmp/cg', exist_ok=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
for fs in ('cgroup2', 'cgroup'):
    ctypes.set_errno(0)
    rc = libc.mount(fs.encode(), b'/tmp/cg', fs.encode(), 0, b'memory' if fs == 'cgroup' else None)
    out['mount ' + fs] = 'ok' if rc == 0 else ename(ctypes.get_errno())
`+pyReport)
		assertReport(t, probeReport(t, r), map[string]string{
			"paths":               "/",
			"cgroup mounts":       "0",
			"list /sys/fs/cgroup": "",
			"mount cgroup2":       "EPERM",
			"mount cgroup":        "EPERM",
		})
		afterCase(t, s, r)
	})
}

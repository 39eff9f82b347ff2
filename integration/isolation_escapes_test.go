package integration

// The isolation suite, cases 6, 8, 14-20 and 22-26 of issue 4 and case 41
// of issue 24: escapes, what a hostile program may read, write, call and
// leave behind (the root file system, the host's secrets, kernel tunables,
// namespaces, other processes, system calls, devices, setuid binaries, the
// environment, descriptors, processes that outlive the run, core files,
// the posture read from the host, and its cgroup on v1 and v2 alike), each
// run through the real server on a real containerd with the outcome it
// must get, and then the host checked by afterCase (and, when each mode's
// server exits, by m.start's cleanup). Python reaches raw system calls
// through ctypes with x86_64 numbers (pyProbe); JavaScript is tried where
// the attack differs.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxoci "code-sandbox-mcp/oci"
)

// onHost returns ifThere if path exists on the host, and "ENOENT" if not:
// a kernel without the file cannot leak it, and masking it is a no-op.
func onHost(path, ifThere string) string {
	if _, err := os.Stat(path); err != nil {
		return "ENOENT"
	}
	return ifThere
}

// Case 6: the root file system and the program's directory are read-only.
func TestIsolationRootFSReadOnly(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		// New names only: writing an existing root-owned file would fail with
		// EACCES before the read-only check, which proves less. The file
		// renamed is the sandbox's program: in a session, the driver the
		// cell runs in.
		prog := m.program("python")
		r := m.hostile(t, s, "python", `
import errno, os
def try_(what, f, *a):
    try:
        f(*a)
        print(what, 'ok')
    except OSError as e:
        print(what, errno.errorcode[e.errno])
for d in ['/', '/usr/lib', '/etc', '/var/tmp', '/home', '/sandbox']:
    try_('create ' + d, lambda: open(os.path.join(d, 'new'), 'x').close())
try_('mkdir /', os.mkdir, '/newdir')
try_('rename `+prog+`', os.rename, '`+prog+`', '/sandbox/x.py')
`)
		want := "create / EROFS\ncreate /usr/lib EROFS\ncreate /etc EROFS\ncreate /var/tmp EROFS\ncreate /home EROFS\ncreate /sandbox EROFS\n" +
			"mkdir / EROFS\nrename " + prog + " EROFS\n"
		if r.text != want || r.isError {
			t.Errorf("got %q; want %q", r.text, want)
		}
		afterCase(t, s, r)
	})
}

// Case 8: what a run leaves in /tmp and /dev/shm is gone for the next one;
// /var/tmp is read-only.
func TestIsolationNoLeftoverFiles(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		first := m.hostile(t, s, "python", `
import errno, os
for p in ['/tmp/left', '/tmp/.hidden/left', '/dev/shm/left', '/var/tmp/left']:
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, 'w').write('secret')
        print(p, 'written')
    except OSError as e:
        print(p, errno.errorcode[e.errno])
os.mkfifo('/tmp/fifo')
`)
		if want := "/tmp/left written\n/tmp/.hidden/left written\n/dev/shm/left written\n/var/tmp/left EROFS\n"; first.text != want {
			t.Errorf("first run: got %q; want %q", first.text, want)
		}
		second := m.hostile(t, s, "python", `
import os
for d in ['/tmp', '/dev/shm', '/var/tmp']:
    print(d, sorted(os.listdir(d)))
`)
		if want := "/tmp []\n/dev/shm []\n/var/tmp []\n"; second.text != want {
			t.Errorf("second run: got %q; want %q", second.text, want)
		}
		for _, id := range second.ids {
			if strings.Contains(strings.Join(first.ids, " "), id) {
				t.Errorf("both runs ran in sandbox %s; want a new one", id)
			}
		}
		afterCase(t, s, first, second)
	})
}

// Case 14: host and image secrets are masked or unreadable.
func TestIsolationSecretsUnreadable(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		masked := []string{"/proc/kcore", "/proc/keys", "/proc/interrupts", "/proc/kallsyms", "/proc/timer_list", "/proc/sched_debug"}
		dirs := []string{"/sys/firmware", "/sys/kernel/debug"}
		// The image has no /etc/shadow (nobody's password is "*" in
		// /etc/passwd); its root-only files stand in for it.
		private := []string{"/etc/shadow", "/etc/security/opasswd", "/var/cache/debconf/passwords.dat", "/root"}
		r := m.hostile(t, s, "python", pyProbe+`
import stat
def probe(p):
    if os.path.isdir(p):
        names = os.listdir(p)
        return 'empty dir' if not names else 'dir: ' + ','.join(sorted(names))
    with open(p, 'rb') as f:
        data = f.read(4096)
    if not data and stat.S_ISCHR(os.stat(p).st_mode):
        return 'masked'
    return 'read %d bytes' % len(data)
for p in `+pyList(slices.Concat(masked, dirs, private))+`:
    check(p, lambda p=p: probe(p))
`+pyReport)
		want := map[string]string{
			"/etc/shadow":                      "ENOENT",
			"/etc/security/opasswd":            "EACCES",
			"/var/cache/debconf/passwords.dat": "EACCES",
			"/root":                            "EACCES",
		}
		// Masked files are /dev/null, masked directories an empty read-only
		// tmpfs; a path the host kernel lacks is absent in the sandbox too.
		for _, p := range masked {
			want[p] = onHost(p, "masked")
		}
		for _, p := range dirs {
			want[p] = onHost(p, "empty dir")
		}
		assertReport(t, probeReport(t, r), want)
		afterCase(t, s, r)
	})
}

// Case 15: kernel tunables and the magic SysRq key cannot be written.
func TestIsolationProcSysReadOnly(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		paths := []string{"/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
			"/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger"}
		r := m.hostile(t, s, "python", pyProbe+`
for p in `+pyList(paths)+`:
    # O_TRUNC: the read-only mount refuses before any permission check.
    check('truncate ' + p, lambda p=p: open(p, 'w').close())
# Without O_TRUNC the sysctl's own permission check refuses the sandbox's uid.
check('write-only /proc/sys/kernel/hostname', lambda: os.close(os.open('/proc/sys/kernel/hostname', os.O_WRONLY)))
out['sethostname'] = sys_(170, b'pwned', 5)
out['core_pattern'] = open('/proc/sys/kernel/core_pattern').read().strip()
`+pyReport)
		corePattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"write-only /proc/sys/kernel/hostname": "EACCES",
			"sethostname":                          "EPERM",
			"core_pattern":                         strings.TrimSpace(string(corePattern)),
		}
		for _, p := range paths {
			want["truncate "+p] = onHost(p, "EROFS")
		}
		assertReport(t, probeReport(t, r), want)
		afterCase(t, s, r)
	})
}

// Case 16: no new namespaces, mounts or roots.
func TestIsolationNoNamespacesOrMounts(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		r := m.hostile(t, s, "python", pyProbe+`
import subprocess
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWPID = 0x20000, 0x10000000, 0x40000000, 0x20000000
out['unshare user'] = sys_(272, CLONE_NEWUSER)
out['unshare mount'] = sys_(272, CLONE_NEWNS)
out['unshare net'] = sys_(272, CLONE_NEWNET)
out['clone user+pid'] = sys_(56, CLONE_NEWUSER | CLONE_NEWPID | 17, 0, 0, 0, 0)
out['clone3'] = sys_(435, 0, 0)
p = subprocess.run(['unshare', '--user', '--map-root-user', 'true'], capture_output=True, text=True)
out['unshare(1) --user'] = 'exit %d: %s' % (p.returncode, p.stderr.strip())
out['mount tmpfs'] = sys_(165, b'none', b'/tmp', b'tmpfs', 0, None)
out['remount / rw'] = sys_(165, None, b'/', None, 0x20 | 0x1000, None)  # MS_REMOUNT|MS_BIND
out['umount /proc/keys'] = sys_(166, b'/proc/keys', 2)  # MNT_DETACH: unmask it
out['fsopen tmpfs'] = sys_(430, b'tmpfs', 0)
out['open_tree /'] = sys_(428, -100, b'/', 1)  # OPEN_TREE_CLONE
fd = os.open('/proc/self/ns/mnt', os.O_RDONLY)
out['setns mnt'] = sys_(308, fd, 0)
out['pivot_root'] = sys_(155, b'/tmp', b'/tmp')
out['chroot'] = sys_(161, b'/tmp')
`+pyReport)
		assertReport(t, probeReport(t, r), map[string]string{
			"unshare user":      "EPERM",
			"unshare mount":     "EPERM",
			"unshare net":       "EPERM",
			"clone user+pid":    "EPERM",
			"clone3":            "ENOSYS", // containerd's profile: so that libc falls back to clone
			"unshare(1) --user": "exit 1: unshare: unshare failed: Operation not permitted",
			"mount tmpfs":       "EPERM",
			"remount / rw":      "EPERM",
			"umount /proc/keys": "EPERM",
			"fsopen tmpfs":      "EPERM",
			"open_tree /":       "EPERM",
			"setns mnt":         "EPERM",
			"pivot_root":        "EPERM",
			"chroot":            "EPERM",
		})
		afterCase(t, s, r)
	})
}

// Case 17: no tracing or reading another process's memory, and no host
// process in sight: the program sees its init, pid 1 and its parent, and
// itself.
func TestIsolationNoPtraceAndHostProcessesInvisible(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		host := os.Getpid()
		r := m.hostile(t, s, "python", pyProbe+fmt.Sprintf(`
import signal, subprocess
out['processes'] = str(len([p for p in os.listdir('/proc') if p.isdigit()]))
out['pid 1'] = open('/proc/1/cmdline').read().replace('\0', ' ').strip()
out['parent'] = str(os.getppid())
out['self'] = open('/proc/self/cmdline').read().replace('\0', ' ').strip()
check('kill host pid', lambda: os.kill(%d, 0))
out['ptrace traceme'] = sys_(101, 0, 0, 0, 0)
child = subprocess.Popen(['sleep', '30'])
out['ptrace attach child'] = sys_(101, 16, child.pid, 0, 0)
out['ptrace seize child'] = sys_(101, 0x4206, child.pid, 0, 0)
iov = (ctypes.c_char * 64)()
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
local, remote = iovec(ctypes.addressof(iov), 64), iovec(0x400000, 64)
out['process_vm_readv child'] = sys_(310, child.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
out['process_vm_writev child'] = sys_(311, child.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
child.kill()
child.wait()
`, host)+pyReport)
		assertReport(t, probeReport(t, r), map[string]string{
			"processes":               "2",                                                       // the init and the program
			"pid 1":                   sandboxoci.InitPath + " -- " + m.programCmdline("python"), // in a session, the driver: the program runs in it
			"parent":                  "1",
			"self":                    m.programCmdline("python"),
			"kill host pid":           "ESRCH",
			"ptrace traceme":          "EPERM",
			"ptrace attach child":     "EPERM",
			"ptrace seize child":      "EPERM",
			"process_vm_readv child":  "EPERM",
			"process_vm_writev child": "EPERM",
		})

		runs := []hostileRun{r}
		if m.runs("javascript") {
			js := m.hostile(t, s, "javascript", fmt.Sprintf(`
const fs = require('fs');
const out = {};
out['processes'] = String(fs.readdirSync('/proc').filter(p => /^\d+$/.test(p)).length);
out['pid 1'] = fs.readFileSync('/proc/1/cmdline', 'utf8').split('\0').join(' ').trim();
out['parent'] = String(process.ppid);
try { process.kill(%d, 0); out['kill host pid'] = 'ok'; } catch (e) { out['kill host pid'] = e.code; }
console.log(JSON.stringify(out));
`, host))
			assertReport(t, probeReport(t, js), map[string]string{
				"processes":     "2",
				"pid 1":         sandboxoci.InitPath + " -- " + m.programCmdline("javascript"),
				"parent":        "1",
				"kill host pid": "ESRCH",
			})
			runs = append(runs, js)
		}
		afterCase(t, s, runs...)
	})
}

// Case 18: the kernel's riskier interfaces are refused.
func TestIsolationDangerousSyscallsRefused(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		r := m.hostile(t, s, "python", pyProbe+`
out['keyctl'] = sys_(250, 0, -3, 1)                      # KEYCTL_GET_KEYRING_ID, session, create
out['add_key'] = sys_(248, b'user', b'csm', b'secret', 6, -2)
out['request_key'] = sys_(249, b'user', b'csm', None, -2)
out['bpf'] = sys_(321, 0, None, 0)                       # BPF_MAP_CREATE
out['perf_event_open'] = sys_(298, None, 0, -1, -1, 0)
out['userfaultfd'] = sys_(323, 0)
out['memfd_secret'] = sys_(447, 0)
out['kexec_load'] = sys_(246, 0, 0, None, 0)
out['kexec_file_load'] = sys_(320, -1, -1, 0, None, 0)
out['init_module'] = sys_(175, None, 0, b'')
out['finit_module'] = sys_(313, -1, b'', 0)
check('open /dev/userfaultfd', lambda: os.open('/dev/userfaultfd', os.O_RDWR))
`+pyReport)
		assertReport(t, probeReport(t, r), map[string]string{
			"keyctl":                "EPERM",
			"add_key":               "EPERM",
			"request_key":           "EPERM",
			"bpf":                   "EPERM",
			"perf_event_open":       "EPERM",
			"userfaultfd":           "EPERM",
			"memfd_secret":          "EPERM",
			"kexec_load":            "EPERM",
			"kexec_file_load":       "EPERM",
			"init_module":           "EPERM",
			"finit_module":          "EPERM",
			"open /dev/userfaultfd": "ENOENT",
		})
		afterCase(t, s, r)
	})
}

// Case 19: no device nodes can be made, and the host's are not there.
func TestIsolationNoDevices(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		devices := []string{"/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/kmsg", "/dev/mem", "/dev/kmem", "/dev/port",
			"/dev/kvm", "/dev/fuse", "/dev/net/tun", "/dev/console"}
		r := m.hostile(t, s, "python", pyProbe+`
import stat
check('mknod char 1:3', lambda: os.mknod('/tmp/null', stat.S_IFCHR | 0o666, os.makedev(1, 3)))
check('mknod block 254:0', lambda: os.mknod('/tmp/disk', stat.S_IFBLK | 0o666, os.makedev(254, 0)))
for p in `+pyList(devices)+`:
    check('open ' + p, lambda p=p: os.close(os.open(p, os.O_RDONLY)))
out['/dev'] = ' '.join(sorted(os.listdir('/dev')))
`+pyReport)
		want := map[string]string{
			"mknod char 1:3":    "EPERM",
			"mknod block 254:0": "EPERM",
			// runc's default devices, its /dev/pts, /dev/mqueue and the
			// std* links, and our /dev/shm: nothing of the host's.
			"/dev": "fd full mqueue null ptmx pts random shm stderr stdin stdout tty urandom zero",
		}
		for _, d := range devices {
			want["open "+d] = "ENOENT"
		}
		assertReport(t, probeReport(t, r), want)
		afterCase(t, s, r)
	})
}

// Case 20: the image's setuid and setgid binaries give nothing: with
// no_new_privs an exec keeps the caller's ids. Each is caught while it
// waits for a password on a pipe, and its ids read from /proc.
func TestIsolationSetuidGivesNothing(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		r := m.hostile(t, s, "python", pyProbe+`
import subprocess, time
found = subprocess.run(['find', '/', '-xdev', '-perm', '/6000', '-type', 'f'], capture_output=True, text=True).stdout.split()
out['setid binaries'] = ' '.join(sorted(found))
# A file capability would be the other way up; the image has none to try.
exe = subprocess.run(['find', '/', '-xdev', '-type', 'f', '-perm', '/111'], capture_output=True, text=True).stdout.split()
def has_caps(f):
    try:
        return os.getxattr(f, 'security.capability', follow_symlinks=False) is not None
    except OSError:
        return False
out['file capabilities'] = ' '.join(f for f in exe if has_caps(f))
def status(pid):
    lines = dict(l.split(':', 1) for l in open('/proc/%d/status' % pid).read().splitlines() if ':' in l)
    return ', '.join(k + ' ' + ' '.join(lines[k].split()) for k in ('Uid', 'Gid', 'CapEff'))
for argv in (['/usr/bin/su', '-c', 'id', 'root'], ['/usr/sbin/unix_chkpwd', 'root', 'nullok']):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = 'exited before it could be seen'
    for _ in range(100):
        try:
            st = open('/proc/%d/stat' % p.pid).read()
            # Its own command line: exec'd and done exec'ing (mid-exec it
            # reads empty, and the credentials may not yet be the new ones).
            if open('/proc/%d/cmdline' % p.pid).read().startswith(argv[0]) and ' S ' in st:
                seen = status(p.pid)
                break
        except OSError:
            pass
        time.sleep(0.05)
    p.kill()
    p.communicate()
    out[argv[0]] = seen
out['uid'] = str(os.getuid())
`+pyReport)
		report := probeReport(t, r)
		uid, err := strconv.ParseUint(report["uid"], 10, 32)
		if err != nil || !testUIDs.Contains(uint32(uid)) {
			t.Fatalf("the run's uid: got %q; want one of %v", report["uid"], testUIDs)
		}
		// Real, effective, saved and file-system ids: all the run's own.
		self := fmt.Sprintf("Uid %[1]d %[1]d %[1]d %[1]d, Gid %[1]d %[1]d %[1]d %[1]d, CapEff 0000000000000000", uid)
		assertReport(t, report, map[string]string{
			"setid binaries":        "/usr/bin/su /usr/sbin/unix_chkpwd",
			"file capabilities":     "",
			"/usr/bin/su":           self, // setuid root
			"/usr/sbin/unix_chkpwd": self, // setgid shadow
			"uid":                   report["uid"],
		})
		afterCase(t, s, r)
	})
}

// Case 22: the environment is the image's, the language's and the
// allow-listed variables, and nothing of the server's.
func TestIsolationEnvironmentAllowListed(t *testing.T) {
	spec := serverSpec{
		args: []string{"--pass-through-env", "CSM_PASSED"},
		env:  []string{"CSM_HOST_SECRET=hunter2-host-secret", "CSM_PASSED=passed-value", "AWS_SECRET_ACCESS_KEY=hunter2-aws"},
	}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		r := m.hostile(t, s, "python", `
import json, os
env = dict(os.environ)
pid1 = dict(kv.split('=', 1) for kv in open('/proc/1/environ').read().split('\0') if kv)
print(json.dumps({'same in /proc/1/environ': str(env == pid1), **env}))
`)
		path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		assertReport(t, probeReport(t, r), map[string]string{
			"same in /proc/1/environ": "True",
			"PATH":                    path, // the image's
			"LANG":                    "C.UTF-8",
			"PYTHONUNBUFFERED":        "1", // the language's
			"MPLBACKEND":              "Agg",
			"PYTHONDONTWRITEBYTECODE": "1",
			"PYTHONPATH":              "/opt/code-sandbox-mcp/python", // the figure hook's (figures = true)
			"HOME":                    "/tmp",
			"CSM_PASSED":              "passed-value",
		})
		runs := []hostileRun{r}
		if m.runs("javascript") {
			js := m.hostile(t, s, "javascript", `console.log(JSON.stringify(process.env))`)
			assertReport(t, probeReport(t, js), map[string]string{
				"PATH":       path,
				"LANG":       "C.UTF-8",
				"HOME":       "/tmp",
				"CSM_PASSED": "passed-value",
			})
			runs = append(runs, js)
		}
		afterCase(t, s, runs...)
	})
}

// stdioProbePython, after pyProbe, reports the program's open
// descriptors and a child's. fstat opens nothing, unlike listing
// /proc/self/fd. Past fd 2, each descriptor is described: what it is,
// whether it is close-on-exec, and how it is open. A child lists its
// own: what the program starts inherits.
const stdioProbePython = `
import resource, subprocess
list_fds = """
import os, resource
fds = []
for fd in range(resource.getrlimit(resource.RLIMIT_NOFILE)[0]):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
"""
exec(list_fds)
out['open fds'] = ' '.join(map(str, fds))
link = lambda fd: os.readlink('/proc/self/fd/%d' % fd)
for fd in fds:
    if fd <= 2:
        out['fd %d' % fd] = link(fd).split('[')[0]
        continue
    flags = int(open('/proc/self/fdinfo/%d' % fd).read().split('flags:')[1].split()[0], 8)
    what = {link(1): "fd 1's pipe", link(2): "fd 2's pipe"}.get(link(fd), link(fd).split('[')[0])
    out['fd %d' % fd] = ', '.join([what, 'close-on-exec' if flags & 0o2000000 else 'inherited', ['read-only', 'write-only', 'read-write'][flags & 3]])
child = list_fds + "print(' '.join(map(str, fds)))"
out["a child's fds"] = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout.strip()
`

// stdioProbeNode reports the descriptors of a Node program that are not
// Node's own. Node opens descriptors of its own (libuv's event loop)
// before the program runs. Anything inherited would not be close-on-exec,
// and would be a socket, a file, or one end of a pipe whose other end is
// elsewhere; Node's own are close-on-exec, eventfds, epolls, both ends of
// its pipes, and /dev/null.
const stdioProbeNode = `
const fs = require('fs');
const fds = fs.readdirSync('/proc/self/fd').map(Number);
const out = {};
const links = {};
for (const fd of fds) {
  try { links[fd] = fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { continue; } // readdir's own, closed
  if (fd <= 2) { out['fd ' + fd] = links[fd].split('[')[0]; continue; }
}
const pipes = {};
for (const [fd, l] of Object.entries(links)) if (l.startsWith('pipe:')) pipes[l] = (pipes[l] || 0) + 1;
const foreign = [];
for (const [fd, l] of Object.entries(links)) {
  if (fd <= 2) continue;
  const flags = parseInt(/flags:\s*(\d+)/.exec(fs.readFileSync('/proc/self/fdinfo/' + fd, 'utf8'))[1], 8);
  const own = (flags & 0o2000000) && (l === '/dev/null' || /^anon_inode:\[?(eventfd|eventpoll|timerfd)/.test(l) || (l.startsWith('pipe:') && pipes[l] === 2));
  if (!own) foreign.push([l.split('[')[0], flags & 0o2000000 ? 'close-on-exec' : 'inherited', ['read-only', 'write-only', 'read-write'][flags & 3]].join(', '));
}
out['not Node\'s own'] = foreign.join('; ');
console.log(JSON.stringify(out));
`

// Case 23: the program inherits stdin, stdout and stderr and no other
// descriptor.
func TestIsolationOnlyStdioInherited(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		r := m.hostile(t, s, "python", pyProbe+stdioProbePython+pyReport)
		want := map[string]string{
			"open fds":      "0 1 2",
			"fd 0":          "/dev/null", // stdin: EOF at once
			"fd 1":          "pipe:",
			"fd 2":          "pipe:",
			"a child's fds": "0 1 2",
		}
		if m.session {
			// The program runs in the driver's process, which holds
			// descriptors of its own, all close-on-exec (so that a
			// child gets none, as above): its request channel, the
			// pipe that was its fd 0 before it put /dev/null there,
			// and copies of fds 1 and 2 for its end markers (see
			// exec/internal/sandbox/drivers/session.py).
			want["open fds"] = "0 1 2 3 4 5"
			want["fd 3"] = "pipe:, close-on-exec, read-only"
			want["fd 4"] = "fd 1's pipe, close-on-exec, write-only"
			want["fd 5"] = "fd 2's pipe, close-on-exec, write-only"
		}
		assertReport(t, probeReport(t, r), want)

		runs := []hostileRun{r}
		if m.runs("javascript") {
			js := m.hostile(t, s, "javascript", stdioProbeNode)
			want = map[string]string{
				"fd 0":           "/dev/null",
				"fd 1":           "pipe:",
				"fd 2":           "pipe:",
				"not Node's own": "",
			}
			if m.session {
				// The driver's request channel: it reopens its fd 0 pipe,
				// close-on-exec, and puts /dev/null on fd 0 (see
				// exec/internal/sandbox/drivers/session.js). Not Node's own by the rule above
				// (its other end is the server's), and the one descriptor
				// more.
				want["not Node's own"] = "pipe:, close-on-exec, read-only"
			}
			assertReport(t, probeReport(t, js), want)
			runs = append(runs, js)
		}
		afterCase(t, s, runs...)
	})
}

// Case 24: nothing a program starts outlives its run: not a child that
// ignores SIGTERM, not a daemon (setsid and a double fork), not zombies;
// whether the program exits by itself or is killed at its deadline.
//
// In a session, what a cell starts lives on after the cell, as the rest
// of its state does, until the session ends: there the run is the
// session, and the processes are looked for once hostile has closed it.
// The node program's last expression is a Promise, which a session's
// cell waits for as node waits for its event loop (see case 1).
func TestIsolationNothingSurvivesTheRun(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		mk := marker(t)
		spawn := fmt.Sprintf(`
import os, signal, subprocess, sys, time
M = %q
stubborn = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'
subprocess.Popen([sys.executable, '-c', stubborn, M + '-child'])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', stubborn, M + '-daemon'])
    os._exit(0)
for _ in range(5):
    if os.fork() == 0:
        os._exit(0)
def count():
    alive = zombies = 0
    for p in os.listdir('/proc'):
        try:
            if M in open('/proc/%%s/cmdline' %% p).read():
                alive += 1
            if open('/proc/%%s/stat' %% p).read().rsplit(')', 1)[1].split()[0] == 'Z':
                zombies += 1
        except (OSError, IndexError):
            pass
    return alive, zombies
# Until all are there: on a busy host the daemon's exec, which names it,
# came more than a second after the fork.
end = time.monotonic() + 6
while count() != (2, 6) and time.monotonic() < end:
    time.sleep(0.1)
print('alive %%d zombies %%d' %% count(), flush=True)
`, mk)
		tests := []struct {
			name, lang, code string
			want             string
			deadline         bool
		}{
			{name: "python exits", lang: "python", code: spawn, want: "alive 2 zombies 6\n"},
			{name: "python ignores SIGTERM until the deadline", lang: "python",
				code: spawn + "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n", want: "alive 2 zombies 6\n", deadline: true},
			{name: "node detached child", lang: "javascript", code: fmt.Sprintf(`
const { spawn } = require('child_process');
const c = spawn(process.execPath, ['-e', 'process.on("SIGTERM", () => {}); setInterval(() => {}, 1000)', %q],
  { detached: true, stdio: 'ignore' });
c.unref();
new Promise((done) => setTimeout(() => { console.log('spawned', c.pid > 1); done(); }, 500));
`, mk+"-node"), want: "spawned true\n"},
		}
		var runs []hostileRun
		for _, tt := range tests {
			if !m.runs(tt.lang) {
				continue
			}
			t.Run(tt.name, func(t *testing.T) {
				var opts []hostileOpt
				if tt.deadline {
					opts = append(opts, withTimeout(8))
				}
				r := m.hostile(t, s, tt.lang, tt.code, opts...)
				runs = append(runs, r)
				if r.out.Stdout != tt.want {
					t.Errorf("stdout %q; want %q (the program must have made what it tries to leave)", r.out.Stdout, tt.want)
				}
				if tt.deadline {
					m.stoppedAtDeadline(t, r, 8)
				} else if r.isError || r.out.ExitCode != 0 {
					t.Errorf("got %q %+v; want exit 0", r.text, r.out)
				}
				var left []string
				// Killing pid 1 of a pid namespace kills the rest before the
				// task is reported gone; allow the host a moment to reap.
				if !waitFor(5*time.Second, func() bool { left = withMarker(mk); return len(left) == 0 }) {
					t.Errorf("host processes with %s in their command line after the run: %v; want none", mk, left)
				}
			})
		}
		afterCase(t, s, runs...)
	})
}

// withMarker lists the host's processes whose command line contains m.
func withMarker(m string) []string {
	var out []string
	for pid, args := range processes() {
		if strings.Contains(strings.Join(args, " "), m) {
			out = append(out, fmt.Sprintf("%d: %s", pid, strings.Join(args, " ")))
		}
	}
	return out
}

// Case 25: a segfault leaves no core file anywhere, and is reported.
func TestIsolationSegfaultNoCore(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
		if err != nil {
			t.Fatal(err)
		}
		pattern := strings.TrimSpace(string(b))
		pipe := strings.HasPrefix(pattern, "|")
		if pipe {
			// The kernel hands a dump to a pipe helper whatever RLIMIT_CORE
			// says; the helper (systemd-coredump, apport) runs on the host
			// and decides by the limit it is given (%c), which is 0.
			t.Logf("core_pattern %q is a pipe: RLIMIT_CORE=0 does not stop the kernel from starting it", pattern)
		}
		// A file pattern is resolved in the dumping process's mount namespace
		// and working directory: in the sandbox, which is checked here.
		r := m.hostile(t, s, "python", pyProbe+`
import glob, resource, signal
out['RLIMIT_CORE'] = '%d %d' % resource.getrlimit(resource.RLIMIT_CORE)
def died(how):
    pid = os.fork()
    if pid == 0:
        how()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    return 'signal %d core dumped %s' % (os.WTERMSIG(st), os.WCOREDUMP(st))
out['fault'] = died(lambda: ctypes.string_at(0))
out['SIGSEGV'] = died(lambda: os.kill(os.getpid(), signal.SIGSEGV))
# pid 1, the init, ignores the signals it has no handler for: the program
# cannot end it, nor so the sandbox, with one.
os.kill(1, signal.SIGSEGV)
out['SIGSEGV to the init'] = 'ignored'
out['cwd'] = os.getcwd()
out['core files'] = ' '.join(f for d in ('/tmp', '/dev/shm', os.getcwd()) for f in glob.glob(d + '/*core*'))
print(json.dumps(out), flush=True)
ctypes.string_at(0)
`)
		if r.out.Signal != "SIGSEGV" || r.out.ExitCode != 139 || !r.isError {
			t.Errorf("got %+v; want a SIGSEGV death reported (exit 139)", r.out)
		}
		// In a session the program crashed the driver, its process.
		m.endedSession(t, r)
		r.isError, r.out.ExitCode = false, 0 // for probeReport: the report came first
		want := map[string]string{
			"RLIMIT_CORE":         "0 0",
			"fault":               "signal 11 core dumped False",
			"SIGSEGV":             "signal 11 core dumped False",
			"SIGSEGV to the init": "ignored",
			"cwd":                 "/workspace",
			"core files":          "",
		}
		got := probeReport(t, r)
		if pipe {
			// Whether the helper took a dump is its business: not asserted.
			delete(want, "fault")
			delete(want, "SIGSEGV")
			delete(got, "fault")
			delete(got, "SIGSEGV")
		}
		assertReport(t, got, want)
		afterCase(t, s, r)
	})
}

// Case 26: the posture of a live run's processes, read from the host.
func TestIsolationPostureFromHost(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {
		s := m.start(t, spec)
		hostNS := namespacesOf(t, os.Getpid())
		checked := make(chan []int, 1)
		go func() {
			var pids []int
			defer func() { checked <- pids }()
			ctx := testContext(t)
			var id string
			waitFor(30*time.Second, func() bool {
				ts, err := sandboxTasks(ctx)
				if err != nil || len(ts.running) == 0 {
					return false
				}
				id = ts.running[0]
				return true
			})
			if id == "" {
				t.Error("no sandbox ran within 30s")
				return
			}
			c, err := testClient.LoadContainer(ctx, id)
			if err != nil {
				t.Error(err)
				return
			}
			task, err := c.Task(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			// The program's child is its sign that it is ready.
			waitFor(10*time.Second, func() bool { pids = inPIDNamespaceOf(task.Pid()); return len(pids) >= 3 })
			if len(pids) < 3 {
				t.Errorf("processes of sandbox %s: got %v; want the init, the interpreter and its child", id, pids)
			}
			for _, pid := range pids {
				checkPosture(t, pid, hostNS)
			}
			// Let the program finish: it waits for its child, the one
			// process whose parent is neither the host's nor the init.
			for _, pid := range pids[1:] {
				if hostParent(pid) != int(task.Pid()) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}()
		r := m.hostile(t, s, "python", `
import subprocess
print('child', subprocess.run(['sleep', '30']).returncode)
`, withTimeout(40))
		pids := <-checked
		if len(pids) >= 2 && (r.out.Stdout != "child -9\n" || r.isError) {
			t.Errorf("got %q %+v; want the child killed from the host, exit 0", r.text, r.out)
		}
		afterCase(t, s, r)
	})
}

// checkPosture checks, from /proc on the host, that pid holds no
// capability, cannot gain privileges, is under a seccomp filter, is not
// root, and shares no namespace with the host but the user one.
func checkPosture(t *testing.T, pid int, hostNS map[string]string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("pid %d: %v", pid, err)
		return
	}
	status := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for k, want := range map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2", "Groups": "",
	} {
		if status[k] != want {
			t.Errorf("pid %d (%s) %s: got %q; want %q", pid, status["Name"], k, status[k], want)
		}
	}
	// Real, effective, saved and file-system ids: one uid of the range,
	// and the gid of the same number.
	ids := strings.Fields(status["Uid"] + " " + status["Gid"])
	uid, err := strconv.ParseUint(ids[0], 10, 32)
	if len(ids) != 8 || err != nil || !testUIDs.Contains(uint32(uid)) || strings.Count(strings.Join(ids, " "), ids[0]) != 8 {
		t.Errorf("pid %d (%s) Uid %q Gid %q: want one uid of %v, eight times", pid, status["Name"], status["Uid"], status["Gid"], testUIDs)
	}
	for name, link := range namespacesOf(t, pid) {
		switch {
		case name == "user":
			// Shared: user namespaces are not used; each sandbox runs as
			// a host uid of its own (see SECURITY.md).
		case strings.HasPrefix(name, "time"):
			// runc before 1.2 cannot make one; see SECURITY.md.
		case link == hostNS[name]:
			t.Errorf("pid %d (%s) %s namespace: got the host's %s; want its own", pid, status["Name"], name, link)
		}
	}
}

// namespacesOf maps the namespace names of pid to their links
// ("net:[4026531840]").
func namespacesOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/ns", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("%s: %v", dir, err)
		return nil
	}
	out := map[string]string{}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[e.Name()] = l
		}
	}
	return out
}

// inPIDNamespaceOf lists the host pids in pid's pid namespace, pid first.
// hostParent is the host pid of pid's parent, or 0 if unknown.
func hostParent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the command's closing parenthesis: the state, then the ppid.
	_, rest, _ := strings.Cut(string(b[bytes.LastIndexByte(b, ')')+1:]), " ")
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func inPIDNamespaceOf(pid uint32) []int {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return nil
	}
	out := []int{int(pid)}
	for p := range processes() {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err == nil && l == ns && p != int(pid) {
			out = append(out, p)
		}
	}
	return out
}

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

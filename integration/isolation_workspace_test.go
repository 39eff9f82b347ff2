package integration

// The isolation suite, cases 34-40 of issue 12: the workspace. A program
// controls everything under /workspace when the server reads its output
// files back, from the host, as root. Whatever it leaves there (links to
// host files, FIFOs, sockets, devices, odd names, more files or bytes
// than the caps), the server returns nothing from the host, never blocks,
// and stays within its caps; and what the workspace holds is bounded and
// charged to the sandbox.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"code-sandbox-mcp/exec"
)

// workspaceExecutor is newExecutor with sessions on, edited by edit.
func workspaceExecutor(t *testing.T, edit func(*exec.Config)) *exec.Executor {
	t.Helper()
	return newExecutor(t, func(c *exec.Config) {
		sessionConfig(2, 10*time.Minute, time.Hour)(c)
		if edit != nil {
			edit(c)
		}
	})
}

// run runs req on e in mode m: in a session, as the first cell of a
// session of req's language made for it, closed once the cell is done.
// The workspace cases drive the executor, below any transport, so in the
// http mode they run one-shot: the same case as the oneshot mode, which
// a daemon that runs only the http mode (scripts/integration) still runs.
func (m mode) run(t *testing.T, e *exec.Executor, req exec.Request) (*exec.Result, error) {
	t.Helper()
	if !m.session {
		return e.Run(testContext(t), req)
	}
	info := newSession(t, e, req.Language)
	defer e.CloseSession("local", info.ID)
	req.Session, req.Owner = info.ID, "local"
	res, err := e.Run(testContext(t), req)
	if err == nil && (res.Session == nil || res.Session.ID != info.ID) {
		t.Errorf("result %+v; want a cell of session %s", res.Session, info.ID)
	}
	return res, err
}

// noHostBytes fails if any output file of res holds one of secrets.
func noHostBytes(t *testing.T, res *exec.Result, secrets ...[]byte) {
	t.Helper()
	for _, f := range res.Files {
		for _, s := range secrets {
			if len(s) > 0 && bytes.Contains(f.Data, s) {
				t.Errorf("output file %q holds host data %q", f.Path, s)
			}
		}
	}
}

// Case 34: links out of the workspace. A symbolic link to a host file (the
// server's own /proc/self/environ, which holds a canary, and /etc/shadow),
// a symbolic link to a host directory, and a hard link to a host file
// return nothing of the host; the hard link is refused by the kernel (the
// workspace is a file system of its own).
func TestIsolationWorkspaceLinksLeadNowhere(t *testing.T) {
	canary := make([]byte, 16)
	rand.Read(canary)
	t.Setenv("CSM_CANARY", hex.EncodeToString(canary))
	shadow, _ := os.ReadFile("/etc/shadow")
	e := workspaceExecutor(t, nil)
	eachMode(t, func(t *testing.T, m mode) {
		res, err := m.run(t, e, exec.Request{Language: "python", Code: `
import errno, os
os.symlink('/proc/self/environ', 'environ')
os.symlink('/etc/shadow', 'shadow')
os.symlink('/etc', 'etc')
os.symlink('/proc/1/root/etc', 'root-etc')
os.makedirs('d')
os.symlink('../../../../../../etc/passwd', 'd/passwd')
try:
    os.link('/etc/passwd', 'hard')
    print('hard link made')
except OSError as e:
    print('hard link', errno.errorcode[e.errno])
open('real.txt', 'w').write('mine')
os.link('real.txt', 'real-link.txt')
print('done')
`})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "hard link EXDEV\ndone\n" {
			t.Errorf("got %q, stderr %q; want the hard link refused with EXDEV", res.Stdout, res.Stderr)
		}
		if got := strings.Join(outputPaths(res), " "); got != "real-link.txt real.txt" {
			t.Errorf("output files %q; want only the two names of the workspace's own file", got)
		}
		passwd, _ := os.ReadFile("/etc/passwd")
		noHostBytes(t, res, []byte(hex.EncodeToString(canary)), shadow, passwd)
	})
}

// Case 35: what is not a regular file is not read. A FIFO (which would
// block a reader that opened it without O_NONBLOCK), a socket and a device
// node (which the program cannot make: no CAP_MKNOD) neither block the call
// nor come back.
func TestIsolationWorkspaceSpecialFilesSkipped(t *testing.T) {
	e := workspaceExecutor(t, nil)
	eachMode(t, func(t *testing.T, m mode) {
		start := time.Now()
		res, err := m.run(t, e, exec.Request{Language: "python", Code: `
import errno, os, socket, stat
os.mkfifo('fifo')
s = socket.socket(socket.AF_UNIX)
s.bind('sock')
try:
    os.mknod('null', stat.S_IFCHR | 0o666, os.makedev(1, 3))
    print('mknod made')
except OSError as e:
    print('mknod', errno.errorcode[e.errno])
n = open('plain.txt', 'w').write('x')  # a statement: a session shows a last expression's value
`})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Errorf("the call took %s", took)
		}
		if string(res.Stdout) != "mknod EPERM\n" {
			t.Errorf("got %q, stderr %q; want mknod refused", res.Stdout, res.Stderr)
		}
		if got := strings.Join(outputPaths(res), " "); got != "plain.txt" || res.FilesDropped != 0 {
			t.Errorf("output files %q, %d dropped; want plain.txt alone", got, res.FilesDropped)
		}
	})
}

// Case 36: names that cannot be returned (a newline, invalid UTF-8, a
// control character) are dropped and counted, and the others still come
// back.
func TestIsolationWorkspaceOddNames(t *testing.T) {
	e := workspaceExecutor(t, nil)
	eachMode(t, func(t *testing.T, m mode) {
		res, err := m.run(t, e, exec.Request{Language: "python", Code: `
open('line\nbreak.txt', 'w').write('a')
open(b'bad-\xff-utf8.txt', 'w').write('b')
open('bell\x07.txt', 'w').write('c')
open('fine é.txt', 'w').write('d')
`})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(outputPaths(res), "|"); got != "fine é.txt" || res.FilesDropped != 3 {
			t.Errorf("output files %q, %d dropped; want the printable name kept and 3 dropped", got, res.FilesDropped)
		}
	})
}

// Case 37: many files, a huge sparse file and deep directories. The
// workspace's inode bound stops the files, RLIMIT_FSIZE the 1 TiB sparse
// file, and a sparse file under that limit but over files_out_bytes is
// dropped without being read; the call returns in time.
func TestIsolationWorkspaceFloods(t *testing.T) {
	e := workspaceExecutor(t, nil)
	eachMode(t, func(t *testing.T, m mode) {
		start := time.Now()
		res, err := m.run(t, e, exec.Request{Language: "python", Timeout: 30 * time.Second, Code: `
import errno, os
n = 0
try:
    os.mkdir('many')
    for n in range(100000):
        open(f'many/{n}', 'w').close()
    print('files all made')
except OSError as e:
    print('files', errno.errorcode[e.errno], n < 100000)
import shutil
shutil.rmtree('many')
with open('sparse-1t', 'wb') as f:
    try:
        f.truncate(1 << 40)
        print('1 TiB made')
    except OSError as e:
        print('1 TiB', errno.errorcode[e.errno])
with open('sparse-60m', 'wb') as f:
    f.truncate(60 << 20)
d = 'deep'
for i in range(100):
    d += '/d'
os.makedirs(d)
open(d + '/bottom.txt', 'w').write('deep')
print('done')
`})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the call took %s", took)
		}
		if string(res.Stdout) != "files ENOSPC True\n1 TiB EFBIG\ndone\n" {
			t.Errorf("got %q, stderr %q; want the inodes and RLIMIT_FSIZE to stop the floods", res.Stdout, res.Stderr)
		}
		// sparse-1t is empty (its truncate failed); sparse-60m is over
		// files_out_bytes; deep/.../bottom.txt is past the walk's depth.
		if got := strings.Join(outputPaths(res), " "); got != "sparse-1t" || res.FilesDropped != 2 {
			t.Errorf("output files %q, %d dropped; want the empty sparse-1t, and 2 dropped", got, res.FilesDropped)
		}
	})
}

// Case 38: the workspace is charged to the sandbox's memory cgroup. With
// a workspace larger than the memory limit, filling it gets the program
// killed for memory, not the host's memory taken.
func TestIsolationWorkspaceChargedToTheSandbox(t *testing.T) {
	e := workspaceExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Limits.MemoryBytes = 128 << 20
			c.Languages[i].Limits.WorkspaceBytes = 512 << 20
			c.Languages[i].Limits.FileBytes = 512 << 20
		}
	})
	eachMode(t, func(t *testing.T, m mode) {
		res, err := m.run(t, e, exec.Request{Language: "python", Code: `
print('filling', flush=True)
with open('fill.bin', 'wb') as f:
    for _ in range(400):
        f.write(b'x' * (1 << 20))
        f.flush()
print('filled 400 MiB')
`})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OOMKilled || strings.Contains(string(res.Stdout), "filled") {
			t.Errorf("got %+v; want the program killed for memory before it filled 400 MiB", res)
		}
		// In a session the program is the driver's process: the kill ends it.
		if m.session && (res.Session == nil || res.Session.Ended == "") {
			t.Errorf("session %+v; want it ended by the OOM kill", res.Session)
		}
	})
}

// Case 39: the workspace is not executable and holds no set-uid power,
// and one run's files are not in the next run's workspace.
func TestIsolationWorkspaceNoExecNoCarryOver(t *testing.T) {
	e := workspaceExecutor(t, nil)
	eachMode(t, func(t *testing.T, m mode) {
		first, err := m.run(t, e, exec.Request{Language: "python", Code: `
import errno, os, shutil
shutil.copy('/bin/true', 'true')
os.chmod('true', 0o4755)
try:
    os.execv('./true', ['true'])
except OSError as e:
    print('exec', errno.errorcode[e.errno])
`})
		if err != nil {
			t.Fatal(err)
		}
		if string(first.Stdout) != "exec EACCES\n" {
			t.Errorf("got %q, stderr %q; want exec refused", first.Stdout, first.Stderr)
		}
		second, err := m.run(t, e, exec.Request{Language: "python", Code: `import os; print(sorted(os.listdir('.')))`})
		if err != nil {
			t.Fatal(err)
		}
		if string(second.Stdout) != "[]\n" {
			t.Errorf("the next run's workspace: %q; want it empty", second.Stdout)
		}
	})
}

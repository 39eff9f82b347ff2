package integration

// What the server holds of a run's output files, through the real binary
// over HTTP with a token, measured on its Go heap (issue 23): a file read
// is held in exactly its bytes, even when a session's background process
// truncates it as the server reads it, and a file kept costs its size
// once, not twice.

import (
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// leastHeap is the least of a few scrapes of the server's heap (with
// token): the heap without most of the garbage a call left.
func leastHeap(t *testing.T, s *httpServer, token string) int64 {
	t.Helper()
	least := s.heapBytes(t, token)
	for range 10 {
		least = min(least, s.heapBytes(t, token))
	}
	return least
}

// heapFallsTo waits up to 20 s for the server's heap to fall to bound or
// below, and returns the least it saw. Right after a call the heap holds
// the call's garbage until the next collection, which the scrapes' own
// allocations bring on: what the server keeps is the heap once it falls.
func heapFallsTo(t *testing.T, s *httpServer, token string, bound int64) int64 {
	t.Helper()
	least := s.heapBytes(t, token)
	waitFor(20*time.Second, func() bool {
		least = min(least, s.heapBytes(t, token))
		return least <= bound
	})
	return least
}

// truncatorCode starts, in the background of a session, a process that
// truncates out.bin as soon as the server opens it to read it: it
// watches /workspace with inotify, arms itself when a writer closes
// out.bin (the cell wrote it), and on the next open of out.bin (the
// server's, right after the cell) truncates it to nothing. The cell
// returns once the watch is in place.
const truncatorCode = `import subprocess, sys
watcher = r'''
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
IN_CLOSE_WRITE, IN_OPEN = 0x08, 0x20
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0 or libc.inotify_add_watch(fd, b'/workspace', IN_CLOSE_WRITE | IN_OPEN) < 0:
    sys.exit('inotify: errno %d' % ctypes.get_errno())
print('watching', flush=True)
armed = False
while True:
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        wd, mask, cookie, n = struct.unpack_from('iIII', buf, i)
        name = buf[i + 16:i + 16 + n].rstrip(b'\0')
        i += 16 + n
        if name != b'out.bin':
            continue
        if mask & IN_CLOSE_WRITE:
            armed = True
        elif mask & IN_OPEN and armed:
            os.truncate('/workspace/out.bin', 0)
            armed = False
'''
w = subprocess.Popen([sys.executable, '-c', watcher], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
print(w.stdout.readline().strip())
`

// runInSession runs code as the next cell of session id over c.
func runInSession(t *testing.T, c *client.Client, id, code string) toolResult {
	t.Helper()
	return callTool(testContext(t), t, c, "run_python_code", map[string]any{"code": code, "session_id": id})
}

// Item 2 of issue 23: a background process of a session truncates each
// output file as soon as the server opens it, after the server took its
// size. Over cells that each leave a 20 MiB file, the server must hold
// what it read, not what the files held at open: its heap stays within
// file_retention_bytes plus 16 MiB of where it started (before the fix
// it kept each truncated file's buffer of its size at open, uncounted:
// 320 MiB over 16 cells). Whether the truncator wins is the kernel's to
// decide, file by file: the cells go on until it has won wantTruncated
// times, which the fault would have cost 80 MiB, two and a half times
// the bound (a fixed 16 cells saw it win 12 times in one clean make
// test, and 2 in another, where the test failed).
func TestMemoryTruncatedOutputsHoldOnlyWhatWasRead(t *testing.T) {
	const (
		// maxCells bounds the cells: with the truncator winning 2 of
		// 16, 128 cells leave it four wins short less than once in
		// 20,000 runs (binomial, p = 1/8); a cell takes a quarter of
		// a second.
		maxCells      = 128
		wantTruncated = 4
		fileSize      = 20 << 20
		// Under one file's size: a file read whole (the truncator lost
		// that race) is not kept, so that what the store keeps
		// legitimately is small beside the bound, and the bound is far
		// from what the fault held.
		retention = 16 << 20
		slack     = 16 << 20
	)
	path, tokens := tokenFile(t, "alice")
	token := tokens["alice"]
	s := startHTTP(t, serverSpec{
		args:    []string{"--auth-tokens", path},
		env:     []string{lowGOGC},
		sandbox: fmt.Sprintf("file_retention_bytes = %d\n", retention),
		config:  noPools,
	})
	c := s.connect(t, token)
	var created createdSession
	if text, isErr := callRaw(testContext(t), t, c, "create_session", map[string]any{"language": "python"}, &created); isErr || created.SessionID == "" {
		t.Fatalf("create_session: %q", text)
	}
	if r := runInSession(t, c, created.SessionID, truncatorCode); r.isError || r.out.Stdout != "watching\n" {
		t.Fatalf("starting the truncator: %q; want it watching", r.text)
	}
	start := leastHeap(t, s, token)
	truncated, cells := 0, 0
	for i := 0; i < maxCells && truncated < wantTruncated; i++ {
		cells++
		r := runInSession(t, c, created.SessionID, fmt.Sprintf("with open('out.bin', 'wb') as f:\n    f.write(b'x' * %d)", fileSize))
		if r.isError || len(r.out.Files) != 1 || r.out.Files[0].Path != "out.bin" {
			t.Fatalf("cell %d: %q; want out.bin back", i+1, r.text)
		}
		if r.out.Files[0].Size < fileSize {
			truncated++
		}
	}
	// A test in which the truncator lost every race would test nothing.
	if truncated < wantTruncated {
		t.Fatalf("only %d of %d files came back truncated; want %d (the truncator did not win the race)", truncated, cells, wantTruncated)
	}
	end := heapFallsTo(t, s, token, start+retention+slack)
	if end-start > retention+slack {
		t.Errorf("the heap grew by %s over %d cells whose 20 MiB files were truncated as the server read them (%d of them were), %s to %s; want at most file_retention_bytes (%s) + %s",
			mib(end-start), cells, truncated, mib(start), mib(end), mib(retention), mib(slack))
	}
	t.Logf("heap: %s after the truncator started, %s after %d cells (%d files truncated as read)", mib(start), mib(end), cells, truncated)
}

// Item 3 of issue 23: a kept output file costs the server its size
// once: after a run that leaves a 30 MiB file, kept for reading back,
// the heap grows by at most the file's size and 8 MiB (before the fix
// the buffer was regrown to double as it was read: about 60 MiB).
func TestMemoryKeptOutputCostsItsSizeOnce(t *testing.T) {
	const (
		fileSize = 30 << 20
		slack    = 8 << 20
	)
	path, tokens := tokenFile(t, "alice")
	token := tokens["alice"]
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path}, env: []string{lowGOGC}, config: noPools})
	c := s.connect(t, token)
	// A first run with a small file, so that the start counts what any
	// run leaves besides its files.
	if r := callTool(testContext(t), t, c, "run_python_code", code("open('small.txt', 'w').write('x')")); r.isError || len(r.links) != 1 {
		t.Fatalf("a first run: %q; want small.txt kept", r.text)
	}
	start := leastHeap(t, s, token)
	r := callTool(testContext(t), t, c, "run_python_code", code(fmt.Sprintf("with open('big.bin', 'wb') as f:\n    f.write(b'x' * %d)", fileSize)))
	if r.isError || len(r.out.Files) != 1 || r.out.Files[0].Size != fileSize || len(r.links) != 1 {
		t.Fatalf("the run: %q; want big.bin back, %d bytes, kept", r.text, fileSize)
	}
	end := heapFallsTo(t, s, token, start+fileSize+slack)
	if end-start > fileSize+slack {
		t.Errorf("the heap grew by %s for one kept file of %s (%s to %s); want at most its size + %s",
			mib(end-start), mib(fileSize), mib(start), mib(end), mib(slack))
	}
	t.Logf("heap: %s before, %s after a run that left a kept file of %s", mib(start), mib(end), mib(fileSize))
}

package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// run is the fields of a test record.
type run struct {
	N    int    `json:"n"`
	Tool string `json:"tool"`
}

// openLog opens the log at path, failing the test if it cannot, and
// closes it when the test ends (Close again is harmless).
func openLog(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// writeLog appends n records, numbered from first, to the log at path.
func writeLog(t *testing.T, path string, first, n int) {
	t.Helper()
	l := openLog(t, path)
	defer l.Close()
	for i := first; i < first+n; i++ {
		if err := l.Write("run_ended", run{N: i, Tool: "python"}); err != nil {
			t.Fatal(err)
		}
	}
}

// readLines returns the lines of the file at path, without newlines.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// writeLines replaces the file at path with lines, each ended by a newline.
func writeLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantBroken fails unless err is a BrokenError at file:line whose reason
// contains why.
func wantBroken(t *testing.T, err error, file string, line int, why string) {
	t.Helper()
	var b *BrokenError
	if !errors.As(err, &b) {
		t.Fatalf("got %v; want a broken chain at %s:%d", err, file, line)
	}
	if b.File != file || b.Line != line || !strings.Contains(b.Reason, why) {
		t.Fatalf("got %v; want %s:%d: ...%s...", err, file, line, why)
	}
}

func TestRecordFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	if err := l.Write("start", nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("run_ended", struct {
		Zeta  string `json:"zeta"`
		Alpha int    `json:"alpha"`
	}{"z", 1}); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	first := regexp.MustCompile(`^\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z","event":"start","prev":"chain:[0-9a-f]{32}"\}$`)
	if !first.Match(lines[0]) {
		t.Errorf("first record %s; want time (UTC, nanoseconds), event and a chain id, in that order", lines[0])
	}
	second := regexp.MustCompile(`^\{"time":"[^"]+","event":"run_ended","prev":"` + hash(lines[0]) + `","zeta":"z","alpha":1\}$`)
	if !second.Match(lines[1]) {
		t.Errorf("second record %s; want time, event, the first record's hash, then the fields in their order", lines[1])
	}
	if got := l.Last(); got != hash(lines[1]) {
		t.Errorf("Last() = %s; want the hash of the last line, %s", got, hash(lines[1]))
	}
}

func TestWriteRefusesBadFields(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		event  string
		fields any
	}{
		{"", nil},
		{"run_ended", 5},
		{"run_ended", []string{"a"}},
		{"run_ended", map[string]any{"prev": "chain:00000000000000000000000000000000"}},
		{"run_ended", map[string]any{"time": 1}},
		{"run_ended", struct {
			Event string `json:"event"`
		}{"forged"}},
		{"run_ended", map[string]any{"f": func() {}}},
	} {
		if err := l.Write(tc.event, tc.fields); err == nil {
			t.Errorf("Write(%q, %#v) succeeded; want an error", tc.event, tc.fields)
		}
	}
	if err := l.Write("run_ended", map[string]any{}); err != nil {
		t.Errorf("Write with empty fields: %v", err)
	}
	if _, err := Verify(l.path); err != nil {
		t.Errorf("after refused writes: %v; want an intact chain", err)
	}
}

func TestManyRecordsVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 1, 500)
	sum, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	var first header
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	want := Summary{Records: 500, Chain: first.Prev, Last: hash(lines[len(lines)-1])}
	if sum != want {
		t.Errorf("got %+v; want %+v", sum, want)
	}
}

func TestEmptyLogVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(path); err != nil || sum.Records != 0 {
		t.Errorf("got %+v, %v; want 0 records, intact", sum, err)
	}
}

// TestTamperingDetected changes a 10-record log in each way a hash chain
// detects, and checks Verify reports the first record it breaks.
func TestTamperingDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(lines [][]byte) [][]byte
		line   int
		why    string
	}{
		{"edit a field", func(ls [][]byte) [][]byte {
			ls[3] = bytes.Replace(ls[3], []byte(`"n":4`), []byte(`"n":40`), 1)
			return ls
		}, 5, ":4 was edited"},
		{"edit an event", func(ls [][]byte) [][]byte {
			ls[3] = bytes.Replace(ls[3], []byte(`"run_ended"`), []byte(`"run_started"`), 1)
			return ls
		}, 5, ":4 was edited"},
		{"delete a record", func(ls [][]byte) [][]byte {
			return append(ls[:3:3], ls[4:]...)
		}, 4, "deleted or reordered"},
		{"delete the first record", func(ls [][]byte) [][]byte {
			return ls[1:]
		}, 1, "continues an earlier chain"},
		{"swap two records", func(ls [][]byte) [][]byte {
			ls[3], ls[4] = ls[4], ls[3]
			return ls
		}, 4, "deleted or reordered"},
		{"move a record later", func(ls [][]byte) [][]byte {
			moved := ls[3]
			ls = append(ls[:3:3], ls[4:]...)
			return append(ls[:6:6], append([][]byte{moved}, ls[6:]...)...)
		}, 4, "deleted or reordered"},
		{"cut out the middle of two lines", func(ls [][]byte) [][]byte {
			// From inside line 4's time to line 5's prev: never JSON.
			joined := append(append([]byte{}, ls[3][:len(`{"time":"2024-`)]...), ls[4][bytes.Index(ls[4], []byte(`"prev"`)):]...)
			return append(append(ls[:3:3], joined), ls[5:]...)
		}, 4, "not a JSON record"},
		{"insert a forged record with a correct prev", func(ls [][]byte) [][]byte {
			forged := []byte(fmt.Sprintf(`{"time":"2024-01-01T00:00:00.000000000Z","event":"run_ended","prev":"%s","n":99}`, hash(ls[3])))
			return append(ls[:4:4], append([][]byte{forged}, ls[4:]...)...)
		}, 6, "prev is the hash of"},
		{"replace the chain id", func(ls [][]byte) [][]byte {
			ls[0] = regexp.MustCompile(`chain:[0-9a-f]{32}`).ReplaceAll(ls[0], []byte("chain:0123456789abcdef0123456789abcdef"))
			return ls
		}, 2, ":1 was edited"},
		{"a chain id in the middle", func(ls [][]byte) [][]byte {
			ls[4] = regexp.MustCompile(`"prev":"[0-9a-f]{64}"`).ReplaceAll(ls[4], []byte(`"prev":"chain:0123456789abcdef0123456789abcdef"`))
			return ls
		}, 5, "a new chain"},
		{"prev neither hash nor chain id", func(ls [][]byte) [][]byte {
			ls[4] = regexp.MustCompile(`"prev":"[0-9a-f]{64}"`).ReplaceAll(ls[4], []byte(`"prev":"x"`))
			return ls
		}, 5, "neither a hash nor a chain id"},
		{"a record without prev", func(ls [][]byte) [][]byte {
			ls[4] = regexp.MustCompile(`,"prev":"[0-9a-f]{64}"`).ReplaceAll(ls[4], nil)
			return ls
		}, 5, `no "prev"`},
		{"an empty line", func(ls [][]byte) [][]byte {
			return append(ls[:5:5], append([][]byte{{}}, ls[5:]...)...)
		}, 6, "not a JSON record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			writeLog(t, path, 1, 10)
			if _, err := Verify(path); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			writeLines(t, path, tc.tamper(readLines(t, path)))
			_, err := Verify(path)
			wantBroken(t, err, path, tc.line, tc.why)
		})
	}
}

func TestCutInsideTheLastRecordDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 1, 10)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-20); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(path)
	wantBroken(t, err, path, 10, "incomplete record")
}

// TestTruncatedTailNotDetected pins what a hash chain cannot prove: the
// log with its last records removed is a valid chain (see the package doc).
// A hash of the last record kept elsewhere (Last) shows the loss.
func TestTruncatedTailNotDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 1, 10)
	full, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	writeLines(t, path, readLines(t, path)[:7])
	sum, err := Verify(path)
	if err != nil {
		t.Fatalf("a log cut after a whole record: %v; want it to pass, as a hash chain cannot tell", err)
	}
	if sum.Records != 7 || sum.Chain != full.Chain {
		t.Errorf("got %+v; want 7 records of chain %s", sum, full.Chain)
	}
	if sum.Last == full.Last {
		t.Errorf("the cut log's Last is the full log's; a shipped Last could not show the cut")
	}
}

func TestReopenContinuesChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLog(t, path, 1, 3)
	writeLog(t, path, 4, 3)
	sum, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 6 {
		t.Errorf("got %d records; want 6 in one chain", sum.Records)
	}
}

// A log in a directory a fresh host does not have: the directory is
// created, mode 0750; one that cannot be says what to create (issue 29,
// item 2).
func TestOpenMakesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "log", "code-sandbox-mcp")
	l, err := Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode() != 0o750|os.ModeDir {
		t.Errorf("%s: %v %v; want drwxr-x---", dir, fi.Mode(), err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub")
	if _, err := Open(filepath.Join(bad, "audit.jsonl")); err == nil || !strings.Contains(err.Error(), "install -d -m 0750 "+bad) {
		t.Errorf("a directory that cannot be made: %v; want the command that creates it", err)
	}
}

func TestOpenRefusesDamagedEnd(t *testing.T) {
	for _, tc := range []struct{ name, tail string }{
		{"incomplete last line", `{"time":"2024-01-01T00:00:00.000000000Z","ev`},
		{"last line not JSON", "garbage\n"},
		{"last line without prev", `{"time":"2024-01-01T00:00:00.000000000Z","event":"start"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			writeLog(t, path, 1, 3)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tc.tail)
			f.Close()
			before, _ := os.ReadFile(path)
			l, err := Open(path)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded; want it to refuse a log whose last record is damaged")
			}
			if !strings.Contains(err.Error(), "move the file aside") {
				t.Errorf("got %v; want it to say how to recover", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("Open changed the refused file")
			}
		})
	}
}

func TestOpenLongLastRecord(t *testing.T) {
	// The last record is longer than the chunk lastLine reads at a time.
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	l.Write("start", nil)
	l.Write("run_ended", map[string]string{"code": strings.Repeat("x", 200<<10)})
	l.Close()
	writeLog(t, path, 1, 1)
	if sum, err := Verify(path); err != nil || sum.Records != 3 {
		t.Errorf("got %+v, %v; want 3 records, intact", sum, err)
	}
}

func TestRotateContinuesChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	old := filepath.Join(dir, "audit.log.1")
	l := openLog(t, path)
	for i := range 3 {
		if err := l.Write("run_ended", run{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(path, old); err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := l.Write("run_ended", run{N: 3 + i}); err != nil {
			t.Fatal(err)
		}
	}

	if n := len(readLines(t, old)); n != 3 {
		t.Errorf("the moved file has %d records; want the 3 written before rotation", n)
	}
	var first header
	json.Unmarshal(readLines(t, path)[0], &first)
	if first.Event != "rotated" {
		t.Errorf("the new file begins with %q; want a rotated record", first.Event)
	}
	sum, err := Verify(old, path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 6 {
		t.Errorf("got %d records; want 6 (3, rotated, 2) in one chain", sum.Records)
	}

	// The new file alone continues a chain: Verify wants where from.
	_, err = Verify(path)
	wantBroken(t, err, path, 1, "continues an earlier chain")
	oldSum, err := Verify(old)
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := VerifyAfter(oldSum.Last, path); err != nil || sum.Records != 3 || sum.Chain != "" {
		t.Errorf("VerifyAfter(the old file's last hash, new file): %+v, %v; want 3 records, intact", sum, err)
	}
	_, err = VerifyAfter(hash([]byte("another record")), path)
	wantBroken(t, err, path, 1, "matches neither")

	// In the wrong order the chain breaks at the start of the second.
	_, err = Verify(path, old)
	wantBroken(t, err, path, 1, "continues an earlier chain")
}

func TestRotateWithoutMoveKeepsAppending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	l.Write("start", nil)
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("shutdown", nil); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(path); err != nil || sum.Records != 2 {
		t.Errorf("got %+v, %v; want 2 records in the one file, intact", sum, err)
	}
}

func TestRotateRefusesAnotherLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	other := filepath.Join(dir, "other.log")
	writeLog(t, other, 1, 2)
	l := openLog(t, path)
	l.Write("start", nil)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err == nil {
		t.Fatal("Rotate onto a file of another chain succeeded; want an error")
	}
	if err := l.Write("shutdown", nil); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(path + ".1"); err != nil || sum.Records != 2 {
		t.Errorf("the old file: %+v, %v; want the log to go on in it, 2 records", sum, err)
	}
	if sum, err := Verify(path); err != nil || sum.Records != 2 {
		t.Errorf("the other file: %+v, %v; want it untouched, 2 records", sum, err)
	}
}

func TestConcurrentWritersKeepChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := l.Write("run_ended", run{N: w*each + i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if sum, err := Verify(path); err != nil || sum.Records != writers*each {
		t.Errorf("got %+v, %v; want %d records, intact", sum, err, writers*each)
	}
}

func TestFailedWriteLeavesNoPartialRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(f *os.File, b []byte) (int, error)
		sync  func(f *os.File) error
	}{
		{"write fails part-way", func(f *os.File, b []byte) (int, error) {
			n, _ := f.Write(b[:len(b)/2])
			return n, errors.New("no space left on device")
		}, nil},
		{"short write", func(f *os.File, b []byte) (int, error) {
			return f.Write(b[:len(b)-1])
		}, nil},
		{"fsync fails", nil, func(*os.File) error { return errors.New("input/output error") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			l := openLog(t, path)
			l.Write("start", nil)
			before, _ := os.ReadFile(path)
			last := l.Last()
			if tc.write != nil {
				l.write = tc.write
			}
			if tc.sync != nil {
				l.sync = tc.sync
			}
			if err := l.Write("run_ended", run{N: 1}); err == nil {
				t.Fatal("Write succeeded; want the failure returned")
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("after a failed Write the file is\n%s\nwant it as before:\n%s", after, before)
			}
			if l.Last() != last {
				t.Errorf("a failed Write moved Last")
			}
			l.write, l.sync = (*os.File).Write, (*os.File).Sync
			if err := l.Write("run_ended", run{N: 2}); err != nil {
				t.Fatal(err)
			}
			if sum, err := Verify(path); err != nil || sum.Records != 2 {
				t.Errorf("got %+v, %v; want 2 records, intact", sum, err)
			}
		})
	}
}

func TestUndoFailureStopsWritesUntilRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	l.Write("start", nil)
	// A write that fails part-way on a file that then cannot be truncated.
	l.write = func(f *os.File, b []byte) (int, error) {
		n, _ := f.Write(b[:len(b)/2])
		f.Close()
		return n, errors.New("no space left on device")
	}
	if err := l.Write("run_ended", run{N: 1}); err == nil || !strings.Contains(err.Error(), "partial record") {
		t.Fatalf("got %v; want an error that says the file may end in a partial record", err)
	}
	l.write = (*os.File).Write
	if err := l.Write("run_ended", run{N: 2}); err == nil {
		t.Fatal("a Write after an undo failed succeeded; want it refused")
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("run_ended", run{N: 3}); err != nil {
		t.Fatal(err)
	}
	// The old file ends in the partial record; the new one continues the
	// chain from the last whole record.
	_, err := Verify(path+".1", path)
	wantBroken(t, err, path+".1", 2, "incomplete record")
	first := readLines(t, path+".1")[0]
	if sum, err := VerifyAfter(hash(first), path); err != nil || sum.Records != 2 {
		t.Errorf("the new file after the start record: %+v, %v; want 2 records, intact", sum, err)
	}
}

func TestClosedLogRefusesWrites(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("shutdown", nil); err == nil {
		t.Error("Write after Close succeeded; want an error")
	}
	if err := l.Rotate(); err == nil {
		t.Error("Rotate after Close succeeded; want an error")
	}
}

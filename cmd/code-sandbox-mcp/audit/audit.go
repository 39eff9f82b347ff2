// Package audit keeps a tamper-evident audit log: JSON Lines, one record
// per event, each record carrying in "prev" the SHA-256 of the record
// before it, so that an edited, deleted, reordered or inserted record, or
// a record cut in the middle, breaks the chain where it happened. Verify
// checks a chain and reports the first broken record.
//
// Every record begins with the same three fields, in this order: "time"
// (RFC 3339, UTC, with nanoseconds), "event" (such as "start",
// "run_started" or "rotated") and "prev", then the event's own fields.
// prev is the lowercase hex SHA-256 of the previous record's line, its
// exact bytes without the newline; the first record of a chain has instead
// a chain id, "chain:" and 32 random hex digits.
//
// What a hash chain cannot prove: that the log is complete at its end.
// Whoever can write the file can remove its last records (or the whole
// file) and what is left is still a valid chain; and whoever can write it
// can also write a new, self-consistent chain in its place. Only a copy
// kept out of their reach covers that: ship each record elsewhere as it is
// written (syslog, a log collector, an append-only store), or at least
// ship Last, the hash of the newest record, periodically; a later Verify
// must then reach that hash.
//
// The package knows nothing of what the server audits: callers choose the
// events and their fields, and must leave secrets out of them, or have
// SetRedact take them out of every string of every record.
package audit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// timeFormat is RFC 3339 with all nine digits of the nanoseconds, so that
// every record's time has the same width.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// chainPrefix begins the prev of the first record of a chain.
const chainPrefix = "chain:"

// Log appends records to an audit log file. It is safe for concurrent use.
// Only one Log (in one process) may write a file at a time; nothing
// enforces that.
type Log struct {
	mu   sync.Mutex
	path string
	f    *os.File  // nil when writing to stderr
	w    io.Writer // f, or os.Stderr
	size int64     // f's size after the last whole record
	prev string    // the prev of the next record
	err  error     // set when a failed write could not be undone

	// redact rewrites the fields' strings but keep's (see SetRedact);
	// nil: none.
	redact func(string) string
	keep   map[string]bool

	// write and sync are f.Write and f.Sync; tests replace them to make
	// them fail.
	write func(f *os.File, b []byte) (int, error)
	sync  func(f *os.File) error
}

// Open opens the audit log at path for appending, creating it (mode 0600)
// if it does not exist, and its directory (mode 0750) if that does not.
// A new or empty file starts a new chain; a file
// that holds records continues their chain. A file whose last line is not
// a whole record (cut off by a crash, say) is refused rather than started
// on a new chain: move it aside, verify it, and open again.
//
// The path "-" is stderr. Records there are written but not fsync'd (an
// fsync of a pipe or a terminal fails), a write that fails part-way cannot
// be undone, and each Open starts a new chain.
func Open(path string) (*Log, error) {
	l := &Log{
		path:  path,
		write: (*os.File).Write,
		sync:  (*os.File).Sync,
	}
	if path == "-" {
		l.w = os.Stderr
		id, err := newChainID()
		if err != nil {
			return nil, err
		}
		l.prev = id
		return l, nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit log: cannot create its directory: %w; create it (`install -d -m 0750 %s`) as a user who may, or give --audit-log a path in a directory the server may write", err, dir)
	}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// open opens l.path and sets l.f, l.w, l.size and, if the file holds
// records, l.prev. When the file is empty it leaves l.prev as it was, and
// sets a new chain id if there is none.
func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	prev := l.prev
	if fi.Size() > 0 {
		last, err := lastLine(f, fi.Size())
		if err == nil {
			_, err = parseHeader(last)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("audit log %s: its last record is damaged (%v); move the file aside, check it with `code-sandbox-mcp audit verify`, and start a new log", l.path, err)
		}
		prev = hash(last)
	}
	if prev == "" {
		if prev, err = newChainID(); err != nil {
			f.Close()
			return err
		}
	}
	l.f, l.w, l.size, l.prev = f, f, fi.Size(), prev
	return nil
}

// lastLine returns the last line of f, whose size is size, without its
// newline. It fails if the file does not end in a newline.
func lastLine(f *os.File, size int64) ([]byte, error) {
	var buf []byte
	for end := size; end > 0; {
		n := min(64<<10, end)
		chunk := make([]byte, n, n+int64(len(buf)))
		if _, err := f.ReadAt(chunk, end-n); err != nil {
			return nil, err
		}
		buf = append(chunk, buf...)
		if end == size && buf[len(buf)-1] != '\n' {
			return nil, errors.New("the last line is incomplete")
		}
		end -= n
		if i := bytes.LastIndexByte(buf[:len(buf)-1], '\n'); i >= 0 {
			return buf[i+1 : len(buf)-1], nil
		}
	}
	return buf[:len(buf)-1], nil
}

// Write appends one record: the time, event and the chain's prev, then the
// fields of fields, which must marshal to a JSON object (a struct or a map)
// or be nil, and must not have a "time", "event" or "prev" of its own. A
// struct's fields keep their order.
//
// The record is on disk (fsync'd) when Write returns nil. When it returns
// an error, the record is not in the log and the file holds no part of it:
// a write or fsync that fails is undone by truncating the file to its size
// before. If even that fails, every later Write fails too, until a Rotate
// to a new file.
func (l *Log) Write(event string, fields any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.append(event, fields)
}

// append is Write with l.mu held.
func (l *Log) append(event string, fields any) error {
	if l.w == nil {
		return errors.New("audit log is closed")
	}
	if l.err != nil {
		return l.err
	}
	line, err := l.record(event, fields)
	if err != nil {
		return err
	}
	if l.f == nil {
		if _, err := l.w.Write(line); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		l.prev = hash(line[:len(line)-1])
		return nil
	}
	n, err := l.write(l.f, line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = l.sync(l.f)
	}
	if err != nil {
		if terr := l.f.Truncate(l.size); terr != nil {
			l.err = fmt.Errorf("audit log %s may end in a partial record: a write failed (%v) and truncating it failed (%v); rotate it", l.path, err, terr)
			return l.err
		}
		return fmt.Errorf("audit log: %w", err)
	}
	l.size += int64(n)
	l.prev = hash(line[:len(line)-1])
	return nil
}

// record returns the line of one record, newline included.
func (l *Log) record(event string, fields any) ([]byte, error) {
	if event == "" {
		return nil, errors.New("audit log: a record needs an event")
	}
	body := []byte("{}")
	if fields != nil {
		var err error
		if body, err = json.Marshal(fields); err != nil {
			return nil, fmt.Errorf("audit log: %s record: %w", event, err)
		}
	}
	if l.redact != nil {
		var err error
		if body, err = mapStrings(body, l.redact, l.keep); err != nil {
			return nil, fmt.Errorf("audit log: %s record: redact: %w", event, err)
		}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil || keys == nil {
		return nil, fmt.Errorf("audit log: %s record: the fields are not a JSON object", event)
	}
	for _, k := range []string{"time", "event", "prev"} {
		if _, ok := keys[k]; ok {
			return nil, fmt.Errorf("audit log: %s record: the fields may not set %q", event, k)
		}
	}
	ev, _ := json.Marshal(event)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"time":"%s","event":%s,"prev":"%s"`, time.Now().UTC().Format(timeFormat), ev, l.prev)
	if len(keys) > 0 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// Rotate reopens the log's path, for after the operator has moved the file
// away (the server calls it on SIGHUP). The new file continues the chain:
// its first record, "rotated", has the hash of the last record of the old
// one. If the path still names the open file, Rotate changes nothing and
// the log goes on in it. If the path names another file that holds
// records, Rotate refuses it and the log goes on in the old file. For
// stderr Rotate does nothing.
func (l *Log) Rotate() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return errors.New("audit log is closed")
	}
	if l.f == nil {
		return nil
	}
	if fi, err := os.Stat(l.path); err == nil {
		cur, err := l.f.Stat()
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		if os.SameFile(fi, cur) {
			return nil
		}
		if fi.Size() > 0 {
			return fmt.Errorf("audit log: cannot rotate: %s is another file that already holds records; the log goes on in the old file", l.path)
		}
	}
	old := l.f
	if err := l.open(); err != nil {
		return err
	}
	old.Close()
	l.err = nil
	return l.append("rotated", nil)
}

// Last returns the hash of the newest record written (or, before the
// first, the chain id or the hash it continues from): the prev of the next
// record. Shipping it elsewhere now and then makes truncation detectable.
func (l *Log) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prev
}

// Close closes the log's file. Later Writes fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.f
	l.f, l.w = nil, nil
	if f == nil {
		return nil
	}
	return f.Close()
}

// hash returns the lowercase hex SHA-256 of line.
func hash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// newChainID returns a new random chain id.
func newChainID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("audit log: chain id: %w", err)
	}
	return chainPrefix + hex.EncodeToString(b[:]), nil
}

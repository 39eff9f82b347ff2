package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"
)

// Summary is what Verify found in an intact chain.
type Summary struct {
	Records int    // records verified
	Chain   string // the chain id, or "" if the first file continues an earlier one
	Last    string // the hash of the last record: the prev of the next one
}

// BrokenError is the first broken record of a chain.
type BrokenError struct {
	File   string
	Line   int // 1-based
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

var (
	chainIDRE = regexp.MustCompile(`^chain:[0-9a-f]{32}$`)
	hashRE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Verify checks the audit log files at paths, in order, as one chain: the
// oldest first, as rotation left them. The first record must start a chain
// (its prev a chain id); every other record's prev must be the hash of the
// record before it, across files too. It returns a *BrokenError for the
// first record that breaks the chain, and other errors if a file cannot be
// read. A chain whose last records were removed is still intact: see the
// package doc.
func Verify(paths ...string) (Summary, error) {
	return VerifyAfter("", paths...)
}

// VerifyAfter is Verify for files that continue a chain whose earlier
// files are not given: the first record's prev must be after, the hash of
// the record before it (the Last of a Verify of the earlier files). With
// after "" it is Verify.
func VerifyAfter(after string, paths ...string) (Summary, error) {
	if after != "" && !hashRE.MatchString(after) {
		return Summary{}, fmt.Errorf("%q is not a record's hash (64 lowercase hex digits)", after)
	}
	v := verifier{prev: after, seen: map[string]position{}}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return Summary{}, err
		}
		err = v.check(p, f)
		f.Close()
		if err != nil {
			return Summary{}, err
		}
	}
	return Summary{Records: v.records, Chain: v.chain, Last: v.prev}, nil
}

// position is where a record is.
type position struct {
	file string
	line int
}

func (p position) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// verifier checks records one after another.
type verifier struct {
	records int
	chain   string
	prev    string              // the hash of the last record, or "" before the first
	at      position            // where the last record is
	seen    map[string]position // every record's hash, to say where a wrong prev points
}

// check verifies the records of the file named name, read from r.
func (v *verifier) check(name string, r io.Reader) error {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) == 0 {
				return nil
			}
			return &BrokenError{name, n, "incomplete record (no newline at the end of the file): the file was cut in the middle of a record"}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		line = line[:len(line)-1]
		here := position{name, n}
		if reason := v.link(line, here); reason != "" {
			return &BrokenError{name, n, reason}
		}
		h := hash(line)
		v.records++
		v.prev, v.at = h, here
		v.seen[h] = here
	}
}

// link checks one record against the one before it, and returns why it
// breaks the chain, or "".
func (v *verifier) link(line []byte, here position) string {
	rec, err := parseHeader(line)
	if err != nil {
		return err.Error() + ": the record was cut or edited"
	}
	switch {
	case chainIDRE.MatchString(rec.Prev):
		if v.prev != "" {
			return fmt.Sprintf("a new chain (%s) starts after %s: records before it were replaced, or another log was joined on", rec.Prev, v.at)
		}
		v.chain = rec.Prev
		return ""
	case !hashRE.MatchString(rec.Prev):
		return fmt.Sprintf("prev %q is neither a hash nor a chain id: the record was edited", rec.Prev)
	case v.prev == "":
		return "the first record continues an earlier chain (its prev is a hash, not a chain id): give the earlier files first, or the hash of the record before it"
	case rec.Prev == v.prev:
		return ""
	}
	if p, ok := v.seen[rec.Prev]; ok {
		return fmt.Sprintf("prev is the hash of %s, not of the record before it (%s): records between were deleted or reordered, or %s was inserted", p, v.at, v.at)
	}
	return fmt.Sprintf("prev matches neither the record before it (%s) nor any earlier one: %s was edited, or records before this one were deleted or reordered", v.at, v.at)
}

// header is the fields every record has.
type header struct {
	Time  string `json:"time"`
	Event string `json:"event"`
	Prev  string `json:"prev"`
}

// parseHeader parses a record's line and checks its time, event and prev
// are there.
func parseHeader(line []byte) (header, error) {
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return h, errors.New("not a JSON record")
	}
	if _, err := time.Parse(time.RFC3339Nano, h.Time); err != nil {
		return h, errors.New(`no valid "time"`)
	}
	if h.Event == "" {
		return h, errors.New(`no "event"`)
	}
	if h.Prev == "" {
		return h, errors.New(`no "prev"`)
	}
	return h, nil
}

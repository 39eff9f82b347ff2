package audit

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// redactFields is a record with strings everywhere a caller puts them:
// nested, in arrays, in a map's keys, behind an interface, beside
// numbers, booleans and nulls.
type redactFields struct {
	Path    string            `json:"path"`
	SHA256  string            `json:"sha256"`
	Files   []redactFile      `json:"files"`
	Outcome any               `json:"outcome"`
	Env     map[string]string `json:"env"`
	Size    int64             `json:"size"`
	Ratio   float64           `json:"ratio"`
	OK      bool              `json:"ok"`
	None    *string           `json:"none"`
	Empty   []string          `json:"empty"`
	Tags    []any             `json:"tags"`
}

type redactFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Rewriting every string with the identity gives back json.Marshal's
// bytes exactly: order, numbers and escapes are kept.
func TestMapStringsIdentity(t *testing.T) {
	in := redactFields{
		Path: "a/<b>&\"c\"\n\u2028é\x00", SHA256: "ab", Files: []redactFile{{"x", "1"}, {"y", "2"}},
		Outcome: map[string]any{"error": "boom", "code": 3}, Env: map[string]string{"K": "V"},
		Size: 1 << 60, Ratio: 0.1, OK: true, Empty: []string{}, Tags: []any{1, "two", nil, false, []any{}, map[string]any{}},
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mapStrings(body, func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(body) {
		t.Errorf("identity rewrite\n%s\nwant\n%s", got, body)
	}
}

// SetRedact rewrites every string of every record, keys too, but the
// values of the kept fields; the chain still verifies.
func TestSetRedact(t *testing.T) {
	const secret = "hunter2<&>"
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.SetRedact(func(s string) string { return strings.ReplaceAll(s, secret, "[redacted X]") }, "sha256")
	fields := redactFields{
		Path: "out/" + secret + ".txt", SHA256: "kept " + secret,
		Files:   []redactFile{{"in/" + secret, secret}},
		Outcome: map[string]any{"error": "open " + secret + ": denied"},
		Env:     map[string]string{secret: "v"},
		Tags:    []any{secret, 1},
	}
	if err := l.Write("run_ended", fields); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("shutdown", nil); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Verify(path); err != nil {
		t.Fatalf("the redacted log does not verify: %v", err)
	}
	lines := readLines(t, path)
	var got redactFields
	if err := json.Unmarshal(lines[0], &got); err != nil {
		t.Fatal(err)
	}
	want := redactFields{
		Path: "out/[redacted X].txt", SHA256: "kept " + secret,
		Files:   []redactFile{{"in/[redacted X]", secret}},
		Outcome: map[string]any{"error": "open [redacted X]: denied"},
		Env:     map[string]string{"[redacted X]": "v"},
		Tags:    []any{"[redacted X]", 1.0},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("record\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	// Only the kept fields hold the secret, as the record wrote them.
	escaped, _ := json.Marshal(secret)
	if n := strings.Count(string(lines[0]), string(escaped[1:len(escaped)-1])); n != 2 {
		t.Errorf("%d copies of the secret in %s; want the 2 of the sha256 fields", n, lines[0])
	}
}

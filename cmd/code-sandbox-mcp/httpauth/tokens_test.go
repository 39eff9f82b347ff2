package httpauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sumHex is the token file's hash of token.
func sumHex(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// writeFile writes a token file of mode perm in a new temporary directory
// and returns its path.
func writeFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// Chmod, not the umask-bound WriteFile mode, sets exactly perm.
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadAndLookup(t *testing.T) {
	path := writeFile(t, "# clients\n\nalice "+sumHex("tok-a")+"\n  \t\n  # indented comment\nbob.ci_2-x\t"+sumHex("tok-b")+"  \n", 0o600)
	toks, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if toks.Len() != 2 {
		t.Errorf("Len: got %d; want 2", toks.Len())
	}
	for _, tc := range []struct {
		token, name string
		ok          bool
	}{
		{"tok-a", "alice", true},
		{"tok-b", "bob.ci_2-x", true},
		{"tok-c", "", false},
		{"tok-", "", false},
		{"tok-aa", "", false},
		{"", "", false},
		{sumHex("tok-a"), "", false}, // the hash is not the token
	} {
		name, ok := toks.Lookup(tc.token)
		if name != tc.name || ok != tc.ok {
			t.Errorf("Lookup(%q): got %q, %v; want %q, %v", tc.token, name, ok, tc.name, tc.ok)
		}
	}
	var none *Tokens
	if name, ok := none.Lookup("tok-a"); ok {
		t.Errorf("nil Tokens: Lookup found %q; want nothing", name)
	}
}

func TestLoadRefuses(t *testing.T) {
	good := "alice " + sumHex("a") + "\n"
	for _, tc := range []struct {
		name, content string
		perm          os.FileMode
		want          []string // each in the error
	}{
		{"group-writable", good, 0o620, []string{"writable by group or others", "chmod go-w"}},
		{"world-writable", good, 0o602, []string{"writable by group or others", "chmod go-w"}},
		{"short hex", good + "bob " + sumHex("b")[:63] + "\n", 0o600, []string{":2:", "64 lowercase hex"}},
		{"upper hex", good + "bob " + strings.ToUpper(sumHex("b")) + "\n", 0o600, []string{":2:", "64 lowercase hex"}},
		{"not hex", "# c\nbob " + strings.Repeat("g", 64) + "\n", 0o600, []string{":2:", "64 lowercase hex"}},
		{"one field", good + "\n\nbob\n", 0o600, []string{":4:", "want NAME SHA256HEX"}},
		{"three fields", "bob " + sumHex("b") + " # comment\n", 0o600, []string{":1:", "want NAME SHA256HEX"}},
		{"duplicate name", good + "alice " + sumHex("b") + "\n", 0o600, []string{":2:", "alice", "line 1"}},
		{"duplicate hash", good + "bob " + sumHex("a") + "\n", 0o600, []string{":2:", "line 1"}},
		{"bad character", "al/ice " + sumHex("a") + "\n", 0o600, []string{":1:", "A-Z a-z 0-9"}},
		{"non-ASCII name", "alicé " + sumHex("a") + "\n", 0o600, []string{":1:", "A-Z a-z 0-9"}},
		{"long name", strings.Repeat("n", 65) + " " + sumHex("a") + "\n", 0o600, []string{":1:", "1 to 64"}},
		{"no client", "# nobody yet\n\n", 0o600, []string{"holds no client", "token new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content, tc.perm)
			toks, err := Load(path)
			if err == nil {
				t.Fatalf("Load: got %d clients and no error; want an error", toks.Len())
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load: got error %q; want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadAcceptsLongestName(t *testing.T) {
	name := strings.Repeat("n", 64)
	toks, err := Load(writeFile(t, name+" "+sumHex("a"), 0o640)) // no final newline; group may read
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, _ := toks.Lookup("a"); got != name {
		t.Errorf("Lookup: got %q; want %q", got, name)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: got %v; want os.ErrNotExist", err)
	}
}

func TestNewToken(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b {
		t.Fatalf("NewToken twice: got %q both times", a)
	}
	raw, ok := strings.CutPrefix(a, TokenPrefix)
	if !ok {
		t.Fatalf("NewToken: got %q; want it to start with %q", a, TokenPrefix)
	}
	if b, err := base64.RawURLEncoding.DecodeString(raw); err != nil || len(b) != 32 {
		t.Errorf("NewToken: got %q, %d bytes (%v); want 32 bytes in unpadded base64url", a, len(b), err)
	}
	if !isB64Token(a) {
		t.Errorf("NewToken: %q is not an RFC 6750 b64token", a)
	}
}

func TestAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := Append(path, "alice", "tok-a"); err != nil {
		t.Fatalf("Append to a new file: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("new file: got mode %04o; want 0600", fi.Mode().Perm())
	}
	if err := Append(path, "bob", "tok-b"); err != nil {
		t.Fatalf("second Append: %v", err)
	}
	err = Append(path, "alice", "tok-c")
	if !errors.Is(err, errNameTaken) {
		t.Errorf("Append of a name already there: got %v; want errNameTaken", err)
	}
	if err := Append(path, "carol", "tok-a"); err == nil {
		t.Error("Append of a token already there: got no error")
	}
	if err := Append(path, "bad name", "tok-d"); err == nil {
		t.Error("Append of a bad name: got no error")
	}
	got, _ := os.ReadFile(path)
	want := "alice " + sumHex("tok-a") + "\nbob " + sumHex("tok-b") + "\n"
	if string(got) != want {
		t.Errorf("file: got %q; want %q", got, want)
	}
	toks, err := Load(path)
	if err != nil {
		t.Fatalf("Load after Append: %v", err)
	}
	if name, _ := toks.Lookup("tok-b"); name != "bob" {
		t.Errorf("Lookup(tok-b): got %q; want bob", name)
	}
}

func TestAppendRefuses(t *testing.T) {
	line := "alice " + sumHex("tok-a")
	// A file whose last line has no newline gets one first.
	path := writeFile(t, line, 0o600)
	if err := Append(path, "bob", "tok-b"); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if got, want := mustRead(t, path), line+"\nbob "+sumHex("tok-b")+"\n"; got != want {
		t.Errorf("file: got %q; want %q", got, want)
	}

	for _, tc := range []struct {
		name, content string
		perm          os.FileMode
		want          string
	}{
		{"group-writable", line + "\n", 0o660, "chmod go-w"},
		{"malformed", "alice\n", 0o600, ":1:"},
	} {
		path := writeFile(t, tc.content, tc.perm)
		err := Append(path, "bob", "tok-b")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Append: got %v; want an error containing %q", tc.name, err, tc.want)
		}
		if got := mustRead(t, path); got != tc.content {
			t.Errorf("%s: file changed: got %q; want %q", tc.name, got, tc.content)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
)

// runToken runs `code-sandbox-mcp ARGS...` and returns its exit status,
// stdout and stderr.
func runToken(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := realMain(args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
	return code, stdout.String(), stderr.String()
}

func TestTokenNewPrints(t *testing.T) {
	code, stdout, stderr := runToken(t, "token", "new", "alice")
	if code != exitOK {
		t.Fatalf("exit %d; want 0\nstderr: %s", code, stderr)
	}
	tok, ok := strings.CutSuffix(stdout, "\n")
	if !ok || strings.ContainsAny(tok, "\n ") || !strings.HasPrefix(tok, httpauth.TokenPrefix) {
		t.Fatalf("stdout: got %q; want the token alone on one line", stdout)
	}
	if want := httpauth.Line("alice", tok) + "\n"; stderr != want {
		t.Errorf("stderr: got %q; want the line %q", stderr, want)
	}
	// The line on stderr is a token file that lets the token in.
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(stderr), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := httpauth.Load(path)
	if err != nil {
		t.Fatalf("Load of the printed line: %v", err)
	}
	if name, ok := toks.Lookup(tok); !ok || name != "alice" {
		t.Errorf("Lookup of the printed token: got %q, %v; want alice", name, ok)
	}
	if strings.Contains(stderr, tok) {
		t.Error("stderr holds the token")
	}
	if _, again, _ := runToken(t, "token", "new", "alice"); again == stdout {
		t.Error("two tokens for the same name are the same")
	}
}

func TestTokenNewAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	code, stdout, stderr := runToken(t, "token", "new", "alice", "--append", path)
	if code != exitOK {
		t.Fatalf("exit %d; want 0\nstderr: %s", code, stderr)
	}
	aliceTok := strings.TrimSuffix(stdout, "\n")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("created file: got mode %04o; want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(stderr, "added alice to "+path) || strings.Contains(stderr, aliceTok) {
		t.Errorf("stderr: got %q; want it to say the line was added, without the token", stderr)
	}

	// The flag may come before NAME too.
	code, stdout, stderr = runToken(t, "token", "new", "--append", path, "bob")
	if code != exitOK {
		t.Fatalf("second: exit %d; want 0\nstderr: %s", code, stderr)
	}
	bobTok := strings.TrimSuffix(stdout, "\n")

	before := mustReadFile(t, path)
	code, stdout, stderr = runToken(t, "token", "new", "alice", "--append", path)
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "alice") {
		t.Errorf("a name already in the file: exit %d, stdout %q, stderr %q; want 1, no token and the name", code, stdout, stderr)
	}
	if after := mustReadFile(t, path); after != before {
		t.Errorf("refused append changed the file: got %q; want %q", after, before)
	}

	toks, err := httpauth.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for tok, want := range map[string]string{aliceTok: "alice", bobTok: "bob"} {
		if name, _ := toks.Lookup(tok); name != want {
			t.Errorf("Lookup: got %q; want %q", name, want)
		}
	}
	if strings.Contains(before, aliceTok) || strings.Contains(before, bobTok) {
		t.Error("the token file holds a token")
	}
}

func TestTokenNewRefusesWritableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runToken(t, "token", "new", "alice", "--append", path)
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "chmod go-w "+path) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, no token, and what to run", code, stdout, stderr)
	}
	if got := mustReadFile(t, path); got != "" {
		t.Errorf("file: got %q; want it unchanged", got)
	}
}

// The documented set-up appends to a file in a directory a fresh host
// does not have: it is created, for the owner alone (issue 29, item 2).
func TestTokenNewMakesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "code-sandbox-mcp")
	path := filepath.Join(dir, "tokens")
	code, stdout, stderr := runToken(t, "token", "new", "alice", "--append", path)
	if code != exitOK || stdout == "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the token", code, stdout, stderr)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if _, err := httpauth.Load(path); err != nil {
		t.Errorf("the new file: %v", err)
	}
	// A directory that cannot be made: the error says what to create.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub")
	code, stdout, stderr = runToken(t, "token", "new", "alice", "--append", filepath.Join(bad, "tokens"))
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "install -d -m 0700 "+bad) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, no token, and the directory to create", code, stdout, stderr)
	}
}

func TestTokenUsage(t *testing.T) {
	for _, args := range [][]string{
		{"token"},
		{"token", "old", "alice"},
		{"token", "new"},
		{"token", "new", "alice", "bob"},
		{"token", "new", "al ice"},
		{"token", "new", "alice/x"},
		{"token", "new", strings.Repeat("n", 65)},
		{"token", "new", "alice", "--append"},
		{"token", "new", "alice", "--nope"},
	} {
		code, stdout, stderr := runToken(t, args...)
		if code != exitUsage || stdout != "" || stderr == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing on stdout and why on stderr", args, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runToken(t, "token", "help"); code != exitOK || !strings.Contains(stdout, "token new NAME") {
		t.Errorf("token help: exit %d, stdout %q; want 0 and the usage", code, stdout)
	}
	if !strings.Contains(usage, "token new NAME [--append FILE]") {
		t.Error("the usage text does not mention token new")
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

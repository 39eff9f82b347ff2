package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/audit"
)

func TestAuditVerify(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "audit.log.1")
	path := filepath.Join(dir, "audit.log")
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, ev := range []string{"start", "run_started", "run_ended"} {
		if err := l.Write(ev, map[string]string{"principal": "local"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(path, old); err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write("shutdown", nil); err != nil {
		t.Fatal(err)
	}
	oldSum, err := audit.Verify(old)
	if err != nil {
		t.Fatal(err)
	}

	verify := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := realMain(append([]string{"audit", "verify"}, args...), strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		return code, stdout.String(), stderr.String()
	}

	code, stdout, stderr := verify(old, path)
	if want := regexp.MustCompile(`^5 records, chain chain:[0-9a-f]{32}, intact; last [0-9a-f]{64}\n$`); code != exitOK || !want.MatchString(stdout) || stderr != "" {
		t.Errorf("intact: exit %d, stdout %q, stderr %q; want 0 and %s", code, stdout, stderr, want)
	}
	newSum, err := audit.VerifyAfter(oldSum.Last, path)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = verify("--after", oldSum.Last, path)
	if want := "2 records, continuing " + oldSum.Last + ", intact; last " + newSum.Last + "\n"; code != exitOK || stdout != want {
		t.Errorf("--after: exit %d, stdout %q; want 0 and %q", code, stdout, want)
	}

	// Delete the second record of the old file.
	b, _ := os.ReadFile(old)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(old, []byte(lines[0]+lines[2]), 0o600)
	code, stdout, stderr = verify(old, path)
	if want := old + ":2: "; code != exitFailure || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("broken: exit %d, stdout %q, stderr %q; want 1 and one line starting %q", code, stdout, stderr, want)
	}

	code, _, stderr = verify(filepath.Join(dir, "missing.log"))
	if code != exitFailure || !strings.Contains(stderr, "missing.log") {
		t.Errorf("missing file: exit %d, stderr %q; want 1 naming the file", code, stderr)
	}

	for _, args := range [][]string{{"audit"}, {"audit", "check"}, {"audit", "verify"}, {"audit", "verify", "--after", "x", path}, {"audit", "verify", "--bogus", path}} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t)); code != exitUsage {
			t.Errorf("%q: exit %d; want %d (usage)\nstderr: %s", args, code, exitUsage, stderr.String())
		}
	}
}

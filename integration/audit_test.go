package integration

// The audit log through the real binary: --audit-log over stdio and HTTP,
// the records of runs (an output file, an input file, a failure, a
// timeout, a run that could not run), of a session and of a failed
// authentication, no pass-through value anywhere, SIGHUP's rotation, and
// `audit verify` on the real log, intact and after each kind of
// tampering.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/internal/jsontest"
)

// randomSecret is a value that cannot be in the log by chance.
func randomSecret(t *testing.T) string {
	var b [16]byte
	rand.Read(b[:])
	return "secret-" + hex.EncodeToString(b[:])
}

// auditVerify runs `code-sandbox-mcp audit verify files...` and returns
// its exit status, stdout and stderr.
func auditVerify(t *testing.T, files ...string) (int, string, string) {
	t.Helper()
	cmd := osexec.Command(mcpBinary(t), append([]string{"audit", "verify"}, files...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*osexec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// auditRecord is a record of the log, decoded.
type auditRecord map[string]any

// get returns the value at a dotted path ("outcome.exit_code").
func (r auditRecord) get(path string) any { return jsontest.Get(map[string]any(r), path) }

// readAudit returns the lines and records of the log files, in order.
func readAudit(t *testing.T, files ...string) ([]string, []auditRecord) {
	t.Helper()
	var lines []string
	var recs []auditRecord
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ls, rs := jsontest.Lines(t, f, data)
		lines = append(lines, ls...)
		for _, r := range rs {
			recs = append(recs, r)
		}
	}
	return lines, recs
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// assertNoSecret fails if text holds secret, plainly, in base64 or in
// hex.
func assertNoSecret(t *testing.T, text, secret string) {
	t.Helper()
	for _, s := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret)), hex.EncodeToString([]byte(secret))} {
		if strings.Contains(text, s) {
			t.Errorf("the audit log holds the pass-through value (as %q)", s)
		}
	}
}

func TestAuditStdio(t *testing.T) {
	dir := t.TempDir()
	log, old := filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit.log.1")
	secret := randomSecret(t)
	s, cmd, stop := startAudited(t, serverSpec{
		args: []string{"--audit-log", log, "--pass-through-env", "SECRET_X"},
		env:  []string{"SECRET_X=" + secret},
	})
	rOut, session := auditedCalls(t, s, cmd, log, old, secret)
	stop()

	recs := checkAuditText(t, secret, old, log)
	events, runs := auditRuns(t, recs)
	want := "start run_started run_ended run_started run_ended rotated run_started run_ended run_started run_ended " +
		"session_created run_started run_ended session_closed session_ended run_started run_ended shutdown"
	// session_closed and session_ended come in either order: the end is
	// recorded by the executor as close_session returns.
	got := strings.Replace(strings.Join(events, " "), "session_ended session_closed", "session_closed session_ended", 1)
	if got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, " "), want)
	}
	if st := recs[0]; st["transport"] != "stdio" || st["include_code"] != false || fmt.Sprint(st["pass_through_env"]) != "[SECRET_X]" {
		t.Errorf("start %v", st)
	}
	if sd := recs[len(recs)-1]; !strings.Contains(fmt.Sprint(sd["reason"]), "stdin") {
		t.Errorf("shutdown %v; want the reason stdin closed", sd)
	}
	checkAuditedRuns(t, runs, rOut, session, secret)
	checkAuditedSession(t, recs, session)
	t.Run("tampering", func(t *testing.T) { auditTampering(t, old, log) })
}

// The programs TestAuditStdio runs, and the input file of one.
const (
	auditOutCode   = "import os\nopen('out.txt', 'w').write('hello audit')\nprint(os.environ['SECRET_X'])"
	auditInCode    = "print(open('in.csv').read().count(','))"
	auditInData    = "a,b\n1,2\n"
	auditFailCode  = "import sys\nsys.exit(3)"
	auditSleepCode = "import time\ntime.sleep(30)"
)

// auditedCalls makes TestAuditStdio's calls to s, whose process is cmd
// and whose audit log is log: a run with an output file and secret on
// stdout, one with an input file, then a SIGHUP once the log is moved to
// old, then a failure, a timeout, a session with a cell, closed, and a
// run in it that cannot run. It returns the first run's result and the
// session's id.
func auditedCalls(t *testing.T, s *mcpServer, cmd *osexec.Cmd, log, old, secret string) (toolResult, string) {
	t.Helper()
	ctx := testContext(t)
	rOut := s.call(ctx, t, "run_python_code", code(auditOutCode))
	if rOut.isError || rOut.out.Stdout != secret+"\n" || len(rOut.out.Files) != 1 {
		t.Fatalf("the run with an output file: %q %+v", rOut.text, rOut.out)
	}
	args := code(auditInCode)
	args["files"] = []map[string]any{{"path": "in.csv", "content": auditInData}}
	if r := s.call(ctx, t, "run_python_code", args); r.isError || r.out.Stdout != "2\n" {
		t.Fatalf("the run with an input file: %q", r.text)
	}

	// SIGHUP mid-way, once the operator moved the file: the server goes on
	// in a new file.
	if err := os.Rename(log, old); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitFor(20*time.Second, func() bool { return strings.Contains(s.stderr.String(), "audit log reopened") }) {
		t.Fatalf("no rotation logged 20s after SIGHUP")
	}

	if r := s.call(ctx, t, "run_python_code", code(auditFailCode)); !r.isError || r.out.ExitCode != 3 {
		t.Fatalf("the failing run (after SIGHUP: the server must still serve): %q %+v", r.text, r.out)
	}
	args = code(auditSleepCode)
	// 8 s, not 1: a run whose timeout ends while its sandbox is made, as
	// on a loaded host one can take over a second (and once took over
	// 3 s under make test's three lanes), is no timeout.
	args["timeout_seconds"] = 8
	if r := s.call(ctx, t, "run_python_code", args); !r.out.TimedOut {
		t.Fatalf("the timed-out run: %q %+v", r.text, r.out)
	}
	var sess createdSession
	if text, isErr := callRaw(ctx, t, s.c, "create_session", map[string]any{"language": "python"}, &sess); isErr {
		t.Fatalf("create_session: %q", text)
	}
	if r := s.call(ctx, t, "run_python_code", map[string]any{"code": "x = 1", "session_id": sess.SessionID}); r.isError {
		t.Fatalf("the cell: %q", r.text)
	}
	if text, isErr := callRaw(ctx, t, s.c, "close_session", map[string]any{"session_id": sess.SessionID}, nil); isErr {
		t.Fatalf("close_session: %q", text)
	}
	if r := s.call(ctx, t, "run_python_code", map[string]any{"code": "x", "session_id": sess.SessionID}); !r.isError {
		t.Fatalf("a run in the closed session: %q; want an error", r.text)
	}
	return rOut, sess.SessionID
}

// checkAuditText checks the log files as text: audit verify finds them
// intact, and they name the pass-through variable but hold neither its
// value nor, without include_code, the code. It returns their records.
func checkAuditText(t *testing.T, secret string, files ...string) []auditRecord {
	t.Helper()
	if code, out, errOut := auditVerify(t, files...); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify %s: exit %d, %q %q; want 0, intact", strings.Join(files, " "), code, out, errOut)
	}
	lines, recs := readAudit(t, files...)
	text := strings.Join(lines, "\n")
	assertNoSecret(t, text, secret)
	if !strings.Contains(text, `"SECRET_X"`) {
		t.Errorf("the log does not name the pass-through variable SECRET_X")
	}
	for _, c := range []string{auditOutCode, auditInCode, auditFailCode} {
		enc, _ := json.Marshal(c)
		if strings.Contains(text, string(enc[1:len(enc)-1])) {
			t.Errorf("the log holds the code %q without include_code", c)
		}
	}
	return recs
}

// auditRuns returns the events of recs, in order, and their run_ended
// records, each checked against its run_started.
func auditRuns(t *testing.T, recs []auditRecord) ([]string, []auditRecord) {
	t.Helper()
	var events []string
	started := map[string]auditRecord{}
	var runs []auditRecord // run_ended, in order
	for _, r := range recs {
		ev, _ := r["event"].(string)
		events = append(events, ev)
		switch ev {
		case "run_started":
			started[r["run_id"].(string)] = r
		case "run_ended":
			st, ok := started[r["run_id"].(string)]
			if !ok {
				t.Errorf("run_ended %v has no run_started", r["run_id"])
			} else if st.get("code.sha256") != r.get("code.sha256") || st["principal"] != r["principal"] {
				t.Errorf("run_started %v and run_ended %v disagree", st, r)
			}
			runs = append(runs, r)
		}
	}
	return events, runs
}

// checkAuditedRuns checks the run_ended records of auditedCalls' six
// runs, whose first result was rOut, in session.
func checkAuditedRuns(t *testing.T, runs []auditRecord, rOut toolResult, session, secret string) {
	t.Helper()
	for _, r := range runs {
		if r["principal"] != "local" || r["tool"] != "run_python_code" || r["language"] != "python" || r["image"] != pythonImage {
			t.Errorf("run_ended %v; want local, run_python_code, python, %s", r, pythonImage)
		}
	}
	checkRun := func(i int, code string, fields map[string]any) {
		t.Helper()
		r := runs[i]
		if r.get("code.sha256") != sha256hex(code) || r.get("code.size") != float64(len(code)) {
			t.Errorf("run %d code %v; want sha256 %s, size %d", i, r["code"], sha256hex(code), len(code))
		}
		for k, v := range fields {
			if got := r.get(k); fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("run %d %s = %v; want %v", i, k, got, v)
			}
		}
		if _, ok := fields["image_digest"]; !ok && !strings.HasPrefix(fmt.Sprint(r["image_digest"]), "sha256:") {
			t.Errorf("run %d image_digest %v; want sha256:...", i, r["image_digest"])
		}
	}
	f := rOut.out.Files[0]
	checkRun(0, auditOutCode, map[string]any{
		"outcome.exit_code": 0, "outcome.timed_out": false, "outcome.stdout_bytes": len(secret) + 1,
		"files_out":              fmt.Sprintf("[map[path:%s sha256:%s size:%d]]", f.Path, sha256hex("hello audit"), len("hello audit")),
		"limits.timeout_seconds": 30,
	})
	if f.SHA256 != sha256hex("hello audit") {
		t.Errorf("the result's file sha256 %s; want the log's", f.SHA256)
	}
	checkRun(1, auditInCode, map[string]any{
		"outcome.exit_code": 0,
		"files_in":          fmt.Sprintf("[map[path:in.csv sha256:%s size:%d]]", sha256hex(auditInData), len(auditInData)),
	})
	checkRun(2, auditFailCode, map[string]any{"outcome.exit_code": 3, "outcome.timed_out": false})
	checkRun(3, auditSleepCode, map[string]any{"outcome.timed_out": true, "limits.timeout_seconds": 8})
	checkRun(4, "x = 1", map[string]any{"session": session, "execution_count": 1, "outcome.exit_code": 0})
	checkRun(5, "x", map[string]any{"session": session, "image_digest": ""})
	if runs[5].get("outcome.error") == nil {
		t.Errorf("the run in a closed session: %v; want outcome.error", runs[5])
	}
}

// checkAuditedSession checks the records of session's creation, close
// and end.
func checkAuditedSession(t *testing.T, recs []auditRecord, session string) {
	t.Helper()
	for _, r := range recs {
		switch r["event"] {
		case "session_created":
			if r["session"] != session || r["principal"] != "local" || r["language"] != "python" {
				t.Errorf("session_created %v", r)
			}
		case "session_closed":
			if r["session"] != session || r["was_open"] != true {
				t.Errorf("session_closed %v", r)
			}
		case "session_ended":
			if r["session"] != session || !strings.Contains(fmt.Sprint(r["why"]), "close_session") || r["execution_count"] != 1.0 {
				t.Errorf("session_ended %v", r)
			}
		}
	}
}

// auditTampering checks that audit verify catches each way of tampering
// with log, the file that continues old, at the line where it happened.
func auditTampering(t *testing.T, old, log string) {
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	newLines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	const k = 5 // a record in the middle of the new file, 1-based
	if len(newLines) < k+3 {
		t.Fatalf("the new file has %d records; want more than %d", len(newLines), k+2)
	}
	for _, tc := range []struct {
		name string
		// tamper returns the file's new content.
		tamper func(ls []string) string
		line   int    // the line verify must report
		want   string // in its reason
	}{
		{"edit a field of record k", func(ls []string) string {
			ls[k-1] = strings.Replace(ls[k-1], `"principal":"local"`, `"principal":"mallory"`, 1)
			return strings.Join(ls, "\n") + "\n"
		}, k + 1, fmt.Sprintf(":%d was edited", k)},
		{"delete record k", func(ls []string) string {
			return strings.Join(append(ls[:k-1:k-1], ls[k:]...), "\n") + "\n"
		}, k, "deleted or reordered"},
		{"swap records k and k+1", func(ls []string) string {
			ls[k-1], ls[k] = ls[k], ls[k-1]
			return strings.Join(ls, "\n") + "\n"
		}, k, "deleted or reordered"},
		{"cut the tail of record k", func(ls []string) string {
			ls[k-1] = ls[k-1][:len(ls[k-1])/2]
			return strings.Join(ls, "\n") + "\n"
		}, k, "cut or edited"},
		{"truncate the file inside record k", func(ls []string) string {
			return strings.Join(ls[:k-1], "\n") + "\n" + ls[k-1][:len(ls[k-1])/2]
		}, k, "incomplete record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "audit.log")
			ls := append([]string(nil), newLines...)
			if err := os.WriteFile(p, []byte(tc.tamper(ls)), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := auditVerify(t, old, p)
			prefix := fmt.Sprintf("%s:%d: ", p, tc.line)
			if code != 1 || !strings.HasPrefix(errOut, prefix) || !strings.Contains(errOut, tc.want) {
				t.Errorf("audit verify: exit %d, %q %q; want 1 and %s...%s...", code, out, errOut, prefix, tc.want)
			}
		})
	}
	// The old file alone is intact; the new one alone continues it.
	if code, _, errOut := auditVerify(t, old); code != 0 {
		t.Errorf("the rotated file alone: exit %d %q; want intact", code, errOut)
	}
	if code, _, errOut := auditVerify(t, log); code != 1 || !strings.Contains(errOut, "continues an earlier chain") {
		t.Errorf("the new file alone: exit %d %q; want it to say it continues a chain", code, errOut)
	}
}

func TestAuditHTTP(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	path, tokens := tokenFile(t, "alice")
	// Registered before startHTTP, so run after its SIGTERM: the server
	// has exited, and the log must end in shutdown, intact.
	t.Cleanup(func() {
		if code, out, errOut := auditVerify(t, log); code != 0 {
			t.Errorf("audit verify after SIGTERM: exit %d %q %q", code, out, errOut)
		}
		_, recs := readAudit(t, log)
		if last := recs[len(recs)-1]; last["event"] != "shutdown" || !strings.Contains(fmt.Sprint(last["reason"]), "terminated") {
			t.Errorf("the last record %v; want shutdown by SIGTERM", last)
		}
	})
	s := startHTTP(t, serverSpec{args: []string{"--auth-tokens", path, "--audit-log", log}})
	wrong := httpauth.NewToken()
	if status, _, _ := s.post(t, map[string]string{"Authorization": "Bearer " + wrong}); status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d; want 401", status)
	}
	c := s.connect(t, tokens["alice"])
	ctx := testContext(t)
	if text, isErr := callRaw(ctx, t, c, "run_python_code", code("print(6 * 7)"), nil); isErr || text != "42\n" {
		t.Fatalf("run over HTTP: %q", text)
	}

	// Each record is on disk before the call is answered.
	if code, out, errOut := auditVerify(t, log); code != 0 {
		t.Fatalf("audit verify while serving: exit %d %q %q", code, out, errOut)
	}
	lines, recs := readAudit(t, log)
	text := strings.Join(lines, "\n")
	for _, tok := range []string{wrong, tokens["alice"]} {
		if strings.Contains(text, tok) {
			t.Errorf("the log holds a token")
		}
	}
	var failed, ended auditRecord
	for _, r := range recs {
		switch r["event"] {
		case "auth_failed":
			failed = r
		case "run_ended":
			ended = r
		}
	}
	if recs[0]["event"] != "start" || recs[0]["transport"] != "http" || !strings.HasPrefix(fmt.Sprint(recs[0]["listen"]), "127.0.0.1:") {
		t.Errorf("start %v; want transport http and the address listened on", recs[0])
	}
	if failed == nil || failed["reason"] == nil || !strings.HasPrefix(fmt.Sprint(failed["remote"]), "127.0.0.1:") {
		t.Errorf("auth_failed %v; want a reason and the remote address", failed)
	} else if _, ok := failed["principal"]; ok {
		t.Errorf("auth_failed %v names a principal", failed)
	}
	if ended == nil || ended["principal"] != "alice" || ended.get("outcome.exit_code") != 0.0 || ended.get("outcome.stdout_bytes") != 3.0 {
		t.Errorf("run_ended %v; want alice's run, exit 0, 3 bytes out", ended)
	}
}

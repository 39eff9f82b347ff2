package integration

// A pass-through value kept out of the audit log wherever a program or a
// client puts it (issue 23): a file named after it, an input file's path,
// a session id and the error that names it, the code's text.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuditRedactsPassThroughValues(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	// A & that JSON writes as \u0026: the log must hold the value in
	// neither form.
	secret := randomSecret(t) + "&x"
	s, _, stop := startAudited(t, serverSpec{
		args:   []string{"--audit-log", log, "--pass-through-env", "SECRET_X"},
		env:    []string{"SECRET_X=" + secret},
		config: "[audit]\ninclude_code = true\n",
	})
	prog := redactedCalls(t, s, secret)
	stop()

	if code, out, errOut := auditVerify(t, log); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify of the redacted log: exit %d, %q %q; want 0, intact", code, out, errOut)
	}
	lines, recs := readAudit(t, log)
	text := strings.Join(lines, "\n")
	escaped, _ := json.Marshal(secret)
	for _, form := range []string{secret, string(escaped[1 : len(escaped)-1]), strings.TrimSuffix(secret, "&x")} {
		if strings.Contains(text, form) {
			t.Errorf("the audit log holds the pass-through value as %q:\n%s", form, text)
		}
	}
	assertNoSecret(t, text, secret)

	checkRedactedRecords(t, recs, prog, secret)
}

// redactedCalls makes the calls of TestAuditRedactsPassThroughValues to
// s, each with secret, the pass-through value, somewhere: a program that
// names a directory and a file after it, with an input file whose path
// holds it, and code that holds it (which it returns); a run in a session
// whose id is the value; a close_session of it.
func redactedCalls(t *testing.T, s *mcpServer, secret string) string {
	t.Helper()
	ctx := testContext(t)
	prog := "import os\ns = os.environ['SECRET_X']\nos.mkdir(s)\nopen(os.path.join(s, s + '.txt'), 'w').write('x')\n# " + secret
	args := code(prog)
	args["files"] = []map[string]any{{"path": "in-" + secret + ".csv", "content": "a,b\n"}}
	r := s.call(ctx, t, "run_python_code", args)
	want := secret + "/" + secret + ".txt"
	if r.isError || len(r.out.Files) != 1 || r.out.Files[0].Path != want {
		t.Fatalf("the run: %q, files %+v; want %s", r.text, r.out.Files, want)
	}
	// A run in a session whose id is the value: refused, with an error
	// that names the id; and a close_session of it.
	if r := s.call(ctx, t, "run_python_code", map[string]any{"code": "1", "session_id": secret}); !r.isError || !strings.Contains(r.text, secret) {
		t.Fatalf("a run in session %q: %q; want an error naming it", secret, r.text)
	}
	if text, isErr := callRaw(ctx, t, s.c, "close_session", map[string]any{"session_id": secret}, nil); isErr {
		t.Fatalf("close_session: %q", text)
	}
	return prog
}

// checkRedactedRecords checks the records of redactedCalls' calls, whose
// program was prog: every place the value was is redacted.
func checkRedactedRecords(t *testing.T, recs []auditRecord, prog, secret string) {
	t.Helper()
	x := "[redacted SECRET_X]"
	var started, ended, refused, closed auditRecord
	for _, rec := range recs {
		switch rec["event"] {
		case "run_started":
			if started == nil {
				started = rec
			}
		case "run_ended":
			if ended == nil {
				ended = rec
			} else {
				refused = rec
			}
		case "session_closed":
			closed = rec
		}
	}
	if ended == nil || refused == nil || closed == nil {
		t.Fatalf("records %v; want two run_ended and a session_closed", recs)
	}
	out, _ := ended["files_out"].([]any)
	if len(out) != 1 {
		t.Fatalf("run_ended files_out %v; want the file", ended["files_out"])
	}
	f := out[0].(map[string]any)
	if f["path"] != x+"/"+x+".txt" || f["sha256"] != sha256hex("x") || f["size"] != 1.0 {
		t.Errorf("files_out %v; want path %s/%s.txt, the sha256 of its bytes, size 1", f, x, x)
	}
	if in := ended.get("files_in").([]any); len(in) != 1 || in[0].(map[string]any)["path"] != "in-"+x+".csv" {
		t.Errorf("files_in %v; want in-%s.csv", in, x)
	}
	if got := started.get("code.text"); got != strings.ReplaceAll(prog, secret, x) || started.get("code.sha256") != sha256hex(prog) {
		t.Errorf("run_started code %v; want the text redacted, the sha256 of the code as sent", started["code"])
	}
	if e, _ := refused.get("outcome.error").(string); refused["session"] != x || !strings.Contains(e, x) {
		t.Errorf("the refused run's record %v; want session and error with the value redacted", refused)
	}
	if closed["session"] != x {
		t.Errorf("session_closed %v; want the session redacted", closed)
	}
}

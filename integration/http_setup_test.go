package integration

// The team set-up of docs/http.md, run as written on a fresh root: its
// commands are read from the document, so the two cannot drift.

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// setUpCommands returns the commands of the first sh block of the
// Markdown file at path, with continued lines joined and comments left
// out.
func setUpCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block", path)
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.ReplaceAll(block, "\\\n", " ")
	var cmds []string
	for line := range strings.SplitSeq(block, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestHTTPSetUpAsDocumented runs the set-up of docs/http.md with its
// /etc/code-sandbox-mcp and /var/log/code-sandbox-mcp in a new temporary
// root, where neither exists: the token commands, the openssl command
// for the certificate, then the server, on loopback rather than
// 0.0.0.0:8443, and an authenticated client over TLS (issue 29, item 2).
func TestHTTPSetUpAsDocumented(t *testing.T) {
	if _, err := osexec.LookPath("openssl"); err != nil {
		t.Fatalf("the documented certificate is made with openssl: %v", err)
	}
	root := t.TempDir()
	etc, logs := filepath.Join(root, "etc", "code-sandbox-mcp"), filepath.Join(root, "var", "log", "code-sandbox-mcp")
	bin := mcpBinary(t)
	path := "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	tokens := map[string]string{}
	var server []string
	for _, c := range setUpCommands(t, "../docs/http.md") {
		c = strings.ReplaceAll(c, "/etc/code-sandbox-mcp", etc)
		c = strings.ReplaceAll(c, "/var/log/code-sandbox-mcp", logs)
		if strings.HasPrefix(c, "code-sandbox-mcp --http ") {
			server = strings.Fields(c)[1:]
			continue
		}
		cmd := osexec.Command("/bin/sh", "-c", c)
		cmd.Env = serverEnv(path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, stderr.String())
		}
		if f := strings.Fields(c); len(f) > 3 && f[1] == "token" && f[2] == "new" {
			tokens[f[3]] = strings.TrimSpace(string(out))
		}
	}
	if len(tokens) == 0 || server == nil {
		t.Fatalf("docs/http.md's set-up made tokens %v and ran the server %q; want both", tokens, server)
	}
	for p, want := range map[string]os.FileMode{etc: 0o700 | os.ModeDir, filepath.Join(etc, "tokens"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v; want mode %v", p, fi.Mode(), err, want)
		}
	}

	// The server on loopback: startHTTP gives --http 127.0.0.1:0, and
	// the documented address is left out.
	var args []string
	for i := 0; i < len(server); i++ {
		if server[i] == "--http" {
			i++
			continue
		}
		args = append(args, server[i])
	}
	ca := certOf(t, flagValue(t, args, "--tls-cert"), flagValue(t, args, "--tls-key"))
	s := startHTTPWith(t, serverSpec{args: args}, httpOptions{tls: ca})
	for name, token := range tokens {
		c := s.connect(t, token)
		tools, err := c.ListTools(testContext(t), mcp.ListToolsRequest{})
		if err != nil || !slices.ContainsFunc(tools.Tools, func(tl mcp.Tool) bool { return tl.Name == "run_python_code" }) {
			t.Errorf("tools/list as %s: %v; want run_python_code", name, err)
		}
	}
	audit := flagValue(t, args, "--audit-log")
	if fi, err := os.Stat(filepath.Dir(audit)); err != nil || fi.Mode() != 0o750|os.ModeDir {
		t.Errorf("the audit log's directory: %v %v; want mode drwxr-x---", fi.Mode(), err)
	}
	if b, err := os.ReadFile(audit); err != nil || !strings.Contains(string(b), `"event":"start"`) {
		t.Errorf("the audit log: %v %q; want its start record", err, b)
	}
}

// flagValue is the value of flag in args, which must have it.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 == len(args) {
		t.Fatalf("the documented server command has no %s: %q", flag, args)
	}
	return args[i+1]
}

// certOf is the self-signed certificate in certFile, with its key in
// keyFile, as a CA the test's clients trust alone, for its first name.
func certOf(t *testing.T, certFile, keyFile string) *testCA {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.DNSNames) == 0 {
		t.Fatalf("the documented certificate names no host (subjectAltName DNS): clients would refuse it")
	}
	c := &testCA{pool: x509.NewCertPool(), certFile: certFile, keyFile: keyFile, serverName: cert.DNSNames[0]}
	c.pool.AddCert(cert)
	return c
}

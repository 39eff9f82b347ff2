package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// envMap is a lookupFunc over a map.
func envMap(m map[string]string) lookupFunc {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// tempDirsEnv is an environment whose configuration puts the state and
// uid claims directories under the test's own temporary directory: a
// command that gets as far as exec.New creates them, and must not create
// the host's defaults.
func tempDirsEnv(t *testing.T) lookupFunc {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandbox.toml")
	toml := fmt.Sprintf("[sandbox]\nstate_dir = %q\nuid_lock_dir = %q\n", filepath.Join(dir, "state"), filepath.Join(dir, "uids"))
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return envMap(map[string]string{"CODE_SANDBOX_CONFIG": cfg})
}

func parseGlobals(t *testing.T, args ...string) (globals, []string) {
	t.Helper()
	var g globals
	fs := newGlobalFlagSet(&g, &bytes.Buffer{})
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return g, fs.Args()
}

func TestPassThroughEnvFlagForms(t *testing.T) {
	for _, args := range [][]string{
		{"--pass-through-env", "API_KEY,SECRET_TOKEN"},
		{"--pass-through-env=API_KEY,SECRET_TOKEN"},
		{"-pass-through-env", "API_KEY, SECRET_TOKEN"},
		{"--pass-through-env", "API_KEY", "--pass-through-env", "SECRET_TOKEN"},
	} {
		g, rest := parseGlobals(t, append(args, "doctor")...)
		if want := []string{"API_KEY", "SECRET_TOKEN"}; !slices.Equal(g.passEnv.names, want) || !g.passEnv.set {
			t.Errorf("%q: names %q; want %q", args, g.passEnv.names, want)
		}
		if !slices.Equal(rest, []string{"doctor"}) {
			t.Errorf("%q: rest %q; want [doctor]", args, rest)
		}
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sandbox.toml")
	if err := os.WriteFile(file, []byte(`
[containerd]
address = "/file.sock"
namespace = "from-file"
[sandbox]
pass_through_env = ["FROM_FILE"]
`), 0o644); err != nil {
		t.Fatal(err)
	}

	// Defaults only.
	cfg, err := loadConfig(globals{}, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Containerd.Address != "/run/containerd/containerd.sock" || cfg.Containerd.Namespace != "code-sandbox" {
		t.Errorf("defaults: %+v", cfg.Containerd)
	}

	// File (through the environment) over defaults.
	cfg, err = loadConfig(globals{}, envMap(map[string]string{"CODE_SANDBOX_CONFIG": file}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Containerd.Address != "/file.sock" || !slices.Equal(cfg.Sandbox.PassThroughEnv, []string{"FROM_FILE"}) {
		t.Errorf("file: %+v %+v", cfg.Containerd, cfg.Sandbox)
	}

	// Environment over file.
	env := envMap(map[string]string{"CODE_SANDBOX_CONFIG": "/nonexistent", "CONTAINERD_ADDRESS": "/env.sock", "CONTAINERD_NAMESPACE": "from-env"})
	cfg, err = loadConfig(globals{configPath: file}, env)
	if err != nil {
		t.Fatalf("--config must win over CODE_SANDBOX_CONFIG: %v", err)
	}
	if cfg.Containerd.Address != "/env.sock" || cfg.Containerd.Namespace != "from-env" {
		t.Errorf("env: %+v", cfg.Containerd)
	}

	// Flags over environment.
	g, _ := parseGlobals(t, "--config", file, "--address", "/flag.sock", "--namespace", "from-flag", "--pass-through-env", "A,B")
	cfg, err = loadConfig(g, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Containerd.Address != "/flag.sock" || cfg.Containerd.Namespace != "from-flag" || !slices.Equal(cfg.Sandbox.PassThroughEnv, []string{"A", "B"}) {
		t.Errorf("flags: %+v %+v", cfg.Containerd, cfg.Sandbox)
	}
}

func TestContainerImageOverride(t *testing.T) {
	cfg, err := loadConfig(globals{}, envMap(map[string]string{"CONTAINER_IMAGE": "example.test/custom:1", "CONTAINER_LANGUAGE": "python"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Languages["python"].Image; got != "example.test/custom:1" {
		t.Errorf("python image = %q; want the override", got)
	}
	if got, want := cfg.Languages["javascript"].Image, config.Default().Languages["javascript"].Image; got != want {
		t.Errorf("javascript image = %q; want its own %q", got, want)
	}

	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CONTAINER_LANGUAGE": "python"}, "without CONTAINER_IMAGE"},
		{map[string]string{"CONTAINER_IMAGE": "x"}, "without CONTAINER_LANGUAGE"},
		{map[string]string{"CONTAINER_IMAGE": "x", "CONTAINER_LANGUAGE": "cobol"}, "not a configured language"},
	} {
		_, err := loadConfig(globals{}, envMap(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: error %v; want one saying %q", tc.env, err, tc.want)
		}
	}
}

func TestExecConfig(t *testing.T) {
	g, _ := parseGlobals(t, "--pass-through-env", "SET,UNSET,EMPTY")
	cfg, err := loadConfig(g, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	ec := app.ExecConfig(cfg, envMap(map[string]string{"SET": "v=1", "EMPTY": "", "OTHER": "no"}), nil)
	if want := []string{"SET=v=1", "EMPTY="}; !slices.Equal(ec.PassEnv, want) {
		t.Errorf("PassEnv = %q; want %q (only listed variables that are set)", ec.PassEnv, want)
	}
	if ec.Concurrency != runtime.NumCPU() {
		t.Errorf("Concurrency = %d; want NumCPU %d for 0", ec.Concurrency, runtime.NumCPU())
	}
	if !ec.Pull {
		t.Error("Pull = false; want true for pull = \"missing\"")
	}
	py := ec.Languages[slices.IndexFunc(ec.Languages, func(l config.Language) bool { return l.Name == "python" })]
	if py.Name != "python" || py.File != "main.py" || py.Command[0] != "python3" || py.Limits.MemoryBytes != 512<<20 ||
		py.Limits.Timeout != 30*time.Second || py.Limits.MaxTimeout != 120*time.Second || py.Limits.OutputBytes != 64<<10 ||
		py.Limits.CodeBytes != 1<<20 || py.Limits.PendingSignals != 1024 || py.Limits.OpenFiles != 1024 || py.Limits.TmpBytes != 64<<20 {
		t.Errorf("python = %+v", py)
	}
	if ec.UIDs.First != 2000000000 || ec.UIDs.Last != 2000065535 || ec.UIDLockDir != "/run/code-sandbox-mcp/uids" {
		t.Errorf("uids %v in %q; want the default range and directory", ec.UIDs, ec.UIDLockDir)
	}
	if len(ec.Languages) != 2 {
		t.Errorf("languages %v; want python and javascript", ec.Languages)
	}
	if want := (exec.SessionConfig{Max: 4, IdleTimeout: 10 * time.Minute, MaxLifetime: time.Hour}); ec.Sessions != want {
		t.Errorf("Sessions = %+v; want %+v", ec.Sessions, want)
	}
	if py.SessionDriver != "python" {
		t.Errorf("python's session driver %q; want python", py.SessionDriver)
	}
}

func TestRealMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{[]string{"version"}, exitOK, "code-sandbox-mcp dev\n", ""},
		{[]string{"help"}, exitOK, usage, ""},
		{[]string{"frobnicate"}, exitUsage, "", "unknown command"},
		{[]string{"--no-such-flag"}, exitUsage, "", "no-such-flag"},
		{[]string{"run"}, exitUsage, "", "--language is required"},
		{[]string{"run", "--language", "cobol", "--code", "x"}, exitUsage, "", "unknown language"},
		{[]string{"run", "--language", "python"}, exitUsage, "", "give the program"},
		{[]string{"run", "--language", "python", "--timeout", "10m", "--code", "x"}, exitUsage, "", "over python's max_timeout (2m0s)"},
		// A bare number is seconds, as timeout_seconds is (issue 29, item 4).
		{[]string{"run", "--language", "python", "--timeout", "300", "--code", "x"}, exitUsage, "", "--timeout 5m0s is over python's max_timeout (2m0s)"},
		{[]string{"run", "--language", "python", "--timeout", "five", "--code", "x"}, exitUsage, "", "want seconds, such as 5, or a duration"},
		{[]string{"serve", "extra"}, exitUsage, "", "unexpected arguments"},
		// Global flags after the subcommand count.
		{[]string{"run", "--address", "/nonexistent/containerd.sock", "--language", "python", "--code", "x"}, exitSandbox, "", "/nonexistent/containerd.sock"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderrPart) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderrPart)
		}
	}
}

// A run flag error prints run's usage alone: its own flags and the global
// ones it takes, not the serving flags it refuses (issue 29, item 4).
func TestRunUsageOnAFlagError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"run", "--timeout", "5x", "--language", "python"}, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
	got := stderr.String()
	if code != exitUsage || !strings.Contains(got, "usage: code-sandbox-mcp run ") || !strings.Contains(got, "-timeout seconds") || !strings.Contains(got, "-config file") {
		t.Fatalf("exit %d, stderr:\n%s\nwant 2 and run's usage", code, got)
	}
	for _, name := range serveFlagNames {
		if strings.Contains(got, "-"+name) {
			t.Errorf("run's usage shows the serving flag --%s:\n%s", name, got)
		}
	}
	if strings.Contains(got, "serve MCP") {
		t.Errorf("run's usage is the whole program's:\n%s", got)
	}
}

// The usage says where global flags go: before the subcommand, and after
// it for run and doctor only (it said all subcommands took them after;
// images and serve do not). Each case fails fast: the socket does not
// exist, or the flag is refused before anything connects.
func TestGlobalFlagsWhereUsageSays(t *testing.T) {
	if !strings.Contains(usage, "global flags (before the subcommand; run and doctor accept them after it too)") {
		t.Fatalf("usage no longer says where global flags go; update this test with it:\n%s", usage)
	}
	const sock = "/nonexistent/containerd.sock"
	for _, tc := range []struct {
		args     []string
		accepted bool
	}{
		{[]string{"--address", sock, "run", "--language", "python", "--code", "x"}, true},
		{[]string{"run", "--address", sock, "--language", "python", "--code", "x"}, true},
		{[]string{"--address", sock, "doctor"}, true},
		{[]string{"doctor", "--address", sock}, true},
		{[]string{"--address", sock, "images", "list"}, true},
		{[]string{"images", "list", "--address", sock}, false},
		{[]string{"images", "--address", sock, "list"}, false},
		{[]string{"serve", "--address", sock}, false},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		// A refused flag is a usage error, an undefined flag of the
		// verb, or taken for the verb; an accepted one is dialled.
		refused := code == exitUsage || strings.Contains(stderr.String(), "flag provided but not defined") || strings.Contains(stderr.String(), "unknown verb")
		accepted := !refused && strings.Contains(stdout.String()+stderr.String(), sock)
		if accepted != tc.accepted || code == exitOK {
			t.Errorf("%q: exit %d, accepted %v; want accepted %v and a failure\nstdout: %s\nstderr: %s", tc.args, code, accepted, tc.accepted, stdout.String(), stderr.String())
		}
	}
}

func TestOneShotKeepsNoPools(t *testing.T) {
	ec := exec.Config{Languages: []config.Language{
		{Name: "javascript", Image: "j", Pool: 2},
		{Name: "python", Image: "p", Pool: 2},
	}}
	got := oneShot(ec, "python")
	if len(got.Languages) != 1 || got.Languages[0].Name != "python" || got.Languages[0].Pool != 0 || got.Languages[0].Image != "p" {
		t.Errorf("oneShot(python): got %+v; want python alone, with no pool", got.Languages)
	}
	all := oneShot(ec)
	if len(all.Languages) != 2 || all.Languages[0].Pool != 0 || all.Languages[1].Pool != 0 {
		t.Errorf("oneShot(): got %+v; want both languages, with no pool", all.Languages)
	}
	// An unknown language keeps them all, so the run reports it by name.
	if got := oneShot(ec, "cobol"); len(got.Languages) != 2 {
		t.Errorf("oneShot(cobol): got %d languages; want the 2 configured", len(got.Languages))
	}
}

// The HTTP flags serve: before a subcommand they were taken and then
// ignored (`--http :8080 images list` listed images and served nothing),
// and without --http the others were ignored too. Each is a usage error
// that says where the flag goes, before anything connects.
func TestHTTPFlagsOnlyWhereTheyServe(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		stderrPart string
	}{
		{[]string{"--http", "127.0.0.1:0", "images", "list"}, "--http is for serving, and images does not serve"},
		{[]string{"--http", "127.0.0.1:0", "doctor"}, "doctor does not serve"},
		{[]string{"--tls-cert", "c.pem", "--http", "127.0.0.1:0", "run", "--language", "python", "--code", "x"}, "--http, --tls-cert is for serving"},
		{[]string{"--shutdown-grace", "5s", "version"}, "version does not serve"},
		{[]string{"run", "--http", "127.0.0.1:0", "--language", "python", "--code", "x"}, "--http is for serving, and run does not serve"},
		{[]string{"doctor", "--auth-tokens", "tokens"}, "--auth-tokens is for serving, and doctor does not serve"},
		{[]string{"--auth-tokens", "tokens"}, "give --http ADDR too"},
		{[]string{"--shutdown-grace", "5s", "serve"}, "give --http ADDR too"},
		{[]string{"--http", "127.0.0.1:0", "--shutdown-grace", "-1s"}, "--shutdown-grace -1s: want a duration of 0 or more"},
		{[]string{"--audit-log", "a.log", "images", "list"}, "--audit-log is for serving, and images does not serve"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "doctor"}, "--metrics-addr is for serving"},
		{[]string{"run", "--audit-log", "a.log", "--language", "python", "--code", "x"}, "--audit-log is for serving, and run does not serve"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "--auth-tokens", "t", "--tls-cert", "c.pem"}, "--tls-cert is for the HTTP transport"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		if code != exitUsage || !strings.Contains(stderr.String(), tc.stderrPart) {
			t.Errorf("%q: exit %d, stderr %q; want %d and stderr with %q", tc.args, code, stderr.String(), exitUsage, tc.stderrPart)
		}
	}
}

func TestAuditLogFlag(t *testing.T) {
	g, _ := parseGlobals(t, "--audit-log", "/tmp/x/audit.log")
	cfg, err := loadConfig(g, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audit.Path != "/tmp/x/audit.log" {
		t.Errorf("[audit] path %q; want the flag's", cfg.Audit.Path)
	}
	g, _ = parseGlobals(t, "--audit-log", "/tmp/dir/")
	if _, err := loadConfig(g, envMap(nil)); err == nil || !strings.Contains(err.Error(), "audit.path") {
		t.Errorf("a directory as --audit-log: %v; want an audit.path error", err)
	}
}

package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestNewEgress(t *testing.T) {
	n := &config.Network{
		Allow: []string{"api.example.com"},
		Hosts: map[string]string{"API.example.com.": "192.0.2.10"},
		Secrets: map[string]config.NetworkSecret{
			"API.Example.com": {Header: "Authorization", ValueEnv: "API_KEY", Format: "Bearer {}"},
		},
		MaxConnections: 3, MaxBytes: 1 << 20,
	}
	e, err := NewEgress(n, env(map[string]string{"API_KEY": "k1"}), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := e.Secrets["api.example.com"]; s.Header != "Authorization" || s.Value != "Bearer k1" {
		t.Errorf("secret %+v; want Authorization: Bearer k1 under the host's lower-case name", s)
	}
	if a := e.Hosts["api.example.com"]; a.String() != "192.0.2.10" {
		t.Errorf("pinned address %v; want 192.0.2.10 under the host's lower-case name", a)
	}
	if e.Limits.MaxConns != 3 || e.Limits.MaxBytes != 1<<20 {
		t.Errorf("limits %+v; want 3 connections and 1MiB", e.Limits)
	}
	if err := e.Policy.Host("api.example.com"); err != nil {
		t.Errorf("the allowed host is refused: %v", err)
	}

	for _, tc := range []struct {
		name string
		vars map[string]string
		pass []string
		n    config.Network
		want string
	}{
		{"secret unset", nil, nil, *n, "API_KEY is unset"},
		{"secret empty", map[string]string{"API_KEY": ""}, nil, *n, "API_KEY is unset or empty"},
		{"secret passed through", map[string]string{"API_KEY": "k1"}, []string{"API_KEY"}, *n, "also passed into every sandbox"},
		{"secret with a line break", map[string]string{"API_KEY": "k1\r\nX-Evil: 1"}, nil, *n, "line break"},
		{"bad allow entry", nil, nil, config.Network{Allow: []string{"exa mple.com"}}, "exa mple.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEgress(&tc.n, env(tc.vars), tc.pass, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// A sandbox with a network joins a namespace of its own, mounted in its
// directory, with the proxy's variables in its environment (replacing any
// the image or the pass-through set); closing it removes the mount.
func TestSandboxNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	lang, _ := config.Default().Language("python")
	lang.Network = &config.Network{Allow: []string{"api.example.com"}}
	e, err := NewEgress(lang.Network, env(nil), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sandbox{
		h:    &Host{Log: slog.New(slog.DiscardHandler), Egress: map[string]*Egress{"python": e}},
		lang: lang, id: "test", dir: t.TempDir(),
	}
	if err := s.openNetwork(); err != nil {
		t.Fatal(err)
	}
	defer s.closeNetwork()
	p := sandboxoci.Policy{Env: []string{"HTTP_PROXY=http://elsewhere:1", "PATH=/usr/bin", "PIP_NO_CACHE_DIR=0"}}
	s.withNetwork(&p)
	if want := filepath.Join(s.dir, "netns"); p.Netns != want {
		t.Errorf("Netns %q; want %q", p.Netns, want)
	}
	url := "http://" + s.net.ns.Listener.Addr().String()
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"} {
		if !slices.Contains(p.Env, k+"="+url) {
			t.Errorf("env %v lacks %s=%s", p.Env, k, url)
		}
	}
	if slices.Contains(p.Env, "HTTP_PROXY=http://elsewhere:1") {
		t.Errorf("env %v keeps the image's HTTP_PROXY", p.Env)
	}
	// pipEnv is set, and the language's own PIP_NO_CACHE_DIR=0 replaces pipEnv's.
	for _, kv := range []string{"PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=0"} {
		if !slices.Contains(p.Env, kv) {
			t.Errorf("env %v lacks %s", p.Env, kv)
		}
	}
	if slices.Contains(p.Env, "PIP_NO_CACHE_DIR=1") {
		t.Errorf("env %v replaces the language's PIP_NO_CACHE_DIR", p.Env)
	}
	if recs, rest := s.Network(); recs == nil || len(recs) != 0 || rest != nil {
		t.Errorf("records %v, tallies %v; want an empty list, not nil, and no tallies", recs, rest)
	}
	s.closeNetwork()
	if _, err := os.Lstat(p.Netns); !os.IsNotExist(err) {
		t.Errorf("the namespace's mount point is still there: %v", err)
	}

	none := &Sandbox{h: s.h, lang: config.Language{Name: "python"}, dir: t.TempDir()}
	if recs, rest := none.Network(); none.openNetwork() != nil || none.net != nil || recs != nil || rest != nil {
		t.Errorf("a language without a network got one (%v)", none.net)
	}
}

// A secret that intercepts its host's TLS makes one CA for all the
// languages, and its sandboxes trust it beside the host's roots: the
// certificates are mounted read-only, and the TLS clients' variables
// point at them.
func TestInterceptTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	py, _ := config.Default().Language("python")
	py.Network = &config.Network{Allow: []string{"api.example.com"}, Secrets: map[string]config.NetworkSecret{
		"api.example.com": {Header: "X-Key", ValueEnv: "K", Intercept: true},
	}}
	js, _ := config.Default().Language("javascript")
	js.Network = &config.Network{Allow: []string{"b.example.com"}, Secrets: map[string]config.NetworkSecret{
		"b.example.com": {Header: "X-Key", ValueEnv: "K", Intercept: true},
	}}
	egresses, err := NewEgresses([]config.Language{py, js}, env(map[string]string{"K": "v"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := egresses["python"]
	if e.CA == nil || e.CA != egresses["javascript"].CA || !e.Intercept["api.example.com"] {
		t.Fatalf("egress %+v; want api.example.com intercepted, one CA for both languages", e)
	}
	if !strings.HasSuffix(string(e.Bundle), string(e.CA.PEM)) || len(e.Bundle) <= len(e.CA.PEM)+1 && HostRoots() != nil {
		t.Errorf("the bundle does not hold the host's roots and then the CA")
	}
	s := &Sandbox{h: &Host{Log: slog.New(slog.DiscardHandler), Egress: egresses}, lang: py, id: "test", dir: t.TempDir()}
	if err := s.openNetwork(); err != nil {
		t.Fatal(err)
	}
	defer s.closeNetwork()
	var p sandboxoci.Policy
	s.withNetwork(&p)
	if p.TrustHostDir != filepath.Join(s.dir, "trust") {
		t.Errorf("TrustHostDir %q", p.TrustHostDir)
	}
	for name, want := range map[string][]byte{"ca.pem": e.CA.PEM, "bundle.pem": e.Bundle} {
		got, err := os.ReadFile(filepath.Join(p.TrustHostDir, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %v; want the CA's certificates", name, err)
		}
		if fi, _ := os.Stat(filepath.Join(p.TrustHostDir, name)); fi == nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v; want 0644, readable by the sandbox's uid", name, fi)
		}
	}
	for _, kv := range []string{"SSL_CERT_FILE=/opt/code-sandbox-mcp/trust/bundle.pem", "REQUESTS_CA_BUNDLE=/opt/code-sandbox-mcp/trust/bundle.pem", "NODE_EXTRA_CA_CERTS=/opt/code-sandbox-mcp/trust/ca.pem"} {
		if !slices.Contains(p.Env, kv) {
			t.Errorf("env %v lacks %s", p.Env, kv)
		}
	}
}

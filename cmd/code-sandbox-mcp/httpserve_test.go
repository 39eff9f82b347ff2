package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/httpauth"
	"code-sandbox-mcp/config"
)

func TestResolveHTTP(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(httpauth.Line("alice", httpauth.NewToken())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		f       httpFlags
		wantErr string // a part of the error; empty for none
	}{
		{"loopback without tokens", httpFlags{addr: "127.0.0.1:0"}, ""},
		{"beyond loopback without tokens", httpFlags{addr: "0.0.0.0:8080"}, "without --auth-tokens"},
		{"beyond loopback with tokens", httpFlags{addr: "0.0.0.0:8080", authTokens: tokens}, ""},
		{"half a TLS pair", httpFlags{addr: "127.0.0.1:0", tlsCert: "cert.pem"}, "go together"},
		{"a bad origin", httpFlags{addr: "127.0.0.1:0", origins: namesFlag{names: []string{"a.example"}, set: true}}, "--allowed-origins"},
		{"no port", httpFlags{addr: "127.0.0.1"}, "HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolveHTTP(tc.f, config.Default())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("resolveHTTP: %v; want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("resolveHTTP: %v; want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestClientLimits(t *testing.T) {
	cfg, err := config.Parse("[sandbox]\nconcurrency = 6\n[http]\nrate_limit = 30\nrate_burst = 3\n[languages.python.limits]\ntimeout = \"10s\"\n", "x.toml")
	if err != nil {
		t.Fatal(err)
	}
	cl := clientLimits(cfg)
	want := map[string]time.Duration{"run_python_code": 10 * time.Second, "run_js_code": 30 * time.Second}
	if cl.Concurrency != 3 || cl.Rate != 30 || cl.Burst != 3 || !reflect.DeepEqual(cl.Tools, want) || cl.Principal == nil {
		t.Errorf("clientLimits = concurrency %d, rate %d, burst %d, tools %v; want 3, 30, 3, %v", cl.Concurrency, cl.Rate, cl.Burst, cl.Tools, want)
	}
}

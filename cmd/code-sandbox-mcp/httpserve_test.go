package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

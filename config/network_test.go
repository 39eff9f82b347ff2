package config

import (
	"strings"
	"testing"
	"time"
)

func TestNetworkOffByDefault(t *testing.T) {
	for _, l := range Default().Enabled() {
		if l.Network != nil {
			t.Errorf("%s: network %+v by default; want none", l.Name, l.Network)
		}
	}
}

// [network] applies to every language; a language's own table replaces
// it, and one that allows nothing has no network.
func TestNetworkPerLanguage(t *testing.T) {
	c, err := Parse(`
[network]
allow = ["api.example.com"]
max_bytes = "1MiB"
[network.secrets."api.example.com"]
header = "Authorization"
value_env = "API_KEY"
format = "Bearer {}"
intercept = true

[languages.javascript.network]
allow = []
`, "test")
	if err != nil {
		t.Fatal(err)
	}
	py, _ := c.Language("python")
	n := py.Network
	if n == nil || len(n.Allow) != 1 || n.Allow[0] != "api.example.com" {
		t.Fatalf("python's network %+v; want [network]'s", n)
	}
	if n.MaxBytes != 1<<20 || n.MaxConnections != DefaultNetworkConnections || time.Duration(n.IdleTimeout) != DefaultNetworkIdle {
		t.Errorf("python's network limits %d, %d, %s; want 1MiB and the defaults", n.MaxBytes, n.MaxConnections, time.Duration(n.IdleTimeout))
	}
	if n.MaxConnectionsPerRun != DefaultNetworkPerRun || n.ConnectionsPerSecond != DefaultNetworkPerSecond || n.MaxRecords != DefaultNetworkRecords {
		t.Errorf("python's network bounds %d per run, %d a second, %d records; want the defaults", n.MaxConnectionsPerRun, n.ConnectionsPerSecond, n.MaxRecords)
	}
	if !n.Intercepts() || (&Network{Secrets: map[string]NetworkSecret{"a": {}}}).Intercepts() {
		t.Error("Intercepts does not say which network intercepts")
	}
	if js, _ := c.Language("javascript"); js.Network != nil {
		t.Errorf("javascript's network %+v; want none (its own allows nothing)", js.Network)
	}
	v, ok := n.Secrets["api.example.com"].Value(func(k string) (string, bool) { return map[string]string{"API_KEY": "k1"}[k], k == "API_KEY" })
	if !ok || v != "Bearer k1" {
		t.Errorf("secret value %q, %v; want Bearer k1", v, ok)
	}
	if _, ok := n.Secrets["api.example.com"].Value(func(string) (string, bool) { return "", false }); ok {
		t.Error("a secret of an unset variable has a value")
	}
}

func TestNetworkRefused(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[network]\nallow = [\"https://api.example.com\"]\n", "network.allow"},
		{"[network]\nallow = [\"\"]\n", "network.allow"},
		{"[network]\nallow = [\"a.example\"]\nmax_connections = -1\n", "network.max_connections"},
		{"[network]\nallow = [\"a.example\"]\nmax_connections_per_run = -1\n", "network.max_connections_per_run: -1; want 1 to 1048576 (0 is the default, 1000)"},
		{"[network]\nallow = [\"a.example\"]\nconnections_per_second = -5\n", "network.connections_per_second"},
		{"[network]\nallow = [\"a.example\"]\nmax_records = 5000\n", "network.max_records: 5000; want 1 to 1000"},
		{"[network]\nallow = [\"a.example\"]\nhosts = { \"a.example\" = \"not-an-ip\" }\n", "network.hosts"},
		{"[network.secrets.\"a.example\"]\nheader = \"Bad Header\"\nvalue_env = \"K\"\n", "header"},
		{"[network.secrets.\"a.example\"]\nheader = \"X-Key\"\nvalue_env = \"1K\"\n", "value_env"},
		{"[network.secrets.\"a.example\"]\nheader = \"X-Key\"\nvalue_env = \"K\"\nformat = \"Bearer\"\n", "format"},
		{"[network.secrets.\"*.example\"]\nheader = \"X-Key\"\nvalue_env = \"K\"\n", "one host"},
		{"[network]\nallw = [\"a.example\"]\n", "did you mean network.allow"},
		{"[languages.python.network]\nallow = [\"ftp://x\"]\n", "languages.python.network.allow"},
	} {
		_, err := Parse(tc.toml, "test")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v; want an error naming %q", tc.toml, err, tc.want)
		}
	}
}

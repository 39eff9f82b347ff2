package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeTools returns the Node.js 22 binary (SANDBOX_NODE) and the
// node_modules directory of integration/node's packages
// (SANDBOX_NODE_MODULES: the MCP conformance suite, the TypeScript SDK,
// the MCP Inspector),
// which `scripts/setup node` installs into the cache and
// scripts/integration exports. Under SANDBOX_INTEGRATION=1 a missing one
// fails the test, saying how to get it: a test that needs them and did
// not run must not pass. Otherwise it skips the test.
func nodeTools(t *testing.T) (node, modules string) {
	t.Helper()
	node, modules = os.Getenv("SANDBOX_NODE"), os.Getenv("SANDBOX_NODE_MODULES")
	fail := t.Skipf
	if os.Getenv("SANDBOX_INTEGRATION") == "1" {
		fail = t.Fatalf
	}
	const how = "`scripts/setup node` installs them and prints the two paths (scripts/integration exports them)"
	if node == "" || modules == "" {
		fail("SANDBOX_NODE (Node.js 22) and SANDBOX_NODE_MODULES (integration/node's packages) must both be set: %s", how)
	}
	if _, err := os.Stat(node); err != nil {
		fail("SANDBOX_NODE: %v; %s", err, how)
	}
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk")); err != nil {
		fail("SANDBOX_NODE_MODULES does not hold integration/node's packages: %v; %s", err, how)
	}
	return node, modules
}

// TestNodeTools checks what `scripts/setup node` installed: a Node.js 22
// that runs, and the packages at the versions integration/node pins.
func TestNodeTools(t *testing.T) {
	node, modules := nodeTools(t)
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, "v22.") {
		t.Errorf("SANDBOX_NODE %s is Node.js %s, not 22", node, v)
	}
	lock, err := os.ReadFile(filepath.Join("node", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(lock, &want); err != nil {
		t.Fatalf("node/package-lock.json: %v", err)
	}
	for _, name := range []string{"@modelcontextprotocol/conformance", "@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector"} {
		b, err := os.ReadFile(filepath.Join(modules, name, "package.json"))
		if err != nil {
			t.Fatalf("SANDBOX_NODE_MODULES: %v", err)
		}
		var got struct{ Version string }
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s's package.json: %v", name, err)
		}
		if w := want.Packages["node_modules/"+name].Version; w == "" || got.Version != w {
			t.Errorf("%s is %q in SANDBOX_NODE_MODULES, node/package-lock.json pins %q: run scripts/setup node", name, got.Version, w)
		}
	}
}

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInspectorCLI runs the MCP Inspector's CLI (integration/node's
// @modelcontextprotocol/inspector) against the server in the two forms the
// README gives. The Inspector takes --config and --log-level itself, so
// the server's own flags either follow a "--", or come as environment
// variables through the Inspector's -e. Each Inspector call starts a
// server of its own, which must run the tool and leave nothing behind
// once the Inspector has gone.
func TestInspectorCLI(t *testing.T) {
	node, modules := nodeTools(t)
	inspector := filepath.Join(modules, "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	call := []string{"--method", "tools/call", "--tool-name", "run_python_code", "--tool-arg", "code=print(6*7)"}
	for _, tc := range []struct {
		name string
		args func(bin string, serverArgs []string) []string
	}{
		{"flags after --", func(bin string, serverArgs []string) []string {
			return slices.Concat([]string{"--cli"}, call, []string{"--", bin}, serverArgs)
		}},
		{"flags as -e variables", func(bin string, serverArgs []string) []string {
			env := map[string]string{"--config": "CODE_SANDBOX_CONFIG", "--address": "CONTAINERD_ADDRESS", "--namespace": "CONTAINERD_NAMESPACE"}
			args := []string{"--cli"}
			for i := 0; i+1 < len(serverArgs); i += 2 {
				if v, ok := env[serverArgs[i]]; ok {
					args = append(args, "-e", v+"="+serverArgs[i+1])
				}
			}
			// Before the method's flags: --tool-arg takes every word
			// after it.
			return slices.Concat(args, []string{bin}, call)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, stateDir := serverCommand(t, serverSpec{})
			cmd := osexec.Command(node, append([]string{inspector}, tc.args(server.Path, server.Args[1:])...)...)
			// The Inspector keeps a catalog of servers under HOME.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			// The server outlives the Inspector, which only closes its
			// stdin, while it destroys its pools.
			cfg := server.Args[slices.Index(server.Args, "--config")+1]
			var left []int
			if !waitFor(60*time.Second, func() bool { left = processesWith(cfg); return len(left) == 0 }) {
				t.Errorf("servers %v still run 60s after the Inspector exited", left)
			}
			assertNoLeftovers(t, stateDir)
			if err != nil {
				t.Fatalf("inspector %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args[2:], " "), err, &stdout, &stderr)
			}
			var res struct {
				Content []struct{ Type, Text string }
				IsError bool
			}
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatalf("the Inspector's output is not one tool result: %v\n%s", err, &stdout)
			}
			if res.IsError || len(res.Content) == 0 || res.Content[0].Text != "42\n" {
				t.Errorf("the Inspector's tools/call: %s; want the text 42", &stdout)
			}
		})
	}
}

// processesWith lists the processes whose command line has arg.
func processesWith(arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

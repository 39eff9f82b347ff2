package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code-sandbox-mcp/config"
)

// doctorConfig parses data on top of the defaults.
func doctorConfig(t *testing.T, data string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(data, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkRuntime reports the runc shim's binary with its version, found on
// PATH or by its path; a name not on the server's PATH is a warning (the
// shim looks on containerd's), a path that is not there a failure.
func TestDoctorRuntime(t *testing.T) {
	dir := t.TempDir()
	for name, version := range map[string]string{"crun": "crun version 1.8.1", "containerd-shim-runc-v2": "shim"} {
		script := "#!/bin/sh\necho '" + version + "'\necho 'commit: 0'\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		name, toml string
		want       []string
		failed     bool
	}{
		{"crun by name", "[containerd]\nruntime_binary = \"crun\"",
			[]string{"OK    runtime: " + dir + "/crun: crun version 1.8.1\n", "OK    shim: " + dir + "/containerd-shim-runc-v2\n"}, false},
		{"crun by path", "[containerd]\nruntime_binary = \"" + dir + "/crun\"",
			[]string{"OK    runtime: " + dir + "/crun: crun version 1.8.1\n"}, false},
		{"runc not on PATH", "",
			[]string{"WARN  runtime: runc is not on this server's PATH; the runc shim looks it up on containerd's own PATH"}, false},
		{"a path not there", "[languages.python]\nruntime_binary = \"/nonexistent/crun\"",
			[]string{"FAIL  runtime: /nonexistent/crun:", "fix: install it there", "WARN  runtime: runc"}, true},
		{"another shim", "[containerd]\nruntime = \"io.containerd.runsc.v1\"",
			[]string{"SKIP  runtime: runtime io.containerd.runsc.v1 is configured"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c := &checker{w: &out}
			checkRuntime(c, doctorConfig(t, tc.toml))
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output:\n%s\nhas no %q", out.String(), w)
				}
			}
			if tc.name == "another shim" && strings.Contains(out.String(), "shim:") {
				t.Errorf("output:\n%s\nchecks the runc shim; want it left alone when no language uses it", out.String())
			}
			if c.failed != tc.failed {
				t.Errorf("failed: got %v; want %v\n%s", c.failed, tc.failed, out.String())
			}
		})
	}
}

// The systemd driver fails where systemd does not run, with a fix; the
// default cgroupfs passes anywhere.
func TestDoctorCgroupDriver(t *testing.T) {
	running := t.TempDir()
	for _, tc := range []struct {
		name, toml, systemdDir, want string
		failed                       bool
	}{
		{"cgroupfs", "", filepath.Join(running, "absent"), "OK    cgroup driver: cgroupfs: the runtime makes each sandbox's cgroup itself, at /code-sandbox/ID\n", false},
		{"systemd running", "[containerd]\ncgroup_driver = \"systemd\"", running, "OK    cgroup driver: systemd: each sandbox is the transient unit code-sandbox-ID.scope in system.slice\n", false},
		{"systemd not running", "[containerd]\ncgroup_driver = \"systemd\"", filepath.Join(running, "absent"), "FAIL  cgroup driver: systemd, but systemd is not running on this host", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c := &checker{w: &out}
			checkCgroupDriver(c, doctorConfig(t, tc.toml), tc.systemdDir)
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output:\n%s\nhas no %q", out.String(), tc.want)
			}
			if tc.failed && !strings.Contains(out.String(), `fix: set [containerd] cgroup_driver = "cgroupfs"`) {
				t.Errorf("output:\n%s\nhas no fix", out.String())
			}
			if c.failed != tc.failed {
				t.Errorf("failed: got %v; want %v", c.failed, tc.failed)
			}
		})
	}
}

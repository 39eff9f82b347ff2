package sandbox

import (
	"context"
	"testing"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"

	"code-sandbox-mcp/config"
)

// A container's runtime: none set for the defaults (the daemon's runc
// shim, no options, as before), the shim alone for another shim, and for
// a runtime binary or the systemd driver the runc shim with its options,
// under the type URL containerd 1.6's shim reads as well as 2.x's.
func TestWithRuntime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lang        config.Language
		wantNone    bool
		wantRuntime string
		wantOptions *options.Options
	}{
		{name: "defaults", lang: config.Language{CgroupDriver: config.CgroupDriverCgroupfs}, wantNone: true},
		{name: "zero driver", lang: config.Language{}, wantNone: true},
		{name: "another shim", lang: config.Language{Runtime: "io.containerd.runsc.v1"}, wantRuntime: "io.containerd.runsc.v1"},
		{name: "runc shim named", lang: config.Language{Runtime: config.RuncShim}, wantRuntime: config.RuncShim},
		{name: "crun", lang: config.Language{RuntimeBinary: "crun", CgroupDriver: config.CgroupDriverCgroupfs},
			wantRuntime: config.RuncShim, wantOptions: &options.Options{BinaryName: "crun"}},
		{name: "runc by path, runc shim named", lang: config.Language{Runtime: config.RuncShim, RuntimeBinary: "/usr/sbin/runc"},
			wantRuntime: config.RuncShim, wantOptions: &options.Options{BinaryName: "/usr/sbin/runc"}},
		{name: "systemd", lang: config.Language{CgroupDriver: config.CgroupDriverSystemd},
			wantRuntime: config.RuncShim, wantOptions: &options.Options{SystemdCgroup: true}},
		{name: "crun under systemd", lang: config.Language{RuntimeBinary: "crun", CgroupDriver: config.CgroupDriverSystemd},
			wantRuntime: config.RuncShim, wantOptions: &options.Options{BinaryName: "crun", SystemdCgroup: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := withRuntime(tc.lang)
			if tc.wantNone {
				if opt != nil {
					t.Fatal("got a runtime option; want none (the daemon's default runtime)")
				}
				return
			}
			if opt == nil {
				t.Fatal("got no runtime option")
			}
			var c containers.Container
			if err := opt(context.Background(), nil, &c); err != nil {
				t.Fatal(err)
			}
			if c.Runtime.Name != tc.wantRuntime {
				t.Errorf("runtime: got %q; want %q", c.Runtime.Name, tc.wantRuntime)
			}
			if tc.wantOptions == nil {
				if c.Runtime.Options != nil {
					t.Errorf("options: got %v; want none", c.Runtime.Options)
				}
				return
			}
			if c.Runtime.Options == nil {
				t.Fatal("options: got none")
			}
			if got, want := c.Runtime.Options.GetTypeUrl(), "containerd.runc.v1.Options"; got != want {
				t.Errorf("options' type URL: got %q; want %q", got, want)
			}
			v, err := typeurl.UnmarshalAny(c.Runtime.Options)
			if err != nil {
				t.Fatal(err)
			}
			o, ok := v.(*options.Options)
			if !ok {
				t.Fatalf("options: got a %T; want *options.Options", v)
			}
			if o.BinaryName != tc.wantOptions.BinaryName || o.SystemdCgroup != tc.wantOptions.SystemdCgroup {
				t.Errorf("options: got binary %q, systemd %v; want %q, %v", o.BinaryName, o.SystemdCgroup, tc.wantOptions.BinaryName, tc.wantOptions.SystemdCgroup)
			}
		})
	}
}

// CheckRuntime, which the executor applies even without config's checks, refuses a cgroup driver
// that is none, and the runc shim's options given to another shim.
func TestValidateRuntime(t *testing.T) {
	ok := config.Language{Name: "py", Image: "i", Command: []string{"python3"}, File: "main.py",
		Limits: config.Limits{Timeout: 1, MaxTimeout: 1, OutputBytes: 1, CodeBytes: 1, WorkspaceBytes: 1}}
	if err := CheckRuntime(ok); err != nil {
		t.Fatalf("base language: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*config.Language)
		bad  bool
	}{
		{"crun under the runc shim", func(l *config.Language) { l.RuntimeBinary = "crun"; l.Runtime = config.RuncShim }, false},
		{"systemd", func(l *config.Language) { l.CgroupDriver = config.CgroupDriverSystemd }, false},
		{"unknown driver", func(l *config.Language) { l.CgroupDriver = "cgroup" }, true},
		{"crun under another shim", func(l *config.Language) { l.RuntimeBinary = "crun"; l.Runtime = "io.containerd.runsc.v1" }, true},
		{"systemd under another shim", func(l *config.Language) {
			l.CgroupDriver = config.CgroupDriverSystemd
			l.Runtime = "io.containerd.runsc.v1"
		}, true},
	} {
		l := ok
		tc.edit(&l)
		if err := CheckRuntime(l); (err != nil) != tc.bad {
			t.Errorf("%s: got %v; want an error: %v", tc.name, err, tc.bad)
		}
	}
}

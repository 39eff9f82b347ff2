package config

import (
	"strings"
	"testing"
)

// Check refuses what no sandbox can run with, naming the key beneath the
// one it is given; how the caps on files stand to each other is the
// configuration's rule, which Validate adds and Check does not.
func TestLimitsCheck(t *testing.T) {
	base := mustLanguage(t, Default(), "python").Limits
	if err := base.Check("limits"); err != nil {
		t.Fatalf("the default limits: %v; want none refused", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Limits)
		want   string // "" if Check accepts it
	}{
		{"no memory", func(l *Limits) { l.MemoryBytes = 0 }, "languages.python.limits.memory: 0B is too small"},
		{"no cpus", func(l *Limits) { l.CPUs = 0 }, "languages.python.limits.cpus"},
		{"no timeout", func(l *Limits) { l.Timeout = 0 }, "languages.python.limits.timeout"},
		{"timeout over max", func(l *Limits) { l.Timeout = l.MaxTimeout + 1 }, "max_timeout"},
		{"no output", func(l *Limits) { l.OutputBytes = 0 }, "languages.python.limits.output_bytes"},
		{"tiny workspace", func(l *Limits) { l.WorkspaceBytes = 1 }, "languages.python.limits.workspace_size"},
		{"negative files in", func(l *Limits) { l.FilesInBytes = -1 }, "languages.python.limits.files_in_bytes"},
		{"too many ptys", func(l *Limits) { l.Ptys = maxPtys + 1 }, "languages.python.limits.ptys"},
		{"files in over the workspace", func(l *Limits) { l.FilesInBytes = l.WorkspaceBytes + 1 }, ""},
		{"images over the files out", func(l *Limits) { l.ImageBytes = l.FilesOutBytes + 1 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := base
			tc.mutate(&l)
			err := l.Check("languages.python.limits")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v; want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v; want an error with %q", err, tc.want)
			}
		})
	}
}

// Validate refuses the caps on files that Check leaves to it.
func TestValidateFileCaps(t *testing.T) {
	for _, data := range []string{
		"[limits]\nworkspace_size = \"2MiB\"\nfiles_in_bytes = \"3MiB\"",
		"[limits]\nfiles_out_bytes = \"1KiB\"\nimage_bytes = \"2KiB\"",
	} {
		if _, err := Parse(data, "caps.toml"); err == nil {
			t.Errorf("%q: got no error; want the caps refused", data)
		}
	}
}

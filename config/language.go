package config

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Language is one language as the rest of the program reads it: how its
// programs run, the MCP tool that offers it, and the limits every run of
// it gets. Config.Language produces it from the file's tables; nothing
// else translates them.
type Language struct {
	// Name is the language's key, such as "python".
	Name string
	// Image is the image reference in containerd's image store: the
	// table's image or, with packages, the image they build on it.
	Image string
	// BaseImage is the table's image, which Packages build on; it is
	// Image when Packages is empty.
	BaseImage string
	// Packages are what Image adds to BaseImage, normalised.
	Packages Packages
	// Command is the interpreter's argv; the program's path is appended.
	Command []string
	// File is the program's file name in the sandbox, such as "main.py".
	File string
	// Env is added to the image's own environment, as KEY=value.
	Env []string
	// Runtime is the containerd runtime (shim); empty means the daemon's
	// default, RuncShim.
	Runtime string
	// RuntimeBinary is the OCI runtime the runc shim runs, a name on
	// containerd's PATH or an absolute path; empty is the shim's default,
	// runc.
	RuntimeBinary string
	// CgroupDriver is [containerd] cgroup_driver, CgroupDriverCgroupfs or
	// CgroupDriverSystemd: how the runtime makes the run's cgroup.
	CgroupDriver string
	// Tool is the MCP tool's name.
	Tool string
	// Description tells a model what the language's sandbox offers; the
	// MCP layer appends what the spec enforces.
	Description string
	// Pool is how many sandboxes are kept created, started ahead and
	// waiting for a program, each used once; 0 creates every sandbox on
	// demand.
	Pool int
	// Figures saves every matplotlib figure a Python program shows or
	// leaves open as /workspace/figures/figure-N.png.
	Figures bool
	// SessionDriver names the driver that keeps one interpreter of the
	// language alive for a session: "python" or "node"; "" means the
	// language offers no sessions.
	SessionDriver string
	// Warm makes ready sandboxes wait with the interpreter started, in the
	// warm driver of Interpreter (see WarmDrivers), for their program;
	// Preload names the modules such a sandbox imports first.
	Warm    bool
	Preload []string
	// Limits confine each run.
	Limits Limits
	// Network is the way out of its sandboxes, with its defaults filled
	// in; nil means none, no network at all.
	Network *Network
}

// sessionDrivers are the session drivers there are, by the interpreter
// they drive: a language's command must start that interpreter.
var sessionDrivers = []string{"python", "node"}

// Interpreter is the interpreter the language's command starts, "python"
// or "node", as its session driver says or, without one, as the command's
// name says; "" if neither tells.
func (l Language) Interpreter() string {
	if l.SessionDriver != "" {
		return l.SessionDriver
	}
	if len(l.Command) == 0 {
		return ""
	}
	switch name := path.Base(l.Command[0]); {
	case strings.HasPrefix(name, "python"):
		return "python"
	case name == "node" || name == "nodejs":
		return "node"
	}
	return ""
}

// Language returns the enabled language called name, with [limits] and its
// own overrides applied; ok is false if there is no such enabled language.
func (c *Config) Language(name string) (l Language, ok bool) {
	t, ok := c.Languages[name]
	if !ok || t.Disabled {
		return Language{}, false
	}
	// Validate has checked the lists; an error leaves them as written.
	pkgs, err := t.Packages.normalized("")
	if err != nil {
		pkgs = t.Packages.clone()
	}
	image := t.Image
	if !pkgs.Empty() {
		image = PackagesImage(name, t.Image, pkgs)
	}
	return Language{
		Name:          name,
		Image:         image,
		BaseImage:     t.Image,
		Packages:      pkgs,
		Command:       slices.Clone(t.Command),
		File:          t.File,
		Env:           slices.Clone(t.Env),
		Runtime:       cmp.Or(t.Runtime, c.Containerd.Runtime),
		RuntimeBinary: cmp.Or(t.RuntimeBinary, c.Containerd.RuntimeBinary),
		CgroupDriver:  c.Containerd.CgroupDriver,
		Tool:          t.Tool,
		Description:   t.Description,
		Pool:          t.Pool,
		Figures:       t.Figures,
		SessionDriver: t.SessionDriver,
		Warm:          t.Warm,
		Preload:       slices.Clone(t.Preload),
		Limits:        c.limitsFor(name).limits(),
		Network:       c.networkFor(name),
	}, true
}

// Enabled returns every enabled language, sorted by name.
func (c *Config) Enabled() []Language {
	names := c.Names()
	out := make([]Language, 0, len(names))
	for _, n := range names {
		l, _ := c.Language(n)
		out = append(out, l)
	}
	return out
}

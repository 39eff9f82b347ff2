package sandbox

import (
	"cmp"
	"fmt"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"code-sandbox-mcp/config"
)

// withRuntime is the container's runtime: lang's shim, with the runc
// shim's options where lang names an OCI runtime binary or the systemd
// cgroup driver, or nil where the daemon's default runtime does (today's
// containers, with no options, as before these settings).
//
// The options are github.com/containerd/containerd/api's runc Options,
// which marshal with the type URL containerd.runc.v1.Options that both
// containerd 1.6's shim and 2.x's read. The daemon hands a container's
// runtime options to the shim's Create when the task's own are empty, as
// ours are.
func withRuntime(lang config.Language) containerd.NewContainerOpts {
	if o := runcOptions(lang); o != nil {
		return containerd.WithRuntime(cmp.Or(lang.Runtime, config.RuncShim), o)
	}
	if lang.Runtime != "" {
		return containerd.WithRuntime(lang.Runtime, nil)
	}
	return nil
}

// runcOptions are the runc shim's options for lang: BinaryName, the OCI
// runtime the shim runs (looked up on containerd's PATH unless absolute),
// and SystemdCgroup, which has it make the cgroup through systemd (the
// spec's cgroupsPath then names a unit: see oci.SystemdCgroupsPath). Nil
// when lang asks for neither. config refuses both for any other shim.
func runcOptions(lang config.Language) *options.Options {
	systemd := lang.CgroupDriver == config.CgroupDriverSystemd
	if lang.RuntimeBinary == "" && !systemd {
		return nil
	}
	return &options.Options{BinaryName: lang.RuntimeBinary, SystemdCgroup: systemd}
}

// CheckRuntime reports what is wrong with lang's runtime settings, or
// nil: a cgroup driver that is neither cgroupfs nor systemd, or the runc
// shim's options (a runtime binary, the systemd driver) given to another
// shim.
func CheckRuntime(l config.Language) error {
	switch {
	case l.CgroupDriver != "" && l.CgroupDriver != config.CgroupDriverCgroupfs && l.CgroupDriver != config.CgroupDriverSystemd:
		return fmt.Errorf("language %q: cgroup driver %q is neither %q nor %q: %w", l.Name, l.CgroupDriver, config.CgroupDriverCgroupfs, config.CgroupDriverSystemd, errdefs.ErrInvalidArgument)
	case runcOptions(l) != nil && l.Runtime != "" && l.Runtime != config.RuncShim:
		return fmt.Errorf("language %q: a runtime binary and the systemd cgroup driver are options of the runc shim (%s), not of %s: %w", l.Name, config.RuncShim, l.Runtime, errdefs.ErrInvalidArgument)
	}
	return nil
}

package oci

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	ctroci "github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Generate builds the spec of p on top of containerd's default spec, as
// containerd.WithNewSpec does for a container, with no client and no
// image: what the image adds (its own environment, its user database) is
// not there, and nothing here depends on it.
func Generate(ctx context.Context, p Policy) (*specs.Spec, error) {
	opts, err := SpecOpts(p)
	if err != nil {
		return nil, err
	}
	if _, ok := namespaces.Namespace(ctx); !ok {
		ctx = namespaces.WithNamespace(ctx, "describe")
	}
	return ctroci.GenerateSpec(ctx, nil, &containers.Container{ID: "describe"}, opts...)
}

// Posture is what a spec enforces, read back from the spec itself.
type Posture struct {
	// UID and GID the process runs as; Root is true if either is 0.
	UID, GID uint32
	// Capabilities counts the capabilities in all five sets together.
	Capabilities int
	// NoNewPrivileges, Seccomp (a profile that denies by default) and
	// ReadOnlyRoot as the spec sets them.
	NoNewPrivileges bool
	Seccomp         bool
	ReadOnlyRoot    bool
	// Network is true unless the process gets a network namespace of its
	// own, which runc brings up with loopback only. A namespace it joins
	// (Policy.Netns) counts as a network: what it reaches is the
	// namespace's maker's to say.
	Network bool
	// Writable lists the mounts the process can write to, with the size
	// of each where the spec bounds it (0: unbounded or unknown).
	Writable []Writable
	// MemoryBytes, CPUs and Pids are the cgroup limits; 0 means none.
	MemoryBytes int64
	CPUs        float64
	Pids        int64
}

// Writable is a path the process can write to.
type Writable struct {
	Path  string
	Bytes int64
}

// Describe reads what s enforces. A mount is writable unless it is
// mounted "ro"; the root is writable unless the spec makes it read-only.
func Describe(s *specs.Spec) Posture {
	var p Posture
	if s.Process != nil {
		p.UID, p.GID = s.Process.User.UID, s.Process.User.GID
		p.NoNewPrivileges = s.Process.NoNewPrivileges
		if c := s.Process.Capabilities; c != nil {
			p.Capabilities = len(c.Bounding) + len(c.Effective) + len(c.Inheritable) + len(c.Permitted) + len(c.Ambient)
		}
	}
	if s.Root != nil {
		p.ReadOnlyRoot = s.Root.Readonly
	}
	if !p.ReadOnlyRoot {
		p.Writable = append(p.Writable, Writable{Path: "/"})
	}
	for _, m := range s.Mounts {
		if slices.Contains(m.Options, "ro") {
			continue
		}
		// The kernel's own file systems are read-only to an
		// unprivileged process, or masked.
		if m.Type == "proc" || m.Type == "sysfs" || m.Type == "cgroup" || m.Type == "cgroup2" || m.Type == "mqueue" || m.Type == "devpts" {
			continue
		}
		// runc's /dev tmpfs holds only device nodes, which are not
		// files to write to; the device cgroup decides what they do.
		if m.Destination == "/dev" {
			continue
		}
		p.Writable = append(p.Writable, Writable{Path: m.Destination, Bytes: tmpfsSize(m)})
	}
	p.Network = true
	if s.Linux != nil {
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace && ns.Path == "" {
				p.Network = false
			}
		}
		p.Seccomp = s.Linux.Seccomp != nil && s.Linux.Seccomp.DefaultAction != specs.ActAllow
		if r := s.Linux.Resources; r != nil {
			if r.Memory != nil && r.Memory.Limit != nil {
				p.MemoryBytes = *r.Memory.Limit
			}
			if r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil && *r.CPU.Period > 0 {
				p.CPUs = float64(*r.CPU.Quota) / float64(*r.CPU.Period)
			}
			if r.Pids != nil && r.Pids.Limit != nil {
				p.Pids = *r.Pids.Limit
			}
		}
	}
	return p
}

// tmpfsSize reads a tmpfs mount's size= option, in bytes; 0 if it has none.
func tmpfsSize(m specs.Mount) int64 {
	if m.Type != "tmpfs" {
		return 0
	}
	for _, o := range m.Options {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return 0
}

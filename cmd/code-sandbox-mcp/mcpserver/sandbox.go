package mcpserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
	"code-sandbox-mcp/oci"
)

// sandbox is what every run of a language gets, read back from the OCI
// spec its policy generates, so that what a model is told about its
// sandbox is what the runtime enforces.
type sandbox struct {
	oci.Posture
	// Home is HOME in the run's environment.
	Home string
	// Allow is what the language's network proxy lets through; nil for
	// no network.
	Allow []string
}

// describeSandbox generates l's spec from the executor's own policy for
// its sandboxes, minus what only a run knows (see exec.SandboxPolicy),
// and reads what it enforces.
func describeSandbox(ctx context.Context, l config.Language) (sandbox, error) {
	p := exec.SandboxPolicy(l)
	s, err := oci.Generate(ctx, p)
	if err != nil {
		return sandbox{}, fmt.Errorf("the spec of %s: %w", l.Name, err)
	}
	sb := sandbox{Posture: oci.Describe(s)}
	if l.Network != nil {
		sb.Allow = l.Network.Allow
	}
	for i, w := range sb.Writable {
		if w.Path == oci.WorkspaceDir {
			sb.Writable[i].Bytes = l.Limits.WorkspaceBytes
		}
	}
	if s.Process != nil {
		for _, kv := range s.Process.Env {
			if v, ok := strings.CutPrefix(kv, "HOME="); ok {
				sb.Home = v
			}
		}
	}
	return sb, nil
}

// filesPhrase says which files a run can write, such as "a read-only
// file system except /tmp (64MiB, also HOME) and /dev/shm (64MiB)".
func (sb sandbox) filesPhrase() string {
	var paths []string
	for _, w := range sb.Writable {
		if w.Path == "/" {
			continue
		}
		var notes []string
		if w.Bytes > 0 {
			notes = append(notes, config.Size(w.Bytes).String())
		}
		if w.Path == sb.Home {
			notes = append(notes, "also HOME")
		}
		if len(notes) > 0 {
			paths = append(paths, w.Path+" ("+strings.Join(notes, ", ")+")")
		} else {
			paths = append(paths, w.Path)
		}
	}
	switch {
	case !sb.ReadOnlyRoot:
		return "a writable file system"
	case len(paths) == 0:
		return "a read-only file system"
	}
	return "a read-only file system except " + joinAnd(paths)
}

// networkPhrase says whether a run can reach a network.
func (sb sandbox) networkPhrase() string {
	switch {
	case sb.Network && len(sb.Allow) > 0:
		return "no network but an HTTP proxy to " + joinAnd(sb.Allow) +
			" (HTTP_PROXY and HTTPS_PROXY point at it; no DNS, and no other host or address is reachable)"
	case sb.Network:
		return "network access"
	}
	return "no network"
}

// cpusPhrase is the CPU quota, such as "1 CPU" or "0.5 CPUs".
func (sb sandbox) cpusPhrase() string {
	s := strconv.FormatFloat(sb.CPUs, 'f', -1, 64) + " CPU"
	if sb.CPUs != 1 {
		s += "s"
	}
	return s
}

// joinAnd joins a list as English does: "a", "a and b", "a, b and c".
func joinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

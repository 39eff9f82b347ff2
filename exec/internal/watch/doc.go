// Package watch tells how sandboxes end, from outside them: containerd's
// events (OOM kills, changed images), the kernel's process events (each
// sandbox process's exit status and signal, even when containerd does not
// answer), and each memory cgroup's count of OOM kills, kept after the
// cgroup is gone. It knows nothing of sandboxes' lifetimes, languages or
// MCP: callers track an id, a pid or a cgroup directory and untrack it.
package watch

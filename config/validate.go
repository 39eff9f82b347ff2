package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	toolName      = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	languageName  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	moduleName    = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@/:-]{0,127}$`)
	namespaceName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,74}[A-Za-z0-9])?$`)
)

// maxPool bounds a language's pool of ready sandboxes: each holds a shim
// and a waiting process.
const maxPool = 32

// maxSessions bounds [sessions] max_sessions: each open session holds a
// sandbox, its shim and an interpreter for as long as it lives.
const maxSessions = 64

// maxTasks bounds [tasks] max_tasks: an ended task keeps its result (two
// streams of output_bytes, and the inline images) until it expires.
const maxTasks = 1024

// maxResultRetention bounds [tasks] result_retention.
const maxResultRetention = 24 * time.Hour

// Validate reports every problem in c, each naming its key.
func (c *Config) Validate() error {
	errs := c.validateSandbox()
	errs = append(errs, c.validateRuntime()...)
	errs = append(errs, c.Limits.limits().check("limits", true)...)
	errs = append(errs, validateSessions(c.Sessions)...)
	errs = append(errs, validateTasks(c.Tasks)...)
	errs = append(errs, c.validateHTTP()...)
	if p := c.Audit.Path; strings.ContainsRune(p, 0) || strings.TrimSpace(p) != p || strings.HasSuffix(p, "/") {
		errs = append(errs, fmt.Errorf("audit.path: %q; want a file's path, \"-\" for stderr, or \"\" for no audit log", p))
	}
	if _, err := ParseUIDRange(c.Limits.UIDRange); err != nil {
		errs = append(errs, fmt.Errorf("limits.uid_range: %v", err))
	}
	errs = append(errs, c.Network.check("network")...)
	errs = append(errs, c.validateLanguages()...)
	return errors.Join(errs...)
}

// validateSandbox checks how to reach containerd and the [sandbox] table.
func (c *Config) validateSandbox() []error {
	var errs []error
	bad := reporter(&errs, "")
	if c.Containerd.Address == "" {
		bad("containerd.address", "empty; want containerd's socket, such as /run/containerd/containerd.sock")
	}
	if !namespaceName.MatchString(c.Containerd.Namespace) {
		bad("containerd.namespace", "%q is not a valid containerd namespace (letters, digits, '_', '.', '-')", c.Containerd.Namespace)
	}
	if !strings.HasPrefix(c.Sandbox.StateDir, "/") {
		bad("sandbox.state_dir", "%q is not an absolute path", c.Sandbox.StateDir)
	}
	if !strings.HasPrefix(c.Sandbox.UIDLockDir, "/") {
		bad("sandbox.uid_lock_dir", "%q is not an absolute path", c.Sandbox.UIDLockDir)
	}
	if c.Sandbox.Init != "" && !strings.HasPrefix(c.Sandbox.Init, "/") {
		bad("sandbox.init", "%q is not an absolute path (or empty: code-sandbox-init beside the server, else /usr/bin/tini-static)", c.Sandbox.Init)
	}
	if c.Sandbox.Concurrency < 0 {
		bad("sandbox.concurrency", "%d is negative; 0 means the number of CPUs", c.Sandbox.Concurrency)
	}
	if c.Sandbox.FileRetention <= 0 {
		bad("sandbox.file_retention", "%s must be greater than 0", c.Sandbox.FileRetention)
	}
	if c.Sandbox.FileRetentionBytes <= 0 {
		bad("sandbox.file_retention_bytes", "must be greater than 0")
	}
	if c.Sandbox.Pull != PullMissing && c.Sandbox.Pull != PullNever {
		bad("sandbox.pull", "%q; want %q or %q", c.Sandbox.Pull, PullMissing, PullNever)
	}
	seen := map[string]bool{}
	for _, n := range c.Sandbox.PassThroughEnv {
		if !envName.MatchString(n) {
			bad("sandbox.pass_through_env", "%q is not an environment variable name", n)
		}
		if seen[n] {
			bad("sandbox.pass_through_env", "%q is listed twice", n)
		}
		seen[n] = true
	}
	return errs
}

// validateLanguages checks each enabled language's table and limits;
// there must be one, and no two may share a tool.
func (c *Config) validateLanguages() []error {
	var errs []error
	bad := reporter(&errs, "")
	names := c.Names()
	if len(names) == 0 {
		bad("languages", "no language is configured and enabled")
	}
	tools := map[string]string{}
	for _, n := range names {
		l := c.Languages[n]
		key := "languages." + n
		if !languageName.MatchString(n) {
			bad(key, "the name %q must be 1 to 32 letters, digits, '_' or '-'", n)
		}
		if l.Image == "" {
			bad(key+".image", "empty; want an image reference, such as \"localhost/code-sandbox-mcp/python:trixie\"")
		}
		if len(l.Command) == 0 || l.Command[0] == "" {
			bad(key+".command", "empty; want the interpreter's argv, such as [\"python3\"]")
		}
		for _, a := range l.Command {
			if a == "" {
				bad(key+".command", "has an empty argument")
				break
			}
		}
		if l.File == "" || strings.Contains(l.File, "/") || l.File == "." || l.File == ".." {
			bad(key+".file", "%q; want a plain file name, such as \"main.py\"", l.File)
		}
		for _, e := range l.Env {
			k, _, ok := strings.Cut(e, "=")
			if !ok || !envName.MatchString(k) {
				bad(key+".env", "%q; want KEY=value", e)
			}
		}
		if !toolName.MatchString(l.Tool) {
			bad(key+".tool", "%q; want 1 to 64 letters, digits, '_' or '-'", l.Tool)
		} else if other, dup := tools[l.Tool]; dup {
			bad(key+".tool", "%q is also the tool of languages.%s; tool names must be unique", l.Tool, other)
		}
		tools[l.Tool] = n
		if _, err := l.Packages.normalized(key + ".packages"); err != nil {
			errs = append(errs, err)
		}
		if l.Pool < 0 || l.Pool > maxPool {
			bad(key+".pool", "%d; want 0 (create on demand) to %d", l.Pool, maxPool)
		}
		if l.SessionDriver != "" && !slices.Contains(sessionDrivers, l.SessionDriver) {
			bad(key+".session_driver", "%q is not a session driver; want one of %s (the interpreter the command starts), or \"\" for no sessions",
				l.SessionDriver, quoteAll(sessionDrivers))
		}
		for _, m := range l.Preload {
			if !moduleName.MatchString(m) {
				bad(key+".preload", "%q; want a module name, such as \"numpy\" or \"os.path\" (letters, digits, '_', '-', '.', '/', '@', ':')", m)
			}
		}
		errs = append(errs, c.limitsFor(n).limits().check(key+".limits", true)...)
		errs = append(errs, l.Network.check(key+".network")...)
	}
	return errs
}

// validateRuntime checks the runtime keys of [containerd] and of each
// enabled language: the cgroup driver is one there is, a runtime binary
// is a name or an absolute path, and runtime_binary and the systemd
// driver go with the runc shim only, the one whose options they are.
func (c *Config) validateRuntime() []error {
	var errs []error
	bad := reporter(&errs, "")
	ct := c.Containerd
	systemd := ct.CgroupDriver == CgroupDriverSystemd
	if ct.CgroupDriver != CgroupDriverCgroupfs && !systemd {
		bad("containerd.cgroup_driver", "%q; want %q (the runtime makes the cgroups itself, the default) or %q (through systemd, as containerd's SystemdCgroup = true does)",
			ct.CgroupDriver, CgroupDriverCgroupfs, CgroupDriverSystemd)
	}
	if err := checkRuntimeBinary(ct.RuntimeBinary); err != nil {
		bad("containerd.runtime_binary", "%v", err)
	}
	notRunc := func(rt string) bool { return rt != "" && rt != RuncShim }
	if notRunc(ct.Runtime) {
		if ct.RuntimeBinary != "" {
			bad("containerd.runtime_binary", "%q is an option of the runc shim, but containerd.runtime is %q; set runtime = \"\" (or %q), or remove runtime_binary",
				ct.RuntimeBinary, ct.Runtime, RuncShim)
		}
		if systemd {
			bad("containerd.cgroup_driver", "%q is an option of the runc shim, but containerd.runtime is %q; set runtime = \"\" (or %q), or cgroup_driver = %q",
				ct.CgroupDriver, ct.Runtime, RuncShim, CgroupDriverCgroupfs)
		}
	}
	for _, n := range c.Names() {
		t := c.Languages[n]
		key := "languages." + n
		if err := checkRuntimeBinary(t.RuntimeBinary); err != nil {
			bad(key+".runtime_binary", "%v", err)
		}
		if t.Runtime == "" && t.RuntimeBinary == "" {
			// [containerd]'s, checked above.
			continue
		}
		rt, bin := cmp.Or(t.Runtime, ct.Runtime), cmp.Or(t.RuntimeBinary, ct.RuntimeBinary)
		if !notRunc(rt) {
			continue
		}
		if bin != "" {
			k := key + ".runtime"
			if t.Runtime == "" {
				k = key + ".runtime_binary"
			}
			bad(k, "the runtime %q is not the runc shim (%q), but the runtime_binary is %q (the language's own or [containerd]'s), an option of that shim only; set runtime = \"\", or remove runtime_binary",
				rt, RuncShim, bin)
		}
		if systemd {
			bad(key+".runtime", "%q is not the runc shim (%q), but containerd.cgroup_driver is %q, an option of that shim only; set runtime = \"\", or cgroup_driver = %q",
				rt, RuncShim, ct.CgroupDriver, CgroupDriverCgroupfs)
		}
	}
	return errs
}

// checkRuntimeBinary checks a runtime_binary: empty, a plain name, or an
// absolute path.
func checkRuntimeBinary(b string) error {
	switch {
	case b == "":
		return nil
	case strings.TrimSpace(b) != b || strings.ContainsAny(b, "\x00\n"):
		return fmt.Errorf("%q has spaces around it or a control character; want a name such as \"crun\", or an absolute path", b)
	case b == "." || b == "..":
		return fmt.Errorf("%q is not a program; want a name such as \"crun\", or an absolute path", b)
	case !strings.Contains(b, "/"):
		return nil
	case !strings.HasPrefix(b, "/"):
		return fmt.Errorf("%q is a relative path, which the shim would resolve against a directory of its own; want a name looked up on containerd's PATH, such as \"crun\", or an absolute path, such as \"/usr/bin/crun\"", b)
	case strings.HasSuffix(b, "/"):
		return fmt.Errorf("%q is a directory; want the program's absolute path, such as \"/usr/bin/crun\"", b)
	}
	return nil
}

// validateSessions checks the [sessions] table.
func validateSessions(s Sessions) []error {
	var errs []error
	bad := reporter(&errs, "sessions.")
	if s.MaxSessions < 0 || s.MaxSessions > maxSessions {
		bad("max_sessions", "%d; want 0 (no sessions) to %d", s.MaxSessions, maxSessions)
	}
	if s.IdleTimeout <= 0 {
		bad("idle_timeout", "%s must be greater than 0", s.IdleTimeout)
	}
	if s.MaxLifetime <= 0 {
		bad("max_lifetime", "%s must be greater than 0", s.MaxLifetime)
	}
	if s.IdleTimeout > s.MaxLifetime {
		bad("idle_timeout", "%s is more than max_lifetime (%s)", s.IdleTimeout, s.MaxLifetime)
	}
	return errs
}

// validateTasks checks the [tasks] table.
func validateTasks(t Tasks) []error {
	var errs []error
	bad := reporter(&errs, "tasks.")
	if t.MaxTasks < 0 || t.MaxTasks > maxTasks {
		bad("max_tasks", "%d; want 0 (no tasks) to %d", t.MaxTasks, maxTasks)
	}
	if t.ResultRetention < Duration(time.Second) || t.ResultRetention > Duration(maxResultRetention) {
		bad("result_retention", "%s; want 1s to %s: how long a task's result is kept for its client to fetch", t.ResultRetention, Duration(maxResultRetention))
	}
	return errs
}

// validateHTTP checks the limits of the [http] table.
func (c *Config) validateHTTP() []error {
	var errs []error
	bad := reporter(&errs, "http.")
	h := c.HTTP
	switch n := c.Concurrency(); {
	case h.PerClientConcurrency < 0:
		bad("per_client_concurrency", "%d is negative; want 1 to sandbox.concurrency (%d), or 0 for all of it with one client, half with several", h.PerClientConcurrency, n)
	case h.PerClientConcurrency > n:
		what := "sandbox.concurrency"
		if c.Sandbox.Concurrency == 0 {
			what = "sandbox.concurrency, here the number of CPUs,"
		}
		bad("per_client_concurrency", "%d is more than %s (%d), which bounds all clients' runs together; want 1 to %d, or 0 for all of it with one client, half with several",
			h.PerClientConcurrency, what, n, n)
	}
	if h.RateLimit < 0 {
		bad("rate_limit", "%d is negative; want tool calls a minute per client, or 0 for no limit", h.RateLimit)
	}
	if h.RateLimit > 0 && h.RateBurst < 1 {
		bad("rate_burst", "%d; want at least 1 call at once while rate_limit is on (%d a minute)", h.RateBurst, h.RateLimit)
	}
	if m := c.Sessions.MaxSessions; h.PerClientSessions < 0 || (m > 0 && h.PerClientSessions > m) {
		bad("per_client_sessions", "%d; want 1 to sessions.max_sessions (%d), or 0 for half of it", h.PerClientSessions, m)
	}
	for k, d := range map[string]Duration{"read_timeout": h.ReadTimeout, "write_timeout": h.WriteTimeout, "idle_timeout": h.IdleTimeout} {
		if d <= 0 {
			bad(k, "%s must be greater than 0", d)
		}
	}
	if h.MaxConnections < 0 {
		bad("max_connections", "%d is negative; want the connections open at once, or 0 for no bound", h.MaxConnections)
	}
	switch {
	case h.MaxConnectionsPerClient < 0:
		bad("max_connections_per_client", "%d is negative; want the connections one address may have open, or 0 for no bound", h.MaxConnectionsPerClient)
	case h.MaxConnections > 0 && h.MaxConnectionsPerClient > h.MaxConnections:
		bad("max_connections_per_client", "%d is more than max_connections (%d)", h.MaxConnectionsPerClient, h.MaxConnections)
	}
	return errs
}

// reporter returns what adds to errs a problem of the key prefix+key,
// its text made of format and a as by fmt.Sprintf.
func reporter(errs *[]error, prefix string) func(key, format string, a ...any) {
	return func(key, format string, a ...any) {
		*errs = append(*errs, fmt.Errorf("%s%s: %s", prefix, key, fmt.Sprintf(format, a...)))
	}
}

// quoteAll quotes each of s and joins them, as in "a", "b" or "c".
func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/containers/images"
	"code-sandbox-mcp/exec"
	sandboxoci "code-sandbox-mcp/oci"
)

// checker prints one line per check, OK or FAIL, with a fix for failures,
// and remembers whether any failed.
type checker struct {
	w      io.Writer
	failed bool
}

func (c *checker) ok(what, detail string) {
	fmt.Fprintf(c.w, "OK    %s: %s\n", what, detail)
}

func (c *checker) fail(what, detail, fix string) {
	c.failed = true
	fmt.Fprintf(c.w, "FAIL  %s: %s\n", what, detail)
	if fix != "" {
		fmt.Fprintf(c.w, "      fix: %s\n", fix)
	}
}

// warn reports what may be a problem without failing the check.
func (c *checker) warn(what, detail, fix string) {
	fmt.Fprintf(c.w, "WARN  %s: %s\n", what, detail)
	if fix != "" {
		fmt.Fprintf(c.w, "      fix: %s\n", fix)
	}
}

func (c *checker) skip(what, why string) {
	fmt.Fprintf(c.w, "SKIP  %s: %s\n", what, why)
}

// doctor runs doctor's checks; it fails if any does.
func (iv *invocation) doctor(ctx context.Context, sub *flag.FlagSet, args []string) int {
	if err := sub.Parse(args); err != nil {
		return exitUsage
	}
	cfg, err := loadConfig(*iv.g, iv.env)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: %v\n", err)
		return exitUsage
	}
	if !doctor(ctx, cfg, iv.env, iv.stdout, iv.logger()) {
		return exitFailure
	}
	return exitOK
}

// doctor checks this host and configuration, and runs hello world in each
// language. It reports whether every check passed.
func doctor(ctx context.Context, cfg *config.Config, env lookupFunc, w io.Writer, logger *slog.Logger) bool {
	c := &checker{w: w}
	addr, ns := cfg.Containerd.Address, cfg.Containerd.Namespace

	checkRuntime(c, cfg)
	checkCgroups(c)
	checkSeccomp(c)
	checkUIDs(c, cfg)
	checkInit(c, cfg)

	client, err := images.Dial(ctx, addr, ns)
	if err != nil {
		c.fail("containerd socket", err.Error(), "")
		c.skip("images and hello world", "containerd is not reachable")
		return !c.failed
	}
	defer client.Close()
	c.ok("containerd socket", addr+" reachable")
	if v, err := client.Version(ctx); err != nil {
		c.fail("containerd version", err.Error(), "see containerd's log")
	} else {
		detail := v.Version
		if v.Revision != "" && v.Revision != v.Version {
			detail += " (revision " + v.Revision + ")"
		}
		c.ok("containerd version", detail)
	}

	present := checkImages(ctx, c, client, cfg)
	if len(present) == 0 {
		c.skip("hello world", "no image is present")
		return !c.failed
	}
	checkHelloWorld(ctx, c, cfg, env, present, logger)
	return !c.failed
}

// checkImages checks that each language's image is in containerd's
// store, and whether it is unpacked; it returns the languages whose image
// is there.
func checkImages(ctx context.Context, c *checker, client *containerd.Client, cfg *config.Config) (present map[string]bool) {
	present = map[string]bool{}
	for _, name := range cfg.Names() {
		l, _ := cfg.Language(name)
		what := "image " + name
		img, err := client.GetImage(ctx, l.Image)
		switch {
		case err != nil && !l.Packages.Empty():
			c.fail(what, fmt.Sprintf("%s, %s with its packages table, is not built in namespace %q: %v", l.Image, l.BaseImage, cfg.Containerd.Namespace, err),
				fmt.Sprintf("build it: `%s` (`make setup` runs it)", app.BuildHint(cfg)))
			continue
		case err != nil:
			c.fail(what, fmt.Sprintf("%s is not in namespace %q: %v", l.Image, cfg.Containerd.Namespace, err),
				fmt.Sprintf("import it: `%s` (`make setup` builds and imports the default images)", app.ImportHint(cfg)))
			continue
		}
		present[name] = true
		unpacked, err := img.IsUnpacked(ctx, cfg.Containerd.Snapshotter)
		switch {
		case err != nil:
			c.fail(what, fmt.Sprintf("%s: checking its unpacked snapshot: %v", l.Image, err), "check the snapshotter in [containerd] snapshotter and containerd's log")
		case !unpacked:
			c.ok(what, l.Image+" present, not unpacked yet (the server unpacks it at start)")
		default:
			c.ok(what, l.Image+" present and unpacked")
		}
	}
	return present
}

// checkHelloWorld runs hello world in each language whose image is
// present, on an executor of its own.
func checkHelloWorld(ctx context.Context, c *checker, cfg *config.Config, env lookupFunc, present map[string]bool, logger *slog.Logger) {
	ex, err := exec.New(ctx, oneShot(app.ExecConfig(cfg, env, logger)))
	if err != nil {
		c.fail("executor", err.Error(), "")
		return
	}
	defer ex.Close()
	if err := ex.Prepare(ctx); err != nil {
		logger.Debug("prepare", "err", err)
	}
	for _, lang := range cfg.Enabled() {
		name := lang.Name
		what := "hello world " + name
		if !present[name] {
			c.skip(what, "its image is missing")
			continue
		}
		code, want := helloWorld(lang.Command)
		if code == "" {
			c.skip(what, "no hello world known for command "+lang.Command[0])
			continue
		}
		start := time.Now()
		res, err := ex.Run(ctx, exec.Request{Language: name, Code: code})
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case err != nil:
			c.fail(what, err.Error(), "see the log above (--log-level debug) and containerd's log")
		case res.Failed() || strings.TrimSpace(string(res.Stdout)) != want:
			c.fail(what, fmt.Sprintf("stdout %q, stderr %q, %s", res.Stdout, res.Stderr, mcpserver.StatusLine(res, lang.Limits)),
				"check that the image has "+lang.Command[0]+" and that runs work (`code-sandbox-mcp run --language "+name+" -`)")
		default:
			c.ok(what, fmt.Sprintf("%s in %s (run %s)", want, took, res.Duration.Round(time.Millisecond)))
		}
	}
}

// helloWorld returns a program printing a known line for the interpreters
// it knows, and that line.
func helloWorld(command []string) (code, want string) {
	const hello = "hello from the sandbox"
	switch base := filepath.Base(command[0]); {
	case strings.HasPrefix(base, "python"):
		return "print('" + hello + "')\n", hello
	case base == "node" || base == "nodejs" || base == "deno" || base == "bun":
		return "console.log('" + hello + "')\n", hello
	case base == "bash" || base == "sh" || base == "dash" || base == "zsh":
		return "echo '" + hello + "'\n", hello
	case base == "ruby" || base == "perl":
		return "print \"" + hello + "\\n\"\n", hello
	}
	return "", ""
}

// checkRuntime checks the runtimes the enabled languages run on: for the
// runc shim (the default), the OCI runtime binary it runs, found as the
// shim would find it and with its version, and the shim itself; then the
// cgroup driver. Another shim is not checked.
func checkRuntime(c *checker, cfg *config.Config) {
	seen := map[string]bool{}
	runcShim := false
	for _, l := range cfg.Enabled() {
		rt := cmp.Or(l.Runtime, config.RuncShim)
		if rt != config.RuncShim {
			if !seen[rt] {
				c.skip("runtime", "runtime "+rt+" is configured; only the runc shim's binary is checked")
			}
			seen[rt] = true
			continue
		}
		runcShim = true
		bin := cmp.Or(l.RuntimeBinary, "runc")
		if !seen[bin] {
			checkRuntimeBinary(c, bin)
		}
		seen[bin] = true
	}
	if runcShim {
		if path, err := osexec.LookPath("containerd-shim-runc-v2"); err != nil {
			c.fail("shim", "containerd-shim-runc-v2 is not on PATH", "install containerd (it ships the shim), or put the shim next to containerd")
		} else {
			c.ok("shim", path)
		}
	}
	checkCgroupDriver(c, cfg, systemdRunDir)
}

// checkRuntimeBinary reports the OCI runtime bin that the runc shim runs:
// an absolute path, or a name the shim looks up on containerd's PATH,
// which this looks up on the server's, and its version's first line.
func checkRuntimeBinary(c *checker, bin string) {
	path := bin
	if !strings.Contains(bin, "/") {
		p, err := osexec.LookPath(bin)
		if err != nil {
			c.warn("runtime", bin+" is not on this server's PATH; the runc shim looks it up on containerd's own PATH, which may differ (hello world below tells)",
				"install "+bin+", or set [containerd] runtime_binary to its absolute path")
			return
		}
		path = p
	} else if _, err := os.Stat(bin); err != nil {
		c.fail("runtime", fmt.Sprintf("%s: %v", bin, err), "install it there, or set [containerd] runtime_binary to where it is")
		return
	}
	first, err := versionLine(path)
	if err != nil {
		c.fail("runtime", fmt.Sprintf("%s --version: %v", path, err), "reinstall "+filepath.Base(path))
		return
	}
	c.ok("runtime", path+": "+first)
}

// systemdRunDir exists while systemd runs as the init system.
const systemdRunDir = "/run/systemd/system"

// checkCgroupDriver reports [containerd] cgroup_driver; the systemd driver
// fails where systemd is not running, as systemdDir's absence says.
func checkCgroupDriver(c *checker, cfg *config.Config, systemdDir string) {
	ns := cfg.Containerd.Namespace
	if cfg.Containerd.CgroupDriver != config.CgroupDriverSystemd {
		c.ok("cgroup driver", "cgroupfs: the runtime makes each sandbox's cgroup itself, at /"+ns+"/ID")
		return
	}
	if fi, err := os.Stat(systemdDir); err != nil || !fi.IsDir() {
		c.fail("cgroup driver", "systemd, but systemd is not running on this host (no "+systemdDir+")",
			"set [containerd] cgroup_driver = \"cgroupfs\", or run the server on a host booted with systemd")
		return
	}
	c.ok("cgroup driver", "systemd: each sandbox is the transient unit "+ns+"-ID.scope in "+sandboxoci.SystemdSlice)
}

// checkCgroups reports the cgroup version and whether the controllers the
// limits need (memory, cpu, pids) are there.
func checkCgroups(c *checker) {
	need := []string{"memory", "cpu", "pids"}
	if data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		have := map[string]bool{}
		for _, f := range strings.Fields(string(data)) {
			have[f] = true
		}
		var missing []string
		for _, n := range need {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			c.fail("cgroups", fmt.Sprintf("v2, controllers %q; missing %s", strings.TrimSpace(string(data)), strings.Join(missing, ", ")),
				"enable the controllers (kernel command line, or the parent cgroup's cgroup.subtree_control)")
			return
		}
		c.ok("cgroups", "v2, controllers "+strings.TrimSpace(string(data)))
		return
	}
	var missing []string
	for _, n := range need {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", n)); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		c.fail("cgroups", "v1 (or none), missing controller hierarchies: "+strings.Join(missing, ", "),
			"mount the cgroup controllers (systemd does this on a normal boot)")
		return
	}
	swap := ""
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
		swap = "; no swap accounting (add swapaccount=1 to the kernel command line to cap swap)"
	}
	c.ok("cgroups", "v1, controllers memory, cpu, pids"+swap)
}

// checkUIDs checks the sandboxes' uid range and says how much of it live
// sandboxes hold.
func checkUIDs(c *checker, cfg *config.Config) {
	r, dir := cfg.UIDs(), cfg.Sandbox.UIDLockDir
	held, err := exec.UIDStatus(r, dir)
	if err != nil {
		c.fail("sandbox uids", err.Error(), "set [limits] uid_range to host uids that no account, group or subordinate range uses")
		return
	}
	c.ok("sandbox uids", fmt.Sprintf("%s, %d uids, clear of the host's accounts; %d held by live sandboxes (claims in %s)", r, r.Size(), held, dir))
}

// checkInit reports the init every sandbox runs as its pid 1, with its
// version's first line.
func checkInit(c *checker, cfg *config.Config) {
	path, err := exec.CheckInit(cfg.Sandbox.Init)
	if err != nil {
		c.fail("init", err.Error(), "make build (code-sandbox-init beside the server), or apt-get install tini, or set [sandbox] init to a static init such as tini-static")
		return
	}
	first, err := versionLine(path)
	if err != nil {
		c.fail("init", fmt.Sprintf("%s --version: %v", path, err), "reinstall it, or set [sandbox] init to a static init such as tini-static")
		return
	}
	c.ok("init", path+": "+first+", pid 1 of every sandbox")
}

// versionLine runs path --version and returns the first line it printed.
func versionLine(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := osexec.CommandContext(ctx, path, "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	return first, err
}

// checkSeccomp reports whether the kernel supports seccomp filters.
func checkSeccomp(c *checker) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		c.fail("seccomp", err.Error(), "")
		return
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Seccomp:"); ok {
			c.ok("seccomp", "supported by the kernel (this process's mode "+strings.TrimSpace(v)+")")
			return
		}
	}
	c.fail("seccomp", "the kernel does not report seccomp in /proc/self/status", "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER")
}

package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	osexec "os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Debian packages are added in two steps, so that no package's code runs
// on the host:
//
//  1. The host's apt-get, pointed at a private state of its own (a copy
//     of the image's dpkg status and of its apt sources, or the sources
//     of the request, and empty lists and caches in a temporary
//     directory), resolves the packages against what the image already
//     has and downloads only what is missing. It verifies signatures with
//     the host's keyrings, as for any download.
//  2. The image's own dpkg installs the downloaded .debs in a chroot of
//     the build snapshot, in new network, PID, IPC, UTS and mount
//     namespaces: maintainer scripts run as root in that chroot with no
//     network (only a loopback that is down), as mmdebstrap's do when it
//     builds the default images. The proc and dev mounts it needs live
//     only in the private mount namespace and vanish with it.

// aptDebDir is where the downloaded .debs are put in the image for dpkg,
// and removed from after.
const aptDebDir = "var/cache/code-sandbox-mcp-debs"

// policyRCD keeps maintainer scripts from starting services.
const policyRCD = "usr/sbin/policy-rc.d"

// dpkgPathOptions leave out what nothing in a sandbox reads, as
// containers/build-image does for the default images.
var dpkgPathOptions = []string{
	"--path-exclude=/usr/share/doc/*",
	"--path-include=/usr/share/doc/*/copyright",
	"--path-exclude=/usr/share/man/*",
	"--path-exclude=/usr/share/info/*",
	"--path-exclude=/usr/share/locale/*",
	"--path-exclude=/usr/share/lintian/*",
}

// aptSourceRe is one sources.list line: deb, options in brackets, a URI,
// a suite and components. Only a deb line: no source packages, no
// newline smuggling another line in.
var aptSourceRe = regexp.MustCompile(`^deb(\s+\[[^\]\n]*\])?\s+[a-z+]+:\S+\s+\S+(\s+\S+)*$`)

// ParseAptSource checks one --apt-source line, a sources.list line such
// as "deb [trusted=yes] http://127.0.0.1:8080/ ./".
func ParseAptSource(line string) (string, error) {
	line = strings.TrimSpace(line)
	if !aptSourceRe.MatchString(line) || strings.ContainsAny(line, "\r\n") {
		return "", fmt.Errorf("--apt-source %q: want one sources.list line, such as \"deb http://deb.debian.org/debian trixie main\" or \"deb [trusted=yes] http://127.0.0.1:8080/ ./\"", line)
	}
	return line, nil
}

// aptConf, read after the host's apt configuration, drops the hooks the
// host's configuration may give apt-get update and dpkg (appstream's and
// PackageKit's refreshes, docker-clean's removal of the host's caches):
// they are the host's, about the host's state, which this apt-get neither
// reads nor changes.
const aptConf = `#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;
#clear DPkg::Pre-Install-Pkgs;
`

// aptState is the host apt-get's private state for one build: every path
// it reads or writes but its configuration and keyrings is in dir.
type aptState struct {
	dir string
	// sources are the deb lines apt reads, for messages.
	sources []string
}

// newAptState makes apt's state in dir from the image at root: a copy of
// its dpkg status, and its sources (etc/apt/sources.list and the files
// of etc/apt/sources.list.d), or sources instead if any. The image's
// files are read through root, so that none of its links leads onto the
// host.
func newAptState(root *os.Root, dir string, sources []string) (*aptState, error) {
	st := &aptState{dir: dir}
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// apt downloads as its own unprivileged user (_apt) where it can.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "apt.conf"), []byte(aptConf), 0o644); err != nil {
		return nil, err
	}
	status, err := fs.ReadFile(root.FS(), "var/lib/dpkg/status")
	if err != nil {
		return nil, fmt.Errorf("--apt needs an image with dpkg: read its /var/lib/dpkg/status: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), status, 0o644); err != nil {
		return nil, err
	}
	if _, err := root.Lstat("usr/bin/dpkg"); err != nil {
		return nil, fmt.Errorf("--apt needs an image with dpkg, to install the packages in it: %w", err)
	}

	var list []byte
	if len(sources) != 0 {
		list = []byte(strings.Join(sources, "\n") + "\n")
	} else {
		list, err = fs.ReadFile(root.FS(), "etc/apt/sources.list")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read the image's /etc/apt/sources.list: %w", err)
		}
		entries, err := fs.ReadDir(root.FS(), "etc/apt/sources.list.d")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read the image's /etc/apt/sources.list.d: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || !strings.HasSuffix(name, ".list") && !strings.HasSuffix(name, ".sources") {
				continue
			}
			b, err := fs.ReadFile(root.FS(), "etc/apt/sources.list.d/"+name)
			if err != nil {
				return nil, fmt.Errorf("read the image's /etc/apt/sources.list.d/%s: %w", name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sources.list.d", name), b, 0o644); err != nil {
				return nil, err
			}
			st.sources = append(st.sources, sourceLines(b)...)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), list, 0o644); err != nil {
		return nil, err
	}
	st.sources = append(sourceLines(list), st.sources...)
	if len(st.sources) == 0 {
		return nil, errors.New("the image has no apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d); name one with --apt-source")
	}
	return st, nil
}

// sourceLines are the lines of a sources.list, or the URIs and Suites of a
// deb822 .sources file, that say where packages come from.
func sourceLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "deb ") || strings.HasPrefix(line, "deb\t") || strings.HasPrefix(line, "URIs:") || strings.HasPrefix(line, "Suites:") {
			out = append(out, line)
		}
	}
	return out
}

// args are apt-get's options for the private state, then args.
func (st *aptState) args(args ...string) []string {
	p := func(name string) string { return filepath.Join(st.dir, name) }
	return append([]string{
		"-c", p("apt.conf"),
		"-o", "Dir::State::status=" + p("status"),
		"-o", "Dir::State::extended_states=" + p("extended_states"),
		"-o", "Dir::State::Lists=" + p("lists"),
		"-o", "Dir::Cache=" + p("cache"),
		"-o", "Dir::Etc::SourceList=" + p("sources.list"),
		"-o", "Dir::Etc::SourceParts=" + p("sources.list.d"),
		"-o", "Dir::Etc::Preferences=" + p("preferences"),
		"-o", "Dir::Etc::PreferencesParts=" + p("preferences.d"),
		"-o", "APT::Install-Recommends=false",
		"-o", "APT::Install-Suggests=false",
		"-o", "APT::Get::AutomaticRemove=false",
	}, args...)
}

// run runs the host's apt-get with the private state; its output goes to
// log and is returned.
func (st *aptState) run(ctx context.Context, env []string, log io.Writer, args ...string) (string, error) {
	cmd := osexec.CommandContext(ctx, "apt-get", st.args(args...)...)
	cmd.Env = append(slices.Clone(env), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var out bytes.Buffer
	// One writer for both, so that os/exec copies them in one goroutine.
	w := io.MultiWriter(log, &out)
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return out.String(), err
}

// DownloadDebs has the host's apt-get download specs, and whatever they
// need that the image at root does not have, into the archives directory
// of a private state in dir, from sources (sources.list lines) or else
// the image's own sources. It returns the paths of the .debs.
func DownloadDebs(ctx context.Context, root *os.Root, specs, sources []string, dir string, env []string, log io.Writer) ([]string, error) {
	if _, err := osexec.LookPath("apt-get"); err != nil {
		return nil, errors.New("--apt needs apt-get on this host to download packages")
	}
	st, err := newAptState(root, dir, sources)
	if err != nil {
		return nil, err
	}
	if out, err := st.run(ctx, env, log, "update"); err != nil {
		return nil, fmt.Errorf("apt-get update from %s: %w; its output is above%s", strings.Join(st.sources, "; "), err, aptHint(out))
	}
	out, err := st.run(ctx, env, log, append([]string{"install", "--download-only", "--no-install-recommends", "-y", "--"}, specs...)...)
	if err != nil {
		if name := aptMissing(out); name != "" {
			return nil, fmt.Errorf("could not find Debian package %s in %s; check the name (apt-cache search on a Debian trixie host), and the sources (--apt-source)", name, strings.Join(st.sources, "; "))
		}
		return nil, fmt.Errorf("apt-get install --download-only %s: %w; its output is above%s", strings.Join(specs, " "), err, aptHint(out))
	}
	debs, err := filepath.Glob(filepath.Join(dir, "cache", "archives", "*.deb"))
	if err != nil {
		return nil, err
	}
	slices.Sort(debs)
	return debs, nil
}

var (
	aptMissingRe = regexp.MustCompile(`(?m)^E: (?:Unable to locate package (\S+)|Package '([^']+)' has no installation candidate|Version '[^']*' for '([^']+)' was not found)`)
	aptErrorRe   = regexp.MustCompile(`(?m)^E: .*$`)
)

// aptMissing is the package apt-get's output says it could not find, or "".
func aptMissing(out string) string {
	m := aptMissingRe.FindStringSubmatch(out)
	for _, s := range m[min(1, len(m)):] {
		if s != "" {
			return s
		}
	}
	return ""
}

// aptHint is apt-get's first error line, as "; E: ...", or "".
func aptHint(out string) string {
	if e := aptErrorRe.FindString(out); e != "" {
		return "; " + e
	}
	return ""
}

// debPackage is the package in a .deb named as apt names what it
// downloads, NAME_VERSION_ARCH.deb, with the version's colon escaped.
func debPackage(file string) (Package, bool) {
	parts := strings.Split(strings.TrimSuffix(filepath.Base(file), ".deb"), "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Package{}, false
	}
	v, err := url.PathUnescape(parts[1])
	if err != nil {
		return Package{}, false
	}
	return Package{Name: parts[0], Version: v}, true
}

// dpkgInstalled is the version of each installed package in a dpkg
// status file.
func dpkgInstalled(status []byte) map[string]string {
	out := map[string]string{}
	for _, stanza := range strings.Split(string(status), "\n\n") {
		var name, ver, st string
		for _, line := range strings.Split(stanza, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") {
				continue
			}
			switch v = strings.TrimSpace(v); k {
			case "Package":
				name = v
			case "Version":
				ver = v
			case "Status":
				st = v
			}
		}
		if name != "" && st == "install ok installed" {
			out[name] = ver
		}
	}
	return out
}

// InstallDebs installs debs into the tree at dir (root opened on it) with
// the tree's own dpkg, in a chroot and new namespaces without network
// (see the comment at the top of this file), and returns the packages
// installed, those in specs marked as requested, and the requested ones
// the image had already. It leaves neither the debs nor anything it
// mounted, nor dpkg's logs and backups, in the tree.
func InstallDebs(ctx context.Context, dir string, root *os.Root, debs, specs []string, log io.Writer) (pkgs []Package, err error) {
	for _, tool := range []string{"unshare", "chroot", "mount"} {
		if _, err := osexec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("--apt needs %s on this host (util-linux, coreutils) to install the packages in the image", tool)
		}
	}
	// proc and dev are mounted on in the private namespace; they must be
	// the tree's own directories, not links out of it.
	for _, d := range []string{"proc", "dev", "tmp"} {
		fi, err := root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(d, 0o755); err != nil {
				return nil, err
			}
			defer root.Remove(d)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("the image's /%s is a %s, not a directory; dpkg cannot run in it", d, fi.Mode().Type())
		}
	}

	if err := root.MkdirAll(aptDebDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if rerr := root.RemoveAll(aptDebDir); rerr != nil && err == nil {
			err = rerr
		}
	}()
	var inImage []string
	for _, d := range debs {
		to := path.Join(aptDebDir, filepath.Base(d))
		if err := copyIn(root, d, to); err != nil {
			return nil, fmt.Errorf("copy %s into the image: %w", filepath.Base(d), err)
		}
		inImage = append(inImage, "/"+to)
	}
	if _, err := root.Lstat(policyRCD); errors.Is(err, fs.ErrNotExist) {
		if err := writeFile(root, policyRCD, []byte("#!/bin/sh\n# code-sandbox-mcp images build: no service starts in a build.\nexit 101\n"), 0o755); err != nil {
			return nil, err
		}
		defer func() {
			if rerr := root.Remove(policyRCD); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}

	if len(debs) != 0 {
		if err := runDpkg(ctx, dir, inImage, log); err != nil {
			return nil, err
		}
	}
	if err := checkNoMounts(dir); err != nil {
		return nil, err
	}
	if err := aptTidy(root); err != nil {
		return nil, fmt.Errorf("tidy up after dpkg: %w", err)
	}

	status, err := fs.ReadFile(root.FS(), "var/lib/dpkg/status")
	if err != nil {
		return nil, err
	}
	installed := dpkgInstalled(status)
	requested := map[string]bool{}
	for _, s := range specs {
		requested[s] = true
	}
	for _, d := range debs {
		p, ok := debPackage(d)
		if !ok {
			continue
		}
		if v, ok := installed[p.Name]; ok {
			p.Version = v
		}
		p.Requested = requested[p.Name]
		delete(requested, p.Name)
		pkgs = append(pkgs, p)
	}
	for _, s := range specs {
		if !requested[s] {
			continue
		}
		v, ok := installed[s]
		if !ok {
			return nil, fmt.Errorf("the Debian package %s is not installed in the image after dpkg; its output is above", s)
		}
		fmt.Fprintf(log, "apt: %s %s is in the image already\n", s, v)
		pkgs = append(pkgs, Package{Name: s, Version: v, Requested: true})
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	return pkgs, nil
}

// dpkgScript runs on the host's shell in the new namespaces: it mounts
// proc for the new PID namespace and a tmpfs on the tree's dev with the
// four devices dpkg and maintainer scripts use bound into it, then runs
// the tree's dpkg in a chroot of it. Those mounts are the private mount
// namespace's and go with it; nothing under dev reaches the tree.
const dpkgScript = `set -eu
root=$1; shift
mount --make-rprivate /
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o nosuid,noexec,mode=0755 dev "$root/dev"
for d in null zero random urandom; do
	touch "$root/dev/$d"
	mount --bind "/dev/$d" "$root/dev/$d"
done
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true LC_ALL=C.UTF-8 HOME=/root \
	dpkg "$@"
`

// runDpkg runs the tree's dpkg -i debs (paths in the tree) in a chroot of
// dir, in new network, PID, IPC, UTS and mount namespaces.
func runDpkg(ctx context.Context, dir string, debs []string, log io.Writer) error {
	args := []string{"--net", "--pid", "--fork", "--ipc", "--uts", "--mount", "--propagation", "private", "--kill-child",
		"--", "/bin/sh", "-c", dpkgScript, "sh", dir}
	args = append(args, dpkgPathOptions...)
	args = append(append(args, "--force-confold", "-i"), debs...)
	cmd := osexec.CommandContext(ctx, "unshare", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	tail := &tailBuffer{max: 4096}
	// One writer for both, so that os/exec copies them in one goroutine.
	w := io.MultiWriter(log, tail)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		out := tail.String()
		name := "the packages"
		if m := dpkgFailedRe.FindStringSubmatch(out); m != nil {
			name = m[1]
			if p, ok := debPackage(name); ok {
				name = p.Name
			}
		}
		return fmt.Errorf("dpkg could not install %s in the image (%w); its output ends:\n%s", name, err, out)
	}
	return nil
}

var dpkgFailedRe = regexp.MustCompile(`error processing (?:package|archive) (\S+)`)

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// checkNoMounts fails if anything is mounted under dir: what the dpkg step
// mounted must have gone with its namespace.
func checkNoMounts(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	if m := mountsUnder(b, dir); len(m) != 0 {
		return fmt.Errorf("mounts left in the build snapshot after dpkg: %s", strings.Join(m, ", "))
	}
	return nil
}

// mountsUnder are the mount points in mountinfo strictly under dir.
func mountsUnder(mountinfo []byte, dir string) []string {
	var out []string
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for _, line := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := unescapeMountinfo(f[4]); strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// aptTidy removes what dpkg leaves that a sandbox never reads: logs,
// backups of its database and debconf's, and apt's caches.
func aptTidy(root *os.Root) error {
	fsys := root.FS()
	var remove []string
	if err := fs.WalkDir(fsys, "var/log", func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			remove = append(remove, p)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, pattern := range []string{"var/lib/dpkg/*-old", "var/cache/debconf/*-old", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"} {
		m, err := fs.Glob(fsys, pattern)
		if err != nil {
			return err
		}
		remove = append(remove, m...)
	}
	for _, p := range remove {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// copyIn copies the host file src to name in root.
func copyIn(root *os.Root, src, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

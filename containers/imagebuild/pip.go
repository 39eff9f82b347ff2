package imagebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"code-sandbox-mcp/containers/pkgspec"
)

var pyDirRe = regexp.MustCompile(`^python(3\.[0-9]+)$`)

// PythonVersion is the image's Python, such as "3.13", read from its
// usr/lib/python3.N directories (the newest, if several).
func PythonVersion(root *os.Root) (string, error) {
	entries, err := fs.ReadDir(root.FS(), "usr/lib")
	if err != nil {
		return "", fmt.Errorf("read the image's /usr/lib: %w", err)
	}
	var best string
	var bestMinor int
	for _, e := range entries {
		m := pyDirRe.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		var minor int
		fmt.Sscanf(m[1], "3.%d", &minor)
		if best == "" || minor > bestMinor {
			best, bestMinor = m[1], minor
		}
	}
	if best == "" {
		return "", errors.New("the base image has no /usr/lib/python3.N; --pip needs an image with Python, such as --from python")
	}
	return best, nil
}

// wheelPlatforms are the platform tags pip may pick wheels for; pip takes
// each manylinux_2_N to include the older ones.
func wheelPlatforms() []string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" {
		return []string{"any"}
	}
	return []string{"manylinux_2_36_" + arch, "any"}
}

var notFoundRe = regexp.MustCompile(`(?:No matching distribution found for|Could not find a version that satisfies the requirement) ([^\s(]+)`)

// DownloadWheels has the host's pip (python3 -m pip, with its own
// configuration: pip.conf, PIP_INDEX_URL) download wheels for specs and
// their dependencies into dir, for CPython version on this architecture.
// Only wheels: no sdist is built, so no package's code runs on the host.
// env is pip's environment; log gets pip's output.
func DownloadWheels(ctx context.Context, specs []string, version, dir string, env []string, log io.Writer) error {
	if _, err := osexec.LookPath("python3"); err != nil {
		return errors.New("--pip needs python3 with pip on this host to download wheels; install python3-pip")
	}
	abi := "cp" + strings.ReplaceAll(version, ".", "")
	args := []string{"-m", "pip", "download", "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check",
		"--dest", dir, "--python-version", version, "--implementation", "cp",
		"--abi", abi, "--abi", "abi3", "--abi", "none"}
	for _, p := range wheelPlatforms() {
		args = append(args, "--platform", p)
	}
	args = append(append(args, "--"), specs...)
	cmd := osexec.CommandContext(ctx, "python3", args...)
	cmd.Env = env
	var out bytes.Buffer
	// One writer for both, so that os/exec copies them in one goroutine.
	w := io.MultiWriter(log, &out)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String(), "No module named pip") {
			return errors.New("--pip needs pip on this host to download wheels; install python3-pip")
		}
		if m := notFoundRe.FindStringSubmatch(out.String()); m != nil {
			return fmt.Errorf("pip could not find %s as a wheel for Python %s: check the name and version, and the index pip is configured with (PIP_INDEX_URL, pip.conf); a package with no wheel for this platform cannot be added", m[1], version)
		}
		return fmt.Errorf("pip download %s: %w; its output is above", strings.Join(specs, " "), err)
	}
	return nil
}

// InstallWheels installs every wheel in dir into root, skipping those
// whose distribution the image already has at the same version, and
// returns what it installed, requested ones marked by their normalised
// names in specs.
func InstallWheels(root *os.Root, dir string, specs []string, version string, log io.Writer) ([]Package, error) {
	wheels, err := filepath.Glob(filepath.Join(dir, "*.whl"))
	if err != nil {
		return nil, err
	}
	if len(wheels) == 0 {
		return nil, fmt.Errorf("pip downloaded no wheel for %s", strings.Join(specs, " "))
	}
	requested := map[string]bool{}
	for _, s := range specs {
		name, _, _ := strings.Cut(s, "==")
		requested[pkgspec.NormalizePipName(name)] = true
	}
	have := InstalledPython(root, version)
	var out []Package
	slices.Sort(wheels)
	for _, w := range wheels {
		parts := strings.Split(filepath.Base(w), "-")
		if len(parts) >= 2 {
			if v, ok := have[pkgspec.NormalizePipName(parts[0])]; ok && v == parts[1] {
				fmt.Fprintf(log, "pip: %s %s is in the image already; skipped\n", parts[0], v)
				continue
			}
		}
		p, err := InstallWheel(root, w, Layout(version))
		if err != nil {
			return nil, err
		}
		p.Requested = requested[pkgspec.NormalizePipName(p.Name)]
		fmt.Fprintf(log, "pip: installed %s %s\n", p.Name, p.Version)
		out = append(out, p)
	}
	return out, nil
}

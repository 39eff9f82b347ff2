package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// NodeModules is where npm packages go in an image, relative to its root;
// the image's NODE_PATH names it so that require finds them.
const NodeModules = "usr/local/lib/node_modules"

// NpmInstall has the host's npm, with its own configuration (.npmrc,
// npm_config_registry), install specs and their dependencies under
// stage/node_modules without running any package's scripts. It returns
// what was installed, requested ones marked, and the names of those that
// declare install scripts (not run: they may not work).
func NpmInstall(ctx context.Context, specs []string, stage string, env []string, log io.Writer) ([]Package, []string, error) {
	if _, err := osexec.LookPath("npm"); err != nil {
		return nil, nil, errors.New("--npm needs npm on this host to download packages; install npm")
	}
	args := []string{"install", "--prefix", stage, "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev", "--no-update-notifier", "--"}
	cmd := osexec.CommandContext(ctx, "npm", append(args, specs...)...)
	cmd.Env = env
	cmd.Dir = stage
	var out bytes.Buffer
	// One writer for both, so that os/exec copies them in one goroutine.
	w := io.MultiWriter(log, &out)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		if name := npmMissing(out.String(), specs); name != "" {
			return nil, nil, fmt.Errorf("npm could not find %s: check the name and version, and the registry npm is configured with (npm_config_registry, .npmrc)", name)
		}
		return nil, nil, fmt.Errorf("npm install %s: %w; its output is above", strings.Join(specs, " "), err)
	}
	return npmInstalled(stage, specs)
}

// npmMissing is the requested package a failed npm's output says it could
// not find, or "".
func npmMissing(out string, specs []string) string {
	if !strings.Contains(out, "E404") && !strings.Contains(out, "ETARGET") {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "404") && !strings.Contains(line, "No matching version") {
			continue
		}
		for _, s := range specs {
			if name := npmName(s); strings.Contains(line, name) {
				return s
			}
		}
	}
	return strings.Join(specs, ", ")
}

// npmName is a spec's package name, without its version.
func npmName(spec string) string {
	if i := strings.LastIndex(spec, "@"); i > 0 {
		return spec[:i]
	}
	return spec
}

// npmInstalled reads what npm installed from its hidden lockfile.
func npmInstalled(stage string, specs []string) ([]Package, []string, error) {
	data, err := os.ReadFile(filepath.Join(stage, "node_modules", ".package-lock.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("read what npm installed: %w", err)
	}
	var lock struct {
		Packages map[string]struct {
			Name             string `json:"name"`
			Version          string `json:"version"`
			HasInstallScript bool   `json:"hasInstallScript"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, nil, fmt.Errorf("read what npm installed: %w", err)
	}
	requested := map[string]bool{}
	for _, s := range specs {
		requested[npmName(s)] = true
	}
	var pkgs []Package
	var scripts []string
	for key, p := range lock.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if i < 0 {
			continue
		}
		name := p.Name
		if name == "" {
			name = key[i+len("node_modules/"):]
		}
		top := !strings.Contains(key[:i], "node_modules/")
		pkgs = append(pkgs, Package{Name: name, Version: p.Version, Requested: top && requested[name]})
		if p.HasInstallScript {
			scripts = append(scripts, name)
		}
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name+"@"+a.Version, b.Name+"@"+b.Version) })
	pkgs = slices.Compact(pkgs)
	slices.Sort(scripts)
	return pkgs, slices.Compact(scripts), nil
}

// CopyTree copies the tree at src into root at dest: directories and
// regular files with their permission bits (never setuid, setgid or
// sticky), owned by whoever runs this (root, for a build), and symbolic
// links whose targets are relative and stay inside src. A link that leads
// out of the tree, or any other kind of file, is an error.
func CopyTree(root *os.Root, src, dest string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		to := path.Join(dest, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode.IsDir():
			if err := root.MkdirAll(to, 0o755); err != nil {
				return err
			}
			return root.Chmod(to, mode.Perm())
		case mode.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return writeFile(root, to, data, mode.Perm())
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			resolved := path.Join(path.Dir(rel), target)
			if path.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, "../") {
				return fmt.Errorf("%s: a symbolic link to %s, out of the package tree; it is not copied", rel, target)
			}
			if err := root.MkdirAll(path.Dir(to), 0o755); err != nil {
				return err
			}
			if err := root.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return root.Symlink(target, to)
		}
		return fmt.Errorf("%s: a %s, not a file, directory or link; it is not copied", rel, mode.Type())
	})
}

package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// npmDirs are the directories of global npm packages, npm's own first,
// then Debian's: a package in an earlier one hides one of the same name
// in a later one.
var npmDirs = []string{
	"usr/local/lib/node_modules",
	"usr/lib/node_modules",
	"usr/share/nodejs",
	"usr/lib/nodejs",
}

// readNPM reads the global npm packages: each top-level directory of
// npmDirs, and each directory in a scope's ("@types/node"), by the name
// require() takes, with the version of its package.json. A directory
// whose package.json is missing or not JSON is listed without a version:
// one package's broken file does not hide the others.
func readNPM(fsys fs.FS) ([]Package, error) {
	seen := map[string]bool{}
	var out []Package
	for _, root := range npmDirs {
		ps, err := readModules(fsys, root, "")
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, byName)
	return out, nil
}

// readModules reads the packages of one module directory, root, or of
// a scope in it.
func readModules(fsys fs.FS, root, scope string) ([]Package, error) {
	dir := path.Join(root, scope)
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read /%s: %w", dir, err)
	}
	var out []Package
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !isDir(fsys, dir, e) {
			continue
		}
		if scope == "" && strings.HasPrefix(name, "@") {
			ps, err := readModules(fsys, root, name)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
			continue
		}
		p, err := readPackageJSON(fsys, path.Join(dir, name, "package.json"))
		if err != nil {
			return nil, err
		}
		// The name require() takes is the directory's.
		p.Name = path.Join(scope, name)
		out = append(out, p)
	}
	return out, nil
}

// isDir reports whether e, in dir, is a directory or a link to one.
func isDir(fsys fs.FS, dir string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := fs.Stat(fsys, path.Join(dir, e.Name()))
	return err == nil && fi.IsDir()
}

// readPackageJSON reads the version of a package.json; the zero
// Package if there is none, or it is not JSON.
func readPackageJSON(fsys fs.FS, name string) (Package, error) {
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return Package{}, nil
	}
	if err != nil {
		return Package{}, fmt.Errorf("read /%s: %w", name, err)
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil {
		return Package{}, nil
	}
	return Package{Version: p.Version}, nil
}

// nodeHeaderVersion reads the version of a Node.js built from source
// (the official images') from its node_version.h; "" if there is none.
func nodeHeaderVersion(fsys fs.FS) string {
	b, err := fs.ReadFile(fsys, "usr/local/include/node/node_version.h")
	if err != nil {
		return ""
	}
	var parts [3]string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "#define" {
			continue
		}
		for i, k := range []string{"NODE_MAJOR_VERSION", "NODE_MINOR_VERSION", "NODE_PATCH_VERSION"} {
			if f[1] == k {
				parts[i] = f[2]
			}
		}
	}
	if parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return ""
	}
	return strings.Join(parts[:], ".")
}

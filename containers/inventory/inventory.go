// Package inventory says what an image holds: its Debian packages, its
// Python distributions and importable modules, its global npm packages,
// the versions of Python and Node.js, and, in an image that
// `code-sandbox-mcp images build` made, the packages its builder asked
// for (ManifestPath). It reads an unpacked image's files through an
// fs.FS and never runs anything in it; it knows nothing of containerd or
// MCP, so that what reads the files, and what tells a model about them,
// live elsewhere.
package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// ManifestPath is where, in an image, the builder's manifest lies: the
// packages `code-sandbox-mcp images build` was asked for, as JSON in the
// shape of Manifest.
const ManifestPath = "/etc/code-sandbox-mcp/packages.json"

// Manifest is the builder's record of the packages it was asked for, by
// package manager (the dependencies it lists, marked "requested": false,
// are left out). A version may be empty.
type Manifest struct {
	Apt []Package `json:"apt,omitempty"`
	Pip []Package `json:"pip,omitempty"`
	NPM []Package `json:"npm,omitempty"`
}

// Package is a package's name and version, as its package manager gives
// them.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String is "name version", or the name alone without a version.
func (p Package) String() string {
	if p.Version == "" {
		return p.Name
	}
	return p.Name + " " + p.Version
}

// Inventory is what one image holds. Lists are sorted by name.
type Inventory struct {
	// Python and Node are the versions of the image's Python 3 and
	// Node.js ("3.13.5", "20.19.2"); empty if it has none, or none this
	// package could read.
	Python string
	Node   string
	// Debian are the packages dpkg says are installed.
	Debian []Package
	// Pip are the Python distributions on the interpreter's default
	// path; a distribution found in two directories is listed once, as
	// the earlier on Python's path.
	Pip []Package
	// Modules are the names a Python program can import from Pip's
	// distributions: each distribution's top_level.txt, or its
	// normalised name, and every package and module at the top of its
	// directories. The standard library is not listed.
	Modules []string
	// NPM are the global npm packages: the top-level directories, scoped
	// ones included, of the global module directories.
	NPM []Package
	// Manifest is the builder's manifest, if the image has one.
	Manifest *Manifest
	// Notable are the packages worth naming to a model, most telling
	// first: see notable.
	Notable []Package
}

// Read reads the inventory of the root file system fsys, whose paths
// are the image's without the leading slash (see Dir). A file that is
// absent is no error (an image need have no dpkg, no Python, no npm),
// nor is a package's metadata that does not parse (the package is listed
// with what could be read of it); a file that cannot be read is, and so
// is a ManifestPath that is not JSON, and the error names the file.
func Read(fsys fs.FS) (*Inventory, error) {
	inv := &Inventory{}
	var err error
	if inv.Debian, err = readDpkg(fsys); err != nil {
		return nil, err
	}
	py, err := readPython(fsys)
	if err != nil {
		return nil, err
	}
	inv.Pip, inv.Modules = py.packages(), py.modules
	if inv.NPM, err = readNPM(fsys); err != nil {
		return nil, err
	}
	if inv.Manifest, err = readManifest(fsys); err != nil {
		return nil, err
	}
	inv.Python = debianUpstream(find(inv.Debian, "python3"))
	if inv.Python == "" {
		inv.Python = py.version
	}
	inv.Node = debianUpstream(find(inv.Debian, "nodejs"))
	if inv.Node == "" {
		inv.Node = nodeHeaderVersion(fsys)
	}
	inv.Notable = inv.notable(py)
	return inv, nil
}

// readManifest reads ManifestPath; nil if the image has none.
func readManifest(fsys fs.FS) (*Manifest, error) {
	name := strings.TrimPrefix(ManifestPath, "/")
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ManifestPath, err)
	}
	// The builder lists what it installed, dependencies too, each
	// marked requested or not; a manifest written elsewhere may not
	// mark them, and then every package counts as asked for.
	type entry struct {
		Package
		Requested *bool `json:"requested"`
	}
	var raw struct {
		Apt, Pip, NPM []entry
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ManifestPath, err)
	}
	asked := func(es []entry) []Package {
		var out []Package
		for _, e := range es {
			if e.Requested == nil || *e.Requested {
				out = append(out, e.Package)
			}
		}
		return out
	}
	return &Manifest{Apt: asked(raw.Apt), Pip: asked(raw.Pip), NPM: asked(raw.NPM)}, nil
}

// wellKnown are Python distributions a model reaches for by name, named
// whenever the image has them even if another distribution needs them.
var wellKnown = []string{"numpy", "pandas", "matplotlib", "scipy", "scikit-learn", "requests"}

// notable picks the packages worth naming. With a manifest, they are
// what the builder asked for (pip, then npm, then apt, each in the
// manifest's order), with the version installed where the image has the
// package, then the well-known Python distributions the image has (a
// derived image keeps its base's). Without one, they are the well-known
// Python distributions the image has, then, by name, every other
// distribution no other one requires (what someone installed rather than
// what came along), then every global npm package but TypeScript's type
// declarations (@types/), which a program cannot require.
func (inv *Inventory) notable(py *python) []Package {
	var asked []Package
	if m := inv.Manifest; m != nil {
		add := func(ps []Package, installed []Package) {
			for _, p := range ps {
				if p.Name == "" {
					continue
				}
				if v := find(installed, p.Name); v != "" {
					p.Version = v
				}
				asked = append(asked, p)
			}
		}
		add(m.Pip, inv.Pip)
		add(m.NPM, inv.NPM)
		add(m.Apt, inv.Debian)
	}
	named := func(ps []Package, key string) bool {
		return slices.ContainsFunc(ps, func(q Package) bool { return normalise(q.Name) == key })
	}
	var known []Package
	for _, name := range wellKnown {
		if v := find(inv.Pip, name); v != "" && !named(asked, normalise(name)) {
			known = append(known, Package{Name: name, Version: v})
		}
	}
	slices.SortFunc(known, byName)
	if inv.Manifest != nil {
		return slices.Concat(asked, known)
	}
	var rest []Package
	for _, p := range inv.Pip {
		key := normalise(p.Name)
		if !named(known, key) && !py.required[key] {
			rest = append(rest, p)
		}
	}
	for _, p := range inv.NPM {
		if !strings.HasPrefix(p.Name, "@types/") {
			rest = append(rest, p)
		}
	}
	return slices.Concat(known, rest)
}

// find returns the version of the package called name in ps (Python's
// names compared normalised), or "".
func find(ps []Package, name string) string {
	key := normalise(name)
	for _, p := range ps {
		if p.Name == name || normalise(p.Name) == key {
			return p.Version
		}
	}
	return ""
}

func byName(a, b Package) int {
	return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
}

// debianUpstream is the upstream part of a Debian version: no epoch, no
// Debian revision, no repack suffix ("1:20.19.2+dfsg-1+deb13u3" is
// "20.19.2").
func debianUpstream(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	for _, s := range []string{"+dfsg", "+ds", "~dfsg", "~ds"} {
		if i := strings.Index(v, s); i >= 0 {
			v = v[:i]
		}
	}
	return v
}

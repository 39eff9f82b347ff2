package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// pythonDirs are the directories of distributions on Debian's and
// python.org's default sys.path, in its order: a distribution in an
// earlier one hides one of the same name in a later one.
var pythonDirs = []string{
	"usr/local/lib/python3.*/dist-packages",
	"usr/local/lib/python3.*/site-packages",
	"usr/lib/python3/dist-packages",
	"usr/lib/python3.*/site-packages",
}

// python is what readPython found.
type python struct {
	dists map[string]Package // by normalised name
	// required holds the normalised names other distributions require,
	// extras left out.
	required map[string]bool
	modules  []string
	// version is "3.N" of the newest python3.N directory, for an image
	// whose Python dpkg does not know.
	version string
}

// packages returns the distributions sorted by name.
func (py *python) packages() []Package {
	out := make([]Package, 0, len(py.dists))
	for _, p := range py.dists {
		out = append(out, p)
	}
	slices.SortFunc(out, byName)
	return out
}

// readPython reads the distributions and top-level modules of each of
// pythonDirs.
func readPython(fsys fs.FS) (*python, error) {
	py := &python{dists: map[string]Package{}, required: map[string]bool{}}
	mods := map[string]bool{}
	for _, pattern := range pythonDirs {
		dirs, err := fs.Glob(fsys, pattern)
		if err != nil {
			return nil, err
		}
		slices.Sort(dirs)
		slices.Reverse(dirs) // the newest Python first
		for _, dir := range dirs {
			if err := py.readDir(fsys, dir, mods); err != nil {
				return nil, err
			}
		}
	}
	for _, lib := range []string{"usr/local/lib", "usr/lib"} {
		if v := newestPython(fsys, lib); v != "" {
			py.version = v
			break
		}
	}
	for m := range mods {
		py.modules = append(py.modules, m)
	}
	slices.Sort(py.modules)
	return py, nil
}

// newestPython returns "3.N" of the newest python3.N directory in lib
// that holds the standard library (os.py); "" if none does.
func newestPython(fsys fs.FS, lib string) string {
	entries, err := fs.ReadDir(fsys, lib)
	if err != nil {
		return ""
	}
	best, bestMinor := "", -1
	for _, e := range entries {
		minor, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "python3."))
		if !strings.HasPrefix(e.Name(), "python3.") || err != nil || minor <= bestMinor {
			continue
		}
		if _, err := fs.Stat(fsys, path.Join(lib, e.Name(), "os.py")); err == nil {
			best, bestMinor = "3."+strconv.Itoa(minor), minor
		}
	}
	return best
}

// readDir reads one directory of distributions, adding the names it
// makes importable to mods.
func (py *python) readDir(fsys fs.FS, dir string, mods map[string]bool) error {
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read /%s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		p := path.Join(dir, name)
		switch {
		case strings.HasSuffix(name, ".dist-info") && e.IsDir():
			err = py.readDist(fsys, p, path.Join(p, "METADATA"), "", mods)
		case strings.HasSuffix(name, ".egg-info") && e.IsDir():
			err = py.readDist(fsys, p, path.Join(p, "PKG-INFO"), path.Join(p, "requires.txt"), mods)
		case strings.HasSuffix(name, ".egg-info"):
			// An egg-info file is the PKG-INFO itself.
			err = py.readDist(fsys, "", p, "", mods)
		default:
			if m := moduleName(name, e.IsDir()); m != "" {
				mods[m] = true
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// identifier matches a name Python can import.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// moduleName is the name importable from an entry of a distributions'
// directory: a package directory, a .py file, an extension module; ""
// for anything else (__pycache__, .pth files, data).
func moduleName(name string, dir bool) string {
	switch {
	case dir:
	case strings.HasSuffix(name, ".py"):
		name = strings.TrimSuffix(name, ".py")
	case strings.HasSuffix(name, ".so"):
		name, _, _ = strings.Cut(name, ".")
	default:
		return ""
	}
	if name == "__pycache__" || !identifier.MatchString(name) {
		return ""
	}
	return name
}

// readDist reads one distribution: its name and version from the
// metadata file meta (METADATA or PKG-INFO), what it requires from meta
// or from the egg's requires file, and the modules it provides from the
// top_level.txt of its metadata directory dir, if it has one.
func (py *python) readDist(fsys fs.FS, dir, meta, requires string, mods map[string]bool) error {
	b, err := fs.ReadFile(fsys, meta)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a half-removed distribution: not importable as one
	}
	if err != nil {
		return fmt.Errorf("read /%s: %w", meta, err)
	}
	h := parseMetadata(b)
	if h.Name == "" {
		return nil
	}
	key := normalise(h.Name)
	if _, seen := py.dists[key]; seen {
		return nil // hidden by one earlier on the path
	}
	py.dists[key] = Package{Name: h.Name, Version: h.Version}
	reqs := h.Requires
	if requires != "" {
		if b, err := fs.ReadFile(fsys, requires); err == nil {
			reqs = append(reqs, parseRequiresTxt(b)...)
		}
	}
	for _, r := range reqs {
		py.required[normalise(r)] = true
	}
	top := false
	if dir != "" {
		if b, err := fs.ReadFile(fsys, path.Join(dir, "top_level.txt")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if m := strings.TrimSpace(line); identifier.MatchString(m) {
					mods[m], top = true, true
				}
			}
		}
	}
	if !top {
		if m := strings.ReplaceAll(key, "-", "_"); identifier.MatchString(m) {
			mods[m] = true
		}
	}
	return nil
}

// metadata is what parseMetadata reads of a distribution's metadata.
type metadata struct {
	Name, Version string
	// Requires are the names of the distributions it requires, leaving
	// out those only an extra requires.
	Requires []string
}

// parseMetadata reads the headers of a METADATA or PKG-INFO file (the
// core metadata, in email header form), up to the blank line before its
// description.
func parseMetadata(b []byte) metadata {
	var m metadata
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := field(line)
		if !ok {
			continue
		}
		switch strings.ToLower(k) {
		case "name":
			m.Name = v
		case "version":
			m.Version = v
		case "requires-dist":
			req, marker, _ := strings.Cut(v, ";")
			if strings.Contains(marker, "extra") {
				continue
			}
			if n := requirementName(req); n != "" {
				m.Requires = append(m.Requires, n)
			}
		}
	}
	return m
}

// parseRequiresTxt returns the names an egg's requires.txt requires,
// leaving out its extras' sections ("[name]"); a section of markers
// alone (":python_version < '3.11'") counts.
func parseRequiresTxt(b []byte) []string {
	var out []string
	extra := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			extra = !strings.HasPrefix(line, "[:")
		case !extra:
			if n := requirementName(line); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// requirementName is the distribution a requirement names: "numpy" of
// "numpy (>=1.23); python_version < '3.12'".
func requirementName(req string) string {
	req = strings.TrimSpace(req)
	end := strings.IndexFunc(req, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
	if end >= 0 {
		req = req[:end]
	}
	return req
}

// normalise is a distribution's name as Python's packaging compares
// them (PEP 503): lower case, each run of "-", "_" and "." one "-".
func normalise(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r == '-' || r == '_' || r == '.' {
			dash = true
			continue
		}
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		b.WriteRune(r)
	}
	return b.String()
}

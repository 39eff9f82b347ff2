package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// dpkgStatus is dpkg's database of installed packages; dpkgStatusDir
// holds one stanza a file in images without dpkg (distroless's).
const (
	dpkgStatus    = "var/lib/dpkg/status"
	dpkgStatusDir = "var/lib/dpkg/status.d"
)

// readDpkg reads the packages dpkg has installed: the stanzas of
// dpkgStatus, and of each file in dpkgStatusDir, whose Status is
// "install ok installed". Nil if the image has neither.
func readDpkg(fsys fs.FS) ([]Package, error) {
	var out []Package
	b, err := fs.ReadFile(fsys, dpkgStatus)
	switch {
	case err == nil:
		out = parseDpkgStatus(b)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read /%s: %w", dpkgStatus, err)
	}
	entries, err := fs.ReadDir(fsys, dpkgStatusDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read /%s: %w", dpkgStatusDir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dpkgStatusDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read /%s/%s: %w", dpkgStatusDir, e.Name(), err)
		}
		// A distroless stanza has no Status: being there is being
		// installed.
		out = append(out, parseStanzas(b, false)...)
	}
	slices.SortFunc(out, byName)
	return slices.CompactFunc(out, func(a, b Package) bool { return a == b }), nil
}

// parseDpkgStatus returns the installed packages of a dpkg status file.
func parseDpkgStatus(b []byte) []Package {
	out := parseStanzas(b, true)
	slices.SortFunc(out, byName)
	return out
}

// parseStanzas returns the Package and Version of each stanza of b, a
// Debian control file; with status, only of those whose Status is
// "install ok installed". A multi-arch package is listed once.
func parseStanzas(b []byte, status bool) []Package {
	var (
		out          []Package
		name, ver, s string
	)
	flush := func() {
		if name != "" && (!status || s == "install ok installed") {
			out = append(out, Package{Name: name, Version: ver})
		}
		name, ver, s = "", "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := field(line)
		if !ok {
			continue
		}
		switch k {
		case "Package":
			name = v
		case "Version":
			ver = v
		case "Status":
			s = v
		}
	}
	flush()
	return out
}

// field splits a header line, "Key: value", of a dpkg status file or a
// Python distribution's METADATA; a continuation line (one that starts
// with a space or a tab) or one without a colon is not a field.
func field(line string) (k, v string, ok bool) {
	if line == "" || line[0] == ' ' || line[0] == '\t' {
		return "", "", false
	}
	k, v, ok = strings.Cut(line, ":")
	return k, strings.TrimSpace(v), ok
}

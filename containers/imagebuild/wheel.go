package imagebuild

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"code-sandbox-mcp/containers/pkgspec"
)

// Package is one installed distribution, name and version as its metadata
// gives them.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Requested is true for a package asked for, false for a dependency.
	Requested bool `json:"requested"`
}

// PythonLayout says where a wheel's parts go in an image, as paths
// relative to the image's root.
type PythonLayout struct {
	// Site is the site-packages directory for purelib and platlib,
	// such as usr/local/lib/python3.13/dist-packages.
	Site string
	// Scripts is where scripts go, such as usr/local/bin.
	Scripts string
	// Data is the prefix data files are relative to, such as usr/local.
	Data string
	// Headers is where headers go, such as usr/local/include/python3.13.
	Headers string
}

// Layout is the Debian layout of a Python version such as "3.13": pip's
// own, for a package installed by root outside a virtual environment.
func Layout(version string) PythonLayout {
	return PythonLayout{
		Site:    "usr/local/lib/python" + version + "/dist-packages",
		Scripts: "usr/local/bin",
		Data:    "usr/local",
		Headers: "usr/local/include/python" + version,
	}
}

// maxWheelFile bounds one file unpacked from a wheel.
const maxWheelFile = 1 << 30

// InstallWheel installs the wheel file at wheel into the tree root by
// unpacking it, as PEP 427 says, and returns its name and version. No code
// of the wheel runs. Every write goes through root, so that no entry and
// no symbolic link in the tree can lead a write outside it, and entries
// that are absolute or climb with .. are refused before anything is
// written.
func InstallWheel(root *os.Root, wheel string, l PythonLayout) (Package, error) {
	zr, err := zip.OpenReader(wheel)
	if err != nil {
		return Package{}, fmt.Errorf("wheel %s: %w", path.Base(wheel), err)
	}
	defer zr.Close()
	base := path.Base(wheel)
	parts := strings.Split(strings.TrimSuffix(base, ".whl"), "-")
	if !strings.HasSuffix(base, ".whl") || len(parts) < 5 {
		return Package{}, fmt.Errorf("wheel %s: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)", base)
	}
	name, version := parts[0], parts[1]
	distInfo := name + "-" + version + ".dist-info"
	dataDir := name + "-" + version + ".data"

	// Check every entry before writing any.
	for _, f := range zr.File {
		if err := checkEntry(f.Name); err != nil {
			return Package{}, fmt.Errorf("wheel %s: %w; it is not installed", base, err)
		}
	}
	var record bytes.Buffer
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if f.Name == distInfo+"/RECORD" || f.Name == distInfo+"/INSTALLER" || strings.HasPrefix(f.Name, distInfo+"/RECORD.") {
			continue
		}
		dest, script := wheelDest(f.Name, dataDir, l)
		if dest == "" {
			return Package{}, fmt.Errorf("wheel %s: entry %s is in an unknown part of %s; it is not installed", base, f.Name, dataDir)
		}
		data, err := readEntry(f)
		if err != nil {
			return Package{}, fmt.Errorf("wheel %s: %s: %w", base, f.Name, err)
		}
		mode := fs.FileMode(0o644)
		if script || f.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if script && bytes.HasPrefix(data, []byte("#!python")) {
			data = append([]byte("#!/usr/bin/python3"), data[len("#!python"):]...)
		}
		if err := writeFile(root, dest, data, mode); err != nil {
			return Package{}, fmt.Errorf("wheel %s: %w", base, err)
		}
		fmt.Fprintf(&record, "%s,%s,%d\n", csvField(recordPath(dest, l.Site)), hashOf(data), len(data))
	}
	installer := []byte("code-sandbox-mcp\n")
	if err := writeFile(root, path.Join(l.Site, distInfo, "INSTALLER"), installer, 0o644); err != nil {
		return Package{}, fmt.Errorf("wheel %s: %w", base, err)
	}
	fmt.Fprintf(&record, "%s,%s,%d\n", csvField(distInfo+"/INSTALLER"), hashOf(installer), len(installer))
	fmt.Fprintf(&record, "%s,,\n", csvField(distInfo+"/RECORD"))
	if err := writeFile(root, path.Join(l.Site, distInfo, "RECORD"), record.Bytes(), 0o644); err != nil {
		return Package{}, fmt.Errorf("wheel %s: %w", base, err)
	}
	meta, err := readWheelFile(&zr.Reader, distInfo+"/METADATA")
	if err != nil {
		return Package{}, fmt.Errorf("wheel %s: %w", base, err)
	}
	p := metadataPackage(meta)
	if p.Name == "" {
		p = Package{Name: name, Version: version}
	}
	return p, nil
}

// checkEntry refuses an entry name that could land outside the tree.
func checkEntry(name string) error {
	switch {
	case name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\"):
		return fmt.Errorf("entry %q is an absolute or malformed path", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("entry %q has a NUL byte", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return fmt.Errorf("entry %q has a .. element", name)
		}
	}
	return nil
}

// wheelDest is where the wheel entry name goes, relative to the root, and
// whether it is a script; "" if it is in an unknown .data part.
func wheelDest(name, dataDir string, l PythonLayout) (string, bool) {
	rest, ok := strings.CutPrefix(name, dataDir+"/")
	if !ok {
		return path.Join(l.Site, name), false
	}
	part, file, _ := strings.Cut(rest, "/")
	switch part {
	case "purelib", "platlib":
		return path.Join(l.Site, file), false
	case "scripts":
		return path.Join(l.Scripts, file), true
	case "data":
		return path.Join(l.Data, file), false
	case "headers":
		return path.Join(l.Headers, strings.TrimSuffix(dataDir, ".data"), file), false
	}
	return "", false
}

// recordPath is dest as RECORD gives it: relative to site-packages.
func recordPath(dest, site string) string {
	rel, err := filepath.Rel(site, dest)
	if err != nil { // not for two relative paths
		return dest
	}
	return filepath.ToSlash(rel)
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func readEntry(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > maxWheelFile {
		return nil, fmt.Errorf("larger than %d bytes", maxWheelFile)
	}
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxWheelFile+1))
	if err == nil && len(data) > maxWheelFile {
		err = fmt.Errorf("larger than %d bytes", maxWheelFile)
	}
	return data, err
}

func readWheelFile(zr *zip.Reader, name string) ([]byte, error) {
	for _, f := range zr.File {
		if f.Name == name {
			return readEntry(f)
		}
	}
	return nil, fmt.Errorf("it has no %s", name)
}

// writeFile writes data to name in root, making its directories, replacing
// what was there.
func writeFile(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// metadataPackage reads Name and Version from a METADATA or PKG-INFO file.
func metadataPackage(meta []byte) Package {
	var p Package
	for _, line := range strings.Split(string(meta), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Name: "); ok && p.Name == "" {
			p.Name = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Version: "); ok && p.Version == "" {
			p.Version = strings.TrimSpace(v)
		}
	}
	return p
}

// InstalledPython lists the distributions the image already has in its
// site directories, by normalised name, with their versions.
func InstalledPython(root *os.Root, version string) map[string]string {
	have := map[string]string{}
	for _, dir := range []string{"usr/lib/python3/dist-packages", Layout(version).Site} {
		entries, err := fs.ReadDir(root.FS(), dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".dist-info") {
				continue
			}
			meta, err := root.ReadFile(path.Join(dir, e.Name(), "METADATA"))
			if err != nil {
				continue
			}
			if p := metadataPackage(meta); p.Name != "" {
				have[pkgspec.NormalizePipName(p.Name)] = p.Version
			}
		}
	}
	return have
}

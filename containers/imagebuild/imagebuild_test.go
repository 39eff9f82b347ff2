package imagebuild

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	a := Key("sha256:1", Request{Pip: []string{"b", "a"}})
	if b := Key("sha256:1", Request{Pip: []string{"a", "b"}}); a != b {
		t.Errorf("Key depends on order: %s != %s", a, b)
	}
	for _, other := range []string{
		Key("sha256:2", Request{Pip: []string{"a", "b"}}),
		Key("sha256:1", Request{Pip: []string{"a"}}),
		Key("sha256:1", Request{Npm: []string{"a", "b"}}),
	} {
		if other == a {
			t.Errorf("Key of another base or request is %s too", a)
		}
	}
}

func TestDefaultTag(t *testing.T) {
	if got, want := DefaultTag("localhost/code-sandbox-mcp/python:trixie", "0123456789abcdef"), "localhost/code-sandbox-mcp/python-custom:0123456789ab"; got != want {
		t.Errorf("DefaultTag = %s; want %s", got, want)
	}
}

// writeWheel writes a wheel of entries to dir/name.
func writeWheel(t *testing.T, dir, name string, entries map[string]string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for n, body := range entries {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func TestInstallWheel(t *testing.T) {
	dir, rootDir := t.TempDir(), t.TempDir()
	w := writeWheel(t, dir, "dotted.pkg-2.0-py3-none-any.whl", map[string]string{
		"dotted/pkg/__init__.py":                   "X = 1\n",
		"dotted.pkg-2.0.dist-info/METADATA":        "Metadata-Version: 2.1\nName: dotted.pkg\nVersion: 2.0\n\nbody\n",
		"dotted.pkg-2.0.dist-info/RECORD":          "stale\n",
		"dotted.pkg-2.0.data/scripts/dotted-tool":  "#!python\nprint(1)\n",
		"dotted.pkg-2.0.data/purelib/extra.py":     "Y = 2\n",
		"dotted.pkg-2.0.data/data/share/doc/x.txt": "doc\n",
	})
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	p, err := InstallWheel(root, w, Layout("3.13"))
	if err != nil || p != (Package{Name: "dotted.pkg", Version: "2.0"}) {
		t.Fatalf("InstallWheel = %+v, %v; want dotted.pkg 2.0", p, err)
	}
	site := filepath.Join(rootDir, "usr/local/lib/python3.13/dist-packages")
	for _, f := range []struct {
		path, body string
		mode       os.FileMode
	}{
		{filepath.Join(site, "dotted/pkg/__init__.py"), "X = 1\n", 0o644},
		{filepath.Join(site, "extra.py"), "Y = 2\n", 0o644},
		{filepath.Join(rootDir, "usr/local/bin/dotted-tool"), "#!/usr/bin/python3\nprint(1)\n", 0o755},
		{filepath.Join(rootDir, "usr/local/share/doc/x.txt"), "doc\n", 0o644},
		{filepath.Join(site, "dotted.pkg-2.0.dist-info/INSTALLER"), "code-sandbox-mcp\n", 0o644},
	} {
		data, err := os.ReadFile(f.path)
		fi, _ := os.Stat(f.path)
		if err != nil || string(data) != f.body || fi.Mode().Perm() != f.mode {
			t.Errorf("%s: %q, %v; want %q mode %v", f.path, data, err, f.body, f.mode)
		}
	}
	record, err := os.ReadFile(filepath.Join(site, "dotted.pkg-2.0.dist-info/RECORD"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"dotted/pkg/__init__.py,sha256=",
		"extra.py,sha256=",
		"../../../bin/dotted-tool,sha256=",
		"../../../share/doc/x.txt,sha256=",
		"dotted.pkg-2.0.dist-info/INSTALLER,sha256=",
		"dotted.pkg-2.0.dist-info/RECORD,,\n",
	} {
		if !strings.Contains(string(record), line) {
			t.Errorf("RECORD has no %q:\n%s", line, record)
		}
	}
	if strings.Contains(string(record), "stale") {
		t.Errorf("RECORD kept the wheel's own:\n%s", record)
	}
	if got := InstalledPython(root, "3.13"); got["dotted-pkg"] != "2.0" {
		t.Errorf("InstalledPython = %v; want dotted-pkg 2.0", got)
	}
}

func TestInstallWheelHostile(t *testing.T) {
	for _, entry := range []string{"../../escape.py", "/etc/escape.py", "a/../../escape.py", "evil-1.0.data/scripts/../../../../escape"} {
		t.Run(entry, func(t *testing.T) {
			base := t.TempDir()
			rootDir := filepath.Join(base, "root")
			os.Mkdir(rootDir, 0o755)
			w := writeWheel(t, base, "evil-1.0-py3-none-any.whl", map[string]string{
				"evil-1.0.dist-info/METADATA": "Name: evil\nVersion: 1.0\n\n",
				entry:                         "boom\n",
			})
			root, err := os.OpenRoot(rootDir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if _, err := InstallWheel(root, w, Layout("3.13")); err == nil {
				t.Errorf("InstallWheel of an entry %q = nil error; want a refusal", entry)
			}
			for _, p := range []string{filepath.Join(base, "escape.py"), "/etc/escape.py"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
			entries, _ := os.ReadDir(rootDir)
			if len(entries) != 0 {
				t.Errorf("a refused wheel wrote %d entries into the root", len(entries))
			}
		})
	}
}

func TestInstallWheelSymlinkInRoot(t *testing.T) {
	// A symbolic link in the image pointing out of it must not carry a
	// write out of the root.
	base := t.TempDir()
	rootDir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(rootDir, "usr/local/lib/python3.13"), 0o755)
	os.Mkdir(outside, 0o755)
	if err := os.Symlink(outside, filepath.Join(rootDir, "usr/local/lib/python3.13/dist-packages")); err != nil {
		t.Fatal(err)
	}
	w := writeWheel(t, base, "x-1.0-py3-none-any.whl", map[string]string{
		"x-1.0.dist-info/METADATA": "Name: x\nVersion: 1.0\n\n",
		"x.py":                     "boom\n",
	})
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := InstallWheel(root, w, Layout("3.13")); err == nil {
		t.Error("InstallWheel through a link out of the root = nil error; want a refusal")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the wheel wrote %d entries outside the root", len(entries))
	}
}

func TestPythonVersion(t *testing.T) {
	rootDir := t.TempDir()
	for _, d := range []string{"usr/lib/python3", "usr/lib/python3.9", "usr/lib/python3.13", "usr/lib/python3.13-config"} {
		os.MkdirAll(filepath.Join(rootDir, d), 0o755)
	}
	root, _ := os.OpenRoot(rootDir)
	defer root.Close()
	if v, err := PythonVersion(root); v != "3.13" || err != nil {
		t.Errorf("PythonVersion = %q, %v; want 3.13", v, err)
	}
}

func TestManifestJSON(t *testing.T) {
	m := Manifest{From: "b", Apt: []string{}, Pip: []Package{{Name: "x", Version: "1", Requested: true}}, Npm: []Package{}}
	data, _ := json.Marshal(m)
	if want := `{"from":"b","apt":[],"pip":[{"name":"x","version":"1","requested":true}],"npm":[]}`; string(data) != want {
		t.Errorf("manifest = %s; want %s", data, want)
	}
}

func TestCopyTree(t *testing.T) {
	base := t.TempDir()
	src, rootDir := filepath.Join(base, "src"), filepath.Join(base, "root")
	os.MkdirAll(filepath.Join(src, "pkg/bin"), 0o755)
	os.MkdirAll(filepath.Join(src, ".bin"), 0o755)
	os.Mkdir(rootDir, 0o755)
	os.WriteFile(filepath.Join(src, "pkg/index.js"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(src, "pkg/bin/cli.js"), []byte("y"), 0o755)
	os.Chmod(filepath.Join(src, "pkg/bin/cli.js"), 0o4755)
	os.Symlink("../pkg/bin/cli.js", filepath.Join(src, ".bin/cli"))
	root, _ := os.OpenRoot(rootDir)
	defer root.Close()
	if err := CopyTree(root, src, NodeModules); err != nil {
		t.Fatal(err)
	}
	nm := filepath.Join(rootDir, NodeModules)
	if fi, err := os.Stat(filepath.Join(nm, "pkg/bin/cli.js")); err != nil || fi.Mode() != 0o755 {
		t.Errorf("cli.js: %v, mode %v; want 0755 without setuid", err, fi.Mode())
	}
	if target, err := os.Readlink(filepath.Join(nm, ".bin/cli")); err != nil || target != "../pkg/bin/cli.js" {
		t.Errorf(".bin/cli links to %q, %v; want ../pkg/bin/cli.js", target, err)
	}

	for _, target := range []string{"/etc/passwd", "../../outside", "../.."} {
		t.Run(target, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			os.MkdirAll(filepath.Join(src, "pkg"), 0o755)
			os.Symlink(target, filepath.Join(src, "pkg/link"))
			rootDir := t.TempDir()
			root, _ := os.OpenRoot(rootDir)
			defer root.Close()
			if err := CopyTree(root, src, NodeModules); err == nil || !strings.Contains(err.Error(), "out of the package tree") {
				t.Errorf("CopyTree of a link to %s = %v; want a refusal", target, err)
			}
		})
	}
}

func TestNpmInstalled(t *testing.T) {
	stage := t.TempDir()
	os.MkdirAll(filepath.Join(stage, "node_modules"), 0o755)
	lock := `{"packages":{"":{"name":"x"},"node_modules/a":{"version":"1.0.0","hasInstallScript":true},"node_modules/b":{"version":"2.0.0"},"node_modules/a/node_modules/b":{"version":"1.5.0"}}}`
	os.WriteFile(filepath.Join(stage, "node_modules/.package-lock.json"), []byte(lock), 0o644)
	pkgs, scripts, err := npmInstalled(stage, []string{"a@1"})
	want := []Package{{Name: "a", Version: "1.0.0", Requested: true}, {Name: "b", Version: "1.5.0"}, {Name: "b", Version: "2.0.0"}}
	if err != nil || !reflect.DeepEqual(pkgs, want) || !reflect.DeepEqual(scripts, []string{"a"}) {
		t.Errorf("npmInstalled = %+v, %q, %v; want %+v, [a]", pkgs, scripts, err, want)
	}
}

func TestMissingMessages(t *testing.T) {
	if got := npmMissing("npm error code E404\nnpm error 404 Not Found - GET http://127.0.0.1/not-there-pkg - Not found\n", []string{"ok", "not-there-pkg"}); got != "not-there-pkg" {
		t.Errorf("npmMissing = %q; want not-there-pkg", got)
	}
	if m := notFoundRe.FindStringSubmatch("ERROR: Could not find a version that satisfies the requirement not-there-pkg (from versions: none)"); m == nil || m[1] != "not-there-pkg" {
		t.Errorf("pip's message gives %q; want not-there-pkg", m)
	}
}

package imagebuild

import (
	"archive/zip"
	"encoding/json"
	"os"
	osexec "os/exec"
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
	m := Manifest{From: "b", Apt: []Package{{Name: "tinydeb", Version: "1.0-1", Requested: true}}, Pip: []Package{{Name: "x", Version: "1", Requested: true}}, Npm: []Package{}}
	data, _ := json.Marshal(m)
	if want := `{"from":"b","apt":[{"name":"tinydeb","version":"1.0-1","requested":true}],"pip":[{"name":"x","version":"1","requested":true}],"npm":[]}`; string(data) != want {
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

func TestParseAptSource(t *testing.T) {
	for _, good := range []string{
		"deb [trusted=yes] http://127.0.0.1:8080/ ./",
		"deb http://deb.debian.org/debian trixie main contrib",
		" deb\thttp://deb.debian.org/debian trixie main ",
	} {
		if _, err := ParseAptSource(good); err != nil {
			t.Errorf("ParseAptSource(%q): %v", good, err)
		}
	}
	for _, bad := range []string{
		"", "deb", "deb http://x/", "deb-src http://x/ ./", "rpm http://x/ ./",
		"deb http://x/ ./\ndeb http://y/ ./", "Types: deb",
	} {
		if _, err := ParseAptSource(bad); err == nil {
			t.Errorf("ParseAptSource(%q) = nil error; want one", bad)
		}
	}
}

func TestKeyAptSources(t *testing.T) {
	a := Key("sha256:1", Request{Apt: []string{"x"}})
	if b := Key("sha256:1", Request{Apt: []string{"x"}, AptSources: []string{"deb http://x/ ./"}}); a == b {
		t.Error("Key does not depend on the apt sources")
	}
}

func TestAptMissing(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"Reading package lists...\nE: Unable to locate package not-there-deb\n", "not-there-deb"},
		{"E: Package 'foo' has no installation candidate\n", "foo"},
		{"E: Version '9' for 'bar' was not found\n", "bar"},
		{"E: Some other failure\n", ""},
		{"", ""},
	} {
		if got := aptMissing(tc.out); got != tc.want {
			t.Errorf("aptMissing(%q) = %q; want %q", tc.out, got, tc.want)
		}
	}
	if got, want := aptHint("W: x\nE: Failed to fetch y\nE: z\n"), "; E: Failed to fetch y"; got != want {
		t.Errorf("aptHint = %q; want %q", got, want)
	}
}

func TestDebPackage(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Package
		ok   bool
	}{
		{"/x/tinydeb_1.0-1_all.deb", Package{Name: "tinydeb", Version: "1.0-1"}, true},
		{"libfoo1_1%3a2.3+dfsg-4_amd64.deb", Package{Name: "libfoo1", Version: "1:2.3+dfsg-4"}, true},
		{"broken.deb", Package{}, false},
	} {
		if got, ok := debPackage(tc.file); got != tc.want || ok != tc.ok {
			t.Errorf("debPackage(%q) = %v, %v; want %v, %v", tc.file, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDpkgInstalled(t *testing.T) {
	status := "Package: a\nStatus: install ok installed\nVersion: 1.0\nDescription: x\n y: z\n\n" +
		"Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\nPackage: c\nStatus: install ok installed\nVersion: 1:3-1\n"
	want := map[string]string{"a": "1.0", "c": "1:3-1"}
	if got := dpkgInstalled([]byte(status)); !reflect.DeepEqual(got, want) {
		t.Errorf("dpkgInstalled = %v; want %v", got, want)
	}
}

func TestMountsUnder(t *testing.T) {
	info := "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n" +
		"30 22 0:40 / /tmp/code-sandbox-mcp-build-1 rw - overlay overlay rw\n" +
		"31 30 0:41 / /tmp/code-sandbox-mcp-build-1/proc rw - proc proc rw\n" +
		"32 30 0:42 / /tmp/code-sandbox-mcp-build-1/dev\\040x rw - tmpfs dev rw\n" +
		"33 22 0:43 / /tmp/code-sandbox-mcp-build-10/proc rw - proc proc rw\n"
	got := mountsUnder([]byte(info), "/tmp/code-sandbox-mcp-build-1")
	if want := []string{"/tmp/code-sandbox-mcp-build-1/proc", "/tmp/code-sandbox-mcp-build-1/dev x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mountsUnder = %q; want %q", got, want)
	}
}

// aptTree makes an image tree with a dpkg status and the files given.
func aptTree(t *testing.T, files map[string]string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"var/lib/dpkg/status": "Package: base\nStatus: install ok installed\nVersion: 1\n", "usr/bin/dpkg": ""} {
		files[name] = body
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestNewAptState(t *testing.T) {
	root := aptTree(t, map[string]string{
		"etc/apt/sources.list":              "# a comment\ndeb http://deb.debian.org/debian trixie main\n",
		"etc/apt/sources.list.d/extra.list": "deb http://example.org/debian trixie main\n",
		"etc/apt/sources.list.d/README":     "not a source\n",
		"etc/apt/sources.list.d/d.sources":  "Types: deb\nURIs: http://example.net/debian\nSuites: trixie\n",
	})
	state := t.TempDir()
	st, err := newAptState(root, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"deb http://deb.debian.org/debian trixie main", "URIs: http://example.net/debian", "Suites: trixie", "deb http://example.org/debian trixie main"}
	if !reflect.DeepEqual(st.sources, want) {
		t.Errorf("sources = %q; want %q", st.sources, want)
	}
	if b, err := os.ReadFile(filepath.Join(state, "status")); err != nil || !strings.Contains(string(b), "Package: base") {
		t.Errorf("status copy: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(state, "sources.list.d", "README")); err == nil {
		t.Error("a file that is not a source was copied")
	}
	args := strings.Join(st.args("update"), " ")
	for _, w := range []string{"Dir::State::status=" + filepath.Join(state, "status"), "Dir::Etc::SourceList=" + filepath.Join(state, "sources.list"), "Dir::Cache=" + filepath.Join(state, "cache"), "APT::Install-Recommends=false"} {
		if !strings.Contains(args, w) {
			t.Errorf("apt-get args %q lack %q", args, w)
		}
	}

	// The host's hooks are dropped, as apt-config, given the same
	// options, says.
	if _, err := osexec.LookPath("apt-config"); err == nil {
		out, err := osexec.Command("apt-config", st.args("dump")...).Output()
		if err != nil {
			t.Fatalf("apt-config dump: %v", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "Invoke::") || strings.Contains(line, "Pre-Install-Pkgs::") {
				t.Errorf("apt-config with the build's options keeps a hook: %s", line)
			}
		}
		if !strings.Contains(string(out), "Dir::State::status \""+filepath.Join(state, "status")) {
			t.Errorf("apt-config with the build's options does not use the status copy:\n%s", out)
		}
	}

	// Sources given replace the image's.
	state = t.TempDir()
	if _, err = newAptState(root, state, []string{"deb [trusted=yes] http://127.0.0.1:1/ ./"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "sources.list")); string(b) != "deb [trusted=yes] http://127.0.0.1:1/ ./\n" {
		t.Errorf("sources.list = %q; want the line given", b)
	}
	if e, _ := os.ReadDir(filepath.Join(state, "sources.list.d")); len(e) != 0 {
		t.Errorf("sources.list.d has %v; want nothing", e)
	}

	// An image's link to a host file is not followed.
	host := filepath.Join(t.TempDir(), "host-sources.list")
	os.WriteFile(host, []byte("deb http://host.invalid/ ./\n"), 0o644)
	root = aptTree(t, map[string]string{"etc/apt/sources.list": "->" + host})
	if st, err := newAptState(root, t.TempDir(), nil); err == nil {
		t.Errorf("newAptState followed an absolute link out of the image: sources %q", st.sources)
	}
	// An image with no sources needs --apt-source.
	root = aptTree(t, map[string]string{})
	if _, err := newAptState(root, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "--apt-source") {
		t.Errorf("newAptState without sources: %v; want an error naming --apt-source", err)
	}
}

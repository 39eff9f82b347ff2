package inventory

import (
	"os"
	"reflect"
	"testing"
)

func read(t *testing.T, dir string) *Inventory {
	t.Helper()
	inv, err := Read(Dir(dir))
	if err != nil {
		t.Fatalf("Read(%s): %v", dir, err)
	}
	return inv
}

func check[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v; want %v", what, got, want)
	}
}

// TestReadDebian reads a Debian-built image: dpkg's database, Debian's
// and pip's Python distributions, npm's and Debian's node modules.
func TestReadDebian(t *testing.T) {
	inv := read(t, "testdata/debian")
	check(t, "Debian", inv.Debian, []Package{
		{"libc6", "2.41-12"}, {"nodejs", "20.19.2+dfsg-1+deb13u3"}, {"python3", "3.13.5-1"}, {"python3-numpy", "1:2.2.4+ds-1"},
	})
	check(t, "Python", inv.Python, "3.13.5")
	check(t, "Node", inv.Node, "20.19.2")
	// numpy in /usr/local hides Debian's, as it does on sys.path.
	check(t, "Pip", inv.Pip, []Package{
		{"Brotli", "1.1.0"}, {"numpy", "2.3.0"}, {"pandas", "2.2.3+dfsg"}, {"python-dateutil", "2.9.0"}, {"six", "1.17.0"}, {"tabulate", "0.9.0"},
	})
	check(t, "Modules", inv.Modules, []string{"_brotli", "brotli", "dateutil", "numpy", "pandas", "six", "tabulate"})
	// linked is an absolute link to /usr/share/nodejs/acorn: the
	// image's, not the host's. broken-json's package.json does not parse.
	check(t, "NPM", inv.NPM, []Package{
		{"@scope/tool", "1.0.0"}, {"@types/node", "20.17.47"}, {"acorn", "8.14.0"}, {"acorn-walk", ""}, {"broken-json", ""}, {"linked", "8.14.0"}, {"lodash", "4.17.21"},
	})
	if inv.Manifest != nil {
		t.Errorf("Manifest: got %+v; want none", inv.Manifest)
	}
	// The well-known first, then what nothing requires (six and
	// python-dateutil are pandas' dependencies; tabulate only an
	// extra's), then the npm packages but type declarations.
	check(t, "Notable", inv.Notable, []Package{
		{"numpy", "2.3.0"}, {"pandas", "2.2.3+dfsg"}, {"Brotli", "1.1.0"}, {"tabulate", "0.9.0"},
		{"@scope/tool", "1.0.0"}, {"acorn", "8.14.0"}, {"acorn-walk", ""}, {"broken-json", ""}, {"linked", "8.14.0"}, {"lodash", "4.17.21"},
	})
}

// TestReadBuilt reads an image with the builder's manifest and a Python
// and Node.js built from source (python.org's and node's own images).
func TestReadBuilt(t *testing.T) {
	inv := read(t, "testdata/built")
	check(t, "Debian", inv.Debian, nil)
	check(t, "Python", inv.Python, "3.12")
	check(t, "Node", inv.Node, "22.12.0")
	check(t, "Manifest", inv.Manifest, &Manifest{
		Apt: []Package{{"ffmpeg", ""}},
		Pip: []Package{{"Polars", ""}, {"rich", "13.0"}},
		NPM: []Package{{"lodash", "4"}},
	})
	// What the builder asked for, in its order, with the version the
	// image has where it has the package, then the well-known ones it
	// has from its base.
	check(t, "Notable", inv.Notable, []Package{
		{"Polars", "1.2.3"}, {"rich", "13.0"}, {"lodash", "4.17.21"}, {"ffmpeg", ""}, {"numpy", "2.1.0"},
	})
}

// TestReadEmpty reads an image with nothing this package knows: no
// error, nothing listed.
func TestReadEmpty(t *testing.T) {
	inv := read(t, t.TempDir())
	if n := len(inv.Debian) + len(inv.Pip) + len(inv.Modules) + len(inv.NPM) + len(inv.Notable); n != 0 || inv.Python != "" || inv.Node != "" || inv.Manifest != nil {
		t.Errorf("inventory of an empty image: got %+v; want nothing", inv)
	}
}

func TestReadBadManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/etc/code-sandbox-mcp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/etc/code-sandbox-mcp/packages.json", []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(Dir(dir)); err == nil {
		t.Errorf("Read of a broken manifest: got no error; want one naming %s", ManifestPath)
	}
}

func TestRequirements(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want metadata
	}{
		{"Name: a\nVersion: 1\nRequires-Dist: numpy (>=1.23)\nRequires-Dist: scipy>=1; python_version < \"3.12\"\nRequires-Dist: pytest ; extra == 'test'\nRequires-Dist: Foo.Bar[x]\n",
			metadata{"a", "1", []string{"numpy", "scipy", "Foo.Bar"}}},
		{"Name: b\nVersion: 2\n\nRequires-Dist: in-the-body\n", metadata{"b", "2", nil}},
	} {
		check(t, "parseMetadata", parseMetadata([]byte(tc.in)), tc.want)
	}
	check(t, "parseRequiresTxt", parseRequiresTxt([]byte("a>=1\n\n[:sys_platform == 'linux']\nb\n[test]\nc\n[:python_version<'3']\nd\n")), []string{"a", "b", "d"})
	for in, want := range map[string]string{"scikit-learn": "scikit-learn", "Scikit_Learn": "scikit-learn", "zope.interface": "zope-interface", "a--_b": "a-b"} {
		check(t, "normalise("+in+")", normalise(in), want)
	}
	for in, want := range map[string]string{"3.13.5-1": "3.13.5", "1:2.2.4+ds-1": "2.2.4", "20.19.2+dfsg-1+deb13u3": "20.19.2", "1.0": "1.0", "": ""} {
		check(t, "debianUpstream("+in+")", debianUpstream(in), want)
	}
}

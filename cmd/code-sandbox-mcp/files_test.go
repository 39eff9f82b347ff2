package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func TestSplitFileFlag(t *testing.T) {
	for _, tc := range []struct {
		v, local, path string
	}{
		{"data.csv", "data.csv", "data.csv"},
		{"dir/data.csv", "dir/data.csv", "data.csv"},
		{"data.csv:in/data.csv", "data.csv", "in/data.csv"},
		{"/abs/data.csv:data.csv", "/abs/data.csv", "data.csv"},
		// The last ':' splits when a workspace path follows it...
		{"a:b.csv", "a", "b.csv"},
		{"a:b.csv:b.csv", "a:b.csv", "b.csv"},
		{"/dev/fd/63:in.csv", "/dev/fd/63", "in.csv"},
		// ...and otherwise the value is all LOCAL.
		{"dir/a:b/", "dir/a:b/", "a:b"},
		{"data.csv:", "data.csv:", "data.csv:"},
		{"data.csv:/abs", "data.csv:/abs", "abs"},
		{"data.csv:../x", "data.csv:../x", "x"},
		{"data.csv:a//b", "data.csv:a//b", "b"},
		{":x", ":x", ":x"},
	} {
		local, p, err := splitFileFlag(tc.v)
		if err != nil || local != tc.local || p != tc.path {
			t.Errorf("splitFileFlag(%q) = %q, %q, %v; want %q, %q", tc.v, local, p, err, tc.local, tc.path)
		}
	}
	for _, v := range []string{"", "/", ".", "..", "dir/.."} {
		if local, p, err := splitFileFlag(v); err == nil {
			t.Errorf("splitFileFlag(%q) = %q, %q; want an error", v, local, p)
		}
	}
}

func TestReadFileFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.csv", "x,y\n1,2\n")
	b := write("b:c.txt", "b")
	empty := write("empty", "")

	got, err := readFileFlags([]string{a + ":in/data.csv", b + ":b.txt", empty}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []exec.File{{Path: "in/data.csv", Data: []byte("x,y\n1,2\n")}, {Path: "b.txt", Data: []byte("b")}, {Path: "empty", Data: []byte{}}}
	if !slices.EqualFunc(got, want, func(x, y exec.File) bool { return x.Path == y.Path && bytes.Equal(x.Data, y.Data) }) {
		t.Errorf("got %q; want %q", got, want)
	}

	for _, tc := range []struct {
		values []string
		max    int64
		want   []string // in the error
	}{
		{[]string{a, a + ":a.csv"}, 100, []string{`--file "` + a + `:a.csv"`, `"a.csv" is already given by --file "` + a + `"`}},
		{[]string{dir}, 100, []string{`--file "` + dir + `"`, "is a directory"}},
		{[]string{dir + ":d"}, 100, []string{"is a directory"}},
		{[]string{filepath.Join(dir, "missing")}, 100, []string{"missing", "no such file"}},
		// A ':' that did not split is explained.
		{[]string{a + ":/etc/x"}, 100, []string{"no such file", `"/etc/x" after its last ':' is not a workspace path: the path is absolute`}},
		{[]string{"/"}, 100, []string{`--file "/"`, "not a workspace path"}},
		// The bytes are bounded across the files, as read.
		{[]string{a, b + ":b"}, 8, []string{`--file "` + b + `:b"`, "more than 8B", "files_in_bytes"}},
		// A LOCAL holding ':' needs a PATH, and the error says so.
		{[]string{b}, 100, []string{"no such file", "to pass the file " + b + ", give it as " + b + ":PATH"}},
		{[]string{a}, 7, []string{`--file "` + a + `"`, "more than 7B"}},
	} {
		_, err := readFileFlags(tc.values, tc.max)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("readFileFlags(%q, %d): error %v; want one with %q", tc.values, tc.max, err, w)
			}
		}
	}
}

// plantTraps puts in out what someone could have planted there: links to
// outside (a directory of the same name, a symbolic and a hard link to a
// secret file in it) and a longer file to overwrite; it returns the
// secret file's path.
func plantTraps(t *testing.T, out, outside string) string {
	t.Helper()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Symlink(outside, filepath.Join(out, "dirlink")),
		os.Symlink(secret, filepath.Join(out, "filelink")),
		os.Link(secret, filepath.Join(out, "hardlink")),
		os.WriteFile(filepath.Join(out, "old.txt"), []byte("a much longer old content"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return secret
}

// noTempFiles fails if saveFiles left a temporary file in out.
func noTempFiles(t *testing.T, out string) {
	t.Helper()
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestSaveFiles(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	out := filepath.Join(base, "out", "new")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := openOut(out)
	if err != nil {
		t.Fatalf("openOut must create a missing directory: %v", err)
	}
	defer root.Close()
	secret := plantTraps(t, out, outside)

	saved, errs := saveFiles(root, []exec.File{
		{Path: "a.txt", Data: []byte("a")},
		{Path: "dirlink/escape.txt", Data: []byte("escaped")},
		{Path: "filelink", Data: []byte("through the link")},
		{Path: "hardlink", Data: []byte("through the hard link")},
		{Path: "nested/deep/b.txt", Data: []byte("b")},
		{Path: "old.txt", Data: []byte("new")},
	})
	if saved != 5 || len(errs) != 1 || !strings.Contains(errs[0].Error(), `save "dirlink/escape.txt"`) {
		t.Errorf("saved %d, errors %v; want 5 saved and one error, for dirlink/escape.txt", saved, errs)
	}
	if _, err := os.Lstat(filepath.Join(outside, "escape.txt")); !os.IsNotExist(err) {
		t.Errorf("a write escaped the directory through a symbolic link: %v", err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "secret" {
		t.Errorf("the file outside holds %q (%v); want it untouched", b, err)
	}
	for p, want := range map[string]string{
		"a.txt":             "a",
		"filelink":          "through the link",
		"hardlink":          "through the hard link",
		"nested/deep/b.txt": "b",
		"old.txt":           "new",
	} {
		fi, err := os.Lstat(filepath.Join(out, p))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", p, fi, err)
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(out, p)); string(b) != want {
			t.Errorf("%s holds %q; want %q", p, b, want)
		}
	}
	noTempFiles(t, out)

	// A path that is a directory there is an error, and leaves no
	// temporary file.
	if _, errs := saveFiles(root, []exec.File{{Path: "nested", Data: []byte("x")}}); len(errs) != 1 {
		t.Errorf("saving over a directory: errors %v; want one", errs)
	}
	noTempFiles(t, out)
}

func TestOpenOutUnderAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := openOut(filepath.Join(f, "out")); err == nil {
		r.Close()
		t.Error("openOut beneath a regular file succeeded; want an error")
	}
}

func TestFilesNote(t *testing.T) {
	lim := config.Limits{MaxFilesOut: 100, FilesOutBytes: 32 << 20}
	two := []exec.File{{Path: "a"}, {Path: "b"}}
	for _, tc := range []struct {
		res   exec.Result
		out   string
		saved int
		want  string
	}{
		{exec.Result{}, "", 0, ""},
		{exec.Result{Files: two}, "", 0, "2 output files not saved; --out DIR saves them"},
		{exec.Result{Files: two[:1]}, "", 0, "1 output file not saved; --out DIR saves them"},
		{exec.Result{}, "out", 0, "saved 0 output files to out"},
		{exec.Result{Files: two}, "out", 2, "saved 2 output files to out"},
		{exec.Result{Files: two}, "out", 1, "saved 1 of 2 output files to out"},
		{exec.Result{Files: two, FilesDropped: 3}, "out", 2, "saved 2 output files to out; 3 output files left out: over max_files_out (100) or files_out_bytes (32MiB), or named in other than printable UTF-8"},
		{exec.Result{FilesDropped: 1}, "", 0, "1 output file left out: over max_files_out (100) or files_out_bytes (32MiB), or named in other than printable UTF-8"},
	} {
		if got := filesNote(&tc.res, lim, tc.out, tc.saved); got != tc.want {
			t.Errorf("filesNote(%d files, %d dropped, %q, %d) = %q; want %q", len(tc.res.Files), tc.res.FilesDropped, tc.out, tc.saved, got, tc.want)
		}
	}
}

// --file and --out are refused before anything connects: the socket does
// not exist, and a usage error is not the sandbox's 125.
func TestRunFileFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.csv")
	if err := os.WriteFile(data, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--address", "/nonexistent/containerd.sock", "--language", "python", "--code", "x"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--file", filepath.Join(dir, "missing.csv")}, `--file "` + filepath.Join(dir, "missing.csv") + `"`},
		{[]string{"--file", dir}, "is a directory"},
		{[]string{"--file", data, "--file", data + ":data.csv"}, "already given"},
		{[]string{"--out", filepath.Join(data, "out")}, "--out"},
	} {
		var stdout, stderr bytes.Buffer
		args := append(slices.Clone(run), tc.args...)
		code := realMain(args, strings.NewReader(""), &stdout, &stderr, tempDirsEnv(t))
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "nonexistent") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q, before connecting", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
}

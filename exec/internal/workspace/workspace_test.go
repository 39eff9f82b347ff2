package workspace

import (
	"bytes"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPathOrder(t *testing.T) {
	got := []string{"figure-10.png", "b", "figure-2.png", "a/x", "figure-1.png", "a01", "a1", "A"}
	slices.SortFunc(got, pathOrder)
	want := []string{"A", "a/x", "a01", "a1", "b", "figure-1.png", "figure-2.png", "figure-10.png"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestCheckFile(t *testing.T) {
	for _, ok := range []string{"a", "a/b.csv", "figures/figure-1.png", ".hidden", "a b/ü"} {
		if err := CheckFile(ok); err != nil {
			t.Errorf("CheckFile(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "../a", "a/../b", "./a", "a/.", "a//b", "a/", "a\x00b", strings.Repeat("x", 256), strings.Repeat("a/", 2100) + "a"} {
		if err := CheckFile(bad); err == nil {
			t.Errorf("CheckFile(%q) passed", bad)
		}
	}
}

// writeTree makes files (path: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		f := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollectOutputs(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o600)
	writeTree(t, dir, map[string]string{
		"in.csv":        "a,b\n",
		"changed.csv":   "new",
		"sub/out.txt":   "out",
		"big.bin":       strings.Repeat("x", 100),
		"figure-10.png": "10",
		"figure-2.png":  "2",
	})
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "linkdir"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := InputSums([]File{{Path: "in.csv", Data: []byte("a,b\n")}, {Path: "changed.csv", Data: []byte("old")}})
	files, dropped, err := CollectOutputs(dir, Baseline{Inputs: inputs}, OutputCaps{Files: 10, Bytes: 50})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path+"="+string(f.Data))
	}
	want := []string{"changed.csv=new", "figure-2.png=2", "figure-10.png=10", "sub/out.txt=out"}
	if !slices.Equal(got, want) || dropped != 1 {
		t.Errorf("got %q, %d dropped; want %q and big.bin dropped", got, dropped, want)
	}

	files, dropped, _ = CollectOutputs(dir, Baseline{Inputs: inputs}, OutputCaps{Files: 2, Bytes: 1 << 20})
	if len(files) != 2 || files[0].Path != "big.bin" || dropped != 3 {
		t.Errorf("with 2 files at most: got %d files (first %q), %d dropped", len(files), files[0].Path, dropped)
	}
}

// A file that grows while it is read is read no further than its share.
func TestCollectOutputsGrowingFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "grows"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("start"))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
				if _, err := f.Write(chunk); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-done }()
	time.Sleep(10 * time.Millisecond)
	files, dropped, err := CollectOutputs(dir, Baseline{}, OutputCaps{Files: 10, Bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		total += len(f.Data)
	}
	if total > 1<<20 || len(files)+dropped != 1 {
		t.Errorf("got %d files of %d bytes, %d dropped; want at most the cap, one file seen", len(files), total, dropped)
	}
}

// A directory whose name cannot be returned counts once, and what it
// holds is not read.
func TestCollectOutputsOddDirectoryName(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"bad\nname/a": "a", "bad\nname/b": "b", "ok.txt": "ok"})
	files, dropped, err := CollectOutputs(dir, Baseline{}, OutputCaps{Files: 10, Bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "ok.txt" || dropped != 1 {
		t.Errorf("got %d files, %d dropped; want ok.txt and 1 dropped", len(files), dropped)
	}
}

// An output file is returned in a slice of exactly its size: no spare
// capacity that the file store would not count.
func TestCollectOutputsExactSize(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int{"empty": 0, "small": 1000, "big": 3<<20 + 7}
	for name, n := range sizes {
		writeTree(t, dir, map[string]string{name: strings.Repeat("x", n)})
	}
	files, dropped, err := CollectOutputs(dir, Baseline{}, OutputCaps{Files: 10, Bytes: 4 << 20})
	if err != nil || len(files) != len(sizes) || dropped != 0 {
		t.Fatalf("got %d files, %d dropped, %v; want %d, 0", len(files), dropped, err, len(sizes))
	}
	for _, f := range files {
		if f.Data == nil || len(f.Data) != sizes[f.Path] || cap(f.Data) != len(f.Data) {
			t.Errorf("%s: len %d, cap %d, nil %t; want len and cap %d, not nil", f.Path, len(f.Data), cap(f.Data), f.Data == nil, sizes[f.Path])
		}
	}
}

// readSized, given the size a file had at its stat, returns exactly what
// the file holds when read: a file truncated since keeps only what was
// read, one that grew since is read on, within the limit.
func TestReadSized(t *testing.T) {
	for _, tc := range []struct {
		name        string
		has, stated int64 // the file's size when read, and at its stat
		limit       int64
		over        bool
	}{
		{"as stated", 1000, 1000, 1 << 20, false},
		{"empty", 0, 0, 1 << 20, false},
		{"truncated since", 10, 8 << 20, 16 << 20, false},
		{"truncated to nothing", 0, 8 << 20, 16 << 20, false},
		{"grew since", 300 << 10, 100, 1 << 20, false},
		{"grew past the limit", 2000, 100, 1000, true},
		{"over the limit as stated", 2000, 2000, 1000, true},
		{"at the limit", 1000, 1000, 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			want := make([]byte, tc.has)
			for i := range want {
				want[i] = byte(i)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data, over, err := readSized(f, tc.stated, tc.limit)
			switch {
			case err != nil:
				t.Fatal(err)
			case over != tc.over:
				t.Fatalf("over %t; want %t", over, tc.over)
			case over && data != nil:
				t.Errorf("over the limit, %d bytes returned; want none", len(data))
			case over:
			case data == nil || !bytes.Equal(data, want) || cap(data) != len(data):
				t.Errorf("got %d bytes (cap %d, nil %t); want the file's %d, cap %d, not nil", len(data), cap(data), data == nil, len(want), len(want))
			}
		})
	}
}

// A run directory whose server died holds its sandbox's network
// namespace, bind-mounted at netns (egress.NewNetns): RemoveRunDir
// unmounts it, as a sweep needs, and removes the directory.
func TestRemoveRunDirUnmountsNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(dir, "code"), 0o700); err != nil {
		t.Fatal(err)
	}
	ns := filepath.Join(dir, "netns")
	if err := os.WriteFile(ns, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", ns, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(ns, unix.MNT_DETACH) })
	if err := RemoveRunDir(dir); err != nil {
		t.Fatalf("RemoveRunDir: %v", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory still there: %v", err)
	}
}

package exec

import (
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
	inputs := inputSums([]File{{Path: "in.csv", Data: []byte("a,b\n")}, {Path: "changed.csv", Data: []byte("old")}})
	files, dropped, err := collectOutputs(dir, baseline{inputs: inputs}, outputCaps{files: 10, bytes: 50})
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

	files, dropped, _ = collectOutputs(dir, baseline{inputs: inputs}, outputCaps{files: 2, bytes: 1 << 20})
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
	files, dropped, err := collectOutputs(dir, baseline{}, outputCaps{files: 10, bytes: 1 << 20})
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
	files, dropped, err := collectOutputs(dir, baseline{}, outputCaps{files: 10, bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "ok.txt" || dropped != 1 {
		t.Errorf("got %d files, %d dropped; want ok.txt and 1 dropped", len(files), dropped)
	}
}

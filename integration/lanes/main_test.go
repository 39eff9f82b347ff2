package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// suite writes files (name: source) into a new directory and returns it.
func suite(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package integration\n\nimport \"testing\"\n\n"+src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRead(t *testing.T) {
	dir := suite(t, map[string]string{
		"a_test.go": `
func TestMarked(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	t.Log("x")
}

func TestIsolationCase(t *testing.T) {
	spec := serverSpec{}
	eachMode(t, func(t *testing.T, m mode) {})
}

func TestPlain(t *testing.T) { t.Log("2.x alone") }

func helper(t *testing.T) { onBothDaemons(t, daemonEvents) }

func TestMain(m *testing.M) {}

func BenchmarkX(b *testing.B) {}
`,
		"b_test.go": `
func TestOther(t *testing.T, extra int) {}

func TestLast(t *testing.T) {}
`,
		"helpers.go": `func TestIgnored(t *testing.T) { onBothDaemons(t, 0) }`,
	})
	tests, err := read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all, both []string
	for _, tt := range tests {
		all = append(all, tt.name)
		if tt.both {
			both = append(both, tt.name)
		}
	}
	if want := []string{"TestMarked", "TestIsolationCase", "TestPlain", "TestLast"}; !slices.Equal(all, want) {
		t.Errorf("all: %v; want %v", all, want)
	}
	if want := []string{"TestMarked", "TestIsolationCase"}; !slices.Equal(both, want) {
		t.Errorf("both: %v; want %v", both, want)
	}
}

// A marker anywhere but first would leave its test to 2.x alone: refused,
// each named, as is a suite with no marker.
func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"second statement", `
func TestLate(t *testing.T) {
	t.Parallel()
	onBothDaemons(t, daemonTasks)
}

func TestFine(t *testing.T) {
	onBothDaemons(t, daemonTasks)
}`, []string{"TestLate calls onBothDaemons, but not as its first statement"}},
		{"in a subtest", `
func TestNested(t *testing.T) {
	t.Run("x", func(t *testing.T) { eachMode(t, nil) })
}

func TestFine(t *testing.T) {
	eachMode(t, nil)
}`, []string{"TestNested calls eachMode, but not as a statement of its body"}},
		{"first, and again", `
func TestTwice(t *testing.T) {
	onBothDaemons(t, daemonTasks)
	onBothDaemons(t, daemonEvents)
}`, []string{"TestTwice calls onBothDaemons, but not as its first statement"}},
		{"inside the first statement", `
func TestWrapped(t *testing.T) {
	if true { onBothDaemons(t, daemonTasks) }
}`, []string{"TestWrapped calls onBothDaemons"}},
		{"none marked", `
func TestPlain(t *testing.T) {}`, []string{"no test in", "calls onBothDaemons or eachMode as the rule says"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(suite(t, map[string]string{"x_test.go": tc.src}))
			if err == nil {
				t.Fatal("read: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("read: %v; want it to say %q", err, w)
				}
			}
		})
	}
}

// The suite itself reads: it has marked tests, and no misplaced marker.
func TestReadTheSuite(t *testing.T) {
	tests, err := read("..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tt := range tests {
		if tt.both {
			n++
		}
	}
	t.Logf("%d top-level tests, %d of them against both daemons", len(tests), n)
}

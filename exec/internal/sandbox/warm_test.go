package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

func TestWarmGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writes  []string
		out     string
		prelude string
		open    bool
	}{
		{"marker alone", []string{warmMarker}, "", "", true},
		{"marker, then output", []string{warmMarker + "hello\n", "more"}, "hello\nmore", "", true},
		{"marker split across writes", []string{warmMarker[:3], warmMarker[3:10], warmMarker[10:] + "x"}, "x", "", true},
		{"a warning first", []string{"DeprecationWarning: x\n" + warmMarker + "out"}, "out", "DeprecationWarning: x\n", true},
		{"no marker yet", []string{"half of " + warmMarker[:5]}, "", "half of " + warmMarker[:5], false},
		// The program's own bytes after the marker pass, marker-like or
		// not.
		{"a second marker is the program's", []string{warmMarker, warmMarker}, warmMarker, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			g := newWarmGate(&out)
			for _, w := range tc.writes {
				if n, err := g.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if out.String() != tc.out {
				t.Errorf("passed on %q; want %q", out.String(), tc.out)
			}
			if got := g.prelude(); got != tc.prelude {
				t.Errorf("prelude %q; want %q", got, tc.prelude)
			}
			select {
			case <-g.ready:
				if !tc.open {
					t.Error("ready without the whole marker")
				}
			default:
				if tc.open {
					t.Error("not ready after the marker")
				}
			}
		})
	}
}

func TestWarmGateBoundsThePrelude(t *testing.T) {
	var out bytes.Buffer
	g := newWarmGate(&out)
	noise := strings.Repeat("n", 3*warmPreludeMax)
	g.Write([]byte(noise))
	g.Write([]byte(warmMarker[:7]))
	g.Write([]byte(warmMarker[7:] + "after"))
	if out.String() != "after" {
		t.Errorf("passed on %q; want %q (the marker found past a long prelude)", out.String(), "after")
	}
	p := g.prelude()
	if !strings.HasPrefix(p, strings.Repeat("n", warmPreludeMax)) || !strings.Contains(p, "more bytes]") || len(p) > warmPreludeMax+len(warmMarker)+32 {
		t.Errorf("prelude is %d bytes (%.40q...); want its first %d bytes and a count of the rest", len(p), p, warmPreludeMax)
	}
}

func TestWantsPreload(t *testing.T) {
	preload := []string{"numpy", "pandas", "os.path"}
	for code, want := range map[string]bool{
		"import numpy as np":                  true,
		"from pandas import DataFrame":        true,
		"import os.path":                      true,
		"print('hello')":                      false,
		"import numpyish":                     false,
		"mynumpy = 1":                         false,
		"x = __import__('pandas')":            true,
		"import matplotlib.pyplot as plt":     false,
		"df = pd.read_csv('x.csv') # pandas!": true,
	} {
		if got := WantsPreload(code, preload); got != want {
			t.Errorf("WantsPreload(%q) = %v; want %v", code, got, want)
		}
	}
	for code, want := range map[string]bool{
		"const z = require('node:zlib')": true,
		"require('@scope/pkg')":          true,
		"console.log(1)":                 false,
	} {
		if got := WantsPreload(code, []string{"node:zlib", "@scope/pkg"}); got != want {
			t.Errorf("WantsPreload(%q, node) = %v; want %v", code, got, want)
		}
	}
	if WantsPreload("import numpy", nil) {
		t.Error("wantsPreload with no preloads = true; want false")
	}
}

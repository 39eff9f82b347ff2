package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

func TestCaptureKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		writes      []string
		want        string
		wantDropped int64
	}{
		{"fits", 8, []string{"abc", "de"}, "abcde", 0},
		{"exactly full", 8, []string{"abcdefgh"}, "abcdefgh", 0},
		{"one big write", 8, []string{"abcdefghijkl"}, "abcdijkl", 4},
		{"many small writes", 8, strings.Split("abcdefghijkl", ""), "abcdijkl", 4},
		{"tail wraps", 6, []string{"abc", "de", "fgh", "ij"}, "abchij", 4},
		{"odd max", 5, []string{"0123456789"}, "01789", 5},
		{"empty", 8, nil, "", 0},
		{"zero max", 0, []string{"abc"}, "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCapture(tt.max)
			for _, w := range tt.writes {
				n, err := c.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			got, dropped := c.Bytes()
			if string(got) != tt.want || dropped != tt.wantDropped {
				t.Errorf("got %q dropped %d; want %q dropped %d", got, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

func TestCaptureMemoryIsBounded(t *testing.T) {
	c := NewCapture(1024)
	chunk := bytes.Repeat([]byte("x"), 4096)
	for range 1000 {
		c.Write(chunk)
	}
	if cap(c.head) > 1024 || len(c.tail) > 1024 {
		t.Fatalf("buffers grew: head cap %d, tail %d; want <= 1024", cap(c.head), len(c.tail))
	}
	got, dropped := c.Bytes()
	if len(got) != 1024 || dropped != 4096*1000-1024 {
		t.Fatalf("got %d bytes, dropped %d; want 1024, %d", len(got), dropped, 4096*1000-1024)
	}
}

func TestCaptureTapSeesEveryWriteWhole(t *testing.T) {
	c := NewCapture(8)
	var tapped []string
	c.Write([]byte("before "))
	c.Tap(func(p []byte) { tapped = append(tapped, string(p)) })
	for _, w := range []string{"a long write, over the cap", "b"} {
		c.Write([]byte(w))
	}
	c.Tap(nil)
	c.Write([]byte("after"))
	if got, want := strings.Join(tapped, "|"), "a long write, over the cap|b"; got != want {
		t.Errorf("tapped %q; want %q", got, want)
	}
	// What the capture keeps is the same as without the tap.
	if kept, dropped := c.Bytes(); string(kept) != "befofter" || dropped != 31 {
		t.Errorf("kept %q, dropped %d", kept, dropped)
	}
}

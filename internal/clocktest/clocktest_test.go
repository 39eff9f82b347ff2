package clocktest

import (
	"testing"
	"time"
)

func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	c := New()
	start := c.Now()
	if want := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC); !start.Equal(want) {
		t.Fatalf("New: %v; want %v", start, want)
	}
	time.Sleep(time.Millisecond) // the wall clock moves; this one must not
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("Now moved to %v without Advance; want %v", got, start)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("after Advance(90s): %v; want %v", got, want)
	}
}

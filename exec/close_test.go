package exec

import (
	"sync/atomic"
	"testing"
	"time"
)

// giveUp abandons at the first question when containerd does not answer,
// waits while it answers, up to the bound, and never abandons once Close
// is done.
func TestGiveUp(t *testing.T) {
	b := closeBounds{first: 40 * time.Millisecond, every: 50 * time.Millisecond, max: 300 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		answers bool
		doneAt  time.Duration // when Close is done (stop closed); 0: never
		// abandonAfter, abandonBefore bound when abandon is called;
		// abandonBefore 0: it must not be.
		abandonAfter, abandonBefore time.Duration
		minAsked, maxAsked          int
	}{
		{name: "containerd does not answer", answers: false, abandonAfter: 40 * time.Millisecond, abandonBefore: time.Second, minAsked: 1, maxAsked: 1},
		{name: "containerd answers: up to the bound", answers: true, abandonAfter: 240 * time.Millisecond, abandonBefore: 2 * time.Second, minAsked: 4, maxAsked: 5},
		{name: "deletes done first", answers: true, doneAt: 120 * time.Millisecond, minAsked: 1, maxAsked: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			var asked, waited atomic.Int32
			abandoned := make(chan time.Duration, 1)
			begin := time.Now()
			if tc.doneAt > 0 {
				time.AfterFunc(tc.doneAt, func() { close(stop) })
			}
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				giveUp(stop, b,
					func() bool { asked.Add(1); return tc.answers },
					func() { abandoned <- time.Since(begin) },
					func(time.Duration) { waited.Add(1) })
			}()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("giveUp did not return within 5 s")
			}
			select {
			case at := <-abandoned:
				if tc.abandonBefore == 0 {
					t.Errorf("abandoned after %s; want no abandon: Close was done at %s", at, tc.doneAt)
				} else if at < tc.abandonAfter || at > tc.abandonBefore {
					t.Errorf("abandoned after %s; want between %s and %s", at, tc.abandonAfter, tc.abandonBefore)
				}
			default:
				if tc.abandonBefore != 0 {
					t.Error("returned without abandoning")
				}
			}
			if n := int(asked.Load()); n < tc.minAsked || n > tc.maxAsked {
				t.Errorf("asked %d times; want %d to %d", n, tc.minAsked, tc.maxAsked)
			}
			if tc.answers && waited.Load() == 0 {
				t.Error("containerd answered, but waiting was never told")
			}
		})
	}
}

package exec

import (
	"context"
	"errors"
	"testing"
	"time"
)

// takeSlot gives a slot while one is free, and otherwise waits until one
// is given back, what it waits for ends (errGone) or its caller gives up;
// only a run's wait (a language named) is told to the QueueWait hook.
func TestTakeSlot(t *testing.T) {
	var told []string
	e := &Executor{slots: make(chan struct{}, 1)}
	e.cfg.Hooks.QueueWait = func(language string, d time.Duration) { told = append(told, language) }
	ctx := context.Background()

	release, err := e.takeSlot(ctx, nil, "python")
	if err != nil {
		t.Fatalf("a free slot: %v", err)
	}
	gone := make(chan struct{})
	close(gone)
	if _, err := e.takeSlot(ctx, gone, "python"); !errors.Is(err, errGone) {
		t.Errorf("no slot, and what it waited for ended: got %v; want errGone", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.takeSlot(cancelled, nil, "python"); !errors.Is(err, context.Canceled) {
		t.Errorf("no slot, and the caller gave up: got %v; want its cancellation", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := e.takeSlot(ctx, nil, "")
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Errorf("a slot given back to a waiting session: %v", err)
	}
	if len(told) != 1 || told[0] != "python" {
		t.Errorf("QueueWait told of %q; want only the first run's python", told)
	}
}

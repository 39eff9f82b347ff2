package watch

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Events follows containerd's events for our namespace: it remembers
// which containers the memory cgroup killed in (/tasks/oom), and tells
// imageChanged the name of every image created, updated or deleted
// (/images/...).
type Events struct {
	mu           sync.Mutex
	killed       map[string]chan struct{} // by container id; closed on an OOM kill
	imageChanged func(name string)
	stopped      chan struct{}
}

func NewEvents(ctx context.Context, c *containerd.Client, namespace string, log *slog.Logger, imageChanged func(name string)) *Events {
	w := &Events{killed: map[string]chan struct{}{}, imageChanged: imageChanged, stopped: make(chan struct{})}
	// Each filter is an alternative; within one, the conditions all hold.
	ns := `namespace==` + strconv.Quote(namespace)
	filters := []string{`topic=="/tasks/oom",` + ns, `topic~="^/images/",` + ns}
	// The first subscription is made before New returns, so that no run
	// can start before it.
	sub, cancel := context.WithCancel(ctx)
	evs, errs := c.Subscribe(sub, filters...)
	go func() {
		defer close(w.stopped)
		for {
			w.follow(evs, errs, log)
			cancel()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			sub, cancel = context.WithCancel(ctx)
			evs, errs = c.Subscribe(sub, filters...)
		}
	}()
	return w
}

// follow reads one subscription until it ends.
func (w *Events) follow(evs <-chan *events.Envelope, errs <-chan error, log *slog.Logger) {
	for {
		select {
		case env, ok := <-evs:
			if !ok {
				return
			}
			v, err := typeurl.UnmarshalAny(env.Event)
			if err != nil {
				continue
			}
			switch e := v.(type) {
			case *apievents.TaskOOM:
				w.saw(e.ContainerID)
			case *apievents.ImageCreate:
				w.imageChanged(e.Name)
			case *apievents.ImageUpdate:
				w.imageChanged(e.Name)
			case *apievents.ImageDelete:
				w.imageChanged(e.Name)
			}
		case err := <-errs:
			if err != nil && !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
				log.Warn("containerd event stream ended; subscribing again", "err", err)
			}
			return
		}
	}
}

// saw records an OOM kill in container id, if a run is listening for it.
func (w *Events) saw(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.killed[id]; ok && !IsClosed(ch) {
		close(ch)
	}
}

// Track listens for OOM kills in container id until done is called; ch is
// closed when one is seen. Call it before the task starts.
func (w *Events) Track(id string) (ch <-chan struct{}, done func()) {
	c := make(chan struct{})
	w.mu.Lock()
	w.killed[id] = c
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		delete(w.killed, id)
		w.mu.Unlock()
	}
}

func (w *Events) Wait() { <-w.stopped }

// IsClosed reports whether ch is closed (or has a value ready), such as
// an Exit's Done or an Events' Track channel.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

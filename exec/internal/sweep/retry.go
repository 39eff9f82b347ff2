package sweep

import (
	"context"
	"log/slog"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"code-sandbox-mcp/exec/internal/lifetime"
	"code-sandbox-mcp/exec/internal/uid"
	"code-sandbox-mcp/exec/internal/workspace"
)

const (
	// retryInterval is how often the server tries again the deletes that
	// failed, such as while containerd was down.
	retryInterval = 2 * time.Second
	// CleanupTimeout bounds the deletion of one sandbox's objects.
	CleanupTimeout = 30 * time.Second
)

// Reaper deletes what is ours: orphans (Sweep), left shims
// (StopLeftShims) and sandboxes whose delete failed, tried again
// (DeleteLater). Set its fields before first use; it is safe for
// concurrent use.
type Reaper struct {
	Client      *containerd.Client
	Namespace   string
	Snapshotter string
	StateDir    string
	Owner       Owner
	UIDs        *uid.Claims
	Log         *slog.Logger

	mu      sync.Mutex
	pending map[string]retryItem // by container id
}

type retryItem struct {
	container containerd.Container
	dir       string
	uid       uint32 // released once the delete succeeds
}

// DeleteLater records a sandbox whose delete failed; the retry loop and
// Close try it again.
func (r *Reaper) DeleteLater(c containerd.Container, dir string, uid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[string]retryItem{}
	}
	r.pending[c.ID()] = retryItem{container: c, dir: dir, uid: uid}
}

// RetryLoop tries the failed deletes again every retryInterval until
// closing begins; the last try is Retry's.
func (r *Reaper) RetryLoop(life *lifetime.Lifetime) {
	t := time.NewTicker(retryInterval)
	defer t.Stop()
	for {
		select {
		case <-life.Closing():
			return
		case <-t.C:
			ctx, cancel := life.UntilClosed(context.Background())
			ctx, stop := context.WithTimeout(ctx, CleanupTimeout)
			r.Retry(ctx)
			stop()
			cancel()
		}
	}
}

// Retry tries every failed delete once, and forgets those that
// succeed. It returns how many are still pending.
func (r *Reaper) Retry(ctx context.Context) int {
	r.mu.Lock()
	items := make([]retryItem, 0, len(r.pending))
	for _, it := range r.pending {
		items = append(items, it)
	}
	r.mu.Unlock()
	left := 0
	for i, it := range items {
		if ctx.Err() != nil {
			return left + len(items) - i
		}
		if err := Delete(ctx, it.container); err != nil {
			r.Log.Debug("delete sandbox again", "run", it.container.ID(), "err", err)
			left++
			continue
		}
		// A delete that failed while containerd was down is done by a
		// restarted daemon, which may have lost track of the shim: a
		// ready sandbox's shim outlived its container so, once in nine
		// runs of TestFaultDaemonKilledMidCallAndRestarted against 2.4.2.
		r.StopLeftShims(it.container.ID())
		if it.dir != "" {
			workspace.RemoveRunDir(it.dir)
		}
		if it.uid != 0 {
			r.UIDs.Release(it.uid)
		}
		r.Log.Info("sandbox deleted after an earlier failure", "run", it.container.ID())
		r.mu.Lock()
		delete(r.pending, it.container.ID())
		r.mu.Unlock()
	}
	return left
}

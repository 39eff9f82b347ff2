package exec

import (
	"context"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"

	"code-sandbox-mcp/exec/internal/workspace"
)

const (
	// retryInterval is how often the server tries again the deletes that
	// failed, such as while containerd was down.
	retryInterval = 2 * time.Second
	// closeTimeout bounds Close, its kills and deletes: what is left then
	// is the next server's to sweep (its owner, this process, is gone by
	// then).
	closeTimeout = 5 * time.Second
)

// retryList is the sandboxes whose delete failed, by container id, with
// their run directories.
type retryList struct {
	mu      sync.Mutex
	pending map[string]retryItem
}

type retryItem struct {
	container containerd.Container
	dir       string
	uid       uint32 // released once the delete succeeds
}

// deleteLater records a sandbox whose delete failed; the retry loop and
// Close try it again.
func (e *Executor) deleteLater(c containerd.Container, dir string, uid uint32) {
	e.retries.mu.Lock()
	defer e.retries.mu.Unlock()
	if e.retries.pending == nil {
		e.retries.pending = map[string]retryItem{}
	}
	e.retries.pending[c.ID()] = retryItem{container: c, dir: dir, uid: uid}
}

// retryLoop tries the failed deletes again every retryInterval until the
// executor closes; Close makes the last try.
func (e *Executor) retryLoop() {
	defer close(e.retried)
	t := time.NewTicker(retryInterval)
	defer t.Stop()
	for {
		select {
		case <-e.life.Closing():
			return
		case <-t.C:
			ctx, cancel := e.life.UntilClosed(context.Background())
			ctx, stop := context.WithTimeout(ctx, cleanupTimeout)
			e.retryDeletes(ctx)
			stop()
			cancel()
		}
	}
}

// retryDeletes tries every failed delete once, and forgets those that
// succeed. It returns how many are still pending.
func (e *Executor) retryDeletes(ctx context.Context) int {
	e.retries.mu.Lock()
	items := make([]retryItem, 0, len(e.retries.pending))
	for _, it := range e.retries.pending {
		items = append(items, it)
	}
	e.retries.mu.Unlock()
	left := 0
	for i, it := range items {
		if ctx.Err() != nil {
			return left + len(items) - i
		}
		if err := deleteContainer(ctx, it.container); err != nil {
			e.log.Debug("delete sandbox again", "run", it.container.ID(), "err", err)
			left++
			continue
		}
		if it.dir != "" {
			workspace.RemoveRunDir(it.dir)
		}
		if it.uid != 0 {
			e.uids.Release(it.uid)
		}
		e.log.Info("sandbox deleted after an earlier failure", "run", it.container.ID())
		e.retries.mu.Lock()
		delete(e.retries.pending, it.container.ID())
		e.retries.mu.Unlock()
	}
	return left
}

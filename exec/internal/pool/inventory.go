package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"code-sandbox-mcp/containers/inventory"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/sweep"
)

const (
	// inventoryTimeout bounds the reading of one image's inventory.
	inventoryTimeout = time.Minute
	// inventoryRetry is how long a failed read is remembered: asks in
	// that time get its error at once.
	inventoryRetry = 30 * time.Second
)

// Inventories reads what images hold, once per image digest, for every
// language that shares it: an image imported again under another digest
// is read again. Its zero value is ready to use.
type Inventories struct {
	reading sync.WaitGroup // the reads under way, which outlive their callers

	mu sync.Mutex
	m  map[digest.Digest]*inventoryRead
}

// inventoryRead is one read of an image's inventory; done is closed once
// inv or err is set.
type inventoryRead struct {
	done chan struct{}
	inv  *inventory.Inventory
	err  error
	at   time.Time // when it ended
}

// Inventory returns what the language's image holds, preparing the image
// first as Ready does. The read happens once per image digest, in the
// background, and a caller waits for it only as long as ctx allows.
func (l *Language) Inventory(ctx context.Context) (*inventory.Inventory, error) {
	img, err := l.Ready(ctx)
	if err != nil {
		return nil, err
	}
	return l.c.Inventories.get(ctx, l.c.Host, img)
}

// get returns the inventory of img, reading it unless a read of its
// digest succeeded, or failed within inventoryRetry.
func (iv *Inventories) get(ctx context.Context, h *sandbox.Host, img *sandbox.Image) (*inventory.Inventory, error) {
	iv.mu.Lock()
	r := iv.m[img.Target]
	if r == nil || r.err != nil && time.Since(r.at) >= inventoryRetry {
		r = &inventoryRead{done: make(chan struct{})}
		if iv.m == nil {
			iv.m = map[digest.Digest]*inventoryRead{}
		}
		iv.m[img.Target] = r
		iv.reading.Add(1)
		go func() {
			defer iv.reading.Done()
			rctx, cancel := h.Life.Detached(context.Background(), inventoryTimeout)
			defer cancel()
			start := time.Now()
			inv, err := readInventory(rctx, h, img.Image)
			if err != nil {
				inv = nil
				h.Log.Warn("cannot read what the image holds; the tool description names no packages", "image", img.Image.Name(), "digest", img.Target, "err", err)
			} else {
				h.Log.Debug("read what the image holds", "image", img.Image.Name(), "digest", img.Target, "took", time.Since(start),
					"debian", len(inv.Debian), "python", len(inv.Pip), "npm", len(inv.NPM))
			}
			iv.mu.Lock()
			r.inv, r.err, r.at = inv, err, time.Now()
			iv.mu.Unlock()
			close(r.done)
		}()
	}
	iv.mu.Unlock()
	select {
	case <-r.done:
		return r.inv, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading what image %s holds: %w", img.Image.Name(), context.Cause(ctx))
	}
}

// Wait waits for the reads under way to end: each is bounded by
// inventoryTimeout and by the Host's Life.
func (iv *Inventories) Wait() { iv.reading.Wait() }

// readInventory reads the inventory of img, unpacked with h.Snapshotter,
// from a read-only view of its snapshot mounted in a directory of its own
// under h.StateDir. The view and the mount are gone when it returns,
// whatever happened; the view carries the sweep's labels, so that one a
// crash left behind is swept by the next server.
func readInventory(ctx context.Context, h *sandbox.Host, img containerd.Image) (_ *inventory.Inventory, err error) {
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the layers of image %s: %w", img.Name(), err)
	}
	parent := identity.ChainID(diffIDs).String()
	key := sweep.NewID() + "-inventory"
	sn := h.Client.SnapshotService(h.Snapshotter)
	labels := h.Reaper.Owner.Labels(key, "", time.Now().Add(inventoryTimeout+sweep.CleanupGrace))
	mounts, err := sn.View(ctx, key, parent, snapshots.WithLabels(labels))
	if err != nil {
		return nil, fmt.Errorf("make a view of image %s's snapshot %s with snapshotter %s: %w", img.Name(), parent, h.Snapshotter, err)
	}
	defer func() {
		rctx, cancel := h.Life.Detached(ctx, sandbox.CallTimeout)
		defer cancel()
		if rerr := sn.Remove(rctx, key); rerr != nil && !errdefs.IsNotFound(rerr) {
			err = errors.Join(err, fmt.Errorf("remove view %s: %w", key, rerr))
		}
	}()
	dir, err := os.MkdirTemp(h.StateDir, ".inventory-")
	if err != nil {
		return nil, fmt.Errorf("make a mount point for image %s: %w", img.Name(), err)
	}
	defer func() {
		if rerr := os.Remove(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove mount point %s: %w", dir, rerr))
		}
	}()
	if err := mount.All(mounts, dir); err != nil {
		return nil, fmt.Errorf("mount a view of image %s: %w", img.Name(), err)
	}
	defer func() {
		if uerr := mount.UnmountAll(dir, 0); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unmount %s: %w", dir, uerr))
		}
	}()
	// The image's own links are followed inside it, never out of it.
	return inventory.Read(inventory.Dir(dir))
}

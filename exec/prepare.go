package exec

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"code-sandbox-mcp/config"
)

// prepareTimeout bounds the pull and unpack of one image.
const prepareTimeout = 15 * time.Minute

// preparedImage is a language's image, present and unpacked, with the
// environment its config declares.
type preparedImage struct {
	image containerd.Image
	env   []string
}

// resolveSnapshotter picks the snapshotter the daemon uses for our
// namespace when none is configured, as containerd's client does.
func resolveSnapshotter(ctx context.Context, c *containerd.Client, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	label, err := c.GetLabel(ctx, defaults.DefaultSnapshotterNSLabel)
	if err != nil {
		return "", fmt.Errorf("read namespace labels: %w", err)
	}
	if label != "" {
		return label, nil
	}
	return defaults.DefaultSnapshotter, nil
}

// image returns the prepared image of a language, looking it up, pulling
// it if allowed and unpacking it the first time.
//
// A pull or unpack, once begun, is not interrupted by ctx: containerd's
// unpacker cleans up on the context it was given, and a cancelled one leaves
// its extraction snapshot behind. It runs detached, bounded by
// prepareTimeout.
func (e *Executor) image(ctx context.Context, l config.Language) (*preparedImage, error) {
	language := l.Name
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.prepared[language]; ok {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), prepareTimeout)
	defer cancel()
	img, err := e.client.GetImage(ctx, l.Image)
	switch {
	case errdefs.IsNotFound(err) && e.cfg.Pull:
		e.log.Info("pulling image", "image", l.Image)
		img, err = e.client.Pull(ctx, l.Image, containerd.WithPullUnpack, containerd.WithPullSnapshotter(e.snapshotter))
		if err != nil {
			return nil, fmt.Errorf("image %s for %s is not in containerd namespace %q and pulling it failed: %v: %w; import it with `code-sandbox-mcp images import FILE` (`make images` builds the default ones)",
				l.Image, language, e.cfg.Namespace, err, errdefs.ErrNotFound)
		}
	case errdefs.IsNotFound(err):
		return nil, fmt.Errorf("image %s for %s is not in containerd namespace %q: %w; import it with `code-sandbox-mcp --namespace %s images import FILE` (`make setup` builds and imports the default ones), or allow pulling",
			l.Image, language, e.cfg.Namespace, errdefs.ErrNotFound, e.cfg.Namespace)
	case err != nil:
		return nil, fmt.Errorf("look up image %s: %w", l.Image, err)
	}
	unpacked, err := img.IsUnpacked(ctx, e.snapshotter)
	if err != nil {
		return nil, fmt.Errorf("check image %s is unpacked: %w", l.Image, err)
	}
	if !unpacked {
		e.log.Info("unpacking image", "image", l.Image, "snapshotter", e.snapshotter)
		if err := img.Unpack(ctx, e.snapshotter); err != nil {
			return nil, fmt.Errorf("unpack image %s with snapshotter %s: %w", l.Image, e.snapshotter, err)
		}
	}
	env, err := imageEnv(ctx, img)
	if err != nil {
		return nil, err
	}
	p := &preparedImage{image: img, env: env}
	e.prepared[language] = p
	return p, nil
}

// imageEnv reads the environment an image's config declares.
func imageEnv(ctx context.Context, img containerd.Image) ([]string, error) {
	desc, err := img.Config(ctx)
	if err != nil {
		return nil, fmt.Errorf("read config of image %s: %w", img.Name(), err)
	}
	b, err := content.ReadBlob(ctx, img.ContentStore(), desc)
	if err != nil {
		return nil, fmt.Errorf("read config of image %s: %w", img.Name(), err)
	}
	var ic ocispec.Image
	if err := json.Unmarshal(b, &ic); err != nil {
		return nil, fmt.Errorf("decode config of image %s: %w", img.Name(), err)
	}
	return ic.Config.Env, nil
}

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
	"code-sandbox-mcp/exec/internal/sandbox"
)

// prepareTimeout bounds the pull and unpack of one image.
const prepareTimeout = 15 * time.Minute

// resolveSnapshotter picks the snapshotter the daemon uses for our
// namespace when none is configured, as containerd's client does.
func resolveSnapshotter(ctx context.Context, c *containerd.Client, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	label, err := c.GetLabel(ctx, defaults.DefaultSnapshotterNSLabel)
	if err != nil {
		return "", fmt.Errorf("read namespace labels: %w", err)
	}
	if label != "" {
		return label, nil
	}
	return defaults.DefaultSnapshotter, nil
}

// missingImage is the error of an image that is not in the store: pulling
// is not allowed, or the registry does not have it either (pullErr). The
// caller knows the command that imports it, and adds it.
func (e *Executor) missingImage(l config.Language, pullErr error) error {
	if pullErr != nil {
		return fmt.Errorf("image %s for %s is not in containerd namespace %q, and its registry does not have it either (%v): %w",
			l.Image, l.Name, e.cfg.Namespace, pullErr, errdefs.ErrNotFound)
	}
	return fmt.Errorf("image %s for %s is not in containerd namespace %q, and pulling is off: %w",
		l.Image, l.Name, e.cfg.Namespace, errdefs.ErrNotFound)
}

// prepareImage looks the image of l up, pulls it if it is missing and
// pulling is allowed, unpacks it if needed and reads its environment.
// pulled says whether a pull was tried.
func (e *Executor) prepareImage(ctx context.Context, l config.Language) (_ *sandbox.Image, pulled bool, _ error) {
	img, err := e.h.Client.GetImage(ctx, l.Image)
	switch {
	case errdefs.IsNotFound(err) && e.cfg.Pull:
		pulled = true
		e.h.Log.Info("pulling image", "image", l.Image)
		img, err = e.h.Client.Pull(ctx, l.Image, containerd.WithPullUnpack, containerd.WithPullSnapshotter(e.h.Snapshotter))
		switch {
		case errdefs.IsNotFound(err):
			return nil, pulled, e.missingImage(l, err)
		case err != nil:
			// TLS, credentials, the network: the registry is not
			// usable from here. Say so rather than "not found".
			return nil, pulled, fmt.Errorf("image %s for %s is not in containerd namespace %q, and pulling it failed (%v): %w; fix the registry's address, TLS or credentials, or import the image",
				l.Image, l.Name, e.cfg.Namespace, err, errdefs.ErrFailedPrecondition)
		}
	case errdefs.IsNotFound(err):
		return nil, pulled, e.missingImage(l, nil)
	case err != nil:
		return nil, pulled, fmt.Errorf("look up image %s: %w", l.Image, err)
	}
	unpacked, err := img.IsUnpacked(ctx, e.h.Snapshotter)
	if err != nil {
		return nil, pulled, fmt.Errorf("check image %s is unpacked: %w", l.Image, err)
	}
	if !unpacked {
		e.h.Log.Info("unpacking image", "image", l.Image, "snapshotter", e.h.Snapshotter)
		if err := img.Unpack(ctx, e.h.Snapshotter); err != nil {
			return nil, pulled, fmt.Errorf("unpack image %s with snapshotter %s: %w", l.Image, e.h.Snapshotter, err)
		}
	}
	env, err := imageEnv(ctx, img)
	if err != nil {
		return nil, pulled, err
	}
	return &sandbox.Image{Image: img, Target: img.Target().Digest, Env: env}, pulled, nil
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

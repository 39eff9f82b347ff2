package pool

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

	"code-sandbox-mcp/exec/internal/sandbox"
)

// prepareTimeout bounds the pull and unpack of one image.
const prepareTimeout = 15 * time.Minute

// ResolveSnapshotter picks the snapshotter the daemon uses for our
// namespace when none is configured, as containerd's client does.
func ResolveSnapshotter(ctx context.Context, c *containerd.Client, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	ctx, cancel := context.WithTimeout(ctx, sandbox.CallTimeout)
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
func (l *Language) missingImage(pullErr error) error {
	c, ns := l.cfg, l.c.Namespace
	if !c.Packages.Empty() {
		// Built here, never pulled: a registry cannot have it.
		return fmt.Errorf("image %s for %s, %s with the language's packages, is not built in containerd namespace %q: build it with `code-sandbox-mcp images build --configured` as root, with this server's configuration (`make setup` runs it): %w",
			c.Image, c.Name, c.BaseImage, ns, errdefs.ErrFailedPrecondition)
	}
	if pullErr != nil {
		return fmt.Errorf("image %s for %s is not in containerd namespace %q, and its registry does not have it either (%v): %w",
			c.Image, c.Name, ns, pullErr, errdefs.ErrNotFound)
	}
	return fmt.Errorf("image %s for %s is not in containerd namespace %q, and pulling is off: %w",
		c.Image, c.Name, ns, errdefs.ErrNotFound)
}

// prepareImage looks the image of l up, pulls it if it is missing and
// pulling is allowed, unpacks it if needed and reads its environment.
// pulled says whether a pull was tried.
func (l *Language) prepareImage(ctx context.Context) (_ *sandbox.Image, pulled bool, _ error) {
	h, name := l.c.Host, l.cfg.Image
	img, err := h.Client.GetImage(ctx, name)
	switch {
	case errdefs.IsNotFound(err) && l.c.Pull && l.cfg.Packages.Empty():
		pulled = true
		h.Log.Info("pulling image", "image", name)
		img, err = h.Client.Pull(ctx, name, containerd.WithPullUnpack, containerd.WithPullSnapshotter(h.Snapshotter))
		switch {
		case errdefs.IsNotFound(err):
			return nil, pulled, l.missingImage(err)
		case err != nil:
			// TLS, credentials, the network: the registry is not
			// usable from here. Say so rather than "not found".
			return nil, pulled, fmt.Errorf("image %s for %s is not in containerd namespace %q, and pulling it failed (%v): %w; fix the registry's address, TLS or credentials, or import the image",
				name, l.cfg.Name, l.c.Namespace, err, errdefs.ErrFailedPrecondition)
		}
	case errdefs.IsNotFound(err):
		return nil, pulled, l.missingImage(nil)
	case err != nil:
		return nil, pulled, fmt.Errorf("look up image %s: %w", name, err)
	}
	unpacked, err := img.IsUnpacked(ctx, h.Snapshotter)
	if err != nil {
		return nil, pulled, fmt.Errorf("check image %s is unpacked: %w", name, err)
	}
	if !unpacked {
		h.Log.Info("unpacking image", "image", name, "snapshotter", h.Snapshotter)
		if err := img.Unpack(ctx, h.Snapshotter); err != nil {
			return nil, pulled, fmt.Errorf("unpack image %s with snapshotter %s: %w", name, h.Snapshotter, err)
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

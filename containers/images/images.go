// Package images is the command line's side of containerd: it dials the
// daemon with errors that say how to fix a bad socket, imports OCI or
// Docker image archives into its image store, and lists what is there. It
// serves the CLI (images, doctor) and the tests that set up a namespace;
// the executor uses only Dial. It must not know the server, the MCP layer,
// the configuration file or how a sandbox runs: it takes an address, a
// namespace and a client, nothing more.
package images

import (
	"context"
	"fmt"
	"io"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
)

// Info describes one image in containerd's image store.
type Info struct {
	// Name is the image's reference, such as
	// localhost/code-sandbox-mcp/python:trixie.
	Name string
	// Digest is the digest of what the name points at: a manifest or an
	// index.
	Digest digest.Digest
	// Size is the content the image needs on this platform (manifest,
	// config and layers, compressed as stored), in bytes; 0 when that
	// content is missing, such as for an image of another platform.
	Size int64
	// Unpacked says whether the image is unpacked in the namespace's
	// default snapshotter, ready to run without further work.
	Unpacked bool
}

// Import imports the images of an OCI image-layout or Docker archive
// read from r into containerd's image store, for this machine's platform
// only, and returns their names. An OCI archive's images are stored under
// the name its index.json gives in the io.containerd.image.name
// annotation, or else under org.opencontainers.image.ref.name.
//
// It does not unpack: an image is unpacked before its first run. An
// archive that names no image is an error, since nothing could run it.
func Import(ctx context.Context, c *containerd.Client, r io.Reader) ([]string, error) {
	imgs, err := c.Import(ctx, r, containerd.WithAllPlatforms(false))
	if err != nil {
		return nil, fmt.Errorf("import image archive: %w", err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("import image archive: it names no image; build it with an io.containerd.image.name annotation on its index")
	}
	names := make([]string, len(imgs))
	for i, img := range imgs {
		names[i] = img.Name
	}
	return names, nil
}

// List lists the images in the client's namespace.
func List(ctx context.Context, c *containerd.Client) ([]Info, error) {
	imgs, err := c.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	infos := make([]Info, 0, len(imgs))
	for _, img := range imgs {
		// Missing content makes an image unusable here, not the list
		// unreadable: it shows with size 0, not unpacked.
		size, err := img.Size(ctx)
		if err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("size of image %s: %w", img.Name(), err)
		}
		unpacked, err := img.IsUnpacked(ctx, "")
		if err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("is image %s unpacked: %w", img.Name(), err)
		}
		infos = append(infos, Info{
			Name:     img.Name(),
			Digest:   img.Target().Digest,
			Size:     size,
			Unpacked: unpacked,
		})
	}
	return infos, nil
}

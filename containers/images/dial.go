package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// Dial connects to the containerd socket at address, with namespace as the
// default namespace of every call, and checks that the daemon answers. Its
// errors say what is wrong and how to fix it: a missing socket, a socket
// the caller may not open, a daemon that does not answer.
func Dial(ctx context.Context, address, namespace string) (*containerd.Client, error) {
	if err := checkSocket(address); err != nil {
		return nil, err
	}
	c, err := containerd.New(address,
		containerd.WithDefaultNamespace(namespace),
		containerd.WithTimeout(5*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w", address, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Version(vctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd at %s does not answer (%v): %w; is the daemon healthy? see its log", address, err, errdefs.ErrUnavailable)
	}
	return c, nil
}

// checkSocket turns the two most common set-up faults into errors that say
// what to do.
func checkSocket(address string) error {
	fi, err := os.Stat(address)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("containerd socket %s does not exist: %w; start containerd (or run `make setup`), or point --address / CONTAINERD_ADDRESS at its socket", address, errdefs.ErrUnavailable)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("containerd socket %s: permission denied: %w; run as root or as a user the socket's group lets in", address, errdefs.ErrPermissionDenied)
	case err != nil:
		return fmt.Errorf("containerd socket %s: %w", address, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%s is not a socket: %w; point --address / CONTAINERD_ADDRESS at containerd's socket", address, errdefs.ErrInvalidArgument)
	}
	f, err := os.OpenFile(address, os.O_RDWR, 0)
	if err == nil {
		f.Close()
	}
	// Opening a socket fails with ENXIO; only a permission fault matters here.
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("containerd socket %s: permission denied: %w; run as root or as a user the socket's group lets in", address, errdefs.ErrPermissionDenied)
	}
	return nil
}

package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Netns is a network namespace made for one sandbox: nothing in it but
// its loopback, up, and on it a listener that the server holds (the
// proxy's). A socket stays in the namespace it was made in, so the server
// serves the sandbox from its own namespace, and the sandbox, which has
// no other interface and no route, can reach nothing else: no resolver,
// no address, no UDP.
type Netns struct {
	// Path is the namespace's bind mount, for the sandbox's OCI spec
	// (a network namespace with this path).
	Path string
	// Listener listens on 127.0.0.1 inside the namespace.
	Listener net.Listener
}

// NewNetns makes a network namespace, mounted at dir/netns, with its
// loopback up and a TCP listener on 127.0.0.1 in it. On error nothing is
// left. The caller closes it.
func NewNetns(dir string) (_ *Netns, err error) {
	path := filepath.Join(dir, "netns")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return nil, fmt.Errorf("make the network namespace's mount point: %w", err)
	}
	f.Close()
	n := &Netns{Path: path}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	errc := make(chan error, 1)
	// On a thread of its own, which never serves another goroutine: the
	// thread enters the new namespace, and if it cannot come back it
	// ends with the goroutine (a locked thread does).
	go func() {
		runtime.LockOSThread()
		back, err := n.build()
		if back {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return n, <-errc
}

// build runs on a locked thread: it unshares the thread's network
// namespace, brings its loopback up, opens the listener, mounts the
// namespace at n.Path and goes back to the namespace it came from. back
// says whether it did go back.
func (n *Netns) build() (back bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return true, fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer own.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("make a network namespace: %w", err)
	}
	defer func() {
		if serr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); serr != nil {
			back = false
			err = errors.Join(err, fmt.Errorf("return to the server's network namespace: %w", serr))
		} else {
			back = true
		}
	}()
	if err := loopbackUp(); err != nil {
		return false, err
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return false, fmt.Errorf("listen in the network namespace: %w", err)
	}
	n.Listener = l
	if err := unix.Mount("/proc/thread-self/ns/net", n.Path, "", unix.MS_BIND, ""); err != nil {
		return false, fmt.Errorf("mount the network namespace at %s: %w", n.Path, err)
	}
	return false, nil
}

// loopbackUp sets the IFF_UP flag of this thread's namespace's "lo".
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read the loopback's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	return nil
}

// Close closes the listener and unmounts and removes the namespace's
// mount point; the namespace itself goes once no process is in it. What
// is already gone counts as done.
func (n *Netns) Close() error {
	var errs []error
	if n.Listener != nil {
		if err := n.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := unix.Unmount(n.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmount the network namespace at %s: %w", n.Path, err))
	}
	if err := os.Remove(n.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

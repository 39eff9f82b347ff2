package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"
)

// systemd's readiness protocol (sd_notify(3)): a service of Type=notify
// sends "READY=1" in a datagram to the unix socket $NOTIFY_SOCKET names
// once it serves, and "STOPPING=1" when it begins to stop; "STATUS=..."
// is a line `systemctl status` shows. systemctl start returns only once
// READY=1 came (or fails after TimeoutStartSec=), so a unit that starts
// after this one finds it ready.

// readyRetry is how long the readiness watch waits between checks that
// failed at once (containerd not answering, say); a check that waits for
// a preparation under way waits up to healthTimeout itself. A variable
// for the tests.
var readyRetry = time.Second

// sdNotifier sends states to systemd's notification socket.
type sdNotifier struct {
	addr *net.UnixAddr
}

// newSDNotifier returns the notifier of $NOTIFY_SOCKET, nil if it is
// unset: then the server was not started by systemd as Type=notify, and
// nothing is sent. A name starting with "@" is an abstract socket, which
// Go's net package takes as written.
func newSDNotifier(env lookupFunc) *sdNotifier {
	path, _ := env("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	return &sdNotifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

// send sends state (lines such as "READY=1") in one datagram; a nil
// notifier sends nothing.
func (n *sdNotifier) send(state string) error {
	if n == nil {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// notifySystemd tells systemd, if it started the server as Type=notify
// (env has NOTIFY_SOCKET), READY=1 once ready, the check /healthz makes,
// first passes, with STATUS= lines saying why it is not ready until then,
// and STOPPING=1 once ctx is cancelled (the shutdown begins) or the
// returned stop is called; stop waits for that. Without NOTIFY_SOCKET it
// does nothing.
func notifySystemd(ctx context.Context, env lookupFunc, ready func(context.Context) error, logger *slog.Logger) (stop func()) {
	n := newSDNotifier(env)
	if n == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		say := func(state string) {
			if err := n.send(state); err != nil {
				logger.Warn("telling systemd", "state", state, "err", err)
			}
		}
		if waitReady(ctx, ready, func(err error) { say("STATUS=not ready: " + notReadyReason(err)) }) {
			say("READY=1\nSTATUS=ready")
			logger.Info("told systemd the server is ready")
		}
		<-ctx.Done()
		say("STOPPING=1\nSTATUS=shutting down")
	}()
	return func() {
		cancel()
		<-done
	}
}

// waitReady checks ready until it passes, each check within
// healthTimeout, and reports whether it did before ctx ended; notReady
// is told of each new reason a check failed for.
func waitReady(ctx context.Context, ready func(context.Context) error, notReady func(error)) bool {
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, healthTimeout)
		err := ready(cctx)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil || errors.Is(err, errShuttingDown) {
			return false
		}
		if r := notReadyReason(err); r != last {
			last = r
			notReady(err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(readyRetry):
		}
	}
}

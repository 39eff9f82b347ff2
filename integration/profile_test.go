package integration

// The suite's profile: which test made how many sandboxes. Under
// SANDBOX_PROFILE_EVENTS=FILE the harness appends a line to FILE for every
// container created in testNamespace on the run's shared daemon;
// integration/profile counts them per test from the test's start and
// end, as go test -json (go tool test2json -t) reports them. scripts/integration
// sets it under INTEGRATION_PROFILE. The fault tests' own daemons are not
// watched: their sandboxes are not counted.

import (
	"context"
	"fmt"
	"os"
	"strconv"

	apievents "github.com/containerd/containerd/api/events"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
)

// recordCreates appends "UNIXNANO ID" to path for each container created in
// testNamespace on client's daemon, until ctx ends. The subscription is
// made in the background: the harness calls it before it imports the
// images, well before the first test. A failure is said on stderr, and the
// profile is then short.
func recordCreates(ctx context.Context, client *containerd.Client, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	evs, errs := client.Subscribe(ctx, `topic=="/containers/create",namespace==`+strconv.Quote(testNamespace))
	go func() {
		defer f.Close()
		for {
			select {
			case ev := <-evs:
				v, err := typeurl.UnmarshalAny(ev.Event)
				if err != nil {
					continue
				}
				if c, ok := v.(*apievents.ContainerCreate); ok {
					fmt.Fprintf(f, "%d %s\n", ev.Timestamp.UnixNano(), c.ID)
				}
			case err := <-errs:
				if err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "integration: profile: the daemon's events ended: %v\n", err)
				}
				return
			}
		}
	}()
	return nil
}

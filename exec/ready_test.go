package exec

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// TestReadyClosed checks that a closed executor is not ready, and asks
// containerd nothing (its client is nil here): a health check during
// shutdown must say so at once. The ready path itself needs containerd,
// and is tested over HTTP's /healthz by the integration suite.
func TestReadyClosed(t *testing.T) {
	closing, cancel := context.WithCancel(context.Background())
	cancel()
	e := &Executor{closing: closing, close: cancel}
	err := e.Ready(context.Background())
	if err == nil || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Ready of a closed executor = %v; want an unavailable error that says it is closed", err)
	}
}

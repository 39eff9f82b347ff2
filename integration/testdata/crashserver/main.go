// Command crashserver starts one long run through the executor, with a
// pool of one ready sandbox, and waits to be killed, as a server that
// crashes mid-run would be. The orphan sweep test kills it with SIGKILL and
// checks that the next executor reaps what it left: the running sandbox
// and the ready one.
//
// Usage: crashserver ADDRESS NAMESPACE STATE_DIR IMAGE UID_LOCK_DIR UID_RANGE
//
// Its sandboxes run on the harness's runtime knobs, from the environment
// it inherits: SANDBOX_TEST_RUNTIME_BINARY and SANDBOX_TEST_CGROUP_DRIVER
// (see package integration).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func main() {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: crashserver ADDRESS NAMESPACE STATE_DIR IMAGE UID_LOCK_DIR UID_RANGE")
		os.Exit(2)
	}
	uids, err := config.ParseUIDRange(os.Args[6])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	e, err := exec.New(ctx, exec.Config{
		Address:    os.Args[1],
		Namespace:  os.Args[2],
		StateDir:   os.Args[3],
		UIDLockDir: os.Args[5],
		UIDs:       uids,
		Languages: []config.Language{{
			Name:    "python",
			Image:   os.Args[4],
			Command: []string{"python3"},
			File:    "main.py",
			Pool:    1,
			// The harness checked them (SANDBOX_TEST_*).
			RuntimeBinary: os.Getenv("SANDBOX_TEST_RUNTIME_BINARY"),
			CgroupDriver:  os.Getenv("SANDBOX_TEST_CGROUP_DRIVER"),
			Limits: config.Limits{
				MemoryBytes: 128 << 20, CPUs: 1, Pids: 64, TmpBytes: 1 << 20, ShmBytes: 1 << 20,
				FileBytes: 1 << 20, OpenFiles: 64, Timeout: 10 * time.Minute, MaxTimeout: 10 * time.Minute, MaxTaskTimeout: 10 * time.Minute,
				OutputBytes: 1024, CodeBytes: 1024,
				PendingSignals: 64, MsgQueueBytes: 64 << 10, LockedBytes: 0, Ptys: 0,
				WorkspaceBytes: 1 << 20,
			},
		}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := e.Prepare(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = e.Run(ctx, exec.Request{Language: "python", Code: "import time\ntime.sleep(600)\n"})
	fmt.Fprintln(os.Stderr, "run ended before the kill:", err)
	os.Exit(1)
}

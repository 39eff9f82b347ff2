package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"code-sandbox-mcp/config"
)

// testUIDs is the range the tests' sandboxes run as: apart from the
// default range, so that a server running on this host never holds a uid
// a test's sandbox runs as, nor the other way round. SANDBOX_TEST_UIDS
// sets another, for a run beside this one.
var testUIDs = config.UIDRange{First: 2100000000, Last: 2100065535}

// testUIDLockDir is the uid claims directory of every executor and server
// on the shared daemon; fault tests' private daemons have their own.
func testUIDLockDir() string { return filepath.Join(testDir, "uids") }

// withUIDs returns cfg, a TOML file that starts with its [sandbox] table,
// with uid_lock_dir set to lockDir and [limits] uid_range to testUIDs.
func withUIDs(cfg, lockDir string) string {
	const sandbox = "[sandbox]\n"
	if !strings.HasPrefix(cfg, sandbox) {
		panic("withUIDs: the config does not start with [sandbox]: " + cfg)
	}
	cfg = fmt.Sprintf("%suid_lock_dir = %q\n%s", sandbox, lockDir, strings.TrimPrefix(cfg, sandbox))
	rangeLine := fmt.Sprintf("uid_range = %q\n", testUIDs.String())
	if i := strings.Index(cfg, "\n[limits]\n"); i >= 0 {
		at := i + len("\n[limits]\n")
		return cfg[:at] + rangeLine + cfg[at:]
	}
	return cfg + "\n[limits]\n" + rangeLine
}

// heldUIDClaims lists the claim files in dir that some process still
// holds locked: a sandbox not deleted, or an executor not closed.
func heldUIDClaims(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var held []string
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == unix.EWOULDBLOCK {
			b, _ := os.ReadFile(f.Name())
			held = append(held, e.Name()+": "+strings.TrimSpace(string(b)))
		}
		f.Close()
	}
	return held, nil
}

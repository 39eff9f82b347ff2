package exec

import (
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/sandbox"
	"code-sandbox-mcp/exec/internal/uid"
	"code-sandbox-mcp/oci"

	"code-sandbox-mcp/exec/internal/workspace"
)

// Request is one program to run.
type Request struct {
	Language string
	Code     string
	// Timeout overrides the language's default; zero keeps it. It may not
	// exceed the language's Limits.RunCap (its MaxTaskTimeout): which cap
	// a call gets is its caller's to check.
	Timeout time.Duration
	// Files are written under the workspace (oci.WorkspaceDir), which is
	// the program's working directory, before it starts. Run refuses a
	// bad path (see CheckFile), a duplicate, a path that is also another's
	// directory, and more than the language's MaxFilesIn or FilesInBytes.
	Files []File
	// Session, if set, runs Code as the next cell of that session of
	// Owner's (see CreateSession) instead of in a sandbox of its own.
	Session string
	Owner   string
	// Output, if set, is told the program's output as it is read: stream
	// is "stdout" or "stderr", and p is valid only during the call (copy
	// it). It is called from the goroutines that read the output, for
	// one-shot runs and session cells alike, and must not block them for
	// long. nil streams nothing; the Result holds the output either way.
	Output func(stream string, p []byte)
}

// File is a file in a run's workspace: a Path relative to it,
// slash-separated and clean (see CheckFile), and its Data.
type File = workspace.File

// Result is what one run did: see sandbox.Result.
type Result = sandbox.Result

// NetworkRecord is one connection a run opened through its sandbox's
// proxy: see sandbox.NetworkRecord.
type NetworkRecord = sandbox.NetworkRecord

// NetworkTally sums a run's connections of one host and verdict past
// those it lists one by one: see sandbox.NetworkTally.
type NetworkTally = sandbox.NetworkTally

// SessionResult is what a run in a session adds to its Result: see
// sandbox.SessionResult.
type SessionResult = sandbox.SessionResult

// CheckFile reports what is wrong with p as the path of a file in a
// run's workspace, or nil: see File.
func CheckFile(p string) error {
	return workspace.CheckFile(p)
}

// ErrNoUID marks the error of a run that found no free uid in the range:
// more sandboxes live at once than [limits] uid_range holds, or its uids
// used by host processes. It is an errdefs.ErrResourceExhausted.
var ErrNoUID = uid.ErrNoneFree

// UIDStatus checks range r as a server would at its start (clear of the
// host's accounts and subordinate ranges, its claims directory usable),
// and counts the uids of r that live sandboxes hold in dir now, this
// host's servers and commands together.
func UIDStatus(r config.UIDRange, dir string) (held int, err error) {
	return uid.Status(r, dir)
}

// CheckInit checks that path (sandbox.DefaultInit if empty) is an init
// every sandbox can run as its pid 1, and returns the path: see Config.Init.
func CheckInit(path string) (string, error) { return sandbox.CheckInit(path) }

// SandboxPolicy is the policy every sandbox of l gets, minus what only a
// run knows (see sandbox.Described): generate its spec with oci.Generate
// to read what a run's enforces.
func SandboxPolicy(l config.Language) oci.Policy {
	return sandbox.Described(l)
}

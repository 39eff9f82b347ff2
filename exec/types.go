package exec

import (
	"time"

	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec/internal/uid"

	"code-sandbox-mcp/exec/internal/workspace"
)

// Request is one program to run.
type Request struct {
	Language string
	Code     string
	// Timeout overrides the language's default; zero keeps it. It may not
	// exceed the language's Limits.MaxTimeout.
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
}

// File is a file in a run's workspace: a Path relative to it,
// slash-separated and clean (see CheckFile), and its Data.
type File = workspace.File

// Result is what one run did.
type Result struct {
	Language string
	Image    string
	// ImageDigest is the digest of the image's manifest (or index) the
	// sandbox was made from, such as "sha256:…".
	ImageDigest string
	Stdout      []byte
	Stderr      []byte
	// StdoutDropped and StderrDropped count the bytes left out of the
	// middle of a stream that outgrew the language's Limits.OutputBytes. When bytes were
	// dropped, the stream kept is its first OutputBytes/2 bytes followed by
	// its last OutputBytes-OutputBytes/2: the cut is at OutputBytes/2.
	StdoutDropped int64
	StderrDropped int64
	// ExitCode is the program's exit status as containerd reports it: for
	// a program killed by signal N it is 128+N, and Signal names N (such as
	// "SIGKILL").
	ExitCode int
	Signal   string
	// SignalUnknown is set when ExitCode is 129 to 192, Signal is empty,
	// and the kernel's word on how the process ended is missing (see
	// exitWatch): the status may be a signal's 128+N or the program's own.
	SignalUnknown bool
	TimedOut      bool
	OOMKilled     bool
	// Warm is set when the program ran in a warm ready sandbox: its
	// interpreter was started, and perhaps its preloads imported, before
	// the program came (see config.Language.Warm).
	Warm bool
	// Timeout is the wall-clock limit the run had; Duration how long the
	// program ran, from its start to its exit.
	Timeout  time.Duration
	Duration time.Duration
	// Files are the output files: every regular file under the workspace
	// that is new or changed when the program ended (however it ended),
	// in path order, numbers in names compared as numbers, within the
	// language's MaxFilesOut and FilesOutBytes. FilesDropped counts those
	// left out: past a cap, or with a name that is not printable UTF-8.
	Files        []File
	FilesDropped int
	// Session is set for a run in a session.
	Session *SessionResult
}

// Failed reports whether the program did not finish cleanly.
func (r *Result) Failed() bool {
	return r.ExitCode != 0 || r.TimedOut || r.OOMKilled
}

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

package sandbox

import (
	"time"

	"code-sandbox-mcp/exec/internal/workspace"
)

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
	// watch.Exit): the status may be a signal's 128+N or the program's own.
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
	Files        []workspace.File
	FilesDropped int
	// Network lists the connections the run opened through its proxy,
	// allowed or refused, in the order they ended; nil for a language
	// with no network. A session's cell lists those that ended while it
	// ran, or before it and after the previous cell's result.
	Network []NetworkRecord
	// NetworkRest sums, per host and verdict, the connections past the
	// first ones (config.Network.MaxRecords) that Network lists; nil if
	// there were none past them.
	NetworkRest []NetworkTally
	// Session is set for a run in a session.
	Session *SessionResult
}

// Failed reports whether the program did not finish cleanly.
func (r *Result) Failed() bool {
	return r.ExitCode != 0 || r.TimedOut || r.OOMKilled
}

// SessionResult is what a run in a session adds to its Result.
type SessionResult struct {
	ID string
	// ExecutionCount is the cell's number in its session, from 1.
	ExecutionCount int
	// ExpiresAt is the session's renewed expiry; for a session that
	// ended with the call, when it ended.
	ExpiresAt time.Time
	// Interrupted says the cell was interrupted (at its timeout, or
	// because its call was cancelled) and the interpreter came back: the
	// session lives on, with its state.
	Interrupted bool
	// Ended says why the session ended with this call (the interpreter
	// crashed, exited, ran out of memory, or ignored its interrupt); ""
	// if it lives on.
	Ended string
	// BackgroundOOMKills counts the processes that the kernel's OOM
	// killer killed in the session's sandbox after its previous result
	// (a call cancelled has none) and before this cell began: processes
	// an earlier cell left running, killed while no cell ran; the
	// interpreter was not among them, or the session would have ended
	// then. A kill while the cell ran is the cell's (Result.OOMKilled).
	BackgroundOOMKills int
}

package exec

import (
	"time"
)

// Language is how one language's programs are run.
type Language struct {
	// Name is the language's key, such as "python".
	Name string
	// Image is the image reference, as named in containerd's image store.
	Image string
	// Command is the interpreter's argv; the program's path is appended.
	Command []string
	// File is the program's file name inside the sandbox, such as "main.py".
	File string
	// Env is added to the image's own environment.
	Env []string
	// Runtime is the containerd runtime; empty means the daemon's default.
	Runtime string
	// Pool is how many sandboxes are kept created and waiting for a
	// program, started ahead on oci.StubScript where the image allows;
	// 0 creates each on demand.
	Pool int
	// Limits confine each run.
	Limits Limits
}

// Limits confine one run.
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int64
	TmpBytes    int64
	ShmBytes    int64
	// FileBytes caps the size of any one file the program writes (RLIMIT_FSIZE).
	FileBytes int64
	// OpenFiles caps open file descriptors (RLIMIT_NOFILE).
	OpenFiles uint64
	// Timeout is the default wall-clock limit; MaxTimeout bounds what a
	// request may ask for.
	Timeout    time.Duration
	MaxTimeout time.Duration
	// OutputBytes is how much of each stream is kept: its head and its tail,
	// half each.
	OutputBytes int
	// CodeBytes is the largest program accepted.
	CodeBytes int
	// UID and GID the program runs as.
	UID, GID uint32
}

// Request is one program to run.
type Request struct {
	Language string
	Code     string
	// Timeout overrides the language's default; zero keeps it. It may not
	// exceed Limits.MaxTimeout.
	Timeout time.Duration
}

// Result is what one run did.
type Result struct {
	Language string
	Image    string
	Stdout   []byte
	Stderr   []byte
	// StdoutDropped and StderrDropped count the bytes left out of the
	// middle of a stream that outgrew Limits.OutputBytes. When bytes were
	// dropped, the stream kept is its first OutputBytes/2 bytes followed by
	// its last OutputBytes-OutputBytes/2: the cut is at OutputBytes/2.
	StdoutDropped int64
	StderrDropped int64
	// ExitCode is the program's exit status as containerd reports it: for
	// a program killed by signal N it is 128+N, and Signal names N (such as
	// "SIGKILL").
	ExitCode  int
	Signal    string
	TimedOut  bool
	OOMKilled bool
	// Timeout is the wall-clock limit the run had; Duration how long the
	// program ran, from its start to its exit.
	Timeout  time.Duration
	Duration time.Duration
}

// Failed reports whether the program did not finish cleanly.
func (r *Result) Failed() bool {
	return r.ExitCode != 0 || r.TimedOut || r.OOMKilled
}

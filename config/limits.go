package config

import (
	"errors"
	"time"
)

// Limits confine one run.
type Limits struct {
	// MemoryBytes is the memory cgroup limit; swap on top of it is none.
	MemoryBytes int64
	// CPUs is the CFS quota in CPUs.
	CPUs float64
	// Pids is the pids cgroup limit.
	Pids int64
	// TmpBytes sizes the tmpfs at /tmp, ShmBytes the one at /dev/shm.
	TmpBytes int64
	ShmBytes int64
	// FileBytes caps the size of any one file the program writes
	// (RLIMIT_FSIZE).
	FileBytes int64
	// OpenFiles caps open file descriptors (RLIMIT_NOFILE).
	OpenFiles uint64
	// Timeout is the default wall-clock limit; MaxTimeout bounds what a
	// plain call may ask for, MaxTaskTimeout what a call run as an MCP
	// task may (see RunCap).
	Timeout        time.Duration
	MaxTimeout     time.Duration
	MaxTaskTimeout time.Duration
	// OutputBytes is how much of each stream is kept: its head and its
	// tail, half each.
	OutputBytes int64
	// CodeBytes is the largest program accepted.
	CodeBytes int64
	// PendingSignals caps signals queued to the run's processes
	// (RLIMIT_SIGPENDING), MsgQueueBytes its POSIX message queues
	// (RLIMIT_MSGQUEUE), LockedBytes its locked memory (RLIMIT_MEMLOCK).
	PendingSignals uint64
	MsgQueueBytes  int64
	LockedBytes    int64
	// Ptys is how many pseudo-terminals the run may open; 0 gives it no
	// /dev/pts.
	Ptys int
	// WorkspaceBytes sizes the run's /workspace, a tmpfs that is its
	// working directory; its inodes are bounded in proportion.
	WorkspaceBytes int64
	// FilesInBytes caps the decoded total of the files a call writes into
	// the workspace, MaxFilesIn their number.
	FilesInBytes int64
	MaxFilesIn   int
	// FilesOutBytes caps the total of the output files returned,
	// MaxFilesOut their number; files past either are dropped and counted.
	FilesOutBytes int64
	MaxFilesOut   int
	// MaxImages caps the images returned inline, each at most ImageBytes;
	// the rest are links only.
	MaxImages  int
	ImageBytes int64
}

// LimitsTable is the [limits] table, and each language's limits once its
// overrides are applied, as the file spells them; Limits is what the rest
// of the program reads.
type LimitsTable struct {
	Memory     Size     `toml:"memory"`
	CPUs       float64  `toml:"cpus"`
	Pids       int64    `toml:"pids"`
	TmpSize    Size     `toml:"tmp_size"`
	ShmSize    Size     `toml:"shm_size"`
	FileSize   Size     `toml:"file_size"`
	OpenFiles  uint64   `toml:"open_files"`
	Timeout    Duration `toml:"timeout"`
	MaxTimeout Duration `toml:"max_timeout"`
	// MaxTaskTimeout bounds the timeout_seconds of a call run as an MCP
	// task, whose client polls for its end instead of holding a request
	// open; it is at least MaxTimeout.
	MaxTaskTimeout Duration `toml:"max_task_timeout"`
	OutputBytes    Size     `toml:"output_bytes"`
	CodeBytes      Size     `toml:"code_bytes"`
	// PendingSignals, MsgQueueSize and LockedMemory are the rlimits
	// RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE and RLIMIT_MEMLOCK.
	PendingSignals uint64 `toml:"pending_signals"`
	MsgQueueSize   Size   `toml:"msgqueue_size"`
	LockedMemory   Size   `toml:"locked_memory"`
	// Ptys is how many pseudo-terminals a run may hold; 0 gives it no
	// /dev/pts at all.
	Ptys int `toml:"ptys"`
	// WorkspaceSize sizes the run's /workspace; FilesInBytes and
	// MaxFilesIn cap the files a call writes there, FilesOutBytes and
	// MaxFilesOut the files it gets back; MaxImages and ImageBytes cap the
	// images among those returned inline.
	WorkspaceSize Size `toml:"workspace_size"`
	FilesInBytes  Size `toml:"files_in_bytes"`
	MaxFilesIn    int  `toml:"max_files_in"`
	FilesOutBytes Size `toml:"files_out_bytes"`
	MaxFilesOut   int  `toml:"max_files_out"`
	MaxImages     int  `toml:"max_images"`
	ImageBytes    Size `toml:"image_bytes"`
	// UIDRange is the host uids (and gids) the sandboxes are given, one
	// each, as "FIRST-LAST". It is read from [limits] only: the range is
	// the server's, not a language's.
	UIDRange string `toml:"uid_range"`
}

// LimitOverrides are one language's changes to [limits]; a nil field keeps
// the global value.
type LimitOverrides struct {
	Memory      *Size     `toml:"memory"`
	CPUs        *float64  `toml:"cpus"`
	Pids        *int64    `toml:"pids"`
	TmpSize     *Size     `toml:"tmp_size"`
	ShmSize     *Size     `toml:"shm_size"`
	FileSize    *Size     `toml:"file_size"`
	OpenFiles   *uint64   `toml:"open_files"`
	Timeout     *Duration `toml:"timeout"`
	MaxTimeout  *Duration `toml:"max_timeout"`
	OutputBytes *Size     `toml:"output_bytes"`
	CodeBytes   *Size     `toml:"code_bytes"`

	MaxTaskTimeout *Duration `toml:"max_task_timeout"`

	PendingSignals *uint64 `toml:"pending_signals"`
	MsgQueueSize   *Size   `toml:"msgqueue_size"`
	LockedMemory   *Size   `toml:"locked_memory"`
	Ptys           *int    `toml:"ptys"`

	WorkspaceSize *Size `toml:"workspace_size"`
	FilesInBytes  *Size `toml:"files_in_bytes"`
	MaxFilesIn    *int  `toml:"max_files_in"`
	FilesOutBytes *Size `toml:"files_out_bytes"`
	MaxFilesOut   *int  `toml:"max_files_out"`
	MaxImages     *int  `toml:"max_images"`
	ImageBytes    *Size `toml:"image_bytes"`
}

// apply returns l with o's set fields replacing l's.
func (o LimitOverrides) apply(l LimitsTable) LimitsTable {
	if o.Memory != nil {
		l.Memory = *o.Memory
	}
	if o.CPUs != nil {
		l.CPUs = *o.CPUs
	}
	if o.Pids != nil {
		l.Pids = *o.Pids
	}
	if o.TmpSize != nil {
		l.TmpSize = *o.TmpSize
	}
	if o.ShmSize != nil {
		l.ShmSize = *o.ShmSize
	}
	if o.FileSize != nil {
		l.FileSize = *o.FileSize
	}
	if o.OpenFiles != nil {
		l.OpenFiles = *o.OpenFiles
	}
	if o.Timeout != nil {
		l.Timeout = *o.Timeout
	}
	if o.MaxTimeout != nil {
		l.MaxTimeout = *o.MaxTimeout
	}
	if o.MaxTaskTimeout != nil {
		l.MaxTaskTimeout = *o.MaxTaskTimeout
	}
	if o.OutputBytes != nil {
		l.OutputBytes = *o.OutputBytes
	}
	if o.CodeBytes != nil {
		l.CodeBytes = *o.CodeBytes
	}
	if o.PendingSignals != nil {
		l.PendingSignals = *o.PendingSignals
	}
	if o.MsgQueueSize != nil {
		l.MsgQueueSize = *o.MsgQueueSize
	}
	if o.LockedMemory != nil {
		l.LockedMemory = *o.LockedMemory
	}
	if o.Ptys != nil {
		l.Ptys = *o.Ptys
	}
	for _, f := range []struct {
		from *Size
		to   *Size
	}{{o.WorkspaceSize, &l.WorkspaceSize}, {o.FilesInBytes, &l.FilesInBytes}, {o.FilesOutBytes, &l.FilesOutBytes}, {o.ImageBytes, &l.ImageBytes}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	for _, f := range []struct {
		from *int
		to   *int
	}{{o.MaxFilesIn, &l.MaxFilesIn}, {o.MaxFilesOut, &l.MaxFilesOut}, {o.MaxImages, &l.MaxImages}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return l
}

// limitsFor returns the limits a language's runs get: [limits] with the
// language's overrides applied.
func (c *Config) limitsFor(name string) LimitsTable {
	return c.Languages[name].Limits.apply(c.Limits)
}

// limits is t as the rest of the program reads it.
func (t LimitsTable) limits() Limits {
	return Limits{
		MemoryBytes:    int64(t.Memory),
		CPUs:           t.CPUs,
		Pids:           t.Pids,
		TmpBytes:       int64(t.TmpSize),
		ShmBytes:       int64(t.ShmSize),
		FileBytes:      int64(t.FileSize),
		OpenFiles:      t.OpenFiles,
		Timeout:        time.Duration(t.Timeout),
		MaxTimeout:     time.Duration(t.MaxTimeout),
		MaxTaskTimeout: time.Duration(t.MaxTaskTimeout),
		OutputBytes:    int64(t.OutputBytes),
		CodeBytes:      int64(t.CodeBytes),
		PendingSignals: t.PendingSignals,
		MsgQueueBytes:  int64(t.MsgQueueSize),
		LockedBytes:    int64(t.LockedMemory),
		Ptys:           t.Ptys,
		WorkspaceBytes: int64(t.WorkspaceSize),
		FilesInBytes:   int64(t.FilesInBytes),
		MaxFilesIn:     t.MaxFilesIn,
		FilesOutBytes:  int64(t.FilesOutBytes),
		MaxFilesOut:    t.MaxFilesOut,
		MaxImages:      t.MaxImages,
		ImageBytes:     int64(t.ImageBytes),
	}
}

// maxTaskTimeout bounds [limits] max_task_timeout: a sandbox holds a host
// uid, a shim and its memory for as long as its run may last.
const maxTaskTimeout = 24 * time.Hour

// RunCap is the longest timeout any call may ask for: MaxTaskTimeout, or
// MaxTimeout where that is more (or MaxTaskTimeout is not set, as in
// Limits a test builds). The executor bounds a request's timeout by it;
// which of the two a call gets is the MCP server's choice.
func (l Limits) RunCap() time.Duration {
	return max(l.MaxTimeout, l.MaxTaskTimeout)
}

// maxPtys bounds a run's pseudo-terminals: the kernel's kernel.pty.max
// (4096 by default, 1024 of them kept for the host's own /dev/pts) is
// shared by every container on the host.
const maxPtys = 64

// maxFiles bounds the counts of files in and out, and of images, per run.
const maxFiles = 10000

// minWorkspace is the least size of a run's /workspace.
const minWorkspace = 1 << 20

// minMemory is the least memory limit runc can start a container with,
// with room for an interpreter.
const minMemory = 8 << 20

// Check reports every limit in l that no sandbox can be made with: a
// resource left unbounded, a cap below what a run needs or past what the
// server holds for it. Each error names its key beneath key as the
// configuration file spells it, such as "limits.memory". The
// configuration checks [limits] and each language's limits with it (and
// how the caps on files stand to each other, which a sandbox does not
// need), and package oci a policy's.
func (l Limits) Check(key string) error {
	return errors.Join(l.check(key, false)...)
}

// check is Check; with caps, it also checks that files_in_bytes fits in
// workspace_size and image_bytes in files_out_bytes.
func (l Limits) check(key string, caps bool) []error {
	var errs []error
	bad := reporter(&errs, key+".")
	positive := func(k string, n int64) {
		if n <= 0 {
			bad(k, "must be greater than 0")
		}
	}
	if l.MemoryBytes < minMemory {
		bad("memory", "%s is too small; want at least %s", Size(l.MemoryBytes), Size(minMemory))
	}
	if l.CPUs <= 0 {
		bad("cpus", "%g must be greater than 0", l.CPUs)
	}
	if l.Pids <= 0 {
		bad("pids", "%d must be greater than 0", l.Pids)
	}
	positive("tmp_size", l.TmpBytes)
	positive("shm_size", l.ShmBytes)
	positive("file_size", l.FileBytes)
	if l.OpenFiles == 0 {
		bad("open_files", "must be greater than 0")
	}
	if l.Timeout <= 0 {
		bad("timeout", "%s must be greater than 0", Duration(l.Timeout))
	}
	if l.MaxTimeout <= 0 {
		bad("max_timeout", "%s must be greater than 0", Duration(l.MaxTimeout))
	}
	if l.Timeout > l.MaxTimeout {
		bad("timeout", "%s is more than max_timeout (%s)", Duration(l.Timeout), Duration(l.MaxTimeout))
	}
	switch {
	case l.MaxTaskTimeout < l.MaxTimeout:
		bad("max_task_timeout", "%s is less than max_timeout (%s): a call run as a task may ask for at least what a plain call may; raise it, or lower max_timeout",
			Duration(l.MaxTaskTimeout), Duration(l.MaxTimeout))
	case l.MaxTaskTimeout > maxTaskTimeout:
		bad("max_task_timeout", "%s is more than %s, the longest a sandbox is allowed to live", Duration(l.MaxTaskTimeout), Duration(maxTaskTimeout))
	}
	positive("output_bytes", l.OutputBytes)
	if l.OutputBytes > 1<<30 {
		bad("output_bytes", "%s is more than 1GiB", Size(l.OutputBytes))
	}
	positive("code_bytes", l.CodeBytes)
	if l.CodeBytes > 1<<30 {
		bad("code_bytes", "%s is more than 1GiB", Size(l.CodeBytes))
	}
	if l.PendingSignals == 0 {
		bad("pending_signals", "must be greater than 0")
	}
	positive("msgqueue_size", l.MsgQueueBytes)
	if l.LockedBytes < 0 {
		bad("locked_memory", "must not be negative")
	}
	if l.Ptys < 0 || l.Ptys > maxPtys {
		bad("ptys", "%d; want 0 (no /dev/pts) to %d", l.Ptys, maxPtys)
	}
	if l.WorkspaceBytes < minWorkspace {
		bad("workspace_size", "%s is too small; want at least %s", Size(l.WorkspaceBytes), Size(minWorkspace))
	}
	if l.FilesInBytes < 0 || caps && l.FilesInBytes > l.WorkspaceBytes {
		bad("files_in_bytes", "%s; want 0 (no files in) to workspace_size (%s)", Size(l.FilesInBytes), Size(l.WorkspaceBytes))
	}
	if l.FilesOutBytes < 0 || l.FilesOutBytes > 1<<30 {
		bad("files_out_bytes", "%s; want 0 (no files back) to 1GiB", Size(l.FilesOutBytes))
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"max_files_in", l.MaxFilesIn}, {"max_files_out", l.MaxFilesOut}, {"max_images", l.MaxImages}} {
		if n.v < 0 || n.v > maxFiles {
			bad(n.key, "%d; want 0 to %d", n.v, maxFiles)
		}
	}
	if l.ImageBytes < 0 || caps && l.ImageBytes > l.FilesOutBytes {
		bad("image_bytes", "%s; want 0 to files_out_bytes (%s)", Size(l.ImageBytes), Size(l.FilesOutBytes))
	}
	return errs
}

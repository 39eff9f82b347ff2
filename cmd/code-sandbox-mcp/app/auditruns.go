package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/exec"
)

// digest is a file's or the code's hash and size; Text is the code itself
// with include_code.
type digest struct {
	Path   string  `json:"path,omitempty"`
	SHA256 string  `json:"sha256"`
	Size   int     `json:"size"`
	Text   *string `json:"text,omitempty"`
}

func digestOf(path string, data []byte) digest {
	sum := sha256.Sum256(data)
	return digest{Path: path, SHA256: hex.EncodeToString(sum[:]), Size: len(data)}
}

// digests are files' digests, never nil, so that none is written [].
func digests(files []exec.File) []digest {
	d := make([]digest, 0, len(files))
	for _, f := range files {
		d = append(d, digestOf(f.Path, f.Data))
	}
	return d
}

// runLimits are the limits a run was given.
type runLimits struct {
	TimeoutSeconds float64 `json:"timeout_seconds"`
	MemoryBytes    int64   `json:"memory_bytes"`
	CPUs           float64 `json:"cpus"`
	Pids           int64   `json:"pids"`
	FileBytes      int64   `json:"file_bytes"`
	OpenFiles      uint64  `json:"open_files"`
	OutputBytes    int64   `json:"output_bytes"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
	FilesInBytes   int64   `json:"files_in_bytes"`
	FilesOutBytes  int64   `json:"files_out_bytes"`
	MaxFilesOut    int     `json:"max_files_out"`
}

// runFields are what run_started and run_ended both say of a run.
type runFields struct {
	RunID     string `json:"run_id"`
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Language  string `json:"language"`
	Image     string `json:"image"`
	Session   string `json:"session,omitempty"`
	// Task is the MCP task the run is the call of, if it is one.
	Task    string    `json:"task,omitempty"`
	Code    digest    `json:"code"`
	FilesIn []digest  `json:"files_in"`
	Limits  runLimits `json:"limits"`
}

// runOutcome is how a program that ran ended.
type runOutcome struct {
	ExitCode             int    `json:"exit_code"`
	Signal               string `json:"signal,omitempty"`
	TimedOut             bool   `json:"timed_out"`
	OOMKilled            bool   `json:"oom_killed"`
	DurationMs           int64  `json:"duration_ms"`
	StdoutBytes          int64  `json:"stdout_bytes"`
	StderrBytes          int64  `json:"stderr_bytes"`
	StdoutTruncatedBytes int64  `json:"stdout_truncated_bytes"`
	StderrTruncatedBytes int64  `json:"stderr_truncated_bytes"`
	FilesDropped         int    `json:"files_dropped"`
}

// runError is the outcome of a run that could not run (or whose call was
// cancelled before it ended).
type runError struct {
	Error      string `json:"error"`
	DurationMs int64  `json:"duration_ms"`
}

// runEnded is run_ended's fields.
type runEnded struct {
	runFields
	ImageDigest    string   `json:"image_digest"`
	ExecutionCount int      `json:"execution_count,omitempty"`
	SessionEnded   string   `json:"session_ended,omitempty"`
	FilesOut       []digest `json:"files_out"`
	// Network lists the run's connections through its sandbox's proxy,
	// as its result does; left out for a language with no network.
	Network     []mcpserver.Connection `json:"network,omitzero"`
	NetworkRest []exec.NetworkTally    `json:"network_rest,omitempty"`
	Outcome     any                    `json:"outcome"`
}

// wrapRun returns run, recording each run before it starts and after it
// ends; principal names the caller (nil: "local").
//
// A run whose run_started cannot be written is refused: the server runs
// nothing it cannot record (fail closed). A run_ended that cannot be
// written is logged at error level and the result is returned all the
// same: the program has run, withholding its result would not undo that,
// and its run_started, on disk, shows it did.
func (a *auditor) wrapRun(run mcpserver.RunFunc, principal func(context.Context) string) mcpserver.RunFunc {
	if a == nil {
		return run
	}
	return func(ctx context.Context, req exec.Request) (*exec.Result, error) {
		f := a.runFields(principalName(ctx, principal), req)
		f.Task = mcpserver.TaskID(ctx)
		started := f
		if a.includeCode {
			code := req.Code
			started.Code.Text = &code
		}
		a.begin()
		defer a.end()
		if err := a.log.Write(eventRunStarted, started); err != nil {
			a.logger.Error("the audit log cannot be written; refusing the run", "path", a.path, "err", err)
			return nil, notRecorded(err)
		}
		begun := time.Now()
		res, err := run(ctx, req)
		a.write(eventRunEnded, ended(f, res, err, time.Since(begun)))
		return res, err
	}
}

// runFields describes req, which principal asked for.
func (a *auditor) runFields(principal string, req exec.Request) runFields {
	lang := a.langs[req.Language]
	lim := lang.Limits
	timeout := lim.Timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	return runFields{
		RunID: newRunID(), Principal: principal, Tool: lang.Tool, Language: req.Language, Image: lang.Image,
		Session: req.Session, Code: digestOf("", []byte(req.Code)), FilesIn: digests(req.Files),
		Limits: runLimits{
			TimeoutSeconds: timeout.Seconds(), MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs, Pids: lim.Pids,
			FileBytes: lim.FileBytes, OpenFiles: lim.OpenFiles, OutputBytes: lim.OutputBytes,
			WorkspaceBytes: lim.WorkspaceBytes, FilesInBytes: lim.FilesInBytes,
			FilesOutBytes: lim.FilesOutBytes, MaxFilesOut: lim.MaxFilesOut,
		},
	}
}

// ended is run_ended of the run f, which returned res and err after d.
func ended(f runFields, res *exec.Result, err error, d time.Duration) runEnded {
	e := runEnded{runFields: f, FilesOut: []digest{}}
	if err != nil || res == nil {
		msg := "no result"
		if err != nil {
			msg = err.Error()
		}
		e.Outcome = runError{Error: msg, DurationMs: d.Milliseconds()}
		return e
	}
	if res.Image != "" {
		e.Image = res.Image
	}
	e.ImageDigest = res.ImageDigest
	if s := res.Session; s != nil {
		e.ExecutionCount, e.SessionEnded = s.ExecutionCount, s.Ended
	}
	e.FilesOut = digests(res.Files)
	e.Network, e.NetworkRest = mcpserver.Connections(res.Network), res.NetworkRest
	e.Outcome = runOutcome{
		ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		DurationMs:  res.Duration.Milliseconds(),
		StdoutBytes: int64(len(res.Stdout)) + res.StdoutDropped, StderrBytes: int64(len(res.Stderr)) + res.StderrDropped,
		StdoutTruncatedBytes: res.StdoutDropped, StderrTruncatedBytes: res.StderrDropped,
		FilesDropped: res.FilesDropped,
	}
	return e
}

// principalName is principal(ctx), or "local" if principal is nil.
func principalName(ctx context.Context, principal func(context.Context) string) string {
	if principal == nil {
		return "local"
	}
	return principal(ctx)
}

// newRunID returns 16 random hex digits that pair a run's two records.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

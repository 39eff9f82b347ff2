package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
	"code-sandbox-mcp/cmd/code-sandbox-mcp/mcpserver"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

// runCommand is `run`: one program, its stdout to stdout and its stderr to
// stderr, a summary of anything unusual on stderr, and its exit status as
// ours (see usage for the statuses of our own).
func runCommand(ctx context.Context, iv *invocation, fs *flag.FlagSet, args []string) int {
	var rf runFlags
	if status, ok := rf.parse(fs, args, iv.stderr); !ok {
		return status
	}
	logger := iv.logger()
	cfg, err := loadConfig(*iv.g, iv.env)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp: %v\n", err)
		return exitUsage
	}
	req, lim, err := rf.request(cfg, iv.stdin)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp run: %v\n", err)
		return exitUsage
	}
	var out *os.Root
	if rf.outDir != "" {
		if out, err = openOut(rf.outDir); err != nil {
			fmt.Fprintf(iv.stderr, "code-sandbox-mcp run: --out: %v\n", err)
			return exitUsage
		}
		defer out.Close()
	}

	ex, err := exec.New(ctx, oneShot(app.ExecConfig(cfg, iv.env, logger), req.Language))
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp run: %v\n", err)
		return exitSandbox
	}
	defer ex.Close()
	if err := ex.Prepare(ctx); err != nil {
		logger.Warn("preparing the sandboxes", "err", err)
	}
	res, err := ex.Run(ctx, req)
	if err != nil {
		fmt.Fprintf(iv.stderr, "code-sandbox-mcp run: %v\n", err)
		if hint := runHint(cfg, err); hint != "" {
			fmt.Fprintf(iv.stderr, "code-sandbox-mcp run: %s\n", hint)
		}
		return runErrorStatus(err)
	}
	return report(res, lim, out, rf.outDir, iv.stdout, iv.stderr)
}

// runFlags are run's own flags.
type runFlags struct {
	lang    string
	code    string
	codeSet bool
	timeout time.Duration
	files   []string // --file values
	outDir  string
	// rest are the arguments after the flags: FILE or -, if any.
	rest []string
}

// parse parses run's flags in args, with fs's global ones; ok is false if
// run is to exit with status now.
func (r *runFlags) parse(fs *flag.FlagSet, args []string, stderr io.Writer) (status int, ok bool) {
	fs.StringVar(&r.lang, "language", "", "the language: python, javascript or another configured one")
	fs.Func("code", "the program's `source` (instead of FILE or -)", func(s string) error {
		r.code, r.codeSet = s, true
		return nil
	})
	fs.Func("timeout", "wall-clock limit: `seconds`, such as 5 or 2.5, or a duration, such as 10s or 1m30s (default: the language's)", func(v string) error {
		d, err := parseTimeout(v)
		r.timeout = d
		return err
	})
	fs.Func("file", fileUsage, func(s string) error {
		r.files = append(r.files, s)
		return nil
	})
	fs.StringVar(&r.outDir, "out", "", "save the output files (those the program wrote or changed in its working directory) beneath `DIR`, created if missing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: code-sandbox-mcp run --language NAME [--timeout D] [--file LOCAL[:PATH]]... [--out DIR] [--code STRING | FILE | -]")
		printOwnDefaults(fs, stderr)
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitUsage, false
	}
	r.rest = fs.Args()
	return exitOK, true
}

// parseTimeout reads --timeout: a bare number is seconds, as the MCP
// tools' timeout_seconds is; anything else a Go duration (10s, 1m30s).
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if sec, ferr := strconv.ParseFloat(v, 64); ferr == nil {
		d, err = time.Duration(sec*float64(time.Second)), nil
		if math.IsNaN(sec) || math.IsInf(sec, 0) || sec > math.MaxInt64/float64(time.Second) {
			err = errors.New("not a number of seconds")
		}
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("want seconds, such as 5, or a duration, such as 10s or 1m30s")
	case d < 0:
		return 0, fmt.Errorf("%s is negative; want seconds, such as 5, or a duration, such as 10s", v)
	}
	return d, nil
}

// printOwnDefaults prints the defaults of fs's flags, a subcommand's, but
// the serving flags that refuseHTTPFlags added only to refuse them.
func printOwnDefaults(fs *flag.FlagSet, w io.Writer) {
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	own.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(serveFlagNames, f.Name) {
			own.Var(f.Value, f.Name, f.Usage)
			own.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	own.PrintDefaults()
}

// request is what the flags ask the executor to run, and the limits of
// its language: it checks the language, and reads the program (--code,
// FILE or stdin) and the --file files.
func (r *runFlags) request(cfg *config.Config, stdin io.Reader) (exec.Request, config.Limits, error) {
	if r.lang == "" {
		return exec.Request{}, config.Limits{}, fmt.Errorf("--language is required: %s", strings.Join(cfg.Names(), ", "))
	}
	if l, ok := cfg.Languages[r.lang]; !ok || l.Disabled {
		return exec.Request{}, config.Limits{}, fmt.Errorf("unknown language %q; want one of %s", r.lang, strings.Join(cfg.Names(), ", "))
	}
	l, _ := cfg.Language(r.lang)
	// The executor allows up to max_task_timeout, for calls run as MCP
	// tasks; a run from the command line keeps max_timeout.
	if r.timeout > l.Limits.MaxTimeout {
		return exec.Request{}, config.Limits{}, fmt.Errorf("--timeout %s is over %s's max_timeout (%s): ask for %s or less", r.timeout, r.lang, l.Limits.MaxTimeout, l.Limits.MaxTimeout)
	}
	code, err := r.program(stdin)
	if err != nil {
		return exec.Request{}, config.Limits{}, err
	}
	files, err := readFileFlags(r.files, l.Limits.FilesInBytes)
	if err != nil {
		return exec.Request{}, config.Limits{}, err
	}
	return exec.Request{Language: r.lang, Code: code, Timeout: r.timeout, Files: files}, l.Limits, nil
}

// program is the program's source: --code's, or FILE's, or stdin's for -.
func (r *runFlags) program(stdin io.Reader) (string, error) {
	switch {
	case r.codeSet && len(r.rest) > 0:
		return "", errors.New("give the program with --code or as FILE (or - for stdin), not both")
	case r.codeSet:
		return r.code, nil
	case len(r.rest) == 1:
		var data []byte
		var err error
		if r.rest[0] == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(r.rest[0])
		}
		return string(data), err
	default:
		return "", errors.New("give the program with --code STRING, as FILE, or - to read stdin")
	}
}

// report writes the program's stdout and stderr, a line on stderr for
// anything unusual, and saves the output files beneath out (--out, at
// outDir; nil without it); it returns run's exit status.
func report(res *exec.Result, lim config.Limits, out *os.Root, outDir string, stdout, stderr io.Writer) int {
	stdout.Write(res.Stdout)
	stderr.Write(res.Stderr)
	filesLine := out != nil || len(res.Files) > 0 || res.FilesDropped > 0
	if len(res.Stderr) > 0 && res.Stderr[len(res.Stderr)-1] != '\n' && (res.Failed() || res.StdoutDropped > 0 || res.StderrDropped > 0 || filesLine) {
		fmt.Fprintln(stderr)
	}
	if res.TimedOut || res.OOMKilled || res.Signal != "" || res.SignalUnknown || res.StdoutDropped > 0 || res.StderrDropped > 0 {
		fmt.Fprintf(stderr, "code-sandbox-mcp: %s\n", mcpserver.StatusLine(res, lim))
	}
	saved := 0
	var saveErrs []error
	if out != nil {
		saved, saveErrs = saveFiles(out, res.Files)
		for _, err := range saveErrs {
			fmt.Fprintf(stderr, "code-sandbox-mcp run: %v\n", err)
		}
	}
	if note := filesNote(res, lim, outDir, saved); note != "" {
		fmt.Fprintf(stderr, "code-sandbox-mcp: %s\n", note)
	}
	if len(saveErrs) > 0 {
		return exitFailure
	}
	return exitStatus(res)
}

// filesNote is run's line on stderr about the output files: how many it
// saved beneath out (--out; "" without it), or that they were not saved,
// and how many the executor left out. It is "" without --out when there
// are none.
func filesNote(res *exec.Result, lim config.Limits, out string, saved int) string {
	var parts []string
	switch n := len(res.Files); {
	case out != "" && saved < n:
		parts = append(parts, fmt.Sprintf("saved %d of %s to %s", saved, count(n, "output file"), out))
	case out != "":
		parts = append(parts, fmt.Sprintf("saved %s to %s", count(saved, "output file"), out))
	case n > 0:
		parts = append(parts, fmt.Sprintf("%s not saved; --out DIR saves them", count(n, "output file")))
	}
	if res.FilesDropped > 0 {
		parts = append(parts, fmt.Sprintf("%s left out: over max_files_out (%d) or files_out_bytes (%s), or named in other than printable UTF-8",
			count(res.FilesDropped, "output file"), lim.MaxFilesOut, config.Size(lim.FilesOutBytes)))
	}
	return strings.Join(parts, "; ")
}

// count is n things, in the plural when n is not 1.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// runErrorStatus is run's exit status for an error of Executor.Run: a
// request the executor refused (too many files, a timeout over the
// maximum) is a usage error, anything else the sandbox's.
func runErrorStatus(err error) int {
	if errdefs.IsInvalidArgument(err) {
		return exitUsage
	}
	return exitSandbox
}

// runHint is the one thing to do about a run's error, if it is a set-up
// problem: as mcpserver tells a model, by the error's errdefs class.
func runHint(cfg *config.Config, err error) string {
	switch {
	case errors.Is(err, exec.ErrNotAnswering):
		return "retry in a moment; if it persists, diagnose the set-up: `" + app.DoctorHint(cfg) + "`"
	case errdefs.IsNotFound(err):
		return "import the image: `" + app.ImportHint(cfg) + "`"
	case errdefs.IsFailedPrecondition(err), errdefs.IsUnavailable(err), errdefs.IsPermissionDenied(err):
		return "diagnose the set-up: `" + app.DoctorHint(cfg) + "`"
	}
	return ""
}

// exitStatus maps a run's ending to an exit status, as a shell would: the
// program's own status, 128+N for signal N, 124 for a timeout (as timeout(1)).
// A status of 129 or more without a signal is the program's own, and
// passed on as it is.
func exitStatus(r *exec.Result) int {
	switch {
	case r.TimedOut:
		return 124
	case r.Signal != "":
		if n := unix.SignalNum(r.Signal); n > 0 {
			return 128 + int(n)
		}
		// A name unknown here: containerd's status, if it is a
		// signal's.
		if r.ExitCode > 128 && r.ExitCode <= 255 {
			return r.ExitCode
		}
		return exitFailure
	case r.ExitCode < 0 || r.ExitCode > 255:
		return exitFailure
	}
	return r.ExitCode
}

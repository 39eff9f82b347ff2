package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/cmd/code-sandbox-mcp/app"
	"code-sandbox-mcp/config"
	"code-sandbox-mcp/exec"
)

func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"5", 5 * time.Second, ""},
		{"2.5", 2500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"5s", 5 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"-5", 0, "negative"},
		{"-1s", 0, "negative"},
		{"5x", 0, "want seconds, such as 5, or a duration"},
		{"NaN", 0, "want seconds"},
		{"1e300", 0, "want seconds"},
		{"", 0, "want seconds"},
	} {
		got, err := parseTimeout(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("parseTimeout(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		r    exec.Result
		want int
	}{
		{exec.Result{}, 0},
		{exec.Result{ExitCode: 3}, 3},
		{exec.Result{ExitCode: -1, Signal: "SIGKILL"}, 137},
		{exec.Result{ExitCode: -1, Signal: "SIGSEGV"}, 139},
		{exec.Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true}, 124},
		{exec.Result{ExitCode: -1, Signal: "SIGKILL", OOMKilled: true}, 137},
		// Every signal is 128+N, not only those of a hand-made table.
		{exec.Result{ExitCode: 154, Signal: "SIGVTALRM"}, 154},
		{exec.Result{ExitCode: 156, Signal: "SIGWINCH"}, 156},
		{exec.Result{ExitCode: -1, Signal: "SIGPWR"}, 128 + 30},
		// A program's own exit status over 128 is passed on as is.
		{exec.Result{ExitCode: 139}, 139},
		{exec.Result{ExitCode: 255}, 255},
		{exec.Result{ExitCode: 256}, 1},
	} {
		if got := exitStatus(&tc.r); got != tc.want {
			t.Errorf("exitStatus(%+v) = %d; want %d", tc.r, got, tc.want)
		}
	}
}

func TestRunErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("101 files given, over the limit of 100: %w", errdefs.ErrInvalidArgument), exitUsage},
		{fmt.Errorf("timeout 5m0s is over the maximum of 2m0s: %w", errdefs.ErrInvalidArgument), exitUsage},
		{fmt.Errorf("image: %w", errdefs.ErrNotFound), exitSandbox},
		{fmt.Errorf("%w: %w", exec.ErrNotAnswering, errdefs.ErrUnavailable), exitSandbox},
		{context.DeadlineExceeded, exitSandbox},
	} {
		if got := runErrorStatus(tc.err); got != tc.want {
			t.Errorf("runErrorStatus(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
}

// runHint names, by the error's class, the same commands as the server
// tells a model: those of the configured containerd.
func TestRunHint(t *testing.T) {
	cfg := config.Default()
	cfg.Containerd.Address, cfg.Containerd.Namespace = "/run/other.sock", "mine"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("image x: %w", errdefs.ErrNotFound), app.ImportHint(cfg)},
		{fmt.Errorf("no python: %w", errdefs.ErrFailedPrecondition), app.DoctorHint(cfg)},
		{fmt.Errorf("socket: %w", errdefs.ErrUnavailable), app.DoctorHint(cfg)},
		{errors.New("shim died"), ""},
	} {
		if got := runHint(cfg, tc.err); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("runHint(%v) = %q; want one with %q", tc.err, got, tc.want)
		}
	}
}

package main

import (
	"testing"

	"code-sandbox-mcp/exec"
)

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
	} {
		if got := exitStatus(&tc.r); got != tc.want {
			t.Errorf("exitStatus(%+v) = %d; want %d", tc.r, got, tc.want)
		}
	}
}

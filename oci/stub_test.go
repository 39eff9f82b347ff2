package oci

import (
	"bytes"
	"errors"
	"os"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"
)

func TestSpecWaitForStart(t *testing.T) {
	p := testPolicy()
	p.WaitForStart = true
	got := generate(t, p).Process.Args
	want := append([]string{InitPath, "--", "/bin/sh", "-c", StubScript, "sh"}, p.Args...)
	if !slices.Equal(got, want) {
		t.Errorf("args: got %q; want %q (the stub under the init)", got, want)
	}
}

// Without an init the command is pid 1 itself.
func TestSpecWithoutInit(t *testing.T) {
	p := testPolicy()
	p.InitHostPath = ""
	s := generate(t, p)
	if got := s.Process.Args; !slices.Equal(got, p.Args) {
		t.Errorf("args: got %q; want %q", got, p.Args)
	}
	for _, m := range s.Mounts {
		if m.Destination == InitPath {
			t.Errorf("mount at %s without an init", InitPath)
		}
	}
}

// stub runs StubScript in shell (a host path) the way a sandbox does:
// argv from StubArgs with the shell in place of /bin/sh, exactly env, in
// /tmp, with stdin as given.
func stub(t *testing.T, shell string, stdin string, env []string, args ...string) (string, int) {
	t.Helper()
	if _, err := os.Stat(shell); err != nil {
		t.Fatalf("this test runs the stub in %s: %v", shell, err)
	}
	argv := StubArgs(args)
	cmd := osexec.Command(shell, argv[1:]...)
	cmd.Env = env
	cmd.Dir = "/tmp"
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *osexec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run the stub: %v", err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// The stub hands its argv, its environment (exactly) and an empty stdin
// to the program once it reads a line; dash is Debian's /bin/sh.
func TestStubRunsProgramAfterLine(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "A=b c"}
	// The program must not see what followed the line: its stdin is
	// /dev/null.
	out, code := stub(t, "/bin/dash", "\nleft for the program\n", env,
		"/bin/sh", "-c", `cat; printf 'argv %s|%s\n' "$0" "$1"`, "x", "y z")
	if want := "argv x|y z\n"; code != 0 || out != want {
		t.Errorf("got %q, exit %d; want %q, exit 0", out, code, want)
	}
	// The shell keeps its variables in its own order.
	out, code = stub(t, "/bin/dash", "\n", env, "/usr/bin/env")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(env)); code != 0 || !slices.Equal(got, want) {
		t.Errorf("environment: got %q, exit %d; want exactly %q", out, code, want)
	}
	out, code = stub(t, "/bin/dash", "\n", env, "/bin/sh", "-c", "ls -l /proc/self/fd/0 | grep -o '/dev/null$'")
	if code != 0 || out != "/dev/null\n" {
		t.Errorf("stdin: got %q, exit %d; want /dev/null", out, code)
	}
}

// Without a line (stdin closed), nothing runs.
func TestStubWithoutLineRunsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := dir + "/ran"
	for _, stdin := range []string{"", "no newline"} {
		out, code := stub(t, "/bin/dash", stdin, []string{"PATH=/usr/bin:/bin"}, "/usr/bin/touch", marker)
		if code == 0 {
			t.Errorf("stdin %q: exit 0 (output %q); want a failure", stdin, out)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("stdin %q: the program ran", stdin)
		}
	}
}

// Under bash, which adds SHLVL whatever the script does, the stub refuses
// before reading anything.
func TestStubRefusesBash(t *testing.T) {
	_, code := stub(t, "/bin/bash", "\n", []string{"PATH=/usr/bin:/bin"}, "/usr/bin/true")
	if code != StubRefused {
		t.Errorf("exit %d; want %d", code, StubRefused)
	}
}

func TestCanWaitForStart(t *testing.T) {
	for env, want := range map[string]bool{
		"PATH=/bin HOME=/tmp": true,
		"PWD=/x":              false,
		"OLDPWD=/x":           false,
		"SHLVL=2":             false,
		"XPWD=1 SHLVLX=2":     true,
	} {
		if got := CanWaitForStart(strings.Fields(env)); got != want {
			t.Errorf("%s: got %v; want %v", env, got, want)
		}
	}
}

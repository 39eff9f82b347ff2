package sandboxinit

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// built is the init, built once for the package's tests.
var built string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandboxinit-test-")
	if err != nil {
		panic(err)
	}
	built = filepath.Join(dir, Name)
	code := 0
	if err := Build(built); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		code = 1
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// initCmd is the init running the shell script script, outside a pid
// namespace: it is then its orphans' subreaper, as pid 1 is their reaper.
func initCmd(script string) *exec.Cmd {
	return exec.Command(built, "--", "/bin/sh", "-c", script)
}

// exitCode runs cmd and returns its exit status, failing on anything else.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	}
	t.Fatalf("%v: %v", cmd.Args, err)
	return -1
}

// The init is a static ELF file, as the server's CheckInit requires of
// any init, and says its version.
func TestStaticAndVersion(t *testing.T) {
	f, err := elf.Open(built)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s has a program interpreter: it is not static", built)
		}
	}
	out, err := exec.Command(built, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), Name+" ") {
		t.Fatalf("--version: %q, %v", out, err)
	}
}

// The init exits with its program's status: its exit status, 128+N for a
// program killed by signal N, and a usage error without a program.
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 137", 137},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		if got := exitCode(t, initCmd(tt.script)); got != tt.want {
			t.Errorf("%q: status %d, want %d", tt.script, got, tt.want)
		}
	}
	if got := exitCode(t, exec.Command(built)); got != 2 {
		t.Errorf("no program: status %d, want 2", got)
	}
}

// A program that cannot be exec'd is said so on stderr, in the form the
// server reads (sandbox.initFatal), with the shell's statuses.
func TestExecFailure(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		program string
		status  int
		says    string
	}{
		{filepath.Join(dir, "none"), 127, "No such file or directory"},
		{notExec, 126, "Permission denied"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(built, "--", tt.program)
		cmd.Stderr = &stderr
		want := "[FATAL " + Name + "] exec " + tt.program + " failed: " + tt.says + "\n"
		if got := exitCode(t, cmd); got != tt.status || stderr.String() != want {
			t.Errorf("%s: status %d, stderr %q; want %d, %q", tt.program, got, stderr.String(), tt.status, want)
		}
	}
}

// Every signal sent to the init but SIGCHLD goes to its program, which
// leads a process group of its own, as under tini.
func TestSignalsForwarded(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGWINCH} {
		name := strings.ToUpper(strings.TrimPrefix(unixSignalName(sig), "SIG"))
		// The program says it is ready once its trap is set, then waits.
		cmd := initCmd(`trap 'exit 42' ` + name + `; echo ready; while :; do sleep 0.01; done`)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 6)
		if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
			// SIGTERM, which the init passes on: a SIGKILL would end the
			// init alone and leave the shell's loop running.
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			t.Fatalf("%v: the program did not start: %q, %v", sig, line, err)
		}
		cmd.Process.Signal(sig)
		err = cmd.Wait()
		if cmd.ProcessState.ExitCode() != 42 {
			t.Errorf("%v sent to the init: %v; want the program's trap's exit 42", sig, err)
		}
	}

	out, err := initCmd(`set -- $(cat /proc/$$/stat); echo "$1 $5"`).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 || f[0] != f[1] {
		t.Errorf("the program's pid and process group: %q, %v; want its own group", out, err)
	}
}

// unixSignalName is sig's name as kill(1) takes it.
func unixSignalName(sig syscall.Signal) string {
	return map[syscall.Signal]string{
		syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGWINCH: "SIGWINCH",
	}[sig]
}

// The init reaps every orphan that comes to it while its program runs:
// none stays a zombie, which would count against the sandbox's pids.
func TestOrphansReaped(t *testing.T) {
	// Each subshell leaves a child that exits at once, an orphan of the
	// init; then the program says so and waits to be killed.
	cmd := initCmd(`for i in $(seq 30); do (true & exit 0); done; echo started; exec sleep 30`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	line := make([]byte, 8)
	if _, err := io.ReadFull(out, line); err != nil {
		t.Fatalf("the program did not start: %v", err)
	}
	// Reaping follows each orphan's exit by a wake-up of the init: wait
	// for it, boundedly, and say how many were left if it never comes.
	var zombies []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if zombies = zombieChildren(t, cmd.Process.Pid); len(zombies) == 0 {
			return
		}
	}
	t.Fatalf("zombies of the init after 5 s: %v", zombies)
}

// zombieChildren lists the zombie children of pid, from /proc.
func zombieChildren(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var z []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; it ends at the last ')'.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		f := strings.Fields(rest)
		if len(f) >= 2 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			z = append(z, n)
		}
	}
	return z
}

// The init lets go of its copies of the standard streams once its
// program runs: a program that closes its own ends its output, although
// it and the init still run. tini keeps them, so there the output ended
// only with the init.
func TestStreamsReleased(t *testing.T) {
	cmd := initCmd(`exec >&- 2>&-; exec sleep 30`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-ended
	}()
	for _, r := range []io.Reader{stdout, stderr} {
		if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
			t.Fatalf("read: %q, %v", b, err)
		}
	}
	select {
	case err := <-ended:
		t.Fatalf("the init ended (%v) before its program: the output's end tells nothing", err)
	default:
	}
}

// A program killed by SIGKILL (the OOM killer's signal) holds the init,
// and the sandbox's cgroup with it, about half a second, so that the
// server reads the cgroup's count of OOM kills before a systemd scope
// goes; any other end does not, and the status is the program's either
// way.
func TestLingerAfterSIGKILL(t *testing.T) {
	for _, tt := range []struct {
		script   string
		want     int
		min, max time.Duration
	}{
		{"kill -KILL $$", 128 + int(syscall.SIGKILL), 450 * time.Millisecond, 5 * time.Second},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM), 0, 400 * time.Millisecond},
		{"exit 3", 3, 0, 400 * time.Millisecond},
	} {
		start := time.Now()
		got := exitCode(t, initCmd(tt.script))
		took := time.Since(start)
		if got != tt.want || took < tt.min || took > tt.max {
			t.Errorf("%q: status %d after %s; want %d after %s to %s", tt.script, got, took, tt.want, tt.min, tt.max)
		}
	}
}

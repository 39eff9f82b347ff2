package integration

import (
	"bytes"
	"errors"
	"fmt"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"code-sandbox-mcp/exec"
)

// outputPaths lists the paths of a result's output files.
func outputPaths(res *exec.Result) []string {
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Path)
	}
	return out
}

// outputFile returns the output file at p, or fails.
func outputFile(t *testing.T, res *exec.Result, p string) []byte {
	t.Helper()
	for _, f := range res.Files {
		if f.Path == p {
			return f.Data
		}
	}
	t.Fatalf("no output file %q; got %v (%d dropped)", p, outputPaths(res), res.FilesDropped)
	return nil
}

// A CSV passed in is in the working directory, /workspace, where pandas
// reads it; what the program writes there comes back, and an input it
// left as it was does not.
func TestFilesInAndOutPython(t *testing.T) {
	e := newExecutor(t, nil)
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: `
import os, pandas as pd
print(os.getcwd())
os.mkdir('out')
df = pd.read_csv('data/prices.csv')
print(df['price'].sum())
df.assign(double=df['price'] * 2).to_csv('out/doubled.csv', index=False)
open('notes.txt', 'a').write('changed\n')
`, Files: []exec.File{
		{Path: "data/prices.csv", Data: []byte("item,price\na,1.5\nb,2.5\n")},
		{Path: "notes.txt", Data: []byte("first\n")},
		{Path: "untouched.bin", Data: []byte{0, 1, 2, 0xff}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "/workspace\n4.0\n" || res.ExitCode != 0 {
		t.Fatalf("got %q, stderr %q, exit %d; want /workspace and 4.0", res.Stdout, res.Stderr, res.ExitCode)
	}
	if got := strings.Join(outputPaths(res), " "); got != "notes.txt out/doubled.csv" || res.FilesDropped != 0 {
		t.Errorf("output files %q, %d dropped; want the changed input and the new file, in path order", got, res.FilesDropped)
	}
	if got := string(outputFile(t, res, "out/doubled.csv")); got != "item,price,double\na,1.5,3.0\nb,2.5,5.0\n" {
		t.Errorf("out/doubled.csv: %q", got)
	}
	if got := string(outputFile(t, res, "notes.txt")); got != "first\nchanged\n" {
		t.Errorf("notes.txt: %q", got)
	}
}

// JavaScript gets the same workspace: an input to read, a file to write,
// an empty file returned as such.
func TestFilesInAndOutJavaScript(t *testing.T) {
	e := newExecutor(t, nil)
	res, err := e.Run(testContext(t), exec.Request{Language: "javascript", Code: `
const fs = require('fs');
const n = JSON.parse(fs.readFileSync('in.json', 'utf8')).n;
fs.writeFileSync('result.json', JSON.stringify({square: n * n}));
fs.writeFileSync('empty', '');
console.log(process.cwd());
`, Files: []exec.File{{Path: "in.json", Data: []byte(`{"n": 12}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "/workspace\n" || res.ExitCode != 0 {
		t.Fatalf("got %q, stderr %q, exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	if got := string(outputFile(t, res, "result.json")); got != `{"square":144}` {
		t.Errorf("result.json: %q", got)
	}
	if got := outputFile(t, res, "empty"); len(got) != 0 || got == nil {
		t.Errorf("empty: %q; want an empty, non-nil file", got)
	}
}

// A program killed at its deadline still gets its files back.
func TestFilesOfATimedOutRun(t *testing.T) {
	e := newExecutor(t, nil)
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Timeout: 2 * time.Second, Code: `
import time
with open('partial.txt', 'w') as f:
    f.write('written before the deadline\n')
time.sleep(60)
`})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("got %+v; want timed out", res)
	}
	if got := string(outputFile(t, res, "partial.txt")); got != "written before the deadline\n" {
		t.Errorf("partial.txt: %q", got)
	}
}

// Output files past max_files_out or files_out_bytes are dropped and
// counted; the ones kept come first in path order, numbers compared as
// numbers.
func TestFilesOutOverTheCaps(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Limits.MaxFilesOut = 3
			c.Languages[i].Limits.FilesOutBytes = 10 << 10
		}
	})
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: `
for i in range(1, 13):
    open(f'f{i}.txt', 'w').write(str(i))
open('big.bin', 'wb').write(b'x' * (20 << 10))
`})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(outputPaths(res), " "); got != "f1.txt f2.txt f3.txt" || res.FilesDropped != 10 {
		t.Errorf("kept %q, %d dropped; want f1 to f3 kept (big.bin over the byte cap), 10 dropped", got, res.FilesDropped)
	}
}

// The workspace is bounded: a program cannot write past workspace_size,
// nor create more inodes than it allows, and the call still ends with
// what fitted.
func TestWorkspaceIsBounded(t *testing.T) {
	e := newExecutor(t, func(c *exec.Config) {
		for i := range c.Languages {
			c.Languages[i].Limits.WorkspaceBytes = 4 << 20
		}
	})
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: `
import errno, os
try:
    with open('fill.bin', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * (1 << 20))
except OSError as e:
    print('fill', errno.errorcode[e.errno], os.path.getsize('fill.bin') <= 4 << 20)
os.remove('fill.bin')
n = 0
try:
    os.mkdir('many')
    while True:
        open(f'many/{n}', 'w').close()
        n += 1
except OSError as e:
    print('inodes', errno.errorcode[e.errno], n < 2000)
`})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "fill ENOSPC True\ninodes ENOSPC True\n" {
		t.Errorf("got %q, stderr %q; want ENOSPC past the size and the inodes", res.Stdout, res.Stderr)
	}
	if res.FilesDropped == 0 || len(res.Files) != 100 {
		t.Errorf("got %d files, %d dropped; want max_files_out kept and the rest counted", len(res.Files), res.FilesDropped)
	}
}

// Bad inputs are refused before anything runs.
func TestFilesInRefused(t *testing.T) {
	e := newExecutor(t, nil)
	lim := testLimits()
	for _, tc := range []struct {
		name  string
		files []exec.File
		want  string
	}{
		{"dotdot", []exec.File{{Path: "../x"}}, `".." component`},
		{"absolute", []exec.File{{Path: "/etc/x"}}, "absolute"},
		{"empty", []exec.File{{Path: ""}}, "empty"},
		{"nul", []exec.File{{Path: "a\x00b"}}, "NUL"},
		{"empty component", []exec.File{{Path: "a//b"}}, "empty component"},
		{"duplicate", []exec.File{{Path: "a"}, {Path: "a"}}, "twice"},
		{"file and directory", []exec.File{{Path: "a"}, {Path: "a/b"}}, "also the directory"},
		{"too many", make([]exec.File, lim.MaxFilesIn+1), "over the limit"},
		{"too big", []exec.File{{Path: "big", Data: make([]byte, lim.FilesInBytes+1)}}, "over the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.files {
				if tc.files[i].Path == "" && tc.name == "too many" {
					tc.files[i].Path = fmt.Sprintf("f%d", i)
				}
			}
			_, err := e.Run(testContext(t), exec.Request{Language: "python", Code: "print(1)", Files: tc.files})
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want an invalid argument saying %q", err, tc.want)
			}
		})
	}
}

// A server in a mount namespace of its own mounts workspaces that
// containerd's runc cannot see: the run is refused with a set-up error
// that says so, rather than run with its files silently lost.
func TestWorkspaceInAnotherMountNamespaceIsRefused(t *testing.T) {
	cmd, _ := serverCommand(t, serverSpec{})
	args := append([]string{"--mount", "--propagation", "private", cmd.Path}, cmd.Args[1:]...)
	args = append(args, "run", "--language", "python", "--code", "print('ran')")
	un := osexec.Command("unshare", args...)
	un.Env = cmd.Env
	var stdout, stderr bytes.Buffer
	un.Stdout, un.Stderr = &stdout, &stderr
	err := un.Run()
	var exit *osexec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 125 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "different mount namespaces") {
		t.Errorf("exit %v, stdout %q, stderr %q; want 125 and the mount namespaces named", err, stdout.String(), stderr.String())
	}
}

// The figure hook costs a program that never plots only its small
// start-up half: the rest is loaded once matplotlib.pyplot is imported.
// The program's own view is unchanged: __name__, argv, the working
// directory.
func TestFigureHookLoadsLazily(t *testing.T) {
	e := newExecutor(t, nil)
	probe := `
import os, sys
print(__name__, sys.argv, os.getcwd())
print(any(getattr(f, '__name__', '') == '_PyplotFinder' for f in sys.meta_path), 'code_sandbox_mcp_figures' in sys.modules)
`
	res, err := e.Run(testContext(t), exec.Request{Language: "python", Code: probe})
	if err != nil {
		t.Fatal(err)
	}
	if want := "__main__ ['/sandbox/main.py'] /workspace\nTrue False\n"; string(res.Stdout) != want {
		t.Errorf("without pyplot: got %q, stderr %q; want %q", res.Stdout, res.Stderr, want)
	}
	res, err = e.Run(testContext(t), exec.Request{Language: "python", Code: "import matplotlib.pyplot as plt\n" + probe})
	if err != nil {
		t.Fatal(err)
	}
	if want := "__main__ ['/sandbox/main.py'] /workspace\nFalse True\n"; string(res.Stdout) != want || len(res.Files) != 0 {
		t.Errorf("with pyplot: got %q, stderr %q, %d files; want the hook installed, the finder gone and no figure", res.Stdout, res.Stderr, len(res.Files))
	}
}

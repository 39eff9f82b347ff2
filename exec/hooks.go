package exec

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"code-sandbox-mcp/config"
	sandboxoci "code-sandbox-mcp/oci"
)

// pythonHook is the sitecustomize module that saves a Python program's
// matplotlib figures into its workspace: see the file's own comment.
//
//go:embed pyhooks/sitecustomize.py
var pythonHook []byte

// compiledHook is pythonHook compiled by one image's interpreter: Python
// loads it from the hook directory's __pycache__ instead of compiling the
// source at every start, which took about 2 ms of a 15 ms hello.
type compiledHook struct {
	tag string // the interpreter's sys.implementation.cache_tag, such as cpython-313
	pyc []byte // an unchecked hash-based .pyc: loaded without reading the source
}

// compileHookProgram compiles the hook passed in as sitecustomize.py into
// sitecustomize.pyc, naming it by the path the sandboxes see it at (in
// tracebacks), and prints the interpreter's cache tag.
var compileHookProgram = fmt.Sprintf(`import py_compile, sys
py_compile.compile('sitecustomize.py', cfile='sitecustomize.pyc', dfile=%q, doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
print(sys.implementation.cache_tag)
`, sandboxoci.PythonHooksDir+"/sitecustomize.py")

// compileHookTimeout bounds the compile run.
const compileHookTimeout = 30 * time.Second

// cacheTag is what a cache tag may look like: it becomes a file name.
var cacheTag = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// compileHook compiles the hook with img's interpreter, in a sandbox of
// lang's like any run's (without the hook), and returns it; nil, and no
// error, if the executor is closing. It runs when the image is prepared;
// an error only means that runs compile the hook from source. It counts as
// a run, so that Close waits for it and then for the deletion of its
// sandbox.
func (e *Executor) compileHook(ctx context.Context, lang config.Language, img *preparedImage) (*compiledHook, error) {
	if !e.enter() {
		return nil, nil
	}
	defer e.runs.Done()
	ctx, cancel := context.WithTimeout(ctx, compileHookTimeout)
	defer cancel()
	defer context.AfterFunc(e.closing, cancel)()
	lang.Figures = false
	s, err := e.newSandbox(ctx, lang, img, time.Now().Add(compileHookTimeout+cleanupGrace), false)
	if err != nil {
		return nil, err
	}
	defer e.retire(s)
	res, err := s.execute(ctx, Request{Language: lang.Name, Code: compileHookProgram, Files: []File{{Path: "sitecustomize.py", Data: pythonHook}}}, compileHookTimeout)
	if err != nil {
		return nil, err
	}
	tag := strings.TrimSpace(string(res.Stdout))
	if res.Failed() || !cacheTag.MatchString(tag) || len(res.Files) != 1 || res.Files[0].Path != "sitecustomize.pyc" {
		return nil, fmt.Errorf("the compile run ended with status %d, printed %q (stderr %q) and left %d files", res.ExitCode, res.Stdout, res.Stderr, len(res.Files))
	}
	return &compiledHook{tag: tag, pyc: res.Files[0].Data}, nil
}

// writePythonHook writes the Python start-up hook into the run directory
// dir, as hooks/sitecustomize.py, with its compiled form for the image's
// interpreter if there is one, for the sandbox to mount read-only, and
// returns that directory. Each run has its own copy: it goes with the run
// directory, and a server never changes another's.
func writePythonHook(dir string, compiled *compiledHook) (string, error) {
	hooks := filepath.Join(dir, "hooks")
	if err := mkdirReadable(hooks); err != nil {
		return "", fmt.Errorf("create the Python hook directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "sitecustomize.py"), pythonHook, 0o644); err != nil {
		return "", fmt.Errorf("write the Python hook: %w", err)
	}
	if compiled == nil {
		return hooks, nil
	}
	cache := filepath.Join(hooks, "__pycache__")
	err := mkdirReadable(cache)
	if err == nil {
		err = os.WriteFile(filepath.Join(cache, "sitecustomize."+compiled.tag+".pyc"), compiled.pyc, 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("write the compiled Python hook: %w", err)
	}
	return hooks, nil
}

// mkdirReadable makes a directory that the sandbox's user can read: Mkdir
// is subject to the umask. (The host's parents are not in its path: it
// sees the directory mounted.)
func mkdirReadable(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

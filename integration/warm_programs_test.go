package integration

import (
	"time"

	"code-sandbox-mcp/exec"
)

// warmPython are the Python programs of the warm-start equivalence test
// (TestWarmEquivalence): each must do exactly the same in a warm sandbox
// as in a cold one. Those that name numpy or pandas run in a sandbox that
// imported both; the others in one that did not.
var warmPython = []warmCase{
	{name: "hello", code: `print("hello")`},
	{name: "module attributes", code: `print(__name__, __file__, __package__, __spec__, __doc__, __cached__)
print(type(__loader__).__name__, __loader__.name, __loader__.path, type(__builtins__).__name__)`},
	{name: "globals", code: `print(sorted(globals()))`},
	{name: "argv and path", code: `import sys
print(sys.argv, sys.orig_argv)
print(sys.path)
print(sys.flags)`},
	{name: "main module", code: `import sys, __main__
print(__main__.__dict__ is globals(), sys.modules["__main__"] is __main__)
print(sys.modules["sitecustomize"].__file__)`},
	{name: "importing itself", code: `print("running as", __name__)
if __name__ == "__main__":
    import main`},
	{name: "traceback", code: `def f(x):
    return 1 / x


print("before")
f(0)`},
	{name: "chained traceback", code: `try:
    {}["missing"]
except KeyError as err:
    raise RuntimeError("while handling") from err`},
	{name: "exception during handling", code: `try:
    int("x")
except ValueError:
    undefined_name`},
	{name: "syntax error", code: "print('a')\nx = = 1\n"},
	{name: "indentation error", code: "if True:\nprint(1)\n"},
	{name: "recursion error", code: `def f(n):
    return f(n + 1)
f(0)`},
	{name: "sys.exit with a number", code: `import sys
print("out")
sys.exit(3)`},
	{name: "sys.exit with a message", code: `import sys
sys.exit("bad thing")`},
	{name: "SystemExit without a code", code: `raise SystemExit`},
	{name: "exit builtin", code: `print(type(exit).__name__, type(help).__name__)
exit(4)`},
	{name: "exit status past 255", code: `import sys
sys.exit(256 + 7)`},
	{name: "KeyboardInterrupt", code: `print("x", flush=True)
raise KeyboardInterrupt`},
	{name: "atexit", code: `import atexit
atexit.register(print, "registered first, runs last")
@atexit.register
def second():
    print("registered second")
class Boom:
    def __repr__(self):
        return "<boom>"
    def __call__(self):
        raise ValueError("in atexit")
atexit.register(Boom())
print("main")`},
	{name: "atexit after an uncaught exception", code: `import atexit
atexit.register(print, "atexit ran")
raise ValueError("uncaught")`},
	{name: "custom excepthook", code: `import sys
sys.excepthook = lambda t, v, tb: print("hooked", t.__name__, v, tb.tb_frame.f_code.co_filename, tb.tb_lineno)
raise LookupError("x")`},
	{name: "stdin", code: `import os, sys
print(repr(sys.stdin.read()), sys.stdin.seekable(), sys.stdin.tell(), sys.stdin.name, sys.stdin.mode)
print(sys.stdin.encoding, sys.stdin.errors, sys.stdin.line_buffering, sys.stdin.write_through, sys.stdin.isatty())
print(sys.stdin is sys.__stdin__, type(sys.stdin.buffer).__name__, sys.stdin.buffer.raw.name, sys.stdin.buffer.raw.closefd)
st, null = os.fstat(0), os.stat("/dev/null")
print(st.st_rdev == null.st_rdev, st.st_mode == null.st_mode, os.get_inheritable(0))
print([l for l in open("/proc/self/fdinfo/0") if l.startswith(("pos", "flags"))])`},
	{name: "input at end of stdin", code: `input("prompt> ")`},
	{name: "environment", code: `import os
print(sorted(os.environ.items()))
print(sorted(open("/proc/self/environ", "rb").read().split(b"\0")))`},
	{name: "process", code: `import os
print(open("/proc/self/cmdline", "rb").read())
print(os.getpid() > 1, os.getppid(), os.getuid() == os.geteuid() == os.getgid(), os.getcwd())
print(sorted(os.listdir("/proc/self/fd")))
print(os.listdir("/sandbox"))`},
	{name: "signals", code: `import signal
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP, signal.SIGUSR1):
    print(s.name, signal.getsignal(s))
print(sorted(signal.sigpending()), signal.pthread_sigmask(signal.SIG_BLOCK, []))`},
	{name: "warnings", code: `import warnings
warnings.warn("careful")
warnings.warn("gone", DeprecationWarning)
print(warnings.filters[:3])`},
	{name: "streams", code: `import sys
for s in (sys.stdout, sys.stderr):
    print(s.encoding, s.errors, s.line_buffering, s.write_through, s.isatty(), file=s)`},
	{name: "unclosed file is flushed at exit", code: `f = open("out.txt", "w")
f.write("buffered, never closed")`},
	{name: "__del__ at exit", code: `class Noisy:
    def __del__(self):
        print("deleted at exit")
kept = Noisy()
print("main done")`},
	// The late thread waits for main's line, so that the order does not
	// rest on time on a busy host.
	{name: "threads", code: `import threading, time
printed = threading.Event()
def late():
    printed.wait()
    time.sleep(0.2)
    print("late thread")
threading.Thread(target=late).start()
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("main done", threading.active_count())
printed.set()`},
	{name: "subprocess", code: `import subprocess, sys
r = subprocess.run([sys.executable, "-c", "import sys; print(sys.argv, repr(sys.stdin.read()), 'numpy' in sys.modules)"], capture_output=True, text=True)
print(r.returncode, r.stdout, r.stderr)`},
	{name: "a child Python with piped input", code: `import subprocess, sys
for args in (["-c", "import sys; print(repr(sys.stdin.read()))"], ["-"]):
    r = subprocess.run([sys.executable] + args, input="print('script from stdin')\n" if args == ["-"] else "piped\nlines\n", capture_output=True, text=True)
    print(r.returncode, repr(r.stdout), repr(r.stderr))`,
		want: "0 \"'piped\\\\nlines\\\\n'\\n\" ''\n0 'script from stdin\\n' ''\n"},
	{name: "fork", code: `import os
pid = os.fork()
if pid == 0:
    print("child")
    os._exit(7)
_, status = os.waitpid(pid, 0)
print("parent", os.waitstatus_to_exitcode(status))`},
	{name: "large output", code: `print("x" * 200000)
import sys
print("y" * 100000, file=sys.stderr)`},
	{name: "timeout", timeout: 2 * time.Second, end: "timed out, SIGKILL 137", code: `import time
print("start", flush=True)
time.sleep(60)`},
	{name: "out of memory", end: "out of memory, SIGKILL 137", code: `chunks = []
while True:
    chunks.append(bytearray(16 << 20))`},
	{name: "numpy", code: `import numpy as np
np.random.seed(0)
print(np.arange(10).sum(), np.random.rand(3))
print(np.linalg.inv(np.eye(3) * 2))`},
	{name: "pandas", code: `import pandas as pd
df = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
print(df.groupby("k").sum())
df.to_csv("out.csv", index=False)`},
	{name: "pandas reads an input file", files: []exec.File{{Path: "data.csv", Data: []byte("x,y\n1,2\n3,4\n")}}, code: `import pandas as pd
print(pd.read_csv("data.csv").describe())`},
	{name: "numpy traceback", code: `import numpy as np
np.zeros(3).reshape(2, 2)`},
	{name: "figure", code: `import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
print("plotted")`},
	{name: "random", code: `import random
random.seed(1)
print(random.random())`},
	{name: "relative import", code: `from . import sibling`},
	// The sandbox's init (issue 26): what pid 1 of the sandbox changes.
	// The pids limit is below 300 (TestInitReapsOrphans checks it):
	// unreaped, the zombies of the shells' background children would
	// exhaust it.
	{name: "orphans reaped", want: "done\n", end: "exit 0", code: `import os
for i in range(300):
    if os.system("true & exit 0") != 0:
        raise SystemExit(f"child {i} failed")
print("done")`},
	{name: "self-signal", want: "before\n", end: "SIGTERM 143", code: `import os, signal
print("before", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
print("still here")`},
	{name: "abort", want: "before\n", end: "SIGABRT 134", code: `import os
print("before", flush=True)
os.abort()`},
	{name: "a nohup child", want: "started\n", end: "exit 0", code: `import subprocess
subprocess.Popen(["nohup", "sleep", "1000"])
print("started")`},
	{name: "a double-forked daemon", want: "parent done\n", end: "exit 0", code: `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
os.wait()
print("parent done")`},
}

// warmNode are the Node.js programs of the warm-start equivalence test.
var warmNode = []warmCase{
	{name: "hello", code: `console.log("hello")`},
	{name: "main module", code: `console.log(require.main === module, module.id, module.filename, module.loaded, module.children.length)
console.log(Object.keys(require.cache), module.paths)`},
	{name: "argv", code: `console.log(process.argv, process.argv0, process.execArgv, process.execPath)`},
	{name: "file names", code: `console.log(__filename, __dirname, process.cwd())`},
	{name: "module wrapper", code: `console.log(this === module.exports, typeof arguments, arguments.length, typeof require, typeof exports)`},
	{name: "globals", code: `console.log(Object.keys(globalThis).sort())`},
	{name: "exitCode", code: `process.exitCode = 3
console.log("set")`},
	{name: "process.exit with a timer pending", code: `setTimeout(() => console.log("never"), 1000)
process.exit(4)`},
	{name: "uncaught exception", code: `function f() {
  throw new Error("boom")
}
f()`},
	{name: "throwing a non-error", code: `throw {a: 1}`},
	{name: "unhandled rejection", code: `Promise.reject(new Error("nope"))`},
	{name: "unhandled rejection of a non-error", code: `Promise.reject(42)`},
	{name: "uncaught in a timer", code: `setTimeout(() => { null.x }, 10)`},
	// The timer is set from the immediate, so that the order does not
	// rest on time: set first, its 100 ms had passed before the loop
	// began, under load, and it ran before the immediate (warm once).
	{name: "event loop drains", code: `setImmediate(() => { console.log("immediate"); setTimeout(() => console.log("later"), 100) })
process.nextTick(() => console.log("tick"))
console.log("now")`, want: "now\ntick\nimmediate\nlater\n"},
	{name: "beforeExit and exit", code: `let once = true
process.on("beforeExit", (c) => { console.log("beforeExit", c); if (once) { once = false; setTimeout(() => console.log("again"), 10) } })
process.on("exit", (c) => console.log("exit", c))
process.exitCode = 5`},
	{name: "syntax error", code: "console.log(1)\nlet x = ;\n"},
	{name: "top-level await is a syntax error", code: "await Promise.resolve(1)\n"},
	{name: "error stack", code: `console.log(new Error("here").stack)`},
	{name: "stdin", code: `const fs = require("fs")
console.log(JSON.stringify(fs.readFileSync(0, "utf8")), fs.fstatSync(0).isCharacterDevice())
process.stdin.on("data", (d) => console.log("data", d))
process.stdin.on("end", () => console.log("end", process.stdin.constructor.name, process.stdin.isTTY))
console.log(fs.readFileSync("/proc/self/fdinfo/0", "utf8").split("\n").filter((l) => /^(pos|flags)/.test(l)))`},
	{name: "environment", code: `console.log(Object.entries(process.env).sort())`},
	{name: "process", code: `console.log(process.pid > 1, process.ppid, process.title, process.getuid() === process.getgid(), process.release.name)`},
	{name: "warnings", code: `process.emitWarning("careful")
new Buffer(1)
setTimeout(() => {}, 10)`},
	{name: "dynamic import", code: `import("node:path").then((p) => console.log(typeof p.join, typeof p.default))`},
	{name: "child process", code: `const cp = require("child_process")
console.log(cp.execFileSync(process.execPath, ["-e", "console.log(process.execArgv, process.argv.length, require('fs').fstatSync(0).isFIFO())"], {stdio: ["ignore", "pipe", "pipe"]}).toString())`},
	{name: "a child node with piped input", code: `const cp = require("child_process")
console.log(cp.execFileSync(process.execPath, ["-e", "process.stdin.pipe(process.stdout)"], {input: "piped\nlines\n"}).toString())`,
		want: "piped\nlines\n\n"},
	{name: "fork", code: `const cp = require("child_process")
if (process.argv[2] === "child") {
  console.log("child", process.execArgv, Object.keys(require.cache))
  process.exit(0)
}
cp.fork(__filename, ["child"]).on("exit", (c) => console.log("child exited", c))`},
	{name: "worker thread", code: `const { Worker, isMainThread } = require("worker_threads")
if (isMainThread) {
  new Worker(__filename).on("exit", (c) => console.log("worker exited", c))
} else {
  console.log("worker", process.execArgv, Object.keys(require.cache), require.main === module)
}`},
	{name: "signal handler", code: `process.on("SIGINT", () => { console.log("got SIGINT"); process.exit(2) })
process.kill(process.pid, "SIGINT")
setTimeout(() => console.log("not reached"), 1000)`},
	{name: "SIGTERM to itself", code: `process.kill(process.pid, "SIGTERM")
setTimeout(() => console.log("still here"), 50)`},
	{name: "files", files: []exec.File{{Path: "in.txt", Data: []byte("input\n")}}, code: `const fs = require("fs")
fs.writeFileSync("out.txt", fs.readFileSync("in.txt", "utf8").toUpperCase())
console.log(fs.readdirSync("."))`},
	{name: "large output", code: `console.log("x".repeat(200000))
console.error("y".repeat(100000))`},
	{name: "timeout", timeout: 2 * time.Second, end: "timed out, SIGKILL 137", code: `console.log("start")
setInterval(() => {}, 1000)`},
	{name: "out of memory", end: "out of memory, SIGKILL 137", code: `const a = []
for (;;) a.push(Buffer.alloc(16 << 20, 1))`},
	{name: "intl and time zone", code: `console.log(Intl.DateTimeFormat().resolvedOptions().timeZone, new Date(0).toString())`},
	{name: "builtins", code: `console.log(require("module").builtinModules.length, typeof require("fs").promises)`},
	// The sandbox's init (issue 26), as for Python.
	{name: "self-signal", want: "before\n", end: "SIGTERM 143", code: `console.log("before")
process.kill(process.pid, "SIGTERM")
setTimeout(() => console.log("still here"), 100)`},
	{name: "orphans reaped", want: "done\n", end: "exit 0", code: `const cp = require("child_process")
for (let i = 0; i < 300; i++) cp.execSync("true & exit 0")
console.log("done")`},
	{name: "a detached child", want: "started\n", end: "exit 0", code: `const cp = require("child_process")
cp.spawn("sleep", ["1000"], {detached: true, stdio: "inherit"}).unref()
console.log("started")`},
}

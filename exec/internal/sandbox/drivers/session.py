# code-sandbox-mcp: the Python session driver.
#
# The server runs this file as the process of a session's sandbox,
# `python3 /sandbox/session.py`, and speaks to it only through its standard
# streams (the contract is the server's, in exec/session.go and the driver
# protocol):
#
#   - fd 0 carries requests, one JSON object a line:
#       {"cell": N, "code": "<source>", "end": "<token>"}
#     Cell 0, with empty code, comes first; answering it says we are ready.
#   - The cell's output goes to fd 1 and fd 2 exactly as the code writes it.
#     Then we flush, write the token to fd 2, and the token followed by a
#     status line to fd 1:
#       {"status": "ok"|"error"|"exit"|"interrupted", "exit_code": N}
#   - EOF on fd 0: we exit 0 at once.
#   - SIGINT while a cell runs raises KeyboardInterrupt in it (status
#     interrupted); SIGINT while idle is ignored: ours stays installed,
#     since without it the SIGINT the sandbox's init passes on to us (its
#     child) would end the session.
#
# Cells run one after another in one namespace, a fresh module installed as
# sys.modules["__main__"], like a notebook: the value of a cell's last
# expression is passed to sys.displayhook (ours shows it as display() of
# the Python hook does, if the hook is there), top-level await works, and
# tracebacks show the cell's own source as "<cell N>" and none of our
# frames.
#
# Start-up is on the path of creating a session, so we import only modules
# that are built in or loaded already (no ast, json, signal or traceback:
# each of those pulls in re, enum and more). The few modules we need later
# are imported right after cell 0 is answered, while the server has nothing
# for us yet, and before any cell can have changed sys.path or
# sys.modules.
#
# A cell may do anything to the interpreter. We keep our own references to
# what we use (functions, file descriptors) and guard every use of what a
# cell may have replaced (sys.stdout, sys.stderr, builtins, sys.modules),
# so that a cell that tampers with them breaks its own output at worst.
# Deliberate sabotage (closing our file descriptors, os._exit) ends the
# session, which is accepted.

# Our own references to builtins, so that a cell that deletes or replaces
# them (del builtins.print, builtins.__dict__.clear()) does not reach us:
# names in this module's globals are found before the builtins.
from builtins import (
    BaseException,
    BlockingIOError,
    Exception,
    KeyboardInterrupt,
    OSError,
    StopIteration,
    SystemExit,
    ValueError,
    bytearray,
    bytes,
    compile,
    dict,
    eval,
    exec,
    getattr,
    int,
    isinstance,
    len,
    memoryview,
    open,
    str,
    type,
)
import builtins
import os
import sys

import _ast  # built in: compile()'s flags and AST node types, without ast.py
import _json  # built in: json's C scanner, without json.decoder and re
import _signal  # built in: signal.py would import enum
import linecache  # loaded already at start-up

# Compiler flags and code flags (the values of ast.PyCF_* and inspect.CO_*).
_PARSE = _ast.PyCF_ONLY_AST
_AWAIT = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80

_FIGURES = "code_sandbox_mcp_figures"  # the figure hook's module, if loaded

_write = os.write
_displayhook = sys.__displayhook__
_read = os.read
_exit = os._exit
_set_blocking = os.set_blocking
_getsignal = _signal.getsignal
_setsignal = _signal.signal
_SIGINT = _signal.SIGINT

# Set while a cell's code runs: only then does SIGINT interrupt it.
_running = False
# Set by our SIGINT handler when it interrupts a cell, so that a
# KeyboardInterrupt the cell raises itself is told apart from ours.
_interrupted = False
# The task of a coroutine cell while our event loop runs it, and the
# files of the loop's own code (asyncio's, selectors.py) once imported.
_task = None
_loop_files = ()


def _on_sigint(signum, frame):
    global _interrupted
    if not _running:
        # Idle: ignore it. A read of the request channel it interrupted is
        # retried by Python (PEP 475).
        return
    _interrupted = True
    if _task is not None and frame is not None and frame.f_code.co_filename.startswith(_loop_files):
        # A coroutine cell, and the event loop's own code is running (most
        # often: waiting in select). An exception raised here could leave
        # the loop half-way through its bookkeeping, unusable by the next
        # cells; so cancel the task instead, as asyncio.run does, and wake
        # the loop. The task unwinds from where it waited.
        _task.cancel()
        _task.get_loop().call_soon_threadsafe(_nothing)
        return
    raise KeyboardInterrupt


def _nothing():
    pass


# ---------------------------------------------------------------- requests


class _JSONContext:
    """What _json.make_scanner reads from a json.JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


_scan = _json.make_scanner(_JSONContext())


class _Requests:
    """Reads request lines from our private copy of fd 0."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.scanned = 0  # no newline in buf[:scanned]

    def next(self):
        """The next request as a dict, or None at EOF."""
        while True:
            i = self.buf.find(b"\n", self.scanned)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                self.scanned = 0
                return _decode(line)
            self.scanned = len(self.buf)
            try:
                chunk = _read(self.fd, 1 << 20)
            except KeyboardInterrupt:
                # Only if a cell left another SIGINT handler behind, which
                # we replace after every cell; nothing was read.
                continue
            if not chunk:
                return None  # a partial last line is no request
            self.buf += chunk


def _decode(line):
    try:
        text = line.decode("utf-8")
        req, end = _scan(text, 0)
        if not isinstance(req, dict) or text[end:].strip():
            raise ValueError("not one JSON object")
        cell, code, token = req["cell"], req["code"], req["end"]
        if not (isinstance(cell, int) and isinstance(code, str) and isinstance(token, str)):
            raise ValueError("bad field types")
        return cell, code, token.encode("ascii")
    except (Exception, StopIteration) as err:
        # The server sent something we cannot answer: we have no token to
        # end a cell with, so say why and end the session.
        _fail("bad request: %s: %r" % (type(err).__name__, line[:200]))


def _fail(why):
    try:
        _write(2, ("code-sandbox-mcp session: %s\n" % why).encode("utf-8", "replace"))
    finally:
        _exit(2)


# ------------------------------------------------------------------ output


def _write_all(fd, data):
    """Writes all of data to fd, whatever a cell did to its flags."""
    view = memoryview(data)
    while view:
        try:
            n = _write(fd, view)
        except BlockingIOError:
            # A cell set O_NONBLOCK on the pipe (the flag is shared with
            # the cell's fd 1 and 2): wait as a blocking write would.
            _set_blocking(fd, True)
            continue
        view = view[n:]


def _flush():
    """Flushes what the cell's streams hold, whatever they are now."""
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


def _say(text):
    """Writes text to the cell's sys.stderr as the interpreter would, or to
    fd 2 if that is gone or broken."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    except BaseException:
        pass
    try:
        _write_all(2, text.encode("utf-8", "backslashreplace"))
    except BaseException:
        pass


# ---------------------------------------------------------------- the cells


class _Session:
    def __init__(self):
        # The cells' namespace: a module of their own, as __main__, so that
        # pickle, dataclasses and multiprocessing find what cells define.
        self.main = type(sys)("__main__")
        self.main.__dict__["__builtins__"] = builtins
        self.ns = self.main.__dict__
        self.loop = None  # the asyncio event loop of top-level await
        self.stdin = None  # the sys.stdin that reads /dev/null
        self.format_exception = None  # traceback.format_exception, once imported
        self.rich = None  # the hook's rich display of a value, if there is one

    def run(self, n, code):
        """Runs one cell; returns (status, exit_code)."""
        global _running, _interrupted
        name = "<cell %d>" % n
        try:
            _register(name, code)
            _interrupted = False
            if _getsignal(_SIGINT) is not _on_sigint:
                _setsignal(_SIGINT, _on_sigint)  # a cell replaced ours
            try:
                for code_object in _compile(code, name):
                    self.execute(code_object)
            finally:
                _running = False
            result = ("ok", 0)
        except SystemExit as err:
            result = ("exit", self.exit_code(err))
        except KeyboardInterrupt as err:
            if _interrupted:
                self.show(err)
                result = ("interrupted", 130)
            else:  # the cell raised it itself: an exception like any other
                self.show(err)
                result = ("error", 1)
        except BaseException as err:
            self.show(err)
            result = ("error", 1)
        self.after_cell()
        return result

    def execute(self, code_object):
        global _running
        if code_object.co_flags & _CO_COROUTINE:
            # Top-level await: the code object makes a coroutine.
            self.run_coroutine(eval(code_object, self.ns))
        else:
            _running = True
            exec(code_object, self.ns)
            _running = False

    def run_coroutine(self, coro):
        """Runs a cell's coroutine to completion on our event loop, which
        persists across cells (as in Jupyter), so that what a cell binds to
        it (queues, locks, tasks) still works in the next one. Tasks a cell
        leaves behind run only while a later cell awaits."""
        global _running, _task, _loop_files
        import asyncio  # imported only by cells that use top-level await

        if self.loop is None or self.loop.is_closed():
            if not _loop_files:
                import selectors

                here = asyncio.__file__.rpartition("/")[0] + "/"
                _loop_files = (here, selectors.__file__)
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        loop = self.loop
        task = loop.create_task(coro)
        _running = True
        _task = task
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError as err:
            if not (_interrupted and task.cancelled()):
                raise  # the cell's own doing: an error like any other
            # Our SIGINT handler cancelled it: report the interrupt, with
            # the traceback of where the cell waited.
            interrupt = KeyboardInterrupt()
            interrupt.__traceback__ = _where(err)
            raise interrupt from None
        except KeyboardInterrupt as err:
            # Raised in code of the cell's: in the task, which is then done,
            # or in a callback or another task, which leaves the task
            # pending: cancel it and let it unwind, as asyncio.run would,
            # so that it does not resume in a later cell.
            if not task.done():
                where = self.cancel(loop, task)
                if where is not None:
                    err.__traceback__ = where
            if self.loop is loop:
                self.settle(loop)
            raise
        finally:
            _task = None
            _running = False

    def cancel(self, loop, task):
        """Cancels a task and runs the loop until it ends (SIGINT still
        interrupts that). Returns the traceback of where it waited, or
        None."""
        task.cancel()
        try:
            loop.run_until_complete(task)
        except BaseException as err:
            if not task.done():  # interrupted again: give up on this loop
                self.loop = None
            return _where(err)
        return None

    def settle(self, loop):
        """Runs, once, the callbacks left ready when KeyboardInterrupt came
        out of the loop. One may be run_until_complete's own, scheduled as
        the task ended just before: left there, it would stop the loop in
        the middle of the next cell ("Event loop stopped before Future
        completed"). If that is interrupted too, the loop is abandoned."""
        try:
            loop.stop()
            loop.run_forever()  # runs what is ready, then stops
        except BaseException:
            self.loop = None

    def exit_code(self, err):
        """The status python3 would exit with for this SystemExit, saying
        what it would say on stderr."""
        try:
            code = err.code
            if code is None:
                return 0
            if isinstance(code, int):
                return code & 0xFF
            _say("%s\n" % (code,))
        except BaseException:
            pass
        return 1

    def show(self, err):
        """Prints err's traceback on stderr, from the cell's first frame."""
        tb = _from_cell(err.__traceback__)
        # The last frame is our SIGINT handler's if it raised err.
        last = tb
        while last is not None and last.tb_next is not None:
            if last.tb_next.tb_frame.f_code is _on_sigint.__code__:
                last.tb_next = None
            last = last.tb_next
        try:
            err.__traceback__ = tb
            hook = getattr(sys, "excepthook", None)
            if hook is not None and hook is not getattr(sys, "__excepthook__", None):
                # The cell installed its own, which the interpreter would call.
                hook(type(err), err, tb)
                return
            if self.format_exception is None:
                self.prepare()
            _say("".join(self.format_exception(err)))
        except BaseException:
            try:
                text = "%s: %s" % (type(err).__name__, err)
            except BaseException:
                text = type(err).__name__
            _say("Traceback unavailable\n%s\n" % text)

    def prepare(self):
        """Imports what tracebacks need. Done once, as soon as cell 0 is
        answered: before any cell can have shadowed or broken it."""
        import traceback

        self.format_exception = traceback.format_exception
        # The hook's display (sitecustomize.py) shows a last expression's
        # value as display() would; a cell may set a displayhook of its own.
        rich = getattr(builtins.__dict__.get("display"), "_code_sandbox_mcp_rich", None)
        if rich is not None and sys.displayhook is _displayhook:
            self.rich = rich
            sys.displayhook = self.displayhook

    def displayhook(self, value):
        """sys.displayhook of the cells: the value's rich form if it has
        one, else its repr as Python's own hook prints it; sets _ as that
        does."""
        if value is None:
            return
        rich = self.rich
        try:
            shown = rich(value)
        except Exception as err:
            _say("code-sandbox-mcp: display: %s\n" % (" ".join(str(err).split()) or type(err).__name__)[:200])
            shown = False
        if not shown:
            _displayhook(value)
            return
        builtins._ = value

    def after_cell(self):
        """What follows every cell, whatever its outcome."""
        global _running
        _running = False
        if _getsignal(_SIGINT) is not _on_sigint:
            _setsignal(_SIGINT, _on_sigint)
        # Save the figures still open and close them, as a notebook would.
        figures = sys.modules.get(_FIGURES)
        end_of_cell = getattr(figures, "end_of_cell", None)
        if end_of_cell is not None:
            try:
                end_of_cell()
            except BaseException as err:
                try:
                    reason = " ".join(str(err).split()) or type(err).__name__
                except BaseException:
                    reason = type(err).__name__
                _say("code-sandbox-mcp: figures: %s\n" % reason[:200])
        # exit() and quit() close sys.stdin; the next cell's input() should
        # see EOF again, not a closed file.
        if sys.__dict__.get("stdin") is self.stdin and getattr(self.stdin, "closed", False):
            try:
                self.stdin = open(0, "r", closefd=False)
                sys.stdin = sys.__stdin__ = self.stdin
            except BaseException:
                pass


def _where(err):
    """The traceback, from the cell on, of a CancelledError that ended a
    task: run_until_complete raises the task's own (C tasks) or a new one
    with it as context (Python tasks)."""
    for e in (err, err.__context__):
        tb = _from_cell(getattr(e, "__traceback__", None))
        if tb is not None:
            return tb
    return None


def _from_cell(tb):
    """tb from its first frame in a cell on, or None: what comes before is
    ours, or asyncio's running a coroutine cell."""
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell "):
        tb = tb.tb_next
    return tb


def _register(name, code):
    """Lets tracebacks show the cell's source lines."""
    try:
        # mtime None: linecache.checkcache keeps the entry.
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    except BaseException:
        pass


def _compile(code, name):
    """The code objects of a cell: all of it, or, if it ends with an
    expression, what comes before and then that expression compiled as the
    interactive interpreter does, so that its value goes to
    sys.displayhook (which prints its repr unless None, and sets _)."""
    flags = _AWAIT
    tree = compile(code, name, "exec", _PARSE | flags, dont_inherit=True)
    body = tree.body
    if not body or not isinstance(body[-1], _ast.Expr):
        return [compile(tree, name, "exec", flags, dont_inherit=True)]
    out = []
    if len(body) > 1:
        head = _ast.Module(body=body[:-1], type_ignores=tree.type_ignores)
        out.append(compile(head, name, "exec", flags, dont_inherit=True))
    last = _ast.Interactive(body=body[-1:])
    out.append(compile(last, name, "single", flags, dont_inherit=True))
    return out


# -------------------------------------------------------------------- main


def main():
    global _running
    _setsignal(_SIGINT, _on_sigint)

    # Requests come through a private, close-on-exec copy of fd 0; the
    # cells' fd 0 (and so sys.stdin, input(), subprocesses) reads
    # /dev/null. The markers go through private copies of fd 1 and 2 (the
    # same pipes), so a cell that redirects its fd 1 or 2 does not lose
    # them.
    requests = _Requests(os.dup(0))
    try:
        empty = os.open(os.devnull, os.O_RDONLY)
    except OSError:  # no /dev/null (a bare chroot): a pipe with no writer
        empty, w = os.pipe()
        os.close(w)
    if empty != 0:
        os.dup2(empty, 0)
        os.close(empty)
    out, err = os.dup(1), os.dup(2)

    session = _Session()
    session.stdin = sys.stdin
    sys.modules["__main__"] = session.main
    sys.argv[:] = [""]

    ready = False
    while True:
        request = requests.next()
        if request is None:
            _flush()
            _exit(0)
        n, code, token = request
        try:
            status, exit_code = session.run(n, code)
        except BaseException as bug:  # ours: still end the cell
            _running = False
            _say("code-sandbox-mcp session: %s: %s\n" % (type(bug).__name__, bug))
            status, exit_code = "error", 1
        _flush()
        line = '{"status": "%s", "exit_code": %d}\n' % (status, exit_code)
        _write_all(err, token)
        _write_all(out, token + line.encode("ascii"))

        if not ready:
            # Cell 0 is answered and the server has nothing for us yet:
            # import now what later cells need, before any cell's code runs.
            ready = True
            session.prepare()
            # As in the interactive interpreter: imports look in the working
            # directory (/workspace), not in the driver's.
            if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
                sys.path[0] = ""


if __name__ == "__main__":
    main()

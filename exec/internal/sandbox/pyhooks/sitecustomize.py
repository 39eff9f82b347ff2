# code-sandbox-mcp: the start-up hook of Python sandboxes. It does these
# things, each only where the server asked for it:
#
# - figures: see code_sandbox_mcp_figures.py, next to this file (written
#   only for languages that save figures), for what that hook does and
#   why; this file only notices the import of matplotlib.pyplot and hands
#   pyplot to it;
# - display: it puts display() in builtins (unless there is one), a
#   small function that imports code_sandbox_mcp_display.py, next to this
#   file, only when it has something rich to show; see that file;
# - pip's user site: with a network (see pipEnv in network.go), the
#   server writes code_sandbox_mcp_user_site next to this file, and this
#   file makes the user site, under HOME, where pip then installs, and
#   puts it on sys.path, as site does for one that already exists:
#   so that a package pip installs later is importable in the same
#   interpreter (a directory missing from sys.path at start-up would be
#   cached as such, and stay unimportable);
# - warm start: in a ready sandbox of a warm language (see _warm below),
#   it imports the preloaded modules and then waits for the server's word
#   that the program is in place, before Python goes on to run it as
#   `python3 /sandbox/main.py` always does.
#
# It is kept small because Python compiles it from source at every start
# (the directory is read-only: no .pyc is ever written), and at start-up
# imports nothing that is not loaded already (os, sys, stat, io); only a
# warm start with preloads imports gc, and the preloads.

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _PyplotFinder:
    """Finds nothing itself; wraps the real loader of matplotlib.pyplot."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is _PyplotFinder or find_spec is None:
                continue
            spec = find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = getattr(loader, "exec_module", None)
        if original is None or "exec_module" in getattr(loader, "__dict__", ()):
            return spec  # an unusual loader: leave it alone

        def exec_module(module):
            if module.__name__ != name:  # a loader shared with other modules
                return original(module)
            del loader.exec_module  # one shot: the loader is as it was
            original(module)
            _patch(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def _patch(pyplot):
    # Only now is the rest of the hook compiled and run: from this
    # directory, whatever the program did to sys.path.
    try:
        _load("code_sandbox_mcp_figures").install(pyplot)
    except Exception as err:
        try:
            reason = " ".join(str(err).split()) or type(err).__name__
            sys.stderr.write("code-sandbox-mcp: figures will not be saved: %s\n" % reason[:200])
        except Exception:
            pass
    try:
        sys.meta_path.remove(_PyplotFinder)
    except ValueError:
        pass


def _load(name):
    """The hook's module name, from this directory: run once, when first
    needed (display may have loaded the figure hook before pyplot)."""
    path = os.path.join(_HERE, name + ".py")
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == path:
        return module
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# The _repr_*_ methods code_sandbox_mcp_display.py uses, and the modules
# whose types it shows without one (pandas' DataFrame and Series,
# matplotlib's Figure).
_RICH_METHODS = ("_repr_markdown_", "_repr_png_", "_repr_svg_", "_repr_html_")
_RICH_MODULES = ("pandas.", "matplotlib.")


def _rich(obj):
    """Shows obj in a rich form if it has one (see
    code_sandbox_mcp_display.py) and returns whether it did. The session
    driver's displayhook calls it for a cell's last value; it loads that
    module only for an object that may have such a form."""
    cls = type(obj)
    if not any(getattr(cls, m, None) is not None for m in _RICH_METHODS) and not any(
        getattr(c, "__module__", "").startswith(_RICH_MODULES) for c in getattr(cls, "__mro__", ())
    ):
        return False
    return _load("code_sandbox_mcp_display").show(obj)


def display(*objs, **kwargs):
    """Shows each of objs in the output at this point, as IPython's
    display does: Markdown (a pandas DataFrame as a table) as text, a PNG
    or a matplotlib figure as an image, SVG and HTML as resources, and
    anything else as its repr. Keyword arguments are accepted and
    ignored."""
    for obj in objs:
        try:
            if _rich(obj):
                continue
        except Exception as err:
            try:
                reason = " ".join(str(err).split()) or type(err).__name__
                sys.stderr.write("code-sandbox-mcp: display: %s\n" % reason[:200])
            except Exception:
                pass
        print(repr(obj))


display._code_sandbox_mcp_rich = _rich  # the session driver's displayhook uses it


def _user_site():
    """Make pip's user site and put it on sys.path, where the server asks."""
    if sys.flags.no_user_site or not os.path.exists(os.path.join(_HERE, "code_sandbox_mcp_user_site")):
        return
    site = sys.modules.get("site")
    if site is None or not site.ENABLE_USER_SITE:
        return
    path = site.getusersitepackages()
    if path in sys.path:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return  # HOME is not writable: pip will say so
    site.addsitedir(path)


def _chain_image_sitecustomize():
    """Run the next sitecustomize on sys.path (the image's own), if any."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if finder is _PyplotFinder or find_spec is None:
            continue
        spec = find_spec("sitecustomize", path)
        if spec is not None:
            break
    else:
        return
    # What importlib.util.module_from_spec does, without importing it.
    module = None
    if hasattr(spec.loader, "create_module"):
        module = spec.loader.create_module(spec)
    if module is None:
        module = type(sys)(spec.name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    if spec.submodule_search_locations is not None:
        module.__path__ = spec.submodule_search_locations
    if spec.has_location:
        module.__file__ = spec.origin
        module.__cached__ = spec.cached
    # As a plain "import sitecustomize" would: the image's module takes the
    # name, and its errors go to site, which reports them as it always did.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


# The server's marker, written on standard output and standard error once
# the preloaded modules are imported: what comes before it on either
# stream is the start-up's, not the program's (and fails the warm start).
_WARM_MARKER = b"\0code-sandbox-mcp warm\0\n"


def _warm():
    """Wait, warm, for the program: see the comment at the top.

    A warm ready sandbox is started as `python3 /sandbox/main.py` before
    /sandbox/main.py exists, as the sandbox's program process (the child
    of its init, pid 1, and at its start the only other process of the
    sandbox), with standard input a pipe from the server. Nothing else is:
    a one-shot run's standard input is /dev/null, a session's driver
    exists when it starts, and a Python the program starts (whose standard
    input may well be a pipe, and whose script may be "-c") is never alone
    with the init, since the program's process lives as long as anything
    in the sandbox does, so this never reads a byte of its input. On that pipe the server writes
    one line at once, "csm-warm MODULE...", and a second, empty one once the
    program is in place; then it closes the pipe.

    The program must not be able to tell, beyond timing and the modules
    already imported: so standard input becomes /dev/null, as the server
    gives a cold program, sys.stdin is made anew over it exactly as Python
    makes it at start-up, and nothing of this function stays behind.
    """
    import stat

    try:
        if os.getppid() != 1 or not stat.S_ISFIFO(os.fstat(0).st_mode) or os.path.exists(sys.argv[0]):
            return
        me = str(os.getpid())
        if any(p.isdigit() and p not in ("1", me) for p in os.listdir("/proc")):
            return
    except (OSError, IndexError):
        return

    def line():
        data = b""
        while not data.endswith(b"\n"):
            try:
                # A byte at a time: the line that follows is not ours.
                chunk = os.read(0, 1)
            except InterruptedError:
                continue
            if not chunk:
                return None
            data += chunk
        return data

    first = line()
    if first is None or not first.startswith(b"csm-warm"):
        return
    for name in first.split()[1:]:
        try:
            __import__(name.decode())
        except BaseException as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            os.write(2, ("code-sandbox-mcp: warm start: cannot import %s: %s: %s\n"
                         % (name.decode(), type(err).__name__, reason[:300])).encode())
            os._exit(3)
    # Python's exit frees everything it imported, one object at a time:
    # about 100 ms for numpy and pandas. Objects that exist now belong to
    # the preloaded modules; frozen, the collector leaves them alone, and
    # the copies of the modules' namespaces (a list that holds itself, so
    # that nothing frees it) keep them from being freed one by one at
    # exit. What the program makes is collected and freed as ever.
    if len(first.split()) > 1:
        import gc

        keep = [dict(m.__dict__) for m in list(sys.modules.values()) if getattr(m, "__dict__", None) is not None]
        keep.append(keep)
        gc.collect()
        gc.freeze()
        del keep
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(1, _WARM_MARKER)
    os.write(2, _WARM_MARKER)
    if line() is None:
        os._exit(0)  # the sandbox is being destroyed: no program comes
    # Read and write, as the runtime opens it for a cold program.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    # As Python's create_stdio makes sys.stdin (Python/pylifecycle.c).
    old = sys.stdin
    if old is not None:
        import io

        buf = io.open(0, "rb", -1, None, None, None, False)
        buf.raw.name = "<stdin>"
        new = io.TextIOWrapper(buf, old.encoding, old.errors, "\n", old.line_buffering, old.write_through)
        new.mode = "r"
        sys.stdin = sys.__stdin__ = new


if os.path.exists(os.path.join(_HERE, "code_sandbox_mcp_figures.py")):
    sys.meta_path.insert(0, _PyplotFinder)
_user_site()
_chain_image_sitecustomize()
# A builtin, as in IPython, unless the image's own start-up made one.
if not hasattr(sys.modules["builtins"], "display"):
    sys.modules["builtins"].display = display
_warm()
del _warm

# code-sandbox-mcp: save matplotlib figures that a program shows or leaves
# open, so they come back as images without the program calling savefig.
#
# How it gets here: the executor mounts this directory read-only into every
# Python sandbox and puts it first on PYTHONPATH, so Python's site module
# imports this file as "sitecustomize" at start-up. It runs with the
# program's own privileges and touches nothing outside the sandbox.
#
# What it does:
#   1. At start-up it only adds a small finder to sys.meta_path. It imports
#      nothing else, so a program that never uses matplotlib pays (almost)
#      nothing. The finder looks at one module name, "matplotlib.pyplot";
#      for every other import it returns None straight away.
#   2. When matplotlib.pyplot is imported (directly, via pylab, or by a
#      library such as pandas), the finder wraps that one module's
#      exec_module. After pyplot has run, it:
#      - wraps Gcf.set_active, the one place every pyplot figure passes
#        through when it is created, to number figures in creation order.
#        (Wrapping pyplot.figure would add a frame to the tracebacks of
#        programs that pass it bad arguments; set_active gets none.)
#      - replaces pyplot.show: it saves the open figures not yet saved; on
#        non-interactive backends such as Agg it does not call the original,
#        which would only warn "FigureCanvasAgg is non-interactive".
#      - registers an atexit handler that saves the figures still open.
#        pyplot registered Gcf.destroy_all with atexit while it was being
#        imported; atexit runs handlers last-in first-out, so ours runs
#        before the figures are destroyed.
#   3. Each figure is saved once, as /workspace/figures/figure-N.png. Files
#      are created with O_EXCL; if N is taken (say by a subprocess), the
#      next free N is used.
#   4. If the image has its own sitecustomize further along sys.path, it is
#      run afterwards, so the image behaves as it did without this file.
#
# It must never change what the program does: __main__, sys.argv, the
# program's tracebacks and its exit status are left alone. (One exception:
# if importing matplotlib.pyplot itself raises, that traceback shows the
# exec_module frame of this file.) A figure that cannot be saved costs one
# line on stderr and nothing else. Figures are lost if the program ends
# with os._exit or is killed.
#
# Start-up cost: this file is compiled from source in every run (the mount
# is read-only, so no .pyc is written); that is about 2 ms, most of it the
# first compile() of the process, which any sitecustomize.py would pay.

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_FIGURES = "/workspace/figures"  # absolute: the program may chdir
_NON_INTERACTIVE = ("agg", "cairo", "pdf", "pgf", "ps", "svg", "template")


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
    try:
        _install(pyplot)
    except Exception as err:
        _say("figures will not be saved", err)
        return
    try:
        sys.meta_path.remove(_PyplotFinder)
    except ValueError:
        pass


def _install(pyplot):
    import atexit
    import functools
    import weakref

    Gcf = pyplot._pylab_helpers.Gcf
    created = weakref.WeakKeyDictionary()  # figure -> creation number
    saved = weakref.WeakSet()
    next_n = [1]  # the next N to try for figure-N.png
    count = [0]  # figures numbered so far

    set_active = Gcf.set_active.__func__

    def set_active_and_number(cls, manager):
        fig = getattr(getattr(manager, "canvas", None), "figure", None)
        if fig is not None and fig not in created:
            count[0] += 1
            created[fig] = count[0]
        return set_active(cls, manager)

    Gcf.set_active = classmethod(set_active_and_number)

    def save_open():
        figs = []
        for manager in Gcf.get_all_fig_managers():
            fig = getattr(getattr(manager, "canvas", None), "figure", None)
            if fig is not None and fig not in saved:
                figs.append(fig)
        figs.sort(key=lambda fig: created.get(fig, float("inf")))
        for fig in figs:
            saved.add(fig)
            try:
                _save(fig, next_n)
            except Exception as err:
                _say("could not save figure %s" % created.get(fig, "?"), err)

    original_show = pyplot.show

    @functools.wraps(original_show)
    def show(*args, **kwargs):
        try:
            save_open()
        except Exception:
            pass
        try:
            backend = str(pyplot.get_backend()).lower()
        except Exception:
            backend = ""
        if backend not in _NON_INTERACTIVE:
            return original_show(*args, **kwargs)

    def at_exit():
        try:
            save_open()
        except BaseException:
            pass

    pyplot.show = show
    atexit.register(at_exit)


def _save(fig, next_n):
    os.makedirs(_FIGURES, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        path = "%s/figure-%d.png" % (_FIGURES, next_n[0])
        next_n[0] += 1
        try:
            fd = os.open(path, flags, 0o644)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
    except BaseException:
        try:
            os.unlink(path)  # leave no half-written image behind
        except OSError:
            pass
        raise


def _say(what, err):
    try:
        reason = " ".join(str(err).split()) or type(err).__name__
        sys.stderr.write("code-sandbox-mcp: %s: %s\n" % (what, reason[:200]))
        sys.stderr.flush()
    except Exception:
        pass


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


sys.meta_path.insert(0, _PyplotFinder)
_chain_image_sitecustomize()

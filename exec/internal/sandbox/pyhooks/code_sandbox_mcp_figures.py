# code-sandbox-mcp: save matplotlib figures that a program shows or leaves
# open, so they come back as images without the program calling savefig.
# This module is the second half of the hook: sitecustomize.py, next to it,
# imports it only once the program has imported matplotlib.pyplot, so that
# a program that never plots does not compile it.
#
# How it gets here: the executor mounts this directory read-only into every
# Python sandbox of a language with figures and puts it first on
# PYTHONPATH, so Python's site module imports sitecustomize.py at
# start-up. Both run with the program's own privileges and touch nothing
# outside the sandbox.
#
# What the hook does:
#   1. At start-up, sitecustomize.py only adds a small finder to
#      sys.meta_path. It imports nothing else, so a program that never uses
#      matplotlib pays (almost) nothing. The finder looks at one module
#      name, "matplotlib.pyplot"; for every other import it returns None
#      straight away.
#   2. When matplotlib.pyplot is imported (directly, via pylab, or by a
#      library such as pandas), the finder wraps that one module's
#      exec_module. After pyplot has run, it imports this module, whose
#      install:
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
#   4. If the image has its own sitecustomize further along sys.path,
#      sitecustomize.py runs it afterwards, so the image behaves as it did
#      without the hook.
#   5. display(fig), or a session cell ending with a figure, saves it at
#      once through write_png, numbered with the rest, and mark_saved
#      keeps this hook from saving it again (see
#      code_sandbox_mcp_display.py, which may import this module before
#      pyplot is imported, or without it).
#   6. In a session, where one interpreter runs many cells, the session
#      driver calls end_of_cell() after each cell: it saves the figures
#      still open that were not saved yet, as show does, and closes all
#      figures, as Jupyter's inline backend does. Numbers keep counting
#      across cells. (A one-shot run never calls it.)
#
# It must never change what the program does: __main__, sys.argv, the
# program's tracebacks and its exit status are left alone. (One exception:
# if importing matplotlib.pyplot itself raises, that traceback shows the
# exec_module frame of sitecustomize.py.) A figure that cannot be saved
# costs one line on stderr and nothing else. Figures are lost if the
# program ends with os._exit or is killed. A program that plots sees this
# module in sys.modules.

import os
import sys

_FIGURES = "/workspace/figures"  # absolute: the program may chdir
_NON_INTERACTIVE = ("agg", "cairo", "pdf", "pgf", "ps", "svg", "template")


_end_of_cell = None  # set by install
_next_n = [1]  # the next N to try for figure-N.png
_saved = None  # the figures saved, a WeakSet once one is


def write_png(write):
    """Writes a new figure-N.png, the next N free, with write(f)."""
    _save(write, _next_n)


def mark_saved(fig):
    """Marks fig saved: the hook will not save it again."""
    global _saved
    if _saved is None:
        import weakref

        _saved = weakref.WeakSet()
    _saved.add(fig)


def end_of_cell():
    """Saves the open figures not saved yet and closes all figures."""
    if _end_of_cell is not None:
        _end_of_cell()


def install(pyplot):
    global _end_of_cell
    import atexit
    import functools
    import weakref

    Gcf = pyplot._pylab_helpers.Gcf
    created = weakref.WeakKeyDictionary()  # figure -> creation number
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
            if fig is not None and (_saved is None or fig not in _saved):
                figs.append(fig)
        figs.sort(key=lambda fig: created.get(fig, float("inf")))
        for fig in figs:
            mark_saved(fig)
            try:
                _save(functools.partial(fig.savefig, format="png"), _next_n)
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

    def end_cell():
        try:
            save_open()
        finally:
            pyplot.close("all")

    pyplot.show = show
    atexit.register(at_exit)
    _end_of_cell = end_cell


def _save(write, next_n):
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
            write(f)
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



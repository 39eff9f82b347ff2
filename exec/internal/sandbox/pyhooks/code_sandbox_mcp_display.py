# code-sandbox-mcp: rich display, as a notebook shows objects, for a
# client that reads text and images. sitecustomize.py, next to this file,
# puts a small display() in builtins and imports this module only when
# display() is first called with something to show, or when a session's
# last expression has a value that may have a rich form (see _rich there).
#
# What an object becomes, the first form it has in this order (IPython's
# idea of a bundle, ordered by what a model reads best):
#   1. Markdown: its _repr_markdown_(), or for a pandas DataFrame or Series
#      (which have none, and whose to_markdown needs tabulate) a Markdown
#      table made here, bounded by pandas' display options. Printed on
#      sys.stdout at that point, so it sits in order with the prints
#      around it.
#   2. PNG: its _repr_png_(), or for a matplotlib Figure its savefig. Saved
#      as /workspace/figures/figure-N.png, numbered with the figure hook's
#      figures, and comes back as image content as they do. A Figure shown
#      so is marked saved, so the hook does not save it again.
#   3. SVG, then HTML: its _repr_svg_() or _repr_html_(), saved as
#      /workspace/display/display-N.svg or .html, which the server returns
#      as an embedded resource of that MIME type. Over _MAX_BYTES, the text
#      form instead, and one line on stderr.
#   4. Text: repr(obj) printed, as IPython's display does; for a session's
#      last expression, show() returns False and the driver's displayhook
#      prints it as Python's does.
# JavaScript (_repr_javascript_) and the other forms are not used.
#
# A _repr_*_ method that raises or returns None is passed over, as IPython
# does; one that raises costs one line on stderr. Nothing here imports
# pandas or matplotlib: an object is theirs only if its type's module says
# so, and then they are loaded already.

import os
import sys

_WORKSPACE = "/workspace"  # absolute: the program may chdir
_DISPLAY = _WORKSPACE + "/display"
_FIGURES = "code_sandbox_mcp_figures"
_MAX_BYTES = 256 << 10  # each SVG or HTML file
_next_n = [1]  # the next N to try for display-N.*


def display(*objs, **kwargs):
    """Shows each of objs, in order, in its richest form (see above)."""
    for obj in objs:
        if not show(obj):
            _print(repr(obj))


def show(obj):
    """Shows obj in a rich form and returns True, or returns False if it
    has none that can be shown."""
    text = _markdown(obj)
    if text is not None:
        _print(text)
        return True
    if _png(obj):
        return True
    for method, ext in (("_repr_svg_", "svg"), ("_repr_html_", "html")):
        data = _call(obj, method)
        if data is None:
            continue
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        if not isinstance(data, str):
            continue
        data = data.encode("utf-8", "surrogateescape")
        if len(data) > _MAX_BYTES:
            _say("%s of %s is %d bytes, over %d: shown as text"
                 % (method, type(obj).__name__, len(data), _MAX_BYTES))
            return False
        try:
            _write_new(_DISPLAY, "display", ext, _next_n, lambda f: f.write(data))
        except Exception as err:
            _say("could not save the %s of %s" % (ext.upper(), type(obj).__name__), err)
            return False
        return True
    return False


def _print(text):
    """Prints text on sys.stdout, flushed before and after, so that it
    comes in order with what the program wrote around it."""
    out = sys.stdout
    if out is None:
        return
    try:
        out.flush()
    except Exception:
        pass
    out.write(text if text.endswith("\n") else text + "\n")
    try:
        out.flush()
    except Exception:
        pass


def _call(obj, method):
    """obj's method() if its type has it, its data if it returns a
    (data, metadata) pair; None if it has none, returns None or raises."""
    if getattr(type(obj), method, None) is None:
        return None  # looked up on the type: a proxy's __getattr__ has all
    try:
        data = getattr(obj, method)()
    except Exception as err:
        _say("%s of %s failed" % (method, type(obj).__name__), err)
        return None
    if isinstance(data, tuple) and len(data) == 2:
        data = data[0]
    return data


def _markdown(obj):
    """obj's Markdown, or None."""
    text = _call(obj, "_repr_markdown_")
    if isinstance(text, str):
        return text
    kind = _pandas_kind(obj)
    if kind is None:
        return None
    try:
        return _table(obj, kind)
    except Exception as err:
        _say("could not show the %s as Markdown" % kind, err)
        return None


def _of(obj, module, names):
    """Whether obj's type, or a base of it, is one of names in module."""
    for cls in getattr(type(obj), "__mro__", ()):
        if getattr(cls, "__module__", "").startswith(module) and cls.__name__ in names:
            return True
    return False


def _pandas_kind(obj):
    if _of(obj, "pandas.", ("DataFrame",)):
        return "DataFrame"
    if _of(obj, "pandas.", ("Series",)):
        return "Series"
    return None


def _option(pd, name, default):
    try:
        return pd.get_option(name)
    except Exception:
        return default


def _table(obj, kind):
    """A Markdown table of a DataFrame or Series, bounded as pandas bounds
    its own repr: over display.max_rows rows, display.min_rows of them
    (half from the head, half from the tail) around a row of "...";
    over display.max_columns columns, half from each side around a
    column of "..." (None for either: no bound; 0: as in a notebook,
    60 rows and 20 columns); and the shape line "[N rows x M columns]" when cut
    (or always, if display.show_dimensions is True)."""
    pd = sys.modules.get("pandas")
    max_rows = _option(pd, "display.max_rows", 60)
    min_rows = _option(pd, "display.min_rows", 10)
    max_cols = _option(pd, "display.max_columns", 20)
    # 0 means "as the terminal fits": pandas' default outside IPython.
    # A table has no terminal; 20 is its default in a notebook.
    if max_rows == 0:
        max_rows = 60
    if max_cols == 0:
        max_cols = 20
    dims = _option(pd, "display.show_dimensions", "truncate")
    precision = _option(pd, "display.precision", 6)

    frame = obj if kind == "DataFrame" else obj.to_frame(name="" if obj.name is None else obj.name)
    n_rows, n_cols = frame.shape
    rows = list(range(n_rows))
    cut_rows = bool(max_rows) and n_rows > max_rows
    if cut_rows:
        keep = min(min_rows or max_rows, max_rows)
        half = max(keep // 2, 1)
        rows = list(range(half)) + [None] + list(range(n_rows - half, n_rows))
    cols = list(range(n_cols))
    cut_cols = bool(max_cols) and n_cols > max_cols
    if cut_cols:
        half = max(max_cols // 2, 1)
        cols = list(range(half)) + [None] + list(range(n_cols - half, n_cols))

    def cell(v):
        return _cell(v, precision)

    index = frame.index
    header = [cell(_index_name(index))] + [("..." if c is None else cell(frame.columns[c])) for c in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        if r is None:
            lines.append("| " + " | ".join("..." for _ in header) + " |")
            continue
        line = [cell(index[r])]
        for c in cols:
            line.append("..." if c is None else cell(frame.iat[r, c]))
        lines.append("| " + " | ".join(line) + " |")
    cut = cut_rows or cut_cols
    if kind == "DataFrame" and (dims is True or (dims == "truncate" and cut)):
        lines.append("")
        lines.append("[%d rows x %d columns]" % (n_rows, n_cols))
    elif kind == "Series" and cut:
        lines.append("")
        lines.append("Length: %d, dtype: %s" % (n_rows, obj.dtype))
    return "\n".join(lines) + "\n"


def _index_name(index):
    names = [n for n in getattr(index, "names", [index.name]) if n is not None]
    return "" if not names else ", ".join(str(n) for n in names)


def _cell(v, precision):
    """v as the text of a table cell: no newline, "|" escaped."""
    if isinstance(v, float):
        if v == v and v not in (float("inf"), float("-inf")) and v == int(v) and abs(v) < 1e16:
            text = "%.1f" % v
        else:
            text = "%.*g" % (max(int(precision), 1), v)
    elif isinstance(v, tuple):
        text = ", ".join(str(x) for x in v)
    else:
        text = str(v)
    if len(text) > 200:
        text = text[:199] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _png(obj):
    """Saves obj's PNG as a figure; whether it did."""
    figures = _figures()
    if figures is None:
        return False  # a language without figures: no PNG is returned
    if _of(obj, "matplotlib.figure", ("Figure",)) and hasattr(obj, "savefig"):
        try:
            figures.write_png(lambda f: obj.savefig(f, format="png"))
        except Exception as err:
            _say("could not save the figure", err)
            return False
        figures.mark_saved(obj)
        return True
    data = _call(obj, "_repr_png_")
    if isinstance(data, str):
        try:
            import base64

            data = base64.b64decode(data)
        except Exception:
            data = None
    if not isinstance(data, bytes) or not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    try:
        figures.write_png(lambda f: f.write(data))
    except Exception as err:
        _say("could not save the PNG of %s" % type(obj).__name__, err)
        return False
    return True


def _figures():
    """The figure hook's module, loaded from this directory if it is not
    yet (it is there only for languages with figures); None if absent."""
    module = sys.modules.get(_FIGURES)
    if module is not None:
        return module
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, _FIGURES + ".py")
    if not os.path.exists(path):
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location(_FIGURES, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_FIGURES] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_FIGURES, None)
        raise
    return module


def _write_new(directory, stem, ext, next_n, write):
    """Writes a new file directory/stem-N.ext, N the first free from
    next_n[0] on (O_EXCL: a file another process made is never
    overwritten), with write(f); removes it if write fails."""
    os.makedirs(directory, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        path = "%s/%s-%d.%s" % (directory, stem, next_n[0], ext)
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
            os.unlink(path)
        except OSError:
            pass
        raise


def _say(what, err=None):
    try:
        if err is not None:
            reason = " ".join(str(err).split()) or type(err).__name__
            what = "%s: %s" % (what, reason[:200])
        sys.stderr.write("code-sandbox-mcp: display: %s\n" % what)
        sys.stderr.flush()
    except Exception:
        pass

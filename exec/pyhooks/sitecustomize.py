# code-sandbox-mcp: the start-up half of the figure hook. See
# code_sandbox_mcp_figures.py, next to this file, for what the hook does and
# why; this file only notices the import of matplotlib.pyplot and hands
# pyplot to it. It is kept small because Python compiles it from source at
# every start (the directory is read-only: no .pyc is ever written), and
# imports nothing but os and sys, which are loaded already.

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
        import importlib.util

        name = "code_sandbox_mcp_figures"
        spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
        figures = importlib.util.module_from_spec(spec)
        sys.modules[name] = figures
        spec.loader.exec_module(figures)
        figures.install(pyplot)
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

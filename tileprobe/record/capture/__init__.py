"""Record every ``cuda.tile.launch`` of one Python process into a JSON-lines file — cheaply, and never in the way.

This package is STANDALONE (standard library only, no import of the tileprobe package; its modules import one
another relatively): ``tileprobe record`` loads this ``__init__.py`` by path, as a package under the module name
:data:`MODULE_NAME`, from a generated ``sitecustomize.py`` in every Python process the recorded command starts, so
it must not put tileprobe (or anything else) on the program's ``sys.path``. Its modules, one role each:
:mod:`.names` (shared names and limits), :mod:`.describe` (arguments, kernels, call sites), :mod:`.recorder` (the
per-process launch log), :mod:`.search` (describing, recording and wrapping searches), :mod:`.facts` (this
process's GPU and compiler, provenance), :mod:`.tables` (reading a tune table), :mod:`.answer` (answering searches
from it); this entry installs the patches and re-exports what tileprobe and the hook use.

How the launch is intercepted: ``ct.launch`` is ``cuda.tile._cext.launch``, a C function that ``cuda/tile/__init__.py``
re-exports with ``from cuda.tile._cext import launch``; cuTile has no launch hook. :func:`install` puts a
``sys.meta_path`` finder in front that wraps the extension's ``launch`` right after the extension module has
executed — before ``cuda.tile`` (or any user module) can take a reference to it. When ``cuda.tile`` is already
imported, :func:`ensure_patched` wraps it and rebinds every module-level reference to the old function.

What one launch costs: a type-dispatched description of each argument (for a torch tensor: dtype, shape, strides,
``data_ptr``), a walk up the frames for the call site (classification cached per code object) and a dict lookup.
A launch seen for the first time (new kernel object, arguments, grid or call site) writes one line at once with
``os.write`` (unbuffered: it survives a crash); repeats only count, and counts are written when a count reaches a
power of two, at most a second after the last write, and at exit. ``benchmarks/programs/bench_record.py`` measures it.

Line types (``"t"``): ``process`` (argv, cwd, Python, cuda-tile), ``kernel`` (one per kernel object: function,
where it lives, its compiler options), ``launch`` (kernel id, grid, arguments, call site), ``counts`` (absolute
launch counts per launch id; the last one wins), ``overflow`` (a negative launch id counting the launches of a
kernel beyond the per-process limit of distinct launches), ``arch`` (compute capability, once the driver is up),
``error`` (why recording stopped); ``search`` (one call of ``cuda.tile.tune.exhaustive_search``, described before it
runs: every configuration with its hints, grid and arguments, the problem key), ``search_again`` (the same search
once more), ``search_done`` (its pick, the arguments it wrote, its wall time) — :mod:`tileprobe.record.searches`.

Searches are also *answered* here (``tileprobe use TABLE``, ``$TILEPROBE_USE_TABLE``, ``tileprobe.use()``): a search
whose key and provenance match a row of a tune table returns that row's configuration — one of the program's own
candidates — as a ``cuda.tile.tune.TuningResult`` without running; a miss runs the program's search, says so once on
stderr and appends the search to ``TABLE.misses.jsonl`` (:class:`Answerer`).

Private cuTile names read here (cuda-tile 1.5–1.7; each read falls back to "unknown"): ``kernel._pyfunc``,
``kernel._compiler_options``, ``ByTarget._by_target`` / ``._default``, ``_cext.default_tile_context.config
.compiler_timeout_sec`` (``ct.compiler_timeout``) and ``cuda.tile._compile._get_compiler_version_string`` (the
tileiras build cuTile compiles with, for the provenance check).
"""
from __future__ import annotations

import atexit
import os
import sys
import time

from .answer import Answerer
from .describe import _plain, align_of, describe, describe_kernel, kernel_hints, to_json
from .ext import usehook
from .facts import PROVENANCE, build_of, compiler_timeout_s, device_facts, stale_reasons
from .names import (
    ALIGN_CAP,
    CEXT_MODULE,
    DEFAULT_MAX_DISTINCT,
    ENV_DIR,
    ENV_MAX_DISTINCT,
    ENV_SKIP,
    ENV_USE,
    FLUSH_INTERVAL_S,
    HINT_FIELDS,
    LIBRARY_PACKAGES,
    MODULE_NAME,
    SCHEMA,
    TUNE_MODULE,
)
from .recorder import Recorder
from .search import (
    MAX_SEARCH_CONFIGS,
    SOURCE_LIMIT_BYTES,
    NotDescribed,
    Search,
    config_json,
    source_sha256,
    wrap_search,
)
from .tables import (
    ENV_NO_INDEX,
    INDEX_SCHEMA,
    INDEX_SUFFIX,
    TABLE_LIMIT_BYTES,
    TABLE_SCHEMA,
    TABLE_WARN_BYTES,
    TableReadError,
    append_regular,
    index_bucket,
    index_mismatch,
    index_rows,
    read_json_file,
    read_regular,
    row_problems,
)

__all__ = [
    "ALIGN_CAP",
    "CEXT_MODULE",
    "DEFAULT_MAX_DISTINCT",
    "ENV_DIR",
    "ENV_MAX_DISTINCT",
    "ENV_NO_INDEX",
    "ENV_SKIP",
    "ENV_USE",
    "FLUSH_INTERVAL_S",
    "HINT_FIELDS",
    "INDEX_SCHEMA",
    "INDEX_SUFFIX",
    "LIBRARY_PACKAGES",
    "MAX_SEARCH_CONFIGS",
    "MODULE_NAME",
    "PROVENANCE",
    "SCHEMA",
    "SOURCE_LIMIT_BYTES",
    "TABLE_LIMIT_BYTES",
    "TABLE_SCHEMA",
    "TABLE_WARN_BYTES",
    "TUNE_MODULE",
    "Answerer",
    "NotDescribed",
    "Recorder",
    "Search",
    "TableReadError",
    "align_of",
    "append_regular",
    "bootstrap",
    "build_of",
    "compiler_timeout_s",
    "config_json",
    "describe",
    "describe_kernel",
    "device_facts",
    "ensure_patched",
    "index_bucket",
    "index_mismatch",
    "index_rows",
    "install",
    "install_use",
    "kernel_hints",
    "read_json_file",
    "read_regular",
    "row_problems",
    "source_sha256",
    "stale_reasons",
    "start",
    "to_json",
    "uninstall",
    "usehook",
    "wrap",
    "wrap_search",
]

_RECORDER: Recorder | None = None
_FINDER = None
_USE: Answerer | None = None


def _in_use() -> tuple:
    """The recorder and the answerer in use now, ``(Recorder | None, Answerer | None)`` (read by the search wrapper
    at each search)."""
    return _RECORDER, _USE


# --- patching ct.launch ---------------------------------------------------------------------------------

def wrap(original, recorder: Recorder):
    """A function that records each call through ``recorder`` and then calls ``original`` with the same arguments
    (so argument errors, results and exceptions are ``original``'s)."""

    def launch(*args, **kwargs):
        new = None
        if not recorder.failed and len(args) == 4:
            try:
                kernel_args = args[3]
                if isinstance(kernel_args, (tuple, list)):
                    new = recorder.capture(args[1], args[2], kernel_args, kwargs, sys._getframe(1))
            except Exception as e:
                recorder.fail(e)
        if new is None:
            return original(*args, **kwargs)
        t0 = time.perf_counter()
        try:
            out = original(*args, **kwargs)
        except BaseException as exc:
            _first_call(recorder, new, t0, exc)
            raise
        _first_call(recorder, new, t0, None)
        return out

    launch.__name__ = getattr(original, "__name__", "launch")
    launch.__qualname__ = getattr(original, "__qualname__", "launch")
    launch.__doc__ = getattr(original, "__doc__", None)
    vars(launch).update(__wrapped__=original, _tileprobe_record=True)   # what uninstall and ensure_patched look for
    return launch


def _first_call(recorder: Recorder, entry, t0: float, exc) -> None:
    try:
        recorder.first_call(entry, time.perf_counter() - t0, exc)
    except Exception as e:
        recorder.fail(e)


def _rebind(old, new) -> int:
    """Point every module-level name bound to ``old`` at ``new`` (e.g. a ``from cuda.tile import launch`` taken
    before recording began). Returns how many names were rebound."""
    n = 0
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for name, value in list(d.items()):
            if value is old:
                try:
                    setattr(mod, name, new)
                    n += 1
                except Exception:
                    pass
    return n


def _patch_module(module) -> None:
    """Wrap what this module exposes that we hook: ``launch`` (recording) or ``exhaustive_search`` (recording or
    answering), rebinding every module-level reference to the old function."""
    if module.__name__ == CEXT_MODULE and _RECORDER is not None:
        current = getattr(module, "launch", None)
        if current is not None and not getattr(current, "_tileprobe_record", False):
            module.launch = wrap(current, _RECORDER)
            _rebind(current, module.launch)
    if module.__name__ == CEXT_MODULE and _USE is not None and usehook() is not None:
        usehook().count_launches(module, _rebind)      # `tileprobe use`'s coverage: launches per kernel
    if module.__name__ == TUNE_MODULE and (_RECORDER is not None or _USE is not None):
        current = getattr(module, "exhaustive_search", None)
        stub = None
        if current is not None and getattr(current, "_tileprobe_stub", False):   # the hook's stand-in: unwrap it
            stub, current = current, current.__wrapped__
        if current is not None and not getattr(current, "_tileprobe_record", False):
            module.exhaustive_search = wrap_search(current, _in_use)
            _rebind(current, module.exhaustive_search)
            if stub is not None:
                _rebind(stub, module.exhaustive_search)


def ensure_patched() -> bool:
    """Wrap ``cuda.tile._cext.launch`` and ``cuda.tile.tune._tune.exhaustive_search`` where loaded and not wrapped
    yet (e.g. replaced by another sitecustomize), rebinding existing references. Returns whether ``launch`` is
    wrapped now."""
    for name in (CEXT_MODULE, TUNE_MODULE):
        mod = sys.modules.get(name)
        if mod is not None:
            _patch_module(mod)
    cext = sys.modules.get(CEXT_MODULE)
    return cext is not None and getattr(getattr(cext, "launch", None), "_tileprobe_record", False)


class _PatchingLoader:
    """Delegates to the real loader of ``cuda.tile._cext``, then wraps its ``launch``."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            _patch_module(module)
        except Exception as e:
            if _RECORDER is not None:
                _RECORDER.fail(e)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _CextFinder:
    """``sys.meta_path`` entry that hands ``cuda.tile._cext`` and ``cuda.tile.tune._tune`` a patching loader; other
    modules are not its business."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in (CEXT_MODULE, TUNE_MODULE):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None

    def invalidate_caches(self):
        pass


def install(out_dir: str | None = None):
    """Start recording this process into ``out_dir`` (default ``$TILEPROBE_RECORD_DIR``). Idempotent.

    Returns the :class:`Recorder`, or None when no folder is given.
    """
    global _RECORDER, _FINDER
    if _RECORDER is not None:
        return _RECORDER
    out_dir = out_dir or os.environ.get(ENV_DIR)
    if not out_dir:
        return None
    _RECORDER = Recorder(out_dir)
    _install_finder()
    ensure_patched()
    _install_excepthook()
    atexit.register(_RECORDER.close)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _RECORDER and _RECORDER.after_fork())
    return _RECORDER


def _install_excepthook() -> None:
    """Log this process's uncaught exception (``{"t": "exit_error"}``: its type and first 500 characters) before
    the program's own ``sys.excepthook`` prints it, so that ``record`` and ``tune -- CMD`` can quote why a program
    ended before it launched (e.g. a CPU-only torch: "Torch not compiled with CUDA enabled"). Never raises."""
    previous = sys.excepthook

    def hook(etype, value, tb):
        try:
            rec = _RECORDER
            if rec is not None and not rec.failed and os.getpid() == rec.pid and etype is not KeyboardInterrupt:
                with rec.lock:
                    rec._write({"t": "exit_error", "error": _plain(f"{etype.__name__}: {value}")[:500]})
        except Exception:
            pass
        previous(etype, value, tb)
    sys.excepthook = hook


def _install_finder() -> None:
    global _FINDER
    if _FINDER is None and not all(m in sys.modules for m in (CEXT_MODULE, TUNE_MODULE)):
        _FINDER = _CextFinder()
        sys.meta_path.insert(0, _FINDER)


def install_use(table: str | None = None):
    """Answer this process's ``exhaustive_search`` calls from the tune table ``table`` (default
    ``$TILEPROBE_USE_TABLE``). Idempotent for one table; another table replaces it. Returns the :class:`Answerer`,
    or None when no table is given."""
    global _USE
    table = table or os.environ.get(ENV_USE)
    if not table:
        return None
    if _USE is None or _USE.path != os.path.abspath(table):
        _USE = Answerer(table)
    _install_finder()
    ensure_patched()
    return _USE


def uninstall() -> None:
    """Stop recording in this process: flush, put the original ``launch`` back everywhere, remove the finder."""
    global _RECORDER, _FINDER, _USE
    if _FINDER is not None and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    _FINDER = None
    _USE = None
    for name, attr in ((CEXT_MODULE, "launch"), (TUNE_MODULE, "exhaustive_search")):
        mod = sys.modules.get(name)
        current = getattr(mod, attr, None) if mod is not None else None
        while current is not None and getattr(current, "_tileprobe_record", False):   # coverage on recording
            original = current.__wrapped__
            setattr(mod, attr, original)
            _rebind(current, original)
            current = original
    if _RECORDER is not None:
        _RECORDER.close()
        if _RECORDER.fd is not None:
            os.close(_RECORDER.fd)
            _RECORDER.fd = None
    _RECORDER = None


#: Hook folders whose ``sitecustomize.py`` ran in this process (``tileprobe use`` and ``tileprobe record`` /
#: ``tune -- CMD`` each put one on PYTHONPATH; nested, both are there): each runs once, and the chain to the
#: program's own ``sitecustomize`` passes over every one of them, so it runs once too.
def _hook_state():
    """The hook's state shared with the generated ``sitecustomize`` files (:data:`tileprobe.record.hook.STATE_MODULE`):
    ``dirs``, the hook folders that ran in this process."""
    import types
    st = sys.modules.get("_tileprobe_hook_state")
    if st is None:
        st = sys.modules["_tileprobe_hook_state"] = types.ModuleType("_tileprobe_hook_state")
        st.dirs, st.lazy = set(), None
    return st


_HOOK_DIRS: set = _hook_state().dirs


def start() -> None:
    """What the generated ``sitecustomize`` runs when it loads this module (at the first import of cuda.tile's
    launch or tuner module): start recording (``$TILEPROBE_RECORD_DIR``) and answering (``$TILEPROBE_USE_TABLE``);
    a failure is one line on stderr and the program runs as written."""
    try:
        install()
    except Exception as e:
        sys.stderr.write(f"tileprobe record: could not start recording in process {os.getpid()}: "
                         f"{type(e).__name__}: {_plain(e)}; the program runs unrecorded\n")
    try:
        install_use()
    except Exception as e:
        sys.stderr.write(f"tileprobe use: could not start in process {os.getpid()}: {type(e).__name__}: {_plain(e)}; "
                         "every search runs as the program wrote it\n")


def bootstrap(sitecustomize_file: str) -> None:
    """What a ``sitecustomize.py`` generated by an older tileprobe runs (today's load this module only when cuda.tile
    is imported, then call :func:`start`): install, then run the ``sitecustomize`` this one shadows (further along
    ``sys.path``, passing over every hook folder), then wrap ``launch`` again if that one replaced it. A second
    hook's ``sitecustomize`` reached by the chain runs this again for its folder only (no loop); any failure of ours
    is one line on stderr and the program runs as written."""
    hook_dir = os.path.dirname(os.path.abspath(sitecustomize_file))
    if hook_dir in _HOOK_DIRS:
        return
    _HOOK_DIRS.add(hook_dir)
    start()
    try:
        _chain()
    finally:
        try:
            ensure_patched()
        except Exception as e:
            if _RECORDER is not None:
                _RECORDER.fail(e)


def _chain() -> None:
    """Run the first ``sitecustomize`` on ``sys.path`` outside the hook folders that already ran (the program's
    own, or another tileprobe hook's, which chains on in turn). An error in the program's own ``sitecustomize``
    is the program's: it propagates as it would without us (``site`` prints it)."""
    import importlib.machinery
    import importlib.util
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) not in _HOOK_DIRS]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

"""Searches (``cuda.tile.tune.exhaustive_search``): describe one before it runs (every configuration with its
hints, grid and arguments; the problem key), record it and its end, and the wrapper that answers it from the
table in use or records it. Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import json
import os
import sys
import time

from .describe import _hint_json, _plain, _site, describe, describe_kernel, to_json
from .ext import usehook
from .fields import Record
from .names import CEXT_MODULE, MODULE_NAME
from .recorder import Recorder
from .result import _tuning_result
from .tables import read_regular

_PLAIN = (int, float, str, bool, type(None))


def config_json(cfg):
    """A configuration object of a search as JSON: a dict, a ``SimpleNamespace`` or any object by its attributes,
    a named tuple by its fields, tuples/lists item by item; a ``ByTarget`` as :func:`_hint_json` writes it, any
    other value by ``repr``. Two configurations are the same when their JSON is."""
    if isinstance(cfg, _PLAIN):
        return cfg
    if isinstance(cfg, dict):
        return {str(k): config_json(v) for k, v in cfg.items()}
    if hasattr(cfg, "_asdict"):
        return {str(k): config_json(v) for k, v in cfg._asdict().items()}
    if isinstance(cfg, (tuple, list)):
        return [config_json(x) for x in cfg]
    if hasattr(cfg, "_by_target"):
        return _hint_json(cfg)
    d = getattr(cfg, "__dict__", None)
    if isinstance(d, dict):
        return {str(k): config_json(v) for k, v in d.items() if not str(k).startswith("_")}
    return repr(cfg)


def _canon(obj):
    """``obj`` as JSON reads it back (tuples become lists), so recorded and live descriptions compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=repr))


def _strict_text(obj) -> str:
    """``obj`` as strict JSON text, keys sorted: NaN and ±infinity as ``null``, as a tune table stores them
    (``tileprobe.schema.json_text``), so a configuration holding NaN compares equal to its row."""
    loose = json.loads(json.dumps(obj, sort_keys=True, default=repr), parse_constant=lambda _: None)
    return json.dumps(loose, sort_keys=True)


_SOURCE_SHA: dict = {}
#: A kernel source file larger than this is not hashed (its hash is "unknown"): kernel files are kilobytes, and a
#: ``kernel_file`` that ``record.json`` names may be anything (``/dev/zero``).
SOURCE_LIMIT_BYTES = 16 << 20


def source_sha256(path: str | None) -> str | None:
    """SHA-256 of a kernel's source file (hex), cached per path; None when it cannot be read (missing, not a regular
    file, above :data:`SOURCE_LIMIT_BYTES`). The file, not the function: a helper the kernel calls in the same file
    changes it too."""
    if not path:
        return None
    if path not in _SOURCE_SHA:
        import hashlib
        try:
            _SOURCE_SHA[path] = hashlib.sha256(read_regular(path, SOURCE_LIMIT_BYTES)).hexdigest()
        except (OSError, ValueError, TypeError):    # not a regular file, larger than any kernel source, not a path
            _SOURCE_SHA[path] = None
    return _SOURCE_SHA[path]


def _compiler_timeout_s():
    try:
        return sys.modules[CEXT_MODULE].default_tile_context.config.compiler_timeout_sec
    except Exception:
        return None


#: A search of more configurations than this is not described (nor recorded, nor answered): said with the number.
#: Each configuration is a compile and a timing in the tune (3,000 took a line of 1.2 MB in the launch log).
MAX_SEARCH_CONFIGS = 1024


class NotDescribed(Exception):
    """A search seen but not described: every configuration's ``grid_fn`` / ``args_fn`` / ``hints_fn`` /
    kernel factory raised, or the space is above :data:`MAX_SEARCH_CONFIGS`; the message says which."""


class _ConfigError(Exception):
    def __init__(self, fn: str):
        super().__init__(fn)
        self.fn = fn


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def _describe_config(cfg, grid_fn, kernel, args_fn, hints_fn) -> tuple:
    """(config, kernel object, hints, grid, arguments) of one configuration, each of the program's functions called
    once. Raises :class:`_ConfigError` naming the function that raised (the cause is its exception)."""
    def call(name, fn, *a):
        try:
            return fn(*a)
        except Exception as e:
            raise _ConfigError(name) from e
    k = kernel if hasattr(kernel, "replace_hints") else call("the kernel factory", kernel, cfg)
    hints = dict(call("hints_fn", hints_fn, cfg)) if hints_fn is not None else {}
    grid = call("grid_fn", grid_fn, cfg)
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    return cfg, k, hints, grid, tuple(call("args_fn", args_fn, cfg))


class ConfigDesc(Record):
    """One configuration of a search as JSON: the program's ``config`` (:func:`config_json`), the ``hints`` its
    ``hints_fn`` gave, the ``grid`` its ``grid_fn`` gave and its ``args`` (argument descriptions, ``to_json``)."""
    __slots__ = ("args", "config", "grid", "hints")
    config: object
    hints: dict
    grid: list
    args: list

    def choice(self) -> dict:
        """``{"config": …, "hints": …}``: what a table row's pick is compared with."""
        return {"config": self.config, "hints": self.hints}

    def to_json(self) -> dict:
        """The object a ``search`` line's ``configs`` holds (keys in this order)."""
        return {"config": self.config, "hints": self.hints, "grid": self.grid, "args": self.args}


class KernelNames(Record):
    """What the search reads of its kernel's description (``describe_kernel``): ``name``, ``qualname``,
    ``module`` and the ``file`` it lives in (each None when unknown)."""
    __slots__ = ("file", "module", "name", "qualname")
    name: str | None
    qualname: str | None
    module: str | None
    file: str | None


class Search:
    """One call of ``exhaustive_search``, described before it runs.

    ``entries``: per configuration (config object, kernel object, hints dict, grid tuple, argument tuple);
    ``doc``: the JSON description (``configs`` with config/hints/grid/args, ``problem``: the argument positions
    equal in every configuration, ``key``: SHA-256 prefix of kernel + problem arguments + the space, and the
    keyword arguments but ``quiet`` when it passed any).
    """

    def __init__(self, configs, grid_fn, kernel, args_fn, hints_fn, options=None):
        #: the search's keyword arguments as JSON (flush_l2, single_run_timeout_sec, …; a callable by its name)
        self.options = {k: v if isinstance(v, _PLAIN) else {"callable" if callable(v) else "object":
                                                            _plain(getattr(v, "__qualname__", type(v).__name__))}
                        for k, v in (options or {}).items()}
        if len(configs) > MAX_SEARCH_CONFIGS:
            raise NotDescribed(f"{len(configs):,} configurations, more than the {MAX_SEARCH_CONFIGS:,} tileprobe "
                               "describes (and tunes) from one search; search a smaller space, or write a probe "
                               "whose constraint keeps the configurations worth compiling")
        self.entries = []
        #: (position among the program's configurations, "grid_fn raised ValueError: …") per one left out
        self.skipped: list = []
        self.space_size = len(configs)
        for i, cfg in enumerate(configs):
            try:
                self.entries.append(_describe_config(cfg, grid_fn, kernel, args_fn, hints_fn))
            except Exception as e:          # the program's own function: its search fails that one too
                self.skipped.append((i, f"{_plain(e.fn if isinstance(e, _ConfigError) else 'describing it')} "
                                        f"raised {_plain(_short(e.__cause__ or e))}"))
        if not self.entries:
            reasons = sorted({why for _, why in self.skipped})
            raise NotDescribed(f"every one of its {len(configs):,} configurations failed: " + "; ".join(reasons[:3])
                               + (f" (and {len(reasons) - 3} other reasons)" if len(reasons) > 3 else ""))
        self.configs = [e[0] for e in self.entries]
        descs = [tuple(describe(a) for a in e[4]) for e in self.entries]
        n = len(descs[0])
        #: the first configuration's :func:`describe` tuples (kind letter first: ``A`` array, ``T`` sequence, …)
        self.first_descs = descs[0]
        self.problem = [i for i in range(n) if all(len(d) == n and d[i] == descs[0][i] for d in descs)]
        self.kernel = self.entries[0][1]
        kd = describe_kernel(self.kernel)
        #: the kernel's names (:class:`KernelNames`); ``kernel_doc``: its whole description, as lines carry it
        self.kernel_names = KernelNames.from_json(kd)
        self.source_sha256 = source_sha256(self.kernel_names.file)
        #: per configuration its :class:`ConfigDesc`, in the program's order
        self.config_descs = [ConfigDesc(config=config_json(e[0]), hints={h: _hint_json(v) for h, v in e[2].items()},
                                        grid=list(e[3]), args=[to_json(a) for a in d])
                             for e, d in zip(self.entries, descs)]
        material = {"kernel": [self.kernel_names.module, self.kernel_names.qualname],
                    "problem": [[i, to_json(_key_desc(descs[0][i]))] for i in self.problem],
                    "space": [c.choice() for c in self.config_descs]}
        asked = {k: v for k, v in self.options.items() if k != "quiet"}
        if asked:       # flush_l2=False, a benchmark_fn …: another search than the same space without them
            material["options"] = asked
        import hashlib
        self.key = hashlib.sha256(json.dumps(material, sort_keys=True, default=repr).encode()).hexdigest()[:16]
        self.kernel_doc = kd
        self.kernels_same = all(getattr(e[1], "_pyfunc", None) is getattr(self.kernel, "_pyfunc", None)
                                for e in self.entries)

    def doc(self, sites=(None, None)) -> dict:
        """The JSON description (a ``search`` line without its ids)."""
        return {"key": self.key, "configs": [c.to_json() for c in self.config_descs], "problem": self.problem,
                "skipped": [list(x) for x in self.skipped], "space_size": self.space_size,
                "source_sha256": self.source_sha256, "site": sites[0], "launch_site": sites[1],
                "compiler_timeout_s": _compiler_timeout_s(), "same_kernel": self.kernels_same,
                "options": self.options}

    def index_of(self, config) -> int | None:
        """The position of a configuration object among the program's (identity first, then equal JSON)."""
        for i, c in enumerate(self.configs):
            if c is config:
                return i
        want = _canon(config_json(config))
        for i, c in enumerate(self.config_descs):
            if _canon(c.config) == want:
                return i
        return None

    def arrays_at(self, positions):
        """(position, argument) of the first configuration's arguments at ``positions``."""
        args = self.entries[0][4]
        return [(i, args[i]) for i in positions if i < len(args)]


#: Base-address alignment, in bytes, up to which a search's key tells arrays apart: what cuTile's JIT infers
#: (16-byte divisibility, the ``KernelSignature``'s alignment); a larger alignment is the allocator's luck.
KEY_ALIGN = 16


def _key_desc(d: tuple) -> tuple:
    """A :func:`describe` tuple as the search key sees it: alignments capped at :data:`KEY_ALIGN`."""
    if d[0] == "A":
        return d[:4] + (min(d[4], KEY_ALIGN),) + d[5:]
    if d[0] == "T":
        return ("T", d[1], tuple(_key_desc(x) for x in d[2]))
    return d


def _checksum(a):
    """A cheap fingerprint of an array's values read through its own methods (torch: ``double().sum()``), or of a
    sequence's items; None when it has no such methods (a fake device array)."""
    if isinstance(a, (tuple, list)):
        sums = [_checksum(x) for x in a]
        return None if all(x is None for x in sums) else tuple(sums)
    try:
        d = a.detach().double().nan_to_num(0.0, 1e300, -1e300)
        return (float(d.sum()), float(d.abs().sum()))
    except Exception:
        return None


def _written(search: Search, before: dict) -> list[int]:
    """Argument positions (of the problem's) whose values the search changed: the outputs."""
    out = []
    for i, a in search.arrays_at(before):
        after = _checksum(a)
        if after is not None and after != before[i]:
            out.append(i)
    return out


def _record_search(recorder: Recorder, search: Search, frame):
    """Write the ``search`` line (or count a repeat); return (search id, checksums before) for :func:`_end`."""
    call, launch = recorder.sites.frames(frame)
    with recorder.lock:
        sid = recorder.searches.get(search.key)
        if sid is not None:
            recorder._write({"t": "search_again", "id": sid})
            return None
        sid = recorder.searches[search.key] = len(recorder.searches)
    kids = [recorder._kernel_id(e[1]) for e in search.entries]
    doc = search.doc((_site(call), _site(launch)))
    doc.update(configs=[{**c.to_json(), "kernel": kid} for c, kid in zip(search.config_descs, kids)])
    recorder._write({"t": "search", "id": sid, "kernel": kids[0], **doc})
    arrays = [i for i in search.problem if search.first_descs[i][0] in ("A", "T")]     # arrays, sequences
    return sid, {i: _checksum(a) for i, a in search.arrays_at(arrays)}


def _record_undescribed(recorder: Recorder, kernel, n_configs: int, why: str, frame) -> None:
    """Write a ``search_failed`` line: a search seen that could not be described (``why``), with its kernel when
    it is a kernel object (not a factory), its size and call site; once per call site and reason."""
    call, launch = recorder.sites.frames(frame)
    line = {"t": "search_failed", "configs": n_configs, "reason": why, "site": _site(call),
            "launch_site": _site(launch)}
    if hasattr(kernel, "replace_hints"):
        line["kernel"] = recorder._kernel_id(kernel)
        line["name"] = getattr(getattr(kernel, "_pyfunc", None), "__name__", None)
    seen = (line["site"], why)
    with recorder.lock:
        if seen in recorder.undescribed:
            return
        recorder.undescribed.add(seen)
    recorder._write(line)


def _end_search(recorder: Recorder, search: Search, begun, result, error, wall_s: float) -> None:
    if begun is None:
        return
    sid, before = begun
    line = {"t": "search_done", "id": sid, "wall_s": wall_s, "outputs": _written(search, before)}
    if error is not None:
        line["error"] = f"{type(error).__name__}: {str(error)[:500]}"
    else:
        best = getattr(result, "best", None)
        line["best"] = search.index_of(getattr(best, "config", None)) if best is not None else None
        line["best_us"] = getattr(best, "mean_us", None)
        line["failures"] = [[search.index_of(f[0]), getattr(f[1], "__name__", str(f[1])), str(f[2])[:300]]
                            for f in (getattr(result, "failures", None) or ())]
    recorder._write(line)


def wrap_search(original, in_use):
    """``exhaustive_search`` that first answers from the table in use, else records the search, and runs
    ``original`` with the very same arguments; ``in_use()`` gives the ``(Recorder | None, Answerer | None)`` in use
    at each search (:func:`tileprobe.record.capture._in_use`). A failure of ours is reported once and
    the program's search runs as it would."""

    def exhaustive_search(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, **kwargs):
        rec, use = in_use()
        if (rec is None or rec.failed) and use is None:
            return original(search_space, stream, grid_fn, kernel, args_fn, hints_fn, **kwargs)
        configs = search_space if isinstance(search_space, (list, tuple)) else list(search_space)
        search = begun = None
        try:
            search = Search(configs, grid_fn, kernel, args_fn, hints_fn, kwargs) if configs else None
        except Exception as e:   # the program's own functions raised: its search will say so
            why = str(e) if isinstance(e, NotDescribed) else _short(e)
            if use is not None:
                use.say_once("describe", f"a search could not be described ({why}): it runs as the program wrote it")
                if usehook() is not None:        # counted in the coverage as a miss with that reason
                    usehook().get().undescribed(kernel, why)
            if rec is not None and not rec.failed:
                try:
                    _record_undescribed(rec, kernel, len(configs), why, sys._getframe(1))
                except Exception as e2:
                    rec.fail(e2)
        if search is not None and use is not None:
            answer = use.answer(search, sys._getframe(1))
            if answer is not None:
                return answer
        if search is not None and rec is not None and not rec.failed:
            try:
                begun = _record_search(rec, search, sys._getframe(1))
            except Exception as e:
                rec.fail(e)
        t0 = time.perf_counter()
        try:
            def run():
                return original(configs, stream, grid_fn, kernel, args_fn, hints_fn, **kwargs)
            result = _search_once(use, search, run) if begun is None else run()
        except BaseException as e:
            _end_safely(rec, search, begun, None, e, time.perf_counter() - t0)
            raise
        _end_safely(rec, search, begun, result, None, time.perf_counter() - t0)
        return result

    exhaustive_search.__name__ = getattr(original, "__name__", "exhaustive_search")
    exhaustive_search.__qualname__ = getattr(original, "__qualname__", "exhaustive_search")
    exhaustive_search.__doc__ = getattr(original, "__doc__", None)
    exhaustive_search.__wrapped__ = original
    exhaustive_search._tileprobe_record = True
    return exhaustive_search


def _search_once(use, search, run):
    """A miss under ``use``: searched once across the ranks of a run (``tileprobe/record/capture_ranks.py``, in the
    record folder beside this package, loaded by path once); anything else, or a failure to load it (said once),
    runs the program's search here."""
    if use is None or search is None:
        return run()
    try:
        mod = sys.modules.get(MODULE_NAME + "_ranks")
        if mod is None:
            import importlib.util
            spec = importlib.util.spec_from_file_location(MODULE_NAME + "_ranks", os.path.join(
                os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "capture_ranks.py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[MODULE_NAME + "_ranks"] = mod
    except Exception as e:
        use.say_once("ranks", f"cannot share searches between ranks ({type(e).__name__}: {e}); each runs its own")
        return run()
    ran: list = []                  # the program's own search: ("ok", result) or ("raised", exception)

    def run_own():
        try:
            result = run()
        except BaseException as e:
            ran.append(("raised", e))
            raise
        ran.append(("ok", result))
        return result

    try:
        return mod.search_once(use.path, search, run_own, _tuning_result)
    except Exception as e:
        if ran and ran[-1][0] == "raised" and ran[-1][1] is e:
            raise                   # the program's own search failed: its exception, unchanged
        use.say_once("ranks", f"cannot share searches between ranks ({type(e).__name__}: {e}); each runs its own")
        if ran and ran[-1][0] == "ok":
            return ran[-1][1]       # searched already; only the sharing failed
        return run()


def _end_safely(rec, search, begun, result, error, wall_s):
    if rec is None or begun is None:
        return
    try:
        _end_search(rec, search, begun, result, error, wall_s)
    except Exception as e:
        rec.fail(e)

"""Probes from cuTile's compile cache, without running anything (``tileprobe record --from-cache``).

cuTile's JIT (and ``export_kernel``) stores every cubin it compiles in a SQLite database, ``cache.db`` in
``$CUDA_TILE_CACHE_DIR`` (default ``~/.cache/cutile-python``): table ``cache(key, blob, blob_size, atime, metadata)``,
``blob`` the cubin, ``metadata`` JSON with ``kernel_names`` (the mangled JIT symbols), ``compiler_version``,
``compilation_time_seconds`` (cutile_cache/_cache.py ``MetadataV1``, cuda-tile 1.7). It is read here read-only.

What the cache tells: the symbol → ``cuda.tile.compilation.demangle_kernel_name`` → the function's name and the
JIT signature (dtypes, ranks, divisibility of shapes, strides and base address, constants); the cubin → the arch
(ELF flags) and the hints in force (the embedded Tile IR's ``optimization_hints=<default = {occupancy = 2}>``).
What it cannot tell, said in the probe as TODOs: the module the kernel lives in (give ``--kernels``), the real
shapes (placeholders with the same divisibility are written), scalar values, the grid, call sites and counts, and
``opt_level`` (a tileiras flag, not in the IR).
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from tileprobe.errors import TileprobeError
from tileprobe.record.model import KernelRef, Launch, merge

# Imports inside functions here are lazy on purpose: at the module head they would add 0.09 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Tile IR hint names → cuTile hint names (cuda/tile/_bytecode/attribute.py ``EntryHints``, cuda-tile 1.7).
IR_HINTS = {"num_cta_in_cga": "num_ctas", "occupancy": "occupancy", "num_worker_warps_per_cta": "num_worker_warps"}
#: cuTile infers shape and stride divisibility up to 16 (elements for shapes, bytes for strides) and base-address
#: divisibility up to 16 bytes (seen with cuda-tile 1.7: ``i16``/``p16`` in symbols).
DIVISIBILITY_CAP = 16


def embedded_hints(cubin: bytes, arch: str) -> dict | None:
    """The kernel hints recorded in a cubin's embedded Tile IR for ``arch`` (default entry overlaid with the arch's),
    as cuTile names them; None when the cubin carries no ``optimization_hints`` (an entry without hints: ``{}``)."""
    m = re.search(rb"optimization_hints=<([^>]*)>", cubin)
    if m is None:
        return None
    entries = {t.decode(): body.decode() for t, body in re.findall(rb"(\w+)\s*=\s*\{([^}]*)\}", m.group(1))}
    out: dict = {}
    for target in ("default", arch):
        for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", entries.get(target, "")):
            if name in IR_HINTS:
                out[IR_HINTS[name]] = int(value)
    return out


@dataclass
class CacheEntry:
    """One cubin of the cache: its key, symbols, compiler, the arch and hints read from the cubin."""
    key: str
    cubin: bytes
    symbols: list[str]
    compiler: str = ""
    arch: str | None = None
    hints: dict | None = None
    notes: list[str] = field(default_factory=list)


def cache_db(path: str | None) -> str:
    """The ``cache.db`` for a folder or file path (default: the cache cuTile uses). Raises TileprobeError if none."""
    if not path:
        from tileprobe._cutile import compile_cache_dir
        path = compile_cache_dir()
        if path is None:
            raise TileprobeError("cuTile's compile cache is off (CUDA_TILE_CACHE_DIR=0/off/none): give its path, "
                                 "e.g. --from-cache ~/.cache/cutile-python")
    db = os.path.join(path, "cache.db") if os.path.isdir(path) else path
    if not os.path.isfile(db):
        raise TileprobeError(f"{db}: no cuTile compile cache here; give the folder cuTile caches in "
                             "($CUDA_TILE_CACHE_DIR, default ~/.cache/cutile-python) or its cache.db")
    return db


def read_cache(path: str | None) -> list[CacheEntry]:
    """Every entry of the cache, most recently used first (read-only: the cache is not touched)."""
    from tileprobe._cutile import parse_build
    from tileprobe.errors import CubinError
    from tileprobe.model.cubin import CubinInfo
    db = cache_db(path)
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT key, blob, metadata FROM cache ORDER BY atime DESC").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise TileprobeError(f"{db}: cannot read it as cuTile's compile cache ({e})") from e
    out = []
    for key, blob, meta in rows:
        try:
            md = json.loads(meta) if meta else {}
        except (ValueError, RecursionError, TypeError):   # not JSON, too deep, too many digits, not text
            md = {}
        md = md if isinstance(md, dict) else {}          # metadata of the wrong type: read as none
        names = md.get("kernel_names")
        version = md.get("compiler_version")
        entry = CacheEntry(str(key), bytes(blob) if isinstance(blob, (bytes, bytearray, memoryview)) else b"",
                           [str(n) for n in names] if isinstance(names, list) else [],
                           parse_build(version if isinstance(version, str) else ""))
        try:
            entry.arch = CubinInfo.from_bytes(entry.cubin).arch
        except CubinError as e:
            entry.notes.append(f"cubin {key[:12]} unreadable: {e}")
        entry.hints = embedded_hints(entry.cubin, entry.arch or "")
        out.append(entry)
    return out


# --- signatures → placeholder arguments -----------------------------------------------------------------

def _extent(div: int) -> int:
    """A size whose largest power-of-two divisor, capped at 16, is ``div``: 64 x 16 at the cap, else an odd
    multiple of ``div``."""
    return div * 64 if div >= DIVISIBILITY_CAP else div * 65


def _stride(need: int, div: int, cap: int) -> int:
    """The smallest stride ≥ ``need`` (elements) divisible by ``div`` and, below ``cap``, by nothing more."""
    s = -(-max(need, 1) // div) * div
    if div < cap and (s // div) % 2 == 0:
        s += div
    return s


def _strides(p, shape: list[int], cap: int) -> list[int]:
    """Strides (elements) with the constraint's constants and divisibility and no overlap: the dimension whose
    stride is the constant 1 innermost (a transposed array keeps its layout), then the others from the last to
    the first, each spanning the ones inside it."""
    order = sorted(range(p.ndim), key=lambda i: (p.stride_constant[i] != 1, -i))
    strides, need = [0] * p.ndim, 1
    for i in order:
        const = p.stride_constant[i]
        strides[i] = const if const is not None else _stride(need, p.stride_divisible_by[i], cap)
        need = max(need, abs(strides[i]) * shape[i])
    return strides


def _overlap(p, shape: list[int], strides: list[int], cap: int) -> bool:
    """Make the array overlap itself, as JIT saw it (``may_alias_internally``: a zero or negative stride): a zero
    stride on the outermost free dimension whose divisibility is the cap (0 is divisible by everything), else that
    stride negated (same divisibility). False when no dimension is free."""
    free = [i for i in range(p.ndim) if p.stride_constant[i] is None and shape[i] > 1]
    for i in free:
        if p.stride_divisible_by[i] >= cap:
            strides[i] = 0
            return True
    if free:
        strides[free[0]] = -strides[free[0]]
        return True
    return False


def array_from_constraint(p) -> tuple[dict, list[str]]:
    """Placeholder array description (shapes invented, divisibility, strides and alignment as the signature says)
    for a cuTile ``ArrayConstraint``, and TODO notes for what it cannot reproduce."""
    from tileprobe.errors import ProbeError
    from tileprobe.probe.signature import dtype_name, itemsize
    todos = []
    try:
        dtype = dtype_name(p.dtype.name)
    except ProbeError:
        return {"kind": "array", "dtype": f"cutile:{p.dtype.name}", "shape": [1] * p.ndim,
                "strides": [1] * p.ndim, "align": 256, "protocol": "cache"}, []
    shape = [c if c is not None else _extent(d) for c, d in zip(p.shape_constant, p.shape_divisible_by)]
    cap = max(1, DIVISIBILITY_CAP // itemsize(dtype))
    strides = _strides(p, shape, cap)
    align = 256 if p.base_addr_divisible_by >= DIVISIBILITY_CAP else p.base_addr_divisible_by
    if p.may_alias_internally:
        if _overlap(p, shape, strides, cap):
            todos.append("the launched array overlapped itself: a zero or negative stride stands for it")
        else:
            todos.append("the launched array overlapped itself; no stride here is free to reproduce it")
    return {"kind": "array", "dtype": dtype, "shape": shape, "strides": strides, "align": align,
            "protocol": "cache"}, todos


def _arg_from_constraint(p, i: int, todos: list[str]) -> dict:
    kind = type(p).__name__
    if kind == "ArrayConstraint":
        d, t = array_from_constraint(p)
        todos += [f"argument {i}: {x}" for x in t]
        return d
    if kind == "ConstantConstraint":
        return {"kind": "scalar", "type": type(p.value).__name__, "value": p.value}
    if kind == "ScalarConstraint":
        name = p.dtype.name
        value = True if name.startswith("bool") else 1.0 if "float" in name else 1
        todos.append(f"argument {i}: a {name} scalar; its value is not in the cache (placeholder {value!r})")
        return {"kind": "scalar", "type": type(value).__name__, "value": value}
    if kind == "TupleConstraint":
        return {"kind": "sequence", "type": "tuple", "items": [_arg_from_constraint(x, i, todos) for x in p.items]}
    if kind == "ListConstraint":
        todos.append(f"argument {i}: a list of arrays; its length is not in the cache (placeholder 2)")
        item = _arg_from_constraint(p.element, i, todos)
        return {"kind": "sequence", "type": "list", "items": [item, item]}
    return {"kind": "object", "type": kind}


def args_from_signature(sig) -> tuple[list[dict], list[str]]:
    """Argument descriptions (as a recording writes them) that reproduce a ``KernelSignature``, and TODO notes.
    Arrays, constants, scalars, tuples and lists of arrays; any other constraint is a TODO in the probe."""
    todos: list[str] = []
    return [_arg_from_constraint(p, i, todos) for i, p in enumerate(sig.parameters)], todos


# --- kernels by name ------------------------------------------------------------------------------------

def find_kernels(places: list[str]) -> tuple[dict[str, KernelRef], list[str]]:
    """Kernel function name → :class:`KernelRef`, from modules (packages: every submodule that imports) and ``.py``
    files; and notes on the submodules that failed to import.

    Raises:
        TileprobeError: a module or file named in ``places`` that cannot be imported.
    """
    from tileprobe._cutile import kernel_function, kernel_type
    from tileprobe.probe.define import _load_module
    found: dict[str, KernelRef] = {}
    notes: list[str] = []
    for place in places:
        try:
            modules = [_load_module(place) if place.endswith(".py") else importlib.import_module(place)]
        except Exception as e:
            raise TileprobeError(f"--kernels {place}: cannot import it ({type(e).__name__}: {e})") from e
        for info in pkgutil.walk_packages(getattr(modules[0], "__path__", []), modules[0].__name__ + ".",
                                          onerror=lambda name: notes.append(f"--kernels: {name} not searched")):
            try:
                modules.append(importlib.import_module(info.name))
            except Exception as e:   # an optional backend's module: search the others
                notes.append(f"--kernels: {info.name} not searched ({type(e).__name__}: {e})")
        for mod in modules:
            for attr, obj in list(vars(mod).items()):
                if not isinstance(obj, kernel_type()):
                    continue
                fn = kernel_function(obj)
                if fn.__module__ != mod.__name__ and not place.endswith(".py"):
                    continue     # imported from elsewhere: found where it is defined
                code = fn.__code__
                found.setdefault(fn.__name__, KernelRef(
                    fn.__name__, None if place.endswith(".py") else fn.__module__, fn.__qualname__,
                    code.co_filename, code.co_firstlineno, attr, "kernel", json.dumps(_declared(obj), sort_keys=True)))
    return found, notes


def _declared(kernel) -> dict:
    from tileprobe.record.capture import kernel_hints
    return kernel_hints(kernel)


def launches_from_cache(entries: list[CacheEntry], kernels: dict[str, KernelRef]) -> tuple[list[Launch], list[str]]:
    """One launch per (cubin, symbol): signature demangled, hints from the cubin, kernel from ``kernels`` by name."""
    from cuda.tile.compilation import demangle_kernel_name

    from tileprobe.record.group import plain_hint
    notes: list[str] = []
    launches = []
    for e in entries:
        notes += e.notes
        for symbol in e.symbols:
            try:
                name, sig = demangle_kernel_name(symbol)
            except Exception as exc:   # a dataclass or enum argument cuTile refuses to demangle
                notes.append(f"{symbol}: cannot demangle ({type(exc).__name__}: {exc})")
                continue
            ref = kernels.get(name) or KernelRef(name)
            declared = ref.declared
            hints = dict(declared)
            for h, v in (e.hints or {}).items():
                if v != plain_hint(declared.get(h), [e.arch] if e.arch else []):
                    hints[h] = v
            args, todos = args_from_signature(sig)
            la = Launch(ref, hints, None, args, count=None, archs={e.arch} if e.arch else set(), symbol=symbol,
                        source="cache", note="; ".join(todos))
            launches.append(la)
    return merge(launches), notes


def probes_from_cache(path: str | None, out_dir: str, *, top: int = 10, hints: str = "around",
                      kernels: Sequence[str] = (), force: bool = False):
    """Write probe skeletons for every kernel in cuTile's compile cache (see module doc); returns a
    :class:`~tileprobe.record.session.RecordResult`."""
    from tileprobe.record.group import group
    from tileprobe.record.session import RecordResult, now, prepare_dir
    from tileprobe.record.write import Origin, summary, write_probes, write_summary
    db = cache_db(path)
    entries = read_cache(db)
    found, notes = find_kernels(list(kernels)) if kernels else ({}, [])
    launches, more = launches_from_cache(entries, found)
    notes += more
    prepare_dir(out_dir, force)
    plans = group(launches, top=top, hints=hints)
    for plan in plans:
        if plan.kernel.attr is None:
            plan.notes.append(f"TODO: the cache keeps only the function name {plan.kernel.name!r}: rerun with "
                              "--kernels MODULE (or a .py file) that defines it, or set KERNEL below.")
        todos = sorted({la.note for c in plan.cases for la in c.launches if la.note})
        plan.notes += [f"TODO: {t}" for t in todos]
        plan.notes.append("TODO: the cache does not keep the grid, call sites, launch counts or opt_level; array "
                          "shapes are placeholders with the cached divisibility: set the real ones.")
    origin = Origin("cache", now(), path=db)
    written = write_probes(plans, out_dir, origin)
    data = summary(written, origin, out_dir, cache_entries=len(entries), notes=notes)
    return RecordResult(None, None, written, write_summary(data, out_dir), notes)

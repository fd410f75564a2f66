"""Record every ``cuda.tile.launch`` of one Python process into a JSON-lines file — cheaply, and never in the way.

This file is STANDALONE (standard library only, no import of the tileprobe package): ``tileprobe record`` loads it
by path, under the module name :data:`MODULE_NAME`, from a generated ``sitecustomize.py`` in every Python process
the recorded command starts, so it must not put tileprobe (or anything else) on the program's ``sys.path``.

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
import json
import os
import re
import sys
import threading
import time

MODULE_NAME = "_tileprobe_record_capture"
ENV_DIR = "TILEPROBE_RECORD_DIR"
ENV_SKIP = "TILEPROBE_RECORD_SKIP"
ENV_MAX_DISTINCT = "TILEPROBE_RECORD_MAX_DISTINCT"
ENV_USE = "TILEPROBE_USE_TABLE"
#: The module whose ``exhaustive_search`` is wrapped (cuda-tile 1.7 exposes no other tuning entry point:
#: ``cuda.tile.tune.__all__`` is ``exhaustive_search``, ``TuningResult``, ``Measurement``).
TUNE_MODULE = "cuda.tile.tune._tune"
CEXT_MODULE = "cuda.tile._cext"
SCHEMA = 1
#: Base-address alignment is recorded up to this many bytes (cuTile infers at most 16; 256 is PyTorch's minimum).
ALIGN_CAP = 256
#: Distinct launches described per kernel function and process; more are only counted (a loop whose scalar
#: argument changes every launch would otherwise write a line per launch).
DEFAULT_MAX_DISTINCT = 10000
FLUSH_INTERVAL_S = 1.0
HINT_FIELDS = ("num_ctas", "occupancy", "opt_level", "num_worker_warps")
#: Packages whose frames are never the call site, wherever they are installed (kernel libraries and their hosts).
LIBRARY_PACKAGES = ("tilegym", "torch", "flashinfer")

_RECORDER = None
_FINDER = None
_USE = None


# --- describing arguments ------------------------------------------------------------------------------


#: Escape sequences and control characters (report/text.py's rule, kept here: this module is standard library
#: only): a tune table's text (a GPU name, a build) reaches the program's stderr as text, never as a terminal
#: command (a hostile tester, 2026-12-02: an OSC title and a screen clear in a table's "gpu").
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x1b][\]PX^_][^\x07\x1b\x9c\n]{0,4096}(?:\x07|\x1b\\|\x9c)"
                      r"|\x1b[ -/]*[0-~]?|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _plain(text) -> str:
    """``text`` with escape sequences and control characters removed (newline and tab kept)."""
    return _ESCAPES.sub("", str(text))

def align_of(ptr: int) -> int:
    """Largest power of two dividing ``ptr`` (bytes), capped at :data:`ALIGN_CAP`; a null pointer counts as the cap."""
    ptr = int(ptr)
    return ALIGN_CAP if ptr == 0 else min(ptr & -ptr, ALIGN_CAP)


_DTYPE_NAMES: dict = {}


def _torch_tensor(t):
    dt = t.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = str(dt)
    ptr = t.data_ptr()
    return ("A", name, t.shape, t.stride(), min(ptr & -ptr, ALIGN_CAP) if ptr else ALIGN_CAP, "torch")


def _c_strides(shape) -> tuple:
    """C-order strides in elements (what a missing strides field means in both protocols)."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _cai_array(a):
    cai = a.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    typestr = cai["typestr"]
    size = int(typestr[2:]) if typestr[2:].isdigit() else 1
    strides = cai.get("strides")
    strides = _c_strides(shape) if strides is None else tuple(int(s) // size for s in strides)
    return ("A", "cai:" + typestr, shape, strides, align_of(cai["data"][0]), "cuda_array_interface")


_DL = {}


def _dlpack_reader():
    if not _DL:
        import ctypes

        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                        ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        _DL.update(tensor=DLTensor, get=get, ctypes=ctypes)
    return _DL


def _dlpack_array(a):
    """Read a DLPack capsule without consuming it (its deleter runs when it is dropped, as the protocol says)."""
    dl = _dlpack_reader()
    capsule = a.__dlpack__()
    t = dl["ctypes"].cast(dl["get"](capsule, b"dltensor"), dl["ctypes"].POINTER(dl["tensor"])).contents
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else _c_strides(shape)
    ptr = (t.data or 0) + t.byte_offset
    return ("A", f"dlpack:{t.code}:{t.bits}", shape, strides, align_of(ptr), "dlpack")


def _scalar(v):
    if type(v) is float and v != v:
        return ("S", "float", "nan")
    return ("S", type(v).__name__, v)


def _int(v):
    return ("S", "int", v)


def _sequence(seq):
    return ("T", type(seq).__name__, tuple(describe(x) for x in seq))


def _other(obj):
    tp = type(obj)
    name = f"{tp.__module__}.{tp.__qualname__}"
    if tp.__module__.startswith("cuda.tile") and hasattr(obj, "name"):
        return ("D", "cuda.tile", str(obj.name))          # a cuTile dtype passed as a constant
    if tp.__module__ == "torch" and tp.__name__ == "dtype":
        return ("D", "torch", str(obj))
    return ("O", name)


_DESCRIBERS: dict = {int: _int, float: _scalar, bool: _scalar, str: _scalar, type(None): _scalar,
                     tuple: _sequence, list: _sequence}


def _safe(fn):
    """An array describer that turns its own failure (a meta tensor, a producer that wants a stream) into a
    description by type, so one odd argument does not stop the recording."""
    def describe_array(a):
        try:
            return fn(a)
        except Exception:
            return _other(a)
    return describe_array


def _describer(tp):
    if hasattr(tp, "data_ptr") and hasattr(tp, "stride") and hasattr(tp, "dtype"):
        return _safe(_torch_tensor)
    if hasattr(tp, "__cuda_array_interface__"):
        return _safe(_cai_array)
    if hasattr(tp, "__dlpack__"):
        return _safe(_dlpack_array)
    return _other


def describe(arg) -> tuple:
    """A hashable description of one launch argument (also the launch key's part for it).

    Arrays: ``("A", dtype, shape, strides in elements, base-address alignment in bytes, protocol)`` where dtype is
    ``torch.bfloat16``, ``cai:<f2`` or ``dlpack:<code>:<bits>`` (translated later). Scalars and constants:
    ``("S", type name, value)``. Tuples/lists: ``("T", type name, items)``. dtypes: ``("D", origin, name)``.
    Anything else: ``("O", "module.Class")``.
    """
    tp = type(arg)
    fn = _DESCRIBERS.get(tp)
    if fn is None:
        fn = _DESCRIBERS[tp] = _describer(tp)
    return fn(arg)


def to_json(d: tuple):
    """The JSON form of a :func:`describe` tuple."""
    kind = d[0]
    if kind == "A":
        return {"kind": "array", "dtype": d[1], "shape": list(d[2]), "strides": list(d[3]), "align": d[4],
                "protocol": d[5]}
    if kind == "S":
        return {"kind": "scalar", "type": d[1], "value": d[2]}
    if kind == "T":
        return {"kind": "sequence", "type": d[1], "items": [to_json(x) for x in d[2]]}
    if kind == "D":
        return {"kind": "dtype", "origin": d[1], "name": d[2]}
    return {"kind": "object", "type": d[1]}


# --- kernels --------------------------------------------------------------------------------------------

def _hint_json(v):
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    by = getattr(v, "_by_target", None)                 # cuda.tile.ByTarget
    if isinstance(by, dict):
        default = getattr(v, "_default", None)
        return {"by_target": dict(by), "default": None if repr(default) == "UNSPECIFIED" else default}
    return repr(v)


def kernel_hints(kernel) -> dict:
    """The compiler options of a kernel object (``num_ctas``, ``occupancy``, ``opt_level``, ``num_worker_warps``)."""
    opts = getattr(kernel, "_compiler_options", None)
    return {f: _hint_json(getattr(opts, f, None)) for f in HINT_FIELDS} if opts is not None else {}


def _find_ref(pyfunc, kernel_type):
    """(attribute, kind, declared hints) naming the kernel in its module: kind ``kernel`` (a module-level
    ``@ct.kernel`` object wrapping this function) or ``function`` (the plain function; the program wraps it with
    ``ct.kernel(...)`` at run time). ``(None, None, None)`` when the module holds neither."""
    mod = sys.modules.get(getattr(pyfunc, "__module__", None) or "")
    if mod is None or "<locals>" in getattr(pyfunc, "__qualname__", "<locals>"):
        return None, None, None
    items = list(getattr(mod, "__dict__", {}).items())
    name = pyfunc.__name__
    kernels = [(k, v) for k, v in items if isinstance(v, kernel_type) and getattr(v, "_pyfunc", None) is pyfunc]
    if kernels:
        kernels.sort(key=lambda kv: kv[0] != name)       # the attribute named like the function first
        return kernels[0][0], "kernel", kernel_hints(kernels[0][1])
    for k, v in items:
        if v is pyfunc:
            return k, "function", None
    return None, None, None


def describe_kernel(kernel) -> dict:
    """Where a kernel object's function lives, how to import it, and its hints (launched and declared)."""
    pyfunc = getattr(kernel, "_pyfunc", None)
    out = {"hints": kernel_hints(kernel), "type": f"{type(kernel).__module__}.{type(kernel).__qualname__}"}
    if pyfunc is None:
        return out
    code = getattr(pyfunc, "__code__", None)
    attr, kind, declared = _find_ref(pyfunc, type(kernel))
    out.update(module=pyfunc.__module__, qualname=pyfunc.__qualname__, name=pyfunc.__name__,
               file=code.co_filename if code else None, line=code.co_firstlineno if code else None,
               attr=attr, ref_kind=kind, declared=declared)
    return out


# --- call sites -----------------------------------------------------------------------------------------

_CUTILE, _LIBRARY, _USER = 0, 1, 2


class _Sites:
    """Classifies frames: cuTile / tileprobe / launch wrappers (skipped for both sites), libraries (site-packages,
    the standard library, :data:`LIBRARY_PACKAGES`, ``$TILEPROBE_RECORD_SKIP`` prefixes: skipped for the call site)
    and user code. The prefixes are fixed at the first launch."""

    def __init__(self):
        self.kinds: dict = {}      # id(code object) -> (code object, kind)
        self.internal: tuple = ()
        self.library: tuple = ()

    def _prefixes(self):
        import sysconfig
        here = os.path.dirname(os.path.abspath(__file__))
        internal = [os.path.dirname(here), here]
        tile = sys.modules.get("cuda.tile")
        if tile is not None and getattr(tile, "__file__", None):
            internal.append(os.path.dirname(os.path.abspath(tile.__file__)))
        paths = sysconfig.get_paths()
        lib = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
        for name in LIBRARY_PACKAGES:            # also when they run from a checkout, not site-packages
            mod = sys.modules.get(name)
            if mod is not None and getattr(mod, "__file__", None):
                lib.append(os.path.dirname(os.path.abspath(mod.__file__)))
        lib += [p for p in os.environ.get(ENV_SKIP, "").split(os.pathsep) if p]
        self.internal = tuple(os.path.join(os.path.realpath(p), "") for p in internal)
        self.library = tuple(os.path.join(os.path.realpath(p), "") for p in lib if p)

    def kind(self, code) -> int:
        # Keyed by id: hashing a code object hashes its bytecode and constants on every call (µs each).
        entry = self.kinds.get(id(code))
        if entry is not None and entry[0] is code:
            return entry[1]
        if not self.internal:
            self._prefixes()
        fn = code.co_filename
        path = fn if fn.startswith("<") else os.path.realpath(fn)
        if path.startswith(self.internal):
            k = _CUTILE
        elif path.startswith("<") or path.startswith(self.library):
            k = _CUTILE if code.co_name.endswith("launch") else _LIBRARY
        else:
            k = _USER
        self.kinds[id(code)] = (code, k)   # the code object pins its id
        return k

    def frames(self, frame):
        """(call frame, launch frame): the first frame in user code, and the first outside cuTile/tileprobe (the
        code that called ``ct.launch``, e.g. a TileGym op); either may be None."""
        launch = None
        f = frame
        while f is not None:
            k = self.kind(f.f_code)
            if k != _CUTILE and launch is None:
                launch = f
            if k == _USER:
                return f, launch
            f = f.f_back
        return None, launch


def _where(f):
    """A frame's call instruction, cheap to compare: (id of its code object, instruction offset)."""
    return (id(f.f_code), f.f_lasti) if f is not None else None


def _site(f):
    """A frame as "file:line" (computing the line decodes the line table: done once per distinct launch)."""
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else None


# --- the recorder ---------------------------------------------------------------------------------------

class Recorder:
    """Per-process launch log under ``out_dir`` (one ``launches-<pid>-<ns>.jsonl`` file, opened at the first launch).

    Never raises into the program: the first failure is reported once on stderr (and in the log when it can be
    written) and recording stops for this process.
    """

    def __init__(self, out_dir: str, max_distinct: int | None = None):
        self.out_dir = out_dir
        env_max = os.environ.get(ENV_MAX_DISTINCT, "")
        self.max_distinct = max_distinct or (int(env_max) if env_max.isdigit() else DEFAULT_MAX_DISTINCT)
        self.lock = threading.Lock()
        self.sites = _Sites()
        self._reset()

    def _reset(self):
        self.pid = os.getpid()
        self.fd = None
        self.path = None
        self.failed = False
        self.kernels: dict = {}       # id(kernel object) -> (object, kernel id); the object pins the id
        self.kernel_ids: dict = {}    # JSON of the kernel description -> kernel id
        self.func_of: list = []       # kernel id -> function key (module, qualname, file)
        self.launches: dict = {}      # launch key -> _Launch
        self.distinct: dict = {}      # function key -> distinct launches described
        self.overflow: dict = {}      # function key -> _Launch counting the launches not described
        self.dirty: set = set()
        self.last_flush = time.monotonic()
        self.calls = 0
        self.arch_written = False
        self.searches: dict = {}      # search key -> search id
        self.undescribed: set = set()  # (call site, reason) of searches seen but not described

    def after_fork(self):
        """In a forked child: start a new log (the parent's counts and file are the parent's)."""
        self.lock = threading.Lock()
        self._reset()

    # writing
    def _write(self, obj: dict) -> None:
        if self.fd is None:
            os.makedirs(self.out_dir, exist_ok=True)
            self.path = os.path.join(self.out_dir, f"launches-{self.pid}-{time.time_ns()}.jsonl")
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._write({"t": "process", "v": SCHEMA, "pid": self.pid, "ppid": os.getppid(), "argv": list(sys.argv),
                         "cwd": os.getcwd(), "python": sys.version.split()[0], "executable": sys.executable,
                         "time": time.time(), "cuda_tile": _cutile_version()})
        os.write(self.fd, (json.dumps(obj, default=repr) + "\n").encode())

    def flush(self) -> None:
        """Write the counts changed since the last flush."""
        if self.dirty and self.fd is not None and not self.failed:
            counts = {str(e.lid): e.n for e in self.dirty}
            self.dirty = set()
            self._write({"t": "counts", "n": counts})
        self.last_flush = time.monotonic()

    def close(self) -> None:
        """Flush the counts (atexit)."""
        if os.getpid() != self.pid or self.failed:
            return
        try:
            self.flush()
        except Exception as e:  # the program is exiting: report, never raise
            self.fail(e)

    def fail(self, exc: BaseException) -> None:
        """Stop recording in this process and say so once."""
        if self.failed:
            return
        self.failed = True
        msg = f"{type(exc).__name__}: {exc}"
        sys.stderr.write(f"tileprobe record: recording stopped in process {os.getpid()} "
                         f"({_plain(' '.join(sys.argv)[:200])}): {_plain(msg)}; the program goes on unrecorded\n")
        try:
            if self.fd is not None:
                os.write(self.fd, (json.dumps({"t": "error", "error": msg}) + "\n").encode())
        except Exception:
            pass

    # capturing
    def _kernel_id(self, kernel) -> int:
        ent = self.kernels.get(id(kernel))
        if ent is not None and ent[0] is kernel:
            return ent[1]
        desc = describe_kernel(kernel)
        text = json.dumps(desc, sort_keys=True, default=repr)
        kid = self.kernel_ids.get(text)
        if kid is None:
            kid = self.kernel_ids[text] = len(self.func_of)
            self.func_of.append((desc.get("module"), desc.get("qualname"), desc.get("file")))
            self._write({"t": "kernel", "id": kid, **desc})
        if len(self.kernels) > 4096:      # a program making a kernel object per launch: drop the pins
            self.kernels.clear()
        self.kernels[id(kernel)] = (kernel, kid)
        return kid

    def capture(self, grid, kernel, kernel_args, kwargs, frame):
        """Count one launch; describe it (one line) the first time it is seen. Returns the new entry on its first
        sighting (the caller times that call: it includes cuTile's JIT compile), else None."""
        kid = self._kernel_id(kernel)
        get = _DESCRIBERS.get
        args = tuple([(get(type(a)) or describe)(a) for a in kernel_args])
        call, launch = self.sites.frames(frame)
        grid_key = grid if type(grid) is tuple else tuple(grid) if isinstance(grid, list) else (grid,)
        key = (kid, grid_key, args, _where(call), _where(launch), tuple(sorted(kwargs.items())) if kwargs else ())
        entry = self.launches.get(key)
        new = None
        if entry is None:
            entry = new = self._new_launch(key, _site(call), _site(launch))
        entry.n += 1
        n = entry.n
        self.dirty.add(entry)
        self.calls += 1
        if n & (n - 1) == 0 or (self.calls & 1023 == 0 and time.monotonic() - self.last_flush >= FLUSH_INTERVAL_S):
            self.flush()
        return new if new is not None and new.lid >= 0 else None

    def first_call(self, entry, wall_s: float, exc: BaseException | None) -> None:
        """A distinct launch's first call — its wall time (cuTile compiles there unless its cache has the
        cubin), the compiler timeout in force (``ct.compiler_timeout`` / ``CUDA_TILE_COMPILER_TIMEOUT_SEC``) and the
        exception it raised, if any (a ``TileCompilerTimeoutError`` is the compile timing out)."""
        line = {"t": "first_call", "id": entry.lid, "wall_s": round(wall_s, 6),
                "compiler_timeout_s": compiler_timeout_s()}
        if exc is not None:
            line["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        self._write(line)
    def _new_launch(self, key, call, launch_site):
        kid, grid, args, _, _, kw = key
        func = self.func_of[kid]
        with self.lock:
            if self.distinct.get(func, 0) >= self.max_distinct:
                # Counted under the kernel's overflow entry (one per function), not described.
                entry = self.overflow.get(func)
                if entry is None:
                    entry = self.overflow[func] = _Launch(-1 - len(self.overflow))
                    self._write({"t": "overflow", "id": entry.lid, "kernel": kid})
                return entry
            self.distinct[func] = self.distinct.get(func, 0) + 1
            entry = self.launches[key] = _Launch(len(self.launches))
            lid = entry.lid
        self._write({"t": "launch", "id": lid, "kernel": kid, "grid": list(grid),
                     "args": [to_json(a) for a in args], "site": call, "launch_site": launch_site,
                     "kwargs": dict(kw)})
        if not self.arch_written:
            self._write_arch()
        return entry

    def _write_arch(self) -> None:
        """The device's compute capability, once cuTile has loaded the driver (never loads it ourselves)."""
        if "cuda.tile._load_libcuda" not in sys.modules:
            return
        self.arch_written = True
        try:
            from cuda.tile._cext import get_compute_capability
            major, minor = get_compute_capability()
            self._write({"t": "arch", "arch": f"sm_{major}{minor}"})
        except Exception:
            pass


class _Launch:
    """One distinct launch of this process: its id in the log and how often it happened (hashed by identity)."""
    __slots__ = ("lid", "n")

    def __init__(self, lid: int):
        self.lid, self.n = lid, 0


def compiler_timeout_s():
    """The compiler timeout cuTile compiles under now, in seconds, or None (no limit): cuda-tile 1.7's
    ``ct.compiler_timeout`` sets ``cuda.tile._cext.default_tile_context.config.compiler_timeout_sec``, which starts
    from ``CUDA_TILE_COMPILER_TIMEOUT_SEC`` (cuda/tile/_context.py)."""
    try:
        value = sys.modules["cuda.tile._cext"].default_tile_context.config.compiler_timeout_sec
    except Exception:
        value = os.environ.get("CUDA_TILE_COMPILER_TIMEOUT_SEC") or None
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _cutile_version():
    try:
        from importlib.metadata import version
        return version("cuda-tile")
    except Exception:
        return None


# --- searches: cuda.tile.tune.exhaustive_search ------------------------------------------------------------

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


class Search:
    """One call of ``exhaustive_search``, described before it runs.

    ``entries``: per configuration (config object, kernel object, hints dict, grid tuple, argument tuple);
    ``doc``: the JSON description (``configs`` with config/hints/grid/args, ``problem``: the argument positions
    equal in every configuration, ``key``: SHA-256 prefix of kernel + problem arguments + the space).
    """

    def __init__(self, configs, grid_fn, kernel, args_fn, hints_fn):
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
        self.problem = [i for i in range(n) if all(len(d) == n and d[i] == descs[0][i] for d in descs)]
        self.kernel = self.entries[0][1]
        kd = describe_kernel(self.kernel)
        self.source_sha256 = source_sha256(kd.get("file"))
        self.configs_json = [{"config": config_json(e[0]), "hints": {h: _hint_json(v) for h, v in e[2].items()},
                              "grid": list(e[3]), "args": [to_json(a) for a in d]}
                             for e, d in zip(self.entries, descs)]
        material = {"kernel": [kd.get("module"), kd.get("qualname")],
                    "problem": [[i, to_json(_key_desc(descs[0][i]))] for i in self.problem],
                    "space": [{"config": c["config"], "hints": c["hints"]} for c in self.configs_json]}
        import hashlib
        self.key = hashlib.sha256(json.dumps(material, sort_keys=True, default=repr).encode()).hexdigest()[:16]
        self.kernel_doc = kd
        self.kernels_same = all(getattr(e[1], "_pyfunc", None) is getattr(self.kernel, "_pyfunc", None)
                                for e in self.entries)

    def doc(self, sites=(None, None)) -> dict:
        """The JSON description (a ``search`` line without its ids)."""
        return {"key": self.key, "configs": self.configs_json, "problem": self.problem,
                "skipped": [list(x) for x in self.skipped], "space_size": self.space_size,
                "source_sha256": self.source_sha256, "site": sites[0], "launch_site": sites[1],
                "compiler_timeout_s": _compiler_timeout_s(), "same_kernel": self.kernels_same}

    def index_of(self, config) -> int | None:
        """The position of a configuration object among the program's (identity first, then equal JSON)."""
        for i, c in enumerate(self.configs):
            if c is config:
                return i
        want = _canon(config_json(config))
        for i, c in enumerate(self.configs_json):
            if _canon(c["config"]) == want:
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
    for c, kid in zip(doc["configs"], kids):
        c["kernel"] = kid
    recorder._write({"t": "search", "id": sid, "kernel": kids[0], **doc})
    arrays = [i for i in search.problem if search.configs_json[0]["args"][i]["kind"] in ("array", "sequence")]
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


def wrap_search(original):
    """``exhaustive_search`` that first answers from the table in use (:data:`_USE`), else records the search
    (:data:`_RECORDER`) and runs ``original`` with the very same arguments. A failure of ours is reported once and
    the program's search runs as it would."""

    def exhaustive_search(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, **kwargs):
        rec, use = _RECORDER, _USE
        if (rec is None or rec.failed) and use is None:
            return original(search_space, stream, grid_fn, kernel, args_fn, hints_fn, **kwargs)
        configs = search_space if isinstance(search_space, (list, tuple)) else list(search_space)
        search = begun = None
        try:
            search = Search(configs, grid_fn, kernel, args_fn, hints_fn) if configs else None
        except Exception as e:   # the program's own functions raised: its search will say so
            why = str(e) if isinstance(e, NotDescribed) else _short(e)
            if use is not None:
                use.say_once("describe", f"a search could not be described ({why}): it runs as the program wrote it")
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
            result = original(configs, stream, grid_fn, kernel, args_fn, hints_fn, **kwargs)
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


def _end_safely(rec, search, begun, result, error, wall_s):
    if rec is None or begun is None:
        return
    try:
        _end_search(rec, search, begun, result, error, wall_s)
    except Exception as e:
        rec.fail(e)


# --- answering searches from a tune table -------------------------------------------------------------------

def device_facts() -> dict:
    """This process's GPU and compiler, as a tune table's rows record them: ``gpu`` (name), ``num_sms``, ``arch``,
    ``tileiras`` (the release line of the ``--version`` of the tileiras cuTile compiles with, e.g. ``Cuda
    compilation tools, release 13.4, V13.4.92``), ``cuda_tile``. Read
    through torch (when the program imported it) and cuTile; a fact it cannot read is left out."""
    out = {"cuda_tile": _cutile_version()}
    try:
        from cuda.tile._cext import get_compute_capability
        major, minor = get_compute_capability()
        out["arch"] = f"sm_{major}{minor}"
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            out["gpu"], out["num_sms"] = props.name, props.multi_processor_count
        except Exception:
            pass
    try:
        from cuda.tile._compile import _get_compiler_version_string
        text = _get_compiler_version_string() or ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        release = [ln for ln in lines if "release" in ln and build_of(ln) != ln]   # as _cutile.parse_build
        if lines:
            out["tileiras"] = (release or lines)[-1]
    except Exception:
        pass
    return out


def build_of(text) -> str | None:
    """``V13.4.92`` from a tileiras version line (the build, whatever else the line says); else the text."""
    import re
    if not text:
        return None
    m = re.search(r"V\d+(?:\.\d+)+", str(text))
    return m.group(0) if m else str(text).strip()


#: Row field → what it is, in the order a stale row's reasons are given.
PROVENANCE = (("gpu", "GPU"), ("num_sms", "SM count"), ("arch", "arch"), ("tileiras", "tileiras build"),
              ("cuda_tile", "cuda-tile"), ("source_sha256", "kernel source"))


def stale_reasons(row: dict, here: dict, fields=None) -> list[str]:
    """Why a table row does not hold here (empty: it does): each provenance field (of ``fields``, default all of
    :data:`PROVENANCE`) that differs, or that the row or this process cannot tell. ``here``: :func:`device_facts`
    plus ``source_sha256`` of the kernel's file."""
    out = []
    for field, what in PROVENANCE:
        if fields is not None and field not in fields:
            continue
        want, have = row.get(field), here.get(field)
        if field == "tileiras":
            want, have = build_of(want), build_of(have)
        if field == "source_sha256":
            want, have = (want or "")[:12] or None, (have or "")[:12] or None
        if want is None or have is None:
            out.append(f"{what} unknown ({'the table has none' if want is None else 'cannot read it here'})")
        elif want != have:
            out.append(f"{what} {have} here, {want} in the table")
    return out


TABLE_SCHEMA = 1                # the tune table's schema_version this file reads (tileprobe.tune.export)


def row_problems(row: dict) -> list[str]:
    """Why a row's own figures are invalid (empty: they are fine): ``median_us`` not a finite positive number, a
    ``samples`` count or ``ci_us`` bound that is negative or not finite, ``num_sms`` not an integer."""
    import math
    out = []

    def bad(v, allow_none=False):
        if v is None:
            return not allow_none
        return isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0

    if bad(row.get("median_us")) or row.get("median_us") == 0:
        out.append(f"invalid row: median_us is {row.get('median_us')!r}, not a positive number of µs")
    if bad(row.get("samples"), allow_none=True):
        out.append(f"invalid row: samples is {row.get('samples')!r}, not a count")
    ci = row.get("ci_us")
    if ci is not None and (not isinstance(ci, list) or any(bad(v, allow_none=True) for v in ci)):
        out.append(f"invalid row: ci_us is {ci!r}, not two non-negative µs")
    n = row.get("num_sms")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        out.append(f"invalid row: num_sms is a {type(n).__name__} ({n!r}), not an integer SM count")
    return out


TABLE_LIMIT_BYTES = 1 << 30     # 1 GiB, as the result readers (tileprobe.schema)


class TableReadError(ValueError):
    """A tune table or recording that cannot be read as one; the message names the file and the problem."""


#: A table above this size is said once, with the fix, in each process that reads it (a searching one): parsing
#: costs about 0.1 s per 1 MB on the 2-core machine (benchmarks/programs/bench_hook.py).
TABLE_WARN_BYTES = 32 << 20


def _open_regular(path: str, flags: int) -> int:
    """A descriptor of the regular file ``path`` opened with ``flags`` plus ``O_NONBLOCK``, ``O_NOCTTY``: opening
    a FIFO does not wait for its other end, and anything but a regular file is closed and refused.

    Raises:
        OSError: it cannot be opened, or it is not a regular file (a FIFO, device, socket or directory).
    """
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):     # said as such, not as the open's ENXIO of a lone FIFO
        raise OSError(f"{path}: not a regular file (a FIFO, device or directory); tileprobe reads and writes "
                      "regular files only")
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file (a FIFO, device or directory); tileprobe reads and writes "
                          "regular files only")
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_regular(path: str, data: bytes) -> None:
    """Append ``data`` to the regular file ``path`` (created when missing) in one ``write``; never blocks on a
    FIFO or device there.

    Raises:
        OSError: it cannot be opened or written, or it is not a regular file.
    """
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_regular(path: str, limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes``; never blocks on a FIFO, never reads a device
    for ever.

    Raises:
        OSError: it cannot be opened or is not a regular file.
        TableReadError: it holds more than ``limit_bytes`` bytes (the message names the file and the limit).
    """
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        raw = f.read(limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise TableReadError(f"{path}: more than the {limit_bytes:,} bytes tileprobe reads")
    return raw


def read_json_file(path: str, limit_bytes: int = TABLE_LIMIT_BYTES):
    """The JSON document in the regular file ``path`` (at most ``limit_bytes``, UTF-8, nested no deeper than
    Python's recursion limit lets the parser go).

    Raises:
        OSError: it cannot be opened or stat'ed.
        TableReadError: not a regular file (a FIFO or device would hang or never end), too large, not UTF-8, not
            JSON, nested too deep; the message starts with ``path``.
    """
    import stat
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise TableReadError(f"{path}: not a regular file (a FIFO, device or directory); give a file")
    if st.st_size > limit_bytes:
        raise TableReadError(f"{path}: {st.st_size:,} bytes, more than the {limit_bytes:,} bytes tileprobe reads")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):   # replaced between stat and open
            raise TableReadError(f"{path}: not a regular file; give a file")
        raw = f.read(limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise TableReadError(f"{path}: more than the {limit_bytes:,} bytes tileprobe reads")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TableReadError(f"{path}: not UTF-8 text (byte {e.start:,})") from None
    except json.JSONDecodeError as e:
        raise TableReadError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise TableReadError(f"{path}: nested deeper than the JSON reader goes (about "
                             f"{sys.getrecursionlimit():,} levels; tileprobe writes 6)") from None
    except ValueError as e:          # an integer of more than 4,300 digits
        raise TableReadError(f"{path}: {e}") from None


#: The index beside a tune table ``T`` (folder ``T.index``, written by ``tileprobe tune --export``:
#: ``tileprobe.tune.export._write_index``, which a test holds to this reader): ``meta.json``
#: names the table's size and mtime it was made from, and each ``XY.json`` holds the rows (``[[kernel, row], …]``)
#: whose search key's own SHA-256 starts with the two hex digits ``XY`` (:func:`index_bucket`: spread evenly
#: whatever the keys look like). A searching process reads one bucket (a 256th of the
#: table) instead of the whole table (a 154 MB table took 17-22 s and 0.9 GB to read, 2026-12-05); an index that
#: is missing, damaged or older than the table is passed over and the table is read whole, as before.
INDEX_SUFFIX = ".index"
INDEX_SCHEMA = 1
_INDEX_KEY = re.compile(r"[0-9a-f]{16}")


def index_bucket(key: str) -> str:
    """The bucket of search ``key`` in a table's index: the first two hex digits of the key's SHA-256."""
    import hashlib
    return hashlib.sha256(key.encode()).hexdigest()[:2]


def index_rows(table: str, key: str) -> list | None:
    """The ``(kernel, row)`` pairs of search ``key`` from the index beside ``table`` (:data:`INDEX_SUFFIX`): ``[]``
    when the index is current and holds none; None when there is no current index (the caller reads the table)."""
    folder = table + INDEX_SUFFIX
    try:
        st = os.stat(table)
        meta = json.loads(read_regular(os.path.join(folder, "meta.json"), 1 << 16))
        if not (isinstance(meta, dict) and meta.get("schema") == INDEX_SCHEMA and meta.get("size") == st.st_size
                and meta.get("mtime_ns") == st.st_mtime_ns) or not _INDEX_KEY.fullmatch(key):
            return None
        bucket = os.path.join(folder, index_bucket(key) + ".json")
        if not os.path.lexists(bucket):
            return []
        pairs = json.loads(read_regular(bucket, TABLE_LIMIT_BYTES))
        return [(k, r) for k, r in pairs if isinstance(r, dict) and (r.get("search") or {}).get("key") == key]
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, MemoryError):
        return None


class Answerer:
    """Answers searches from a tune table (``tileprobe tune --export``): rows with a ``search`` block, indexed by
    the search key. The table is read at the first search of the process, not before: a process that never
    searches opens neither the table nor its misses file. Never raises into the program: an unreadable table is said
    once and every search runs."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.misses_path = self.path + ".misses.jsonl"
        self.said: set = set()
        self.rows: dict = {}
        self.facts = None
        self.answered = 0
        self.broken = False
        self.loaded = False
        self.read_s = None            # seconds the table read took (None: not read yet)

    def load(self) -> None:
        """Read the table once (the first search calls it): index its rows by search key; a table above
        :data:`TABLE_WARN_BYTES` is said once with the fix, an unreadable one once with the reason."""
        if self.loaded:
            return
        self.loaded = True
        t0 = time.perf_counter()
        try:
            doc = read_json_file(self.path)
            if isinstance(doc, dict) and isinstance(doc.get("schema_version"), int) and \
                    doc["schema_version"] > TABLE_SCHEMA:
                raise TableReadError(f"{self.path}: schema_version {doc['schema_version']}, newer than the "
                                     f"{TABLE_SCHEMA} this tileprobe reads (upgrade tileprobe)")
            for kernel, rows in (doc.get("kernels") or {}).items():
                for row in rows:
                    key = (row.get("search") or {}).get("key")
                    if key:
                        self.rows.setdefault(key, []).append((kernel, row))
        except (OSError, ValueError, AttributeError, TypeError, RecursionError, MemoryError) as e:
            self.broken = True
            self.say_once("table", f"cannot read the table {self.path} ({type(e).__name__}: {e}); every search "
                                   "runs as the program wrote it")
        self.read_s = time.perf_counter() - t0
        try:
            size = os.stat(self.path).st_size
        except OSError:
            size = 0
        if size > TABLE_WARN_BYTES:
            self.say_once("size", f"the table {self.path} is {size / 1e6:,.0f} MB: each process that searches reads "
                                  f"all of it ({self.read_s:.1f} s here); give this program a table of its own "
                                  "kernels (`tileprobe tune --export SMALL.json -- COMMAND`)")

    def say_once(self, what: str, text: str) -> None:
        """One line on stderr per ``what`` (a reason, a search key)."""
        if what in self.said:
            return
        self.said.add(what)
        sys.stderr.write(f"tileprobe use: {_plain(text)}\n")

    def answer(self, search: Search, frame):
        """A ``TuningResult`` for ``search`` from its row, or None (a miss: said once, noted)."""
        try:
            return self._answer(search, frame)
        except Exception as e:
            self.say_once("error", f"answering a search failed ({type(e).__name__}: {e}); it runs as the program "
                                   "wrote it")
            return None

    def _answer(self, search: Search, frame):
        found = None if self.loaded else index_rows(self.path, search.key)   # one bucket of a current index
        if found is None:
            self.load()
            if self.broken:              # said once when the table was read; no misses noted beside it
                return None
            found = self.rows.get(search.key)
        name = search.kernel_doc.get("qualname") or search.kernel_doc.get("name") or "kernel"
        if not found:
            return self._miss(search, frame, name, "no row for this search (its problem or its configurations are "
                                                   "not in the table)")
        names = {search.kernel_doc.get("name"), name, name.rsplit(".", 1)[-1]}
        rows = [r for k, r in found if k in names]
        if not rows:
            return self._miss(search, frame, name, f"the table's row for this search is under another kernel "
                                                   f"({', '.join(sorted({k for k, _ in found}))})")
        if len(rows) > 1:
            self.say_once(("dup", search.key), f"{name}: {len(rows)} rows for one search ({search.key}) in "
                                               f"{self.path}; the last that holds here answers")
        if self.facts is None:
            self.facts = device_facts()
        here = {**self.facts, "source_sha256": search.source_sha256}
        judged = [(row_problems(r) or stale_reasons(r, here), r) for r in rows]
        fresh = [r for why, r in judged if not why]
        if not fresh:
            why = judged[-1][0]
            return self._miss(search, frame, name, ("" if why[0].startswith("invalid") else "stale row: ") +
                              "; ".join(why))
        row = fresh[-1]
        want = _strict_text({"config": row["search"].get("config"), "hints": row["search"].get("hints")})
        for i, c in enumerate(search.configs_json):
            if _strict_text({"config": c["config"], "hints": c["hints"]}) == want:
                self.answered += 1
                return _tuning_result(search.configs[i], row)
        return self._miss(search, frame, name, "the table's configuration is not among the program's candidates")

    def _miss(self, search: Search, frame, name: str, reason: str):
        if search.key in self.said:      # said and noted once per search and process
            return None
        self.say_once(search.key, f"{name}: {reason}; running the program's own search (noted in "
                                  f"{self.misses_path})")
        try:
            sites = _Sites().frames(frame) if frame is not None else (None, None)
            line = {"t": "miss", "time": time.time(), "reason": reason, "argv": list(sys.argv),
                    "kernel": search.kernel_doc, **search.doc((_site(sites[0]), _site(sites[1])))}
            append_regular(self.misses_path, (json.dumps(line, default=repr) + "\n").encode("utf-8"))
        except Exception as e:
            self.say_once("misses", f"cannot note the miss in {self.misses_path}: {type(e).__name__}: {e}")
        return None


def _tuning_result(config, row: dict):
    """A real ``cuda.tile.tune.TuningResult`` whose ``best`` is the program's own configuration object."""
    mod = sys.modules[TUNE_MODULE]
    ci = row.get("ci_us") or [None, None]
    margin = (ci[1] - ci[0]) / 2 if None not in ci else 0.0
    best = mod.Measurement(config=config, mean_us=float(row.get("median_us") or 0.0),
                           num_samples=int(row.get("samples") or 0), error_margin_us=float(margin))
    return mod.TuningResult(best=best, successes=(best,), failures=())


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
    launch.__wrapped__ = original
    launch._tileprobe_record = True
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
    elif module.__name__ == TUNE_MODULE and (_RECORDER is not None or _USE is not None):
        current = getattr(module, "exhaustive_search", None)
        stub = None
        if getattr(current, "_tileprobe_stub", False):   # the hook's stand-in until the first search: unwrap it
            stub, current = current, current.__wrapped__
        if current is not None and not getattr(current, "_tileprobe_record", False):
            module.exhaustive_search = wrap_search(current)
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
    atexit.register(_RECORDER.close)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _RECORDER and _RECORDER.after_fork())
    return _RECORDER


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
        if current is not None and getattr(current, "_tileprobe_record", False):
            original = current.__wrapped__
            setattr(mod, attr, original)
            _rebind(current, original)
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

"""Describe what a launch is made of, cheaply: each argument (arrays by dtype, shape, strides, alignment;
scalars by value), the kernel (function, where it lives, its hints) and the call site (the first frame outside
cuda.tile, tileprobe and kernel libraries). Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import os
import re
import sys

from .names import ALIGN_CAP, ENV_SKIP, HINT_FIELDS, LIBRARY_PACKAGES

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


_DL: dict = {}


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
    out: dict = {"hints": kernel_hints(kernel), "type": f"{type(kernel).__module__}.{type(kernel).__qualname__}"}
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

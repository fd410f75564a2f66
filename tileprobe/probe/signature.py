"""JIT-faithful kernel signatures without a GPU.

``ct.launch`` compiles a kernel for the *signature* it infers from the launch arguments: dtypes, static
divisibility of shapes and strides, base-address alignment, constant strides, index width, constants. An audit
that compiles for another signature audits another kernel (FIELD_NOTES: the same RMSNorm gives 255 registers
under JIT and 127 under a hand-written generic signature).

So the audit does not write signatures by hand: it describes each array (:class:`ArraySpec`: dtype, shape,
strides in elements, alignment of the base address in bytes) and asks cuTile itself, through its public
``KernelSignature.from_kernel_args``, what JIT would infer. ``ArraySpec`` is a fake device array that speaks
DLPack (``__dlpack__`` / ``__dlpack_device__``, device kDLCUDA) and owns no memory; the fake driver in
:mod:`tileprobe._cutile` answers the few driver queries inference makes.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any

from tileprobe import _cutile
from tileprobe.errors import ProbeError

#: DLPack dtype (code, bits) per dtype name. Codes from dlpack.h v1.1 (DLDataTypeCode):
#: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12,
#: kDLFloat8_e8m0fnu 14.
DLPACK_DTYPES: dict[str, tuple[int, int]] = {
    "bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16),
    "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8), "float8_e8m0fnu": (14, 8),
}
_ALIASES = {"bool_": "bool", "half": "float16", "float": "float32", "double": "float64", "bf16": "bfloat16",
            "fp16": "float16", "fp32": "float32", "f32": "float32", "f16": "float16", "int": "int64"}

#: First fake device address handed out (any 2 MiB-aligned user-space address works; nothing is mapped).
FAKE_HEAP_BASE = 0x7F00_0000_0000


def dtype_name(dtype: Any) -> str:
    """Normalise a dtype given as a string, a ``cuda.tile`` DType or a ``torch.dtype`` to our name.

    Raises :class:`ProbeError` for a dtype the audit cannot describe (e.g. packed ``float4_e2m1fn``: pass
    its bytes as ``uint8`` and unpack in the kernel).
    """
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = str(name).removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in DLPACK_DTYPES:
        raise ProbeError(f"unsupported array dtype {dtype!r}; use one of {', '.join(DLPACK_DTYPES)}")
    return name


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name."""
    return DLPACK_DTYPES[dtype_name(dtype)][1] // 8


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """C-order strides in elements for ``shape``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


# --- DLPack structures (dlpack.h, unversioned DLManagedTensor, capsule name "dltensor") ----------------

class _DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", _DLDevice), ("ndim", c_int32), ("dtype", _DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class _DLManagedTensor(Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p), ("deleter", _DELETER)]
_LIVE: dict[int, tuple] = {}


def _delete(managed):
    _LIVE.pop(ctypes.addressof(managed.contents), None)


_DELETER_FN = _DELETER(_delete)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
KDL_CUDA = 2


@dataclass
class ArraySpec:
    """An abstract device array: what JIT sees of a launch argument, with no memory behind it.

    Args:
        shape: extent per dimension (elements).
        dtype: dtype name (``"bfloat16"``, ``"float8_e4m3fn"``, …), a cuTile DType or a torch dtype.
        strides: per-dimension stride in **elements** (not bytes); ``None`` means C-contiguous.
        align: alignment of the base address in bytes (default 256; PyTorch's caching allocator gives at least
            512, and cuTile never infers more than 16).
        offset: bytes added to the aligned base, to describe a view that starts mid-allocation.
        init: how a GPU run fills it (``"empty"``, ``"randn"``, ``"randint"``, …) and its parameters; the
            audit ignores it.

    Raises:
        ProbeError: negative extents, extents or strides past int64 (±2^63: DLPack's fields), a strides tuple of the
            wrong length, a non-positive alignment.
    """
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None
    align: int = 256
    offset: int = 0
    init: dict = field(default_factory=lambda: {"kind": "empty"})
    address: int = 0

    def __post_init__(self):
        self.shape = tuple(int(n) for n in self.shape)
        self.dtype = dtype_name(self.dtype)
        if any(n < 0 for n in self.shape):
            raise ProbeError(f"array shape {self.shape} has a negative extent")
        if any(n >= 2 ** 63 for n in self.shape):   # the DLPack shape is int64: a larger extent would wrap silently
            raise ProbeError(f"array shape {self.shape} has an extent of 2^63 or more, which no int64 shape holds")
        if self.strides is None:
            self.strides = contiguous_strides(self.shape)
        self.strides = tuple(int(s) for s in self.strides)
        if any(abs(s) >= 2 ** 63 for s in self.strides):
            raise ProbeError(f"strides {self.strides} hold a value of ±2^63 or more, which no int64 stride holds")
        if len(self.strides) != len(self.shape):
            raise ProbeError(f"strides {self.strides} do not match shape {self.shape}: one stride per dimension")
        if self.align <= 0 or self.align & (self.align - 1):
            raise ProbeError(f"align={self.align}: the base-address alignment must be a power of two in bytes")

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the array (from its first to one past its last element)."""
        if 0 in self.shape:
            return 0
        strides = self.strides if self.strides is not None else contiguous_strides(self.shape)   # set at init
        span = 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, strides))
        return span * itemsize(self.dtype)

    def describe(self) -> dict:
        """JSON-ready description: dtype, shape, strides (elements), align and offset (bytes)."""
        strides = self.strides if self.strides is not None else contiguous_strides(self.shape)   # set at init
        return {"dtype": self.dtype, "shape": list(self.shape), "strides": list(strides),
                "align": self.align, "offset": self.offset}

    # DLPack producer protocol (consumed by cuTile's C extension).
    def __dlpack_device__(self):
        return (KDL_CUDA, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        n = len(self.shape)
        shape = (c_int64 * max(n, 1))(*self.shape)
        strides = (c_int64 * max(n, 1))(*self.strides)
        code, bits = DLPACK_DTYPES[self.dtype]
        managed = _DLManagedTensor()
        managed.dl_tensor = _DLTensor(self.address or FAKE_HEAP_BASE, _DLDevice(KDL_CUDA, 0), n,
                                      _DLDataType(code, bits, 1), shape, strides, 0)
        managed.deleter = _DELETER_FN
        _LIVE[ctypes.addressof(managed)] = (managed, shape, strides)
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)


def assign_addresses(args: Sequence[Any]) -> None:
    """Give each :class:`ArraySpec` in ``args`` (nested tuples/lists too) its own fake, aligned address.

    Arrays never overlap, so no aliasing is implied; each base is ``align``-aligned plus ``offset``.
    """
    cursor = FAKE_HEAP_BASE
    for spec in _walk(args):
        base = math.ceil(cursor / max(spec.align, 4096)) * max(spec.align, 4096)
        spec.address = base + spec.offset
        cursor = spec.address + max(spec.nbytes, 1) + 4096


def _walk(args):
    for a in args:
        if isinstance(a, ArraySpec):
            yield a
        elif isinstance(a, (tuple, list)):
            yield from _walk(a)


def jit_signature(kernel, args: Sequence[Any]):
    """The ``KernelSignature`` cuTile's JIT would compile ``kernel`` for, given these launch arguments.

    ``args`` are what the probe would pass to ``ct.launch``, with :class:`ArraySpec` in place of tensors.

    Calling convention: the one ``ct.launch`` picks, i.e. the lowest that expresses the inferred constraints
    (cuTile ``cext/tile_kernel.cpp``, ``make_signature``: ``minimum_cconv`` starts at v1 and is raised to v2 by a
    static shape or a tuple parameter). Since cuda-tile 1.7 JIT makes every size-1 extent of an array of at most
    5 dimensions a static shape (``shape_constant = 1``, mangled ``1s1``), so such a launch compiles under
    ``cutile_python_v2`` (``…_Kt2_…``); all others under ``cutile_python_v1`` (``…_Kt1_…``). Both seen in JIT
    symbols on the H200 (TileGym RoPE's ``cos`` of shape (1, seq, dim): ``Kt2``; docs/LOG.md).
    ``from_kernel_args`` infers static shapes only when asked for v2, so we infer under v2 and keep v1 when
    cuTile infers the very same constraints under it.

    Raises:
        ProbeError: cuTile rejected the arguments (wrong count, a dtype it does not accept, …); the message
            is cuTile's.
    """
    from cuda.tile.compilation import CallingConvention, KernelSignature
    _cutile.install_fake_driver()
    args = tuple(args)
    assign_addresses(args)
    v1 = CallingConvention.cutile_python_v1()
    v2 = getattr(CallingConvention, "cutile_python_v2", None)
    try:
        if v2 is None:       # a cuTile without v2 has no static shapes nor tuples: v1 is all JIT can use
            return KernelSignature.from_kernel_args(kernel, args, v1)
        sig = KernelSignature.from_kernel_args(kernel, args, v2())
    except (TypeError, ValueError, RuntimeError) as e:
        raise ProbeError(f"cuTile rejected the launch arguments: {e}") from e
    try:
        low = KernelSignature.from_kernel_args(kernel, args, v1)
    except (TypeError, ValueError, RuntimeError):
        return sig           # v1 cannot express it (a tuple parameter)
    return low if tuple(low.parameters) == tuple(sig.parameters) else sig


def describe_signature(sig) -> list[dict]:
    """A JSON-ready view of a KernelSignature: one dict per parameter (kind and its constraints)."""
    out = []
    for p in sig.parameters:
        kind = type(p).__name__.removesuffix("Constraint").lower()
        if kind == "array":
            out.append({"kind": "array", "dtype": p.dtype.name, "ndim": p.ndim, "index_dtype": p.index_dtype.name,
                        "shape_divisible_by": list(p.shape_divisible_by),
                        "stride_divisible_by": list(p.stride_divisible_by),
                        "stride_constant": list(p.stride_constant), "shape_constant": list(p.shape_constant),
                        "base_addr_divisible_by": p.base_addr_divisible_by,
                        "may_alias_internally": p.may_alias_internally, "alias_groups": list(p.alias_groups)})
        elif kind == "constant":
            out.append({"kind": "constant", "value": p.value})
        elif kind == "scalar":
            out.append({"kind": "scalar", "dtype": p.dtype.name})
        else:
            out.append({"kind": kind, "repr": repr(p)})
    return out

"""Launch an audited cubin exactly as cuTile would: load, pack arguments, launch, ask the driver about it.

**Calling convention** (cuTile ``docs/source/compilation.rst``, "Calling Conventions", cuda-tile 1.6/1.7; an
audited variant has the one JIT picks, ``cutile_python_v1`` or ``v2``, which pack arrays and scalars alike, see
:func:`tileprobe.probe.signature.jit_signature`):
kernel arguments follow the Python parameters in order, except that constants (``ct.Constant`` parameters,
:class:`ConstantConstraint`) are omitted.

* an array (``ArrayConstraint``, ``ndim`` = n) is ``1 + 2n`` arguments: the device pointer to the first element
  (64-bit), then the n extents, then the n strides **in elements**, each of the C type of the constraint's
  ``index_dtype`` (int32 → ``int32_t``, uint32 → ``uint32_t``, int64 → ``int64_t``);
* a scalar (``ScalarConstraint``) is one argument of its dtype's C type (int32 → ``int32_t``, float32 →
  ``float`` …). JIT infers a Python ``float`` as float32, an ``int`` as int32 and a ``bool`` as ``bool_``,
  a 1-byte parameter in the cubin (cuTile's launcher passes a pointer to an int32 word holding it,
  ``cext/tile_kernel.cpp``: ``extract_py_bool``; the driver copies the parameter's size from there);
* a constant: nothing.

**Block and grid**: cuTile launches tile kernels with block (1, 1, 1), no dynamic shared memory and no launch
attributes, and the driver runs each CTA with the thread count the cubin carries (``.reqntid`` →
EIATTR_REQNTID): ``cext/tile_kernel.cpp`` (``parse_launch_args``: ``out->block = Grid{1, 1, 1}`` for
``ct.launch``; ``benchmark``: ``blockDimX = 1``), and cuTile's own test of exported cubins,
``test/test_export_compat.py::_call_kernel``, calls ``cuLaunchKernel(kernel, grid, (1, 1, 1), 0, stream, args)``.
We do the same through cuda-core (``LaunchConfig(grid=grid, block=(1, 1, 1), shmem_size=0)``). The grid is
the probe's ``grid(case, hints, num_sms)``, in tile blocks, as given to ``ct.launch``.

**Occupancy**: the driver's ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` must be given the REAL CTA size
(the cubin's REQNTID): with block size 1 it answers as if a CTA had one thread (FIELD_NOTES: 32 where the truth
was 16).

Before any launch the packed arguments are checked against the cubin's own parameter table
(EIATTR_KPARAM_INFO_V2 in ``.nv.info.<kernel>``: ordinal, offset, size of each parameter), and every array
against the assumptions of the signature the cubin was compiled for (alignment, divisibility, unit strides):
launching with arguments that break them is undefined behaviour, so it is refused with the reason.
"""
from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tileprobe.errors import ProbeError, TileprobeError
from tileprobe.probe.signature import ArraySpec, dtype_name, itemsize

# --- CUDA errors -------------------------------------------------------------------------------------------

#: Driver errors after which the context is unusable (every later call fails): the worker must be replaced.
#: Codes from cuda.h (CUresult); the sticky set follows cuda-core's error explanations
#: (``cuda_core/cuda/core/_utils/driver_cu_result_explanations.py``: 700, 702, 709, 710, 714-719, 999).
STICKY_CUDA_ERRORS = {
    700: "CUDA_ERROR_ILLEGAL_ADDRESS", 702: "CUDA_ERROR_LAUNCH_TIMEOUT", 709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    710: "CUDA_ERROR_ASSERT", 714: "CUDA_ERROR_HARDWARE_STACK_ERROR", 715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS", 717: "CUDA_ERROR_INVALID_ADDRESS_SPACE", 718: "CUDA_ERROR_INVALID_PC",
    719: "CUDA_ERROR_LAUNCH_FAILED", 214: "CUDA_ERROR_ECC_UNCORRECTABLE", 999: "CUDA_ERROR_UNKNOWN",
}
#: Other CUresult values by name (cuda.h, CUDA 13.4), for messages when cuda-bindings is not importable.
_CURESULT = {"CUDA_ERROR_INVALID_VALUE": 1, "CUDA_ERROR_OUT_OF_MEMORY": 2, "CUDA_ERROR_NOT_INITIALIZED": 3,
             "CUDA_ERROR_DEINITIALIZED": 4, "CUDA_ERROR_NO_DEVICE": 100, "CUDA_ERROR_INVALID_DEVICE": 101,
             "CUDA_ERROR_INVALID_IMAGE": 200, "CUDA_ERROR_INVALID_CONTEXT": 201, "CUDA_ERROR_NO_BINARY_FOR_GPU": 209,
             "CUDA_ERROR_INVALID_PTX": 218, "CUDA_ERROR_NOT_FOUND": 500, "CUDA_ERROR_NOT_READY": 600,
             "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": 701, "CUDA_ERROR_NOT_SUPPORTED": 801}
#: How torch / the runtime word the same errors (cudaGetErrorString), for messages that carry no code.
_ERROR_TEXTS = {
    "illegal memory access": 700, "the launch timed out": 702, "device-side assert": 710,
    "hardware stack error": 714, "illegal instruction": 715, "misaligned address": 716,
    "invalid address space": 717, "invalid program counter": 718, "unspecified launch failure": 719,
    "uncorrectable ecc error": 214,
}


class CudaFault(RuntimeError):
    """A CUDA driver call failed. ``code``: the CUresult (int); ``name``: e.g. ``CUDA_ERROR_ILLEGAL_ADDRESS``;
    ``sticky``: the context is broken for good (see :data:`STICKY_CUDA_ERRORS`)."""

    def __init__(self, code: int, name: str, what: str):
        self.code, self.name, self.what = int(code), name, what
        super().__init__(f"{what}: {name} ({code})")

    @property
    def sticky(self) -> bool:
        """Whether the error poisons the CUDA context (:data:`STICKY_CUDA_ERRORS`): the worker must be replaced."""
        return self.code in STICKY_CUDA_ERRORS


def error_code_from_text(text: str) -> int | None:
    """The CUresult a message names (``CUDA_ERROR_X`` or a runtime error string), or None."""
    m = re.search(r"CUDA_ERROR_[A-Z0-9_]+", text)
    if m:
        from_names = {v: k for k, v in STICKY_CUDA_ERRORS.items()}
        if m.group(0) in from_names:
            return from_names[m.group(0)]
        try:
            return int(getattr(_drv().CUresult, m.group(0)))
        except (ImportError, AttributeError):
            if m.group(0) in _CURESULT:
                return _CURESULT[m.group(0)]
    low = text.lower()
    for phrase, code in _ERROR_TEXTS.items():
        if phrase in low:
            return code
    return None


def _drv():
    from cuda.bindings import driver
    return driver


def check_cu(result, what: str):
    """Unpack a cuda-bindings ``(CUresult, value…)`` tuple; raise :class:`CudaFault` unless CUDA_SUCCESS."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        name = getattr(err, "name", None) or f"CUresult {int(err)}"
        raise CudaFault(int(err), name, what)
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


def context_status() -> int:
    """``cuCtxSynchronize``'s CUresult for the current context (0: healthy). A sticky error is returned here by
    every call once it happened, so this tells a broken context from an ordinary failure."""
    err, = _drv().cuCtxSynchronize()
    return int(err)


# --- the cubin's parameter table ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as the cubin lays it out: ``ordinal`` (0-based), ``offset_bytes`` in the parameter
    constant bank, ``size_bytes``."""
    ordinal: int
    offset_bytes: int
    size_bytes: int


EIATTR_KPARAM_INFO = 0x17
EIATTR_KPARAM_INFO_V2 = 0x45


def cubin_params(cubin: bytes, symbol: str) -> list[KernelParam]:
    """The parameter table of kernel ``symbol`` in a cubin, sorted by ordinal.

    Read from ``.nv.info.<symbol>`` (:func:`tileprobe.model.cubin.kernel_attributes`): EIATTR_KPARAM_INFO_V2 (0x45,
    tileiras 13.x; payload u32 index, u16 ordinal, u16 offset, u32 flags whose low 16 bits are the size in bytes) or
    the older EIATTR_KPARAM_INFO (0x17; size in bits 18–31 of the flags word). Layout checked against
    ``cuobjdump -elf`` 13.4.92 ("Ordinal", "Offset", "Size") on the fixture cubins in ``tests/data/cubins``.

    Raises:
        ProbeError: the cubin has no such kernel (the record's ``symbol`` and the cubin disagree).
        CubinError: the cubin or its ``.nv.info`` records are damaged.
    """
    from tileprobe.model.cubin import EIFMT_SVAL, kernel_attributes
    kernels = kernel_attributes(cubin)
    if symbol not in kernels:
        raise ProbeError(f"the cubin has no kernel {symbol!r} (it has {', '.join(kernels) or 'none'})")
    out = {}
    for fmt, attr, payload in kernels[symbol]:
        if (fmt == EIFMT_SVAL and attr in (EIATTR_KPARAM_INFO, EIATTR_KPARAM_INFO_V2) and isinstance(payload, bytes)
                and len(payload) >= 12):     # an SVAL record's payload is its bytes (the others' an int)
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
            nbytes = flags & 0xFFFF if attr == EIATTR_KPARAM_INFO_V2 else (flags >> 18) & 0x3FFF
            out[ordinal] = KernelParam(ordinal, offset, nbytes)
    return [out[k] for k in sorted(out)]


# --- argument packing --------------------------------------------------------------------------------------

_INT_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
}
_FLOAT_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double}
_INDEX_CTYPES = {"int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64}


@dataclass(frozen=True)
class ArrayView:
    """What the calling convention needs of an array: base address, extents, strides (elements), dtype name."""
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class SignatureParam:
    """One parameter of a variant's JIT signature (an item of the record's ``signature``:
    :func:`tileprobe.probe.signature.describe_signature`): its ``kind`` (array | scalar | constant | another kind
    tileprobe cannot pack), a constant's ``value``, a scalar's or an array's element ``dtype``, and an array's
    assumptions: ``ndim``, the index dtype of its extents and strides, per dimension the divisors of its extents and
    strides and the extents and strides fixed to a value (None: free), the divisor of its base address (bytes)."""
    kind: str | None = None
    value: Any = None
    dtype: str | None = None
    ndim: int = 0
    index_dtype: str = "int32"
    shape_divisible_by: list | None = None
    stride_divisible_by: list | None = None
    stride_constant: list | None = None
    shape_constant: list | None = None
    base_addr_divisible_by: int | None = None

    @classmethod
    def from_wire(cls, param: Any) -> SignatureParam:
        """The parameter of a signature item (one given as a record is returned as it is).

        Raises:
            tileprobe.jsonrecord.FieldError: not an object, or a field of another type (named)."""
        from tileprobe.jsonrecord import from_dict
        return param if isinstance(param, SignatureParam) else from_dict(cls, param, where="the variant's signature")


def array_view(arg: Any) -> ArrayView | None:
    """The :class:`ArrayView` of a torch tensor, an :class:`ArraySpec` or a ``__cuda_array_interface__`` object;
    None for anything else."""
    if isinstance(arg, ArraySpec):
        assert arg.strides is not None     # by construction: ArraySpec's __post_init__ sets them
        return ArrayView(arg.address, tuple(arg.shape), tuple(arg.strides), arg.dtype)
    if hasattr(arg, "data_ptr") and hasattr(arg, "stride") and hasattr(arg, "dtype"):   # torch.Tensor
        return ArrayView(int(arg.data_ptr()), tuple(arg.shape), tuple(arg.stride()), dtype_name(arg.dtype))
    cai = getattr(arg, "__cuda_array_interface__", None)
    if cai is not None:
        import numpy as np
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        from tileprobe.probe.signature import contiguous_strides
        strides = (tuple(s // dt.itemsize for s in cai["strides"]) if cai.get("strides")
                   else contiguous_strides(shape))
        return ArrayView(int(cai["data"][0]), shape, strides, dtype_name(dt.name))
    return None


def pack_arguments(signature: Sequence[dict | SignatureParam], args: Sequence[Any],
                   param_sizes: Sequence[int] | None = None) -> list:
    """The kernel arguments (ctypes values, in order) for launch arguments ``args`` of a variant whose JIT
    signature is ``signature`` (the record's ``signature``: :func:`tileprobe.probe.signature.describe_signature`).

    ``param_sizes`` (bytes per kernel parameter, from :func:`cubin_params`) only decides how a bool scalar is
    stored (1 byte, the default, or a 4-byte word). See the module doc for the convention.

    Raises:
        ProbeError: argument count or kinds differ from the signature; a constant differs from the one the cubin
            was compiled with; an array breaks an assumption of the signature (dtype, ndim, alignment,
            divisibility, constant stride or extent, index range); a parameter kind tileprobe cannot pack yet.
    """
    if len(args) != len(signature):
        raise ProbeError(f"{len(args)} launch arguments but the audited signature has {len(signature)} parameters")
    out: list = []
    for i, (item, arg) in enumerate(zip(signature, args)):
        param = SignatureParam.from_wire(item)
        kind = param.kind
        if kind == "constant":
            if not _same_constant(arg, param.value):
                raise ProbeError(f"argument {i} is {arg!r} but the cubin was compiled for the constant "
                                 f"{param.value!r}: audit and run must use the same probe case")
        elif kind == "scalar":
            nbytes = param_sizes[len(out)] if param_sizes and len(out) < len(param_sizes) else None
            out.append(_pack_scalar(i, str(param.dtype), arg, nbytes))
        elif kind == "array":
            out.extend(_pack_array(i, param, arg))
        else:
            raise ProbeError(f"argument {i}: parameter kind {kind!r} (tuple/list/dataclass) is not supported by "
                             "tileprobe run yet; pass arrays and scalars")
    return out


def _same_constant(arg, value) -> bool:
    if isinstance(value, str) and not isinstance(arg, str):
        return value in (str(arg), getattr(arg, "name", None))
    if isinstance(arg, bool) != isinstance(value, bool):
        return False
    if isinstance(arg, float) and isinstance(value, float) and arg != arg and value != value:
        return True
    return arg == value


def _pack_scalar(i: int, dtype: str, arg, nbytes: int | None):
    if isinstance(arg, bool) or dtype in ("bool", "bool_"):
        return ctypes.c_int32(int(bool(arg))) if nbytes == 4 else ctypes.c_bool(bool(arg))
    if dtype == "float16":
        return ctypes.c_uint16(struct.unpack("<H", struct.pack("<e", float(arg)))[0])
    if dtype == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", float(arg)))[0]
        return ctypes.c_uint16(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)
    if dtype not in _INT_CTYPES and dtype not in _FLOAT_CTYPES:
        raise ProbeError(f"argument {i}: scalar dtype {dtype} cannot be packed")
    if dtype in _INT_CTYPES:       # the int and uint dtypes
        if isinstance(arg, float) or not hasattr(arg, "__index__"):
            raise ProbeError(f"argument {i} is {arg!r}; the cubin expects an integer scalar ({dtype})")
        bits = itemsize(dtype) * 8
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.startswith("int") else (0, (1 << bits) - 1)
        if not lo <= int(arg) <= hi:
            raise ProbeError(f"argument {i} = {arg} does not fit the cubin's {dtype} scalar")
        return _INT_CTYPES[dtype](int(arg))
    return _FLOAT_CTYPES[dtype](float(arg))


def _pack_array(i: int, param: SignatureParam, arg) -> list:
    view = array_view(arg)
    if view is None:
        raise ProbeError(f"argument {i} is a {type(arg).__name__}; the cubin expects an array ({param.dtype})")
    check_array(i, param, view)
    ctype = _INDEX_CTYPES.get(param.index_dtype)
    if ctype is None:
        raise ProbeError(f"argument {i}: index dtype {param.index_dtype} cannot be packed")
    return [ctypes.c_uint64(view.ptr)] + [ctype(n) for n in view.shape] + [ctype(s) for s in view.strides]


def check_array(i: int, param: dict | SignatureParam, view: ArrayView) -> None:
    """Refuse an array that breaks an assumption the cubin was compiled under (ProbeError with the reason).
    ``param``: the signature's item for argument ``i`` (a dict, or its :class:`SignatureParam`)."""
    param = SignatureParam.from_wire(param)
    def bad(what):
        raise ProbeError(f"argument {i}: {what}, but the audited cubin assumes otherwise; the probe's arrays for "
                         "the run must have the layout the audit described")
    if view.dtype != param.dtype:
        bad(f"dtype is {view.dtype}, the signature says {param.dtype}")
    if len(view.shape) != param.ndim:
        bad(f"ndim is {len(view.shape)}, the signature says {param.ndim}")
    base = param.base_addr_divisible_by or 1
    if view.ptr % base:
        bad(f"base address {view.ptr:#x} is not divisible by {base} B")
    for d in range(param.ndim):
        for name, values, actual in (("extent", param.shape_divisible_by, view.shape[d]),
                                     ("stride", param.stride_divisible_by, view.strides[d])):
            k = values[d] if values else 1
            if k and actual % k:
                bad(f"{name}[{d}] = {actual} is not divisible by {k}")
        for name, values, actual in (("stride", param.stride_constant, view.strides[d]),
                                     ("extent", param.shape_constant, view.shape[d])):
            if values and values[d] is not None and values[d] != actual:
                bad(f"{name}[{d}] = {actual}, the signature fixes it to {values[d]}")
    if param.index_dtype in ("int32", "uint32"):
        lo = 0 if param.index_dtype == "uint32" else -(1 << 31)
        hi = (1 << 32) - 1 if param.index_dtype == "uint32" else (1 << 31) - 1
        for v in (*view.shape, *view.strides):
            if not lo <= v <= hi:
                bad(f"extent or stride {v} overflows the {param.index_dtype} index type")


def check_packing(packed: Sequence, params: Sequence[KernelParam]) -> None:
    """Compare packed arguments with the cubin's parameter table: same count, same size each.

    Raises:
        ProbeError: the calling convention and the cubin disagree (names the first differing parameter).
    """
    if len(packed) != len(params):
        raise ProbeError(f"packed {len(packed)} kernel arguments but the cubin's kernel takes {len(params)} "
                         "(EIATTR_KPARAM_INFO): the signature and the cubin do not match")
    for p, v in zip(params, packed):
        if ctypes.sizeof(v) != p.size_bytes:
            raise ProbeError(f"kernel parameter {p.ordinal}: packed {ctypes.sizeof(v)} B "
                             f"({type(v).__name__}), the cubin expects {p.size_bytes} B")


def grid3(grid) -> tuple[int, int, int]:
    """A probe's grid as (x, y, z) CTAs. Raises ProbeError for a non-integer, empty or out-of-range grid
    (x ≤ 2³¹ − 1, y and z ≤ 65535: CUDA's grid limits)."""
    import operator
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)):      # a generator, a string: not silently taken apart
        raise ProbeError(f"grid {grid!r} must be a tuple of 1 to 3 integers")
    try:      # whole numbers only: 1.5, True, nan and inf were taken as 1, 1 and a traceback (a hostile tester)
        if any(isinstance(g, bool) for g in grid):
            raise TypeError("a bool")
        dims = tuple(operator.index(g) for g in grid)
    except (TypeError, ValueError) as e:
        raise ProbeError(f"grid {grid!r} must be a tuple of 1 to 3 integers") from e
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ProbeError(f"grid {grid!r} must be 1 to 3 positive integers")
    x, y, z = dims + (1,) * (3 - len(dims))
    if x > 2**31 - 1 or y > 65535 or z > 65535:
        raise ProbeError(f"grid {(x, y, z)} exceeds CUDA's limits (x ≤ 2^31−1, y, z ≤ 65535)")
    return x, y, z


# --- cuda-core ---------------------------------------------------------------------------------------------

def cuda_core():
    """The cuda-core module: ``cuda.core`` (≥ 0.5) or ``cuda.core.experimental`` (0.2 – 0.4)."""
    try:
        import cuda.core as core
        if hasattr(core, "ObjectCode"):
            return core
    except ImportError:
        pass
    try:
        from cuda.core import experimental as core
        return core
    except ImportError as e:
        raise TileprobeError("tileprobe run needs cuda-core (pip install cuda-core) and cuda-bindings") from e


class _StreamHandle:
    """An object speaking the ``__cuda_stream__`` protocol for a raw stream handle (for cuda-core's
    ``Device.create_stream`` when ``Stream.from_handle`` is missing)."""

    def __init__(self, handle: int):
        self.handle = int(handle)

    def __cuda_stream__(self):
        return (0, self.handle)


def core_stream(handle: int):
    """A cuda-core Stream for a raw CUstream handle (e.g. ``torch.cuda.current_stream().cuda_stream``)."""
    core = cuda_core()
    if hasattr(core.Stream, "from_handle"):
        return core.Stream.from_handle(int(handle))
    return core.Device().create_stream(_StreamHandle(handle))


class LoadedKernel:
    """One audited cubin loaded into the current context, ready to launch.

    Args:
        cubin: the cubin bytes (the audit's file, unchanged).
        symbol: the kernel's mangled name (the record's ``symbol``).

    Raises:
        ProbeError: no such kernel in the cubin. CudaFault / cuda-core errors: the driver refused the cubin
            (e.g. compiled for another arch: CUDA_ERROR_NO_BINARY_FOR_GPU).
    """

    def __init__(self, cubin: bytes, symbol: str):
        core = cuda_core()
        self.symbol = symbol
        self.params = cubin_params(cubin, symbol)
        self.object_code = core.ObjectCode.from_cubin(cubin)
        self.kernel = self.object_code.get_kernel(symbol)
        self._core = core
        self._function = None
        self._configs: dict = {}

    def launch(self, stream, grid: tuple[int, int, int], packed: Sequence) -> None:
        """Enqueue one launch: ``grid`` CTAs, block (1, 1, 1), no dynamic shared memory (see module doc)."""
        config = self._configs.get(grid)
        if config is None:
            config = self._configs[grid] = self._core.LaunchConfig(grid=tuple(grid), block=(1, 1, 1), shmem_size=0)
        self._core.launch(stream, config, self.kernel, *packed)

    def function(self):
        """The ``CUfunction`` of this kernel in the current context (for driver queries)."""
        if self._function is None:
            driver = _drv()
            handle = getattr(self.kernel, "handle", None)
            if handle is None:
                handle = self.kernel._handle
            if isinstance(handle, driver.CUfunction):
                self._function = handle
            else:
                self._function = check_cu(driver.cuKernelGetFunction(handle), "cuKernelGetFunction")
        return self._function

    def driver_facts(self, threads_per_cta: int) -> dict:
        """What the driver says of this kernel: CTAs/SM for ``threads_per_cta`` threads (and for 1, to show the
        difference), registers per thread, static shared memory (bytes), local memory per thread (bytes),
        max threads per CTA."""
        driver = _drv()
        fn = self.function()
        attr = driver.CUfunction_attribute

        def get(a):
            return check_cu(driver.cuFuncGetAttribute(a, fn), f"cuFuncGetAttribute({a.name})")

        occ = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor
        return {
            "driver_ctas_per_sm": check_cu(occ(fn, int(threads_per_cta), 0),
                                           "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
            "driver_ctas_per_sm_block1": check_cu(occ(fn, 1, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
            "driver_registers": get(attr.CU_FUNC_ATTRIBUTE_NUM_REGS),
            "driver_shared_bytes": get(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            "driver_local_bytes": get(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            "driver_max_threads_per_cta": get(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        }

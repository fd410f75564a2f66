"""Real device arrays for GPU runs: the torch twin of :class:`tileprobe.probe.define.SpecArrays`.

A probe's ``args(case, arrays)`` is called twice: by the audit with ``SpecArrays`` (shape, dtype, strides,
alignment; no memory) and by ``tileprobe run`` with :class:`TorchArrays`, whose methods have the same names and
signatures and return torch tensors of the same shape, dtype, strides (in elements) and base alignment. So the
cubin that is timed was compiled for the signature JIT would infer from these very tensors; ``launch.pack_arguments``
checks that the tensors meet every assumption of that signature before a launch.

Values: every :class:`TorchArrays` owns a seeded ``torch.Generator``; a run makes a new one per check with a new
seed, so each check sees fresh random inputs and a failing check can be repeated from its recorded seed.
``empty`` arrays are outputs: they are *poisoned* — NaN for floating dtypes, :func:`poison_value` for integers —
so that an element the kernel never wrote is caught by :mod:`tileprobe.run.check`.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from tileprobe.errors import ProbeError
from tileprobe.probe.signature import contiguous_strides, dtype_name, itemsize

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Our dtype name -> torch attribute name (torch >= 2.3 for uint16/32/64, >= 2.7 for float8_e8m0fnu).
_TORCH_NAMES = {"bool": "bool"}

_FLOAT_KINDS = ("float", "bfloat")


def torch_dtype(name):
    """The ``torch.dtype`` for one of our dtype names (or a torch dtype). Raises ProbeError when torch lacks it."""
    import torch
    if isinstance(name, torch.dtype):
        return name
    name = dtype_name(name)
    dt = getattr(torch, _TORCH_NAMES.get(name, name), None)
    if not isinstance(dt, torch.dtype):
        raise ProbeError(f"dtype {name} is not available in torch {torch.__version__}; upgrade torch")
    return dt


def is_floating(dtype) -> bool:
    """True for floating dtypes (including bfloat16 and float8 types)."""
    name = dtype_name(dtype)
    return name.startswith(_FLOAT_KINDS)


def poison_value(dtype):
    """What an unwritten output element holds: NaN for floating dtypes; for integers the most negative value
    (signed) or the largest (unsigned); ``None`` for bool (no spare value: unwritten booleans go unnoticed)."""
    name = dtype_name(dtype)
    if is_floating(name):
        return float("nan")
    if name == "bool":
        return None
    bits = itemsize(name) * 8
    return -(1 << (bits - 1)) if name.startswith("int") else (1 << bits) - 1


class TorchArrays:
    """The ``arrays`` factory a GPU run hands to ``Probe.args``: every call returns a torch tensor.

    Mirrors :class:`tileprobe.probe.define.SpecArrays` method for method (same names, parameters and defaults; a test
    compares them). Shapes in elements, ``strides`` in elements (``None``: C-contiguous; non-contiguous layouts are
    views of a larger buffer via ``as_strided``), ``align`` and ``offset`` in bytes.

    Args:
        device: torch device (default ``"cuda"``; tests use ``"cpu"``).
        seed: seed of this factory's ``torch.Generator``.

    Raises:
        ProbeError: negative strides, an ``offset`` that is not a multiple of the element size, a dtype torch lacks.
    """

    def __init__(self, device="cuda", seed: int = 0):
        import torch
        self.device = torch.device(device)
        self.seed = int(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)
        self.created: list = []   # every tensor made, in order (the run reports them)

    # --- layout ------------------------------------------------------------------------------------------
    def _alloc(self, shape, dtype, strides=None, align=256, offset=0):
        import torch
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(int(n) for n in shape)
        dt = torch_dtype(dtype)
        size = itemsize(dtype_name(dtype))
        strides = tuple(int(s) for s in (strides if strides is not None else contiguous_strides(shape)))
        if len(strides) != len(shape):
            raise ProbeError(f"strides {strides} do not match shape {shape}: one stride per dimension")
        if any(s < 0 for s in strides):
            raise ProbeError(f"strides {strides}: negative strides cannot be made with torch.as_strided")
        if offset % size:
            raise ProbeError(f"offset={offset} B is not a multiple of the {dtype_name(dtype)} element size ({size} B)")
        if align <= 0 or align & (align - 1):
            raise ProbeError(f"align={align}: the base-address alignment must be a power of two in bytes")
        span = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        slack = -(-align // size)
        buf = torch.empty(span + slack + offset // size + 1, dtype=dt, device=self.device)
        start = (-buf.data_ptr() % align) // size + offset // size
        t = torch.as_strided(buf, shape, strides, start)
        self.created.append(t)
        return t

    def _fill_float32(self, t, src):
        """Copy a float32 tensor into ``t`` (casting: works for fp8, bf16 and integer dtypes)."""
        copy_into(t, src.to(t.dtype))
        return t

    def _f32(self, shape):
        import torch
        return torch.empty(tuple(shape), dtype=torch.float32, device=self.device)

    # --- the SpecArrays API ------------------------------------------------------------------------------
    def empty(self, shape, dtype, *, strides=None, align=256, offset=0):
        """An output array, poisoned (NaN, or :func:`poison_value` for integers) so unwritten elements show."""
        t = self._alloc(shape, dtype, strides, align, offset)
        poison(t)
        return t

    def zeros(self, shape, dtype, *, strides=None, align=256, offset=0):
        """An array of zeros."""
        t = self._alloc(shape, dtype, strides, align, offset)
        return self._fill_float32(t, self._f32(t.shape).zero_())

    def full(self, shape, dtype, value, *, strides=None, align=256, offset=0):
        """An array filled with ``value``."""
        import torch
        t = self._alloc(shape, dtype, strides, align, offset)
        if is_floating(t.dtype) and t.dtype not in (torch.float32, torch.float64):
            return self._fill_float32(t, self._f32(t.shape).fill_(value))
        t.fill_(value)
        return t

    def randn(self, shape, dtype, *, scale=1.0, strides=None, align=256, offset=0):
        """Normal(0, scale²) values (drawn in float32, then cast), fresh per check."""
        t = self._alloc(shape, dtype, strides, align, offset)
        src = self._f32(t.shape).normal_(0.0, 1.0, generator=self.generator)
        return self._fill_float32(t, src * scale)

    def rand(self, shape, dtype, *, low=0.0, high=1.0, strides=None, align=256, offset=0):
        """Uniform [low, high) values (computed in float32, then cast: works for fp8)."""
        t = self._alloc(shape, dtype, strides, align, offset)
        src = self._f32(t.shape).uniform_(0.0, 1.0, generator=self.generator)
        return self._fill_float32(t, src * (high - low) + low)

    def randint(self, shape, dtype, low, high, *, strides=None, align=256, offset=0):
        """Uniform integers in [low, high)."""
        import torch
        t = self._alloc(shape, dtype, strides, align, offset)
        src = torch.randint(int(low), int(high), tuple(t.shape), generator=self.generator, device=self.device,
                            dtype=torch.int64)
        copy_into(t, src.to(torch.float32).to(t.dtype) if is_floating(t.dtype) else src.to(t.dtype))
        return t

    def randperm(self, n, dtype="int32", *, align=256, offset=0):
        """A random permutation of 0 … n-1 (e.g. gather indices)."""
        import torch
        t = self._alloc((n,), dtype, None, align, offset)
        t.copy_(torch.randperm(int(n), generator=self.generator, device=self.device).to(t.dtype))
        return t

    def custom(self, shape, dtype, fill: Callable, *, strides=None, align=256, offset=0):
        """An array filled by ``fill(tensor, generator)`` (the probe's own function), poisoned first."""
        t = self._alloc(shape, dtype, strides, align, offset)
        poison(t)
        fill(t, self.generator)
        return t


def copy_into(t, src) -> None:
    """``t.copy_(src)``, also when ``t`` is a broadcast view (a zero stride, as ``expand`` makes and recorded probes
    reproduce): torch refuses to copy into a tensor whose elements share memory, so each zero-stride dimension is
    filled through its first index (the view then repeats it, as the program's own expanded tensor did)."""
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        if s == 0 and n > 1:
            t, src = t.narrow(d, 0, 1), src.narrow(d, 0, 1)
    t.copy_(src)


def poison(t) -> None:
    """Fill tensor ``t`` (in place) with :func:`poison_value` of its dtype; bool tensors are left as they are."""
    import torch
    value = poison_value(t.dtype)
    if value is None:
        return
    if isinstance(value, float) and t.dtype not in (torch.float16, torch.float32, torch.float64, torch.bfloat16):
        t.copy_(torch.full(tuple(t.shape), value, dtype=torch.float32, device=t.device).to(t.dtype))
        return
    t.fill_(value)


def is_poisoned(t):
    """Boolean tensor: where ``t`` still holds the poison of its dtype (NaN counts for floats)."""
    import torch
    value = poison_value(t.dtype)
    if value is None:
        return torch.zeros(tuple(t.shape), dtype=torch.bool, device=t.device)
    if isinstance(value, float) and math.isnan(value):
        return torch.isnan(t.float())
    return t == value

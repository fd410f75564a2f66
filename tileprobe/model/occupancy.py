"""Theoretical occupancy: how many CTAs of a kernel fit on one SM at once.

The rules are those of ``cudaOccMaxActiveBlocksPerMultiprocessor`` in ``cuda_occupancy.h`` (pip
``nvidia-cuda-runtime`` 13.4.92), which is also what the driver's ``cuOccupancyMaxActiveBlocksPerMultiprocessor``
answers. Four resources each allow some number of CTAs per SM; the smallest wins:

- ``"threads"``: warp slots. ``max_warps_per_sm // ceil(threads_per_cta / 32)``
  (``cudaOccMaxBlocksPerSMWarpsLimit``).
- ``"registers"``: each warp gets ``regs_per_thread * 32`` registers rounded up to ``reg_alloc_unit`` (256).
  The register file is split into 4 sub-partitions and a warp lives in one, so an SM holds
  ``4 * ((regs_per_sm / 4) // regs_per_warp)`` warps, i.e. that many // warps per CTA CTAs. A CTA whose
  registers, with its warps rounded up to a multiple of 4, exceed ``max_regs_per_cta`` cannot launch (0)
  (``cudaOccMaxBlocksPerSMRegsLimit``: "hardware check").
- ``"shared_memory"``: each CTA takes ``smem_per_cta_bytes + 1 KB`` reserve, rounded up to 128 bytes. Above
  ``max_smem_per_cta_bytes + 1 KB`` the CTA cannot launch (0); otherwise ``smem_per_sm_bytes // that``
  (``cudaOccMaxBlocksPerSMSmemLimit``, ``cudaOccSMemPerBlock`` with the opt-in limit).
- ``"cta_slots"``: ``max_ctas_per_sm`` (``cudaOccMaxBlocksPerMultiprocessor``).

Shared-memory carveout: with the default device state (``cudaOccDeviceState()``: ``carveoutConfig =
SHAREDMEM_CARVEOUT_DEFAULT``, ``cacheConfig = CACHE_PREFER_NONE``) ``cudaOccSMemPreferenceVoltaPlus`` takes the
whole ``sharedMemPerMultiprocessor`` and aligns it up to a carveout step (a no-op: it is the largest step), so the
full ``smem_per_sm_bytes`` counts. The driver chooses the actual carveout at launch; a kernel that sets
``cudaFuncAttributePreferredSharedMemoryCarveout`` can get fewer CTAs than this. That is not modelled.

Function attributes are the header's defaults for a real function (``cudaOccFuncAttributes(cudaFuncAttributes)``:
opt-in shared-memory limit, one block barrier, no partitioned global caching, no virtual resources); none of
these changes the count on sm_80+ (the barrier limit is never below the CTA-slot limit).

A kernel that cannot launch is a result, not an error: ``ctas_per_sm == 0`` with the resource that forbids it as
limiter, so an audit over many compiled variants goes on. Inputs no cubin can have (0 or > 1024 threads,
> 255 registers, negative shared memory) raise :class:`~tileprobe.errors.TileprobeError`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tileprobe.errors import TileprobeError
from tileprobe.model.arch import SUBPARTITIONS_PER_SM, ArchLimits

#: Limiter names, in tie-break order: when several resources allow the same (smallest) number of CTAs, the
#: first one here is reported. This is the order of the header's ``cudaOccLimitingFactor`` bits
#: (WARPS 0x01, REGISTERS 0x02, SHARED_MEMORY 0x04, BLOCKS 0x08): the reported limiter is the lowest bit the
#: header sets among these four.
LIMITERS: tuple[str, ...] = ("threads", "registers", "shared_memory", "cta_slots")

#: CTAs per SM allowed by a resource the kernel does not use (0 registers): the header's ``INT_MAX``.
UNLIMITED = 2**31 - 1


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one kernel launch configuration on one SM.

    ``ctas_per_sm``: CTAs resident per SM (0: the kernel cannot launch). ``warps_per_sm``: warps resident per SM
    (``ctas_per_sm`` × warps per CTA). ``occupancy_pct``: ``warps_per_sm / max_warps_per_sm * 100``, 0-100.
    ``limiter``: the binding resource, one of :data:`LIMITERS` (ties resolved in that order). ``limits``:
    limiter name → CTAs per SM that resource alone allows (:data:`UNLIMITED` when it allows any number).
    """

    ctas_per_sm: int
    warps_per_sm: int
    occupancy_pct: float
    limiter: str
    limits: dict[str, int] = field(hash=False)

    def __post_init__(self) -> None:
        if self.limiter not in LIMITERS:
            raise TileprobeError(f"Occupancy.limiter must be one of {LIMITERS}, got {self.limiter!r}")
        if set(self.limits) != set(LIMITERS):
            raise TileprobeError(f"Occupancy.limits must have exactly the keys {LIMITERS}, got {sorted(self.limits)}")
        if self.ctas_per_sm != self.limits[self.limiter] or self.ctas_per_sm != min(self.limits.values()):
            raise TileprobeError(f"Occupancy.ctas_per_sm = {self.ctas_per_sm} is not the {self.limiter!r} limit "
                                 f"and the smallest of {self.limits}")
        if not 0.0 <= self.occupancy_pct <= 100.0:
            raise TileprobeError(f"Occupancy.occupancy_pct must be within 0-100, got {self.occupancy_pct!r}")


def theoretical_occupancy(limits: ArchLimits, threads_per_cta: int, regs_per_thread: int,
                          smem_per_cta_bytes: int) -> Occupancy:
    """CTAs of a kernel that fit on one SM of ``limits``' architecture, and what limits them.

    Args:
        limits: the architecture (:func:`tileprobe.model.arch.get_arch`).
        threads_per_cta: threads per CTA (the cubin's REQNTID product), 1-1024.
        regs_per_thread: registers per thread (cuobjdump REG), 0-255.
        smem_per_cta_bytes: shared memory per CTA in bytes as the driver reports it (static + dynamic), WITHOUT
            the 1 KB per-CTA reserve, which is added here.

    Returns:
        :class:`Occupancy`. Equals ``cudaOccMaxActiveBlocksPerMultiprocessor`` of ``cuda_occupancy.h`` with
        default device state and function attributes (see the module docstring). A configuration that cannot
        launch (shared memory above ``max_smem_per_cta_bytes``; registers above ``max_regs_per_cta``) gives
        ``ctas_per_sm == 0`` with limiter ``"shared_memory"`` / ``"registers"``; it does not raise.

    Raises:
        TileprobeError: ``threads_per_cta`` outside 1-1024, ``regs_per_thread`` outside 0-255 (the arch's
            ``max_regs_per_thread``), negative ``smem_per_cta_bytes``, or a non-int argument.

    Example: sm_90, 256 threads, 32 registers, 26,744 B → 8 CTAs/SM, 64 warps, 100 %, limiter ``"threads"``
    (registers and shared memory also allow exactly 8).
    """
    _check_inputs(limits, threads_per_cta, regs_per_thread, smem_per_cta_bytes)
    warps = warps_per_cta(limits, threads_per_cta)
    allowed = {
        "threads": limits.max_warps_per_sm // warps,
        "registers": _ctas_by_registers(limits, warps, regs_per_thread),
        "shared_memory": _ctas_by_shared_memory(limits, smem_per_cta_bytes),
        "cta_slots": limits.max_ctas_per_sm,
    }
    ctas = min(allowed.values())
    limiter = next(name for name in LIMITERS if allowed[name] == ctas)
    return Occupancy(ctas_per_sm=ctas, warps_per_sm=ctas * warps,
                     occupancy_pct=100.0 * ctas * warps / limits.max_warps_per_sm, limiter=limiter, limits=allowed)


def warps_per_cta(limits: ArchLimits, threads_per_cta: int) -> int:
    """Warps one CTA takes: threads rounded up to whole warps."""
    return _divide_round_up(threads_per_cta, limits.warp_size)


def regs_allocated_per_warp(limits: ArchLimits, regs_per_thread: int) -> int:
    """Registers one warp is given: ``regs_per_thread * warp_size`` rounded up to ``reg_alloc_unit`` (256)."""
    return _round_up(regs_per_thread * limits.warp_size, limits.reg_alloc_unit)


def smem_allocated_per_cta_bytes(limits: ArchLimits, smem_per_cta_bytes: int) -> int:
    """Bytes of shared memory one CTA takes on the SM: its own plus the reserve, rounded up to 128 bytes."""
    return _round_up(smem_per_cta_bytes + limits.smem_reserved_per_cta_bytes, limits.smem_alloc_unit_bytes)


def _ctas_by_registers(limits: ArchLimits, warps: int, regs_per_thread: int) -> int:
    """CTAs per SM the register file allows (``cudaOccMaxBlocksPerSMRegsLimit``)."""
    per_warp = regs_allocated_per_warp(limits, regs_per_thread)
    # The hardware checks the per-CTA limit as if the CTA's warps were spread over all sub-partitions.
    if per_warp * _round_up(warps, SUBPARTITIONS_PER_SM) > limits.max_regs_per_cta:
        return 0
    if per_warp == 0:
        return UNLIMITED
    warps_per_subpartition = (limits.regs_per_sm // SUBPARTITIONS_PER_SM) // per_warp
    return warps_per_subpartition * SUBPARTITIONS_PER_SM // warps


def _ctas_by_shared_memory(limits: ArchLimits, smem_per_cta_bytes: int) -> int:
    """CTAs per SM shared memory allows, default carveout (``cudaOccMaxBlocksPerSMSmemLimit``)."""
    allocated = smem_allocated_per_cta_bytes(limits, smem_per_cta_bytes)
    if allocated > limits.max_smem_per_cta_bytes + limits.smem_reserved_per_cta_bytes:
        return 0
    if allocated == 0:
        return UNLIMITED
    return limits.smem_per_sm_bytes // allocated


def _check_inputs(limits: ArchLimits, threads_per_cta: int, regs_per_thread: int, smem_per_cta_bytes: int) -> None:
    if not isinstance(limits, ArchLimits):
        raise TileprobeError(f"limits must be an ArchLimits (tileprobe.model.arch.get_arch), got {limits!r}")
    _check_range("threads_per_cta", threads_per_cta, 1, limits.max_threads_per_cta, limits.name)
    _check_range("regs_per_thread", regs_per_thread, 0, limits.max_regs_per_thread, limits.name)
    _check_range("smem_per_cta_bytes", smem_per_cta_bytes, 0, None, limits.name)


def _check_range(name: str, value: object, low: int, high: int | None, arch: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high):
        return
    bounds = f"{low}-{high}" if high is not None else f">= {low}"
    raise TileprobeError(f"{name} = {value!r} is impossible on {arch} (must be an int, {bounds}); "
                         f"check the cubin's resources")


def _divide_round_up(x: int, y: int) -> int:
    return -(-x // y)


def _round_up(x: int, y: int) -> int:
    return y * _divide_round_up(x, y)

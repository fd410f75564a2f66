"""Per-architecture SM limits that decide how many CTAs fit on one SM.

Terms: an SM (streaming multiprocessor) runs several CTAs (thread blocks) at once; each CTA takes warp slots
(32 threads each), registers (allocated per warp), shared memory (allocated per CTA) and one CTA slot.

Sources, named again on every number below:

- ``[occ]``: ``cuda_occupancy.h`` as shipped in the pip package ``nvidia-cuda-runtime`` 13.4.92
  (``nvidia/cu13/include/cuda_occupancy.h``; it supports up to compute capability 12.1). Functions cited by name:
  ``cudaOccMaxBlocksPerMultiprocessor`` (CTA slots), ``cudaOccRegAllocationGranularity`` (256 registers),
  ``cudaOccSMemAllocationGranularity`` (128 bytes), ``cudaOccSubPartitionsPerMultiprocessor`` (4),
  ``cudaOccAlignUpShmemSizeVoltaPlus`` (the shared-memory carveout steps; its largest step per arch is the
  shared memory per SM), ``cudaOccSMemPerBlock`` (the 1 KB per-CTA reserve is added on compute capability 8.0+).
  ``tests/test_occupancy.py`` compiles that header and checks every ``[occ]`` number against it.
- ``[guide]``: NVIDIA CUDA C++ Programming Guide, appendix "Compute Capabilities", table "Technical Specifications
  per Compute Capability": resident threads and warps per SM, 64K registers per SM and per CTA, 255 registers
  per thread, shared memory per SM and the opt-in maximum per CTA (per SM minus the 1 KB reserved for system
  use), warp size 32. Not in ``[occ]``, which takes them as device properties.
- ``[cccl]``: NVIDIA CCCL ``libcudacxx/include/cuda/__device/arch_traits.h`` (``cuda::arch_traits``): per-arch
  threads, CTA slots and shared memory for every arch here; it agrees with every ``[guide]`` number below, and is
  the primary source for 8.8 (= 8.6), 10.3 (= 10.0) and 12.1 (= 12.0), which the guide's table groups or omits.
- ``[driver]``: on an H200 (sm_90, driver 580.159, 2026-11-29) ``cuDeviceGetAttribute`` gave every sm_90 number
  below, and ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` equalled
  :func:`tileprobe.model.occupancy.theoretical_occupancy` on 22,036 queries (17 register counts, 10-255; static and
  dynamic shared memory up to the opt-in maximum and one byte over; 1-1024 threads).

sm_107 (compute capability 10.7) is a tileiras target without limits here: ``[occ]`` gives its CTA slots
(16) and a carveout step of 328 KB, but neither it, ``[guide]`` nor ``[cccl]`` (as read for this module) gives its
resident threads per SM or its opt-in shared memory per CTA, and an invented limit would print a believable but
wrong occupancy. So sm_107 is compiled and its cubins read (:data:`TILEIRAS_TARGETS`), and where CTAs/SM would be
the output says "not sourced" (:data:`NOT_SOURCED`); :func:`get_arch` refuses it.

Shared-memory reserve provenance (``ArchLimits.smem_reserve_rule``): whether the cubin's ``.nv.shared`` size
already includes the 1 KB per-CTA reserve is read from the cubin's layout (``tileprobe/cubin.py``); on sm_90 an
H200 driver confirmed it (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = SHARED − 1,024, 2026-11-29); on every other arch
it rests on the cubin layout alone. Verdicts that depend on that reading say so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard

from tileprobe.errors import TileprobeError, shown

OCC_HEADER = "cuda_occupancy.h (nvidia-cuda-runtime 13.4.92)"
GUIDE = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability"
CCCL = "CCCL cuda/__device/arch_traits.h"

#: Most threads one CTA may have, every arch here ([guide]; ``maxThreadsPerBlock`` property in [occ]).
MAX_THREADS_PER_CTA = 1024
#: Register sub-partitions (warp schedulers) per SM for compute capability 7.x-12.x
#: ([occ] ``cudaOccSubPartitionsPerMultiprocessor``). Registers are split evenly between them.
SUBPARTITIONS_PER_SM = 4
#: Shared memory per CTA without opt-in, bytes ([guide]; ``sharedMemPerBlock`` property in [occ]).
SMEM_PER_CTA_DEFAULT_BYTES = 48 * 1024

_KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM resource limits of one GPU architecture (one compute capability).

    Units: threads, warps, CTAs and registers are counts (registers are 32-bit); ``*_bytes`` are bytes.
    ``reg_alloc_unit`` is in registers per warp: a warp's ``regs_per_thread * warp_size`` is rounded up to it.
    ``max_smem_per_cta_bytes`` is the opt-in maximum a CTA may use (static + dynamic, without the reserve);
    ``smem_reserved_per_cta_bytes`` is what the driver adds to every CTA on top (1 KB on sm_80+).
    ``source`` names where the numbers come from. ``smem_reserve_rule`` says how the cubin's shared size relates to
    the 1 KB reserve on this arch and whether a driver confirmed it ("driver-checked …" or "cubin layout only …").
    Construction checks every field and raises
    :class:`~tileprobe.errors.TileprobeError` naming the field and its value.
    """

    name: str
    cc: tuple[int, int]
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    regs_per_sm: int
    max_regs_per_thread: int
    max_regs_per_cta: int
    reg_alloc_unit: int
    smem_per_sm_bytes: int
    max_smem_per_cta_bytes: int
    smem_reserved_per_cta_bytes: int
    smem_alloc_unit_bytes: int
    warp_size: int
    source: str
    smem_reserve_rule: str = ""

    def __post_init__(self) -> None:
        self._check_name()
        for field_name in _POSITIVE_FIELDS:
            _check_positive(field_name, getattr(self, field_name))
        _check_int("smem_reserved_per_cta_bytes", self.smem_reserved_per_cta_bytes, minimum=0)
        self._check_consistency()

    def _check_name(self) -> None:
        cc = self.cc
        if not (isinstance(cc, tuple) and len(cc) == 2 and all(_is_int(x) and x >= 0 for x in cc)):
            raise TileprobeError(f"ArchLimits.cc must be a (major, minor) tuple of ints, got {cc!r}")
        if self.name != f"sm_{cc[0]}{cc[1]}":
            raise TileprobeError(
                f"ArchLimits.name {self.name!r} does not match cc {cc!r} (expected 'sm_{cc[0]}{cc[1]}')")
        if not isinstance(self.source, str) or not self.source:
            raise TileprobeError(f"ArchLimits.source must name where the numbers come from, got {self.source!r}")

    def _check_consistency(self) -> None:
        _require(self.max_warps_per_sm * self.warp_size == self.max_threads_per_sm, "max_warps_per_sm",
                 self.max_warps_per_sm, f"must equal max_threads_per_sm / warp_size "
                 f"({self.max_threads_per_sm} / {self.warp_size})")
        _require(self.max_regs_per_cta <= self.regs_per_sm, "max_regs_per_cta", self.max_regs_per_cta,
                 f"must not exceed regs_per_sm ({self.regs_per_sm})")
        _require(self.max_regs_per_thread * self.warp_size <= self.max_regs_per_cta, "max_regs_per_thread",
                 self.max_regs_per_thread, f"times warp_size must fit in max_regs_per_cta ({self.max_regs_per_cta})")
        _require(self.regs_per_sm % (SUBPARTITIONS_PER_SM * self.reg_alloc_unit) == 0, "regs_per_sm",
                 self.regs_per_sm, f"must split into {SUBPARTITIONS_PER_SM} sub-partitions of whole "
                 f"reg_alloc_unit ({self.reg_alloc_unit}) units")
        _require(self.max_smem_per_cta_bytes + self.smem_reserved_per_cta_bytes <= self.smem_per_sm_bytes,
                 "max_smem_per_cta_bytes", self.max_smem_per_cta_bytes,
                 f"plus the reserve ({self.smem_reserved_per_cta_bytes}) must fit in smem_per_sm_bytes "
                 f"({self.smem_per_sm_bytes})")
        for field_name in ("smem_per_sm_bytes", "max_smem_per_cta_bytes", "smem_reserved_per_cta_bytes"):
            value = getattr(self, field_name)
            _require(value % self.smem_alloc_unit_bytes == 0, field_name, value,
                     f"must be a multiple of smem_alloc_unit_bytes ({self.smem_alloc_unit_bytes})")

    @property
    def smem_reserve_driver_checked(self) -> bool:
        """Whether a driver confirmed this arch's reading of the reserve in the cubin's shared size."""
        return self.smem_reserve_rule.startswith("driver-checked")

    @property
    def max_threads_per_cta(self) -> int:
        """Most threads one CTA may have (1024 on every arch here; [guide])."""
        return MAX_THREADS_PER_CTA


_POSITIVE_FIELDS = (
    "max_threads_per_sm", "max_warps_per_sm", "max_ctas_per_sm", "regs_per_sm", "max_regs_per_thread",
    "max_regs_per_cta", "reg_alloc_unit", "smem_per_sm_bytes", "max_smem_per_cta_bytes",
    "smem_alloc_unit_bytes", "warp_size",
)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(field_name: str, value: object, minimum: int) -> None:
    if not _is_int(value) or value < minimum:
        raise TileprobeError(f"ArchLimits.{field_name} must be an int >= {minimum}, got {value!r}")


def _check_positive(field_name: str, value: object) -> None:
    _check_int(field_name, value, minimum=1)


def _require(ok: bool, field_name: str, value: object, why: str) -> None:
    if not ok:
        raise TileprobeError(f"ArchLimits.{field_name} = {value!r} {why}")


def _limits(cc: tuple[int, int], threads_per_sm: int, ctas_per_sm: int, smem_per_sm_kb: int,
            source: str) -> ArchLimits:
    """Build one arch's limits; the numbers every arch here shares are filled in with their sources."""
    return ArchLimits(
        name=f"sm_{cc[0]}{cc[1]}",
        cc=cc,
        max_threads_per_sm=threads_per_sm,            # [guide]
        max_warps_per_sm=threads_per_sm // 32,        # [guide] (resident warps per SM)
        max_ctas_per_sm=ctas_per_sm,                  # [occ] cudaOccMaxBlocksPerMultiprocessor, [guide]
        regs_per_sm=64 * _KB,                         # [guide] 64K 32-bit registers per SM
        max_regs_per_thread=255,                      # [guide] (the header's own check allows 256)
        max_regs_per_cta=64 * _KB,                    # [guide] 64K registers per CTA
        reg_alloc_unit=256,                           # [occ] cudaOccRegAllocationGranularity, per warp
        smem_per_sm_bytes=smem_per_sm_kb * _KB,       # [guide]; [occ] largest cudaOccAlignUpShmemSizeVoltaPlus step
        max_smem_per_cta_bytes=(smem_per_sm_kb - 1) * _KB,  # [guide] opt-in maximum: per SM minus the 1 KB reserve
        smem_reserved_per_cta_bytes=1 * _KB,          # [guide] 1 KB reserved for system use (sm_80+); [occ] adds it
        smem_alloc_unit_bytes=128,                    # [occ] cudaOccSMemAllocationGranularity (cc 8.x-12.x)
        warp_size=32,                                 # [guide]
        source=source,
        smem_reserve_rule=_SMEM_RESERVE_RULES.get(cc, _RESERVE_ON_TOP),
    )


#: How the cubin's ``.nv.shared`` size relates to the 1 KB per-CTA reserve, per arch, and who confirmed it
#: (``tileprobe/cubin.py`` module doc: ptxas 13.4.92 cubins of a PTX kernel with a 4,096-byte shared array).
_RESERVE_INCLUDED = ("cubin layout only, not driver-checked: the cubin's shared size includes the 1 KB reserve "
                     "(a .nv.shared.reserved.0 section; SHARED = user bytes + 1,024 with ptxas 13.4.92)")
_RESERVE_ON_TOP = ("cubin layout only, not driver-checked: the cubin's shared size is the user's bytes and the "
                   "driver adds the 1 KB reserve (no .nv.shared.reserved section with ptxas 13.4.92)")
_SMEM_RESERVE_RULES = {
    (9, 0): ("driver-checked on H200 2026-11-29: the cubin's shared size includes the 1 KB reserve "
             "(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = SHARED − 1,024)"),
    **{cc: _RESERVE_INCLUDED for cc in ((10, 0), (10, 3), (11, 0), (12, 0), (12, 1))},
}


def _source(cc: tuple[int, int], *extra: str) -> str:
    cc_text = f"{cc[0]}.{cc[1]}"
    parts = [f"{OCC_HEADER} for CTA slots, allocation units and carveout steps",
             f"{GUIDE} (compute capability {cc_text}) for threads, registers and shared memory", *extra]
    return "; ".join(parts)


def _table() -> dict[str, ArchLimits]:
    """The supported archs. Columns: cc, resident threads per SM, CTA slots per SM, shared memory per SM (KB)."""
    rows = (
        # cc       threads CTAs  smem KB  second source
        ((8, 0), 2048, 32, 164, ()),      # A100: [guide] 2048 threads, 164 KB; [occ] 32 CTAs, steps up to 164 KB
        ((8, 6), 1536, 16, 100, ()),      # GA10x: [guide] 1536 threads, 100 KB; [occ] 16 CTAs, steps up to 100 KB
        ((8, 7), 1536, 16, 164, (CCCL,)),  # Orin: [guide]/[cccl] 1536 threads, 164 KB; [occ] 16 CTAs, up to 164 KB
        ((8, 8), 1536, 16, 100, (f"{CCCL} (same as 8.6)",)),  # [cccl] = sm_86; [occ] 16 CTAs, up to 100 KB
        ((8, 9), 1536, 24, 100, ()),      # Ada: [guide] 1536 threads, 100 KB; [occ] 24 CTAs, up to 100 KB
        ((9, 0), 2048, 32, 228, ("checked against the H200 driver",)),  # Hopper: [guide], [driver]; [occ] 32 CTAs
        ((10, 0), 2048, 32, 228, ()),     # B200: [guide] 2048 threads, 228 KB; [occ] 32 CTAs, up to 228 KB
        ((10, 3), 2048, 32, 228, (f"{CCCL} (same as 10.0)",)),  # B300: [occ] 32 CTAs, up to 228 KB
        ((11, 0), 1536, 24, 228, (CCCL,)),  # Thor: [guide]/[cccl] 1536 threads, 228 KB; [occ] 24 CTAs, up to 228 KB
        ((12, 0), 1536, 24, 100, ()),     # RTX 50: [guide] 1536 threads, 100 KB; [occ] 24 CTAs, up to 100 KB
        ((12, 1), 1536, 24, 100, (f"{CCCL} (same as 12.0)",)),  # DGX Spark: [occ] 24 CTAs, up to 100 KB
    )
    archs = (_limits(cc, threads, ctas, smem_kb, _source(cc, *extra)) for cc, threads, ctas, smem_kb, extra in rows)
    return {arch.name: arch for arch in archs}


_ARCH_TABLE: dict[str, ArchLimits] = _table()

#: Supported architecture names, oldest first: ``("sm_80", ..., "sm_121")``.
ARCHS: tuple[str, ...] = tuple(_ARCH_TABLE)

_ALIAS_RE = re.compile(r"(?:sm_?|compute_)?(\d{2,3})[af]?")
_DOTTED_RE = re.compile(r"(\d{1,2})\.(\d)")
_NOT_ESTABLISHED = {
    "sm_107": "sm_107 is a tileiras target, but its resident threads per SM and opt-in shared memory per CTA "
              "are not established (cuda_occupancy.h 13.4.92 gives only its 16 CTA slots)",
}


def _canonical_name(name: str) -> str | None:
    """``'sm_90a'``, ``'90'``, ``'sm_100f'``, ``'9.0'``, ``'compute_90'`` → ``'sm_90'``; ``None`` if not a name."""
    text = name.strip().lower()
    dotted = _DOTTED_RE.fullmatch(text)
    if dotted:
        return f"sm_{dotted.group(1)}{dotted.group(2)}"
    alias = _ALIAS_RE.fullmatch(text)
    return f"sm_{alias.group(1)}" if alias else None


def get_arch(name: str) -> ArchLimits:
    """Return the limits of architecture ``name``.

    Accepts ``"sm_90"``, ``"90"``, ``"sm_90a"`` / ``"sm_100f"`` (arch- and family-specific targets share their
    base arch's limits), ``"compute_90"`` and the compute capability ``"9.0"``; case and surrounding spaces are
    ignored.

    Raises:
        TileprobeError: ``name`` is not one of :data:`ARCHS` (in any accepted spelling); the message lists them.
    """
    canonical = _canonical_name(name) if isinstance(name, str) else None
    if canonical in _ARCH_TABLE:
        return _ARCH_TABLE[canonical]
    why = _NOT_ESTABLISHED.get(canonical or "", "")
    raise TileprobeError(
        f"unknown GPU architecture {name!r}{': ' + why if why else ''}. "
        f"Supported: {', '.join(ARCHS)} (also written 90, sm_90a, sm_100f or 9.0); pass one of these.")


# --- compile targets, as tileiras names them -------------------------------------------------------------------------

#: Every ``--gpu-name`` tileiras 13.4.92 lists (``tileiras --help``, 2026-12-01): :data:`ARCHS` and sm_107. No
#: arch-specific (``sm_90a``) or family (``sm_100f``) target is among them: ``tileiras --gpu-name sm_90a`` answers
#: "Cannot find option named 'sm_90a'!".
TILEIRAS_TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
                                     "sm_107", "sm_110", "sm_120", "sm_121")

#: Targets tileprobe compiles for and reads, whose occupancy it does not compute: what is not sourced, printed
#: where CTAs/SM would be.
NOT_SOURCED: dict[str, str] = {
    "sm_107": "CTAs/SM not sourced for sm_107: its resident threads per SM and opt-in shared memory per CTA are not "
              "published in cuda_occupancy.h 13.4.92 (which gives 16 CTA slots and shared-memory steps up to 328 KB "
              "per SM), the CUDA C++ Programming Guide table or CCCL arch_traits.h as read",
}

_TARGET_RE = re.compile(r"sm_(\d{2,3})([af]?)")


def check_target(name: str) -> str:
    """The compile target ``name`` names, as tileiras spells it (``"sm_90"``); also accepts ``"90"`` and ``"9.0"``.

    Raises:
        TileprobeError: an arch-specific or family name (``sm_90a``, ``sm_100f``: tileiras 13.4.92 lists none, and
            their limits are the base arch's: give ``sm_90``); a name tileiras does not list (``sm_75``), with the
            list, and for a misspelt name the closest target when one is close (``sm90``: did you mean ``sm_90``?).
    """
    text = name.strip().lower() if isinstance(name, str) else ""
    dotted = _DOTTED_RE.fullmatch(text)
    if dotted:
        text = f"sm_{dotted.group(1)}{dotted.group(2)}"
    elif text.isdigit():
        text = f"sm_{text}"
    m = _TARGET_RE.fullmatch(text)
    if m and m.group(2) and f"sm_{m.group(1)}" in TILEIRAS_TARGETS:
        raise TileprobeError(
            f"{name!r}: tileiras 13.4.92 lists no arch-specific or family target (it refuses --gpu-name {text}: "
            f"\"Cannot find option named '{text}'\"); audit sm_{m.group(1)}, which has the same SM limits")
    if m and not m.group(2) and text in TILEIRAS_TARGETS:
        return text
    import difflib
    near = [] if m else difflib.get_close_matches(text, list(TILEIRAS_TARGETS), n=1, cutoff=0.6)  # not for sm_75
    maybe = f" (did you mean {near[0]!r}?)" if near else ""
    raise TileprobeError(f"{shown(name, quote=True)} is not a target tileiras lists{maybe}; targets: {', '.join(TILEIRAS_TARGETS)}")


def has_limits(target: str) -> bool:
    """Whether tileprobe has sourced SM limits for ``target`` (so CTAs/SM can be computed)."""
    return _canonical_name(target) in _ARCH_TABLE


def target_cc(target: str) -> tuple[int, int]:
    """The compute capability of a target, e.g. ``(10, 7)`` for ``"sm_107"`` (limits or not)."""
    digits = (_canonical_name(target) or "").removeprefix("sm_")
    if not digits.isdigit():
        raise TileprobeError(f"{target!r} is not an sm_XY target")
    return int(digits[:-1]), int(digits[-1])


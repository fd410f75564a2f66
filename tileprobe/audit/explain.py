"""Explanations in numbers: what each resource would have to be for N CTAs per SM, and static advice.

Everything here inverts :func:`tileprobe.model.occupancy.theoretical_occupancy` (cuda_occupancy.h rules) by search, so
the answers use exactly the same allocation granularities (256 registers per warp, 128-byte shared memory units,
1 KB reserved per CTA) as the occupancy numbers in the tables.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..model.arch import ArchLimits, get_arch
from ..model.occupancy import theoretical_occupancy
from ..schema import VariantRecord, short_build


def max_regs_for(limits: ArchLimits, threads: int, ctas: int) -> int | None:
    """Largest registers per thread (≤ 255) that still lets ``ctas`` CTAs of ``threads`` fit, registers alone
    considered. ``None`` if no register count does (threads or CTA slots forbid it)."""
    best = None
    for r in range(1, 256):
        if theoretical_occupancy(limits, threads, r, 0).limits["registers"] >= ctas:
            best = r
        else:
            break
    return best


def max_smem_for(limits: ArchLimits, ctas: int) -> int | None:
    """Largest static+dynamic shared memory per CTA (bytes, as the driver reports it) for ``ctas`` CTAs per SM."""
    if ctas <= 0:
        return None
    per_cta = limits.smem_per_sm_bytes // ctas - limits.smem_reserved_per_cta_bytes
    per_cta -= per_cta % limits.smem_alloc_unit_bytes
    per_cta = min(per_cta, limits.max_smem_per_cta_bytes)
    return per_cta if per_cta >= 0 else None


def what_it_takes(r: VariantRecord, ctas: int) -> str:
    """One sentence: what this variant's CTA would need for ``ctas`` CTAs/SM on its arch, per binding resource."""
    limits = get_arch(r.arch)
    needs = []
    if ctas > limits.max_ctas_per_sm:
        return f"{ctas} CTAs/SM is above the {limits.max_ctas_per_sm} CTA slots of {r.arch}"
    if ctas * r.threads > limits.max_threads_per_sm:
        return (f"{ctas} CTAs of {r.threads} threads need {ctas * r.threads:,} threads, above the "
                f"{limits.max_threads_per_sm:,} per SM of {r.arch}; it would take ≤ {limits.max_threads_per_sm // ctas} "
                f"threads per CTA")
    regs = max_regs_for(limits, r.threads, ctas)
    if regs is not None and r.registers > regs:
        needs.append(f"≤ {regs} registers per thread (has {r.registers})")
    smem = max_smem_for(limits, ctas)
    drv = r.driver_shared_bytes if r.driver_shared_bytes is not None else r.shared_bytes
    if smem is not None and drv is not None and drv > smem:
        needs.append(f"≤ {smem:,} B shared per CTA (has {drv:,})")
    if not needs:
        return f"{ctas} CTAs/SM would fit"
    return f"{ctas} CTAs/SM would need " + " and ".join(needs)


def advice(records: Iterable[VariantRecord]) -> list[str]:
    """Static advice per (kernel, case, arch, compiler): the highest occupancy value that neither spills nor
    loses residency, and which values spill. Occupancy hints only; one line each."""
    groups: dict[tuple, list[VariantRecord]] = defaultdict(list)
    for r in records:
        if r.ok and r.hint("occupancy") is not None:
            groups[r.group_key("occupancy")].append(r)
    out = []
    for rows in groups.values():
        rows.sort(key=lambda r: int(r.hint("occupancy")))
        r0 = rows[0]
        others = [f"{k}={v}" for k, v in r0.hints.items() if k != "occupancy"]
        label = " ".join([r0.kernel, r0.arch, short_build(r0.tileiras),
                          *[f"{k}={v}" for k, v in r0.case.items()], *others])
        clean = [r for r in rows if not _spills(r) and r.verdicts.get("occupancy", {}).get("status") == "honoured"]
        spills = [r for r in rows if _spills(r)]
        best = max(clean, key=lambda r: (r.ctas_per_sm or 0, int(r.hint("occupancy"))), default=None)
        line = f"{label.strip()}: "
        if best is not None:
            line += (f"highest honoured occupancy without spills is {best.hint('occupancy')} "
                     f"({best.ctas_per_sm} CTAs/SM, {best.registers} registers)")
        else:
            line += "no occupancy value is honoured without spills"
        if spills:
            line += "; spills at occupancy " + ", ".join(f"{r.hint('occupancy')} ({_spills(r)})" for r in spills)
        out.append(line)
    return out


def _spills(r: VariantRecord) -> str:
    """'' when the variant does not spill; else what shows it: LDL/STL counts (SASS) or the stack frame."""
    sass = r.sass or {}
    if "spill_loads" in sass:
        n_ld, n_st = sass["spill_loads"], sass["spill_stores"]
        return f"{n_ld} LDL/{n_st} STL, {r.stack_bytes} B stack" if n_ld or n_st else ""
    return f"{r.stack_bytes} B stack" if r.stack_bytes else ""

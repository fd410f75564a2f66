"""Explanations in numbers: what each resource would have to be for N CTAs per SM, and static advice.

Everything here inverts :func:`tileprobe.model.occupancy.theoretical_occupancy` (cuda_occupancy.h rules) by search, so
the answers use exactly the same allocation granularities (256 registers per warp, 128-byte shared memory units,
1 KB reserved per CTA) as the occupancy numbers in the tables.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..model.arch import ArchLimits, get_arch, has_limits
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
        # in the cubin's terms, as the tables show shared memory: the driver's figure + what the cubin includes
        # beyond it (the 1 KB reserve on sm_90)
        extra = (r.shared_bytes - drv) if r.shared_bytes is not None else 0
        needs.append(f"≤ {smem + extra:,} B shared per CTA (has {drv + extra:,})")
    if not needs:
        return f"{ctas} CTAs/SM would fit"
    return f"{ctas} CTAs/SM would need " + " and ".join(needs)


def what_clusters_take(r: VariantRecord, goal: int, count) -> str:
    """For a cluster variant (``count``: its :class:`~tileprobe.model.cluster.ClusterCount` on the reference GPU):
    the per-CTA residency at which ``goal`` × ⌊SMs ÷ cluster size⌋ of its clusters are resident
    (:func:`tileprobe.model.cluster.ctas_per_sm_for_goal`: for certain on a known layout, "at least" on the best
    allowed layout otherwise), and what the CTA would need for that (:func:`what_it_takes`)."""
    from ..model.cluster import ctas_per_sm_for_goal
    limits = get_arch(r.arch)
    most = min(limits.max_ctas_per_sm, limits.max_threads_per_sm // max(r.threads or 1, 1))
    ctas = ctas_per_sm_for_goal(count.gpu, count.size, goal, most, certain=count.exact)
    need = count.clusters_for(goal)
    if ctas is None:
        return f"{need} clusters of {count.size} cannot be resident on {count.gpu.gpu} with CTAs of {r.threads} threads"
    if ctas == goal:
        return what_it_takes(r, goal)
    least = "" if count.exact else "at least "
    return (f"{need} clusters of {count.size} are resident on {count.gpu.gpu} from {least}{ctas} CTAs/SM per CTA: "
            f"{what_it_takes(r, ctas)}")


def advice(records: Iterable[VariantRecord], selected: Iterable[VariantRecord] | None = None) -> list[str]:
    """Advice per (kernel, case, other hints, arch, compiler), occupancy hints only. ``selected``: only the groups
    of these variants (a ``--where`` selection), each judged over all of its values in ``records``: advice from
    the selected rows alone named occupancy 2 the pick when only occupancy 2 was shown.

    One static line: the occupancy value whose goal is met (honoured or met) without spills with the most CTAs/SM
    (the lowest such value on a tie: same residency, fewer demands on the compiler), and which values spill. When
    the variants carry GPU run results (``record.run``), a second line ranks them by measured
    median time with its noise and says where the static advice and the measurement disagree
    (:func:`measured_advice`).
    """
    out = []
    keys = None if selected is None else {r.group_key("occupancy") for r in selected}
    for rows in _occupancy_groups(records):
        if keys is not None and rows[0].group_key("occupancy") not in keys:
            continue
        label = _label(rows[0])
        static, line = _static_advice(rows)
        out.append(f"{label}: {line}")
        measured = measured_advice(rows, static)
        if measured:
            out.append(f"{label}: {measured}")
    return out


def _occupancy_groups(records: Iterable[VariantRecord]) -> list[list[VariantRecord]]:
    groups: dict[tuple, list[VariantRecord]] = defaultdict(list)
    for r in records:
        if r.ok and r.hint("occupancy") is not None and has_limits(r.arch):
            groups[r.group_key("occupancy")].append(r)
    return [sorted(rows, key=lambda r: int(r.hint("occupancy"))) for rows in groups.values()]


def _label(r0: VariantRecord) -> str:
    """``matmul sm_90 tileiras 13.4.92 TILE=128×128 num_ctas=2``: values spelled as the tables spell them."""
    from .where import format_value
    others = [f"{k}={format_value(v)}" for k, v in r0.hints.items() if k != "occupancy"]
    return " ".join([r0.kernel, r0.arch, short_build(r0.tileiras),
                     *[f"{k}={format_value(v)}" for k, v in r0.case.items()], *others]).strip()


def _static_advice(rows: list[VariantRecord]) -> tuple[VariantRecord | None, str]:
    """(the advised variant or None, the static advice sentence)."""
    clean = [r for r in rows if not _spills(r) and not r.hang_risk   # issue 23: never advise a predicted hang
             and r.verdicts.get("occupancy", {}).get("status") in ("honoured", "met")]
    spills = [r for r in rows if _spills(r)]
    best = max(clean, key=lambda r: (r.ctas_per_sm or 0, -int(r.hint("occupancy"))), default=None)
    if best is not None:
        line = (f"static pick: occupancy {best.hint('occupancy')}, the lowest value with the most CTAs/SM met "
                f"without spills ({best.ctas_per_sm} CTA{'' if best.ctas_per_sm == 1 else 's'}/SM, "
                f"{best.registers} registers)")
    else:
        unmet = [r for r in rows if not _spills(r)]
        why = ", ".join(f"{r.hint('occupancy')} {r.verdicts.get('occupancy', {}).get('status', 'not judged')}"
                        for r in unmet)
        line = (f"no occupancy value is met{' without spills' if spills else ''}"
                + (f" (occupancy {why}: their reasons say why)" if why else ""))
    if spills:
        line += "; spills at occupancy " + ", ".join(f"{r.hint('occupancy')} ({_spills(r)})" for r in spills)
    hangs = [r for r in rows if r.hang_risk]
    if hangs:
        line += "; predicted to hang (register pool) at occupancy " + ", ".join(str(r.hint("occupancy"))
                                                                              for r in hangs)
    return best, line


def measured_advice(rows: list[VariantRecord], static: VariantRecord | None) -> str:
    """The variants of one occupancy group ranked by measured median time (µs) on one GPU, with the noise of each
    (interquartile range, p25–p75 of the run's samples) and the verdict on the static advice: the same variant,
    within noise of the measured best, or slower (the two disagree: "static advice: occupancy 8; measured best:
    occupancy 2, 1.30× faster than 8"). Two medians differ beyond noise when they are further apart than the
    larger IQR of the two (at least 1% of the smaller median): the rule of ``tileprobe compare``.
    '' when no variant of the group ran correctly."""
    timed = _timed(rows)
    if not timed:
        return ""
    best = timed[0]
    ties = [r for r in timed[1:] if not _differ(best, r)]
    text = f"measured on {_gpu(best)}: best occupancy {best.hint('occupancy')}, {_time(best)}"
    if ties:
        text += " (within noise: " + ", ".join(f"occupancy {r.hint('occupancy')}" for r in ties) + ")"
    text += f"; {_versus_static(best, static, timed)}"
    text += "; ranking: " + ", ".join(f"{r.hint('occupancy')} {r.run['median_us']:,.1f}" for r in timed) + " µs"
    failed = [r for r in rows if r.run and r.run.get("status") != "ok"]
    if failed:
        text += "; not ranked: " + ", ".join(f"occupancy {r.hint('occupancy')} ({r.run.get('status')})" for r in failed)
    return text


def _versus_static(best: VariantRecord, static: VariantRecord | None, timed: list[VariantRecord]) -> str:
    if static is None:
        return "no static advice to compare with"
    occ = static.hint("occupancy")
    if static is best:
        return f"the static advice (occupancy {occ}) is the measured best"
    if static not in timed:
        return f"the static advice (occupancy {occ}) has no correct run to compare"
    if not _differ(best, static):
        return f"the static advice (occupancy {occ}, {_time(static)}) is within noise of it"
    ratio = static.run["median_us"] / best.run["median_us"]
    return (f"static advice: occupancy {occ}; measured best: occupancy {best.hint('occupancy')}, {ratio:.2f}× "
            f"faster than {occ} ({_time(static)}): the static advice and the measurement disagree")


def _timed(rows: list[VariantRecord]) -> list[VariantRecord]:
    """Correct runs with a median, on the GPU most of them ran on, fastest first."""
    ok = [r for r in rows if r.run and r.run.get("status") == "ok" and r.run.get("median_us")
          and not r.run.get("shared_gpu")]   # timed beside another worker on one GPU: never ranked (issue 15)
    if not ok:
        return []
    names = [_gpu(r) for r in ok]
    gpu = max(set(names), key=names.count)
    return sorted((r for r in ok if _gpu(r) == gpu), key=lambda r: r.run["median_us"])


def _gpu(r: VariantRecord) -> str:
    """The run's GPU name: ``run["gpu"]`` is a name when read from the store, a dict with ``name`` elsewhere."""
    gpu = (r.run or {}).get("gpu")
    name = gpu.get("name") if isinstance(gpu, dict) else gpu
    return str(name or "the GPU")


def _iqr_us(r: VariantRecord) -> float | None:
    p25, p75 = r.run.get("p25_us"), r.run.get("p75_us")
    return float(p75 - p25) if p25 is not None and p75 is not None else None


def _differ(a: VariantRecord, b: VariantRecord) -> bool:
    """Whether two runs' medians are further apart than their noise (see :func:`measured_advice`)."""
    ma, mb = a.run["median_us"], b.run["median_us"]
    noise = max(_iqr_us(a) or 0.0, _iqr_us(b) or 0.0, 0.01 * min(ma, mb))
    return abs(ma - mb) > noise


def _time(r: VariantRecord) -> str:
    """``288.5 µs (IQR 286.2–290.5)``."""
    text = f"{r.run['median_us']:,.1f} µs"
    if _iqr_us(r) is not None:
        text += f" (IQR {r.run['p25_us']:,.1f}–{r.run['p75_us']:,.1f})"
    return text


def _spills(r: VariantRecord) -> str:
    """'' when the variant does not spill; else what shows it: LDL/STL counts (SASS) or the stack frame."""
    sass = r.sass or {}
    if "spill_loads" in sass:
        n_ld, n_st = sass["spill_loads"], sass["spill_stores"]
        return f"{n_ld} LDL/{n_st} STL, {r.stack_bytes} B stack" if n_ld or n_st else ""
    return f"{r.stack_bytes} B stack" if r.stack_bytes else ""

"""Explanations in numbers: what each resource would have to be for N CTAs per SM, and static advice.

Everything here inverts :func:`tileprobe.model.occupancy.theoretical_occupancy` (cuda_occupancy.h rules) by search, so
the answers use exactly the same allocation granularities (256 registers per warp, 128-byte shared memory units,
1 KB reserved per CTA) as the occupancy numbers in the tables.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable

from tileprobe.judge.pruned import _code_classes, _occupancy_groups, paste_lines, pruned_space
from tileprobe.model.arch import ArchLimits, get_arch
from tileprobe.model.occupancy import theoretical_occupancy
from tileprobe.records import SassFacts
from tileprobe.schema import VariantRecord, VariantRun, short_build

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


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
    threads, registers = r.threads, r.registers
    # judged variants compiled: their threads and registers are read from the cubin (audit/variants.record_from)
    assert threads is not None and registers is not None
    needs = []
    if ctas > limits.max_ctas_per_sm:
        return f"{ctas} CTAs/SM is above the {limits.max_ctas_per_sm} CTA slots of {r.arch}"
    if ctas * threads > limits.max_threads_per_sm:
        return (f"{ctas} CTAs of {threads} threads need {ctas * threads:,} threads, above the "
                f"{limits.max_threads_per_sm:,} per SM of {r.arch}; it would take ≤ {limits.max_threads_per_sm // ctas} "
                f"threads per CTA")
    regs = max_regs_for(limits, threads, ctas)
    if regs is not None and registers > regs:
        needs.append(f"≤ {regs} registers per thread (has {registers})")
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
    from tileprobe.model.cluster import ctas_per_sm_for_goal
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

    One static line (:func:`static_advice`): what each occupancy value buys and costs, which values build identical
    machine code, and a pick only where those facts decide it; otherwise that speed must be measured, with the
    ``tileprobe run`` command that measures it. When the variants carry GPU run results (``record.run``), a second
    line ranks them by measured median time with its noise and compares the static pick, if any
    (:func:`measured_advice`). Where some values build what another does, a last line per kernel, arch and
    compiler lists the distinct builds as a configuration list to paste (:func:`tileprobe.judge.pruned.paste_lines`).
    """
    out = []
    keys = None if selected is None else {r.group_key("occupancy") for r in selected}
    shown: list[VariantRecord] = []
    for rows in _occupancy_groups(records):
        if keys is not None and rows[0].group_key("occupancy") not in keys:
            continue
        shown += rows
        label = _label(rows[0])
        static, line = static_advice(rows)
        out.append(f"{label}: {line}")
        measured = measured_advice(rows, static)
        if measured:
            out.append(f"{label}: {measured}")
    space = pruned_space(shown)
    # some value builds what another does, and more than one build is left to time: the list is shorter than the
    # grid (one build for every value is the static line's pick already)
    if any(c.same_as for c in space) and any(len(c.distinct) > 1 for c in space):
        out += paste_lines(space)
    return out


def _label(r0: VariantRecord) -> str:
    """``matmul sm_90 tileiras 13.4.92 TILE=128×128 num_ctas=2``: values spelled as the tables spell them."""
    from tileprobe.select import format_value
    others = [f"{k}={format_value(v)}" for k, v in r0.hints.items() if k != "occupancy" and v is not None]
    return " ".join([r0.kernel, r0.arch, short_build(r0.tileiras),
                     *[f"{k}={format_value(v)}" for k, v in r0.case.items()], *others]).strip()


def static_advice(rows: list[VariantRecord]) -> tuple[VariantRecord | None, str]:
    """(the variant the static facts pick, or None; the sentence) for one occupancy group (rows as
    :func:`_occupancy_groups` orders them).

    The sentence gives, per set of values with identical machine code and resources, what they build: CTAs/SM,
    registers per thread, shared bytes per CTA, spills, resident clusters, and a verdict that no driver has
    checked. A pick is named only where the static facts decide it: every value that can launch builds the same
    code, so the lowest (or the hint-less build) is the pick and the others change nothing. Otherwise which build is
    fastest is a measurement — more CTAs/SM, fewer spills or fewer registers are not faster by themselves (the
    TornadoVM report: occupancy 4 and 8 ran 2× and 7× slower than the hint-less build) — and the sentence ends
    with the ``tileprobe run`` command that measures exactly this group."""
    launchable = [r for r in rows if r.ctas_per_sm and not r.hang_risk]   # never advise a predicted hang
    classes = _code_classes(launchable)
    parts = [_class_text(c) for c in classes]
    dead = [r for r in rows if not r.ctas_per_sm]
    if dead:
        parts.append(", ".join(_value_name(r) for r in dead) + ": cannot launch (0 CTAs/SM)")
    hangs = [r for r in rows if r.ctas_per_sm and r.hang_risk]
    if hangs:
        parts.append(", ".join(_value_name(r) for r in hangs) + ": predicted to hang (register pool)")
    if len(classes) == 1:
        pick = classes[0][0]
        what = ("leave the hint out" if _is_hintless(pick)
                else f"take the lowest, occupancy {pick.hint('occupancy')}")
        return pick, "; ".join(parts) + f" — one build for every value that launches: {what}; the others change nothing"
    if not classes:
        return None, "; ".join(parts) + " — no value can launch"
    return None, ("; ".join(parts) + f" — {len(classes)} different builds: which is fastest must be measured, "
                  f"static facts do not rank them: {run_command(rows[0])}")


def _is_hintless(r: VariantRecord) -> bool:
    return r.hintless("occupancy")


def _value_name(r: VariantRecord) -> str:
    """``occupancy 2``, ``hint-less`` or ``hint-less (declared 16)``."""
    if not _is_hintless(r):
        return f"occupancy {r.hint('occupancy')}"
    declared = r.hint("occupancy")
    return "hint-less" + (f" (declared {declared})" if declared is not None else "")


def _class_text(rows: list[VariantRecord]) -> str:
    """``occupancy 4 = 8 = hint-less (identical machine code): 1 CTA/SM, 255 registers, 98,304 B shared, no
    spills`` — what one build buys (CTAs/SM, clusters) and costs (registers, shared memory, spills)."""
    from tileprobe.model.cluster import cluster_size
    r = rows[0]
    values = [str(x.hint("occupancy")) for x in rows if not _is_hintless(x)]
    names = " = ".join([_value_name(x) for x in rows if _is_hintless(x)]
                       + ([f"occupancy {' = '.join(values)}"] if values else []))
    same = " (identical machine code)" if len(rows) > 1 else ""
    ctas = f"{r.ctas_per_sm} CTA{'' if r.ctas_per_sm == 1 else 's'}/SM"
    shared = "shared not read" if r.shared_bytes is None else f"{r.shared_bytes:,} B shared"
    text = f"{names}{same}: {ctas}, {r.registers} registers, {shared}, "
    text += f"spills ({_spills(r)})" if _spills(r) else "no spills"
    size = cluster_size(r.cluster_dims)
    if size > 1:
        from tileprobe.model.cluster import cluster_residency
        assert r.ctas_per_sm is not None   # rows can launch (static_advice keeps those with CTAs/SM)
        count = cluster_residency(r.arch, r.ctas_per_sm, size)
        if count is None:
            text += f", clusters of {size} (resident count not sourced)"
        else:
            needs = ", ".join(f"occupancy {x.hint('occupancy')} needs {count.clusters_for(int(x.hint('occupancy')))}"
                              for x in rows if x.hint("occupancy") is not None)
            text += (f", {count.low if count.exact else f'{count.low}–{count.high}'} clusters of {size} resident on "
                     f"{count.gpu.gpu}" + (f" ({needs})" if needs else ""))
    unverified = [x for x in rows if x.verdict_status("occupancy") == "unverified"]
    if unverified:
        text += " (verdict unverified: a rule no driver has checked decides the goal)"
    return text


def run_command(r0: VariantRecord) -> str:
    """The command that times every occupancy value of ``r0``'s group on a GPU: ``tileprobe run PROBE --arch
    sm_89 --where "TILE=128×128×64"`` (the case and the other hints of the group; occupancy left free)."""
    from tileprobe.select import format_value
    where = [f"{k}={format_value(v)}" for k, v in [*r0.case.items(), *r0.hints.items()]
             if k != "occupancy" and v is not None]
    cmd = f"tileprobe run {shlex.quote(r0.probe)} --arch {r0.arch}"
    if where:
        cmd += " --where " + shlex.quote(",".join(where))
    return f"`{cmd}`"


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
    text = f"measured on {_gpu(best)}: best {_value_name(best)}, {_time(best)}"
    if ties:
        text += " (within noise: " + ", ".join(_value_name(r) for r in ties) + ")"
    text += f"; {_versus_static(best, static, timed)}"
    text += "; ranking: " + ", ".join(f"{_short_name(r)} {_median(r):,.1f}" for r in timed) + " µs"
    failed = [(r, r.run) for r in rows if r.run and r.run.status != "ok"]
    if failed:
        text += "; not ranked: " + ", ".join(f"{_value_name(r)} ({run.status})" for r, run in failed)
    return text


def _versus_static(best: VariantRecord, static: VariantRecord | None, timed: list[VariantRecord]) -> str:
    if static is None:
        return "the static facts named no pick (different builds: this measurement decides)"
    occ = _value_name(static)
    if static is best:
        return f"the static advice ({occ}) is the measured best"
    if static not in timed:
        return f"the static advice ({occ}) has no correct run to compare"
    if not _differ(best, static):
        return f"the static advice ({occ}, {_time(static)}) is within noise of it"
    ratio = _median(static) / _median(best)
    return (f"static advice: {occ}; measured best: {_value_name(best)}, {ratio:.2f}× "
            f"faster than {_short_name(static)} ({_time(static)}): the static advice and the measurement disagree")


def _short_name(r: VariantRecord) -> str:
    """A value as the ranking lists it: ``4``, or ``hint-less``."""
    return "hint-less" if _is_hintless(r) else str(r.hint("occupancy"))


def _timed(rows: list[VariantRecord]) -> list[VariantRecord]:
    """Correct runs with a median, on the GPU most of them ran on, fastest first."""
    ok = [r for r in rows if r.run and r.run.status == "ok" and r.run.median_us
          and not r.run.shared_gpu]   # timed beside another worker on one GPU: never ranked
    if not ok:
        return []
    names = [_gpu(r) for r in ok]
    gpu = max(set(names), key=names.count)
    return sorted((r for r in ok if _gpu(r) == gpu), key=_median)


def _timed_run(r: VariantRecord) -> VariantRun:
    """The run of a record that :func:`_timed` kept (the functions below take only those)."""
    assert r.run is not None   # _timed keeps records with a correct run
    return r.run


def _median(r: VariantRecord) -> float:
    """The median (µs) of a record that :func:`_timed` kept."""
    median = _timed_run(r).median_us
    assert median is not None   # _timed keeps runs with a median
    return median


def _gpu(r: VariantRecord) -> str:
    """The run's GPU name (:attr:`~tileprobe.schema.VariantRun.gpu_name`), ``the GPU`` when unknown."""
    return str((r.run.gpu_name if r.run else None) or "the GPU")


def _iqr_us(r: VariantRecord) -> float | None:
    p25, p75 = _timed_run(r).p25_us, _timed_run(r).p75_us
    return float(p75 - p25) if p25 is not None and p75 is not None else None


def _differ(a: VariantRecord, b: VariantRecord) -> bool:
    """Whether two runs' medians are further apart than their noise (see :func:`measured_advice`)."""
    ma, mb = _median(a), _median(b)
    noise = max(_iqr_us(a) or 0.0, _iqr_us(b) or 0.0, 0.01 * min(ma, mb))
    return abs(ma - mb) > noise


def _time(r: VariantRecord) -> str:
    """``288.5 µs (IQR 286.2–290.5)``."""
    run = _timed_run(r)
    text = f"{_median(r):,.1f} µs"
    if run.p25_us is not None and run.p75_us is not None:   # the IQR is known (_iqr_us)
        text += f" (IQR {run.p25_us:,.1f}–{run.p75_us:,.1f})"
    return text


def _spills(r: VariantRecord) -> str:
    """'' when the variant does not spill; else what shows it: LDL/STL counts (SASS) or the stack frame."""
    sass = r.sass or SassFacts()
    if "spill_loads" in sass:
        n_ld, n_st = sass.spill_loads, sass.spill_stores
        return f"{n_ld} LDL/{n_st} STL, {r.stack_bytes} B stack" if n_ld or n_st else ""
    return f"{r.stack_bytes} B stack" if r.stack_bytes else ""

"""Verdicts: did the compiler do what each hint asked, judged from the final cubin.

Hints with a checkable goal (occupancy: theoretical CTAs/SM ≥ N, and for a cluster variant also N × ⌊SMs ÷ cluster
size⌋ clusters resident on the arch's reference GPU; num_ctas: a cluster of N CTAs; allow_tma: TMA instructions
present / absent) get one of:

Rules in this order (the README's verdict table gives the same order):

* ``infeasible`` — the goal cannot be met on this arch for the CTA the compiler built, whatever it does
  (e.g. occupancy 16 × 256 threads = 4096 > 2048 threads per SM on sm_90; clusters before sm_90).
* ``met`` — the goal is met, and the reference already met it: this is the reference, it has the same machine
  code and resources, or the reference reaches the goal too ("already met by the hint-less build (4 CTAs/SM); the
  hint changed registers 126→128"): whatever else the hint changed, it bought nothing toward its goal.
  (Nsight Compute's and cuda_occupancy.h's "theoretical occupancy" is the CTAs/SM compared with N here.)
* ``honoured`` — the goal is met AND the reference does not meet it: the hint changed the machine code and that
  change reached the goal.
* ``unverified`` — (occupancy) met or not depending on a rule no driver has checked: the reading of the 1 KB
  per-CTA shared-memory reserve where it is not driver-checked and the other reading lands on the other side of N,
  or, for a cluster variant whose CTAs meet N, a GPC layout not sourced. The reason starts with the status it would
  have (``honoured by readings no driver has checked — …``). docs/LOG.md §22 has the evidence for each reading.
* ``partial`` — moved toward the goal and fell short (occupancy: more CTAs/SM — or resident clusters — than the
  reference, fewer than N). Decided against the reference first: a value that shares another value's machine
  code but is up from the reference is ``partial``, and its reason says the code identity as well.
* ``ignored`` — the goal is not met and the hint moved nothing toward it against the reference (the reason says
  when it has the same machine code and resources as another value, or changed code without residency).

The hint-less build of a kernel that declares the hint (``@ct.kernel(occupancy=16)``) is judged on the declared
value, and its reason adds what the explicit builds got (``the explicit builds: occupancy=16: 5 CTAs/SM, 90
registers (other machine code)``).

Hints without a checkable goal (opt_level, num_worker_warps, latency and other per-load knobs) get one of:

* ``changed`` — machine code or resources differ from the baseline value's (the reason says what changed);
* ``unchanged`` — the same machine code and resources as the baseline value: no effect;
* ``baseline`` — the lowest value audited, which the others are compared with.

The *reference* of occupancy, num_ctas and the no-goal hints is, among the variants that differ only in that hint,
the build without it when the probe audits one (the value None or left out: the kernel's declared value, ByTarget
resolved, or none; :meth:`~tileprobe.schema.VariantRecord.hintless`), else the one with the lowest value (earlier,
the lowest value was the reference even beside a hint-less build with other code); of allow_tma it is the variant
with the other value. Reasons name the reference (``vs the hint-less build: …``, ``vs occupancy=1: …``). File hashes always differ between hint values (the embedded Tile IR carries them), so "same machine
code" compares ``code_sha256`` (machine code + resources), never the file hash.

Why clusters count for occupancy: a persistent cluster kernel launches ``min(SMs // num_ctas, tiles) × occupancy``
clusters (TileGym's static persistent matmul; the FlashInfer #4465 kernel, whose num_ctas=2, occupancy=2
candidate got 1 block/SM from the driver and failed to launch on GPUs with ≥ 148 SMs), and expects them all
resident at once. CTAs of a cluster need distinct SMs of one GPC (:mod:`tileprobe.model.cluster`), so on the H200
30 clusters of 4 fit at 1 CTA/SM where such a grid has 33: 3 wait for a second wave although every SM could hold a
CTA. Where the GPC layout is not known (sm_100: a range
over the GPC sizes a real B200 allows, :data:`tileprobe.model.cluster.B200`) and the range straddles the goal, or no GPU of the arch has a sourced layout (sm_120), a goal the CTAs meet
is ``unverified`` and the reason says it depends on the layout.

Occupancy reasons also name what they rest on: for clusters (``cluster_dims`` > 1 CTA) the resident clusters on
the arch's reference GPU (:mod:`tileprobe.model.cluster`); when shared memory limits residency, or the other reading of
the 1 KB per-CTA reserve would change it, the arch's reserve rule and whether a driver confirmed it
(``ArchLimits.smem_reserve_rule``).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from tileprobe.model.arch import get_arch, has_limits, target_cc
from tileprobe.model.cluster import (
    ClusterCount,
    cluster_note,
    cluster_residency,
    cluster_size,
    ctas_per_sm_for_goal,
    max_cluster_size,
)
from tileprobe.model.hints import KERNEL_HINTS
from tileprobe.model.occupancy import smem_allocated_per_cta_bytes, theoretical_occupancy
from tileprobe.model.sass import TMA_DATA_OPCODES, tma_data_ops
from tileprobe.records import SassFacts
from tileprobe.schema import (
    BASELINE,
    CHANGED,
    HONOURED,
    IGNORED,
    INFEASIBLE,
    MET,
    PARTIAL,
    UNCHANGED,
    UNVERIFIED,
    VariantRecord,
    Verdict,
    number_text,
)


def assign_verdicts(records: Iterable[VariantRecord], hint_names: Iterable[str]) -> None:
    """Fill ``record.verdicts`` for every hint in ``hint_names`` that the record sets or inherits (kernel hints
    and the probe's per-load knobs)."""
    records = list(records)
    for hint in hint_names:
        groups: dict[tuple, list[VariantRecord]] = defaultdict(list)
        for r in records:
            groups[r.group_key(hint)].append(r)
        for group in groups.values():
            for r in group:
                if r.ok and r.hint(hint) is not None:
                    if hint in _NEEDS_LIMITS and not has_limits(r.arch):
                        continue      # sm_107's CTAs/SM are not sourced; no verdict rather than a guess
                    v = _JUDGES.get(hint, _judge_generic)(hint, r, group)
                    if v is not None:
                        r.verdicts[hint] = v


def judge_records(records: Iterable[VariantRecord]) -> None:
    """(Re)compute every record's verdicts from the records alone: all kernel hints they set and all per-load
    knobs their probes declare. Used for records read back from the store or a JSON file."""
    records = list(records)
    for r in records:
        r.verdicts = {}
    # hints the probe varies, and hints the kernel itself declares (``@ct.kernel(occupancy=2)``, ByTarget
    # resolved for the arch); opt_level is always declared (default 3), so it is judged only when varied
    hints = sorted({h for r in records for h in r.hints if h in KERNEL_HINTS}
                   | {h for r in records for h, v in r.effective_hints.items()
                      if v is not None and h in KERNEL_HINTS and h != "opt_level"})
    knobs = sorted({k for r in records for k in r.knobs})
    assign_verdicts(records, hints + knobs)


def _value_key(hint: str, r: VariantRecord) -> tuple:
    """What tells two values of ``hint`` apart: the value, and whether it is the hint-less build's."""
    return (r.hintless(hint), _sort_key(r.hint(hint)))


def _others(hint: str, r: VariantRecord, group: list[VariantRecord]) -> list[VariantRecord]:
    return [o for o in group if o is not r and o.ok and _value_key(hint, o) != _value_key(hint, r)]


def _same_code(hint, r, group) -> VariantRecord | None:
    """Another value's variant with ``r``'s machine code and resources (the hint-less build first, then the
    lowest value), or None."""
    for o in sorted(_others(hint, r, group), key=lambda o: (not o.hintless(hint), _sort_key(o.hint(hint)))):
        if r.same_code(o) and _resources(o) == _resources(r):
            return o
    return None


def ref_name(hint: str, r: VariantRecord) -> str:
    """How reasons name a reference or twin: ``occupancy=1``, or ``the hint-less build`` (with the declared
    value when the kernel declares one: ``the hint-less build (declared occupancy=16)``)."""
    if not r.hintless(hint):
        return f"{hint}={number_text(r.hint(hint))}"
    value = r.hint(hint)
    return "the hint-less build" + (f" (declared {hint}={number_text(value)})" if value is not None else "")


def _sort_key(v):
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def _resources(r: VariantRecord) -> tuple:
    return (r.threads, r.registers, r.shared_bytes, r.stack_bytes, tuple(r.cluster_dims or ()))


def _fmt_res(r: VariantRecord) -> str:
    return f"{r.threads} threads × {r.registers} registers, {r.shared_bytes:,} B shared"


def _ctas(n: int) -> str:
    return f"{n} CTA" if n == 1 else f"{n} CTAs"


def _verdict(status: str, reason: str) -> Verdict:
    return Verdict(status, reason)


def judge_occupancy(hint: str, r: VariantRecord, group: list[VariantRecord]) -> Verdict:
    """Verdict for ``occupancy=N`` from residency (CTAs/SM), the arch's hard limits and the other values.

    A met goal is ``honoured`` only when the code differs from the reference's (:func:`_reference`: the
    hint-less build, else the lowest value), else ``met``; a cluster variant whose clusters fall short of the goal
    although its CTAs meet it gets :func:`_cluster_shortfall`'s verdict (module doc). A verdict that an unchecked
    rule decides is ``unverified`` (:func:`_unverified`).
    Reasons that are not met end with what the CTA would need for N (:func:`tileprobe.judge.advice.what_it_takes`);
    every reason adds the cluster residency (cluster variants) and the shared-memory reserve rule it rests on.
    """
    v = _judge_occupancy(hint, r, group)
    n = int(r.hint(hint))
    count = _cluster_count(r)
    if v.status == HONOURED:
        short = _cluster_shortfall(hint, r, group, count) if count is not None else None
        v = short if short is not None else _met_or_honoured(hint, r, group, v,
                                                             ref_met=lambda ref: _occupancy_met(ref, n))
    if v.status in (PARTIAL, IGNORED):
        from tileprobe.judge.advice import what_clusters_take, what_it_takes
        v = v.extended(f"; {what_clusters_take(r, n, count) if count is not None else what_it_takes(r, n)}")
    notes = [c for c in (_cluster_clause(r), smem_reserve_clause(r, n), _declared_clause(hint, r, group)) if c]
    if notes and v.status != INFEASIBLE:
        v = v.extended("; " + "; ".join(notes))
    return _unverified(r, n, count, v)


def _unverified(r: VariantRecord, n: int, count: ClusterCount | None, v: Verdict) -> Verdict:
    """``v`` as ``unverified`` when whether ``n`` CTAs/SM are met hinges on a rule no driver has checked, with the
    status it would have and what it hinges on first in the reason; else ``v``.

    Two rules: the arch's reading of the 1 KB per-CTA shared-memory reserve when it is not driver-checked
    (:attr:`~tileprobe.model.arch.ArchLimits.smem_reserve_driver_checked`) and the other reading lands on the
    other side of ``n`` (:func:`_other_reserve_reading`); and, for a cluster variant whose CTAs meet ``n``, a GPC
    layout not sourced, so that whether ``n`` × ⌊SMs ÷ cluster size⌋ clusters are resident is not known (a count
    range that straddles it, or no reference GPU for the arch)."""
    if v.status not in (HONOURED, MET, PARTIAL, IGNORED):
        return v
    why = []
    if not get_arch(r.arch).smem_reserve_driver_checked and _other_reserve_reading(r, n) is not None:
        # _other_reserve_reading answers only when both shared sizes are known
        assert r.driver_shared_bytes is not None and r.shared_bytes is not None
        read = "as including" if r.driver_shared_bytes < r.shared_bytes else "as excluding"
        other = "short of" if (r.ctas_per_sm or 0) >= n else "meeting"
        why.append(f"the cubin's shared size read {read} the 1 KB per-CTA reserve (from the cubin's layout; no "
                   f"driver has checked it on {r.arch}): the other reading gives "
                   f"{_ctas(_reserve_other_ctas(r))}/SM, {other} {n}")
    size = cluster_size(r.cluster_dims)
    if v.status in (HONOURED, MET) and size > 1 and (count is None or count.goal_met(n) is None):
        layout = (f"depends on the GPC layout ({count.gpu.gpu}'s is not sourced)" if count is not None
                  else f"is not known (no GPU with a sourced SM count and GPC layout for {r.arch})")
        need = _need(count, n) if count is not None else f"{n} × ⌊SMs ÷ {size}⌋ clusters of {size}"
        why.append(f"per-CTA residency counted: whether the {need} are resident {layout}")
    if not why:
        return v
    return _verdict(UNVERIFIED, f"{v.status} by readings no driver has checked — {'; and '.join(why)} — "
                                f"{v.reason}")


def _reference(hint: str, r: VariantRecord, group: list[VariantRecord]) -> VariantRecord:
    """The variant of ``group`` the others are compared with: the build without the hint when the probe audits one
    (:meth:`VariantRecord.hintless`; ``r`` itself when it is), else the compiled variant with the lowest value (``r`` itself when
    it has it)."""
    free = [o for o in group if o.ok and o.hintless(hint)]
    if free:
        return r if r in free else free[0]
    cands = [o for o in group if o.ok and o.hint(hint) is not None] or [r]
    return min(cands, key=lambda o: (_sort_key(o.hint(hint)), o is not r))


def _met_or_honoured(hint: str, r: VariantRecord, group: list[VariantRecord], v: Verdict,
                     ref: VariantRecord | None = None, ref_met=None) -> Verdict:
    """A met goal: ``met`` when ``r`` is the reference, has its machine code and resources, or when the reference
    already met ``r``'s goal (``ref_met(ref)`` is true: the hint bought nothing toward it, whatever else it
    changed), else ``honoured``; the reason names the reference (:func:`_reference`) and what differs from it."""
    ref = ref if ref is not None else _reference(hint, r, group)
    if ref is r:
        return _verdict(MET, f"{v.reason}; {_as_reference(hint, r, group)}")
    if r.same_code(ref) and _resources(ref) == _resources(r):
        return _verdict(MET, f"{v.reason}; same machine code and resources as {ref_name(hint, ref)}: "
                             "met without the hint")
    if ref_met is not None and ref_met(ref):
        diff = _diff(ref, r)
        changed = ("only the machine code (same resources)" if diff == _CODE_ONLY else diff)
        return _verdict(MET, f"{v.reason}; already met by {ref_name(hint, ref)} at "
                             f"{_ctas(ref.ctas_per_sm or 0)}/SM; the hint changed {changed}")
    return _verdict(HONOURED, f"{v.reason}; vs {ref_name(hint, ref)}: {_diff(ref, r)}")


def _occupancy_met(r: VariantRecord, n: int) -> bool:
    """Whether ``r`` itself meets ``occupancy=n``: ≥ n CTAs/SM and, for a cluster variant, n × ⌊SMs ÷ cluster
    size⌋ clusters resident for certain on the arch's reference GPU (:meth:`ClusterCount.goal_met`)."""
    if (r.ctas_per_sm or 0) < n:
        return False
    if cluster_size(r.cluster_dims) <= 1:
        return True
    count = _cluster_count(r)
    return count is not None and count.goal_met(n) is True


def _declared_clause(hint: str, r: VariantRecord, group: list[VariantRecord]) -> str:
    """For the hint-less build of a kernel that declares the hint (``@ct.kernel(occupancy=16)``), what the explicit
    builds got beside it (``the explicit builds: occupancy=16: 5 CTAs/SM, 90 registers (other machine code)``), so
    that a declared value is compared with the same value asked explicitly; '' otherwise (no declared value, not
    the hint-less build, or no explicit build audited). At most four values, the declared one first."""
    if not r.hintless(hint) or r.hint(hint) is None:
        return ""
    explicit = [o for o in group if o.ok and not o.hintless(hint) and o.hint(hint) is not None]
    if not explicit:
        return ""
    declared = r.hint(hint)
    explicit.sort(key=lambda o: (o.hint(hint) != declared, _sort_key(o.hint(hint))))
    parts = []
    for o in explicit[:4]:
        same = r.same_code(o) and _resources(o) == _resources(r)
        parts.append(f"{hint}={number_text(o.hint(hint))}: {_ctas(o.ctas_per_sm or 0)}/SM, {o.registers} registers"
                     f" ({'same machine code' if same else 'other machine code'})")
    more = f" (+{len(explicit) - 4} more)" if len(explicit) > 4 else ""
    return f"the explicit builds: {'; '.join(parts)}{more}"


def _as_reference(hint: str, r: VariantRecord, group: list[VariantRecord]) -> str:
    """Why the reference's own goal counts as met, not honoured: it is the hint-less build (the kernel's declared
    value), or the lowest value audited, without a hint-less build to show what the hint itself changed."""
    others = _others(hint, r, group)
    if r.hintless(hint):
        return (f"{ref_name(hint, r)}: the reference of the other {hint} values" if others
                else f"{ref_name(hint, r)}; no other {hint} value audited")
    missing = f"no hint-less build audited (add None to the probe's {hint} values to compare with it)"
    if not others:
        return f"the only {hint} value audited; {missing}"
    if all(r.same_code(o) and _resources(o) == _resources(r) for o in others):
        return (f"the lowest {hint} value audited, the reference; every value audited has this machine code and "
                f"these resources: nothing shows the hint changed the code")
    return f"the lowest {hint} value audited, the reference of the others; {missing}"


_CODE_ONLY = "machine code differs, same resources"


def _diff(base: VariantRecord, r: VariantRecord) -> str:
    """What differs between two variants' resources and residency (registers 118→255, CTAs/SM 1→2, new spills
    …), or that only the machine code does."""
    diffs = [f"{name} {number_text(a)}→{number_text(b)}" for name, a, b in (
        ("threads", base.threads, r.threads), ("registers", base.registers, r.registers),
        ("shared B", base.shared_bytes, r.shared_bytes), ("stack B", base.stack_bytes, r.stack_bytes),
        ("cluster", cluster_size(base.cluster_dims), cluster_size(r.cluster_dims)),
        ("CTAs/SM", base.ctas_per_sm, r.ctas_per_sm)) if a != b]
    if _spilled(r) and not _spilled(base):
        diffs.append("new spills")
    return ", ".join(diffs) if diffs else _CODE_ONLY


def _spilled(r: VariantRecord) -> bool:
    """Whether the variant spills: LDL/STL in its SASS traits, or (without them) a stack frame."""
    sass = r.sass or SassFacts()
    if "spill_loads" in sass:
        return bool(sass.spill_loads or sass.spill_stores)
    return bool(r.stack_bytes)


def _cluster_count(r: VariantRecord) -> ClusterCount | None:
    """Resident clusters of a cluster variant on its arch's reference GPU; None without clusters, without
    residency or without a reference GPU (:func:`tileprobe.model.cluster.cluster_residency`)."""
    size = cluster_size(r.cluster_dims)
    return cluster_residency(r.arch, r.ctas_per_sm, size) if size > 1 and r.ctas_per_sm else None


def _cluster_shortfall(hint: str, r: VariantRecord, group: list[VariantRecord], count: ClusterCount) -> Verdict | None:
    """The verdict of ``occupancy=N`` when per-CTA residency meets N but fewer than N × ⌊SMs ÷ cluster size⌋
    clusters are resident (:meth:`~tileprobe.model.cluster.ClusterCount.goal_met`), so the persistent grid of a
    cluster kernel sized by occupancy does not run in one wave. None when the clusters meet N, or when it depends
    on an unknown GPC layout.

    ``infeasible`` when no CTA of this size could reach it (even at the most CTAs/SM its thread count allows);
    ``ignored`` with the same code as another value; ``partial`` when more clusters are resident than at the next
    lower value; else ``ignored``."""
    n = int(r.hint(hint))
    if count.goal_met(n) is not False:
        return None
    limits = get_arch(r.arch)
    # an occupancy verdict needs the arch's limits, and with them a compiled record has its CTAs/SM
    # (assign_verdicts, audit/variants.record_from)
    assert r.ctas_per_sm is not None
    most_of = "" if count.exact else "at most "      # a range: even its most falls short
    per = (f"{_ctas(r.ctas_per_sm)}/SM per CTA, but {most_of}{count.high} clusters are resident, "
           f"fewer than the {_need(count, n)} ({count.mean_ctas_per_sm(count.high):.2f} CTAs per SM on average)")
    most = min(limits.max_ctas_per_sm, limits.max_threads_per_sm // max(r.threads or 1, 1))
    if ctas_per_sm_for_goal(count.gpu, count.size, n, most, certain=False) is None:
        return _verdict(INFEASIBLE, f"{per}; not even at {most} CTAs/SM, the most of {r.threads} threads an SM holds")
    twin = _same_code(hint, r, group)
    base = _baseline(hint, r, group)
    base_count = _cluster_count(base) if base is not None else None
    if base is not None and base_count is not None and base_count.high < count.high:   # against the reference first
        also = f"; same machine code and resources as {ref_name(hint, twin)}" if twin is not None else ""
        return _verdict(PARTIAL, f"{per}; up from {base_count.high} clusters at {ref_name(hint, base)}{also}")
    if twin is not None:
        return _verdict(IGNORED, f"same machine code and resources as {ref_name(hint, twin)}: {per}")
    return _verdict(IGNORED, per)


def _need(count: ClusterCount, n: int) -> str:
    """``33 clusters of 4 needed for 1 CTA per SM (1 × ⌊132 ÷ 4⌋)``."""
    per = "1 CTA per SM" if n == 1 else f"{n} CTAs per SM"
    return (f"{count.clusters_for(n)} clusters of {count.size} needed for {per} ({n} × ⌊{count.gpu.num_sms} ÷ "
            f"{count.size}⌋)")


def _cluster_clause(r: VariantRecord) -> str:
    """Resident clusters for a cluster variant (:func:`tileprobe.model.cluster.cluster_note`); '' without clusters."""
    size = cluster_size(r.cluster_dims)
    return cluster_note(r.arch, r.ctas_per_sm or 0, size) if size > 1 and r.ctas_per_sm else ""


def smem_reserve_clause(r: VariantRecord, goal: int | None = None) -> str:
    """What the residency rests on for shared memory: when shared memory limits it, or when the other reading of
    the 1 KB per-CTA reserve (on top of the cubin's size instead of inside it, or the reverse) would change whether
    ``goal`` CTAs/SM are met (any change of CTAs/SM when ``goal`` is None), the arch's reserve rule and whether a
    driver confirmed it; '' otherwise."""
    limits = get_arch(r.arch)
    alt = _other_reserve_reading(r, goal)
    if alt is None and r.limiter != "shared_memory":
        return ""
    rule = f"shared-memory reserve on {r.arch}: {limits.smem_reserve_rule}"
    return rule if alt is None else f"{alt}; {rule}"


_RESTS = "the verdict rests on the reserve reading (within 1 KB per CTA of a boundary):"


def _other_reserve_reading(r: VariantRecord, goal: int | None = None) -> str | None:
    """The CTAs/SM under the other reading of the reserve, as a sentence, when it differs from ``r.ctas_per_sm``
    (and, given a ``goal``, lands on the other side of it)."""
    if r.driver_shared_bytes is None or r.shared_bytes is None or not r.threads or r.registers is None:
        return None
    limits = get_arch(r.arch)
    included = r.driver_shared_bytes < r.shared_bytes          # the cubin's size spans the reserve
    other = _reserve_other_ctas(r)
    ctas = r.ctas_per_sm or 0
    if other == ctas or (goal is not None and (other >= goal) == (ctas >= goal)):
        return None
    if not included:
        return (f"{_RESTS} if the cubin's {r.shared_bytes:,} B already included the 1 KB reserve, "
                f"{_ctas(other)}/SM")
    need = ctas * (r.shared_bytes + limits.smem_reserved_per_cta_bytes)
    alloc = ctas * smem_allocated_per_cta_bytes(limits, r.shared_bytes)
    units = f" ({alloc:,} B in 128-B units)" if alloc != need else ""
    text = (f"{_RESTS} {_ctas(ctas)}/SM reads the cubin's {r.shared_bytes:,} B as including the 1 KB reserve; counted on top, {ctas} × ({r.shared_bytes:,} + 1,024) = {need:,} B{units} > "
            f"{limits.smem_per_sm_bytes:,} B per SM → {_ctas(other)}/SM")
    size = cluster_size(r.cluster_dims)
    if size > 1 and other:
        text += f" (then {cluster_note(r.arch, other, size)})"
    return text


def _reserve_other_ctas(r: VariantRecord) -> int:
    """CTAs/SM under the other reading of the 1 KB reserve: the cubin's shared size read as excluding it when the
    record reads it as included (driver size < cubin size), else as including it. Needs the record's threads,
    registers, shared and driver shared sizes (:func:`_other_reserve_reading` checks them)."""
    limits = get_arch(r.arch)
    threads, registers, shared, driver_shared = r.threads, r.registers, r.shared_bytes, r.driver_shared_bytes
    # called only once _other_reserve_reading found all four
    assert threads is not None and registers is not None and shared is not None and driver_shared is not None
    included = driver_shared < shared
    other_smem = shared if included else max(shared - limits.smem_reserved_per_cta_bytes, 0)
    return theoretical_occupancy(limits, threads, registers, other_smem).ctas_per_sm


def _judge_occupancy(hint: str, r: VariantRecord, group: list[VariantRecord]) -> Verdict:
    n = int(r.hint(hint))
    limits = get_arch(r.arch)
    ctas = r.ctas_per_sm or 0
    threads = r.threads
    assert threads is not None   # judged records compiled: threads read from the cubin (audit/variants.record_from)
    if n > limits.max_ctas_per_sm:
        return _verdict(INFEASIBLE, f"{n} CTAs/SM exceeds the {limits.max_ctas_per_sm} CTA slots per SM on {r.arch}")
    if n * threads > limits.max_threads_per_sm:
        return _verdict(INFEASIBLE, f"{n} × {threads} threads = {n * threads:,} > {limits.max_threads_per_sm:,} "
                                    f"threads per SM on {r.arch}; got {_ctas(ctas)}/SM ({_fmt_res(r)})")
    if ctas == 0:
        return _verdict(INFEASIBLE, f"the CTA cannot launch on {r.arch} (limiter: {r.limiter}; {_fmt_res(r)})")
    if ctas >= n:
        return _verdict(HONOURED, f"{_ctas(ctas)}/SM ≥ {n} ({_fmt_res(r)}; limiter: {r.limiter})")
    twin = _same_code(hint, r, group)
    base = _baseline(hint, r, group)
    if base is not None and ctas > (base.ctas_per_sm or 0):      # against the reference first, then code identity
        also = f"; same machine code and resources as {ref_name(hint, twin)}" if twin is not None else ""
        return _verdict(PARTIAL, f"{_ctas(ctas)}/SM (up from {base.ctas_per_sm} at {ref_name(hint, base)}) "
                                 f"but < {n}; limiter: {r.limiter} ({_fmt_res(r)}){also}")
    if twin is not None:
        return _verdict(IGNORED, f"same machine code and resources as {ref_name(hint, twin)}: {_ctas(ctas)}/SM < {n} "
                                 f"({_fmt_res(r)}; limiter: {r.limiter})")
    changed = ""
    if base is not None and _resources(base) != _resources(r):
        changed = f"; code changed vs {ref_name(hint, base)} ({_fmt_res(base)}) without changing residency"
    return _verdict(IGNORED, f"{_ctas(ctas)}/SM < {n}; limiter: {r.limiter} ({_fmt_res(r)}){changed}")


def _baseline(hint, r, group) -> VariantRecord | None:
    """The reference ``r`` is compared with (:func:`_reference`), or None when ``r`` is the reference."""
    ref = _reference(hint, r, group)
    return None if ref is r else ref


def judge_num_ctas(hint: str, r: VariantRecord, group: list[VariantRecord]) -> Verdict:
    """Verdict for ``num_ctas=N``: the cubin's cluster size against N (clusters exist from sm_90), ``met`` for the
    reference (lowest) value; the reason adds the resident clusters (:func:`tileprobe.model.cluster.cluster_note`)."""
    n = int(r.hint(hint))
    size = cluster_size(r.cluster_dims)
    limit, why = max_cluster_size(r.arch)
    if n > 1 and limit == 1:
        return _verdict(INFEASIBLE, why)
    if size != n:
        return _verdict(IGNORED, f"cluster of {size} CTA(s) (dims {r.cluster_dims or 'none'}), asked {n}")
    dims = "×".join(map(str, r.cluster_dims)) if r.cluster_dims else "none (1 CTA)"
    v = _verdict(HONOURED, f"cluster {dims} = {n} CTA(s)")
    note = _cluster_clause(r)
    if note:
        v = v.extended(f"; {_ctas(r.ctas_per_sm or 0)}/SM per CTA residency, {note}")
    if size > 1 and not r.ctas_per_sm:
        return _verdict(INFEASIBLE, f"{v.reason}; the CTA cannot launch on {r.arch} (limiter: {r.limiter})")
    return _met_or_honoured(hint, r, group, v, ref_met=lambda ref: cluster_size(ref.cluster_dims) == n)


def _judge_generic(hint: str, r: VariantRecord, group: list[VariantRecord]) -> Verdict:
    """opt_level / num_worker_warps / latency and other knobs without a checkable goal: ``changed`` (what),
    ``unchanged`` (same code as the baseline) or ``baseline`` (the lowest value, or the only one)."""
    ref = _reference(hint, r, group)
    if ref is r:
        n = len(_others(hint, r, group))
        what = "the hint-less build" if r.hintless(hint) else f"lowest {hint} value audited"
        return _verdict(BASELINE, f"{what}: {n} other value(s) compared with it; {_fmt_res(r)}"
                        if n else f"only value audited; {_fmt_res(r)}")
    if r.same_code(ref) and _resources(ref) == _resources(r):
        return _verdict(UNCHANGED, f"same machine code and resources as {ref_name(hint, ref)}")
    twin = _same_code(hint, r, group)
    also = f" (same code as {ref_name(hint, twin)})" if twin is not None and twin is not ref else ""
    return _verdict(CHANGED, f"vs {ref_name(hint, ref)}: {_diff(ref, r)}{also}")


def judge_allow_tma(hint: str, r: VariantRecord, group: list[VariantRecord]) -> Verdict | None:
    """Verdict for a load's ``allow_tma`` (a probe knob) from the TMA / bulk-copy instructions in the SASS.

    Needs SASS traits (``--sass``, nvdisasm); without them no verdict is given. Other loads and stores of the
    kernel may use TMA whatever this knob says, so ``allow_tma=False`` is judged against the ``True`` variant.
    """
    allowed = bool(r.hint(hint))
    cc = target_cc(r.arch)
    if cc < (9, 0):
        return _verdict(INFEASIBLE if allowed else MET, f"no TMA before sm_90 ({r.arch})")
    n = tma_data_ops(r)
    if n is None:
        return None
    ops = ", ".join(f"{op}×{c}" for op, c in sorted(((r.sass.tma if r.sass else None) or {}).items())
                    if op in TMA_DATA_OPCODES) or "none"
    other = next((o for o in group if o.ok and o is not r and bool(o.hint(hint)) != allowed), None)
    if allowed:
        if n:
            return _tma_met(hint, r, other, f"{n} TMA/bulk-copy data instruction(s) ({ops})")
        why = [d for rem in r.remarks if "Tma" in rem.get("name", "") for d in rem.get("details", [])]
        return _verdict(IGNORED, "no TMA instructions" + (f"; tileiras: {why[0]}" if why else ""))
    sib_ops = [k for o in group if o.ok and o is not r and bool(o.hint(hint)) and (k := tma_data_ops(o)) is not None]
    if n == 0:
        return _tma_met(hint, r, other, "no TMA instructions")
    if sib_ops and n < sib_ops[0]:
        return _verdict(HONOURED, f"TMA data instructions {sib_ops[0]} → {n} (the others come from other "
                                  f"loads/stores: {ops})")
    return _verdict(IGNORED, f"still {n} TMA data instruction(s) ({ops})")


def _tma_met(hint: str, r: VariantRecord, other: VariantRecord | None, reason: str) -> Verdict:
    """allow_tma's goal met: ``met`` when the variant with the other value is missing or has the same code."""
    if other is None:
        return _verdict(MET, f"{reason}; the other {hint} value was not audited: nothing shows the knob changed "
                             "the code")
    return _met_or_honoured(hint, r, [r, other], _verdict(HONOURED, reason), ref=other)


_JUDGES = {"occupancy": judge_occupancy, "num_ctas": judge_num_ctas, "allow_tma": judge_allow_tma}
#: Hints whose verdict needs the arch's SM limits (:func:`tileprobe.model.arch.has_limits`).
_NEEDS_LIMITS = ("occupancy", "num_ctas")

"""A :class:`~tileprobe.tune.result.ProblemResult` from the static plan and the race's outcome: every candidate's
row (its fate, samples summary, clocks and static facts), the pick or the tie, and what changed since the stored
tune under another compiler (:func:`compare_previous`). The JSON layout is :mod:`tileprobe.tune.result`'s."""
from __future__ import annotations

from tileprobe.run.clocks import clocks_moved
from tileprobe.tune.race import RaceOutcome
from tileprobe.tune.race_state import BatchLog, ClockReading
from tileprobe.tune.result import SAMPLE_FIELDS, CandidateRow, ProblemResult, StoredPick, StoredTune
from tileprobe.tune.static import DUPLICATE, Candidate, Plan

# Imports inside functions here are lazy on purpose: at the module head they would add 0.26 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def _static(row: CandidateRow, rec) -> None:
    """The static facts of the compiled record ``rec`` (None: not compiled) on ``row``."""
    if rec is None:
        return
    spills = rec.sass.spills() if rec.sass else None
    row.compiled = True
    row.threads, row.registers, row.shared_bytes = rec.threads, rec.registers, rec.shared_bytes
    row.stack_bytes, row.ctas_per_sm, row.spills = rec.stack_bytes, rec.ctas_per_sm, spills
    row.compile_s = rec.compile_s     # the compiler's own time (s), for the static stage's floor
    row.verdicts = {k: v.status for k, v in rec.verdicts.items()}
    row.register_pool = rec.pool_verdict


def _clock_summary(batches: list[BatchLog]) -> dict:
    """The clocks over a candidate's batches: ``{"sm_mhz": [min, max] or null, "mem_mhz": …, "reasons": [sorted]}``
    (the tune row's ``clocks``)."""
    readings = [ClockReading.from_dict(r) for b in batches for r in b.clock_readings()]
    span = lambda xs: [min(xs), max(xs)] if xs else None
    return {"sm_mhz": span([r.sm_mhz for r in readings if r.sm_mhz is not None]),
            "mem_mhz": span([r.mem_mhz for r in readings if r.mem_mhz is not None]),
            "reasons": sorted({x for r in readings for x in r.reasons or []})}


def candidate_row(c: Candidate, outcome: RaceOutcome | None, confidence: float = 0.95) -> CandidateRow:
    """One candidate's row (:class:`~tileprobe.tune.result.CandidateRow`): its static facts, and its samples
    summary and race facts when ``outcome`` timed it (or the candidate it shares a launch with)."""
    row = CandidateRow(c.config.to_dict(), c.id, c.status, c.reason, c.same_as.id if c.same_as else None,
                       [m.id for m in c.members], list(c.grid) if c.grid else None)
    _static(row, c.record)
    if c.same_as is not None:
        row.status = DUPLICATE
        row.reason = f"same launch as {c.same_as.id} (machine code, resources, grid, arguments): timed as one"
    src = c.same_as or c
    if outcome is not None and c.status == "ok" and any(e.id == src.id for e in outcome.entries):
        e = outcome.entry(src.id)
        summary = e.summary(confidence)
        row.raced = True
        for k in SAMPLE_FIELDS:
            setattr(row, k, summary.get(k))
        if c.same_as is None:
            row.status, row.reason = e.status, e.reason
        row.check, row.eliminated_round, row.clocks = e.check, e.eliminated_round, _clock_summary(e.batches)
        row.clocks_moved = clocks_moved(r for b in e.batches for r in (b.clocks_before, b.clocks_after))
        row.batches, row.driver_ctas_per_sm = len(e.batches), e.info.get("driver_ctas_per_sm")
        row.final_us, row.final_passes_us = e.final_us, list(e.final) or None
    return row


def _first_of_launch(plan: Plan, label: str) -> str:
    """The first configuration, in the space's order, with the same launch as the timed candidate ``label``: racing
    while compiling times whichever of identical launches landed first, and the pick must not depend on which
    compile finished first (the sequential path's representative is the first in order already)."""
    timed = next((c for c in plan.candidates if c.id == label), None)
    if timed is None or not timed.members:
        return label
    ids = {m.id for m in timed.members}
    return next(c.id for c in plan.candidates if c.id in ids)


def problem_result(plan: Plan, outcome: RaceOutcome | None, arch: str, confidence: float = 0.95) -> ProblemResult:
    """Assemble a :class:`ProblemResult` from the static plan and the race's outcome (None: not raced)."""
    from tileprobe.schema import canonical
    rows = [candidate_row(c, outcome, confidence) for c in plan.candidates]
    recs = [c.record for c in plan.candidates if c.record is not None]
    res = ProblemResult(plan.problem.probe.label, plan.problem.probe.source or "", canonical(plan.problem.values),
                        arch, rows, dropped=dict(plan.dropped), notes=list(plan.notes),
                        tileiras=recs[0].tileiras if recs else "", cuda_tile=recs[0].cuda_tile if recs else "")
    res.coverage = {"configurations": len(plan.candidates) + sum(plan.problem.rejected.values()),
                    "compiled": sum(1 for c in plan.candidates if c.record is not None and c.record.ok),
                    "timed": sum(1 for e in (outcome.entries if outcome else []) if e.samples)}
    for constraint, n in plan.problem.rejected.items():
        rows.append(CandidateRow(None, f"{n} configuration(s)", "constraint",
                                 f"rejected by constraint {constraint} before compiling"))
    if outcome is None:
        return res
    res.verdict, res.stop, res.rounds = outcome.verdict, outcome.stop, outcome.rounds
    res.race_s, res.check_s = outcome.wall_s, outcome.check_s
    res.kernel_s = sum(sum(e.samples) for e in outcome.entries) / 1e6
    by_label = {r.label: r for r in rows if r.config is not None}
    shown = ([outcome.pick] if outcome.pick else []) + list(outcome.tie) + list((outcome.final or {}).get(
        "contenders") or [])        # the final's contenders too: its ratios are looked up by the rows' names
    named = {t: _name_first(plan, by_label, t) for t in dict.fromkeys(shown)}
    res.final = _renamed_final(outcome.final, lambda t: named.get(t, t))    # every id of the final is in ``named``
    res.pick = by_label.get(named[outcome.pick]) if outcome.pick else None
    res.tie = [by_label[named[t]] for t in outcome.tie if named[t] in by_label]
    return res


def _name_first(plan: Plan, by_label: dict[str, CandidateRow], label: str) -> str:
    """The row that names the timed candidate ``label`` (the pick, one it ties with, a contender of the final): the
    first of its launch in the space's order (:func:`_first_of_launch`), which takes the timed row's status; the
    timed row and the rest of the group become its duplicates. Returns that row's label."""
    first = _first_of_launch(plan, label)
    if first == label or first not in by_label or label not in by_label:
        return label
    timed, shown = by_label[label], by_label[first]
    shown.status, shown.reason, shown.same_launch_as = timed.status, timed.reason, None
    shown.group, timed.group = list(timed.group), []      # the row that names the group lists it
    reason = f"same launch as {first} (machine code, resources, grid, arguments): timed as one"
    for row in [timed] + [r for r in by_label.values() if r.same_launch_as == label]:
        row.status, row.same_launch_as, row.reason = DUPLICATE, first, reason
    return first


def final_named(plan: Plan, final: dict | None) -> dict | None:
    """The steady-state final's dict (``RaceOutcome.final``, or the race's ``("final", …)`` progress event) with its
    ids named as :func:`problem_result` names them: the first configuration of each launch in ``plan``'s order."""
    return _renamed_final(final, lambda t: _first_of_launch(plan, t))


def _renamed_final(final: dict | None, name) -> dict | None:
    """The steady-state final's dict (``RaceOutcome.final``) with every id as ``name`` gives it (the label the table
    names the launch by), so that its line, its JSON and the rows agree."""
    if not final:
        return final
    out = dict(final)
    for key in ("contenders", "tie"):
        if key in out:
            out[key] = [name(t) for t in out[key]]
    for key in ("leader_before", "pick"):
        if out.get(key):
            out[key] = name(out[key])
    for key in ("figures_us", "vs_pick"):
        if key in out:
            out[key] = {name(t): v for t, v in out[key].items()}
    return out


def compare_previous(res: ProblemResult, previous: dict | None) -> dict | None:
    """What changed since ``previous`` (a stored tune of the same kernel, problem, GPU and timing mode under
    another tileiras build, as :meth:`tileprobe.store.Store.previous_tune` returns it): whether the pick changed,
    the old pick's time now, how much slower than the new pick it is (the loss of keeping it), and how its time
    moved between the two compilers. None without a previous tune. ``previous`` is the stored JSON (read here as a
    :class:`StoredTune`); ``res`` the records; the answer is the JSON of the problem's ``previous``."""
    stored = StoredTune.from_dict(previous) if previous else None
    if stored is None or not stored.pick:
        return None
    old = stored.pick if isinstance(stored.pick, StoredPick) else StoredPick()
    now = next((r for r in res.candidates if r.config == old.config), None)
    ratio = res.vs_pick(now) if now is not None else None     # the final's, when it timed both
    old_now_us = now.median_us if now else None
    before = old.median_us
    return {"tileiras_before": stored.tileiras, "created_before": stored.created,
            "pick_before": old.config, "median_us_before": old.median_us,
            "changed": res.pick is None or old.config != res.pick.config,
            "old_pick_now": None if now is None else {"status": now.status, "median_us": now.median_us,
                                                      "ci_lo_us": now.ci_lo_us, "ci_hi_us": now.ci_hi_us},
            "loss_pct": 100.0 * (ratio - 1.0) if ratio is not None else None,
            "old_pick_change_pct": (100.0 * (old_now_us - before) / before) if before and old_now_us else None}

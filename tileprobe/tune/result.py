"""What a tune found: per problem, every candidate's fate and samples summary, the winner or the tie, and what
changed since a stored tune with another compiler. JSON layout (``schema_version`` :data:`TUNE_SCHEMA_VERSION`)::

    {"schema_version": 1, "kind": "tileprobe.tune-result", "tool": "tileprobe 0.1.0", "created": "…Z",
     "environment": {gpu, arch, num_sms, tileiras, cuda_tile, timing, strategy, race settings, …},
     "times": {startup_s, plan_s, compile_s, worker_start_s, worker_wait_s, race_s, check_s, store_s, total_s},
     "probe_errors": [...], "aborted": null | "why",
     "problems": [ProblemResult.to_dict(), ...]}

A problem (:class:`ProblemResult`): ``kernel``, ``probe``, ``problem`` (its case values), ``arch``, ``verdict``
(``winner`` | ``tie`` | ``none`` | ``not_run``), ``pick`` and ``tie`` (candidate dicts), ``stop`` (why the race
stopped), ``rounds``, ``dropped`` (rule → count), ``notes``, ``previous`` (the comparison with a stored tune
under another tileiras build, or null), and ``candidates``, each with: ``config`` (``case``: tunable values,
``hints``), ``label``, ``status`` (winner | tie | eliminated | hang | crash | error | wrong | skipped |
duplicate | hang_risk (not launched: predicted hang, issue 23) | a compile status | constraint), ``reason``, ``same_launch_as``, ``group`` (labels timed as one),
the samples summary (``n``, ``median_us``, ``ci_lo_us``, ``ci_hi_us``, ``p25_us``, ``p75_us``, ``min_us``),
``clocks`` (lowest and highest SM and memory MHz over its batches, the driver's clock-event reasons),
``clocks_moved``, ``check``, ``eliminated_round``, ``grid`` and the static facts (threads, registers,
shared_bytes, stack_bytes, ctas_per_sm, spills).
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from tileprobe.run.clocks import clocks_moved
from tileprobe.tune.race import RaceOutcome
from tileprobe.tune.static import DUPLICATE, Candidate, Plan

TUNE_SCHEMA_VERSION = 1


def _static(rec) -> dict:
    if rec is None:
        return {}
    spills = None
    if rec.sass:
        spills = {k: v for k, v in rec.sass.items() if "spill" in k} or None
    return {"threads": rec.threads, "registers": rec.registers, "shared_bytes": rec.shared_bytes,
            "stack_bytes": rec.stack_bytes, "ctas_per_sm": rec.ctas_per_sm, "spills": spills,
            "compile_s": rec.compile_s,     # the compiler's own time (s), for the static stage's floor
            "verdicts": {k: v.get("status") for k, v in (rec.verdicts or {}).items()},
            "register_pool": rec.pool_verdict}


def _clock_summary(batches: list[dict]) -> dict:
    readings = [b.get(k) for b in batches for k in ("clocks_before", "clocks_after")]
    readings = [r for r in readings if r]
    out = {}
    for key in ("sm_mhz", "mem_mhz"):
        xs = [r[key] for r in readings if r.get(key) is not None]
        out[key] = [min(xs), max(xs)] if xs else None
    out["reasons"] = sorted({x for r in readings for x in r.get("reasons") or []})
    return out


def candidate_dict(c: Candidate, outcome: RaceOutcome | None, confidence: float = 0.95) -> dict:
    """One candidate's row (module doc)."""
    d = {"config": c.config.to_dict(), "label": c.id, "status": c.status, "reason": c.reason,
         "same_launch_as": c.same_as.id if c.same_as else None, "group": [m.id for m in c.members],
         "grid": list(c.grid) if c.grid else None, **_static(c.record)}
    if c.same_as is not None:
        d["status"] = DUPLICATE
        d["reason"] = f"same launch as {c.same_as.id} (machine code, resources, grid, arguments): timed as one"
    src = c.same_as or c
    if outcome is not None and c.status == "ok" and any(e.id == src.id for e in outcome.entries):
        e = outcome.entry(src.id)
        d.update(e.summary(confidence))
        if c.same_as is None:
            d.update(status=e.status, reason=e.reason)
        d.update(check=e.check, eliminated_round=e.eliminated_round, clocks=_clock_summary(e.batches),
                 clocks_moved=clocks_moved(b.get(k) for b in e.batches for k in ("clocks_before", "clocks_after")),
                 batches=len(e.batches), driver_ctas_per_sm=e.info.get("driver_ctas_per_sm"))
    return d


@dataclass
class ProblemResult:
    """One problem's tune (module doc)."""
    kernel: str
    probe: str
    problem: dict
    arch: str
    candidates: list[dict]
    verdict: str = "not_run"
    pick: dict | None = None
    tie: list[dict] = field(default_factory=list)
    stop: str = ""
    rounds: list[dict] = field(default_factory=list)
    dropped: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    previous: dict | None = None
    tileiras: str = ""
    cuda_tile: str = ""
    source_sha256: str = ""
    race_s: float = 0.0
    check_s: float = 0.0
    #: How much of the space was searched: configurations (constraints' rejections included), compiled (a record
    #: with a cubin), timed (at least one batch) — issue 22: a budget may leave part of it unsearched.
    coverage: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The problem as ``M=4096 N=4096`` (``(one problem)`` when the probe has no problem keys)."""
        return " ".join(f"{k}={v}" for k, v in self.problem.items()) or "(one problem)"

    def to_dict(self) -> dict:
        """This problem's result as a JSON-ready dict (stored in the ``tunes`` table)."""
        from dataclasses import asdict
        return asdict(self)


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
    rows = [candidate_dict(c, outcome, confidence) for c in plan.candidates]
    recs = [c.record for c in plan.candidates if c.record is not None]
    res = ProblemResult(plan.problem.probe.label, plan.problem.probe.source or "", canonical(plan.problem.values),
                        arch, rows, dropped=dict(plan.dropped), notes=list(plan.notes),
                        tileiras=recs[0].tileiras if recs else "", cuda_tile=recs[0].cuda_tile if recs else "")
    res.coverage = {"configurations": len(plan.candidates) + sum(plan.problem.rejected.values()),
                    "compiled": sum(1 for c in plan.candidates if c.record is not None and c.record.ok),
                    "timed": sum(1 for e in (outcome.entries if outcome else []) if e.samples)}
    for constraint, n in plan.problem.rejected.items():
        rows.append({"config": None, "label": f"{n} configuration(s)", "status": "constraint",
                     "reason": f"rejected by constraint {constraint} before compiling"})
    if outcome is None:
        return res
    res.verdict, res.stop, res.rounds = outcome.verdict, outcome.stop, outcome.rounds
    res.race_s, res.check_s = outcome.wall_s, outcome.check_s
    by_label = {r["label"]: r for r in rows if r.get("config") is not None}
    first = _first_of_launch(plan, outcome.pick) if outcome.pick else None
    if first is not None and first != outcome.pick and first in by_label and outcome.pick in by_label:
        timed, shown = by_label[outcome.pick], by_label[first]   # the table names the first one the winner
        shown.update(status=timed["status"], reason=timed["reason"], same_launch_as=None)
        timed.update(status=DUPLICATE, same_launch_as=first,
                     reason=f"same launch as {first} (machine code, resources, grid, arguments): timed as one")
    res.pick = by_label.get(first) if first else None
    res.tie = [by_label[t] for t in outcome.tie if t in by_label]
    return res


def compare_previous(res: ProblemResult, previous: dict | None) -> dict | None:
    """What changed since ``previous`` (a stored tune of the same kernel, problem, GPU and timing mode under
    another tileiras build, as :meth:`tileprobe.store.Store.previous_tune` returns it): whether the pick changed,
    the old pick's time now, how much slower than the new pick it is (the loss of keeping it), and how its time
    moved between the two compilers. None without a previous tune."""
    if not previous or not previous.get("pick"):
        return None
    old = previous["pick"]
    out = {"tileiras_before": previous.get("tileiras"), "created_before": previous.get("created"),
           "pick_before": old.get("config"), "median_us_before": old.get("median_us"),
           "changed": res.pick is None or old.get("config") != res.pick.get("config")}
    now = next((r for r in res.candidates if r.get("config") == old.get("config")), None)
    out["old_pick_now"] = None if now is None else {"status": now.get("status"), "median_us": now.get("median_us"),
                                                     "ci_lo_us": now.get("ci_lo_us"), "ci_hi_us": now.get("ci_hi_us")}
    new_us, old_now_us = (res.pick or {}).get("median_us"), (now or {}).get("median_us")
    out["loss_pct"] = (100.0 * (old_now_us - new_us) / new_us) if new_us and old_now_us else None
    before = old.get("median_us")
    out["old_pick_change_pct"] = (100.0 * (old_now_us - before) / before) if before and old_now_us else None
    return out


@dataclass
class TuneResult:
    """A whole tune: one :class:`ProblemResult` per problem, the environment, the time split (s), the probe errors
    met, and why it stopped early (``aborted``), if it did. ``dry_run``: the static stage only."""
    problems: list[ProblemResult] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)
    probe_errors: list[str] = field(default_factory=list)
    aborted: str | None = None
    dry_run: bool = False

    def to_dict(self) -> dict:
        """The whole tune as a JSON document (``schema_version``, provenance, one entry per problem)."""
        from tileprobe._version import __version__
        return {"schema_version": TUNE_SCHEMA_VERSION, "kind": "tileprobe.tune-result",
                "tool": f"tileprobe {__version__}",
                "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "environment": self.environment, "times": self.times, "probe_errors": self.probe_errors,
                "aborted": self.aborted, "dry_run": self.dry_run, "problems": [p.to_dict() for p in self.problems]}

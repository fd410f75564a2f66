"""The budgeted search's side of the tune (``--budget`` over a large space): each problem searched in rounds by
:class:`~tileprobe.tune.search.BudgetedSearch`, whose ``compile`` and ``race`` are made here from the tune's own
parts — the compiles of :func:`tileprobe.tune.pipeline` (the store first, then the compile pool), the records landed
in the problem's plan (:class:`~tileprobe.tune.static.Landing`), duplicates found as they land
(:func:`~tileprobe.tune.static.dedupe_one`, the probe's ``grid``/``args`` run contained), and races on the tune's
GPU worker (:class:`~tileprobe.tune.gpu.WorkerBench`, one per problem, its candidates added round by round).
"""
from __future__ import annotations

import dataclasses
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Callable

from tileprobe.schema import value_key
from tileprobe.tune.gpu import WorkerBench
from tileprobe.tune.race import Race, RaceOutcome, RaceSettings
from tileprobe.compile.schedule import CompileSchedule
from tileprobe.tune.search import NOT_SEARCHED, BudgetedSearch, Compiled, SearchOutcome, SearchSettings
from tileprobe.tune.space import Config, Problem
from tileprobe.tune.static import Candidate, Landing, Plan, dedupe_one, launch_facts, variant_rank

#: Stored tunes read for round 1's first guesses (the newest; each holds every row of its tune).
STORED_PICKS_READ = 20
#: Why a configuration of a budgeted search has no record.
NOT_SEARCHED_REASON = "not compiled: the budgeted search did not reach it (--budget; docs/TUNE.md)"


@dataclass
class SearchContext:
    """What every problem's search shares: the tune's compile function (``records(problems) -> (records, cubin
    getter, environment, probe errors)``), the GPU (``gpu() -> info``, waits for the worker), the worker bench's
    keyword arguments (watchdog first), the race settings, the arch and the hang-risk choice, the probe timeout,
    the given SM count (None: the GPU's) and the progress callback."""
    records: Callable
    gpu: Callable[[], dict]
    bench_kw: dict
    race: RaceSettings
    search: SearchSettings
    arch: str
    run_hang_risk: bool = False
    probe_timeout_s: float | None = None
    num_sms: int | None = None
    progress: Callable | None = None
    getters: list = field(default_factory=list)
    environment: dict | None = None
    probe_errors: list = field(default_factory=list)
    compile_s: float = 0.0

    def get(self, sha: str) -> bytes | None:
        """A cubin by SHA-256 from any round's compile (or the store)."""
        for g in self.getters:
            data = g(sha)
            if data is not None:
                return data
        return None

    @property
    def sms(self) -> int | None:
        """The SM count the grids are made for: the one given, else the GPU's (waits for the worker)."""
        return self.num_sms or self.gpu().get("num_sms")


def search_plan(problem: Problem) -> Plan:
    """The problem's plan before the search: every candidate :data:`~tileprobe.tune.search.NOT_SEARCHED`
    (constraints counted, as :func:`~tileprobe.tune.static.pending_plans`)."""
    plan = Plan(problem, [Candidate(problem, cfg, None, NOT_SEARCHED, NOT_SEARCHED_REASON) for cfg in problem.configs],
                {f"constraint:{k}": n for k, n in problem.rejected.items()})
    if problem.default_note and problem.probe.reference is None:
        plan.notes.append(problem.default_note)
    return plan


class _ProblemSearch:
    """One problem's ``compile`` and ``race`` for :class:`BudgetedSearch` (module doc)."""

    def __init__(self, ctx: SearchContext, plan: Plan):
        self.ctx, self.plan = ctx, plan
        self.landing = Landing([plan], ctx.arch, ctx.run_hang_risk)
        self.bench: WorkerBench | None = None

    def compile(self, batch: list[Config], stop_at: float | None = None, at_least: int = 0,
                room: Callable[[int, float], bool] | None = None) -> Compiled:
        """Compile ``batch`` in its order, none started after ``stop_at`` but the first ``at_least``; the store's
        records of every configuration not yet searched land too (they cost nothing). Land the records, dedupe.
        A configuration not started stays ``not_searched``; ``room`` (:class:`~tileprobe.tune.search.CompileRoom`)
        may stop the starts before ``stop_at``."""
        t0 = time.perf_counter()
        wanted = set(batch)
        rest = [c.config for c in self.plan.candidates if c.status == NOT_SEARCHED and c.config not in wanted]
        rest_set = set(rest)
        sub = dataclasses.replace(self.plan.problem, configs=list(batch) + rest, rejected={})
        schedule = CompileSchedule(variant_rank(self.plan.problem, batch), stop_at, at_least, time.perf_counter,
                                   limit=len(batch), room=room)
        records, get, env, errors = self.ctx.records([sub], schedule)
        self.ctx.compile_s += time.perf_counter() - t0
        self.ctx.getters.append(get)
        self.ctx.environment = self.ctx.environment or env
        self.ctx.probe_errors += [e for e in errors if e not in self.ctx.probe_errors]
        landed = [hit[1] for r in records if (hit := self.landing.land(r)) is not None]
        cut = stop_at is not None and time.perf_counter() >= stop_at   # the unstarted ones were cut, not refused
        for c in self.plan.candidates:
            if c.config in wanted and c.record is None and not cut:
                c.status, c.reason = "not_compiled", f"no {self.ctx.arch} record for it"
                self.plan.dropped["not_compiled"] = self.plan.dropped.get("not_compiled", 0) + 1
        reached = [c.config for c in self.plan.candidates
                   if (c.config in wanted or c.config in rest_set) and c.status != NOT_SEARCHED]
        ok = [c for c in landed if c.status == "ok"]
        sms = self.ctx.sms
        facts = launch_facts([Plan(self.plan.problem, ok)], sms, self.ctx.probe_timeout_s) if ok and sms else {}
        ids = [c.id for c in landed if (dedupe_one(self.plan, c, sms, self.ctx.get, facts.get(id(c))) if sms
                                        else c.status == "ok")]
        seconds = {c.id: c.record.compile_s for c in landed if c.record is not None and c.record.compile_s}
        failed = sum(1 for c in landed if c.record is not None and not c.record.ok)
        return Compiled(ids, reached, max(seconds.values(), default=0.0), failed, seconds)

    def race(self, ids: list[str], budget_s: float | None) -> RaceOutcome:
        """Race ``ids`` (compiled, deduplicated) on the tune's worker within ``budget_s``."""
        by_id = {c.id: c for c in self.plan.candidates}
        if self.bench is None:
            self.bench = WorkerBench(candidates={}, cubin_get=self.ctx.get, **self.ctx.bench_kw)
        self.bench.candidates.update({i: by_id[i] for i in ids})
        if self.bench.default is None:
            d = self.plan.find(self.plan.problem.default)
            if d is not None and d.status == "ok":
                self.bench.default = d.same_as or d
        settings = dataclasses.replace(self.ctx.race, budget_s=budget_s)
        return Race(ids, self.bench.measure, self.bench.check, settings, progress=self.ctx.progress).run()


def stored_picks(store, problem: Problem) -> list[Config]:
    """The picks of stored tunes of the same kernel (any problem, any GPU, newest first) that are configurations of
    ``problem``: round 1 takes them first (a neighbouring problem's winner is a good first guess)."""
    if store is None:
        return []
    want = {c.key(): c for c in problem.configs}
    out = []
    try:
        tunes = store.tunes(kernel=problem.probe.label, limit=STORED_PICKS_READ)
    except (sqlite3.Error, ValueError, TypeError, KeyError):   # a damaged store: no seeds, the search goes on
        return []
    for t in tunes:
        cfg = (t.get("pick") or {}).get("config")
        key = _config_key(cfg)
        if key in want and want[key] not in out:
            out.append(want[key])
    return out


def first_guesses(problem: Problem, store=None) -> list[Config]:
    """What round 1 takes first: the default configuration, then the stored picks (:func:`stored_picks`)."""
    return ([problem.default] if problem.default is not None else []) + stored_picks(store, problem)


def _config_key(cfg) -> str | None:
    if not isinstance(cfg, dict):
        return None
    return value_key({"case": cfg.get("case") or {}, "hints": cfg.get("hints") or {}})


def search_problem(ctx: SearchContext, problem: Problem, deadline: float, store=None,
                   settings: SearchSettings | None = None) -> tuple[Plan, SearchOutcome]:
    """Search ``problem`` until ``deadline`` (``time.perf_counter()`` seconds) with ``settings`` (default the
    context's); its plan and the search's outcome."""
    plan = search_plan(problem)
    side = _ProblemSearch(ctx, plan)
    first = first_guesses(problem, store)
    found = BudgetedSearch(problem.configs, side.compile, side.race, lambda c: c.label, settings or ctx.search, deadline,
                           first, clock=time.perf_counter, progress=ctx.progress).run()
    plan.dropped[NOT_SEARCHED] = sum(1 for c in plan.candidates if c.status == NOT_SEARCHED)
    if not plan.dropped[NOT_SEARCHED]:
        del plan.dropped[NOT_SEARCHED]
    plan.notes += [r.note() for r in found.rounds]
    return plan, found



#: Why a configuration of a dry run with ``--budget`` was not compiled.
NOT_SAMPLED_REASON = ("not compiled: a dry run with --budget compiles round 1's sample only (the later rounds "
                      "follow the race's leaders, and a dry run has no race)")


def dry_run_sample(problem: Problem, settings: SearchSettings, store=None) -> tuple[Problem, list[Config]]:
    """What a dry run with ``--budget`` compiles of ``problem`` (larger than ``settings.full_max``): round 1 of the
    budgeted search — the default configuration, the stored picks of the same kernel, then the balanced sample, up
    to ``settings.round_cap`` — as a problem of those configurations, and the configurations left out (rows of
    status :data:`~tileprobe.tune.search.NOT_SEARCHED`, :func:`add_not_sampled`). The later rounds need the race,
    which a dry run does not run. (Until 2026-12-02 a dry run ignored ``--budget`` and compiled the whole space:
    486 matmul configurations, 837 s on the 2-core machine.)"""
    from tileprobe.tune.search import round_one
    keep = set(round_one(problem.configs, first_guesses(problem, store), settings.round_cap, settings.seed))
    return (dataclasses.replace(problem, configs=[c for c in problem.configs if c in keep]),
            [c for c in problem.configs if c not in keep])


def add_not_sampled(plan: Plan, left: list[Config]) -> None:
    """Rows of status ``not_searched`` for the configurations a dry run's sample left out (:func:`dry_run_sample`),
    counted in ``plan.dropped``, with a note saying why."""
    if not left:
        return
    plan.candidates += [Candidate(plan.problem, cfg, None, NOT_SEARCHED, NOT_SAMPLED_REASON) for cfg in left]
    plan.dropped[NOT_SEARCHED] = plan.dropped.get(NOT_SEARCHED, 0) + len(left)
    n = len(plan.candidates) - len(left)
    plan.notes.append(f"a dry run with --budget: round 1's sample, {n} of {len(plan.candidates)} configurations "
                      "(at most 4 × --jobs; compiled, or taken from the store); the later rounds follow the race's "
                      "leaders (run without --dry-run)")

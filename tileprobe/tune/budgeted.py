"""The budgeted search's side of the tune (``--budget`` over a large space): each problem searched by
:class:`~tileprobe.tune.search.SearchOrder` while its race runs — the compiles of :func:`tileprobe.tune.pipeline`
(the store first, then the compile pool, which asks the order for each next configuration as a job frees up:
:class:`~tileprobe.compile.schedule.ChosenSchedule`), and the race of what landed on the tune's GPU worker in a
thread (:class:`~tileprobe.tune.overlap.Overlap`: records landed in the problem's plan, duplicates found as they
land, latecomers join the race), whose leaders the order reads.
"""
from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tileprobe.compile.schedule import ChosenSchedule
from tileprobe.schema import value_key
from tileprobe.tune.overlap import Intake, Overlap
from tileprobe.tune.race import RaceOutcome, RaceSettings
from tileprobe.tune.result import CUT_REASON, NO_SM_COUNT, NOT_SAMPLED_REASON, StoredPick, StoredTune
from tileprobe.tune.search import NOT_SEARCHED, SearchOrder, SearchSettings
from tileprobe.tune.space import Config, Problem
from tileprobe.tune.static import Candidate, Landing, Plan, config_key, launch_facts, record_key, variant_key
from tileprobe.tune.table_doc import PickConfig

#: Stored tunes read for the search's first guesses (the newest; each holds every row of its tune).
STORED_PICKS_READ = 20
#: Why a configuration of a budgeted search has no record.
NOT_SEARCHED_REASON = "not compiled: the budgeted search did not reach it (--budget; docs/TUNE.md)"


@dataclass
class SearchContext:
    """What every problem's search shares: the tune's compile function (``records(problems, schedule, on_record) ->
    (records, cubin getter, environment, probe errors)``), the GPU (``gpu() -> info``, waits for the worker), the
    worker bench's keyword arguments (watchdog first), the race settings, the search settings, the arch and the
    hang-risk choice, the probe timeout, the given SM count (None: the GPU's) and the progress callback. Gathers the
    compile getters, the environment, the probe errors, the compile time and each problem's race (released by
    :meth:`release` when the tune is over: the worker a race thread started dies with that thread)."""
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
    races: list = field(default_factory=list)

    def get(self, sha: str) -> bytes | None:
        """A cubin by SHA-256 from any problem's compile (or the store)."""
        for g in self.getters:
            data = g(sha)
            if data is not None:
                return data
        return None

    def release(self) -> None:
        """Let every problem's race thread end."""
        for ov in self.races:
            ov.release()


def search_plan(problem: Problem) -> Plan:
    """The problem's plan before the search: every candidate :data:`~tileprobe.tune.search.NOT_SEARCHED`
    (constraints counted, as :func:`~tileprobe.tune.static.pending_plans`)."""
    plan = Plan(problem, [Candidate(problem, cfg, None, NOT_SEARCHED, NOT_SEARCHED_REASON) for cfg in problem.configs],
                {f"constraint:{k}": n for k, n in problem.rejected.items()})
    if problem.default_note and problem.probe.reference is None:
        plan.notes.append(problem.default_note)
    return plan


@dataclass
class Searched:
    """One problem's search: its plan, the race's outcome (None: not raced), the order (what it chose), the time
    the compiles and the race took (s), and whether the GPU worker could not start (the reason)."""
    plan: Plan
    outcome: RaceOutcome | None
    order: SearchOrder
    compile_s: float
    race_s: float
    aborted: str | None = None
    intakes: list[Intake] = field(default_factory=list)

    def note(self) -> str:
        """One line for the problem's notes: how much of the space was compiled, from where, and timed."""
        o = self.order
        timed = sum(1 for e in (self.outcome.entries if self.outcome else []) if e.samples)
        chosen = set(o.tried)
        missed = sum(1 for c in self.plan.candidates if c.config in chosen and c.record is None)
        stored = len(o.landed_stored)
        return (f"budgeted search: {len(o.tried) - missed} of {len(o.configs)} configurations compiled (of "
                f"{len(o.tried)} started: {o.by_source['sample']} from a balanced sample, {o.by_source['neighbours']} "
                f"neighbours of the race's leaders" + (f"; {missed} cut at the budget's end or without a record"
                                                       if missed else "") + ")" +
                (f", {stored} taken from the store" if stored else "") +
                f", {timed} timed; compiling {self.compile_s:.1f} s with the race beside it ({self.race_s:.1f} s)" +
                _intakes_text(self.intakes))


def _intakes_text(intakes: list[Intake]) -> str:
    """``; 40 landed candidates taken into the race in 4 intakes (0.21 s each on average, the longest 0.40 s)``: what
    the race waited for to take in what landed (their launch facts and dedupe), '' when nothing landed."""
    if not intakes:
        return ""
    seconds = [i.seconds for i in intakes]
    return (f"; {sum(i.candidates for i in intakes)} landed candidates taken into the race in {len(intakes)} "
            f"intake{'s' if len(intakes) != 1 else ''} ({sum(seconds) / len(seconds):.2f} s each on average, the "
            f"longest {max(seconds):.2f} s)")


def search_problem(ctx: SearchContext, problem: Problem, deadline: float, store=None,
                   settings: SearchSettings | None = None) -> Searched:
    """Search ``problem`` until ``deadline`` (``time.perf_counter()`` seconds) with ``settings`` (default the
    context's): compile what :class:`~tileprobe.tune.search.SearchOrder` chooses while the race of what landed runs
    (module doc). Raises what the race thread raised."""
    plan = search_plan(problem)
    s = settings or ctx.search
    by_id = {c.label: c for c in problem.configs}
    by_key = {config_key(problem, c): c for c in problem.configs}
    ov = Overlap(plan, Landing([plan], ctx.arch, ctx.run_hang_risk), ctx.gpu, ctx.num_sms, NO_SM_COUNT, ctx.bench_kw,
                 ctx.race, lambda sha: None, lambda plan_, outcome: outcome, ctx.progress,
                 lambda plan_, n: launch_facts([plan_], n, ctx.probe_timeout_s), deadline=deadline)
    ctx.races.append(ov)
    order = SearchOrder(problem.configs, first_guesses(problem, store), s, deadline,
                        lambda: [by_id[i] for i in ov.leaders(s.leaders, eliminated=True) if i in by_id])

    def on_record(rec, cubin) -> None:
        ov.on_record(rec, cubin)
        cfg = by_key.get(record_key(rec))
        if cfg is not None and rec.arch == ctx.arch:
            order.landed(cfg, rec.compile_s, rec.code_sha256)

    def choose(now: float):
        cfg = order.next(now)
        return None if cfg is None else config_key(problem, cfg)
    t0 = time.perf_counter()
    try:
        _, get, env, errors = ctx.records([problem], ChosenSchedule(choose, variant_key, time.perf_counter,
                                                                    order.cut_at, s.sample), on_record)
    finally:
        ov.compiled()
    compile_s = time.perf_counter() - t0
    ctx.compile_s += compile_s
    ctx.getters.append(get)
    ctx.environment = ctx.environment or env
    ctx.probe_errors += [e for e in errors if e not in ctx.probe_errors]
    ov.fallback_get = get
    ov.join()
    if ov.error is not None:
        raise ov.error
    _mark_cut(plan, order)
    _count_not_searched(plan)
    found = Searched(plan, ov.result, order, compile_s, ov.race_s, ov.aborted, list(ov.intakes))
    plan.notes.append(found.note())
    return found


def _mark_cut(plan: Plan, order: SearchOrder) -> None:
    """Configurations the order chose that got no record: their compile was cut at the budget's end
    (:attr:`~tileprobe.tune.search.SearchOrder.cut_at`; a compile that fails gives a record of its failure). They
    stay :data:`~tileprobe.tune.search.NOT_SEARCHED`, with :data:`~tileprobe.tune.result.CUT_REASON`: the budget
    left them out, they did not fail (a summary line said "1 failed" for a cut, session 9)."""
    chosen = set(order.tried)
    for c in plan.candidates:
        if c.config in chosen and c.record is None and c.status == NOT_SEARCHED:
            c.reason = CUT_REASON


def _count_not_searched(plan: Plan) -> None:
    n = sum(1 for c in plan.candidates if c.status == NOT_SEARCHED)
    if n:
        plan.dropped[NOT_SEARCHED] = n


def stored_picks(store, problem: Problem) -> list[Config]:
    """The picks of stored tunes of the same kernel (any problem, any GPU, newest first) that are configurations of
    ``problem``: the search takes them first (a neighbouring problem's winner is a good first guess)."""
    if store is None:
        return []
    want = {c.key(): c for c in problem.configs}
    out = []
    try:
        tunes = store.tunes(kernel=problem.probe.label, limit=STORED_PICKS_READ)
    except (sqlite3.Error, ValueError, TypeError, KeyError):   # a damaged store: no seeds, the search goes on
        return []
    for t in tunes:
        pick = StoredTune.from_dict(t).pick if isinstance(t, dict) else None
        key = _config_key(pick.config if isinstance(pick, StoredPick) else None)
        if key in want and want[key] not in out:
            out.append(want[key])
    return out


def first_guesses(problem: Problem, store=None) -> list[Config]:
    """What the search takes first: the default configuration, the warm start's (the table's nearest rows' picks:
    :mod:`tileprobe.tune.warm`), then the stored picks (:func:`stored_picks`); each once."""
    out = [problem.default] if problem.default is not None else []
    return list(dict.fromkeys([*out, *problem.first, *stored_picks(store, problem)]))


def _config_key(cfg) -> str | None:
    """A stored pick's configuration (``{"case": …, "hints": …}``) as :meth:`~tileprobe.tune.space.Config.key`
    writes it, or None for no object."""
    if not isinstance(cfg, dict):
        return None
    pick = PickConfig.from_dict(cfg)
    return value_key({"case": pick.case or {}, "hints": pick.hints or {}})




def dry_run_sample(problem: Problem, settings: SearchSettings, store=None) -> tuple[Problem, list[Config]]:
    """What a dry run with ``--budget`` compiles of ``problem`` (larger than ``settings.full_max``): the first sample
    of the budgeted search — the default configuration, the stored picks of the same kernel, then the balanced
    sample, up to ``settings.round_cap`` — as a problem of those configurations, and the configurations left out (rows of
    status :data:`~tileprobe.tune.search.NOT_SEARCHED`, :func:`add_not_sampled`). What comes after it needs the race,
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
    plan.notes.append(f"a dry run with --budget: the search's first sample, {n} of {len(plan.candidates)} "
                      "configurations (at most 4 × --jobs; compiled, or taken from the store); after it the search "
                      "follows the race's leaders (run without --dry-run)")

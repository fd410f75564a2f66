"""What a tune found: per problem, every candidate's fate and samples summary, the winner or the tie, and what
changed since a stored tune with another compiler. JSON layout (``schema_version`` :data:`TUNE_SCHEMA_VERSION`)::

    {"schema_version": 1, "kind": "tileprobe.tune-result", "tool": "tileprobe 0.1.0", "created": "…Z",
     "environment": {gpu, arch, num_sms, tileiras, cuda_tile, timing, strategy, race settings, …},
     "times": {startup_s, plan_s, compile_s, worker_start_s, worker_wait_s, race_s, check_s, race_kernel_s, store_s,
               total_s},
     "probe_errors": [...], "aborted": null | "why",
     "problems": [ProblemResult.to_dict(), ...]}

A problem (:class:`ProblemResult`): ``kernel``, ``probe``, ``problem`` (its case values), ``arch``, ``verdict``
(``winner`` | ``tie`` | ``none`` | ``not_run``), ``pick`` and ``tie`` (candidate rows), ``stop`` (why the race
stopped), ``final`` (the steady-state final, when one ran: :mod:`tileprobe.tune.race`, module doc 7), ``rounds``,
``dropped`` (rule → count), ``notes``, ``previous`` (the comparison with a stored tune
under another tileiras build, or null), and ``candidates`` (:class:`CandidateRow`), each with: ``config`` (``case``: tunable values,
``hints``), ``label``, ``status`` (winner | tie | eliminated | hang | crash | error | wrong | skipped |
duplicate | hang_risk (not launched: predicted hang) | a compile status | constraint), ``reason``, ``same_launch_as``, ``group`` (labels timed as one),
the samples summary (``n``, ``median_us``, ``ci_lo_us``, ``ci_hi_us``, ``p25_us``, ``p75_us``, ``min_us``),
``clocks`` (lowest and highest SM and memory MHz over its batches, the driver's clock-event reasons),
``clocks_moved``, ``check``, ``eliminated_round``, ``grid`` and the static facts (threads, registers,
shared_bytes, stack_bytes, ctas_per_sm, spills).

The records only (``report/tune.py`` renders them); :mod:`tileprobe.tune.assemble` makes them from the static plan
and the race's outcome.
"""
from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field, fields
from typing import Any

from tileprobe._version import __version__
from tileprobe.records import Key, KeyedRecord

TUNE_SCHEMA_VERSION = 1
#: The note of a plan whose duplicate launches were not looked for (the summary line says so instead of "0").
NO_SM_COUNT = "no SM count (give --num-sms): duplicate launches were not looked for"
#: Why a configuration of a dry run with ``--budget`` was not compiled (the reason of its ``not_searched`` row; the
#: summary line tells these rows from those the budget left out by it).
NOT_SAMPLED_REASON = ("not compiled: a dry run with --budget compiles the search's first sample only (after it the "
                      "search follows the race's leaders, and a dry run has no race)")
#: Why a configuration a budgeted search started got no record (the reason of its ``not_searched`` row): its
#: compile was cut at the budget's end (or another process's claim on it was given up then). Not a failure: the
#: summary counts it with the configurations the budget left out.
CUT_REASON = "not compiled: its compile was started but cut at the budget's end (--budget)"
#: A row's static facts (from its compiled record), its samples summary and its race facts, in JSON order.
STATIC_FIELDS = ("threads", "registers", "shared_bytes", "stack_bytes", "ctas_per_sm", "spills", "compile_s",
                 "verdicts", "register_pool")
SAMPLE_FIELDS = ("n", "median_us", "ci_lo_us", "ci_hi_us", "p25_us", "p75_us", "min_us", "max_us", "mean_us")
RACE_FIELDS = ("check", "eliminated_round", "clocks", "clocks_moved", "batches", "driver_ctas_per_sm")


@dataclass
class CandidateRow:
    """One candidate's row of a problem's tune (module doc), or the row of the configurations a constraint
    rejected (``config`` None: only ``config``, ``label``, ``status`` ``"constraint"`` and ``reason``).

    The JSON row (:meth:`to_dict`) holds the static facts only when ``compiled`` (the candidate has a record), the
    samples summary and race facts only when ``raced`` (of the samples only ``n`` when it is 0), and
    ``compile_key`` only when ``linked`` (the tune looked it up in a store), ``final_us`` (the mean of
    ``final_passes_us``, each the median of one steady-state final batch: :mod:`tileprobe.tune.race`, module doc 7)
    only when it was in a final. Times in µs, ``compile_s`` in s;
    ``grid`` the launch grid; ``check`` the result check (``status``, ``rel_err``, ``tolerance``, ``against``,
    ``message``); ``clocks`` the lowest and highest SM and memory MHz (``sm_mhz``, ``mem_mhz``: ``[lo, hi]`` or
    None) and the driver's clock-event ``reasons``."""
    config: dict | None
    label: str
    status: str
    reason: str | None = None
    same_launch_as: str | None = None
    group: list[str] = field(default_factory=list)
    grid: list[int] | None = None
    compiled: bool = False
    threads: int | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    ctas_per_sm: int | None = None
    spills: dict | None = None
    compile_s: float | None = None
    verdicts: dict[str, str | None] | None = None
    register_pool: str | None = None
    raced: bool = False
    n: int | None = None
    median_us: float | None = None
    ci_lo_us: float | None = None
    ci_hi_us: float | None = None
    p25_us: float | None = None
    p75_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    mean_us: float | None = None
    check: dict | None = None
    eliminated_round: int | None = None
    clocks: dict | None = None
    clocks_moved: bool | None = None
    batches: int | None = None
    driver_ctas_per_sm: int | None = None
    linked: bool = False
    compile_key: str | None = None
    final_us: float | None = None
    final_passes_us: list[float] | None = None

    def to_dict(self) -> dict:
        """The row as the tune's JSON and the store's ``tune_candidates.summary`` hold it (class doc)."""
        d: dict[str, Any] = {"config": self.config, "label": self.label, "status": self.status, "reason": self.reason}
        if self.config is None:
            return d
        d.update(same_launch_as=self.same_launch_as, group=list(self.group), grid=self.grid)
        names = (STATIC_FIELDS if self.compiled else ()) + (
            (SAMPLE_FIELDS if self.n else ("n",)) + RACE_FIELDS if self.raced else ())
        d.update({k: getattr(self, k) for k in names})
        if self.linked:
            d["compile_key"] = self.compile_key
        if self.final_passes_us:
            d.update(final_us=self.final_us, final_passes_us=list(self.final_passes_us))
        return copy.deepcopy(d)


class StoredPick(KeyedRecord):
    """A stored tune's ``pick`` (:meth:`tileprobe.store.Store.previous_tune`): its configuration and time (µs)."""
    __slots__ = ()
    config = Key[dict | None]()
    median_us = Key[float | None]()


class StoredTune(KeyedRecord):
    """A stored tune as :func:`compare_previous` reads it: the tileiras build, when it was made, its pick."""
    __slots__ = ()
    _objects = {"pick": StoredPick}
    tileiras = Key[str | None]()
    created = Key[str | None]()
    pick = Key[Any]()           # StoredPick


@dataclass
class ProblemResult:
    """One problem's tune (module doc)."""
    kernel: str
    probe: str
    problem: dict
    arch: str
    candidates: list[CandidateRow]
    verdict: str = "not_run"
    pick: CandidateRow | None = None
    tie: list[CandidateRow] = field(default_factory=list)
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
    #: Kernel time in the race's timed samples (s): the sum of every candidate's samples (µs per launch, one launch
    #: each; graph timing: the tune's time split multiplies by the launches in a graph); the final's batches, the
    #: warm-up and the checks' launches not counted. ``race_s`` ÷ this is what the race's wall buys.
    kernel_s: float = 0.0
    #: How much of the space was searched: configurations (constraints' rejections included), compiled (a record
    #: with a cubin), timed (at least one batch) — a budget may leave part of it unsearched.
    coverage: dict = field(default_factory=dict)
    #: The steady-state final when one ran (:class:`tileprobe.tune.race.RaceOutcome`'s ``final``); not in the JSON
    #: when None.
    final: dict | None = None

    def vs_pick(self, row: CandidateRow) -> float | None:
        """``row``'s time ÷ the pick's: the steady-state final's ratio (over the passes both ran) when the final
        timed it, else the race medians' ratio; None without a pick or a median."""
        ratio = ((self.final or {}).get("vs_pick") or {}).get(row.same_launch_as or row.label)
        if isinstance(ratio, (int, float)) and ratio == ratio and ratio > 0:
            return float(ratio)
        if self.pick is None or not self.pick.median_us or row.median_us is None:
            return None
        return row.median_us / self.pick.median_us

    @property
    def label(self) -> str:
        """The problem as ``M=4096 N=4096`` (``(one problem)`` when the probe has no problem keys)."""
        return " ".join(f"{k}={v}" for k, v in self.problem.items()) or "(one problem)"

    def to_dict(self) -> dict:
        """This problem's result as a JSON-ready dict (stored in the ``tunes`` table); the rows by
        :meth:`CandidateRow.to_dict`."""
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
               if f.name not in ("candidates", "pick", "tie")}
        out.update(candidates=[r.to_dict() for r in self.candidates], pick=self.pick.to_dict() if self.pick else None,
                   tie=[r.to_dict() for r in self.tie])
        return {f.name: out[f.name] for f in fields(self) if not (f.name == "final" and out[f.name] is None)}


@dataclass
class TuneResult:
    """A whole tune: one :class:`ProblemResult` per problem, the environment, the time split (s), the probe errors
    met, and why it stopped early (``aborted``), if it did. ``dry_run``: the static stage only. ``compiled``: how
    many candidates were compiled here, the rest coming from the store (None: not counted, as without a progress
    callback or from a bundle); for the time split's wording only, not in the JSON."""
    problems: list[ProblemResult] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)
    probe_errors: list[str] = field(default_factory=list)
    aborted: str | None = None
    dry_run: bool = False
    compiled: int | None = None

    def to_dict(self) -> dict:
        """The whole tune as a JSON document (``schema_version``, provenance, one entry per problem)."""
        return {"schema_version": TUNE_SCHEMA_VERSION, "kind": "tileprobe.tune-result",
                "tool": f"tileprobe {__version__}",
                "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "environment": self.environment, "times": self.times, "probe_errors": self.probe_errors,
                "aborted": self.aborted, "dry_run": self.dry_run, "problems": [p.to_dict() for p in self.problems]}

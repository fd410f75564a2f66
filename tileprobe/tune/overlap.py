"""Racing while compiling: the first problem's race starts as soon as the GPU worker is up and
its first candidate has landed; the others join as their compiles land (:class:`~tileprobe.tune.race.Race`'s
``arrivals``), deduplicated one by one (:func:`~tileprobe.tune.static.dedupe_one`).

The compiles run in the calling (main) thread, as without overlap: the results store's SQLite connection and the
compile workers belong to it. The race runs in a thread of this module, which ends only when the tune releases it
(a worker the watchdog restarts from it dies with the thread that started it: ``PR_SET_PDEATHSIG``). Records reach
the thread through a queue (``on_record``, called by :func:`tileprobe.audit.audit` as each one lands, stored or
compiled); :meth:`Overlap.compiled` says there are no more. Later problems are raced after the compile, as before.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tileprobe.run.watchdog import WorkerStartError
from tileprobe.tune.gpu import WorkerBench
from tileprobe.tune.race import MIN_RACE_S, Race
from tileprobe.tune.search import FINISH_S
from tileprobe.tune.static import Candidate, Landing, Plan, dedupe_one
from tileprobe.tune.table_doc import GpuInfo


@dataclass(frozen=True)
class Intake:
    """One intake of landed candidates by the race (:meth:`Overlap._arrivals`): how many landed together, and the
    seconds their launch facts and dedupe took (wall, the race thread's), which the race waits for."""
    candidates: int
    seconds: float


class Overlap:
    """The race of ``plan`` (the first problem) while the compiles land; see the module doc.

    Args:
        plan, landing: the first problem's plan (:func:`~tileprobe.tune.static.pending_plans`) and the
            :class:`~tileprobe.tune.static.Landing` of every plan (records of the others are landed too).
        wait_gpu: () -> GPU info (waits for the worker; raises what its start raised, or a wrong arch).
        num_sms: the SM count given (None: the GPU's). no_sm_note: the plan's note when there is none.
        bench_kw: keyword arguments of :class:`~tileprobe.tune.gpu.WorkerBench` (watchdog first, as ``watchdog``).
        settings: the race's settings (its budget share already in). fallback_get: sha → cubin (the store).
        make_result: (plan, outcome or None) -> the problem's result. progress: as for the tune.
        facts_of: (plan, num_sms) -> :func:`~tileprobe.tune.static.launch_facts` of the plan's compiled candidates
            (``grid``/``args`` run contained), asked once per batch of candidates that landed.
        deadline: a ``time.perf_counter()`` value (s) the race ends by (a budgeted search's; ``settings.budget_s`` is
            then counted from the race's start to :data:`~tileprobe.tune.search.FINISH_S` before it, at least
            :data:`~tileprobe.tune.race.MIN_RACE_S`); None: ``settings`` as given.
    """

    def __init__(self, plan: Plan, landing: Landing, wait_gpu: Callable[[], dict], num_sms: int | None,
                 no_sm_note: str, bench_kw: dict, settings, fallback_get: Callable, make_result: Callable,
                 progress: Callable | None = None, facts_of: Callable | None = None, deadline: float | None = None):
        self.deadline = deadline
        self.race: Race | None = None
        self.plan, self.landing, self.wait_gpu, self.given_sms = plan, landing, wait_gpu, num_sms
        self.no_sm_note, self.bench_kw, self.settings = no_sm_note, bench_kw, settings
        self.fallback_get, self.make_result, self.progress = fallback_get, make_result, progress
        self.facts_of = facts_of
        self.intakes: list[Intake] = []
        self.feed: queue.Queue = queue.Queue()
        self.cubins: dict[str, bytes] = {}
        self.gpu: dict = {}
        self.num_sms: int | None = None
        self.error: BaseException | None = None
        self.aborted: str | None = None
        self.result = None
        self.bench: WorkerBench | None = None
        self.ended = False
        self.race_s = self.check_s = 0.0
        self.race_t0: float | None = None
        self.compile_t1: float | None = None
        self.done, self.held = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name="tileprobe-race-while-compiling", daemon=True)
        self.thread.start()

    # --- the compiling (main) thread's side ------------------------------------------------------------------
    def on_record(self, record, cubin: bytes | None) -> None:
        """A record landed (:func:`tileprobe.audit.audit`'s ``on_record``)."""
        self.feed.put((record, cubin))

    def compiled(self) -> None:
        """No more records will come."""
        self.compile_t1 = time.perf_counter()
        self.feed.put(None)

    def join(self) -> None:
        """Wait for the race of the first problem (after :meth:`compiled`); land what the thread left unread."""
        self.done.wait()
        while True:
            try:
                item = self.feed.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._keep(*item)
                self.landing.land(item[0])

    def release(self) -> None:
        """Let the race thread end (the tune is over)."""
        self.held.set()

    def leaders(self, k: int, eliminated: bool = False) -> list[str]:
        """The race's ``k`` fastest candidates so far (:meth:`~tileprobe.tune.race.Race.leaders`, the eliminated
        ones too with ``eliminated``; none before it starts)."""
        race = self.race
        return race.leaders(k, eliminated) if race is not None else []

    def get(self, sha: str) -> bytes | None:
        """A cubin by SHA-256: those that landed, else the store's."""
        data = self.cubins.get(sha)
        return data if data is not None else self.fallback_get(sha)

    @property
    def overlap_s(self) -> float:
        """Seconds the race ran before the last compile landed (0 when it started after)."""
        if self.race_t0 is None or self.compile_t1 is None:
            return 0.0
        return max(0.0, self.compile_t1 - self.race_t0)

    # --- the race thread -------------------------------------------------------------------------------------
    def _keep(self, record, cubin) -> None:
        if cubin is not None and record.cubin_sha256:
            self.cubins[record.cubin_sha256] = cubin

    def _run(self) -> None:
        try:
            self.gpu = self.wait_gpu()
            self.num_sms = self.given_sms or GpuInfo.from_dict(self.gpu).num_sms
            if not self.num_sms:
                self.plan.notes.append(self.no_sm_note)
            self.bench = WorkerBench(candidates={}, cubin_get=self.get, **self.bench_kw)
            if self.progress:
                self.progress("race", self.plan)
            t0 = self.race_t0 = time.perf_counter()
            settings = self.settings if self.deadline is None else dataclasses.replace(
                self.settings, budget_s=max(MIN_RACE_S, self.deadline - t0 - FINISH_S))
            try:
                self.race = Race([], self.bench.measure, self.bench.check, settings, progress=self.progress,
                                 arrivals=self._arrivals, final=self.bench.final)
                outcome = self.race.run()
                self.check_s = outcome.check_s
            except WorkerStartError as e:
                self.aborted, outcome = f"no GPU worker could be started: {e}", None
            self.race_s = time.perf_counter() - t0
            self.result = self.make_result(self.plan, outcome)
        except BaseException as e:
            self.error = e
        finally:
            self.done.set()
        self.held.wait()

    def _arrivals(self, block: bool) -> tuple[list[str], bool]:
        """The race's ``arrivals``: the first problem's new candidates to time, and whether more may come. A blocking
        call waits at most until the race's budget line (:meth:`~tileprobe.tune.race.Race.time_left_s`: a budgeted
        race keeps a share for its steady-state final, which compiles landing until the search's deadline must not
        eat)."""
        new: list[str] = []
        while not self.ended and not new:
            landed: list[Candidate] = []
            waited_out = False
            while not self.ended:
                wait = block and not landed
                left = self.race.time_left_s() if wait and self.race is not None else None
                try:
                    item = self.feed.get(block=wait, timeout=None if left is None else max(0.0, left))
                except queue.Empty:
                    waited_out = wait
                    break
                if item is None:
                    self.ended = True
                    break
                self._keep(*item)
                hit = self.landing.land(item[0])
                if hit is not None and hit[0] is self.plan:
                    landed.append(hit[1])
            t0 = time.perf_counter()
            new += self._timed(landed)
            if landed:
                self.intakes.append(Intake(len(landed), time.perf_counter() - t0))
            if landed and self.race is not None:     # the intake's cost, held back from the race's line
                self.race.note_intake(self.intakes[-1].seconds)
            if not block or waited_out:
                break
        return new, not self.ended

    def _timed(self, landed: list[Candidate]) -> list[str]:
        """Dedupe the candidates that landed (their grid and args asked once for the batch); the ids to time."""
        ok = [c for c in landed if c.status == "ok"]
        facts = self.facts_of(Plan(self.plan.problem, ok), self.num_sms) if ok and self.num_sms and self.facts_of \
            else {}
        bench = self._bench()
        out = []
        for c in landed:
            timed = dedupe_one(self.plan, c, self.num_sms, self.get, facts.get(id(c))) if self.num_sms \
                else c.status == "ok"
            if timed:
                bench.candidates[c.id] = c
                out.append(c.id)
        self._default()
        return out

    def _default(self) -> None:
        """The problem's default configuration for checks without a reference, once it has landed compiled."""
        bench = self._bench()
        if bench.default is not None:
            return
        d = self.plan.find(self.plan.problem.default)
        if d is not None and d.status == "ok" and (d.same_as is not None or d.id in bench.candidates):
            bench.default = d.same_as or d

    def _bench(self) -> WorkerBench:
        """The race's bench; the race (hence its ``arrivals``) starts only once :meth:`_run` has made it. Raises
        RuntimeError when asked before."""
        if self.bench is None:
            raise RuntimeError("the race asked for arrivals before its bench was made")
        return self.bench


def budget_share(settings, n_problems: int):
    """The first race's settings: an equal share of the budget, at least :data:`~tileprobe.tune.race.MIN_RACE_S` (None: no limit)."""
    if settings.budget_s is None:
        return settings
    return dataclasses.replace(settings, budget_s=max(MIN_RACE_S, settings.budget_s / max(1, n_problems)))

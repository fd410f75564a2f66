"""The race's ``measure`` and ``check`` on a real GPU: tasks for the watchdog'd run worker.

:class:`WorkerBench` turns a candidate id into a task for :mod:`tileprobe.run.batch` (the audited cubin, its
record, the probe file on this machine, the timing mode) and the task's outcome into a
:class:`~tileprobe.tune.race.Batch` / :class:`~tileprobe.tune.race.CheckOutcome`. A hang or a dead worker becomes
that candidate's status; the watchdog starts a fresh worker for the next task, so the race goes on.
torch is never imported here (the worker does that).
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from tileprobe.errors import TileprobeError
from tileprobe.records import Key, KeyedRecord
from tileprobe.run import timing as run_timing
from tileprobe.run.session import _TASK_FIELDS, probe_not_given, resolve_probe_path
from tileprobe.tune.race import FAILED, Batch, CheckOutcome
from tileprobe.tune.race_state import CheckDetail
from tileprobe.tune.static import Candidate

TIME_TASK = "tileprobe.run.batch:time_batch"
#: A sustained batch that starts within ``HOT_GAP_S`` of the last batch's end (the GPU busy with this race's
#: launches until then) warms up for ``HOT_WARMUP_MS`` of the kernel's time instead of the full warm-up: the heat-up
#: is the race's, paid once by its first batch, not by each candidate (the 25 ms per batch were a third of a
#: 40-candidate matmul round on the H100, docs/LOG.md §42).
HOT_GAP_S, HOT_WARMUP_MS = 0.2, 5.0
#: A candidate's first sustained race batch takes about ``FIRST_LOOK_MS`` of samples instead of ``batch_ms`` (25): the
#: first look only has to tell the far-behind and the clearly slower (elimination needs 10 samples: a kernel under
#: 1 ms still gets them; one over 2 ms gets the 5 of any batch, as a 5-ms kernel did before). On the H100 a
#: 40-candidate round of 0.2-ms matmuls took 2.4-2.6 s, 39 of them out after their one batch of 100 samples, about
#: 21 ms of kernel time and 10 ms of L2 flushes each (docs/LOG.md §42). Candidates it leaves close get full batches
#: in the next rounds; the steady-state final re-times every one within 12 % of the leader, eliminated or not.
#: On the H100 (docs/LOG.md §61) that matmul's whole warm race, final included, then took 2.89–3.86 s.
FIRST_LOOK_MS = 10.0
CHECK_TASK = "tileprobe.run.batch:check_candidate"
#: The check task of ``tileprobe tune --bit-exact``: a candidate whose output differs in any bit from the default
#: configuration's is ``wrong`` (dropped from the race).
BIT_EXACT_CHECK_TASK = "tileprobe.run.batch:check_candidate_bit_exact"


@dataclass
class TimingSettings:
    """The timing mode of a tune, the same for every candidate (docs/TUNE.md "Timing modes").

    mode: ``sustained`` (default: the required figure is do_bench's median, and do_bench times back to back) or
    ``burst`` (cuda.tile.tune's way) or ``eager`` (host-inclusive: launch and wait, as a program does) or ``graph``
    (CUDA-graph replay, as serving stacks run kernels: µs per launch of ``graph_launches`` in one graph). sustained:
    ``warmup_ms`` of warm-up per batch, then about ``batch_ms`` of samples (``min_n`` … ``max_n``). burst:
    ``burst_warmup`` launches, then ``burst_n`` samples each synchronized. eager: ``eager_warmup`` launches, then
    ``eager_n`` host-timed samples. graph: ``graph_warmup`` untimed replays, then ``graph_n`` timed ones.
    ``final_*``: the batches of the sustained mode's steady-state final (:mod:`tileprobe.tune.race`, module doc 7;
    :data:`tileprobe.run.timing.FINAL_WARMUP_MS`): ``final_warmup_ms`` of warm-up, then about ``final_batch_ms`` of
    samples (at most ``final_max_n``).

    Raises:
        ValueError: an unknown mode.
    """
    mode: str = "sustained"
    warmup_ms: float = run_timing.DEFAULT_WARMUP_MS
    batch_ms: float = run_timing.BATCH_MS
    min_n: int = run_timing.MIN_BATCH
    max_n: int = run_timing.MAX_BATCH
    burst_n: int = run_timing.BURST_BATCH
    burst_warmup: int = run_timing.BURST_WARMUP
    eager_n: int = run_timing.EAGER_BATCH
    eager_warmup: int = run_timing.EAGER_WARMUP
    graph_n: int = run_timing.GRAPH_BATCH
    graph_warmup: int = run_timing.GRAPH_WARMUP
    graph_launches: int = run_timing.GRAPH_LAUNCHES
    final_warmup_ms: float = run_timing.FINAL_WARMUP_MS
    final_batch_ms: float = run_timing.FINAL_BATCH_MS
    final_max_n: int = run_timing.FINAL_MAX_N

    def __post_init__(self):
        if self.mode not in run_timing.TIMING_MODES:
            raise ValueError(f"timing mode {self.mode!r}: use one of {', '.join(run_timing.TIMING_MODES)}")

    def task_kwargs(self) -> dict:
        """The keyword arguments of :func:`tileprobe.run.batch.time_batch` for this mode."""
        if self.mode == "burst":
            return {"mode": "burst", "n": self.burst_n, "warmup": self.burst_warmup}
        if self.mode == "eager":
            return {"mode": "eager", "n": self.eager_n, "warmup": self.eager_warmup}
        if self.mode == "graph":
            return {"mode": "graph", "n": self.graph_n, "warmup": self.graph_warmup, "launches": self.graph_launches,
                    "batch_ms": self.batch_ms}
        return {"mode": "sustained", "warmup_ms": self.warmup_ms, "batch_ms": self.batch_ms, "min_n": self.min_n,
                "max_n": self.max_n}

    def final_kwargs(self) -> dict:
        """The keyword arguments of :func:`tileprobe.run.batch.time_batch` for one batch of the steady-state final
        (a sustained batch with the ``final_*`` settings)."""
        return {"mode": "sustained", "warmup_ms": self.final_warmup_ms, "batch_ms": self.final_batch_ms,
                "min_n": self.min_n, "max_n": self.final_max_n, "max_warmup": run_timing.FINAL_MAX_WARMUP}

    def to_dict(self) -> dict:
        """Every setting as a JSON-ready dict (stored with each tune); the ``graph_*`` ones only in that mode and the
        ``final_*`` ones only in ``sustained`` (the other modes' stored settings are as they were before)."""
        d = asdict(self)
        return {k: v for k, v in d.items() if not (k.startswith("graph_") and self.mode != "graph")
                and not (k.startswith("final_") and self.mode != "sustained")}


class TimeReply(KeyedRecord):
    """The time task's answer (:func:`tileprobe.run.batch.time_batch`), as the race reads it (µs, clock readings)."""
    __slots__ = ()
    status = Key[str | None]()
    samples_us = Key[list | None]()
    clocks_before = Key[dict | None]()
    clocks_after = Key[dict | None]()
    error = Key[str | None]()


class WorkerBench:
    """``measure`` and ``check`` for one problem's race, through ``watchdog``.

    Args:
        watchdog: a :class:`~tileprobe.run.watchdog.Watchdog` (its worker's init must be ``init_cuda``).
        candidates: id → :class:`~tileprobe.tune.static.Candidate` (the ones raced).
        cubin_get: SHA-256 → cubin bytes (audit, store or bundle).
        probe_paths, search_dirs: where the probe files are on this machine (as for ``tileprobe run``);
            trust_recorded: False for a bundle's records (probe code only from ``probe_paths``).
        timing: the timing mode; timeout_s: per task, before it is a hang; seed: the inputs' seed.
        default: the problem's default configuration (the timed candidate of its group), for checks without a
            reference; it is not used once it has failed in the race.
        tasks: (time task, check task) as ``"module:function"`` (tests plant fakes here).
    """

    def __init__(self, watchdog, candidates: Mapping[str, Candidate], cubin_get: Callable[[str], bytes | None], *,
                 probe_paths: Sequence[str] = (), search_dirs: Sequence[str] = (), timing: TimingSettings | None = None,
                 timeout_s: float = 60.0, seed: int = 0, default: Candidate | None = None,
                 tasks: tuple[str, str] = (TIME_TASK, CHECK_TASK), trust_recorded: bool = True):
        self.wd, self.candidates, self.get = watchdog, dict(candidates), cubin_get
        self.probe_paths, self.search_dirs = list(probe_paths), list(search_dirs)
        self.trust_recorded = trust_recorded
        self.timing = timing or TimingSettings()
        self.timeout_s, self.seed, self.default, self.tasks = timeout_s, seed, default, tasks
        self.failed: set[str] = set()
        self._payloads: dict[str, dict | str] = {}
        self._last_end: float | None = None     # perf_counter() at the end of the last batch (HOT_GAP_S)
        self._looked: set[str] = set()           # candidates that had their first race batch (FIRST_LOOK_MS)

    def payload(self, c: Candidate) -> dict | str:
        """The task fields of a candidate (record, cubin, probe path), or why there are none."""
        if c.id in self._payloads:
            return self._payloads[c.id]
        rec = c.record
        if rec is None:    # a candidate not compiled (yet): nothing to run
            self._payloads[c.id] = f"{c.id}: no compiled record"
            return self._payloads[c.id]
        try:
            cubin = self.get(rec.cubin_sha256) if rec.cubin_sha256 else None
        except TileprobeError as e:   # a bundle's cubin that is a link, a FIFO, oversized or badly named
            self._payloads[c.id] = str(e)
            return str(e)
        path = resolve_probe_path(rec.probe, self.probe_paths, self.search_dirs, trust_recorded=self.trust_recorded)
        out: dict | str
        if cubin is None:
            out = f"cubin {rec.cubin_sha256} not found (bundle or store incomplete?)"
        elif hashlib.sha256(cubin).hexdigest() != rec.cubin_sha256:
            out = f"cubin {rec.cubin_sha256}: its bytes hash to another SHA-256; the file changed after the audit"
        elif path is None:
            out = probe_not_given(rec.probe, self.trust_recorded)
        else:
            out = {"record": {k: getattr(rec, k) for k in _TASK_FIELDS}, "cubin": cubin, "probe_path": path}
        self._payloads[c.id] = out
        return out

    def measure(self, cid: str, rnd: int, mode_kw: dict | None = None) -> Batch:
        """One batch of candidate ``cid`` (the race's ``measure``), in the tune's timing mode or with ``mode_kw``;
        a sustained race batch right after another (:data:`HOT_GAP_S`) warms up for :data:`HOT_WARMUP_MS` only, and
        a candidate's first one takes :data:`FIRST_LOOK_MS` of samples at most."""
        task = self.payload(self.candidates[cid])
        if isinstance(task, str):
            self.failed.add(cid)
            return Batch("error", error=task)
        kw = mode_kw or self.timing.task_kwargs()
        hot = self._last_end is not None and time.perf_counter() - self._last_end < HOT_GAP_S
        if mode_kw is None and hot and self.timing.mode == "sustained":     # kw: the sustained task_kwargs
            kw = {**kw, "warmup_ms": min(self.timing.warmup_ms, HOT_WARMUP_MS)}
        if mode_kw is None and cid not in self._looked and self.timing.mode == "sustained":
            kw = {**kw, "batch_ms": min(self.timing.batch_ms, FIRST_LOOK_MS)}
        if mode_kw is None:
            self._looked.add(cid)
        out = self.wd.submit(self.tasks[0], {**task, "seed": self.seed, **kw}, timeout_s=self.timeout_s)
        self._last_end = time.perf_counter()
        batch = self._batch(out)
        if batch.status != "ok":
            self.failed.add(cid)
        return batch

    def measure_final(self, cid: str, pass_: int) -> Batch:
        """One batch of candidate ``cid`` in the steady-state final (the race's ``final``: :meth:`final_kwargs`)."""
        return self.measure(cid, pass_, self.timing.final_kwargs())

    @property
    def final(self) -> Callable[[str, int], Batch] | None:
        """The race's ``final`` measure in the ``sustained`` mode; None in the others, which time another regime on
        purpose (burst: cuda.tile.tune's idle gaps; eager, graph: a program's launches)."""
        return self.measure_final if self.timing.mode == "sustained" else None

    @staticmethod
    def _batch(out) -> Batch:
        if out.status != "done":
            status = out.status if out.status in ("hang", "crash") else "error"
            return Batch(status, error=out.error, wall_s=out.wall_s)
        v = out.value
        info = {k: v[k] for k in ("grid", "warmup_launches", "n", "driver_ctas_per_sm", "cuda_error") if k in v}
        reply = TimeReply.from_dict(v)
        return Batch(reply.status or "error", list(reply.samples_us or []), reply.clocks_before, reply.clocks_after,
                     error=reply.error or "", wall_s=out.wall_s, info=info)

    def check(self, cid: str) -> CheckOutcome:
        """Check candidate ``cid``'s output (the race's ``check``)."""
        task = self.payload(self.candidates[cid])
        if isinstance(task, str):
            return CheckOutcome("error", {"message": task})
        kw = {**task, "seed": self.seed}
        d = self.default
        dp = self.payload(d) if d is not None and d.id not in self.failed and d.id != cid else None
        if isinstance(dp, dict):     # the task message's fields (payload): the default's record and cubin
            kw.update(default=dp["record"], default_cubin=dp["cubin"])
        out = self.wd.submit(self.tasks[1], kw, timeout_s=self.timeout_s)
        if out.status != "done":
            return CheckOutcome(out.status if out.status in ("hang", "crash") else "error", {"message": out.error})
        status = CheckDetail.from_dict(out.value).status or "error"
        v = CheckDetail.from_dict({k: x for k, x in out.value.items() if k != "status"})   # the check's detail
        if d is not None and d.id == cid and v.against is None and status == "unchecked":
            default = self.candidates[cid].problem.default      # d is the timed one of the default's group
            who = ("this is the default configuration" if default is None or default == self.candidates[cid].config
                   else f"this builds the same launch as the default configuration ({default.label})")
            v.message = f"{who}: without reference= there is nothing to compare with"
        return CheckOutcome(status if status in (*FAILED, "ok", "unchecked") else "error", v.to_dict())

"""The order in which an audit hands its compiles to the pool, and when it stops handing them (issue 22: a budgeted
tune's round compiles as many of its configurations as its time allows, most wanted first).

The compile pool reads its variants as workers free up (:func:`tileprobe.compile.pool.compile_variants`), so a
stream that ends early stops new compiles and lets those already running finish: the compile jobs stay busy up to
the cut-off, instead of waiting at the end of each wave for its slowest compile (a wave of 16 TileGym matmul
configurations: 11-15 s on the H200 host, most of it spent waiting for one or two slow compiles, while the 486
compiles of the whole space averaged 2.3 s each on its 16 cores, ``benchmarks/bench_budget.py``, 2026-12-02).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from tileprobe.compile.job import Variant


@dataclass(frozen=True)
class CompileSchedule:
    """Which compiles an audit starts, in what order.

    rank: variant -> its place (lower first; ties keep the audit's order). stop_at: a ``clock()`` value (s) after
    which no compile is started (None: no cut-off). at_least: this many are started whatever the clock says (a
    round's first wave). limit: no variant of rank ``limit`` or more is compiled (the audit was given more so that
    the store's records of them land, at no cost; None: no limit). clock: seconds, monotonic
    (``time.perf_counter``, as the tune's deadline; tests inject one). room: (compiles started, ``clock()``) ->
    whether one more may start, asked after the first ``at_least`` as each starts (the pool asks for the next
    variant when a worker frees up); None: only ``stop_at`` decides.
    """
    rank: Callable[[Variant], int]
    stop_at: float | None = None
    at_least: int = 0
    clock: Callable[[], float] = time.perf_counter
    limit: int | None = None
    room: Callable[[int, float], bool] | None = None

    def apply(self, variants: Iterable[Variant]) -> Iterator[Variant]:
        """``variants`` (read whole: they are the ones the store did not hold) by rank, ending at the cut-off."""
        ranked = sorted(((self.rank(v), v) for v in variants), key=lambda rv: rv[0])   # stable: ties keep order
        for i, (rank, v) in enumerate(ranked):
            if self.limit is not None and rank >= self.limit:
                return
            if i >= self.at_least and self.stop_at is not None and self.clock() >= self.stop_at:
                return
            if i >= self.at_least and self.room is not None and not self.room(i, self.clock()):
                return
            yield v

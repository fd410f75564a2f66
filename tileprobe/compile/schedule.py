"""The order in which an audit hands its compiles to the pool, and when it stops handing them (a budgeted
tune compiles what its search chooses, as long as its time allows).

The compile pool reads its variants as workers free up (:func:`tileprobe.compile.pool.compile_variants`), so the
next variant can be chosen at that moment, from what is known then (the race's leaders), and a stream that ends
early stops new compiles and lets those already running finish: the compile jobs stay busy up to the cut-off,
instead of waiting at the end of each wave for its slowest compile (a wave of 16 TileGym matmul configurations:
11-15 s on the H200 host, most of it spent waiting for one or two slow compiles, while the 486 compiles of the whole
space averaged 2.3 s each on its 16 cores, ``benchmarks/tune/bench_budget.py``, 2026-12-02).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tileprobe.compile.job import Variant


@dataclass(frozen=True)
class ChosenSchedule:
    """Compiles chosen one at a time, as the pool asks for the next (a budgeted tune's continuous search,
    :class:`~tileprobe.tune.search.SearchOrder`: what to compile next depends on the race's leaders at that moment).

    choose: (``clock()`` s) -> the key of the next variant to compile, or None: start no more. key: variant -> its
    key. A chosen key that is not among the variants (the store holds it, or the audit does not compile it) starts
    nothing, and the next is asked for at once. clock: seconds, monotonic (``time.perf_counter``, as the tune's
    deadline; tests inject one). cut_at: a ``clock()`` value at which the compiles still running are killed and give
    no record, but the first ``spare`` started while no compile has landed ``ok``
    (:meth:`~tileprobe.compile.pool.WorkerPool.run`); None: they all finish.
    """
    choose: Callable[[float], object]
    key: Callable[[Variant], object]
    clock: Callable[[], float] = time.perf_counter
    cut_at: float | None = None
    spare: int = 0

    def cut_monotonic(self) -> float | None:
        """:attr:`cut_at` on ``time.monotonic()``'s clock (the compile pool's), or None."""
        return None if self.cut_at is None else time.monotonic() + (self.cut_at - self.clock())

    def apply(self, variants: Iterable[Variant]) -> Iterator[Variant]:
        """``variants`` (read whole) in the order ``choose`` asks for them, until it says None or none is left."""
        left: dict = {}
        for v in variants:
            left.setdefault(self.key(v), []).append(v)
        while left:
            k = self.choose(self.clock())
            if k is None:
                return
            yield from left.pop(k, ())

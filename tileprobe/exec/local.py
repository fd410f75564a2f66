"""The default executor: this machine's compile pool (:mod:`tileprobe.compile.pool`) and one watchdog'd worker per
listed GPU (:class:`tileprobe.run.watchdog.Watchdog`, ``CUDA_VISIBLE_DEVICES`` set per worker)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from tileprobe.compile.job import CompileResult, Variant
from tileprobe.compile.pool import compile_variants
from tileprobe.run.watchdog import INIT_CUDA, Watchdog


class LocalExecutor:
    """Compiles in :func:`~tileprobe.compile.pool.compile_variants`; GPU work in local watchdog'd workers."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = jobs

    def compile(self, variants: Iterable[Variant], **kw) -> Iterator[CompileResult]:
        """:func:`~tileprobe.compile.pool.compile_variants` (``jobs`` defaults to this executor's)."""
        if kw.get("jobs") is None:
            kw["jobs"] = self.jobs
        return compile_variants(variants, **kw)

    def gpu_slots(self, gpus: Sequence[int], *, timeout_s: float, init: str = INIT_CUDA) -> list[Watchdog]:
        """One :class:`Watchdog` per entry of ``gpus`` (device indexes; a repeated index shares that GPU)."""
        return [Watchdog(timeout_s=timeout_s, init=init, env={"CUDA_VISIBLE_DEVICES": str(g)}) for g in gpus]

    def close(self) -> None:
        """Nothing to stop: pools and workers end with each call."""

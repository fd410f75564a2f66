"""Where work runs: the executor interface, the local process pool (default) and Ray.

An executor has

* ``compile(variants, *, tileiras, lib_dirs, jobs, timeout_s, with_sass, tmp_root)``: compile an iterable of
  :class:`~tileprobe.compile.job.Variant` (read lazily, as slots free up: store claims are taken at dispatch,
  :mod:`tileprobe.compile.claims`) and yield :class:`~tileprobe.compile.job.CompileResult` s as they finish; a
  variant past its deadline (:func:`~tileprobe.compile.pool.variant_limit_s`) is a ``timeout`` and the sweep goes on;
* ``gpu_slots(gpus, *, timeout_s, init)``: one GPU worker per listed GPU, each with the
  :class:`~tileprobe.run.watchdog.Watchdog` interface (``start() -> info``, ``submit(fn, kwargs, timeout_s)``,
  ``close()``, ``restarts``), for :func:`tileprobe.run.multi.run_on_gpus`;
* ``close()``.

Executors return data; only the calling process (the driver) writes the store. Pick one with :func:`make_executor`
(``--executor local|ray [--address ADDR]``).
"""
from __future__ import annotations

from tileprobe.errors import UsageError

EXECUTORS = ("local", "ray")


def make_executor(name: str = "local", *, address: str | None = None, jobs: int | None = None):
    """The executor called ``name`` (:data:`EXECUTORS`).

    Args:
        address: Ray only: the cluster to join (``ray start --head`` prints it; ``auto``: the one on this machine);
            default: a Ray instance started here for this process.
        jobs: most compiles in flight (default: the pool's default, or the Ray cluster's CPUs).

    Raises:
        UsageError: an unknown name, ``address`` without Ray, or Ray not installed
            (``pip install "tileprobe[ray]"``).
    """
    if name == "local":
        if address:
            raise UsageError("--address is for --executor ray (the Ray cluster to join)")
        from tileprobe.exec.local import LocalExecutor
        return LocalExecutor(jobs=jobs)
    if name == "ray":
        from tileprobe.exec.ray_exec import RayExecutor
        return RayExecutor(address=address, jobs=jobs)
    raise UsageError(f"--executor {name}: use one of {', '.join(EXECUTORS)}")

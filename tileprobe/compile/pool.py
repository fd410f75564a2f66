"""The compile worker pool: variants streamed to spawned workers, each with a deadline; a dead or stuck worker
is replaced.

* **Streamed.** Variants come from an iterator and at most ``jobs`` are in flight: a grid is never one queue of
  futures in memory (a 10^6-variant grid took 3 GB in ``concurrent.futures``).
* **A deadline per variant.** Probe code, cuTile's front end, tileiras and nvdisasm together get the variant's
  compiler timeout plus :data:`~tileprobe.probe.contained.PROBE_TIMEOUT_S`,
  :data:`~tileprobe.model.sass.NVDISASM_TIMEOUT_S` and :data:`SLACK_S`; past it the worker and every process it
  started are killed, the variant is a ``timeout`` and a fresh worker takes the next one.
* **The width is kept.** A worker that dies (a crash in cuTile's extension) fails only the variant it held
  (``compiler_crash``, with the signal), and the next variant starts a new worker: a sweep never turns serial.
* **No orphans.** Workers run in their own session with a parent-death signal (:mod:`tileprobe.procs`);
  Ctrl-C, a SIGTERM/SIGHUP turned into an exception, or a consumer that stops early kill every worker and its
  compilers at once. The worker also sees end-of-file on its pipe when the parent is gone.
"""
from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, cast

from tileprobe.compile.job import DEFAULT_TIMEOUT_S, CompileResult, Variant
from tileprobe.errors import ToolchainError
from tileprobe.procs import default_jobs

if TYPE_CHECKING:
    from tileprobe.probe.zygote_client import ZygoteProcess

# Imports inside functions here are lazy on purpose: at the module head they would add 0.15 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Seconds allowed beyond a variant's own timeouts (worker bookkeeping, reading the cubin, a loaded machine).
SLACK_S = 30.0


def worker_main(conn, initargs: tuple, parent_pid: int) -> None:
    """A compile worker: set up (:func:`tileprobe.compile.job._init_worker`), say ("ready", info) or
    ("init_error", text), then answer each variant received with ("result", CompileResult) until None or
    end-of-file (the parent is gone)."""
    from tileprobe.compile.job import _init_worker, compile_one, result_data
    from tileprobe.probe import wire
    from tileprobe.procs import die_with_parent
    tempfile.tempdir = initargs[3]                 # before cuTile's import makes its own temp folder (kept on a kill)
    from tileprobe.probe.zygote import under_nanny
    parent_pid = under_nanny(parent_pid)           # probe code that signals its parent reaches a nanny of its own
    from tileprobe.compile import failure
    failure.PHASE_PID = parent_pid                 # the pool knows this worker by its nanny's pid
    die_with_parent(signal.SIGKILL, parent_pid)    # not SIGTERM: probe code could ignore it; the compilers
    os.setsid()                                    # die with us (their own parent-death signal), the parent's guard
    #                                                ends what probe code started (procs.guard); terminal signals are
    #                                                the parent's, it stops us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)     # what probe code prints does not reach the terminal
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        info = _init_worker(*initargs)
    except BaseException as e:
        wire.send(conn, ("init_error", str(e) or type(e).__name__))
        return
    wire.send(conn, ("ready", info))
    try:
        while True:   # the parent sends variants (its own objects); we send back data only (tileprobe.probe.wire)
            try:
                variant = conn.recv()
            except (EOFError, OSError):
                return
            if variant is None:
                return
            wire.send(conn, ("result", result_data(compile_one(variant))), "the compile result")
    finally:   # what probe code started (a Popen at import) and left running ends with the worker
        from tileprobe.procs import kill_tree
        kill_tree(os.getpid(), include_self=False)


def variant_limit_s(v: Variant, timeout_s: float, fresh: bool = True) -> float:
    """Seconds one compile of ``v`` may take in a worker before it is stopped: probe code
    (:data:`~tileprobe.probe.contained.PROBE_TIMEOUT_S`), the compiler (``v.timeout_s`` or ``timeout_s``), nvdisasm
    and :data:`SLACK_S`; a ``fresh`` worker also starts and asks tileiras its version and targets. The same deadline
    bounds a Ray compile task (:mod:`tileprobe.exec.ray_exec`) and a store claim's lease."""
    from tileprobe.model.sass import NVDISASM_TIMEOUT_S
    from tileprobe.model.toolkit import tool_timeout_s
    from tileprobe.probe.contained import PROBE_TIMEOUT_S
    limit = PROBE_TIMEOUT_S + (v.timeout_s or timeout_s) + NVDISASM_TIMEOUT_S + SLACK_S
    return limit + (2 * tool_timeout_s() if fresh else 0.0)


@dataclass(eq=False)
class _Worker:
    process: mp.process.BaseProcess | ZygoteProcess     # spawned, or forked from the warm zygote
    conn: Connection
    variant: Variant | None = None
    deadline: float = 0.0
    limit_s: float = 0.0
    ready: bool = False
    seq: int = 0             # its variant's place among those the pool started (0 first)

    def held(self) -> Variant:
        """The variant a busy worker compiles (read only while it is busy)."""
        assert self.variant is not None   # given with the worker (WorkerPool._give); None only once it is idle
        return self.variant


class WorkerPool:
    """``jobs`` compile workers for one tileiras (``initargs`` of :func:`~tileprobe.compile.job._init_worker`)."""

    def __init__(self, jobs: int, initargs: tuple, timeout_s: float):
        self.jobs, self.initargs, self.timeout_s = max(1, jobs), initargs, timeout_s
        self.given = 0                   # variants handed to workers
        self.ctx = mp.get_context("spawn")
        self.started = 0          # workers started (a benchmark and the tests read it)

    def _start(self) -> _Worker:
        from tileprobe.probe.zygote import start_worker
        from tileprobe.procs import arm_guard
        arm_guard()      # before the worker's environment is taken: it and its compilers carry the guard's mark
        parent_end, child_end = self.ctx.Pipe()
        p: mp.process.BaseProcess | ZygoteProcess | None = start_worker(child_end, self.initargs)
        if p is None:                                  # forked from the warm zygote, else spawned
            p = self.ctx.Process(target=worker_main, args=(child_end, self.initargs, os.getpid()), daemon=True)
            with _no_main_reimport():
                p.start()
        from tileprobe.procs import guard
        assert p.pid is not None   # started: forked by the zygote, or spawned just above
        guard(p.pid)
        child_end.close()
        self.started += 1
        return _Worker(p, parent_end)

    def limit_s(self, v: Variant, fresh: bool) -> float:
        """Seconds a worker may take on ``v`` before it is stopped (a fresh worker also starts and probes tileiras)."""
        return variant_limit_s(v, self.timeout_s, fresh)

    def _give(self, w: _Worker, v: Variant) -> None:
        w.variant, w.limit_s, w.seq = v, self.limit_s(v, not w.ready), self.given
        self.given += 1
        w.deadline = time.monotonic() + w.limit_s
        w.conn.send(v)

    def run(self, variants: Iterable[Variant], cut_at: float | None = None,
            spare: int = 0) -> Iterator[CompileResult]:
        """Compile ``variants`` (any iterable: read as workers free up); yield results as they finish. At ``cut_at``
        (a ``time.monotonic()`` value; None: never) no more start, and the compiles still running are killed and
        yield nothing (a budgeted tune's end: their time is not there), except the first ``spare`` started (a
        budgeted tune's first wave, compiled whatever the clock says) while no compile has yielded an ``ok``
        result: with nothing compiled there is nothing to race, and once something is, the budget comes first.

        Raises:
            ToolchainError: the workers cannot start with this tileiras (their set-up failed, or they die before it
                ends); results yielded before stay valid.
        """
        it = iter(variants)
        busy: dict[Connection, _Worker] = {}
        idle: list[_Worker] = []
        done = False

        landed_ok = False

        def spared() -> int:   # the first ones are spared only while nothing compiled
            return 0 if landed_ok else spare

        def limit(now: float) -> int | None:   # after the cut only the spared first ones may still be given out
            return None if cut_at is None or now < cut_at else spared()
        try:
            while True:
                self._fill(it, busy, idle, limit(time.monotonic()))
                if not busy:
                    break
                cut = cut_at if cut_at is not None and any(w.seq >= spared() for w in busy.values()) else math.inf
                soonest = min(min(w.deadline for w in busy.values()), cut)
                # wait answers some of the objects it was given: the busy workers' connections
                ready = cast("list[Connection]", wait(list(busy), timeout=max(0.0, soonest - time.monotonic())))
                results = [r for conn in ready for r in self._receive(busy.pop(conn), busy, idle)]
                landed_ok = landed_ok or any(r.status == "ok" for r in results)
                now = time.monotonic()
                for w in [w for w in busy.values() if now > w.deadline]:
                    del busy[w.conn]
                    results.append(self._stop_stuck(w))
                if cut_at is not None and now >= cut_at:
                    for w in [w for w in busy.values() if w.seq >= spared()]:
                        del busy[w.conn]
                        self._cut(w)
                try:            # keep the width while the caller reads the results
                    self._fill(it, busy, idle, limit(now))
                except Exception:   # the variants' iterator failed (a tune's chooser): what landed is still theirs
                    yield from results
                    raise
                yield from results
            done = True
        finally:
            self._close(idle, list(busy.values()), graceful=done)

    def _fill(self, it, busy: dict, idle: list, limit: int | None = None) -> None:
        """Give workers variants until ``jobs`` are busy (and, with ``limit``, no more than that many were given)."""
        while len(busy) < self.jobs and (limit is None or self.given < limit):
            v = next(it, None)
            if v is None:
                return
            w = idle.pop() if idle else self._start()
            self._give(w, v)
            busy[w.conn] = w

    def _receive(self, w: _Worker, busy: dict, idle: list) -> list[CompileResult]:
        from tileprobe.compile.job import result_from_data
        from tileprobe.probe import wire
        try:
            kind, payload = wire.recv(w.conn)      # data only: nothing a worker (probe code ran there) sends is unpickled
            if kind == "result":
                payload = result_from_data(payload, w.held())
            elif kind not in ("init_error", "ready") or (kind == "init_error" and type(payload) is not str):
                raise wire.WireError(f"an unexpected message {kind!r}")
        except (EOFError, OSError):
            return [self._dead(w)]
        except (wire.WireError, ValueError, TypeError) as e:
            return [self._garbled(w, str(e))]
        if kind == "init_error":
            self._kill(w)
            raise ToolchainError(f"the compile workers cannot start: {payload}")
        if kind == "ready":
            w.ready = True
            w.limit_s = self.limit_s(w.held(), False)
            busy[w.conn] = w                     # still compiling its variant
            return []
        w.variant = None
        idle.append(w)
        return [payload]

    def _dead(self, w: _Worker) -> CompileResult:
        from tileprobe.schema import exit_text
        w.process.join(timeout=10)          # its pipe closed: it is ending; under load reaping can lag
        status = exit_text(w.process.exitcode)
        self._kill(w)
        if not w.ready:
            raise ToolchainError(f"a compile worker died while starting ({status}): cuTile or tileiras cannot load "
                                 "here; run `tileprobe doctor`")
        # what it was doing (its phase file): probe code, or the compile
        from tileprobe.compile.failure import dead_worker
        failure = dead_worker(w.held(), self.initargs[3], w.process.pid, status)
        return CompileResult(w.held(), "compiler_crash").fail(failure)

    def _garbled(self, w: _Worker, why: str) -> CompileResult:
        """A worker sent something that is not a worker's message (probe code in it may have replaced tileprobe's
        own functions): it is killed and its variant is a ``probe_error``, not the compiler's failure."""
        self._kill(w)
        if not w.ready:
            raise ToolchainError(f"a compile worker sent a message that is not one while starting ({why})")
        text = (f"the compile worker sent back something that is not a compile result ({why}); probe code in it may "
                "have changed tileprobe's own code; the worker was stopped and a new one takes the next variant")
        return CompileResult(w.held(), "probe_error", error=text, failure="probe_error", message=text,
                             fix=f"check what {w.held().probe_path} does at import and in args()")

    def _stop_stuck(self, w: _Worker) -> CompileResult:
        self._kill(w)
        return CompileResult(w.held(), "timeout",
                             error=f"no result within {w.limit_s:.0f} s (probe code, cuTile's front end, tileiras and "
                                   "nvdisasm together); the worker and its compiler processes were stopped "
                                   "(raise the limit: --timeout S or Probe(timeout_s=S))")

    def _cut(self, w: _Worker) -> None:
        """Kill a worker whose compile the cut ends: stopped first (SIGSTOP), so that it cannot see its tileiras
        die before it and keep that compile's files as a failure's (session 8's hostile test found one such folder
        in ``<store>/failed/`` in about 10 cuts), then its whole tree killed."""
        if w.process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(w.process.pid, signal.SIGSTOP)
        self._kill(w)

    @staticmethod
    def _kill(w: _Worker) -> None:
        from tileprobe.procs import kill_tree, unguard
        if w.process.pid is not None:
            kill_tree(w.process.pid, group=True)   # and what probe code started in its session, ended or not
        w.process.join(timeout=5)
        if w.process.exitcode is not None and w.process.pid is not None:
            unguard(w.process.pid)
        with contextlib.suppress(OSError):
            w.conn.close()

    def _close(self, idle: list, busy: list, graceful: bool) -> None:
        """End every worker: idle ones are told to stop when all went well; anything still alive is killed."""
        if graceful:
            for w in idle:
                with contextlib.suppress(OSError, ValueError):
                    w.conn.send(None)
            for w in idle:
                w.process.join(timeout=5)
        for w in idle + busy:
            self._kill(w)


def compile_variants(variants: Iterable[Variant], *, tileiras: str | None = None,
                     lib_dirs: list[str] | None = None, jobs: int | None = None,
                     timeout_s: float = DEFAULT_TIMEOUT_S, artifact_root: str | None = None,
                     with_sass: bool = False, tmp_root: str | None = None,
                     cut_at: float | None = None, cut_spare: int = 0) -> Iterator[CompileResult]:
    """Compile ``variants`` with one tileiras in a pool of spawned workers; yield results as they finish.

    Args:
        variants: any iterable (a generator is read as workers free up).
        tileiras: path of the tileiras binary (``None``: the one cuTile would pick).
        lib_dirs: library folders for that tileiras (libnvvm).
        jobs: parallel workers (default: :func:`~tileprobe.compile.job.default_jobs`).
        timeout_s: per-variant compiler timeout in seconds (a probe's ``timeout_s`` wins).
        artifact_root: where failed variants keep their bytecode (default:
            :func:`~tileprobe.compile.job.failed_artifacts_dir`).
        with_sass: also disassemble each cubin in the worker (nvdisasm) for :mod:`tileprobe.model.sass` traits.
        tmp_root: the folder the workers work in (default: a temp folder of this call, removed at the end).
        cut_at: a ``time.monotonic()`` value at which compiles still running are killed, yielding nothing, and no
            more start (:meth:`WorkerPool.run`); None: never. cut_spare: the first this many started are not cut.

    Raises:
        ToolchainError: the workers cannot start with this tileiras.
    """
    from tileprobe.compile.job import failed_artifacts_dir
    from tileprobe.procs import owned_tempdir
    artifact_root = artifact_root or failed_artifacts_dir()   # here: a worker's temp folder is the audit's own
    with contextlib.ExitStack() as stack:
        if tmp_root is None:
            tmp_root = stack.enter_context(owned_tempdir("compile"))
        pool = WorkerPool(jobs or default_jobs(), (tileiras, lib_dirs, timeout_s, tmp_root, with_sass,
                                                   artifact_root), timeout_s)
        yield from pool.run(variants, cut_at, cut_spare)


@contextlib.contextmanager
def _no_main_reimport():
    """Start spawned workers without re-running the caller's ``__main__``.

    multiprocessing's spawn re-imports the parent's main script in each worker; a script that calls
    ``tileprobe.audit.audit`` without an ``if __name__ == "__main__":`` guard (or code piped to ``python -``)
    would then run again in every worker and kill the pool. The workers need only tileprobe's modules, so the
    main module is hidden while they start.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main

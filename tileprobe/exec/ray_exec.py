"""The Ray executor (``pip install "tileprobe[ray]"``, ``--executor ray [--address ADDR]``).

* **Compiles are CPU tasks** (``num_cpus=1``) on any node. A Ray worker process sets itself up once per compiler
  (:func:`tileprobe.compile.job._init_worker`, as a pool worker does) and then compiles variant after variant.
  The driver's tileiras path is used where it exists; on another node the same release is found or installed by
  tileprobe's toolchain manager (:func:`tileprobe.toolchain.resolve_toolchain`).
* **Deadlines.** At most ``jobs`` tasks are in flight (default: the cluster's CPUs) and the variants are read
  lazily, so store claims are taken at dispatch. A task past its variant's deadline
  (:func:`~tileprobe.compile.pool.variant_limit_s`) is cancelled with ``ray.cancel(force=True)`` (its worker process
  is killed) and the variant is a ``timeout``; the sweep goes on.
* **Node loss.** A task whose node dies is retried by Ray on another node (``max_retries``, system failures only);
  what finished before was already yielded, and so stored by the driver.
* **GPU runs are one-GPU actors** (``num_gpus=1``) running :mod:`tileprobe.run.worker`'s task functions;
  :class:`RayGpuSlot` gives each the :class:`~tileprobe.run.watchdog.Watchdog` interface. A task past its timeout
  kills the actor (``ray.kill``); the next task starts a fresh one.

Compile tasks return data only (a :mod:`tileprobe.probe.wire` message of the result, never a pickle of it); GPU
tasks return run dicts; only the driver writes the store.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tileprobe.compile.job import DEFAULT_TIMEOUT_S, CompileResult, Variant
from tileprobe.compile.pool import variant_limit_s
from tileprobe.errors import UsageError
from tileprobe.run.watchdog import INIT_CUDA, TaskOutcome, WorkerStartError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.15 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Longest single ``ray.wait`` in seconds: Python runs a signal handler (SIGTERM: exit 143 with the kept line) only
#: between them, and Ray's wait does not return for a signal (SIGTERM under Ray was not heard).
WAIT_SLICE_S = 1.0
#: Times Ray re-runs a compile task whose worker or node died (not one cancelled past its deadline).
TASK_RETRIES = 2


@dataclass(frozen=True)
class CompileSpec:
    """What a Ray worker process compiles with, sent with each compile task (a worker sets itself up once per spec):
    the driver's tileiras path and its release (found or installed again on a node without that path), the
    compiler's library folders, the compile timeout in seconds, and whether SASS is read (True, or the gated
    summary only: :data:`tileprobe.model.sass.SASS_GATE`)."""
    tileiras: str | None
    version: str | None
    lib_dirs: tuple[str, ...] | None
    timeout_s: float
    with_sass: bool | str


@dataclass
class _NodeState:
    """In a Ray worker process: the spec its compiler was set up for, and its temp folder."""
    spec: CompileSpec | None = None
    root: str | None = None


_NODE = _NodeState()


def _ray():
    try:
        import ray
    except ImportError as e:
        raise UsageError('--executor ray needs Ray: pip install "tileprobe[ray]"') from e
    return ray


def node_tileiras(spec: CompileSpec) -> tuple[str | None, list[str] | None]:
    """The tileiras of ``spec`` on this node: the driver's path when it exists here, else the same release found
    or installed by :func:`tileprobe.toolchain.resolve_toolchain` (``spec.version``)."""
    path = spec.tileiras
    if not path or os.path.exists(path) or not spec.version:
        return path, list(spec.lib_dirs) if spec.lib_dirs else None
    from tileprobe.toolchain import resolve_toolchain
    tc = resolve_toolchain(spec.version, stream=None)
    return tc.tileiras, list(tc.lib_dirs)


def compile_task(variant: Variant, spec: CompileSpec) -> bytes:
    """One compile in a Ray worker process (set up for ``spec`` on its first task). Returns a
    :mod:`tileprobe.probe.wire` message, ``("result", data)`` or ``("error", text)``: data only, so the driver never
    unpickles what the probe's code made there (an exception of the probe's class included)."""
    from tileprobe.compile.job import _init_worker, compile_one, result_data
    from tileprobe.probe import wire
    try:
        if _NODE.spec != spec:
            tileiras, lib_dirs = node_tileiras(spec)
            root = _worker_tempdir()
            _init_worker(tileiras, lib_dirs, spec.timeout_s, root, spec.with_sass, None)
            _NODE.spec, _NODE.root = spec, root
        return wire.dumps(("result", result_data(compile_one(variant))), "the compile result")
    except BaseException as e:
        try:
            text = f"{type(e).__name__}: {e}"
        except Exception:
            text = type(e).__name__
        return wire.dumps(("error", text[-2000:]))


def _worker_tempdir() -> str:
    """A Ray worker's temp folder (``tileprobe-ray-*``), marked as this worker's (:func:`tileprobe.procs.
    make_owned_tempdir`): removed when the worker exits (``atexit``), by :meth:`RayExecutor.close` once Ray is shut
    down, and by any later tileprobe run on this node when the worker was killed (every Ray audit left two folders
    behind, 2026-12-04). One per worker process, kept across its tasks (the compiler set-up lives there)."""
    import atexit

    from tileprobe.procs import make_owned_tempdir, remove_owned_tempdir
    root = make_owned_tempdir("ray")
    atexit.register(remove_owned_tempdir, root)
    return root


def _ray_folders() -> set[str]:
    """The ``tileprobe-ray-*`` folders in this node's temp folder now."""
    import glob

    from tileprobe.procs import TEMP_PREFIX
    return set(glob.glob(os.path.join(tempfile.gettempdir(), f"{TEMP_PREFIX}ray-*")))


#: Seconds :meth:`RayExecutor.close` waits for the workers Ray's shutdown ended to be gone before it sweeps their
#: temp folders (a folder whose worker still runs is left to the next run's sweep).
SHUTDOWN_SWEEP_S = 5.0


def _sweep_after_shutdown(before: set[str]) -> None:
    """Remove the ``tileprobe-ray-*`` folders of this node's Ray workers that ended (:func:`tileprobe.procs.
    sweep_leftovers`), waiting up to :data:`SHUTDOWN_SWEEP_S` for those made since ``before`` (this executor's
    workers') to go; other runs' folders are left to their owners."""
    from tileprobe.procs import sweep_leftovers
    end = time.monotonic() + SHUTDOWN_SWEEP_S
    while True:
        sweep_leftovers()
        if not (_ray_folders() - before) or time.monotonic() > end:
            return
        time.sleep(0.2)


class RayExecutor:
    """Compiles as Ray tasks and GPU work as one-GPU Ray actors (module doc).

    Args:
        address: the cluster to join (``None``: start Ray here, or use the one this process already started).
        jobs: most compile tasks in flight (default: the cluster's CPUs).
        deadline_s: a fixed deadline per compile task, instead of :func:`~tileprobe.compile.pool.variant_limit_s`.

    Raises:
        UsageError: Ray is not installed.
    """

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None, deadline_s: float | None = None):
        ray = self.ray = _ray()
        self.owned = not ray.is_initialized()
        self._folders_before: set[str] = set()
        self._guarding = False
        if self.owned:
            check_address(address)
            from tileprobe.procs import arm_guard
            arm_guard()   # before Ray starts: its raylet, workers and agents carry the guard's mark and end with us
            self._folders_before = _ray_folders()
            # Ray's agents (ray::DashboardAgent, ray::RuntimeEnvAgent: the raylet's children) rewrite their command
            # line with setproctitle, which overwrites the environment /proc shows: the guard's mark is gone from
            # them, and a SIGKILLed audit left both alive 10-55 s (they poll for the raylet). The guard notes this
            # process's descendants from before Ray starts, with their start times, and ends those still running if
            # we die (also when Ray's start fails half-way).
            from tileprobe.procs import guard_below
            guard_below(os.getpid())
            self._guarding = True
            handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": _pythonpath()}})
            except Exception as e:   # Ray raises a bare Exception when its raylet does not register in time
                _start_failed(ray, e)
            for s, h in handlers.items():   # Ray puts its own SIGTERM handler (a stack dump, exit -6): tileprobe's
                if h is not None:            # stops the sweep as the local executor does (143, the kept line)
                    signal.signal(s, h)
        self.jobs = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.deadline_s = deadline_s
        self.cancelled = 0      # tasks cancelled past their deadline (the tests read it)
        self._task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(compile_task)

    def compile(self, variants: Iterable[Variant], *, tileiras: str | None = None, lib_dirs=None,
                jobs: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, with_sass: bool = False,
                tmp_root: str | None = None, **_) -> Iterator[CompileResult]:
        """Compile ``variants`` as Ray tasks; yield results as they finish (module doc)."""
        spec = CompileSpec(tileiras=tileiras, version=_version(tileiras), lib_dirs=tuple(lib_dirs or ()) or None,
                           timeout_s=timeout_s, with_sass=with_sass)
        width = jobs or self.jobs
        it = iter(variants)
        flight: dict = {}       # ref -> (variant, deadline)
        try:
            while True:
                while len(flight) < width and (v := next(it, None)) is not None:
                    limit = self.deadline_s or variant_limit_s(v, timeout_s)
                    flight[self._task.remote(v, spec)] = (v, time.monotonic() + limit, limit)
                if not flight:
                    return
                soonest = min(d for _, d, _ in flight.values())
                ready = _wait(self.ray, list(flight), min(WAIT_SLICE_S, max(0.0, soonest - time.monotonic())))
                for ref in ready:
                    yield self._result(ref, flight.pop(ref)[0])
                now = time.monotonic()
                for ref in [r for r, (_, d, _) in flight.items() if now > d]:
                    v, _, limit = flight.pop(ref)
                    self.ray.cancel(ref, force=True)
                    self.cancelled += 1
                    yield CompileResult(v, "timeout", error=f"no result within {limit:.0f} s: the Ray task was "
                                        "cancelled (its worker process killed)")
        finally:
            for ref in flight:
                self.ray.cancel(ref, force=True)

    def _result(self, ref, v: Variant) -> CompileResult:
        from tileprobe.compile.job import result_from_data
        from tileprobe.probe import wire
        try:
            message = self.ray.get(ref)
        except Exception as e:   # the task's worker or node died past its retries
            return CompileResult(v, "compiler_crash", error=f"the Ray compile task failed: {type(e).__name__}: "
                                 f"{str(e)[-2000:]}")
        try:   # data only (tileprobe.probe.wire)
            kind, payload = wire.loads(message) if type(message) is bytes else (None, None)
            if kind == "result":
                return result_from_data(payload, v)
            if kind == "error" and type(payload) is str:
                return CompileResult(v, "compiler_crash", error=f"the Ray compile task failed: {payload}")
            raise wire.WireError(f"an unexpected message {kind!r}")
        except (wire.WireError, ValueError, TypeError) as e:
            text = f"the Ray compile task sent back something that is not a compile result ({e})"
            return CompileResult(v, "probe_error", error=text, failure="probe_error", message=text,
                                 fix=f"check what {v.probe_path} does at import and in args()")

    def gpu_slots(self, gpus: Sequence[int], *, timeout_s: float, init: str = INIT_CUDA) -> list[RayGpuSlot]:
        """One :class:`RayGpuSlot` per entry of ``gpus`` (Ray picks the GPUs: only their number counts here)."""
        return [RayGpuSlot(self.ray, init, timeout_s) for _ in gpus]

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
            _sweep_after_shutdown(self._folders_before)
        if self._guarding:
            from tileprobe.procs import unguard
            unguard(os.getpid())
            self._guarding = False


class GpuActor:
    """A Ray actor holding one GPU (``num_gpus=1``): it runs :mod:`tileprobe.run.worker`'s init and task functions."""

    def __init__(self, init: str):
        from tileprobe.run.worker import _import
        self.info = dict(_import(init)() or {})
        self.info["ray_gpu_ids"] = [str(g) for g in _ray().get_gpu_ids()]
        self.info["ray_node"] = _ray().get_runtime_context().get_node_id()

    def hello(self) -> bytes:
        """What the init returned (the GPU's provenance), with Ray's GPU ids and node id, as a
        :mod:`tileprobe.probe.wire` message (data only: the driver never unpickles what ran here)."""
        from tileprobe.probe import wire
        return wire.dumps(wire.to_data(self.info), "the GPU actor's hello")

    def task(self, fn: str, kwargs: dict) -> bytes:
        """(True, ``fn(**kwargs)``), or (False, the traceback) when it raised, as a :mod:`tileprobe.probe.wire`
        message: the task ran probe code (``args``, a reference), and Ray would unpickle an object it returned —
        a ``__reduce__`` of the probe's own — in the driver; a wire message is data, parsed as JSON there."""
        from tileprobe.probe import wire
        from tileprobe.run.worker import _import
        try:
            out = (True, _import(fn)(**(kwargs or {})))
        except BaseException as e:   # the task's own failure: reported, the actor stays usable
            out = (False, {"error": "".join(traceback.format_exception(e)).strip(), "exception": type(e).__name__})
        try:
            return wire.dumps(wire.to_data(out), "the GPU task's result")
        except (wire.NotData, wire.WireError) as e:
            return wire.dumps((False, {"error": f"the task's result cannot cross as data: {e}",
                                       "exception": type(e).__name__}))


class RayGpuSlot:
    """The :class:`~tileprobe.run.watchdog.Watchdog` interface over a :class:`GpuActor` (module doc)."""

    def __init__(self, ray, init: str, timeout_s: float, startup_timeout_s: float = 300.0):
        self.ray, self.init, self.timeout_s, self.startup_timeout_s = ray, init, timeout_s, startup_timeout_s
        self.cls = ray.remote(num_gpus=1, max_restarts=0)(GpuActor)
        self.actor: Any = None          # the GpuActor handle while one is alive
        self.info: dict = {}
        self.restarts = 0
        self.pids: list[int] = []

    def start(self) -> dict:
        """Start the actor if none is alive; return its hello info. Raises WorkerStartError."""
        if self.actor is None:
            actor = self.cls.remote(self.init)
            try:
                self.info = _from_actor(self.ray.get(actor.hello.remote(), timeout=self.startup_timeout_s))
                if not isinstance(self.info, dict):
                    raise WorkerStartError(f"the Ray GPU actor's hello is not a dict: {type(self.info).__name__}")
            except Exception as e:
                self.ray.kill(actor)
                raise WorkerStartError(f"the Ray GPU actor could not start: {type(e).__name__}: {e}") from e
            self.actor = actor
        return self.info

    def submit(self, fn: str, kwargs: dict | None = None, *, timeout_s: float | None = None) -> TaskOutcome:
        """Run ``fn(**kwargs)`` in the actor within ``timeout_s``; a hang kills the actor (:class:`TaskOutcome`)."""
        self.start()                    # an actor is alive after it (or it raised)
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        t0 = time.perf_counter()
        ref = self.actor.task.remote(fn, kwargs or {})
        until = time.monotonic() + timeout
        ready: list = []
        while not ready and time.monotonic() < until:     # in slices: a SIGTERM's handler runs between them
            ready = _wait(self.ray, [ref], min(WAIT_SLICE_S, max(0.0, until - time.monotonic())))
        if not ready:
            self._replace()
            return TaskOutcome("hang", error=f"no result within {timeout:g} s: the Ray GPU actor was killed and "
                               "the next variant runs in a fresh one", wall_s=time.perf_counter() - t0)
        try:
            ok, value = _from_actor(self.ray.get(ref))
        except Exception as e:   # the actor died, or sent what is not a wire message
            self._replace()
            return TaskOutcome("crash", error=f"the Ray GPU actor died: {type(e).__name__}: {e}",
                               wall_s=time.perf_counter() - t0)
        out = TaskOutcome("done" if ok else "raised", value=value, wall_s=time.perf_counter() - t0,
                          error="" if ok else value.get("error", ""))
        if ok and isinstance(value, dict) and value.get("fatal"):
            self._replace()
        return out

    def _replace(self) -> None:
        if self.actor is not None:
            self.ray.kill(self.actor)
        self.actor = None
        self.restarts += 1

    def close(self) -> None:
        """Kill the actor."""
        if self.actor is not None:
            self.ray.kill(self.actor)
            self.actor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _from_actor(message):
    """A :class:`GpuActor` message (wire bytes) as data; anything else (a pickled object) is refused.

    Raises:
        WireError: not bytes, or not a wire message.
    """
    from tileprobe.probe import wire
    if type(message) is not bytes:
        raise wire.WireError(f"the GPU actor sent a {type(message).__name__}, not a wire message")
    return wire.loads(message)


def _wait(ray, refs: list, timeout_s: float) -> list:
    """``ray.wait(refs, num_returns=1, timeout=timeout_s)``'s ready list. A signal handler's exception raised while
    Ray waits (tileprobe's SIGTERM → ``Terminated``) comes out of Ray's Cython as a SystemError: it is raised as
    itself, so SIGTERM under Ray exits as under the local executor."""
    try:
        return ray.wait(refs, num_returns=1, timeout=timeout_s)[0]
    except SystemError as e:
        if e.__cause__ is not None:
            raise e.__cause__ from None
        raise


#: Seconds to wait for a TCP answer from a ``--address host:port`` before Ray is asked to join it (Ray
#: itself waited more than 200 s without a word for an address where nothing listens).
CONNECT_TIMEOUT_S = 10.0


def _start_failed(ray, error: Exception) -> None:
    """Ray could not start its local cluster (seen at load 27 on 2 cores, 2026-12-05: "The current node timed out
    during startup", a traceback): shut down what it started and say so. Ray 2.60 waits 30 s for its raylet to
    register (``ray/_private/node.py``: ``raylet_start_wait_time_s = 30``, a literal, read from no setting).

    Raises:
        TileprobeError: always, naming Ray's error and the fixes.
    """
    from tileprobe.errors import TileprobeError, shown
    try:
        ray.shutdown()
    except Exception:   # what Ray left is ended by the guard when this process exits (guard_below, above)
        pass
    raise TileprobeError(f"Ray could not start its local cluster ({type(error).__name__}: "
                         f"{shown(str(error), limit=400)}). On a loaded machine its raylet may not register in time (Ray "
                         "waits 30 s, a limit it gives no setting for): run again when the machine is less busy, or "
                         "compile here with --executor local") from None


def check_address(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse a ``--address`` (``host:port``, ``ray://host:port``) where nothing accepts a TCP connection within
    ``timeout_s``; ``None`` and ``auto`` (Ray's own lookup) are not checked.

    Raises:
        UsageError: the address cannot be read, or nothing answers there.
    """
    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address {address!r}: give host:port (as `ray start --head` prints it) or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as e:
        raise UsageError(f"--address {address}: nothing answers at {host}:{port} within {timeout_s:g} s ({e}); is "
                         "`ray start --head` running there? (or drop --address to start Ray here)") from None


def _version(tileiras: str | None) -> str | None:
    """The release of ``tileiras`` (``13.4.92``) for other nodes to find or install, or None."""
    if not tileiras:
        return None
    try:
        from tileprobe.toolchain import tileiras_version
        version = tileiras_version(tileiras)[0]
    except Exception:
        return None
    m = re.search(r"\d+\.\d+\.\d+", version or "")
    return m.group(0) if m else None


def _pythonpath() -> str:
    """The folder holding this tileprobe first, so Ray workers import the same code as the driver."""
    from tileprobe.procs import pythonpath
    return pythonpath(os.environ.get("PYTHONPATH"))

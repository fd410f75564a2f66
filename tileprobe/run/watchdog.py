"""The parent side of the worker: send a task, wait at most a timeout, and contain hangs and crashes.

One persistent worker (:mod:`tileprobe.run.worker`, a fresh interpreter started with ``subprocess``: never a fork
of a process that may hold CUDA state) serves task after task while it stays healthy, since starting Python,
torch and a CUDA context costs seconds. Per task:

* a result within ``timeout_s`` → ``done`` (the worker goes on; if the result says ``fatal``, a sticky CUDA
  error broke its context, so it is replaced before the next task);
* no result within ``timeout_s`` → ``hang``: the worker's whole process group gets SIGTERM, then SIGKILL after
  ``grace_s``, it is reaped, and the next task starts a fresh worker;
* the worker dies (signal, abort, exit) → ``crash`` for that task only, with the exit status and the tail of the
  worker's log; the next task starts a fresh worker.

Workers run in their own session (process group), ignore Ctrl-C, and are killed by the kernel if this process
dies (PR_SET_PDEATHSIG), so no worker outlives its watchdog; every worker is reaped (no zombies).
The design follows cuTile's ``tune/_tune_utils.py::_TimedBenchmarkRunner`` (task ids, ``wait(timeout)``,
terminate → kill, fresh worker after) and pyperf's ``_utils.py::popen_killer``.
"""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from multiprocessing import Pipe
from typing import Any

from tileprobe.errors import TileprobeError
from tileprobe.probe.wire import WireError
from tileprobe.probe.wire import recv as wire_recv
from tileprobe.procs import (
    arm_guard,
    guard,
    importable_env,
    preexec_die_with_parent,
    signal_group,
    stop_process,
    unguard,
)
from tileprobe.run.protocol import STOP, Hello, ProtocolError, Result, Started, Task
from tileprobe.schema import exit_text

#: Default per-variant timeout (s): inputs, reference, one checked launch and the timed repetitions.
DEFAULT_TIMEOUT_S = 60.0
#: Time a new worker gets to import torch, create its CUDA context and say hello (s).
DEFAULT_STARTUP_TIMEOUT_S = 300.0
#: Time between SIGTERM and SIGKILL (s).
DEFAULT_GRACE_S = 2.0
INIT_CUDA = "tileprobe.run.worker:init_cuda"


class WorkerStartError(TileprobeError):
    """A worker could not start (no GPU, torch missing, CUDA init failed or timed out); the message has its log."""


@dataclass
class TaskOutcome:
    """What became of one task.

    status: ``done`` (the function returned ``value``), ``raised`` (it raised in the worker: ``error`` has the
    traceback), ``hang`` (no answer within the timeout: the worker was killed), ``crash`` (the worker died).
    wall_s: seconds from sending the task to its outcome. worker_pid: the worker that ran it.
    """
    status: str
    value: Any = None
    error: str = ""
    wall_s: float = 0.0
    worker_pid: int | None = None
    exit_status: str | None = None


@dataclass
class _Worker:
    proc: subprocess.Popen
    conn: Any
    log_path: str
    info: dict = field(default_factory=dict)



def _tail(path: str, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


class Watchdog:
    """Runs tasks (``"module:function"`` with keyword arguments) in a worker process, within a timeout.

    Args:
        timeout_s: default per-task timeout (s).
        init: ``"module:function"`` the worker calls at start-up (default: CUDA set-up and GPU provenance);
            its return value is :attr:`info`.
        startup_timeout_s: time a new worker gets to say hello (s); not counted against any task.
        grace_s: SIGTERM → SIGKILL delay (s).
        env: extra environment variables for workers.

    Use as a context manager, or call :meth:`close`. Raises :class:`WorkerStartError` when a worker cannot
    start (a task is never blamed for that).
    """

    def __init__(self, *, timeout_s: float = DEFAULT_TIMEOUT_S, init: str = INIT_CUDA,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, grace_s: float = DEFAULT_GRACE_S,
                 env: dict | None = None):
        self.timeout_s = float(timeout_s)
        self.init = init
        self.startup_timeout_s = float(startup_timeout_s)
        self.grace_s = float(grace_s)
        self.env = dict(env or {})
        self.pids: list[int] = []          # every worker started, in order
        self.restarts = 0                  # workers replaced after a hang, crash or sticky error
        self.info: dict = {}
        self._worker: _Worker | None = None
        self._closes = 0                   # close() calls: a start that sees it change gives its worker up
        self._ids = itertools.count(1)
        self._logdir = tempfile.mkdtemp(prefix="tileprobe-run-")
        self._finalizer = weakref.finalize(self, _shutdown, self.__dict__)

    # --- life cycle --------------------------------------------------------------------------------------
    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> dict:
        """Make sure a worker is running; return its hello info (e.g. the GPU's provenance)."""
        return self._running().info

    def _running(self) -> _Worker:
        """The worker, started first when none is running (:meth:`start`)."""
        if self._worker is None or self._worker.proc.poll() is not None:
            if self._worker is not None:
                self._kill(self._worker)
            closes = self._closes
            w = self._spawn()
            if self._closes != closes:   # closed by another thread meanwhile (a tune that ended before its race)
                self._kill(w)
                raise WorkerStartError("the watchdog was closed while its worker started")
            self._worker = w
        return self._worker

    def _spawn(self) -> _Worker:
        parent, child = Pipe(duplex=True)
        fd = child.fileno()
        arm_guard()     # before the start: the worker and what its tasks start carry the guard's mark
        env = importable_env(dict(os.environ, **self.env))
        log_path = os.path.join(self._logdir, f"worker-{len(self.pids) + 1}.log")
        # SIGKILLed by the kernel when this process dies, from its first instruction (no window while it imports);
        # the guard then ends its session's group and every descendant it saw, a `setsid` child of a task included
        # (both outlived a SIGKILLed tileprobe before, 2026-12-05)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "tileprobe.run.worker", str(fd), self.init],
                                    pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True,
                                    preexec_fn=preexec_die_with_parent(os.getpid()) if os.name == "posix" else None)
        guard(proc.pid)
        child.close()
        self.pids.append(proc.pid)
        w = _Worker(proc, parent, log_path)
        try:
            ready = parent.poll(self.startup_timeout_s)
            msg = wire_recv(parent) if ready else None   # data only: never unpickled here
        except (EOFError, OSError, WireError):
            msg = None
        hello = Hello.from_wire(msg)
        if not hello.ok:
            why = ("no hello within %.0f s" % self.startup_timeout_s if msg is None and proc.poll() is None
                   else exit_text(proc.poll()) if msg is None else "start-up failed")
            self._kill(w)
            failure = hello.failure
            expected = failure.exception in ("RuntimeError", "ImportError", "ModuleNotFoundError")
            detail = (f"{failure.exception}: {failure.message}" if expected
                      else failure.error or _tail(log_path))
            raise WorkerStartError(f"the run worker could not start ({why}):\n{detail}\n"
                                   "Check that this machine has an NVIDIA GPU, its driver, a CUDA build of torch, "
                                   "cuda-core and cuda-bindings (python -c 'import torch; print(torch.cuda.is_available())'). "
                                   "Without a GPU, `tileprobe tune … --dry-run --arch sm_90 [--num-sms N]` runs the "
                                   "static stage (compiles, duplicates, hang check), and `tileprobe audit` reads "
                                   "the compiled code.")
        w.info = hello.info
        self.info = w.info
        return w

    def close(self) -> None:
        """Stop the worker (politely, then by force) and reap it. Safe to call twice, and while another thread is in
        :meth:`start` (the worker it starts is stopped as it comes up)."""
        self._closes += 1
        w, self._worker = self._worker, None
        if w is not None:
            try:
                w.conn.send(STOP)
                w.proc.wait(timeout=max(self.grace_s, 5.0))
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
            self._kill(w)
        _rmtree(self._logdir)

    def _kill(self, w: _Worker) -> None:
        """SIGTERM the worker's process group, SIGKILL after ``grace_s``, reap it (one stuck in the driver, D state,
        is reaped at close), sweep its group (children it left there, e.g. nvidia-smi)."""
        stop_process(w.proc, self.grace_s, reap_s=30, group=True)   # start_new_session: it leads its own group
        if w.proc.poll() is not None:     # reaped: the guard forgets its pid (which may be reused)
            unguard(w.proc.pid)
        try:
            w.conn.close()
        except OSError:
            pass

    # --- tasks ---------------------------------------------------------------------------------------------
    def submit(self, fn: str, kwargs: dict | None = None, *, timeout_s: float | None = None) -> TaskOutcome:
        """Run ``fn(**kwargs)`` in the worker; wait at most ``timeout_s`` (default :attr:`timeout_s`).

        Never raises for what the task does (hang, crash, exception: see :class:`TaskOutcome`); raises
        :class:`WorkerStartError` if no worker can be started for it.
        """
        w = self._running()
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        task_id = next(self._ids)
        t0 = time.perf_counter()
        try:
            w.conn.send(Task(task_id, fn, kwargs or {}).to_wire())
            # the timeout counts from the worker's "started" (its task imported: seconds on a loaded machine, not
            # the task's time); a worker that dies meanwhile or later is a crash, whatever the timing
            ready = w.conn.poll(self.startup_timeout_s)
            msg = wire_recv(w.conn) if ready else None   # data only: never unpickled here
            if Started.from_wire(msg) is not None:
                ready = w.conn.poll(timeout)
                msg = wire_recv(w.conn) if ready else None
        except (EOFError, OSError):
            return self._crashed(w, t0)
        except WireError as e:   # the probe code in the worker wrote on its pipe: do not trust this worker
            self._replace(w)
            return TaskOutcome("crash", error=f"the worker (pid {w.proc.pid}) sent a message that is not tileprobe's "
                               f"data ({e}); the next variant runs in a fresh one", wall_s=time.perf_counter() - t0,
                               worker_pid=w.proc.pid, exit_status=exit_text(w.proc.poll()))
        if msg is None:
            if _exited(w.proc, self.grace_s):
                return self._crashed(w, t0)
            self._replace(w)
            return TaskOutcome("hang", error=f"no result within {timeout:g} s: the worker (pid {w.proc.pid}) was "
                               "killed and the next variant runs in a fresh one", wall_s=time.perf_counter() - t0,
                               worker_pid=w.proc.pid, exit_status=exit_text(w.proc.poll()))
        try:
            result = Result.from_wire(msg)
            if result.task_id != task_id:   # a forged reply (probe code wrote on the pipe), as untrusted as one
                raise ProtocolError(f"a result for task {result.task_id}, not for this task ({task_id})")
        except ProtocolError as e:   # data of another shape (probe code wrote on the pipe): not trusted any more
            self._replace(w)
            return TaskOutcome("crash", error=f"the worker (pid {w.proc.pid}) sent a message that is not tileprobe's "
                               f"data ({e}); the next variant runs in a fresh one", wall_s=time.perf_counter() - t0,
                               worker_pid=w.proc.pid, exit_status=exit_text(w.proc.poll()))
        out = TaskOutcome("done" if result.ok else "raised", value=result.value, wall_s=time.perf_counter() - t0,
                          worker_pid=w.proc.pid, error=result.error)
        if result.fatal:
            self._replace(w)   # it exits by itself; make sure, and start clean next time
        return out

    def _crashed(self, w: _Worker, t0: float) -> TaskOutcome:
        try:
            w.proc.wait(timeout=self.grace_s + 5)
        except subprocess.TimeoutExpired:
            pass
        status = exit_text(w.proc.poll())
        self._replace(w)
        log = _tail(w.log_path)
        return TaskOutcome("crash", error=f"the worker (pid {w.proc.pid}) died: {status}" + (f"\n{log}" if log else ""),
                           wall_s=time.perf_counter() - t0, worker_pid=w.proc.pid, exit_status=status)

    def _replace(self, w: _Worker) -> None:
        self._kill(w)
        if self._worker is w:
            self._worker = None
        self.restarts += 1


def _exited(proc, grace_s: float) -> bool:
    """Whether ``proc`` has ended, or ends within ``grace_s`` (a task that killed its worker just as its timeout
    ran out is a crash, not a hang, on a loaded machine too)."""
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _shutdown(state: dict) -> None:
    """Finalizer: kill a worker the user forgot to close (at garbage collection or interpreter exit)."""
    w = state.get("_worker")
    if w is not None and w.proc.poll() is None:
        signal_group(w.proc.pid)
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    _rmtree(state.get("_logdir", ""))

"""One probe loader child as the tileprobe process sees it (:class:`_Loader`): started with its first job (a fresh
Python, or forked from the zygote, :mod:`tileprobe.probe.zygote`), guarded, read for its stage messages, output and
report with deadlines, and killed with its process group when it misbehaves or is done. The limits of a job are
here: :data:`PROBE_TIMEOUT_S`, :data:`STARTUP_S`, :data:`JOB_BOUND_STAGES`, :data:`MAX_STAGE_MESSAGES`,
:data:`OUTPUT_LIMIT_BYTES`. The child's own side is :mod:`tileprobe.probe.loader_child`; many jobs, sessions and
the plan cache are :mod:`tileprobe.probe.contained` and :mod:`tileprobe.probe.sessions`.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

from tileprobe.probe.loader_job import LoaderJob
from tileprobe.probe.plans import FileReport, report_from_data

#: Seconds one step of probe code may take in the loader (importing the file, importing its kernel, one call of
#: ``args`` with its signature): importing TileGym with torch took 3-5 s on a loaded 2-core machine (2026-12-01).
PROBE_TIMEOUT_S = 60.0
#: Seconds the loader child may take to start (Python, tileprobe, cuTile) before any probe code runs.
STARTUP_S = 60.0
#: A job's stages together (a probe file's load, or one task) may take at most this many times the stage timeout:
#: each stage message starts the stage's own deadline anew, but never past this bound, so a child that sends a stage
#: message every second cannot hold a command (one held an audit 200 s with ``--probe-timeout 10``, 2026-12-04).
#: With the default :data:`PROBE_TIMEOUT_S` a file's load may take 10 min in all; raise ``--probe-timeout`` for more.
JOB_BOUND_STAGES = 10
#: Stage messages one job may send; more stops it as an error (a flood costs the tileprobe process its reading).
MAX_STAGE_MESSAGES = 100_000
#: Bytes of output (stdout and stderr together) a probe may print while it is loaded; more stops it as an error.
OUTPUT_LIMIT_BYTES = 1 << 20
#: Bytes of a probe's output kept to show (its first lines).
OUTPUT_SHOWN_BYTES = 4096


_BOOT = "from tileprobe.probe.loader_child import child_main; child_main()"


def _job(path: str, targets, max_variants: int, tmp_root: str, overrides: tuple, task: tuple | None,
         num_sms: int | None, stay: bool) -> LoaderJob:
    """One loader job (sent as data: the child's argv, or a ("job", …) message to a staying child), in a new folder
    ``load-*`` of ``tmp_root`` that holds its task's arguments and is its ``tempfile.tempdir``."""
    from tileprobe.probe import wire
    tmp = tempfile.mkdtemp(prefix="load-", dir=tmp_root)
    job = LoaderJob(path, list(targets), max_variants, os.getpid(), overrides[0], overrides[1], num_sms, _sys_path(),
                    tmp, stay=stay)
    if task is not None:      # (function, its arguments): in a file, not on the command line (no size limit)
        job.task, job.task_args = task[0], os.path.join(tmp, "task.json")
        with open(job.task_args, "wb") as f:
            f.write(wire.dumps(task[1], "the task's arguments"))
    return job


def _sys_path() -> list[str]:
    return [os.path.abspath(p) if p else os.getcwd() for p in sys.path]


def _child_key(path: str) -> tuple:
    """What a live loader child shares with every job it may take: the probe file, and what its imports read —
    the working folder, ``sys.path``, the interpreter and the environment (the guard's mark left out: it is set
    once, by the first child's start). ``--case``/``--hint``, targets and SM counts are each job's own."""
    from tileprobe.procs import GUARD_ENV
    return (os.path.abspath(path), os.getcwd(), tuple(_sys_path()), sys.executable,
            tuple(sorted((k, v) for k, v in os.environ.items() if k != GUARD_ENV)))


class _Loader:
    """One loader child for one probe file, as the parent sees it: started with its first job; with ``stay``
    (inside :func:`loader_sessions`) it waits for more after each report (:meth:`again`)."""

    def __init__(self, path: str, targets, max_variants: int, timeout_s: float, tmp_root: str,
                 overrides: tuple = (None, None), task: tuple | None = None, num_sms: int | None = None,
                 stay: bool = False):
        job = _job(path, targets, max_variants, tmp_root, overrides, task, num_sms, stay)
        from tileprobe.procs import arm_guard
        arm_guard()               # before the environment is copied: the loader and what it starts carry the mark
        from tileprobe.procs import importable_env
        env = importable_env()
        from tileprobe.probe.zygote import start_loader
        ours, theirs = socket.socketpair()    # jobs go down (a staying child), stages and reports come up
        w = theirs.fileno()
        try:
            self.proc = start_loader(job, w, env, preload_s=timeout_s) or subprocess.Popen(   # forked warm, else a fresh Python
                [sys.executable, "-c", _BOOT, str(w), json.dumps(job.to_wire())], pass_fds=(w,),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=env)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        from tileprobe.procs import guard
        guard(self.proc.pid)      # ended with its group even if tileprobe is SIGKILLed
        self.path, self.stay, self.key, self.jobs = path, stay, _child_key(path), 1
        self.msgs: Connection | None = Connection(ours.detach())
        assert self.proc.stdout is not None      # started with a pipe for its output, either way
        self.out_fd: int | None = self.proc.stdout.fileno()
        self.ended, self._end_lock = False, threading.Lock()
        self._begin(timeout_s, STARTUP_S + timeout_s, "starting Python")

    def _begin(self, timeout_s: float, first_s: float, stage: str) -> None:
        """A job starts: its stage, its deadline (``first_s`` from now), its output counted from 0."""
        self.timeout_s, self.stage, self.heard = timeout_s, stage, False
        self.report: FileReport | None = None
        self.error: str | None = None
        self.head, self.out_bytes, self.stages = bytearray(), 0, 0
        self.started = time.monotonic()
        self.deadline = self.started + first_s
        #: The job's absolute end (:data:`JOB_BOUND_STAGES`): no stage message moves :attr:`deadline` past it.
        self.bound = self.deadline + JOB_BOUND_STAGES * timeout_s

    def again(self, job: LoaderJob, timeout_s: float) -> bool:
        """Give this staying child its next ``job`` (:func:`_job`): its stage, deadline and output count start
        anew. False (nothing sent) when the child has ended meanwhile; the caller then :meth:`end` s it."""
        from tileprobe.probe import wire
        if self.ended or self.msgs is None or self.proc.poll() is not None:
            return False
        self._drain(keep=False)   # what it printed between jobs is no job's output
        try:
            wire.send(self.msgs, ("job", job.to_wire()), "the loader's job")
        except OSError:
            return False
        self.jobs += 1
        self._begin(timeout_s, timeout_s, "starting its next job")
        return True

    def waitables(self) -> list:
        return [x for x in (self.msgs, self.proc.stdout if self.out_fd is not None else None) if x is not None]

    def pump(self, ready) -> None:
        """Read what is ready: output (counted, the head kept) and messages (stage, report)."""
        if self.out_fd is not None and self.proc.stdout in ready:
            data = os.read(self.out_fd, 65536)
            if not data:
                self.out_fd = None
            self._take(data)
            self._check_flood()
        if self.msgs is not None and self.msgs in ready:
            from tileprobe.probe import wire
            try:
                kind, payload = wire.recv(self.msgs)   # data only: nothing the child sends is unpickled
                if kind == "stage" and type(payload) is str:
                    self.stages += 1
                    if self.stages > MAX_STAGE_MESSAGES:
                        raise wire.WireError(f"more than {MAX_STAGE_MESSAGES:,} stage messages")
                    self.stage = payload if len(payload) <= 500 else f"{payload[:480]}… ({len(payload):,} chars)"
                    self.deadline = min(time.monotonic() + self.timeout_s, self.bound)
                elif kind == "report":
                    self.report = report_from_data(payload, self.path)
                else:
                    raise wire.WireError(f"an unexpected message {kind!r}")
                self.heard = True
            except (EOFError, OSError):
                self.msgs = None
            except (wire.WireError, TypeError, ValueError) as e:
                self.msgs = None
                self.error = (f"{self.path}: the process loading it sent something that is not a loader's message "
                              f"({e}); it was stopped")

    def _check_flood(self) -> None:
        if self.out_bytes > OUTPUT_LIMIT_BYTES and self.error is None:
            self.error = (f"{self.path}: printed more than {OUTPUT_LIMIT_BYTES:,} bytes while {self.stage} and was "
                          f"stopped; remove the prints (first line: {self._first_line()!r})")

    def _take(self, data: bytes) -> None:
        """Count output ``data`` and keep it while the head is under :data:`OUTPUT_SHOWN_BYTES`."""
        self.out_bytes += len(data)
        self.head += data[:max(0, OUTPUT_SHOWN_BYTES - len(self.head))]

    def _first_line(self) -> str:
        line = (bytes(self.head).decode(errors="replace").strip().splitlines() or [""])[0]
        return line if len(line) <= 80 else line[:77] + "..."

    @property
    def finished(self) -> bool:
        """An error; a staying child's report; or the child closed its message socket and either its output or
        itself ended: a process the probe started (``subprocess.Popen`` at import) may hold the output open long
        after the loader is done."""
        return self.error is not None or (self.stay and self.report is not None) or (
            self.msgs is None and (self.out_fd is None or self.proc.poll() is not None))

    def _drain(self, keep: bool = True, every: bool = False) -> None:
        """Read the output already written (the loader's last lines), without waiting for a writer that stays:
        until the head is full, or with ``every`` all of it (counted: a staying child's job is over only then);
        ``keep=False``: read and drop it. At most :data:`OUTPUT_LIMIT_BYTES` and a read more."""
        if self.out_fd is None:
            return
        os.set_blocking(self.out_fd, False)
        budget = OUTPUT_LIMIT_BYTES + 65536
        with contextlib.suppress(BlockingIOError, OSError):
            while budget > 0 and (not keep or every or len(self.head) < OUTPUT_SHOWN_BYTES):
                data = os.read(self.out_fd, 65536)
                if not data:
                    self.out_fd = None
                    break
                budget -= len(data)
                if keep:
                    self._take(data)
        if self.out_fd is not None:
            os.set_blocking(self.out_fd, True)

    def kill(self) -> None:
        """SIGKILL the child, its descendants and its process group (the group outlives a loader that has ended:
        what the probe started and left running is in it, unless it made a session of its own)."""
        from tileprobe.procs import kill_tree
        kill_tree(self.proc.pid, group=True)   # the child is not reaped yet: its group id is still its own

    def end(self) -> int | None:
        """Kill the child with its group (:meth:`kill`), reap it, let the guard forget it, close its socket; its
        exit status (None when it had ended before). Safe to call twice, from two threads."""
        with self._end_lock:
            if self.ended:
                return None
            self.ended = True
            from tileprobe.procs import unguard
            self.kill()
            status = self.proc.wait()
            unguard(self.proc.pid)
            if self.msgs is not None:
                self.msgs.close()
                self.msgs = None
            return status

    def result(self) -> FileReport | None:
        """The report (after :attr:`finished` or a timeout). The child is ended (:meth:`end`), unless it stays and
        its job went well: then it waits for :meth:`again`. None when a reused child ended before it said a word
        about its job (its parent thread ended, say): the job is to be given to another child."""
        from tileprobe.schema import exit_text
        timed_out = not self.finished
        self._drain(every=self.stay)
        if self.stay and not timed_out:
            self._check_flood()
            if self.error is None and self.report is not None and self.proc.poll() is None:
                return self._with_output(self.report)
        status = self.end()
        if self.jobs > 1 and not self.heard and self.error is None and not timed_out:
            return None
        if self.report is None and self.error is None and not timed_out and self._zygote_lost():
            return None          # its zygote died under it (another probe's package): again, from a new zygote
        if timed_out and self.deadline >= self.bound:
            return FileReport(self.path, errors=[
                f"{self.path}: loading it took longer than {self.bound - self.started:.0f} s in all "
                f"({JOB_BOUND_STAGES} × the probe timeout of {self.timeout_s:.0f} s, whatever its stages said) and "
                f"was stopped during {self.stage} (raise --probe-timeout)"])
        if timed_out:
            return FileReport(self.path, errors=[f"{self.path}: {self.stage} did not return within "
                                                 f"{self.timeout_s:.0f} s and was stopped (an endless loop? a slow "
                                                 "import: raise --probe-timeout)"])
        if self.error:
            return FileReport(self.path, errors=[self.error])
        return self._with_output(self.report or FileReport(self.path, errors=[
            f"{self.path}: the process loading it ended during {self.stage} ({exit_text(status)}) and gave no "
            "result (a crash in an extension module, or os._exit before tileprobe could catch it)"]))

    def _zygote_lost(self) -> bool:
        """Whether this child was forked from a zygote that then died (its children die with it) and a new zygote
        is running to start the job again (:func:`tileprobe.probe.zygote.replaced_after`; never a fresh Python
        here: a probe that killed its parent would then reach tileprobe itself)."""
        z = getattr(self.proc, "zygote", None)
        if z is None or not z.dead:
            return False
        from tileprobe.probe.zygote import replaced_after
        return replaced_after(z)

    def _with_output(self, report: FileReport) -> FileReport:
        report.output = bytes(self.head).decode(errors="replace")
        report.output_bytes = self.out_bytes
        return report


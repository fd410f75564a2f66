"""The GPU worker of ``tileprobe tune``, started at the command's first line.

The worker imports torch and makes a CUDA context: 3.5-5.7 s on the H200 (measured 2026-12-04). The tune
started it in a thread at the top of :func:`tileprobe.tune.pipeline.tune`, after the CLI's own start-up (Python,
argparse, rich, the command modules), the store's opening and the tune's imports; a warm re-tune, whose compiles
all come from the store, waited for nearly all of it. :func:`start_early_worker`, called by the console entry
(:mod:`tileprobe._entry`) before the CLI is even imported when the command line asks for a race on this machine's
GPU (:func:`wants_early_worker`), starts it there; :func:`take_early_worker` hands it to the tune, which closes it
as it closes its own. A worker nobody takes (the command failed first, or turned out not to race) ends with this
process: the starting thread holds it and the worker has a parent-death signal (docs/NOTES.md section 13), and the
watchdog is closed at exit.
"""
from __future__ import annotations

import atexit
import functools
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["WorkerStarter", "discard_early_worker", "keep_warm_env_error", "keep_warm_seconds", "start_early_worker",
           "take_early_worker", "wants_early_worker"]

#: The option and the environment variable that ask for the kept-warm GPU worker (:mod:`tileprobe.run.keepwarm`).
KEEP_WARM_OPTION, KEEP_WARM_ENV = "--keep-warm", "TILEPROBE_KEEP_WARM"

#: ``tileprobe tune`` options after which no GPU worker of the default kind races here: a dry run, a program's
#: searches (``--``) or a table refresh (their own path), other GPUs (``--gpus``), another executor (``--executor``:
#: Ray's GPU slot), help.
_NOT_HERE = frozenset({"--dry-run", "--", "--refresh", "--gpus", "--executor", "-h", "--help"})

_EARLY: dict = {}
_LOCK = threading.Lock()


class WorkerStarter:
    """Start the GPU worker of watchdog ``wd`` in a thread (it imports torch and makes a CUDA context: seconds).

    ``t0``: when it started (``time.perf_counter()``); ``wait()`` gives (GPU info, start-up s, s waited there).
    """

    def __init__(self, wd):
        self.wd, self.info, self.error = wd, None, None
        self.t0, self.t1 = time.perf_counter(), None
        self.held = threading.Event()   # the thread lives until release(): the worker dies with the thread that
        #                                 started it (PR_SET_PDEATHSIG follows the thread; docs/NOTES.md section 13)
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tileprobe-worker-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.info = dict(self.wd.start())
        except BaseException as e:  # handed to the main thread by wait()
            self.error = e
        finally:
            self.t1 = time.perf_counter()
            self.ready.set()
        self.held.wait()

    def release(self) -> None:
        """Let the starting thread end (after the tune: its worker is closed or no longer needed)."""
        self.held.set()

    def wait(self) -> tuple[dict, float, float]:
        """(GPU info, worker start-up s, s spent waiting for it here). Raises what the start raised."""
        t = time.perf_counter()
        self.ready.wait()
        waited = time.perf_counter() - t
        if self.error is not None:
            raise self.error
        return self.info, self.t1 - self.t0, waited


def wants_early_worker(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` (without the program name) is a ``tileprobe tune`` of probe files that
    races on this machine's default GPU: ``tune`` and none of :data:`_NOT_HERE` (``--opt=value`` forms too)."""
    if not argv or argv[0] != "tune":
        return False
    return not any(a.split("=", 1)[0] in _NOT_HERE for a in argv[1:])


def keep_warm_seconds(argv: Sequence[str], environ: dict | None = None) -> float | None:
    """The idle seconds of the kept-warm GPU worker asked for by ``--keep-warm [SECONDS]`` (``--keep-warm=S`` too;
    no value: :data:`tileprobe.run.keepwarm.DEFAULT_IDLE_S`) in ``argv``, else by ``$TILEPROBE_KEEP_WARM``; None
    when neither asks (0 turns it off). A value that is not a number is the CLI's to refuse: None here."""
    import os
    env = os.environ if environ is None else environ
    value: str | None = env.get(KEEP_WARM_ENV) or None
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == KEEP_WARM_OPTION:   # argparse (nargs="?") takes the next word unless it looks like an option
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            value = nxt if nxt and (not nxt.startswith("-") or _is_number(nxt)) else "default"
        elif a.startswith(KEEP_WARM_OPTION + "="):
            value = a.split("=", 1)[1]
    if value is None:
        return None
    if value == "default":
        from tileprobe.run.keepwarm import DEFAULT_IDLE_S
        return DEFAULT_IDLE_S
    from tileprobe.outcomes import timeout_seconds
    try:
        return timeout_seconds(value)
    except ValueError:   # 0 (off), or a value keep_warm_env_error and argparse refuse
        return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_zero(text: str) -> bool:
    """``0`` written any way (``-0``, ``0.0``, ``00``): the kept-warm worker turned off."""
    return _is_number(text) and float(text) == 0


def keep_warm_env_error(environ: dict | None = None) -> str | None:
    """Why ``$TILEPROBE_KEEP_WARM`` cannot be used, or None (unset, empty, ``0``: off, or a timeout in seconds:
    :func:`tileprobe.outcomes.timeout_seconds`'s rule, as ``--keep-warm`` takes it). ``inf`` would have made a
    server that dies at its start (``settimeout(inf)``)."""
    import os
    env = os.environ if environ is None else environ
    value = (env.get(KEEP_WARM_ENV) or "").strip()
    if value == "" or _is_zero(value):
        return None
    from tileprobe.outcomes import timeout_seconds
    try:
        timeout_seconds(value)
    except ValueError as e:
        return (f"{KEEP_WARM_ENV}={value!r} is not a kept-warm idle time: {e}; fix: set it to the seconds the GPU "
                f"worker stays after the last tune (e.g. 900), 0 for off, or unset it")
    return None


def start_early_worker(make_watchdog: Callable | None = None, argv: Sequence[str] | None = None) -> None:
    """Start the tune's GPU worker now, in a thread (once per process; ``make_watchdog``: a factory for tests,
    default :class:`~tileprobe.run.watchdog.Watchdog` with its defaults, or the kept-warm worker's
    :class:`~tileprobe.run.keepwarm.KeptWarmWatchdog` when ``argv`` (default ``sys.argv[1:]``) or the environment
    ask for it: :func:`keep_warm_seconds`). Never raises: a start that fails is the tune's to report when it takes
    the worker (:class:`WorkerStarter.wait`)."""
    import sys
    with _LOCK:
        if _EARLY:
            return
        try:
            idle_s = keep_warm_seconds(sys.argv[1:] if argv is None else argv)
            if make_watchdog is None and idle_s is not None:
                from tileprobe.run.keepwarm import KeptWarmWatchdog
                make_watchdog = functools.partial(KeptWarmWatchdog, idle_s=idle_s)
            elif make_watchdog is None:
                from tileprobe.run.watchdog import Watchdog
                make_watchdog = Watchdog
            wd = make_watchdog()
        except Exception:
            return
        _EARLY.update(wd=wd, starter=WorkerStarter(wd))
    atexit.register(discard_early_worker)


def take_early_worker(timeout_s: float | None = None):
    """``(watchdog, starter)`` of the worker :func:`start_early_worker` started, now the caller's to close and
    release (its per-task timeout set to ``timeout_s`` when given); None when there is none."""
    with _LOCK:
        if not _EARLY:
            return None
        wd, starter = _EARLY.pop("wd"), _EARLY.pop("starter")
    if timeout_s is not None:
        wd.timeout_s = float(timeout_s)
    return wd, starter


def discard_early_worker() -> None:
    """Close the early worker nobody took (a command that does not race after all, or that failed first)."""
    early = take_early_worker()
    if early is not None:
        wd, starter = early
        wd.close()
        starter.release()

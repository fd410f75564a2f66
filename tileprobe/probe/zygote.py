"""Warm process starts: one *zygote* process imports cuTile once, then forks the probe loaders
(:mod:`.contained`) and the compile workers (:mod:`.pool`) of an audit, so each pays only for its own work.

Why: ``import cuda.tile._compile`` took 2.06 s per process on the 2-core machine (2.23 s for two at once; cuTile's
``_ir.core_ops`` → ``_cext`` imports torch, 1.80 s of it: docs/LOG.md §18), and an audit started one loader per
probe file plus one worker per CPU, each importing it again. Forked from the zygote, a loader or worker starts in
milliseconds; torch (through cuTile's compiler side) is imported once, when a worker or a probe needs it.

Containment is unchanged: each probe file and each worker still runs in a process of its own, in its own session,
with a parent-death signal; the zygote runs no probe code and its children close its socket before running any
(they cannot ask it for anything). What crosses from the zygote is data (:mod:`tileprobe.probe.wire`, checked
against :data:`ZYGOTE_SENDS`: the installed packages it imports could write on its socket), and a zygote that sends
anything else is distrusted and replaced. Each child runs under a *nanny* of its own (:func:`_nanny`), so probe code
that signals its parent reaches that nanny, not the zygote; the zygote ignores the catchable signals anyway, adopts
its children's orphans (``PR_SET_CHILD_SUBREAPER``) and is guarded (:func:`tileprobe.procs.guard`). The zygote dies with the process that started it (``PR_SET_PDEATHSIG``; start
it from the main thread or a thread that outlives it) and ends when :func:`warm_starts` ends; its children then get
their own parent-death signals. The zygote reaps its children and reports each exit status, so
:class:`ZygoteProcess` answers ``poll``/``wait`` (as :class:`subprocess.Popen`) and ``join``/``exitcode`` (as
:class:`multiprocessing.Process`).

A zygote is used only inside :func:`warm_starts` (``tileprobe.audit.audit`` and ``tileprobe.tune`` enter it) and
only while the environment (``os.environ``, ``sys.executable``) is the one it started with: modules read settings
at import. ``TILEPROBE_ZYGOTE=0`` turns it off; when it cannot start, processes start as before (a fresh Python).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

# The parts (re-exported here: callers import them from this module). zygote_side: the zygote process's own code and
# the protocol's limits; zygote_client: one zygote as its starter sees it; probe_imports: what a probe file imports.
from tileprobe.probe.loader_job import LoaderJob
from tileprobe.probe.probe_imports import installed_imports, needs_torch
from tileprobe.probe.zygote_client import (  # noqa: F401
    Zygote,
    ZygoteError,
    ZygoteProcess,
    _env_key,
    _parent_of,
    _running_child_of,
)
from tileprobe.probe.zygote_side import (  # noqa: F401
    HEAVY,
    PRELOAD,
    PRELOAD_ENV,
    PRELOAD_TIMEOUT_S,
    READY_TIMEOUT_S,
    TORCH_FREE_ENV,
    ZYGOTE_SENDS,
    torch_blocked,
    under_nanny,
    zygote_main,
)

_current: Zygote | None = None
#: Zygotes that were current before a wrong guess of :func:`speculate_torch_free` (kept until :func:`warm_starts`
#: ends: the loaders forked from them still run).
_retired: list = []
#: A zygote started by :func:`start_early` that no :func:`warm_starts` has taken yet.
_early: Zygote | None = None
_depth = 0
_lock = threading.RLock()


def enabled() -> bool:
    """False when ``TILEPROBE_ZYGOTE=0`` (or off Linux: the zygote needs ``fork`` and ``PR_SET_PDEATHSIG``)."""
    return sys.platform.startswith("linux") and os.environ.get("TILEPROBE_ZYGOTE", "1") != "0"


@contextlib.contextmanager
def warm_starts() -> Iterator[None]:
    """Inside: loaders and compile workers are forked from one zygote (module doc), started at once so that its
    imports overlap the caller's work. Nested uses share it; the outermost ends it."""
    global _current, _depth, _early, _replacements
    with _lock:
        _depth += 1
        early, _early = _early, None
        if early is not None and (_depth != 1 or not enabled() or _current is not None or early.dead
                                  or early.key != _env_key()):
            early.close()          # another environment by now, or not needed: a fresh one, as without it
            early = None
        if _depth == 1 and enabled() and _current is None:
            try:
                _current = early or Zygote()
            except OSError:
                _current = None
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _replacements = 0
                gone = ([_current] if _current is not None else []) + _retired
                _current = None
                _retired.clear()
                for z in gone:
                    z.close()


def start_early() -> bool:
    """Start the zygote now, before the command's own modules are imported (the console entry point does this for
    ``tune`` and ``audit``): its imports (0.24 s here, about 0.4 s on the H200 host) then run beside the CLI's
    (0.3-0.6 s), and the first loader's fork need not wait for them (0.26 s of a cold RMSNorm tune's path on the
    H200, docs/LOG.md §35). The next :func:`warm_starts` takes it when the environment is still the one it
    started in; otherwise, or at exit, it is closed. Returns whether one was started."""
    global _early
    if not enabled() or _early is not None or threading.current_thread() is not threading.main_thread():
        return False
    try:
        _early = Zygote()
    except OSError:
        return False
    import atexit
    atexit.register(_close_early)
    for sig in (signal.SIGTERM, signal.SIGHUP):   # until the command's own handlers (an inherited ignore stays)
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _close_early_and_die)
    return True


def _close_early() -> None:
    global _early
    with _lock:
        z, _early = _early, None
    if z is not None:
        z.close()


def _close_early_and_die(signum, _frame) -> None:
    """SIGTERM/SIGHUP before the command took over its signals: close the early zygote (its temp folder goes with
    it; atexit does not run on a signal's default action), then end as the signal would have (session 9's hostile
    test: a SIGTERM 0.3 s into a tune left the folder)."""
    _close_early()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def prefetch_heavy(uses_torch: bool) -> bool:
    """Once the probe files are loaded: let the zygote of the :func:`warm_starts` in force import :data:`HEAVY`
    at once, without torch when no loader saw torch (``uses_torch`` False: :func:`allow_torch_free`), while the
    command goes on (:meth:`Zygote.prefetch_heavy`). After a wrong guess of :func:`speculate_torch_free` (a loader
    saw torch), a new zygote becomes the current one and imports :data:`HEAVY` with torch as soon as it is up
    (:func:`_replace_current`). Returns whether it was asked."""
    z = current()
    if z is None:
        return False
    z.speculate = False
    if uses_torch and z.speculated:
        z.torch_free = False   # its compile side lacks torch: it refuses workers now (they start fresh) unless a
        return _replace_current()   # new zygote takes over
    if not uses_torch:
        allow_torch_free()
    return z.prefetch_heavy()


def speculate_torch_free(paths: Sequence[str]) -> bool:
    """Before the probe loaders of ``paths`` start (``tileprobe tune``'s plan): when none of the files looks like it
    needs torch (:func:`needs_torch`), let the zygote import :data:`HEAVY` without torch right after it forked
    their loaders (:func:`loaders_started`), beside them, rather than after they report (:func:`prefetch_heavy`).

    Why: on the H200 host that import took 0.85 s and was on a cold tune's path: the first compile
    worker waited for it (the RMSNorm 2M tune's trace, docs/LOG.md §35). A wrong guess (a file that imports
    torch through another module) costs a second zygote's start, 0.3-0.5 s beside the loaders
    (:func:`_replace_current`); the workers are then forked from that one, with torch. Returns whether the guess
    was made (off with ``TILEPROBE_TORCH_FREE=0``, without a zygote, or when a file looks like it needs torch)."""
    z = current()
    if z is None or not paths or os.environ.get(TORCH_FREE_ENV, "1") == "0" or z.speculated:
        return False
    if any(needs_torch(p) for p in paths):
        return False
    z.speculate = True
    return True


def loaders_started() -> bool:
    """The probe loaders' first forks are done (:func:`tileprobe.probe.contained.load_probe_files`, after its first
    fill; none when every plan came from the cache): the import :func:`speculate_torch_free` armed starts now,
    beside them. Returns whether it was asked."""
    z = current()
    if z is None or not z.speculate:
        return False
    z.speculate = False
    z.torch_free = z.speculated = True
    return z.prefetch_heavy()


def _replace_current() -> bool:
    """The current zygote imported :data:`HEAVY` without torch on a guess, and a probe needs torch: start a new
    zygote, make it the current one (loaders and workers from now on are forked from it) and let it import
    :data:`HEAVY` with torch as soon as it is ready (a thread waits for it). The old one is kept until
    :func:`warm_starts` ends (the loaders it forked still run). False when the new one cannot start, or this is not
    the main thread (workers then start fresh, as without a zygote: the old one refuses them)."""
    global _current
    if threading.current_thread() is not threading.main_thread():   # a zygote dies with the thread that started it
        return False
    with _lock:
        old = _current
        try:
            new = Zygote()
        except OSError:
            return False
        if old is not None:
            _retired.append(old)
        _current = new

    def prefetch() -> None:
        if new.wait_ready():
            new.prefetch_heavy()
    threading.Thread(target=prefetch, name="tileprobe-zygote-prefetch", daemon=True).start()
    return True


def allow_torch_free() -> bool:
    """Let the zygote of the :func:`warm_starts` in force import :data:`HEAVY` without torch, when it has not
    imported it yet: the audit calls this when no probe loader saw torch imported (``FileReport.uses_torch``).

    Why: cuTile's ``_cext.foreign_dtype_object_to_native`` imports torch (and ``ml_dtypes``) the first time it is
    called, at ``import cuda.tile._compile`` — 5.3 s of that import's 5.3 s on the H200 host, 1.9 of 2.2 s on the
    2-core machine (``python -X importtime``, 2026-12-02), before the first compile worker can start. With torch
    unimportable it answers "not a foreign dtype" and remembers that, so a worker forked from such a zygote cannot
    use torch dtypes: the compile of a probe that imports torch there anyway fails as ``broken_environment``
    naming :data:`TORCH_FREE_ENV` (:func:`torch_blocked`), and a worker asked for later with torch allowed is not
    forked from it (a fresh process starts instead). Returns whether it was allowed."""
    z = current()
    if z is None or os.environ.get(TORCH_FREE_ENV, "1") == "0":
        return False
    z.torch_free = True
    return True



#: Times one :func:`warm_starts` replaces a zygote that died or became distrusted while in use (a package imported
#: in it killed it, or wrote on its socket): past it, processes start fresh.
MAX_REPLACEMENTS = 2
_replacements = 0


def current() -> Zygote | None:
    """The zygote of the :func:`warm_starts` in force, when it is running in this environment; else None. One that
    died or became distrusted while in use is replaced by a new one (at most :data:`MAX_REPLACEMENTS` times, from
    the main thread), so one probe's damage does not turn every later start into a fresh Python."""
    global _replacements
    z = _current
    if z is not None and (z.dead or z.distrusted) and _replacements < MAX_REPLACEMENTS and \
            z.key == _env_key() and _replace_current():
        _replacements += 1
        z = _current
    if z is None or z.dead or z.distrusted or z.key != _env_key():
        return None
    return z


def replaced_after(z: Zygote) -> bool:
    """Whether a zygote other than ``z`` (which died or is distrusted) is current and running now (:func:`current`
    replaces it when it may): a loader that ``z`` took down with it can be started again from there."""
    now = current()
    return now is not None and now is not z


def start_loader(job: LoaderJob, msg_fd: int, env: dict, preload_s: float = PRELOAD_TIMEOUT_S) -> ZygoteProcess | None:
    """A probe loader (:func:`tileprobe.probe.loader_child.child_main`) forked from the zygote, its output on a pipe
    (``.stdout``); None when there is no zygote (the caller starts ``python -c`` as before). ``preload_s``: the
    most its installed packages' import in the zygote may take (:func:`installed_imports`; the probe's timeout)."""
    z = current()
    if z is None:
        return None
    heavy = needs_torch(job.path)
    preload = installed_imports(job.path) if heavy and os.environ.get(PRELOAD_ENV, "1") != "0" else ()
    try:
        return z.start("_loader_entry", (job.to_wire(),), [msg_fd], stdout=True, env=env, heavy=heavy, preload=preload,
                       preload_s=min(PRELOAD_TIMEOUT_S, preload_s))
    except ZygoteError:
        pass
    again = current()    # the zygote died or was distrusted on this start (its packages' import): a new one, which
    if again is None or again is z:   # does not import them (the loader does, contained), rather than a fresh
        return None                   # Python whose parent would be tileprobe itself
    try:
        return again.start("_loader_entry", (job.to_wire(),), [msg_fd], stdout=True, env=env, heavy=heavy)
    except ZygoteError:
        return None



def start_worker(conn, initargs: tuple) -> ZygoteProcess | None:
    """A compile worker (:func:`tileprobe.compile.pool.worker_main`) forked from the zygote, talking on ``conn``'s
    other end; None when there is no zygote (the pool spawns one as before)."""
    z = current()
    if z is None:
        return None
    try:
        return z.start("_worker_entry", (initargs,), [conn.fileno()], heavy=True)
    except ZygoteError:
        return None


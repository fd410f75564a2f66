"""Loader sessions: probe loader children that stay for a command's length, so a probe file is imported once per
command (:mod:`tileprobe.probe.contained`, "Sessions", says why and how). :func:`loader_sessions` enters one;
:class:`LoaderSession` holds its children, idle and busy, and ends them all with their process groups.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from tileprobe.probe.loader import PROBE_TIMEOUT_S, _child_key, _job, _Loader

#: ``TILEPROBE_KEEP_LOADERS=0``: :func:`loader_sessions` keeps no child (one child per job, as outside it).
KEEP_ENV = "TILEPROBE_KEEP_LOADERS"


class LoaderSession:
    """The live loader children of one :func:`loader_sessions` (module doc): idle ones by :func:`_child_key`,
    and every one started (idle or busy), to end them all at :meth:`close`. Thread-safe: a child is given to one
    job at a time (:meth:`loader` takes it off the idle list; :meth:`put_back` returns it).

    ``started`` / ``reused``: children started, and jobs given to a child that had run one before. ``tmp``: the
    session's own temp folder (``tileprobe-loaders-*``, owned: :func:`tileprobe.procs.make_owned_tempdir`), which
    holds each job's folder: a staying child keeps files there that its imports made, after the call that started
    it has removed its own folder."""

    def __init__(self):
        from tileprobe.procs import make_owned_tempdir
        self.lock = threading.Lock()
        self.idle: list[_Loader] = []
        self.live: list[_Loader] = []
        self.tmp = make_owned_tempdir("loaders")
        self.closed = False
        self.started = self.reused = 0
        self.saver: ThreadPoolExecutor | None = None   # plan-cache writes, one at a time (save_later)
        self.lookup = None       # a DefaultCompilerLookup started ahead (prefetch_compiler_lookup)
        self.ahead: dict = {}    # plan key -> Future of a load started ahead (tileprobe.probe.ahead)
        self.over = threading.Event()   # set when close() is done: a thread that started children waits for it

    def loader(self, path: str, targets, max_variants: int, timeout_s: float, tmp_root: str,
               overrides: tuple = (None, None), task: tuple | None = None, num_sms: int | None = None) -> _Loader:
        """A child running this job (:class:`_Loader`'s arguments): an idle one of the same :func:`_child_key`
        given it, else a new staying one. A busy child is never given a second job: a second job on its file meanwhile
        (the race thread's ``launch_facts`` while the main thread loads) gets a child of its own, which stays
        too. After :meth:`close`: a child of its own that does not stay, as outside a session."""
        key = _child_key(path)
        while True:
            with self.lock:
                if self.closed:
                    break
                found = next((l for l in self.idle if l.key == key), None)
                if found is None:
                    break
                self.idle.remove(found)
            try:
                given = found.again(_job(path, targets, max_variants, self.tmp, overrides, task, num_sms, True),
                                    timeout_s)
            except BaseException:    # the job's folder could not be made: the child waits for another
                self.put_back(found)
                raise
            if given:
                with self.lock:
                    self.reused += 1
                return found
            found.end()              # it had ended (its parent thread, a signal): dropped
            self.put_back(found)
        if self.closed:
            return _Loader(path, targets, max_variants, timeout_s, tmp_root, overrides, task, num_sms)
        new = _Loader(path, targets, max_variants, timeout_s, self.tmp, overrides, task, num_sms, stay=True)
        with self.lock:
            self.live.append(new)
            self.started += 1
        return new

    def put_back(self, loader: _Loader) -> None:
        """``loader``'s job is over (:meth:`_Loader.result`): a live one waits for the next job on its file; one
        ended, or any after :meth:`close`, is ended and forgotten."""
        with self.lock:
            if not loader.ended and not self.closed:
                self.idle.append(loader)
                return
            if loader in self.live:
                self.live.remove(loader)
        loader.end()

    def save_later(self, fn: Callable, *args) -> bool:
        """Run ``fn(*args)`` in the session's saver thread (started on first use); False after :meth:`close`. A
        failure stays in its future, unread: a cache write that fails is a miss next time, never an error."""
        with self.lock:
            if self.closed:
                return False
            if self.saver is None:
                self.saver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tileprobe-plan-saves")
            self.saver.submit(fn, *args)
        return True

    def close(self) -> None:
        """Finish the pending saves, end every child (with its process group) and remove the temp folder. An idle
        child is ended here; one busy in another thread is killed here and reaped by that thread (its job then
        reports the end)."""
        from tileprobe.procs import remove_owned_tempdir
        with self.lock:
            self.closed = True    # a save asked from now on is made by its caller (save_later says False)
            saver, self.saver = self.saver, None
        if saver is not None:
            saver.shutdown(wait=True)
        with self.lock:
            self.closed = True
            idle, busy = list(self.idle), [l for l in self.live if l not in self.idle]
            self.idle.clear()
            self.live.clear()
        try:
            for loader in busy:
                loader.kill()
            for loader in idle:
                loader.end()
        finally:
            remove_owned_tempdir(self.tmp)
            self.over.set()


_session: LoaderSession | None = None
_session_depth = 0
_session_lock = threading.Lock()


def keep_loaders() -> bool:
    """False when ``TILEPROBE_KEEP_LOADERS=0`` (:data:`KEEP_ENV`)."""
    return os.environ.get(KEEP_ENV, "1") != "0"


def current_session() -> LoaderSession | None:
    """The :class:`LoaderSession` of the :func:`loader_sessions` in force (any thread), or None."""
    return _session


@contextlib.contextmanager
def loader_sessions() -> Iterator[LoaderSession | None]:
    """Inside: :func:`~tileprobe.probe.contained.load_probe_files` and :func:`~tileprobe.probe.contained.run_probe_tasks` give each job to an idle live child of the
    same probe file (and working folder, ``sys.path``, environment) rather than starting one, so a file is
    imported once per command (module doc). Nested uses share one session; the outermost ends every child and
    removes their temp folders, on return, exception or Ctrl-C. Enter it inside
    :func:`tileprobe.probe.zygote.warm_starts` (children forked from its zygote die with it). Yields the session
    (None with ``TILEPROBE_KEEP_LOADERS=0``)."""
    global _session, _session_depth
    with _session_lock:
        _session_depth += 1
        if _session_depth == 1 and keep_loaders() and _session is None:
            _session = LoaderSession()
        session = _session
    try:
        yield session
    finally:
        with _session_lock:
            _session_depth -= 1
            ending = _session if _session_depth == 0 else None
            if ending is not None:
                _session = None
        if ending is not None:
            ending.close()


def prefetch_compiler_lookup(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Inside :func:`loader_sessions`: start finding the tileiras cuTile picks now
    (:class:`~tileprobe._cutile.DefaultCompilerLookup`), for the session's first :func:`load_probe_files` that asks
    (``find_compiler``): a tune starts it beside its plan, so that its audit need not wait for it (1.5 s of a cold
    tune's path on the H200 host when the answer was not kept, ``benchmarks/tune/trace_tune.py``, 2026-12-02). Returns
    whether one was started."""
    from tileprobe._cutile import DefaultCompilerLookup
    session = current_session()
    if session is None:
        return False
    with session.lock:
        if session.lookup is not None or session.closed:
            return False
        session.lookup = DefaultCompilerLookup(timeout_s)
    return True

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
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence

#: Modules the zygote imports before forking anything (0.1-0.3 s): cuTile's front (``import cuda.tile`` does not
#: import torch in cuda-tile 1.7.0) and tileprobe's loader and worker side.
PRELOAD = ("cuda.tile", "tileprobe.probe.define", "tileprobe.probe.signature", "tileprobe.compile.job",
           "tileprobe.probe.contained", "tileprobe.compile.pool")
#: Modules it imports before forking the first compile worker, or the loader of a probe file that looks like it
#: needs torch (:func:`needs_torch`): cuTile's compiler side, which imports torch (``foreign_dtype_object_to_native``
#: at import; 2.06 s of the 2-core machine). Not while idle: an import blocks the zygote, and a loader asked for
#: meanwhile would wait for it (6 s under load, 2026-12-02). A warm audit or tune of probes that need neither
#: (examples/rms_norm.py), every variant stored, never imports it.
HEAVY = ("cuda.tile._compile",)
#: ``TILEPROBE_PRELOAD=0``: the zygote imports no probe's installed packages (:func:`installed_imports`).
PRELOAD_ENV = "TILEPROBE_PRELOAD"
#: Seconds the zygote gives one probe's installed packages to import (:func:`_preload`); past it, it stops that
#: import and forks the loader, which imports them itself (and reports what goes wrong, with the probe's line).
PRELOAD_TIMEOUT_S = 60.0
#: ``TILEPROBE_TORCH_FREE=0``: always import :data:`HEAVY` with torch (see :func:`allow_torch_free`).
TORCH_FREE_ENV = "TILEPROBE_TORCH_FREE"
#: Seconds to wait for the zygote to import :data:`PRELOAD` before giving up on it (a fresh process then starts).
READY_TIMEOUT_S = 120.0
_MAX_MSG = 1 << 22
#: What the zygote may send, by kind: the types of the fields after the kind (``("exit", pid, status)``). Anything
#: else — a pickle, a message of another shape, a pid that is not a positive int — is not the zygote's own word
#: (a package imported in it wrote on its socket): :meth:`Zygote._take` distrusts the zygote from then on.
ZYGOTE_SENDS = {"ready": (), "started": (int,), "failed": (str,), "exit": (int, int)}
_BOOT = "from tileprobe.probe.zygote import zygote_main; zygote_main()"

_current: Zygote | None = None
#: Zygotes that were current before a wrong guess of :func:`speculate_torch_free` (kept until :func:`warm_starts`
#: ends: the loaders forked from them still run).
_retired: list = []
#: A zygote started by :func:`start_early` that no :func:`warm_starts` has taken yet.
_early: Zygote | None = None
_depth = 0
_lock = threading.RLock()


class ZygoteError(Exception):
    """The zygote could not start a process (the caller starts a fresh one instead)."""


class ZygoteProcess:
    """A process forked by the zygote, as its starter sees it (not its parent: the zygote reports its exit).

    ``returncode`` / ``exitcode``: None while it runs, else the exit status (negative: the signal that ended it).
    ``stdout``: the read end of its output pipe when one was asked for.
    """

    def __init__(self, zygote: Zygote, pid: int, stdout=None):
        self.zygote, self.pid, self.stdout, self.returncode = zygote, pid, stdout, None

    def poll(self) -> int | None:
        """The exit status if it has ended (without waiting), else None."""
        if self.returncode is None:
            self.zygote.pump(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` s (None: no limit) for it to end; its exit status, or None when it still runs."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            self.zygote.pump(0.5 if left is None else min(0.5, left))
        return self.returncode

    join = wait

    @property
    def exitcode(self) -> int | None:
        """:meth:`poll` under :class:`multiprocessing.Process`'s name."""
        return self.poll()


class Zygote:
    """The client side of one zygote process (module doc). Not thread-safe beyond its own lock."""

    def __init__(self):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        from tileprobe.procs import arm_guard, importable_env
        arm_guard()   # the zygote carries the guard's mark, and is guarded with what it adopts (below)
        env = importable_env()
        self.key = _env_key()
        from tileprobe.procs import make_owned_tempdir
        # the zygote's temp folder is this process's: removed by close() however the zygote ended, and by the next
        # run's sweep when this process is SIGKILLed (a folder the zygote owned could lose its marker mid-removal)
        self.tmp = make_owned_tempdir("zygote")
        # no pid of ours on its command line (a package imported in it reads its argv); it dies with us all the same
        argv = [sys.executable, "-c", _BOOT, str(child.fileno()), self.tmp]
        try:
            self.proc = subprocess.Popen(argv, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True, env=env)
        except BaseException:   # OSError, or Ctrl-C in the start (the console entry point starts one early)
            from tileprobe.procs import remove_owned_tempdir
            remove_owned_tempdir(self.tmp)
            parent.close()
            raise
        finally:
            child.close()
        self.sock, self.pid = parent, self.proc.pid
        from tileprobe.procs import guard
        guard(self.pid)   # it adopts its children's orphans (zygote_main): the guard ends them if we are SIGKILLed
        self.ready, self.dead = False, False
        #: Why the zygote is no longer trusted (it sent something that is not its message), or None.
        self.distrusted: str | None = None
        self.children: dict[int, ZygoteProcess] = {}
        self.exits: dict[int, int] = {}      # exits read before their start was registered
        self.lock = threading.RLock()
        self._replies: list = []
        self.torch_free = False   # compile workers may start from a cuTile imported without torch (allow_torch_free)
        #: :func:`speculate_torch_free`: whether :data:`HEAVY` is to be imported without torch once the loaders are
        #: started (:func:`loaders_started`), and whether that import was asked for on that guess.
        self.speculate, self.speculated = False, False

    # --- messages ----------------------------------------------------------------------------------------------
    def pump(self, timeout: float) -> None:
        """Read the zygote's messages that arrive within ``timeout`` s (exits, replies)."""
        import select
        with self.lock:
            if self.dead:
                return
            r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            while r:
                try:
                    data = self.sock.recv(_MAX_MSG)
                except OSError:
                    data = b""
                if not data:
                    self._died()
                    return
                self._take(data)
                r, _, _ = select.select([self.sock], [], [], 0.0)

    def _take(self, data: bytes) -> None:
        """One message of the zygote (:data:`ZYGOTE_SENDS`, as :mod:`tileprobe.probe.wire` data: nothing in it runs
        here; a ``started`` pid must be a child of the zygote or gone, an ``exit`` pid no running child). One that is not
        such a message makes the zygote distrusted (:attr:`distrusted`): no process is started from it any more
        (each starts fresh: :func:`current` is None); the start waiting for its answer and the children it already
        started go on, with their own messages."""
        from tileprobe.probe import wire
        try:
            msg = wire.loads(data)
            if type(msg) is not tuple or not msg or msg[0] not in ZYGOTE_SENDS:
                raise wire.WireError(f"not a kind the zygote sends: {wire._short_repr(msg)}")
            fields = ZYGOTE_SENDS[msg[0]]
            if len(msg) != 1 + len(fields) or any(type(v) is not t for v, t in zip(msg[1:], fields)) or \
                    (msg[0] in ("started", "exit") and msg[1] <= 0):
                raise wire.WireError(f"a {msg[0]!r} message of the wrong shape: {wire._short_repr(msg)}")
            if msg[0] == "started" and _parent_of(msg[1]) not in (None, self.pid):
                raise wire.WireError(f"'started' of pid {msg[1]}, which is not a child of the zygote")
            if msg[0] == "exit" and _running_child_of(msg[1], self.pid):
                raise wire.WireError(f"'exit' of pid {msg[1]}, a child of the zygote that still runs")
        except wire.WireError as e:
            self.distrusted = self.distrusted or str(e)   # a start waiting for its answer goes on waiting for it
            return
        kind = msg[0]
        if kind == "ready":
            self.ready = True
        elif kind == "exit":
            child = self.children.pop(msg[1], None)
            if child is not None:
                child.returncode = msg[2]
            else:
                self.exits[msg[1]] = msg[2]
        else:
            self._replies.append(msg)

    def _kill_group(self) -> None:
        """SIGKILL the zygote's process group (its own session: the zygote, and what a package it imported
        started, e.g. a ``subprocess.Popen`` at import; loaders have sessions of their own). Only while the zygote
        is not reaped, so its pid, the group's id, cannot have been reused."""
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)

    def _died(self) -> None:
        """The zygote ended: its children got their parent-death signals; say so and make sure."""
        from tileprobe.procs import kill_tree
        self.dead = True
        for pid, child in list(self.children.items()):
            kill_tree(pid)
            child.returncode = -signal.SIGKILL
        self.children.clear()

    def prefetch_heavy(self) -> bool:
        """Ask the zygote to import :data:`HEAVY` now (without torch when :attr:`torch_free`), without forking
        anything and without waiting: the first compile worker's fork then need not wait for that import (0.59 s
        of a cold tune's path on the H200 host, ``benchmarks/tune/trace_tune.py``, 2026-12-02). False when the zygote
        is not running or did not take the request."""
        with self.lock:
            if not self.ready or self.dead:
                return False
            req = {"prefetch": True, "torch_free": self.torch_free}
            try:
                socket.send_fds(self.sock, [_request(req)], [])
            except OSError:
                self._died()
                return False
        return True

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Wait for the zygote's imports; False when it died or did not answer in time."""
        end = time.monotonic() + timeout_s
        while not self.ready and not self.dead and time.monotonic() < end:
            self.pump(min(0.5, max(0.0, end - time.monotonic())))
        return self.ready and not self.dead

    def start(self, entry: str, args: tuple, fds: list[int], *, stdout: bool = False,
              env: dict | None = None, heavy: bool = False, preload: tuple = (),
              preload_s: float = PRELOAD_TIMEOUT_S) -> ZygoteProcess:
        """Fork a child that runs ``entry`` (a function of this module: ``_loader_entry`` / ``_worker_entry``) with
        the received ``fds`` and ``args``, in this process's environment, cwd and ``sys.path``. ``stdout``: its
        fds 1 and 2 go to a new pipe, whose read end is the process's ``stdout``. ``heavy``: fork it after
        :data:`HEAVY` is imported. ``preload``: with ``heavy``, the installed packages (:func:`installed_imports`)
        the zygote imports before forking it (once each; every later fork has them), within ``preload_s``. A zygote
        that does not answer within :data:`READY_TIMEOUT_S` plus that (an import that defeated its alarm) is
        killed, and this raises.

        Raises:
            ZygoteError: the zygote is gone or did not start the child.
        """
        with self.lock:
            if not self.wait_ready() or self.distrusted:
                raise ZygoteError("the zygote is not running" if not self.distrusted else
                                  f"the zygote is not trusted: {self.distrusted}")
            out_r = out_w = None
            if stdout:
                out_r, out_w = os.pipe()
            req = {"entry": entry, "args": args, "env": dict(env if env is not None else os.environ),
                   "cwd": os.getcwd(), "sys_path": list(sys.path), "nfds": len(fds), "stdout": stdout, "heavy": heavy,
                   "torch_free": self.torch_free, "preload": list(preload), "preload_s": preload_s}
            try:
                socket.send_fds(self.sock, [_request(req)], list(fds) + ([out_w] if stdout else []))
                late = time.monotonic() + READY_TIMEOUT_S + (preload_s if preload else 0.0)
                while not self._replies and not self.dead:
                    if time.monotonic() > late:      # stuck (a package's import that stopped the alarm)
                        self._kill_group()
                        self._died()
                        break
                    self.pump(1.0)
            except OSError as e:
                self._died()
                raise ZygoteError(f"the zygote did not take the request: {e}") from e
            finally:
                if out_w is not None:
                    os.close(out_w)
            if self.dead or not self._replies:
                if out_r is not None:
                    os.close(out_r)
                raise ZygoteError("the zygote ended")
            kind, value = self._replies.pop(0)
            if kind != "started":
                if out_r is not None:
                    os.close(out_r)
                raise ZygoteError(f"the zygote did not start the process: {value}")
            child = ZygoteProcess(self, value, os.fdopen(out_r, "rb", buffering=0) if stdout else None)
            if value in self.exits:
                child.returncode = self.exits.pop(value)
            else:
                self.children[value] = child
            return child

    #: Seconds :meth:`close` gives the zygote to remove its temp folder and exit after SIGTERM; a zygote inside a
    #: seconds-long import (torch) handles the signal only after it, so it is killed then and its folder swept.
    CLOSE_GRACE_S = 1.0

    def close(self) -> None:
        """End the zygote: closing its socket makes it exit (it ignores SIGTERM and the other catchable signals, so
        a probe that signals its parent cannot end it); one still there after :attr:`CLOSE_GRACE_S` is SIGKILLed. Its temp folder (this process's) is then removed, so nothing of it is left when the command
        returns; its children get their parent-death signals (their ``poll``/``wait`` say -SIGKILL from now on,
        rather than asking a closed socket)."""
        with self.lock:
            self.dead = True
            for child in self.children.values():
                child.returncode = -signal.SIGKILL
            self.children.clear()
            with contextlib.suppress(OSError):
                self.sock.close()
        from tileprobe.procs import kill_tree, remove_owned_tempdir, stop_process, sweep_leftovers, unguard
        if self.proc.poll() is None:   # what probe code left running, adopted by the zygote (zygote_main)
            kill_tree(self.pid, include_self=False)
        stop_process(self.proc, self.CLOSE_GRACE_S)
        if self.proc.poll() is not None:
            unguard(self.pid)
        remove_owned_tempdir(self.tmp)
        sweep_leftovers()   # those of zygotes whose command was SIGKILLed (their marker's owner was perhaps not yet
        #                     reaped when this command's start swept)


def _parent_of(pid: int) -> int | None:
    """The parent pid of process ``pid``; None when there is no such process (it was reaped)."""
    from tileprobe.procs import _stat_fields
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[1])


def _running_child_of(pid: int, parent: int) -> bool:
    """Whether ``pid`` is a process that runs (not a zombie) and whose parent is ``parent`` (``/proc``)."""
    from tileprobe.procs import _stat_fields
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z" and fields[1] == str(parent)


#: Variables a command may change after its zygote started that no import reads: the guard's (set once it starts)
#: and the terminal's size (the CLI drops an empty or invalid ``COLUMNS``/``LINES``, tileprobe/cli/_common.py).
#: Each child gets the caller's environment anyway.
_NOT_KEYED = ("COLUMNS", "LINES")


def _env_key() -> tuple:
    from tileprobe.procs import GUARD_ENV
    skip = (GUARD_ENV, *_NOT_KEYED)
    return (sys.executable, tuple(sorted((k, v) for k, v in os.environ.items() if k not in skip)))


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


#: In a process forked from a zygote that imported :data:`HEAVY` without torch: True (see :func:`allow_torch_free`).
_TORCH_BLOCKED = False
#: In the zygote: its import of :data:`HEAVY` raised (it then forks no compile worker: they start fresh).
_HEAVY_FAILED = False


def torch_blocked() -> bool:
    """Whether this process's cuTile was imported with torch unimportable (:func:`allow_torch_free`): its
    ``foreign_dtype_object_to_native`` does not know torch dtypes, even once torch is imported."""
    return _TORCH_BLOCKED


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


def start_loader(job: dict, msg_fd: int, env: dict, preload_s: float = PRELOAD_TIMEOUT_S) -> ZygoteProcess | None:
    """A probe loader (:func:`tileprobe.probe.contained.child_main`) forked from the zygote, its output on a pipe
    (``.stdout``); None when there is no zygote (the caller starts ``python -c`` as before). ``preload_s``: the
    most its installed packages' import in the zygote may take (:func:`installed_imports`; the probe's timeout)."""
    z = current()
    if z is None:
        return None
    heavy = needs_torch(job["path"])
    preload = installed_imports(job["path"]) if heavy and os.environ.get(PRELOAD_ENV, "1") != "0" else ()
    try:
        return z.start("_loader_entry", (job,), [msg_fd], stdout=True, env=env, heavy=heavy, preload=preload,
                       preload_s=min(PRELOAD_TIMEOUT_S, preload_s))
    except ZygoteError:
        pass
    again = current()    # the zygote died or was distrusted on this start (its packages' import): a new one, which
    if again is None or again is z:   # does not import them (the loader does, contained), rather than a fresh
        return None                   # Python whose parent would be tileprobe itself
    try:
        return again.start("_loader_entry", (job,), [msg_fd], stdout=True, env=env, heavy=heavy)
    except ZygoteError:
        return None


#: A kernel named as ``"package.module:function"`` (a string constant of the probe file; comments are not read).
_KERNEL_NAME = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)*:\w+")


def installed_imports(path: str) -> tuple[str, ...]:
    """Top-level names of the installed packages probe file ``path`` imports at module level (``import X``,
    ``from X.y import z``) or names a kernel in (``"X.ops.mod:kernel"``), read with :mod:`ast` (nothing of it runs):
    those found (:func:`importlib.util.find_spec` of a top-level name runs no package code) outside the probe's
    folder and the working directory (a site-packages folder inside them counts as installed: a venv in the
    repository), and outside the standard library, ``tileprobe`` and ``cuda``.

    Why: the zygote imports them once before it forks the probe's loader, and the compile workers
    forked after it have them. On the H200 host each compile worker of the TileGym matmul spent 3.4–4.8 s on its
    first job, 0.3–0.5 s of it in tileiras: it imported TileGym (torch, transformers) again
    (``benchmarks/tune/trace_tune.py``, 2026-12-02). The user's own modules (beside the probe, or in the working
    directory) are left to the loader, which runs them contained and reports their errors. ``()`` for a file that
    cannot be read or parsed (its loader reports that)."""
    import ast
    import importlib.util
    try:
        tree = ast.parse(_text(path))
        names = []
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
        names += [m.group(1) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and (m := _KERNEL_NAME.fullmatch(node.value))]
    except Exception:
        return ()
    from tileprobe.probe.plancache import installed_roots
    user = tuple(os.path.join(os.path.realpath(d), "") for d in (os.path.dirname(os.path.abspath(path)), os.getcwd()))
    installed = tuple(r for r in installed_roots() if r not in user)
    out = []
    for top in dict.fromkeys(n.partition(".")[0] for n in names):
        if top in sys.stdlib_module_names or top in ("tileprobe", "cuda", "__future__"):
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        where = spec and (spec.origin if spec.origin not in (None, "namespace") else
                          next(iter(spec.submodule_search_locations or ()), None))
        real = where and os.path.realpath(where)
        if real and (real.startswith(installed) or not real.startswith(user)):
            out.append(top)
    return tuple(out)


def _text(path: str) -> str:
    """The first MiB of ``path`` as text ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def needs_torch(path: str) -> bool:
    """Whether probe file ``path`` looks like it imports torch (it imports ``torch`` or ``tilegym``, or names a kernel
    in them as ``"tilegym.…"``): its loader is
    then forked after :data:`HEAVY` (torch with it) is imported once, rather than importing torch itself. A guess
    that only moves time: a wrong one costs that loader its own torch import, or a wait for the zygote's."""
    text = _text(path)
    return _NEEDS_TORCH.search(text) is not None


#: ``import torch`` / ``from tilegym…`` (also after ``;`` or among other names: ``import os, torch``), and a string
#: naming them (``"tilegym.ops…:k"``, ``import_module("torch")``, ``__import__('torch')``).
_NEEDS_TORCH = re.compile(r"(?:^|;)\s*from\s+(?:torch|tilegym)\b|(?:^|;)\s*import\s+[\w., ]*?\b(?:torch|tilegym)\b"
                          r"|[\"'](?:torch|tilegym)[.:\"']", re.M)


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


# --- the zygote's side ---------------------------------------------------------------------------------------------

def _request(req: dict) -> bytes:
    """A request to the zygote as :mod:`tileprobe.probe.wire` data (never a pickle, either way)."""
    from tileprobe.probe import wire
    return wire.dumps(req, "the zygote's request")


#: Signals the zygote ignores: every one whose default ends a process and that can be caught. Its children (probe
#: loaders) can reach it with ``os.kill(os.getppid(), …)``; the zygote's end would end every other probe's loader.
#: It ends when its socket closes (:meth:`Zygote.close`), by SIGKILL, or with its parent (``PR_SET_PDEATHSIG``).
#: SIGCHLD is not among them (ignoring it would reap the children before the reaper reads their status).
_IGNORED = tuple(sig for sig in (
    signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
    signal.SIGPIPE, signal.SIGVTALRM, signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGTSTP,
    signal.SIGTTIN, signal.SIGTTOU, getattr(signal, "SIGIO", None), getattr(signal, "SIGPWR", None),
    getattr(signal, "SIGSTKFLT", None), *range(signal.SIGRTMIN, signal.SIGRTMAX + 1)) if sig is not None)


def zygote_main() -> None:
    """Entry of the zygote: ``python -c … FD TMPDIR``. Imports :data:`PRELOAD`, says ("ready",), then forks one
    child per request and reports ("started", pid) and, when it ends, ("exit", pid, status) (:data:`ZYGOTE_SENDS`,
    as wire data); :data:`HEAVY` is imported before the first request that needs it. It is not told its parent's
    pid: it dies with its parent (``PR_SET_PDEATHSIG``), and a parent that died before that was set has closed the
    socket, which ends it too (:func:`_exit_on_hangup`)."""
    import importlib
    import tempfile

    from tileprobe.procs import adopt_orphans, die_with_parent
    sock = socket.socket(fileno=int(sys.argv[1]))
    die_with_parent(signal.SIGKILL)
    adopt_orphans()   # what a loader or worker leaves (a probe's setsid child) stays ours: the close and guard end it
    threading.Thread(target=_exit_on_hangup, args=(sock.fileno(),), name="tileprobe-zygote-hangup",
                     daemon=True).start()
    for sig in _IGNORED:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    tempfile.tempdir = sys.argv[2]      # cuTile's import makes a temp folder: inside the caller's, which it removes
    for name in PRELOAD:
        importlib.import_module(name)
    reaper = _Reaper(sock)
    _send(sock, ("ready",), reaper.lock)
    _serve(sock, reaper)
    os._exit(0)      # no interpreter teardown (torch's takes 0.5 s): the caller removes the folder


def _exit_on_hangup(fd: int) -> None:
    """A thread of the zygote: exit as soon as the other end of socket ``fd`` is closed (:meth:`Zygote.close`, or
    the parent's death), even while the main thread is inside a seconds-long import."""
    import select
    poller = select.poll()
    poller.register(fd, select.POLLRDHUP)
    while True:
        with contextlib.suppress(InterruptedError):
            for _fd, event in poller.poll():
                if event & (select.POLLHUP | select.POLLRDHUP | select.POLLERR | select.POLLNVAL):
                    os._exit(0)


def _send(sock, msg: tuple, lock) -> None:
    from tileprobe.probe import wire
    with lock, contextlib.suppress(OSError):
        sock.send(wire.dumps(msg, "the zygote's message"))


class _Reaper:
    """A thread of the zygote that reaps its children and reports each exit at once, even while the main thread
    imports :data:`HEAVY` (seconds)."""

    def __init__(self, sock):
        self.sock, self.lock = sock, threading.Lock()
        self.forks, self.cond = 0, threading.Condition()
        threading.Thread(target=self._run, name="tileprobe-zygote-reaper", daemon=True).start()

    def forked(self) -> None:
        """A child was forked: there is something to wait for."""
        with self.cond:
            self.forks += 1
            self.cond.notify()

    def _run(self) -> None:
        seen = 0
        while True:
            with self.cond:
                while self.forks == seen:
                    self.cond.wait()
                before = self.forks          # every child counted here exists already
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:        # all reaped: wait for a fork after ``before``
                seen = before
                continue
            _send(self.sock, ("exit", pid, os.waitstatus_to_exitcode(status)), self.lock)


def _serve(sock, reaper: _Reaper) -> None:
    import select
    heavy = list(HEAVY)
    while True:
        try:
            select.select([sock], [], [])
        except InterruptedError:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MSG, 16)
        except OSError:
            return
        if not data:
            return
        from tileprobe.probe import wire
        try:
            req = wire.loads(data)
        except wire.WireError:
            req = None
        if type(req) is not dict:
            for fd in fds:
                os.close(fd)
            _send(sock, ("failed", "a request that is not one"), reaper.lock)
            continue
        if req.get("prefetch"):       # Zygote.prefetch_heavy: import now, fork nothing, answer nothing
            for fd in fds:
                os.close(fd)
            if heavy:
                _import_heavy(heavy, bool(req.get("torch_free")))
            continue
        if req.get("heavy") and heavy:
            _import_heavy(heavy, bool(req.get("torch_free")))
        if req.get("heavy") and req.get("preload") and not _HEAVY_FAILED and not _TORCH_BLOCKED:
            _preload(req["preload"], req["sys_path"], float(req.get("preload_s") or PRELOAD_TIMEOUT_S))
        refused = ("its import of cuTile failed" if _HEAVY_FAILED else
                   "its cuTile was imported without torch" if _TORCH_BLOCKED and not req.get("torch_free") else None)
        if req.get("heavy") and refused:
            for fd in fds:
                os.close(fd)
            _send(sock, ("failed", refused), reaper.lock)
            continue
        _fork(sock, req, fds, reaper)


def _import_heavy(heavy: list, torch_free: bool) -> None:
    """Import :data:`HEAVY` (emptying ``heavy``), without torch when ``torch_free`` and torch is not imported yet."""
    import importlib
    global _TORCH_BLOCKED
    global _HEAVY_FAILED
    from tileprobe._cutile import NoTorch
    blocker = NoTorch() if torch_free and "torch" not in sys.modules else None
    if blocker is not None:
        sys.meta_path.insert(0, blocker)
    try:
        while heavy:
            importlib.import_module(heavy.pop(0))
    except Exception:
        _HEAVY_FAILED = True
    finally:
        if blocker is not None:
            sys.meta_path.remove(blocker)
            _TORCH_BLOCKED = True


class _PreloadTimeout(BaseException):
    """:data:`PRELOAD_TIMEOUT_S` passed in :func:`_preload` (a BaseException: an ``except Exception`` of the
    package's own import code does not swallow it)."""


def _preload(names: list, path: list, limit_s: float = PRELOAD_TIMEOUT_S) -> None:
    """Import the installed packages ``names`` here (the zygote), each at most once, all within ``limit_s``
    (:data:`PRELOAD_TIMEOUT_S` or the probe's own timeout, the lower), with the asking command's ``sys.path``
    (``path``; each fork sets its own anyway). One that fails in any way (``sys.exit`` too), or takes longer, is
    undone — every module its import added is removed, so the loader imports it afresh and reports what went wrong
    (not a side effect of this half-done import) — and the rest are not tried. The signal handlers are put back
    as they were (a package that ignores SIGCHLD would stop the zygote's reaping). Their output goes where the
    zygote's does (nowhere): a package's import-time warnings are not shown (``TILEPROBE_PRELOAD=0`` shows them)."""
    import importlib
    sys.path[:] = path
    handlers = {s: signal.getsignal(s) for s in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGALRM,
                                                 signal.SIGPIPE, signal.SIGHUP)}

    def _late(*_):
        raise _PreloadTimeout()
    signal.signal(signal.SIGALRM, _late)
    signal.setitimer(signal.ITIMER_REAL, max(0.1, limit_s))
    try:
        for name in names:
            if name in sys.modules:
                continue
            before = set(sys.modules)
            try:
                importlib.import_module(name)
            except BaseException:
                for added in set(sys.modules) - before:
                    sys.modules.pop(added, None)
                break
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in handlers.items():
            with contextlib.suppress(TypeError, ValueError, OSError):
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _fork(sock, req: dict, fds: list[int], reaper: _Reaper) -> None:
    zygote = os.getpid()
    try:
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        _send(sock, ("failed", str(e)), reaper.lock)
        return
    if pid == 0:
        code = 1
        try:
            sock.close()
            _nanny(zygote)            # returns in a child of this process, which runs the entry
            for sig in _IGNORED:      # the zygote's ignores are not the child's (an ignore survives exec)
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the command's; it stops its children
            os.environ.clear()
            os.environ.update(req["env"])
            os.chdir(req["cwd"])
            sys.path[:] = req["sys_path"]
            if req["stdout"]:
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.dup2(fds[-1], 1)
                os.dup2(fds[-1], 2)
                os.close(fds[-1])
            entry: Callable = globals()[req["entry"]]
            entry(fds[:req["nfds"]], *req["args"])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            with contextlib.suppress(Exception):
                import traceback
                traceback.print_exc()
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    _send(sock, ("started", pid), reaper.lock)
    reaper.forked()


def _nanny(zygote: int) -> None:
    """In a child of the zygote: fork the process that runs the entry (a loader, a worker: probe code) and stay its
    parent, so that what probe code does to its parent (``os.kill(os.getppid(), SIGKILL)``) ends only its own
    process, never the zygote and every other probe's loader with it. Returns in that process (whose parent-death
    signal is set by the entry, :func:`tileprobe.procs.die_with_parent`); here, it ignores the catchable signals
    (as the zygote), keeps no file of the job open, waits for it and ends as it ended (its exit status, or the same
    signal), which the zygote reports for the pid it started. Dies with the zygote (``PR_SET_PDEATHSIG``)."""
    global _NANNIED
    from tileprobe.procs import die_with_parent
    die_with_parent(signal.SIGKILL, zygote)
    child = os.fork()
    if child == 0:
        _NANNIED = True
        return
    for sig in _IGNORED:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, 1 << 16)
    while True:
        try:
            _pid, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        os.kill(os.getpid(), signal.SIGKILL)    # a signal whose default does not end a process: end anyway
    os._exit(code & 0xFF)


#: Whether this process runs under a nanny (:func:`_nanny`) already.
_NANNIED = False


def under_nanny(parent: int) -> int:
    """In a loader or compile worker that was not forked from the zygote (``TILEPROBE_ZYGOTE=0``, no zygote): put
    a nanny between it and ``parent`` (tileprobe, :func:`_nanny`), so ``os.kill(os.getppid(), …)`` in probe code
    reaches the nanny, not tileprobe. Returns the pid to die with from now on (the nanny; ``parent`` when this
    process already has one). The nanny keeps this process's pid, which its starter knows."""
    if _NANNIED:
        return parent
    _nanny(parent)
    return os.getppid()


def _loader_entry(fds: list[int], job: dict) -> None:
    """A probe loader in a zygote's child: :func:`tileprobe.probe.contained.child_main` with its usual argv."""
    child_main = _function("tileprobe.probe.contained:child_main")
    os.setsid()                   # as the loader's Popen(start_new_session=True)
    job = dict(job, parent=os.getppid())
    sys.argv = ["-c", str(fds[0]), __import__("json").dumps(job)]
    child_main()


def _worker_entry(fds: list[int], initargs: tuple) -> None:
    """A compile worker in a zygote's child: :func:`tileprobe.compile.pool.worker_main` on the received pipe."""
    from multiprocessing.connection import Connection
    worker_main = _function("tileprobe.compile.pool:worker_main")
    worker_main(Connection(fds[0]), initargs, os.getppid())


def _function(name: str) -> Callable:
    """``"module:function"`` → the function (the loader and the pool call this module: named, not imported, here)."""
    import importlib
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)

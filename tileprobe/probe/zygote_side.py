"""The zygote process's own side (:mod:`tileprobe.probe.zygote` has the whole story): :func:`zygote_main` imports
:data:`PRELOAD`, then forks one child per request, each under a nanny of its own (:func:`_nanny`), and reports
starts and exits as data (:data:`ZYGOTE_SENDS`). Also what its children run first (:func:`_loader_entry`,
:func:`_worker_entry`, :func:`under_nanny`) and the protocol's limits. Nothing here runs in the tileprobe process.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

#: Modules the zygote imports before forking anything (0.1-0.3 s): cuTile's front (``import cuda.tile`` does not
#: import torch in cuda-tile 1.7.0) and tileprobe's loader and worker side.
PRELOAD = ("cuda.tile", "tileprobe.probe.define", "tileprobe.probe.signature", "tileprobe.compile.job",
           "tileprobe.probe.loader_child", "tileprobe.compile.pool")
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



#: In a process forked from a zygote that imported :data:`HEAVY` without torch: True (see :func:`allow_torch_free`).
_TORCH_BLOCKED = False
#: In the zygote: its import of :data:`HEAVY` raised (it then forks no compile worker: they start fresh).
_HEAVY_FAILED = False


def torch_blocked() -> bool:
    """Whether this process's cuTile was imported with torch unimportable (:func:`allow_torch_free`): its
    ``foreign_dtype_object_to_native`` does not know torch dtypes, even once torch is imported."""
    return _TORCH_BLOCKED


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

    from tileprobe.procs import die_with_parent
    from tileprobe.program_procs import adopt_orphans
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


@dataclass
class ForkRequest:
    """What the tileprobe process asks its zygote (:meth:`tileprobe.probe.zygote_client.Zygote.start`, as a
    :mod:`tileprobe.probe.wire` object; the format is docs/FAILURES.md's): fork a child that runs the function
    ``entry`` of this module with the first ``nfds`` received descriptors and ``args``, in the environment ``env``,
    folder ``cwd`` and ``sys.path`` given, its output on the last descriptor when ``stdout``; ``heavy``: after
    :data:`HEAVY` is imported (without torch only when ``torch_free``), ``preload`` imported first within
    ``preload_s`` s. ``prefetch`` (``Zygote.prefetch_heavy``): import :data:`HEAVY` now, fork nothing."""
    entry: str = ""
    args: list = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    sys_path: list[str] = field(default_factory=list)
    nfds: int = 0
    stdout: bool | None = False
    heavy: bool | None = False
    torch_free: bool | None = False
    preload: list[str] = field(default_factory=list)
    preload_s: float | None = None
    prefetch: bool | None = False

    @classmethod
    def from_wire(cls, data: bytes) -> ForkRequest | str:
        """The request in ``data`` (a wire message), each field's type checked; or, for anything else (no wire
        object, not an object, a field of the wrong type), what to answer with ("failed", it)."""
        from tileprobe.jsonrecord import FieldError, from_dict
        from tileprobe.probe import wire
        try:
            req = wire.loads(data)
        except wire.WireError:
            req = None
        if type(req) is not dict:
            return "a request that is not one"
        try:
            return from_dict(cls, req, where="the zygote's request")
        except FieldError as e:
            return f"a request that is not one ({e})"


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
        req = ForkRequest.from_wire(data)
        if isinstance(req, str):
            for fd in fds:
                os.close(fd)
            _send(sock, ("failed", req), reaper.lock)
            continue
        if req.prefetch:       # Zygote.prefetch_heavy: import now, fork nothing, answer nothing
            for fd in fds:
                os.close(fd)
            if heavy:
                _import_heavy(heavy, bool(req.torch_free))
            continue
        if req.heavy and heavy:
            _import_heavy(heavy, bool(req.torch_free))
        if req.heavy and req.preload and not _HEAVY_FAILED and not _TORCH_BLOCKED:
            _preload(req.preload, req.sys_path, float(req.preload_s or PRELOAD_TIMEOUT_S))
        refused = ("its import of cuTile failed" if _HEAVY_FAILED else
                   "its cuTile was imported without torch" if _TORCH_BLOCKED and not req.torch_free else None)
        if req.heavy and refused:
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


def _fork(sock, req: ForkRequest, fds: list[int], reaper: _Reaper) -> None:
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
            os.environ.update(req.env)
            os.chdir(req.cwd)
            sys.path[:] = req.sys_path
            if req.stdout:
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.dup2(fds[-1], 1)
                os.dup2(fds[-1], 2)
                os.close(fds[-1])
            entry: Callable = globals()[req.entry]
            entry(fds[:req.nfds], *req.args)
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
    """A probe loader in a zygote's child: :func:`tileprobe.probe.loader_child.child_main` with its usual argv."""
    child_main = _function("tileprobe.probe.loader_child:child_main")
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

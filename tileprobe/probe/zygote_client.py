"""One zygote process as its starter sees it (:mod:`tileprobe.probe.zygote` has the whole story): :class:`Zygote`
starts it, reads its messages (data only, checked against :data:`~tileprobe.probe.zygote_side.ZYGOTE_SENDS`: a
zygote that sends anything else is distrusted), asks it to fork loaders and workers, and ends it;
:class:`ZygoteProcess` is one process it forked, answering ``poll``/``wait`` as :class:`subprocess.Popen`.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from tileprobe.probe.zygote_side import _MAX_MSG, HEAVY, PRELOAD, PRELOAD_TIMEOUT_S, READY_TIMEOUT_S, ZYGOTE_SENDS  # noqa: F401

_BOOT = "from tileprobe.probe.zygote_side import zygote_main; zygote_main()"


class ZygoteError(Exception):
    """The zygote could not start a process (the caller starts a fresh one instead)."""



class ZygoteProcess:
    """A process forked by the zygote, as its starter sees it (not its parent: the zygote reports its exit).

    ``returncode`` / ``exitcode``: None while it runs, else the exit status (negative: the signal that ended it).
    ``stdout``: the read end of its output pipe when one was asked for.
    """

    def __init__(self, zygote: Zygote, pid: int, stdout=None):
        self.zygote, self.pid, self.stdout = zygote, pid, stdout
        self.returncode: int | None = None

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
                socket.send_fds(self.sock, [_request(req)], list(fds) + ([out_w] if out_w is not None else []))
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
            child = ZygoteProcess(self, value, os.fdopen(out_r, "rb", buffering=0) if out_r is not None else None)
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



def _request(req: dict) -> bytes:
    """A request to the zygote as :mod:`tileprobe.probe.wire` data (never a pickle, either way)."""
    from tileprobe.probe import wire
    return wire.dumps(req, "the zygote's request")

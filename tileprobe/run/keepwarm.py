"""The client of the kept-warm GPU worker (:mod:`tileprobe.run.warmserver`): a watchdog whose worker outlives the
command, so a warm re-tune does not wait for Python, torch and a CUDA context (4-5.5 s on the H100/H200).

:class:`KeptWarmWatchdog` has the :class:`~tileprobe.run.watchdog.Watchdog` interface the tune uses (``start``,
``submit``, ``close``, ``timeout_s``, ``info``, ``restarts``). ``start`` connects to the user's server for this
GPU and environment, or starts one (under a lock file, so two commands do not both start one), removing a stale
socket (a file nobody listens on) first. It refuses, and uses a worker of its own instead (:attr:`note` says why),
when the runtime folder or the socket is not the user's own or is open to others, when the server's peer is another
user, or when the server is busy with another command past :data:`BUSY_WAIT_S`.

The nanny: each task's answer must come within its timeout plus the worker's start-up allowance plus
:data:`NANNY_MARGIN_S`; the server's own watchdog turns a stuck *worker* into a ``hang`` well before that, so a
server that says nothing by then is stuck itself: it is ended (SIGKILL to its process group; its worker dies with
it, ``PR_SET_PDEATHSIG``), the task's outcome says so, and the rest of the command runs on a worker of its own.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from tileprobe.jsonrecord import FieldError
from tileprobe.probe import wire
from tileprobe.procs import GUARD_ENV, importable_env, signal_group
from tileprobe.run.warmserver import peer_uid, private_folder_problem, recv_msg, send_msg, unix_address
from tileprobe.run.warmwire import STOP, ClientHello, Outcome, ServerHello, TaskRequest
from tileprobe.run.watchdog import (
    DEFAULT_GRACE_S,
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    INIT_CUDA,
    TaskOutcome,
    Watchdog,
    WorkerStartError,
)

__all__ = ["BUSY_WAIT_S", "DEFAULT_IDLE_S", "KeepWarmRefused", "KeptWarmWatchdog", "provenance", "runtime_dir",
           "stop_server"]

#: Idle seconds after which a server started without a stated time exits (``--keep-warm`` with no value).
DEFAULT_IDLE_S = 900.0
#: Seconds a command waits for a server that is busy with another command before it starts a worker of its own.
BUSY_WAIT_S = 20.0
#: Seconds past a task's timeout and the worker start-up allowance after which the server itself counts as stuck.
NANNY_MARGIN_S = 30.0
#: Environment variables the worker's behaviour depends on: part of the server's identity and provenance.
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "LD_LIBRARY_PATH", "PATH", "TORCH_HOME", "CUDA_HOME",
            "CUDA_PATH")
_SERVERS: list[subprocess.Popen] = []     # started here: kept so no ResourceWarning is raised for them


class KeepWarmRefused(Exception):
    """The kept-warm worker cannot be used (a foreign or open socket or folder, a busy or broken server); the
    message says which and where. The command goes on with a worker of its own."""


def runtime_dir(environ: dict | None = None) -> Path:
    """The folder of the user's server sockets: ``$TILEPROBE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/tileprobe``, else
    ``/tmp/tileprobe-UID``; created 0700 when missing. Raises :class:`KeepWarmRefused` when it exists but is not a
    folder of this user's, or others may read or enter it (mode & 0o077)."""
    env = os.environ if environ is None else environ
    base = env.get("TILEPROBE_RUNTIME_DIR") or (
        os.path.join(env["XDG_RUNTIME_DIR"], "tileprobe") if env.get("XDG_RUNTIME_DIR") else
        f"/tmp/tileprobe-{os.getuid()}")
    path = Path(base)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    why = private_folder_problem(str(path))
    if why:
        raise KeepWarmRefused(f"{why}; fix: remove it, or set TILEPROBE_RUNTIME_DIR to a folder of your own")
    return path


def _code_fingerprint() -> str:
    """SHA-256 (16 hex) of every tileprobe ``.py`` file's path, size and mtime: a server started before tileprobe's
    code changed (an upgrade, an edit) is stale."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{dirpath}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def provenance(init: str = INIT_CUDA, environ: dict | None = None) -> dict:
    """What a worker's behaviour depends on: the user, Python, tileprobe's folder and code fingerprint, the init
    function, and :data:`ENV_KEYS`. A client and a server must agree on every key."""
    env = os.environ if environ is None else environ
    return {"uid": os.getuid(), "python": sys.executable, "package": str(Path(__file__).resolve().parent.parent),
            "code": _code_fingerprint(), "init": init, "env": {k: env.get(k) for k in ENV_KEYS}}


def _key(prov: dict) -> str:
    """The server's name: a hash of its provenance without the code fingerprint (a stale server keeps its name, so
    the next command finds and replaces it)."""
    ident = {k: v for k, v in prov.items() if k != "code"}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _check_socket(path: Path) -> bool:
    """Whether ``path`` exists; raises :class:`KeepWarmRefused` when it is not a socket of this user's with mode
    0600 (nothing is sent to it)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise KeepWarmRefused(f"{path}: not a socket of this user's with mode 0600 (owner uid {st.st_uid}, mode "
                              f"{stat.S_IMODE(st.st_mode):o}); refused. Fix: remove it")
    return True


def _connect(path: Path) -> socket.socket | None:
    """A connection to the server at ``path``, None when nobody listens there (a stale socket, removed here).
    Raises :class:`KeepWarmRefused` when the listener does not take the connection within :data:`BUSY_WAIT_S` (its
    queue is full: a stuck or stopped server, or one that other commands gave up on; ``connect`` would wait for it
    without end), OSError when the folder cannot be reached (the socket closed either way)."""
    if not _check_socket(path):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not _connect_within(s, str(path), BUSY_WAIT_S):
            s.close()
            raise KeepWarmRefused(f"{path}: the server there did not take the connection within {BUSY_WAIT_S:g} "
                                  "s (its queue is full: stuck, or busy with other commands)")
    except (ConnectionRefusedError, FileNotFoundError):
        s.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()    # stale: its server died without removing it
        return None
    except OSError:
        s.close()
        raise
    _pid, uid = peer_uid(s)
    if uid != os.getuid():
        s.close()
        raise KeepWarmRefused(f"{path}: the process listening there is another user's (uid {uid}); refused")
    return s


def _connect_within(s: socket.socket, path: str, timeout_s: float) -> bool:
    """Connect ``s`` to ``path`` (:func:`~tileprobe.run.warmserver.unix_address`), trying again every 50 ms while the
    listener's queue is full (a Unix socket with a timeout then says EAGAIN at once; without one ``connect`` blocks
    until the listener accepts, without end when it is stuck), at most ``timeout_s`` s. Returns whether it connected
    (``s`` blocking again); raises OSError for any other failure."""
    deadline = time.monotonic() + timeout_s
    s.settimeout(timeout_s)
    with unix_address(path) as address:
        while True:
            try:
                s.connect(address)
                break
            except (BlockingIOError, TimeoutError):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
    s.settimeout(None)
    return True


def _open_private(path: Path, flags: int) -> int:
    """A descriptor of the regular file ``path`` in the runtime folder (made 0600 when missing), opened with
    ``flags``; a symbolic link is never followed and a FIFO never waited on (``O_NOFOLLOW | O_NONBLOCK``: a FIFO
    with no reader hung the command, hostile test of session 17).

    Raises:
        KeepWarmRefused: ``path`` is a link, a folder, a FIFO, or not a regular file of this user's (named, with the
            fix: remove it).
    """
    kinds = {errno.ELOOP: "a symbolic link", errno.EISDIR: "a folder", errno.ENXIO: "a FIFO or socket nobody reads"}
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as e:
        if e.errno not in kinds:
            raise
        raise KeepWarmRefused(f"{path}: {kinds[e.errno]}, not a file of this user's; refused. Fix: remove it") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise KeepWarmRefused(f"{path}: not a regular file of this user's (mode {st.st_mode:o}, owner uid "
                              f"{st.st_uid}); refused. Fix: remove it")
    os.set_blocking(fd, True)
    return fd


def _launch(path: Path, init: str, idle_s: float, prov: dict, env: dict) -> subprocess.Popen:
    """Start a server on ``path``: its own session, none of this command's guard marker (it must outlive the
    command), output to ``path`` with ``.log``."""
    env = {k: v for k, v in env.items() if k != GUARD_ENV}
    with open(_open_private(path.with_suffix(".log"), os.O_WRONLY | os.O_TRUNC), "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tileprobe.run.warmserver", str(path), init, repr(idle_s),
                                 json.dumps(prov)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=importable_env(env), start_new_session=True, close_fds=True)
    _SERVERS.append(proc)
    return proc


def _wait_connect(path: Path, proc: subprocess.Popen, timeout_s: float) -> socket.socket:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        s = _connect(path) if path.exists() else None
        if s is not None:
            return s
        if proc.poll() is not None:
            log = path.with_suffix(".log")
            text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise KeepWarmRefused(f"the kept-warm worker's server exited at its start ({proc.returncode}): {text}")
        time.sleep(0.05)
    raise KeepWarmRefused(f"the kept-warm worker's server did not open {path} within {timeout_s:g} s")


def _hello(s: socket.socket, prov: dict, timeout_s: float) -> ServerHello:
    s.settimeout(timeout_s)
    send_msg(s, ClientHello(prov).to_wire())
    try:
        reply = recv_msg(s)
    except TimeoutError:
        raise KeepWarmRefused(f"the kept-warm worker gave no hello within {timeout_s:g} s (busy with another "
                              "command?)") from None
    except (EOFError, OSError, wire.WireError) as e:
        raise KeepWarmRefused(f"the kept-warm worker's server broke off its hello: {e}") from None
    try:
        hello = ServerHello.from_wire(reply)
    except FieldError as e:
        raise KeepWarmRefused(f"the kept-warm worker's server answered a hello that does not fit: {e}") from None
    if hello is None:
        raise KeepWarmRefused("the kept-warm worker's server answered something that is not a hello")
    return hello


def stop_server(init: str = INIT_CUDA, environ: dict | None = None, timeout_s: float = 10.0) -> bool:
    """Ask this user's server for ``init`` and ``environ`` to exit; True when one was running and said goodbye,
    False when none listens.

    Raises:
        KeepWarmRefused: the runtime folder or the socket is not this user's own, the server is busy past
            :data:`BUSY_WAIT_S` or broke off, or the socket cannot be reached (an OSError, named in the message).
    """
    env = dict(os.environ if environ is None else environ)
    prov = provenance(init, env)
    path = Path("?")
    try:
        path = runtime_dir(env) / f"w-{_key(prov)}.sock"
        s = _connect(path)
        if s is None:
            return False
        with s:
            if _hello(s, prov, timeout_s).ok:
                send_msg(s, STOP)
    except OSError as e:
        raise KeepWarmRefused(f"{path}: the kept-warm server cannot be reached to stop it ({e})") from None
    return True


class KeptWarmWatchdog:
    """A :class:`~tileprobe.run.watchdog.Watchdog` whose worker is the kept-warm server's (module doc).

    Args:
        idle_s: the server's idle time before it exits (s), when this command starts it: a finite number > 0
            (:func:`tileprobe.outcomes.timeout_seconds`; ValueError otherwise: ``inf`` crashed the server).
        timeout_s, init, startup_timeout_s, grace_s: as for :class:`~tileprobe.run.watchdog.Watchdog`.
        environ: the environment the server and its worker get (default this process's).

    :attr:`note` says how the worker was had: ``kept warm (server pid N, reused)``, ``… started``, or ``a worker
    of its own: WHY``. Raises :class:`~tileprobe.run.watchdog.WorkerStartError` as the Watchdog does when no
    worker can be had at all.
    """

    def __init__(self, *, idle_s: float = DEFAULT_IDLE_S, timeout_s: float = DEFAULT_TIMEOUT_S, init: str = INIT_CUDA,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, grace_s: float = DEFAULT_GRACE_S,
                 environ: dict | None = None):
        from tileprobe.outcomes import timeout_seconds
        self.idle_s, self.timeout_s, self.init = timeout_seconds(idle_s), float(timeout_s), init
        self.startup_timeout_s, self.grace_s = float(startup_timeout_s), float(grace_s)
        self.environ = dict(os.environ if environ is None else environ)
        self.info: dict = {}
        self.note = ""
        self.restarts = 0
        self.server_pid: int | None = None
        self._sock: socket.socket | None = None
        self._local: Watchdog | None = None

    def __enter__(self) -> KeptWarmWatchdog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> dict:
        """Connect to (or start) the server and return its worker's hello info; on a refusal, start a worker of
        this command's own (:attr:`note` says why)."""
        if self._local is not None:
            return self._local.start()
        if self._sock is not None:
            return self.info
        try:
            self._open()
        except (KeepWarmRefused, OSError) as e:
            return self._go_local(str(e))
        return self.info

    def _open(self) -> None:
        prov = provenance(self.init, self.environ)
        folder = runtime_dir(self.environ)
        path = folder / f"w-{_key(prov)}.sock"
        with open(_open_private(folder / f"w-{_key(prov)}.lock", os.O_WRONLY), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)    # one command at a time starts or replaces the server
            for _attempt in range(2):
                s, started = _connect(path), False
                if s is None:
                    proc = _launch(path, self.init, self.idle_s, prov, self.environ)
                    s, started = _wait_connect(path, proc, 30.0), True
                reply = _hello(s, prov, self.startup_timeout_s if started else BUSY_WAIT_S)
                if reply.ok:
                    self._sock, self.server_pid = s, reply.pid
                    how = "started" if started else "reused"
                    self.note = f"kept warm (server pid {self.server_pid}, {how}; exits after {reply.idle_s:g} s idle)"
                    self.info = {**reply.info, "kept_warm": self.note}
                    return
                s.close()
                if reply.provenance == prov:   # a server of this very code whose worker cannot start
                    raise WorkerStartError(reply.why)
                _wait_gone(reply.pid, 10.0)      # stale: it exits; the next attempt starts a new one
        raise KeepWarmRefused(f"{path}: the server there stayed stale after a restart")

    def _go_local(self, why: str, start: bool = True) -> dict:
        """From now on, a worker of this command's own (started now, or at the next task when ``start`` is
        False: a task's outcome is reported first)."""
        self.note = f"a worker of its own: {why}"
        self._drop()
        self._local = Watchdog(timeout_s=self.timeout_s, init=self.init, startup_timeout_s=self.startup_timeout_s,
                               grace_s=self.grace_s, env={})
        if start:
            self.info = dict(self._local.start(), kept_warm=self.note)
        return self.info

    def submit(self, fn: str, kwargs: dict | None = None, *, timeout_s: float | None = None) -> TaskOutcome:
        """Run ``fn(**kwargs)`` in the server's worker (as :meth:`Watchdog.submit`); the nanny ends a server that
        stops answering (module doc)."""
        self.start()
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        if self._local is not None:
            self._local.timeout_s = self.timeout_s
            return self._local.submit(fn, kwargs, timeout_s=timeout)
        s = self._sock
        assert s is not None
        t0 = time.perf_counter()
        limit = timeout + self.startup_timeout_s + self.grace_s + NANNY_MARGIN_S
        try:
            s.settimeout(limit)
            send_msg(s, TaskRequest(fn, kwargs or {}, timeout).to_wire(), "the task")
            out = Outcome.from_wire(recv_msg(s))
        except TimeoutError:
            pid = self.server_pid
            self._end_server()
            self._go_local(f"its server (pid {pid}) gave no answer within {limit:g} s and was ended", start=False)
            return TaskOutcome("hang", error=f"the kept-warm GPU worker's server (pid {pid}) gave no answer within "
                               f"{limit:g} s: it was ended; the next variant runs in a worker of this command's own",
                               wall_s=time.perf_counter() - t0, worker_pid=pid)
        except (EOFError, OSError, wire.WireError, FieldError) as e:
            pid = self.server_pid
            self._go_local(f"its server (pid {pid}) broke off: {e}", start=False)
            return TaskOutcome("crash", error=f"the kept-warm GPU worker's server (pid {pid}) broke off ({e}); the "
                               "next variant runs in a worker of this command's own", wall_s=time.perf_counter() - t0,
                               worker_pid=pid)
        self.restarts = out.restarts or 0
        self.info = dict(out.info or self.info)
        return TaskOutcome(out.status, value=out.value, error=out.error or "", wall_s=out.wall_s or 0.0,
                           worker_pid=out.worker_pid, exit_status=out.exit_status)

    def _end_server(self) -> None:
        pid = self.server_pid
        self._drop()
        if pid:
            signal_group(pid, signal.SIGKILL)     # its own session: the server leads its group

    def _drop(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None

    def close(self) -> None:
        """Leave the server (it starts a fresh worker for the next command) or close this command's own worker."""
        self._drop()
        if self._local is not None:
            self._local.close()


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        for p in _SERVERS:       # our own child: reap it, or it stays a zombie that kill(0) still finds
            if p.pid == pid and p.poll() is not None:
                return
        time.sleep(0.05)

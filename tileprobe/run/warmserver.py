"""The kept-warm GPU worker's server: a process that outlives one ``tileprobe tune`` and holds a started GPU worker.

A GPU worker (:mod:`tileprobe.run.worker`: Python, torch, a CUDA context) takes 4-5.5 s to start on the H100 and
H200 (docs/LOG.md sections 38 and this session's); a warm re-tune, whose compiles all come from the store, reaches
its race about a second after its first line, so it waited for nearly all of that. With ``tileprobe tune
--keep-warm SECONDS`` (or ``TILEPROBE_KEEP_WARM=SECONDS``) the first tune starts this server
(:mod:`tileprobe.run.keepwarm` is the client) and the next ones find a worker already started.

* **One per GPU and user**: the socket lives in the user's runtime folder (``$TILEPROBE_RUNTIME_DIR``, else
  ``$XDG_RUNTIME_DIR/tileprobe``, else ``/tmp/tileprobe-UID``; the folder 0700, the socket 0600, both the user's),
  named after what the worker depends on (Python, tileprobe's folder, the init, ``CUDA_VISIBLE_DEVICES`` and the
  paths of the environment: :func:`tileprobe.run.keepwarm.provenance`).
* **Data only**: each message is 4 bytes of length (big-endian) and one :func:`tileprobe.probe.wire.dumps` JSON
  text; nothing is unpickled on either side. Peers must be the same user (``SO_PEERCRED``), both ways.
* **Provenance checked**: a client whose provenance (tileprobe's code fingerprint included: every ``.py`` file's
  size and mtime) differs from the server's is refused, and the server exits: it is stale (tileprobe changed
  since it started); the client starts a new one.
* **A fresh worker for every command**: the worker a command used is closed when the command disconnects and a
  prepared one takes its place (:data:`SPARES` of them start while commands run: Python and torch, no CUDA context
  until it is activated), so no probe module, kernel or CUDA state of one command reaches the next (probe code is
  untrusted and may have been edited in between).
* **Idle exit**: no connection for ``IDLE_S`` seconds → the worker is closed (its process group, then the guard of
  :func:`tileprobe.procs.arm_guard` for anything its children left) and the server exits, removing its socket.
  One client at a time; a second waits in the listen queue (the client gives up after a short wait and uses a
  worker of its own).

Run as ``python -m tileprobe.run.warmserver SOCKET INIT IDLE_S PROVENANCE_JSON``; it never reads stdin.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

from tileprobe.probe import wire
from tileprobe.run.warmwire import ClientHello, Outcome, ServerHello, TaskRequest, op_of

__all__ = ["HEADER", "peer_uid", "recv_msg", "send_msg", "serve"]

#: The length prefix of a message: 4 bytes, big-endian unsigned.
HEADER = struct.Struct(">I")
#: Seconds a connected client gets to say hello before the server drops it.
HELLO_S = 30.0


#: The longest socket path AF_UNIX takes: ``sun_path`` holds 108 bytes on Linux, the last one the NUL (man 7 unix).
SUN_PATH_MAX = 107


def private_folder_problem(folder: str) -> str | None:
    """Why ``folder`` is no place for this user's sockets, or None: it must be a real folder (not a symbolic link)
    of this user's that others may neither read nor enter (mode & 0o077 == 0). Read with ``lstat``; a folder that
    cannot be read is a problem too."""
    try:
        st = os.lstat(folder)
    except OSError as e:
        return f"{folder}: cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{folder}: a symbolic link, not a folder (a link could be turned to another user's folder)"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return (f"{folder}: not a folder of this user's with mode 0700 (owner uid {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):o})")
    return None


@contextlib.contextmanager
def unix_address(path: str) -> Iterator[str]:
    """The address to ``bind`` or ``connect`` for the socket file ``path``: ``path`` itself when it fits
    :data:`SUN_PATH_MAX`, else ``/proc/self/fd/N/NAME`` through an ``O_PATH`` descriptor of its folder (Linux; the
    descriptor is closed on leaving), so that a long ``TILEPROBE_RUNTIME_DIR`` (a test's temp folder under a long
    ``TMPDIR``) still gets a kept-warm server. Raises OSError when the folder cannot be opened."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX or not os.path.isdir("/proc/self/fd"):
        yield path
        return
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


def send_msg(sock: socket.socket, value: Any, where: str = "message") -> None:
    """Send ``value`` (data: :mod:`tileprobe.probe.wire`) as one length-prefixed message. Raises NotData/WireError
    for a value that is not data or too large, OSError when the peer is gone."""
    data = wire.dumps(value, where)
    sock.sendall(HEADER.pack(len(data)) + data)


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the peer closed the connection")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket) -> Any:
    """One message of :func:`send_msg`. Raises EOFError (peer gone), OSError/``socket.timeout``, or
    :class:`tileprobe.probe.wire.WireError` for a length over :data:`tileprobe.probe.wire.MAX_MESSAGE_BYTES` (refused
    before it is read) or a text that is not tileprobe's data."""
    (n,) = HEADER.unpack(_read(sock, HEADER.size))
    if n > wire.MAX_MESSAGE_BYTES:
        raise wire.WireError(f"a message of {n:,} bytes, more than the limit of {wire.MAX_MESSAGE_BYTES:,}")
    return wire.loads(_read(sock, n))


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of Unix socket ``sock`` (``SO_PEERCRED``, Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


#: Prepared next workers the server keeps (:class:`_Spare`): with one, a tune that followed a 4-5-s tune at once still
#: waited 1.8-3.6 s for it on the H100 (its torch import takes 3.7-6.6 s; docs/LOG.md §42); with two, the next
#: command's was started a command earlier. A prepared spare holds no CUDA context, only Python and torch.
SPARES = 2
#: The spare worker's first half of the default init (torch imported, no CUDA context): :class:`_Spare`.
PREPARE = {"tileprobe.run.worker:init_cuda": "tileprobe.run.worker:init_import"}


def _new_watchdog(init: str):
    from tileprobe.run.watchdog import Watchdog
    wd = Watchdog(init=init)
    try:
        wd.start()
        return wd, ""
    except Exception as e:   # no GPU, torch missing: said to the client that asks, then the server exits
        wd.close()
        return None, str(e)


class _Spare:
    """The next command's worker, started while a command runs: a thread starts it with the first half of the init
    (:data:`PREPARE`: Python and torch, seconds of CPU, no GPU touched while the command races) and then stays
    alive until :meth:`release` (the worker's parent-death signal follows the thread that started it).
    :meth:`activate` finishes the init (a CUDA context: about a second) once the command has gone."""

    def __init__(self, init: str):
        import threading

        from tileprobe.run.watchdog import Watchdog
        self.init, self.prepare = init, PREPARE.get(init)
        self.wd, self.error = Watchdog(init=self.prepare or init), ""
        self.ready, self._release = threading.Event(), threading.Event()
        threading.Thread(target=self._run, name="tileprobe-spare-worker", daemon=True).start()

    def _run(self) -> None:
        try:
            self.wd.start()
        except Exception as e:   # said when it is activated: a full start is tried then
            self.error = str(e)
        finally:
            self.ready.set()
        self._release.wait()

    def release(self) -> None:
        self._release.set()

    def activate(self):
        """(watchdog, start error): this spare, its init finished; a fresh full start when it failed."""
        from tileprobe.run.watchdog import DEFAULT_STARTUP_TIMEOUT_S
        self.ready.wait()
        wd = self.wd
        if not self.error and self.prepare:
            out = wd.submit(self.init, {}, timeout_s=DEFAULT_STARTUP_TIMEOUT_S)
            if out.status == "done" and isinstance(out.value, dict):
                wd.info = dict(out.value)
                if wd._worker is not None:
                    wd._worker.info = wd.info
            else:
                self.error = out.error or out.status
        if self.error:
            wd.close()
            self.release()
            return _new_watchdog(self.init)
        wd.init = self.init          # a worker replaced after a crash gets the whole init
        return wd, ""


def _handle(conn: socket.socket, wd, start_error: str, prov: dict, idle_s: float) -> str:
    """One client's session. Returns ``unused`` (it left before any task), ``used``, ``stop`` or ``stale``."""
    conn.settimeout(HELLO_S)
    _pid, uid = peer_uid(conn)
    if uid != os.getuid():
        return "unused"   # another user's process: not served, not answered
    try:
        hello = recv_msg(conn)
    except (EOFError, OSError, wire.WireError):
        return "unused"
    client = ClientHello.from_wire(hello)
    if client is None:
        return "unused"
    theirs = client.provenance
    differs = sorted(k for k in set(prov) | set(theirs) if prov.get(k) != theirs.get(k))
    ok = not differs and not start_error and wd is not None
    why = (start_error if start_error else
           f"this server's {', '.join(differs)} differ from the client's (stale: it exits)" if differs else "")
    send_msg(conn, ServerHello(ok, why, os.getpid(), idle_s, prov, dict(wd.info) if ok else {},
                               wd.pids[-1] if ok and wd.pids else None).to_wire())
    if not ok:
        return "stale"
    conn.settimeout(None)
    used = False
    while True:
        try:
            msg = recv_msg(conn)
        except (EOFError, OSError, wire.WireError):
            break
        op = op_of(msg)
        if op == "stop":
            return "stop"
        if op != "task":
            break
        used = True
        task = TaskRequest.from_wire(msg)
        try:
            if isinstance(task, str):      # answered, not run: a malformed task never ends the server
                send_msg(conn, Outcome("raised", None, f"bad task: {task}", 0.0, None, None, wd.restarts,
                                       dict(wd.info)).to_wire())
                continue
            out = wd.submit(task.fn, task.kwargs, timeout_s=task.timeout_s)
            send_msg(conn, Outcome(out.status, wire.to_data(out.value), out.error, out.wall_s, out.worker_pid,
                                   out.exit_status, wd.restarts, dict(wd.info)).to_wire())
        except OSError:
            break
    return "used" if used else "unused"


def serve(path: str, init: str, idle_s: float, prov: dict) -> int:
    """Bind ``path`` (0600), start a worker, serve clients one at a time until ``idle_s`` seconds pass without one,
    a client says ``stop``, or a client's provenance shows this server stale. Returns the exit code."""
    from tileprobe.procs import arm_guard
    arm_guard()      # whatever the worker's children leave ends with this server, however it ends
    why = private_folder_problem(os.path.dirname(os.path.abspath(path)))
    if why:          # checked by the client too; again here, just before the bind (the folder may have changed)
        print(f"tileprobe kept-warm server: refused to bind: {why}", file=sys.stderr, flush=True)
        return 1
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        with unix_address(path) as address:
            srv.bind(address)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    ino = os.stat(path).st_ino
    srv.listen(8)
    wd, start_error = _new_watchdog(init)
    spares: list[_Spare] = []
    holder: _Spare | None = None       # the spare that became ``wd``: released when ``wd`` is closed
    last = time.monotonic()
    try:
        while True:
            left = idle_s - (time.monotonic() - last)
            if left <= 0:
                break
            srv.settimeout(left)
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                break
            while wd is not None and len(spares) < SPARES:
                spares.append(_Spare(init))   # the next commands' workers start now, beside this one's
            with conn:
                try:
                    what = _handle(conn, wd, start_error, prov, idle_s)
                except OSError:
                    what = "used"
            if what in ("stop", "stale"):
                break
            if what == "used" and wd is not None and spares:   # a fresh worker for the next command
                wd.close()
                if holder is not None:
                    holder.release()
                holder = spares.pop(0)
                wd, start_error = holder.activate()
            last = time.monotonic()
    finally:
        if wd is not None:
            wd.close()
        for sp in [*spares, holder]:
            if sp is not None:
                sp.wd.close()
                sp.release()
        try:
            if os.stat(path).st_ino == ino:   # still ours (a new server may have replaced a stale socket)
                os.unlink(path)
        except OSError:
            pass
        srv.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tileprobe.run.warmserver SOCKET INIT IDLE_S PROVENANCE_JSON``."""
    argv = sys.argv[1:] if argv is None else argv
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)     # the terminal of the command that started it is not its business
    from tileprobe.outcomes import timeout_seconds
    try:
        idle_s = timeout_seconds(argv[2])
    except ValueError as e:      # inf made settimeout's deadline overflow at the first accept
        print(f"tileprobe kept-warm server: idle time {argv[2]!r}: {e}", file=sys.stderr, flush=True)
        return 2
    path, init, prov = argv[0], argv[1], json.loads(argv[3])
    return serve(path, init, idle_s, prov)


if __name__ == "__main__":
    sys.exit(main())

"""Child processes that die with tileprobe, and temp folders that do not outlive it.

Every process an audit starts (probe loaders, compile workers, and the tileiras / ptxas / nvdisasm those run) must
end within seconds when the tileprobe process ends, however it ends:

* **SIGTERM, SIGHUP, Ctrl-C** reach the main process, which stops its workers (:func:`kill_tree`) and removes its
  temp folder on the way out;
* **SIGKILL** (or a parent's ``subprocess.run(timeout=…)``, which sends it) gives the main process no last word:
  each child asked the kernel for a *parent-death signal* (Linux ``prctl(PR_SET_PDEATHSIG)``, ``man 2 prctl``)
  when it started (:func:`die_with_parent`), so the kernel signals it when its parent dies; a compile worker
  turns that signal into killing its own compiler processes (:func:`on_parent_death`). The temp folder of such
  a run carries an owner marker (pid and process start time); the next run removes the folders of owners that are
  gone (:func:`sweep_leftovers`).

Linux only for the parent-death signal and the /proc walks; elsewhere these are no-ops (the watched pipe between a
worker and the main process still ends an idle worker: its ``recv`` sees end-of-file).

The one home of process handling: every module that ends processes calls it (a leaf: it imports nothing of
tileprobe but the guard's program text, :mod:`tileprobe.guard_script`). A tool asked something or compiling runs in
a group of its own, killed whole when it ends or times out (:func:`run_in_group`); a worker is stopped politely, then by force (:func:`stop_process`); a group is
signalled by :func:`signal_group`, a tree by :func:`kill_tree`.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tileprobe.guard_script import GUARD_CODE

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
PR_SET_PDEATHSIG = 1
#: Name of the marker file in an owned temp folder: ``"<pid> <start time in clock ticks>"``.
OWNER_MARKER = ".tileprobe-owner"
#: Prefix of the temp folders tileprobe owns (under :func:`tempfile.gettempdir`).
TEMP_PREFIX = "tileprobe-"
#: ``os._exit`` as it was at import: probe code may have it replaced (:func:`tileprobe.probe.define.probe_code_guard`)
#: while a signal handler here must really end the process.
_REAL_EXIT = os._exit


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


#: libc's ``prctl``, resolved once at import so a ``preexec_fn`` after ``fork`` loads nothing (None off Linux).
_PRCTL = _load_prctl()


def die_with_parent(signum: int = signal.SIGKILL, parent_pid: int | None = None) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``).

    ``parent_pid``: the parent this process expects; when it already died (its pid is no longer our parent),
    this process exits at once with status 1 — the race between the fork and this call.
    Returns whether the signal was set (False off Linux or without libc).
    """
    if _PRCTL is None:
        return False
    ok = _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    if parent_pid is not None and os.getppid() != parent_pid:
        _REAL_EXIT(1)
    return ok


def preexec_die_with_parent(parent_pid: int, signum: int = signal.SIGKILL, new_group: bool = False):
    """A ``subprocess.Popen(preexec_fn=…)`` for a child started by process ``parent_pid`` (this one): send it
    ``signum`` when that process dies, and end it at once (exit status 1) if that already happened between the
    fork and the ``prctl``. ``new_group``: the child first makes a process group of its own (``setpgid(0, 0)``;
    ``start_new_session=True`` makes a session instead).

    It calls only the ``prctl`` resolved at import (no loading, no locks), which keeps ``preexec_fn`` safe enough
    in a process with threads (a progress bar's).
    """
    def preexec():
        if new_group:
            os.setpgid(0, 0)
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
            if os.getppid() != parent_pid:
                _REAL_EXIT(1)
    return preexec


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3 first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    return text.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


@dataclass
class ProcessTable:
    """One read of ``/proc/*/stat``: each live process's children and start time (clock ticks since boot), passed to
    :func:`descendants`, :func:`tileprobe.program_procs.guard_pids` and `marked_processes` (each walk costs tenths of a s when loaded)."""
    children: dict[int, list[int]] = field(default_factory=dict)
    start: dict[int, int] = field(default_factory=dict)


def process_table() -> ProcessTable:
    """The :class:`ProcessTable` of this moment; empty off Linux."""
    table = ProcessTable()
    if not os.path.isdir("/proc"):
        return table
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields and len(fields) > 19:
            with contextlib.suppress(ValueError):
                table.children.setdefault(int(fields[1]), []).append(int(entry))
                table.start[int(entry)] = int(fields[19])
    return table


def descendants(pid: int, table: ProcessTable | None = None) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren …), by a walk of ``/proc`` or ``table``; [] off Linux."""
    children = (table or process_table()).children
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def signal_group(pgid: int, signum: int = signal.SIGKILL) -> bool:
    """Send ``signum`` to process group ``pgid``: a child started with ``start_new_session=True`` (or ``setsid``)
    leads the group of its own pid, and what it started and left running there gets the signal too, also after
    the child itself ended. A group that is gone or not ours is passed over; this process's own group is never
    signalled. Returns whether the signal was sent (False off POSIX)."""
    if not hasattr(os, "killpg") or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, signum)
    except OSError:
        return False
    return True


def signal_process(pid: int, signum: int, group: bool = False) -> bool:
    """Send ``signum`` to process ``pid``, or with ``group`` to the process group it leads (:func:`signal_group`).
    One that is gone or not ours is passed over. Returns whether the signal was sent."""
    if group:
        return signal_group(pid, signum)
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def stop_process(proc, grace_s: float, reap_s: float = 5.0, group: bool = False) -> None:
    """End ``proc`` (a :class:`subprocess.Popen`) politely, then by force: SIGTERM, SIGKILL if it is still running
    ``grace_s`` seconds later, then wait up to ``reap_s`` seconds to reap it (one stuck in the kernel, D state, is
    left unreaped). Nothing is sent to a process already reaped. ``group``: the signals go to the process group
    it leads (``start_new_session=True``), and the group is SIGKILLed once more at the end for what it left
    there (:func:`signal_group`)."""
    if proc.poll() is None:
        signal_process(proc.pid, signal.SIGTERM, group)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_process(proc.pid, signal.SIGKILL, group)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=reap_s)
    if group:
        signal_group(proc.pid, signal.SIGKILL)


def run_in_group(command: list[str], env: dict | None, timeout_s: float,
                 text: bool = False) -> tuple[int | None, bytes | str, bytes | str]:
    """Run a tool (tileiras, ptxas, nvcc) in a process group of its own (its children, e.g. ptxas, are in it too),
    standard input from ``/dev/null``, SIGKILLed by the kernel if this process dies
    (:func:`preexec_die_with_parent`), for at most ``timeout_s`` seconds. Its whole group is SIGKILLed when it ends
    (a stray ptxas it left), when it times out, and when this process is interrupted (the exception goes on). What
    it started outside its group (``setsid``) that still holds its output is SIGKILLed and named in the returned
    stderr, when it exited and when it timed out (a hung tileiras's ``setsid`` grandchild outlived the timeout: a
    hostile tester, 2026-12-05).
    ``text``: the output decoded as ``subprocess`` does with ``text=True`` (undecodable bytes replaced), else
    bytes. ``env``: its environment (None: this one's). Of each stream at most :data:`OUTPUT_KEEP_BYTES` of its
    start and of its end are kept (:class:`BoundedOutput`): a flood is read and dropped, not held.

    Returns (exit status, or None when it timed out; stdout; stderr): a negative status is the signal that ended it.

    Raises:
        OSError: it cannot be started.
    """
    preexec = preexec_die_with_parent(os.getpid()) if os.name == "posix" else None
    proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    streams = (BoundedOutput(), BoundedOutput())
    held: list[str] = []
    try:
        finished = _pump(proc, streams, time.monotonic() + timeout_s, held)
    except BaseException:
        signal_group(proc.pid)
        proc.wait()
        raise
    finally:
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
    signal_group(proc.pid)
    proc.wait()
    out, err = (b.data() for b in streams)
    if held:    # named where its output is read: what the tool left running holding it was ended
        how = "exited" if finished else f"timed out after {timeout_s:g} s"
        err += (f"\n[tileprobe: {os.path.basename(command[0])} {how}, and left {len(held)} process(es) holding its "
                f"output, which were killed: {', '.join(held)}]\n").encode()
    if text:     # as subprocess's text=True: undecodable bytes replaced, universal newlines
        return (proc.returncode if finished else None), _text(out), _text(err)
    return (proc.returncode if finished else None), out, err


def _text(data: bytes) -> str:
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


#: Bytes of a tool's stdout and of its stderr kept from the start and from the end each (the middle of a longer
#: output is dropped and counted): a compiler that floods its output (30-300 MB seen in a hostile test,
#: docs/FAILURES.md) must not fill memory, the terminal or the JSON. Compiler errors name their line in the first
#: kilobytes.
OUTPUT_KEEP_BYTES = 1 << 20


class BoundedOutput:
    """A stream's output with at most :data:`OUTPUT_KEEP_BYTES` of its head and of its tail kept."""

    def __init__(self, keep: int = OUTPUT_KEEP_BYTES):
        self.keep, self.head, self.tail, self.dropped = keep, bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        """Take ``data``: into the head while it has room, else into the tail, whose oldest bytes are dropped."""
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > self.keep:
            cut = len(self.tail) - self.keep
            self.dropped += cut
            del self.tail[:cut]

    def data(self) -> bytes:
        """The kept bytes, with a line naming how many were dropped between head and tail."""
        if not self.dropped:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {self.dropped:,} bytes left out by tileprobe ...]\n".encode() + \
            bytes(self.tail)


#: Seconds the output of a tool that has exited is still read: past it, a process that still holds its output
#: open (a detached child: ``setsid sleep &``) is killed and named (:func:`_pump`), and the tool is judged by its
#: exit (a good cubin of a tileiras that left a sleeper was stored as a timeout, 2026-12-04).
EXITED_READ_S = 1.0


def _pump(proc: subprocess.Popen, streams: tuple, deadline: float, held: list | None = None) -> bool:
    """Read ``proc``'s stdout and stderr into ``streams`` until both end and it exits (True), or until ``deadline``
    (False: its group is SIGKILLed, and the processes outside it that hold its output, each added to ``held``; what
    it wrote so far is kept). Once ``proc`` has exited its output is read
    :data:`EXITED_READ_S` more at most: the processes that then still hold it open (:func:`pipe_holders`) are
    SIGKILLed, each added to ``held`` as ``"PID (NAME)"``, and it counts as ended (True)."""
    import selectors
    sel = selectors.DefaultSelector()
    for f, b in zip((proc.stdout, proc.stderr), streams):
        if f is not None:
            sel.register(f, selectors.EVENT_READ, b)
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            left = deadline - now
            if left <= 0:     # its group, and what it left outside it (``setsid``) still holding its output
                signal_group(proc.pid)
                _end_holders(sel, held, spared_group=proc.pid)
                return False
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXITED_READ_S:
                _end_holders(sel, held)
                break
            for key, _ in sel.select(timeout=min(left, 1.0 if exited_at is None else 0.2)):
                data = os.read(key.fd, 1 << 16)
                if data:
                    key.data.add(data)
                else:
                    sel.unregister(key.fileobj)
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:     # closed its output but runs on
            signal_group(proc.pid)
            return False
        return True
    finally:
        sel.close()


def _end_holders(sel, held: list | None, spared_group: int | None = None) -> None:
    """SIGKILL the processes that hold the pipes still registered in selector ``sel`` open (:func:`pipe_holders`),
    each added to ``held`` as ``"PID (NAME)"`` unless it is in process group ``spared_group`` (the tool's own,
    SIGKILLed as a whole just before: not a leftover to name)."""
    for key in list(sel.get_map().values()):
        for pid, name in pipe_holders(key.fd):
            try:
                in_group = spared_group is not None and os.getpgid(pid) == spared_group
            except OSError:            # gone already
                continue
            signal_process(pid, signal.SIGKILL, group=False)
            if not in_group and held is not None and f"{pid} ({name})" not in held:
                held.append(f"{pid} ({name})")


def pipe_holders(fd: int) -> list[tuple[int, str]]:
    """The processes other than this one that hold the pipe of ``fd`` open (``/proc/PID/fd``, same user only),
    as (pid, command name). ``[]`` off Linux or when ``fd`` is not a pipe."""
    try:
        inode = os.fstat(fd).st_ino
    except OSError:
        return []
    target, found = f"pipe:[{inode}]", []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if any(os.readlink(f"/proc/{entry}/fd/{n}") == target for n in os.listdir(f"/proc/{entry}/fd")):
                    with open(f"/proc/{entry}/comm") as f:
                        found.append((int(entry), f.read().strip()))
    return found


def kill_tree(pid: int, include_self: bool = True, group: bool = False) -> list[int]:
    """SIGKILL ``pid``'s descendants (and their process groups, so a ptxas whose tileiras already died goes too),
    then ``pid`` itself unless ``include_self`` is False. ``group``: then also the process group ``pid`` leads
    (:func:`signal_group`: what it started and left running, unless that made a session of its own). Never
    signals this process or its own group. Returns the pids signalled."""
    own_group = os.getpgrp()
    victims = descendants(pid)
    groups = set()
    for p in victims:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    if include_self:
        victims.append(pid)
    for g in groups - {own_group, os.getpid()}:
        if include_self or g != pid:
            signal_group(g)
    for p in victims:
        if p != os.getpid():
            signal_process(p, signal.SIGKILL)
    if group:
        signal_group(pid)
    return victims


# --- a guard that outlives a SIGKILLed tileprobe and ends what probe code left -----------------------------------------

#: The guard's program (:mod:`tileprobe.guard_script`: its orders and what it ends).
_GUARD_CODE = GUARD_CODE
_GUARD: list = []
_GUARDED: set[int] = set()   # the pids guard() was given and unguard() has not taken back: this process's own
#: The environment variable every process started after :func:`arm_guard` inherits: ``<pid>.<start ticks>`` of
#: the tileprobe process. At the end the guard SIGKILLs every process that carries it, wherever it was reparented
#: (a ptxas whose tileiras died first, a ``setsid`` grandchild of probe code): processes started by tileprobe's
#: children carry their parent's environment unless they clear it.
GUARD_ENV = "TILEPROBE_GUARD"


def guard(pid: int) -> None:
    """Have the guard process (:data:`_GUARD_CODE`) end ``pid`` — its process group and descendants — if this
    process ends before :func:`unguard` (a SIGKILL gives it no last word). For children that run probe code: their
    parent-death signal is SIGKILL (it cannot be ignored), and the guard ends what they started, whatever probe code
    did to their signal handlers. A no-op off Linux."""
    _GUARDED.add(pid)
    if not arm_guard():
        return
    with contextlib.suppress(OSError, ValueError):
        _GUARD[0].stdin.write(f"+{pid} {start_ticks(pid) or 0}\n")


def guarded() -> set[int]:
    """The pids this process gave :func:`guard` and has not :func:`unguard`-ed: the children it started itself
    (the zygote, loaders, a program of ``tune -- CMD``), never a process that only came back to it as an orphan."""
    return set(_GUARDED)


def guard_below(pid: int) -> None:
    """Have the guard note the descendants of ``pid`` (each 0.5 s, with their start times) and SIGKILL those still
    running if this process ends before :func:`unguard` — not ``pid`` itself. For this process while it is a child
    subreaper (:func:`tileprobe.program_procs.set_child_subreaper`): an orphan that comes back to it (a daemon's double fork that cleared its
    environment and left its session) is then ended with it, even when it is SIGKILLed. A no-op off Linux."""
    if not arm_guard():
        return
    with contextlib.suppress(OSError, ValueError):
        _GUARD[0].stdin.write(f"*{pid} {start_ticks(pid) or 0}\n")


def arm_guard() -> bool:
    """Start the guard process (once per process; again if it died) and set :data:`GUARD_ENV` in this process's
    environment, so every process started from now on — and what those start — is ended by the guard if this
    process ends first. Call it before starting children that run probe code or compilers. Returns whether a
    guard runs (False off Linux)."""
    if not os.path.isdir("/proc"):
        return False
    if not _GUARD or _GUARD[0].poll() is not None:
        import subprocess
        token = f"{os.getpid()}.{start_ticks(os.getpid()) or 0}"
        env = {k: v for k, v in os.environ.items() if k != GUARD_ENV}   # the guard does not mark itself
        _GUARD[:] = [subprocess.Popen([sys.executable, "-I", "-S", "-c", _GUARD_CODE, token], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                      text=True, bufsize=1, env=env)]
        os.environ[GUARD_ENV] = token
    return True


def unguard(pid: int) -> None:
    """``pid`` has ended and was reaped (or, after :func:`guard_below`, its descendants are no longer to be noted):
    the guard forgets it (its pid may be reused)."""
    _GUARDED.discard(pid)
    if _GUARD and _GUARD[0].poll() is None:
        with contextlib.suppress(OSError, ValueError):
            _GUARD[0].stdin.write(f"-{pid}\n")


def on_parent_death(signum: int = signal.SIGTERM) -> None:
    """In a worker: when the parent dies (the parent-death signal ``signum``), kill every process this worker
    started (the compiler and its ptxas), then exit. Call :func:`die_with_parent` with the same ``signum``."""
    def handler(sig, frame):
        kill_tree(os.getpid(), include_self=False)
        _REAL_EXIT(128 + sig)
    signal.signal(signum, handler)


# --- temp folders ------------------------------------------------------------------------------------------------

def _owner_alive(marker: str) -> bool:
    try:
        with open(marker, encoding="ascii") as f:
            pid_text, ticks_text = f.read().split()[:2]
        pid, ticks = int(pid_text), int(ticks_text)
    except (OSError, ValueError):
        return True          # unreadable: not ours to judge (another user's, or being written)
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):   # gone, or a zombie nobody reaped (an orphan of a SIGKILLed
        return False                            # command under a subreaper that never waits): dead either way
    try:
        return int(fields[19]) == ticks
    except (IndexError, ValueError):
        return False


def sweep_leftovers(root: str | None = None) -> list[str]:
    """Remove the temp folders of tileprobe runs that died without cleaning up (a SIGKILL): folders named
    ``tileprobe-*`` under ``root`` (default: the system temp folder) whose owner marker names a process that no
    longer exists (same pid and start time). Folders without a marker, or of live owners, are left alone.
    Returns the folders removed."""
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(root, name)
        marker = os.path.join(path, OWNER_MARKER)
        if name.startswith(TEMP_PREFIX) and os.path.isfile(marker) and not _owner_alive(marker):
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
    return removed


def make_owned_tempdir(kind: str = "audit") -> str:
    """A new temp folder ``tileprobe-KIND-*`` whose owner marker names this process (pid and start time), so that
    :func:`sweep_leftovers` in a later run removes it if this process dies without doing so. The marker is written
    before the path is returned; remove the folder with :func:`remove_owned_tempdir`."""
    path = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{kind}-")
    with open(os.path.join(path, OWNER_MARKER), "w", encoding="ascii") as f:
        f.write(f"{os.getpid()} {start_ticks(os.getpid()) or 0}\n")
    return path


def remove_owned_tempdir(path: str) -> None:
    """Remove an owned temp folder, its owner marker last: a process killed in the middle leaves a folder that
    still names its (dead) owner, which the next :func:`sweep_leftovers` removes. (``shutil.rmtree`` alone may take
    the marker first and leave an unmarked folder nobody may judge.)"""
    marker = os.path.join(path, OWNER_MARKER)
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if entry.path != marker:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    shutil.rmtree(path, ignore_errors=True)


#: Seconds between two sweeps of one temp folder by :func:`owned_tempdir` in a process (nothing waits for them).
SWEEP_EVERY_S = 60.0
_SWEPT: dict[str, float] = {}     # temp folder -> time.monotonic() of its last sweep here


@contextlib.contextmanager
def owned_tempdir(kind: str = "audit") -> Iterator[str]:
    """A temp folder ``tileprobe-KIND-*`` marked with this process as its owner (:func:`make_owned_tempdir`),
    removed on every exit Python sees (return, exception, Ctrl-C, a SIGTERM/SIGHUP turned into an exception);
    leftovers of earlier runs that were killed are swept first (:func:`sweep_leftovers`), at most once per
    :data:`SWEEP_EVERY_S` in a process (the race's intakes each use one: docs/LOG.md §59)."""
    root = tempfile.gettempdir()
    now = time.monotonic()
    if now - _SWEPT.get(root, -SWEEP_EVERY_S) >= SWEEP_EVERY_S:
        _SWEPT[root] = now
        sweep_leftovers(root)
    path = make_owned_tempdir(kind)
    try:
        yield path
    finally:
        remove_owned_tempdir(path)


def default_jobs() -> int:
    """Worker processes to use: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


#: The folder holding the tileprobe package (this file is ``tileprobe/procs.py``).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def importable_env(env=None) -> dict:
    """A copy of ``env`` (default: this process's environment) with :data:`PACKAGE_ROOT` first on ``PYTHONPATH``,
    so a child Python (a loader, a worker, the zygote, a Ray task, a lookup) imports this checkout's tileprobe."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = pythonpath(out.get("PYTHONPATH"))
    return out


def pythonpath(current=None) -> str:
    """``PYTHONPATH`` with :data:`PACKAGE_ROOT` first (``current``: the rest, None or "" for none)."""
    return os.pathsep.join([PACKAGE_ROOT, *filter(None, [current])])

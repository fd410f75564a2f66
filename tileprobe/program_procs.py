"""Processes of the programs ``tileprobe use / record / tune -- COMMAND`` start (:mod:`tileprobe.record.program`)
and orphans of probe code: this process made a child subreaper, the guard's own processes, the processes that carry
this process's guard mark, and a process's state and command line as ``/proc`` tells them (Linux; each function
says what it gives elsewhere). Split from :mod:`tileprobe.procs`, whose guard and ``/proc`` readers it uses.
"""
from __future__ import annotations

import os

from tileprobe.procs import _GUARD, _PRCTL, GUARD_ENV, ProcessTable, _stat_fields, descendants, start_ticks

# --- the programs `tileprobe use / record / tune -- COMMAND` start (tileprobe.record.program) ---------------------

#: ``PR_SET_CHILD_SUBREAPER`` from ``<linux/prctl.h>`` (Linux 3.4).
PR_SET_CHILD_SUBREAPER = 36


def set_child_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, ``man 2 prctl``) or stop being one:
    while it is, a process below it whose parent dies (a daemon's double fork, ``setsid cmd &``) becomes its child
    instead of init's, so it can be seen, named and ended. Returns whether the call succeeded (False off Linux)."""
    if _PRCTL is None:
        return False
    return _PRCTL(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0


def guard_pids(table: ProcessTable | None = None) -> set[int]:
    """The guard process of this one (:func:`arm_guard`) and what runs below it: never a program's leftover.
    ``table``: a :class:`ProcessTable` taken before (else ``/proc`` is walked)."""
    if not _GUARD or _GUARD[0].poll() is not None:
        return set()
    return {_GUARD[0].pid, *descendants(_GUARD[0].pid, table)}


def marked_processes(table: ProcessTable | None = None) -> list[int]:
    """Live processes (other than this one) whose environment carries this process's guard mark (:data:`GUARD_ENV`,
    set by :func:`arm_guard`): what it started and what those started, wherever they were reparented, unless they
    cleared their environment. [] before :func:`arm_guard` or off Linux. With ``table`` (a :class:`ProcessTable`)
    only the processes it lists that started no earlier than this one are read: the mark is inherited, so no process
    older than this one carries it (each environment read is a page; on a busy machine most processes are older)."""
    token = os.environ.get(GUARD_ENV)
    if not token or not os.path.isdir("/proc"):
        return []
    mark = f"{GUARD_ENV}={token}".encode()
    out = []
    if table is None:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    else:
        born = start_ticks(os.getpid()) or 0
        entries = [str(p) for p, ticks in table.start.items() if ticks >= born]
    for entry in entries:
        if int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``/proc/PID/stat`` field 3: R, S, D, Z …), None when it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def command_line(pid: int, limit: int = 120) -> str:
    """Process ``pid``'s command line, arguments joined by spaces, cut to ``limit`` characters with its length;
    control characters shown escaped (it is the program's text). ``?`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return "?"
    text = " ".join(a.decode(errors="replace") for a in raw.split(b"\0") if a) or "?"
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


# --- orphans of probe code: adopted, so the guard and the zygote's close find them ------------------------------------

def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (``prctl(PR_SET_CHILD_SUBREAPER)``): a process that a
    child started and left behind (a probe's ``Popen(..., start_new_session=True, env={})`` in a loader that then
    ended) is reparented here rather than to init, so it stays a descendant that :func:`kill_tree` and the guard
    (:func:`guard`) find. The caller must reap what it adopts. Returns whether it was set (False off Linux)."""
    return set_child_subreaper(True)

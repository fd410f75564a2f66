"""The guard process's program (:func:`tileprobe.procs.guard` starts it as ``python -I -S -c GUARD_CODE TOKEN``): the
text of a small script, kept apart from :mod:`tileprobe.procs` because it is a program of its own. It imports nothing
of tileprobe and runs no probe code; it reads its orders on standard input, one a line, and acts when that input
ends (the tileprobe process ended, however: a SIGKILL included).
"""
from __future__ import annotations

#: The guard: one small process per tileprobe process (no tileprobe import, no probe code), reading ``+PID TICKS`` /
#: ``-PID`` lines; at end of file (tileprobe ended, however: a SIGKILL included) it SIGKILLs the process group and
#: the descendants of every pid still registered whose start time is still TICKS, then exits. While pids are
#: registered it also notes every descendant of theirs each 0.5 s (pid and start time), and kills those too at the
#: end: a probe's child that left its session and cleared its environment (so neither the group nor the mark finds
#: it) is orphaned the moment its worker dies with tileprobe, before the guard could walk the tree (one survived a
#: SIGKILLed audit, 2026-12-04). A ``*PID TICKS`` line asks it to note the descendants of PID the same way, but not
#: PID itself (``-PID`` ends that too): tileprobe, a child subreaper while a ``-- COMMAND`` program runs
#: (:mod:`tileprobe.record.program`), names itself, so a daemon the program double-forked (``env -i setsid sh -c
#: 'sleep 600 &'``: no group, no session, no mark, its parent gone at once) is noted once it comes back to tileprobe
#: and is ended when tileprobe dies, SIGKILL included (it then goes to init, out of every tree).
GUARD_CODE = r"""
import os, select, signal, sys, time
def stat(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
def children():
    kids = {}
    for e in os.listdir("/proc"):
        g = stat(e) if e.isdigit() else None
        if g:
            kids.setdefault(int(g[1]), []).append((int(e), g[19]))
    return kids
live, below, seen, me = {}, {}, {}, os.getpid()
def walk(kids, roots):
    todo, found = list(roots), []
    while todo:
        for c, t in kids.get(todo.pop(), []):
            found.append((c, t))
            todo.append(c)
    return found
fd, buf = sys.stdin.fileno(), b""
while True:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if ready:
        data = os.read(fd, 65536)
        if not data:
            break
        *lines, buf = (buf + data).split(b"\n")
        for line in lines:
            op, _, rest = line.decode("ascii", "replace").strip().partition(" ")
            if op.startswith("+"):
                live[int(op[1:])] = rest
            elif op.startswith("*"):
                below[int(op[1:])] = rest
            elif op.startswith("-"):
                live.pop(int(op[1:]), None)
                below.pop(int(op[1:]), None)
    if live or below:
        for c, t in walk(children(), list(live) + list(below)):
            if c != me:
                seen[c] = t
        seen = {c: t for c, t in seen.items() if (stat(c) or [None] * 20)[19] == t}
targets = []
kids = children()
for pid, ticks in live.items():
    f = stat(pid)
    if f is not None and f[19] != ticks:
        continue                       # that pid is another process now
    targets += [pid] + [c for c, _ in walk(kids, [pid])]
for c, t in seen.items():              # descendants seen while they ran: a probe's child that left its session
    f = stat(c)
    if f is not None and f[19] == t:
        targets.append(c)
for target in targets:
    for kill in (lambda t: os.killpg(t, signal.SIGKILL), lambda t: os.kill(t, signal.SIGKILL)):
        try:
            kill(target)
        except OSError:
            pass
mark = ("TILEPROBE_GUARD=" + sys.argv[1]).encode() if len(sys.argv) > 1 else None
for sweep in range(8):                 # again while any is found: a marked process being started as its parent died
    found = False                      # (Ray's raylet starting its agents) appears after the first sweep
    for e in os.listdir("/proc") if mark else ():
        if e.isdigit() and int(e) != os.getpid():
            try:
                with open(f"/proc/{e}/environ", "rb") as f:
                    marked = mark in f.read().split(b"\0")
            except OSError:
                continue
            if marked:
                found = True
                try:
                    os.kill(int(e), signal.SIGKILL)
                except OSError:
                    pass
    if not found and sweep:
        break
    time.sleep(0.4)
"""

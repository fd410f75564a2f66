"""The program of ``tileprobe use / record / tune -- COMMAND``: started, signalled and ended by tileprobe.

What is promised (docs/FAILURES.md, "The start-up hook and the programs tileprobe starts"):

* SIGINT, SIGTERM and SIGHUP that reach tileprobe are passed on to the program (to its process group when it has
  one of its own; a terminal's Ctrl-C reached a program in tileprobe's foreground group already). If it has not
  ended :data:`GRACE_S` seconds after the first one (or at once on a second one), its whole process tree and group
  are SIGKILLed, and that is said.
* If tileprobe itself is SIGKILLed, the program gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``), and the guard
  process (:func:`tileprobe.procs.guard`, which program code cannot reach) SIGKILLs it, its group, its descendants,
  every process that carries the guard's mark in its environment, and every descendant of tileprobe it noted while
  the program ran (:func:`tileprobe.procs.guard_below`: a daemon that cleared its environment, left its session and
  came back to tileprobe, the subreaper, is one), at once.
* Processes the program leaves running when it ends (its daemons: ``setsid``, double forks) come back to tileprobe
  (a child subreaper, ``PR_SET_CHILD_SUBREAPER``, while the program runs) or carry the mark: they are named and
  ended. One that cleared its environment, left its session and was started less than the guard's 0.5 s walk
  before tileprobe died, or after, is out of reach (said in docs/FAILURES.md).
* A SIGINT that the shell passed ignored (a background job of a non-interactive shell) is ignored by the program
  too; tileprobe says so when one arrives, instead of waiting silently.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from tileprobe.errors import TileprobeError

#: Seconds between the first signal passed on and the SIGKILL of the program's whole tree.
GRACE_S = 10.0
FORWARDED = ("SIGTERM", "SIGHUP", "SIGINT")


@dataclass
class ProgramEnd:
    """How the program ended: its exit code (128 + N for signal N, as a shell says it), the signals tileprobe
    received while it ran (names), whether tileprobe had to kill its tree, and the processes it left running
    (``"pid N (command line)"``, ended by tileprobe)."""
    exit_code: int
    signals: list[str] = field(default_factory=list)
    killed: bool = False
    leftovers: list[str] = field(default_factory=list)
    #: the pids the tree's kill signalled: not named as leftovers when they are still dying
    victims: set[int] = field(default_factory=set, repr=False)


def terminal_foreground() -> bool:
    """Whether standard input is a terminal whose foreground process group is ours (Ctrl-C reaches the child too)."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _say(who: str, text: str) -> None:
    try:
        sys.stderr.write(f"tileprobe {who}: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def run_program(command: list[str], env: dict, who: str, grace_s: float = GRACE_S) -> ProgramEnd:
    """Run ``command`` with ``env`` as tileprobe's own (module docstring); return how it ended.

    Raises:
        TileprobeError: the command cannot be started (not found, not executable), naming it and the fix.
    """
    from tileprobe import procs, program_procs
    env = dict(env)
    if procs.arm_guard():
        env[procs.GUARD_ENV] = os.environ[procs.GUARD_ENV]
    own_group = not terminal_foreground()
    sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    reaping = program_procs.set_child_subreaper(True)
    try:
        proc = subprocess.Popen(command, env=env, preexec_fn=procs.preexec_die_with_parent(
            os.getpid(), signal.SIGTERM, new_group=own_group))
    except (OSError, subprocess.SubprocessError) as e:
        program_procs.set_child_subreaper(False)
        raise TileprobeError(f"cannot start {command[0]!r}: {getattr(e, 'strerror', None) or e}; check the "
                             "command after --") from e
    procs.guard(proc.pid)
    if reaping:     # what comes back to tileprobe (a daemon's double fork) is noted by the guard, and ended with us
        procs.guard_below(os.getpid())
    end = ProgramEnd(0)
    try:
        rc = _wait(proc, who, own_group, sigint_ignored, grace_s, end)
    finally:
        end.leftovers = _end_leftovers(proc.pid, reaping, end.victims)
        program_procs.set_child_subreaper(False)
        procs.unguard(proc.pid)
        if reaping:
            procs.unguard(os.getpid())
    end.exit_code = 128 - rc if rc < 0 else rc
    if end.leftovers:
        _say(who, f"the command left {len(end.leftovers)} process(es) running when it ended: "
                  f"{'; '.join(end.leftovers)}; tileprobe ended them (what a command starts ends with it)")
    return end


def _wait(proc, who: str, own_group: bool, sigint_ignored: bool, grace_s: float, end: ProgramEnd) -> int:
    """Wait for ``proc``, passing signals on; kill its tree ``grace_s`` after the first (at once on a second)."""
    from tileprobe.procs import kill_tree, signal_process
    deadline: list[float | None] = [None]

    def kill_now() -> None:
        if end.killed:
            return
        end.killed = True
        victims = kill_tree(proc.pid, group=own_group)
        end.victims.update(victims)
        _say(who, f"the command did not end after {', '.join(end.signals)}: killed it and its process tree "
                  f"({len(victims)} process(es), SIGKILL)")

    def forward(signum, frame):
        name = signal.Signals(signum).name
        end.signals.append(name)
        if signum == signal.SIGINT and sigint_ignored:
            _say(who, f"SIGINT received, but the shell started tileprobe with SIGINT ignored (a background job), so "
                      f"the command (pid {proc.pid}) ignores it too and runs on; SIGTERM ends it")
            return
        if deadline[0] is not None:     # a second signal: the tree goes now, not at the wait's next turn
            deadline[0] = time.monotonic()
            kill_now()
            return
        terminal = signum == signal.SIGINT and not own_group     # the terminal's Ctrl-C reached it already
        if not terminal:
            signal_process(proc.pid, signum, group=own_group)
        deadline[0] = time.monotonic() + grace_s
        _say(who, f"{name} {'reached the command too' if terminal else 'passed on to the command'} (pid {proc.pid}); "
                  f"its whole process tree is killed if it has not ended in {grace_s:g} s (at once on a second "
                  "signal)")

    old = {}
    for sig in FORWARDED:
        if hasattr(signal, sig):
            old[sig] = signal.signal(getattr(signal, sig), forward)
    try:
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            if deadline[0] is not None and time.monotonic() >= deadline[0]:
                kill_now()
    finally:
        for sig, handler in old.items():
            signal.signal(getattr(signal, sig), handler)


def _end_leftovers(pid: int, reaping: bool, killed: set[int]) -> list[str]:
    """Kill and name what the program (``pid``, ended) left running: processes that came back to this one (the
    subreaper), and processes carrying this run's guard mark; reap those that came back. Never tileprobe's own
    children (:func:`tileprobe.procs.guarded`: its zygote and loaders, started before or beside the program) nor
    what runs below them. ``killed``: pids the tree's kill signalled already (still dying, not left running:
    reaped, not named)."""
    from tileprobe import procs, program_procs
    table = procs.process_table()       # one walk of /proc for the three questions
    spare = program_procs.guard_pids(table)
    for own in procs.guarded() - {pid}:   # tileprobe's own children (its zygote, loaders) and what runs below them
        spare |= {own, *procs.descendants(own, table)}
    found = {p for p in procs.descendants(os.getpid(), table) if p not in spare} if reaping else set()
    found |= set(program_procs.marked_processes(table)) - spare - {os.getpid(), pid}
    out = []
    for p in sorted(found):
        if p in killed or program_procs.process_state(p) in (None, "Z", "X"):
            _reap(p)
            continue
        out.append(f"pid {p} ({program_procs.command_line(p)})")
        procs.kill_tree(p)
    for p in found:
        _reap(p)
    return out


def _reap(pid: int) -> None:
    for _ in range(50):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:    # not ours (a marked process elsewhere in the tree): its parent reaps it
            return
        if done:
            return
        time.sleep(0.02)

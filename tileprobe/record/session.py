"""Run a command with recording on, then turn what it launched into probes (``tileprobe record``'s pipeline)."""
from __future__ import annotations

import datetime
import os
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tileprobe.errors import TileprobeError
from tileprobe.record import hook
from tileprobe.record.group import ProbePlan, group
from tileprobe.record.log import Recording, read_log
from tileprobe.record.model import Launch
from tileprobe.record.write import PROBE_DIR, SUMMARY_FILE, Origin, summary, write_probes, write_summary

if TYPE_CHECKING:
    from tileprobe.record.program import ProgramEnd

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

BY_CHOICES = ("signature", "launch")


@dataclass
class RecordResult:
    """What a recording gave: the command's exit code (None when nothing ran), the recording, the probe files
    written with their plans, the summary file, notes (things that could not be done, said once), and the tuning
    probes written from the program's searches (:class:`~tileprobe.record.searches.SearchProbe`)."""
    exit_code: int | None = None
    recording: Recording | None = None
    written: list[tuple[str, ProbePlan]] = field(default_factory=list)
    summary_path: str = ""
    notes: list[str] = field(default_factory=list)
    searches: list = field(default_factory=list)     # SearchProbe: one tuning probe per recorded search
    timeouts: list[str] = field(default_factory=list)   # first calls at or past their compiler timeout
    program: ProgramEnd | None = None      # how the recorded command ended (a command run; None: a cache read)


def now() -> str:
    """Local time as ``YYYY-MM-DD HH:MM`` for the header of written probes."""
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M")


def prepare_dir(out_dir: str, force: bool = False) -> None:
    """Make ``out_dir`` ready for a new recording.

    Raises:
        TileprobeError: it holds an earlier recording (and ``force`` is false), or it is a non-empty folder that
            is not a recording.
    """
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        ours = [n for n in (SUMMARY_FILE, hook.LAUNCH_DIR, PROBE_DIR, hook.HOOK_DIR) if os.path.exists(os.path.join(out_dir, n))]
        if not ours:
            raise TileprobeError(f"{out_dir} is a non-empty folder that is not a tileprobe recording: give a new or "
                                 "empty folder with -o")
        if not force:
            raise TileprobeError(f"{out_dir} already holds a recording: give another folder with -o, or --force "
                                 "to replace it")
        for n in ours:
            p = os.path.join(out_dir, n)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    os.makedirs(out_dir, exist_ok=True)


def run_command(command: list[str], out_dir: str, keep_use: bool = True):
    """Run ``command`` with every Python process it starts recording into ``out_dir/launches``, as tileprobe's own
    (:func:`tileprobe.record.program.run_program`: signals passed on, its tree killed after a grace period, ended
    if tileprobe is killed, its leftovers named). ``keep_use``: a ``tileprobe use`` table in the environment
    (``TILEPROBE_USE_TABLE``) stays in force; ``tune -- COMMAND`` drops it (the program's searches must run).

    Returns the :class:`~tileprobe.record.program.ProgramEnd` (exit code 128 + N when a signal N ended it).

    Raises:
        TileprobeError: the command cannot be started (not found, not executable).
    """
    from tileprobe.record.program import run_program
    if not command:
        raise TileprobeError("no command to record: tileprobe record -o DIR -- python my_script.py")
    env = hook.recording_env(out_dir)
    if not keep_use:
        env.pop(hook.load_capture().ENV_USE, None)
    os.makedirs(hook.launch_dir(out_dir), exist_ok=True)
    return run_program(command, env, "record")


def plans_from(launches: list[Launch], *, top: int, by: str, hints: str) -> tuple[list[ProbePlan], list[str]]:
    """Group launches into probe plans (JIT signatures computed first when ``by="signature"``)."""
    if by not in BY_CHOICES:
        raise TileprobeError(f"--by {by!r}: give one of {', '.join(BY_CHOICES)}")
    if top < 1:
        raise TileprobeError(f"--top {top}: give 1 or more cases per kernel")
    notes = []
    if by == "signature":
        from tileprobe.record.signatures import compute_symbols
        notes = compute_symbols(launches)
    return group(launches, top=top, hints=hints), notes


def probes_from_log(out_dir: str, *, top: int = 10, by: str = "signature", hints: str = "around",
                    origin: Origin | None = None, exit_code: int | None = None) -> RecordResult:
    """Write ``out_dir/probes/*.py`` and ``out_dir/record.json`` from the launches recorded in ``out_dir/launches``."""
    rec = read_log(hook.launch_dir(out_dir))
    plans, notes = plans_from(rec.launches, top=top, by=by, hints=hints)
    timeouts = compile_timeouts(rec.launches)
    notes += timeouts
    notes += rec.undescribed
    for name, n in rec.overflow.items():
        notes.append(f"{name}: {n:,} launches counted but not described (over the per-process limit of distinct "
                     "launches; TILEPROBE_RECORD_MAX_DISTINCT raises it)")
    if origin is None:
        command = rec.processes[0].argv if rec.processes else []
        origin = Origin("record", now(), command=command)
    for p in (os.path.join(out_dir, PROBE_DIR),):
        if os.path.isdir(p):
            shutil.rmtree(p)
    written = write_probes(plans, out_dir, origin)
    from tileprobe.record.searches import search_summary, write_search_probes
    searched, search_notes = write_search_probes(rec.searches, out_dir, origin)
    notes += search_notes
    data = summary(written, origin, out_dir, exit_code=exit_code, processes=len(rec.processes),
                   launches=rec.total_launches, errors=rec.errors, notes=notes, unreadable=rec.unreadable,
                   searches=search_summary(searched, out_dir))
    path = write_summary(data, out_dir)
    return RecordResult(exit_code, rec, written, path, notes, searched, timeouts)


def compile_timeouts(launches) -> list[str]:
    """One line per distinct launch whose first call (cuTile's JIT compile included, unless its cache had the
    cubin) ran under a compiler timeout and either raised ``TileCompilerTimeoutError`` or took at least that long:
    the kernel, its grid, the first call's time, the timeout and the margin."""
    out = []
    for la in launches:
        limit, took = la.compiler_timeout_s, la.first_call_s
        if limit is None or took is None:
            continue
        timed_out = "Timeout" in (la.first_error or "").split(":", 1)[0]
        if not timed_out and took < limit:
            continue
        what = (f"the compile timed out ({la.first_error})" if timed_out else
                f"its first call took {took:.3f} s, {took - limit:+.3f} s past the timeout (JIT compile included)")
        out.append(f"compiler timeout: {la.kernel.name} grid {list(la.grid or ())} ran under ct.compiler_timeout"
                   f"({limit:g} s): {what}; audit the recorded probe (`tileprobe audit PROBE --compiler-timeout "
                   f"{limit:g}`) for each variant's compile time on this machine")
    return out


def record(command: list[str], out_dir: str, *, top: int = 10, by: str = "signature", hints: str = "around",
           force: bool = False, keep_use: bool = True) -> RecordResult:
    """Run ``command`` recorded, then write probes: ``tileprobe record -o out_dir -- command``.

    The command's results and exit code are its own (``RecordResult.exit_code``); probes are written whatever it
    returned, from every launch logged before it ended.
    """
    prepare_dir(out_dir, force)
    end = run_command(command, out_dir, keep_use=keep_use)
    origin = Origin("record", now(), command=list(command))
    result = probes_from_log(out_dir, top=top, by=by, hints=hints, origin=origin, exit_code=end.exit_code)
    result.program = end
    return result

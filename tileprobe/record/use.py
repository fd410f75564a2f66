"""Answer a program's ``cuda.tile.tune.exhaustive_search`` calls from a tune table, with no change to its code.

Three ways in, one mechanism (the capture's :class:`Answerer`, standard library only, loaded by path):

* ``tileprobe use TABLE -- COMMAND …``: every Python process the command starts, through the same start-up hook as
  ``tileprobe record`` (:func:`use_env`);
* ``TILEPROBE_USE_TABLE=TABLE`` in the environment of a process whose ``PYTHONPATH`` holds the hook (``tileprobe
  use`` sets both);
* ``tileprobe.use("table.json")`` as a line of Python, before or after ``cuda.tile`` (and TileGym) are imported:
  references already taken (``from cuda.tile.tune import exhaustive_search``) are rebound.

A search whose key (kernel, problem arguments, the program's configurations) and provenance (GPU name, SM count,
arch, tileiras build, cuda-tile version, the kernel file's SHA-256) match a row returns at once a real
``cuda.tile.tune.TuningResult`` whose ``best.config`` is the program's own configuration object. Anything else runs
the program's search, is said once on stderr with the reason, and is appended to ``TABLE.misses.jsonl`` (read by
:func:`tileprobe.record.log.read_misses`; ``tileprobe tune --refresh TABLE`` tunes them).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from tileprobe.errors import TileprobeError, shown
from tileprobe.jsonrecord import from_dict
from tileprobe.record import hook, usehook
from tileprobe.record.tabledoc import RecordedSearchDoc, RowSearch, TableDoc, recorded_searches, table_doc

# Imports inside functions here are lazy on purpose: at the module head they would add 0.10 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

MISSES_SUFFIX = ".misses.jsonl"


def misses_path(table: str) -> str:
    """Where misses of ``table`` are noted: ``TABLE.misses.jsonl`` beside it."""
    return os.path.abspath(table) + MISSES_SUFFIX


def check_table(table: str) -> str:
    """The absolute path of a readable tune table.

    Raises:
        TileprobeError: it does not exist or is not a tileprobe tune table (names the file and the fix).
    """
    cap = hook.load_capture()
    try:
        doc = cap.read_json_file(table)
    except OSError as e:
        raise TileprobeError(f"{table}: cannot read the tune table ({e.strerror or e}); make one with "
                             "`tileprobe tune --export TABLE -- COMMAND`") from e
    except cap.TableReadError as e:
        raise TileprobeError(f"{e}; give the table `tileprobe tune --export` wrote") from None
    if not isinstance(doc, dict) or table_doc(doc).kind != "tileprobe.tune":
        raise TileprobeError(f"{table}: not a tileprobe tune table (no \"kind\": \"tileprobe.tune\")")
    version = table_doc(doc).schema_version
    if not isinstance(version, int) or isinstance(version, bool) or version > cap.TABLE_SCHEMA:
        raise TileprobeError(f"{table}: schema_version {version!r}, not the {cap.TABLE_SCHEMA} this tileprobe reads "
                             "(a newer tileprobe wrote it? upgrade, or tune again with `tileprobe tune --export`)")
    return os.path.abspath(table)


def use_env(table: str, hook_dir: str, env: dict | None = None) -> dict:
    """The environment for ``tileprobe use``: the hook (written into ``hook_dir``) first on PYTHONPATH,
    ``TILEPROBE_USE_TABLE`` = the table; a recording in progress is kept. When the table's index is not that
    table's (:func:`~tileprobe.record.capture.tables.index_mismatch`, said on stderr), ``TILEPROBE_USE_NO_INDEX``
    = the table: its processes read the table whole."""
    env = dict(os.environ if env is None else env)
    path = hook.write_hook(hook_dir)
    old = env.get("PYTHONPATH", "")
    if path not in old.split(os.pathsep):
        env["PYTHONPATH"] = path + (os.pathsep + old if old else "")
    cap = hook.load_capture()
    env[cap.ENV_USE] = os.path.abspath(table)
    why = cap.index_mismatch(os.path.abspath(table))
    if why is not None:          # every process reads the table whole; said once, here
        env[cap.ENV_NO_INDEX] = os.path.abspath(table)
        sys.stderr.write(f"tileprobe use: the index {table}.index is not this table's: {why}; each searching "
                         "process reads the table whole instead. Export the table again (or `tileprobe table "
                         "merge`) to rebuild its index\n")
    else:
        env.pop(cap.ENV_NO_INDEX, None)
    return env


def run_with_table(table: str, command: list[str], extra_env: dict | None = None) -> int:
    """Run ``command`` with its searches answered from ``table``; return its exit code (128 + N for signal N).
    The command is tileprobe's own (:func:`tileprobe.record.program.run_program`: signals passed on, its tree
    killed after a grace period, ended if tileprobe is killed); the hook lives in an owned temp folder
    ``$TMPDIR/tileprobe-use-*`` removed on exit and swept by a later run when a SIGKILL left it. The command's
    processes get a run id (``TILEPROBE_USE_RUN``): ranks of it (``WORLD_SIZE`` > 1) search each miss once and share
    the pick through ``TABLE.shared/<run>/`` (:mod:`tileprobe.record.capture_ranks`), removed when the command ends.
    ``extra_env``:
    more variables for the program (:func:`control_env`).

    Raises:
        TileprobeError: no command, the table is not a tune table, the command cannot be started.
    """
    return run_with_coverage(table, command, extra_env, coverage=False)[0]


def run_with_coverage(table: str, command: list[str], extra_env: dict | None = None, coverage: bool = True):
    """:func:`run_with_table` that also counts, in every process of the program, its searches by outcome and its
    launches per kernel (:mod:`tileprobe.record.usehook`); returns (exit code, :class:`~tileprobe.record.coverage
    .Coverage` or None without ``coverage``), added up after the program ended.

    Raises:
        TileprobeError: as :func:`run_with_table`.
    """
    from tileprobe.procs import owned_tempdir
    from tileprobe.record.program import run_program
    if not command:
        raise TileprobeError("no command: tileprobe use TABLE -- python my_script.py")
    import shutil
    import uuid

    from tileprobe.record.capture_ranks import ENV_RUN, shared_folder
    table = check_table(table)
    env_run = {ENV_RUN: f"{os.getpid()}-{uuid.uuid4().hex[:12]}"}   # ranks of this run share their misses' picks
    try:
        with owned_tempdir("use") as tmp:
            env = {**use_env(table, tmp), **env_run}
            env.update(extra_env or {})
            events = os.path.join(tmp, "coverage")
            if coverage:
                env[usehook.ENV_COVERAGE] = events
            rc = run_program(command, env, "use").exit_code
            if not coverage:
                return rc, None
            from tileprobe.record.coverage import read_coverage
            doc, recorded = _table_and_recording(table)
            return rc, read_coverage(events, doc, recorded)
    finally:
        folder = shared_folder(table, {**env_run, "WORLD_SIZE": "2"})
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(folder))      # TABLE.shared/, when no other run uses it


@dataclass(frozen=True)
class _RecordJson:
    """What ``use`` reads of ``record.json``: its ``searches`` (:func:`recorded_searches`)."""
    searches: Any = None


def _table_and_recording(table: str) -> tuple[TableDoc, list[RecordedSearchDoc]]:
    """The table's document and its recording's searches (``TABLE.record/record.json``: [] when it is not there or
    cannot be read; it only gives the rows' problems for the nearest row of a miss)."""
    cap = hook.load_capture()
    doc = table_doc(cap.read_json_file(table))
    try:
        rec = cap.read_json_file(os.path.abspath(table) + ".record/record.json")
        searches = from_dict(_RecordJson, rec).searches if isinstance(rec, dict) else None
    except (OSError, ValueError):
        searches = None
    return doc, recorded_searches(searches)


def control_env(table: str, off: list[str], pins: list[str]) -> dict:
    """The environment variables that carry ``--off KERNEL`` and ``--pin KERNEL=CONFIG`` to the program's
    processes (:data:`usehook.ENV_OFF`, :data:`usehook.ENV_PIN`), checked against ``table``: every kernel must have
    rows there; CONFIG is the program's configuration as JSON (``'{"TILE": 1024}'``: the table's ``search.config``)
    or a row's search key (its first 6+ hex digits), and must be one of the configurations the table's recording
    holds for that kernel when the recording is there.

    Raises:
        TileprobeError: an unknown kernel, a CONFIG that is neither JSON nor a row key, a configuration outside the
            kernel's recorded space (each names the value, what is known and the fix).
    """
    doc, recorded = _table_and_recording(table)
    kernels = doc.row_searches()
    known = ", ".join(sorted(kernels)) or "(none)"
    env: dict = {}

    def kernel_rows(name: str, flag: str) -> list[RowSearch]:
        if name not in kernels:
            raise TileprobeError(f"{flag} {shown(name)}: {table} has no rows for a kernel of that name (its kernels: "
                                 f"{known}); give one of them")
        return kernels[name]

    for name in off:
        kernel_rows(name, "--off")
    if off:
        env[usehook.ENV_OFF] = ",".join(off)
    pinned = {}
    for item in pins:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise TileprobeError(f"--pin {shown(item, quote=True)}: give KERNEL=CONFIG, e.g. --pin vadd='{{\"TILE\": 1024}}' or "
                                 "--pin vadd=1a2b3c4d (a row's search key)")
        rows = kernel_rows(name, "--pin")
        pinned[name] = _pin_config(table, name, value, rows, recorded)
    if pinned:
        env[usehook.ENV_PIN] = json.dumps(pinned, sort_keys=True)
    return env


def _pin_config(table: str, name: str, value: str, rows: list[RowSearch], recorded: list[RecordedSearchDoc]):
    """The configuration ``--pin NAME=VALUE`` names (:func:`control_env`)."""
    import re
    if re.fullmatch(r"[0-9a-fA-F]{6,64}", value):
        match = [r for r in rows if str(r.key if r.key is not None else "").startswith(value.lower())]
        if len(match) != 1:
            keys = ", ".join(str(r.key) for r in rows) or "(none)"
            raise TileprobeError(f"--pin {shown(name + '=' + value)}: {'no' if not match else 'more than one'} row "
                                 f"of {shown(name)} in "
                                 f"{table} has a search key starting so (its keys: {keys})")
        return match[0].config
    canon = usehook.canon_text
    said = shown(name + "=" + value)
    try:
        config = json.loads(value)
        text = canon(config)
    except RecursionError:
        raise TileprobeError(f"--pin {said}: nested deeper than a configuration can be; give the program's "
                             f"configuration as JSON, e.g. --pin {shown(name)}='{{\"TILE\": 1024}}'") from None
    except ValueError as e:
        raise TileprobeError(f"--pin {said}: not JSON ({shown(e)}) nor a row's search key; give the program's "
                             f"configuration as JSON, e.g. --pin {shown(name)}='{{\"TILE\": 1024}}'") from None
    space = [c.config for s in recorded if s.name == name for c in s.config_docs()]
    if space and text not in {canon(c) for c in space}:
        known = ", ".join(sorted({canon(c) for c in space})[:6])
        raise TileprobeError(f"--pin {said}: not one of the configurations the program searches for {shown(name)} "
                             f"(recorded in {os.path.abspath(table)}.record: {known}); pin one of them")
    return config


def use(table: str):
    """Answer this process's searches from ``table`` from now on (the one-line form: ``tileprobe.use("t.json")``).

    Returns the capture's ``Answerer`` (``.answered``: searches answered so far; ``.misses_path``).

    Raises:
        TileprobeError: the table cannot be read or is not a tune table.
    """
    return hook.load_capture().install_use(check_table(table))

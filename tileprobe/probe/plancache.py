"""Loader reports kept across runs (issue 22: a warm re-audit costs < 1 s per 100 variants): a probe file whose
code has not changed is not imported again.

A warm re-audit of the bundled examples (274 variants, every one in the store) took 10–14 s on the 2-core machine
(2026-12-02), nearly all of it in the loader children importing TileGym and torch (5 s each) to plan probes whose
plans had not changed. The plan a loader makes (:class:`~tileprobe.probe.contained.FileReport`: each probe's
grids, hashes, signatures, skips, and what the file printed) is a function of the code it ran and of what it was
asked, so it is kept here with:

* the **code it ran**: every module file the loader had imported when it reported (the probe file, its kernel's
  module, TileGym, torch, cuTile, tileprobe …), each with its size and modification time in ns — the check that
  Python's own ``.pyc`` files and mypy's incremental cache make;
* the **question**: the probe file's path, the targets, the variant limit, ``--case`` / ``--hint`` overrides, the
  SM count, the interpreter, ``sys.path``, the working directory, the tileprobe version and the environment
  (less terminal and shell variables that no probe reads: :data:`VOLATILE_ENV`).

A report is reused only when the question is the same and every file is unchanged; reports with errors are not
kept (a fix elsewhere — a data file, a network share — must be seen at once). What a probe reads besides code
(a data file, the clock, random numbers) is not tracked: ``TILEPROBE_PLAN_CACHE=0`` turns the cache off. Entries
live in ``<user cache dir>/plans/`` (JSON, data only: :mod:`tileprobe.probe.wire`), at most :data:`MAX_ENTRIES`.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from typing import Any
from platformdirs import user_cache_dir
from tileprobe._version import __version__
from tileprobe.probe import wire

#: Entries kept (the least recently written go first).
MAX_ENTRIES = 512
#: Environment variables left out of the key: the terminal's and the shell's, which no probe plan depends on.
VOLATILE_ENV = ("COLUMNS", "LINES", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "PWD", "OLDPWD",
                "SHLVL", "_", "PS1", "PS2", "DISPLAY", "WINDOWID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
                "TMUX", "TMUX_PANE", "STY", "NO_COLOR", "FORCE_COLOR", "TILEPROBE_GUARD")
ENV = "TILEPROBE_PLAN_CACHE"


def enabled() -> bool:
    """False when ``TILEPROBE_PLAN_CACHE=0``."""
    return os.environ.get(ENV, "1") != "0"


def _folder() -> str:
    return os.path.join(user_cache_dir("tileprobe"), "plans")


def key(path: str, question: dict) -> str:
    """SHA-256 (hex) of what a loader was asked about ``path`` (module doc, "the question")."""
    env = {k: v for k, v in os.environ.items() if k not in VOLATILE_ENV}
    doc = {"path": os.path.abspath(path), "question": question, "python": sys.executable, "sys_path": sys.path,
           "cwd": os.getcwd(), "tileprobe": __version__, "env": env}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()


def code_files() -> list[list]:
    """In a loader child: ``[path, size, mtime_ns]`` of every module file imported in this process."""
    out, seen = [], set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in seen:
            continue
        seen.add(path)
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append([path, st.st_size, st.st_mtime_ns])
    return sorted(out)


def _unchanged(files: Any) -> bool:
    if not isinstance(files, list) or not files:
        return False
    for entry in files:
        try:
            path, size, mtime = entry
            st = os.stat(path)
        except (OSError, TypeError, ValueError):
            return False
        if st.st_size != size or st.st_mtime_ns != mtime:
            return False
    return True


def lookup(k: str) -> dict | None:
    """The kept report data (:func:`tileprobe.probe.contained.report_data`) for key ``k`` when every file it ran
    is unchanged; else None (also for an unreadable or damaged entry)."""
    if not enabled():
        return None
    try:
        with open(os.path.join(_folder(), k + ".json"), "rb") as f:
            doc = wire.loads(f.read())
    except (OSError, wire.WireError, ValueError):
        return None
    if not isinstance(doc, dict) or not _unchanged(doc.get("code_files")):
        return None
    return doc.get("report") if isinstance(doc.get("report"), dict) else None


def save(k: str, report: dict, files: list) -> None:
    """Keep ``report`` (data) under key ``k`` with the ``files`` it ran; never raises (a cache)."""
    if not enabled() or not files:
        return
    folder = _folder()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".plan-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(wire.dumps({"report": report, "code_files": files}, "a loader report"))
        os.replace(tmp, os.path.join(folder, k + ".json"))
        _prune(folder)
    except (OSError, wire.NotData, wire.WireError):
        return


def _prune(folder: str) -> None:
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
        if len(names) <= MAX_ENTRIES:
            return
        names.sort(key=lambda n: os.stat(os.path.join(folder, n)).st_mtime_ns)
        for n in names[:len(names) - MAX_ENTRIES]:
            os.unlink(os.path.join(folder, n))
    except OSError:
        return

"""Loader reports kept across runs (a warm re-audit costs < 1 s per 100 variants): a probe file whose
code has not changed is not imported again.

A warm re-audit of the bundled examples (274 variants, every one in the store) took 10–14 s on the 2-core machine
(2026-12-02), nearly all of it in the loader children importing TileGym and torch (5 s each) to plan probes whose
plans had not changed. The plan a loader makes (:class:`~tileprobe.probe.contained.FileReport`: each probe's
grids, hashes, signatures, skips, and what the file printed) is a function of the code it ran and of what it was
asked, so it is kept here with:

* the **code it ran**: every module file the loader had imported when it reported (the probe file, its kernel's
  module, TileGym, torch, cuTile, tileprobe …), each with its size and modification time in ns — the check that
  Python's own ``.pyc`` files and mypy's incremental cache make — and, for the user's own code (outside the
  standard library and site-packages), its SHA-256; and the modules imports looked for and did not find (one
  created later, which an ``ImportError`` fallback would import, makes the entry stale);
* the **question**: the probe file's path, the targets, the variant limit, ``--case`` / ``--hint`` overrides, the
  SM count, the interpreter, ``sys.path``, the working directory, the tileprobe version and the environment
  (less terminal and shell variables that no probe reads: :data:`VOLATILE_ENV`).

A report is reused only when the question is the same and every file is unchanged; reports with errors are not
kept (a fix elsewhere — a data file, a network share — must be seen at once). What a probe reads besides the
modules it imports (a data file, code run by ``runpy``/``exec``, the clock, random numbers) is not tracked:
``TILEPROBE_PLAN_CACHE=0`` turns the cache off. Entries
live in ``<user cache dir>/plans/`` (JSON, data only: :mod:`tileprobe.probe.wire`), at most :data:`MAX_ENTRIES`.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
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


def installed_roots() -> tuple[str, ...]:
    """Folders of installed code (the standard library, site-packages): pip changes a file's size or mtime there."""
    import sysconfig
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {p for p in sys.path if p and os.path.basename(p) in ("site-packages", "dist-packages")}
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots if r))


#: Largest module file hashed (bytes); a larger one, or one that is not a regular file, has no hash (a miss).
MAX_HASHED_BYTES = 64 << 20


def _sha256(path: str) -> str | None:
    """SHA-256 of module file ``path``; None when it is not a regular file, larger than :data:`MAX_HASHED_BYTES`
    or unreadable. The lookup runs in the tileprobe process: a module swapped for a FIFO (whose ``open`` blocks) or
    a link to ``/dev/zero`` is a miss, never a hang (:func:`tileprobe.cachefile.read_cache_bytes`)."""
    from tileprobe.cachefile import read_cache_bytes
    data = read_cache_bytes(path, MAX_HASHED_BYTES)
    return None if data is None else hashlib.sha256(data).hexdigest()


#: In a loader child: each module file as :func:`code_files` first described it (path → (entry, user's own)).
_DESCRIBED: dict[str, tuple[list, bool]] = {}


def code_files() -> list[list]:
    """In a loader child: ``[path, size, mtime_ns, sha256 | None]`` of every module file imported in this process,
    the SHA-256 for the user's own code (outside the standard library and site-packages: an edit that keeps size
    and mtime, as ``cp -p`` or ``rsync -a`` make, is still seen), and ``[folder, -1, mtime_ns, None]`` for each
    top-level module name an import looked for and did not find, ``[name, -2, 0, None]`` (a module created later,
    which an ``ImportError`` fallback would now import: :func:`watch_missing`).

    A file is described once per process, the first time it is seen (:data:`_DESCRIBED`): a loader child that
    stays for several jobs (:func:`tileprobe.probe.contained.loader_sessions`) ran each module once, and a later
    report describes the file as it was then, not as an edit made since left it."""
    installed = installed_roots()
    out, seen, folders = [], set(), []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in seen:
            continue
        seen.add(path)
        if path not in _DESCRIBED:
            try:
                st = os.stat(path)
            except OSError:
                continue
            mine = not os.path.realpath(path).startswith(installed)
            _DESCRIBED[path] = ([path, st.st_size, st.st_mtime_ns, _sha256(path) if mine else None], mine)
        entry, mine = _DESCRIBED[path]
        out.append(list(entry))
        if mine and os.path.dirname(path) not in folders:
            folders.append(os.path.dirname(path))     # a probe's folder is on sys.path only while it is imported
    dirs = folders + [os.path.abspath(p or ".") for p in sys.path if isinstance(p, str)]
    out.extend([name, -2, 0, dirs] for name in sorted(_MISSING.names - set(sys.modules)))
    return sorted(out, key=lambda e: e[0])


class _Missing:
    """The last ``sys.meta_path`` finder: it sees the top-level names no other finder found, and finds nothing."""

    def __init__(self):
        self.names: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        """Note a top-level ``name`` that nothing found; return None (not found here either)."""
        if path is None and "." not in name:
            self.names.add(name)
        return None


_MISSING = _Missing()


def watch_missing() -> None:
    """In a loader child, before probe code runs: note the modules imports look for and do not find."""
    if _MISSING not in sys.meta_path:
        sys.meta_path.append(_MISSING)


def _appeared(name: str, dirs) -> bool:
    """Whether a module ``name`` now exists in one of ``dirs`` (a file, a package, an extension)."""
    if not isinstance(dirs, list):
        return True
    for d in dirs:
        entries = _listing(d)
        if name in entries or any(e.startswith(name + ".") and e.endswith((".py", ".so", ".pyc")) for e in entries):
            return True
    return False


_LISTINGS: dict[str, list[str]] = {}


def _listing(folder) -> list[str]:
    if folder not in _LISTINGS:
        try:
            _LISTINGS[folder] = os.listdir(folder) if isinstance(folder, str) and os.path.isdir(folder) else []
        except OSError:
            _LISTINGS[folder] = []
    return _LISTINGS[folder]


def _unchanged(files: Any) -> bool:
    _LISTINGS.clear()
    if not isinstance(files, list) or not files:
        return False
    for entry in files:
        try:
            path, size, mtime, digest = entry
            if size == -2:                                 # a module that was not there
                if _appeared(path, digest):
                    return False
                continue
            st = os.stat(path)
        except (OSError, TypeError, ValueError):
            return False
        if st.st_size != size or st.st_mtime_ns != mtime or not stat.S_ISREG(st.st_mode):
            return False
        if digest is not None and _sha256(path) != digest:
            return False
    return True


def lookup(k: str) -> dict | None:
    """The kept report data (:func:`tileprobe.probe.contained.report_data`) for key ``k`` when every file it ran
    is unchanged; else None (also for an unreadable, damaged or unsafe entry: :mod:`tileprobe.cachefile`)."""
    if not enabled():
        return None
    from tileprobe.cachefile import read_cache_bytes
    raw = read_cache_bytes(os.path.join(_folder(), k + ".json"))   # a FIFO, /dev/zero, a huge file: a miss
    try:
        doc = wire.loads(raw) if raw is not None else None
    except (wire.WireError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not _unchanged(doc.get("code_files")):
        return None
    return doc.get("report") if isinstance(doc.get("report"), dict) else None


def save(k: str, report: dict, files: list) -> None:
    """Keep ``report`` (data) under key ``k`` with the ``files`` it ran; never raises, leaves no temp file."""
    if not enabled() or not files:
        return
    from tileprobe.cachefile import write_cache_bytes
    try:
        data = wire.dumps({"report": report, "code_files": files}, "a loader report")
    except (wire.NotData, wire.WireError):
        return
    folder = _folder()
    if write_cache_bytes(os.path.join(folder, k + ".json"), data):
        _prune(folder)


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

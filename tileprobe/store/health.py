"""The store file's health: a full disk told apart from damage, read-only media, and an integrity check after a
command in which untrusted code could reach the file.

**A full disk is not damage.** SQLite reports a write that found no space as ``SQLITE_FULL`` ("database or disk is
full") and, when the shared-memory or journal file cannot grow, as one of its ``SQLITE_IOERR`` codes; either way it
rolled the write back and the file is as it was. :func:`classify` reads the error code (``sqlite_errorcode``,
Python 3.11+) and the free space of the file's folder (``os.statvfs``): a full disk is "no space left on DEVICE:
N bytes free, the store is intact", never "move it aside" (a user who followed that advice lost a good store,
2026-12-04).

**Damage is noticed.** A probe's ``args()`` overwrote 8 KB of the store and the audit and ``history`` exited 0
(2026-12-04). After a command that ran untrusted code (probe code, compilers) with the store open, the command runs
:func:`quick_check` (``PRAGMA quick_check``: every page and index, not the cross-checks of ``integrity_check``); a
failure leaves a note beside the file (:func:`note_path`), and every later open of that file runs the check again
first (:meth:`~tileprobe.store.connection.StoreConnection.open`): damage is then said by ``history``, ``report``
and the next audit, with how to recover, until the check passes. The commands that read rows to show or count them,
or prune them (``history``, ``report``, ``compare``, ``store size``, ``store prune``), run the full check
(``integrity_check``) before they read, so damage that no tileprobe command saw happen (an index whose rows no
longer match its table) is said there too.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3

#: SQLite's primary result codes that matter here (https://www.sqlite.org/rescode.html).
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 10, 11, 13, 26
SQLITE_READONLY, SQLITE_CANTOPEN = 8, 14
#: Free bytes under which an I/O error while writing is taken for a full disk: SQLite grows its write-ahead log and
#: shared-memory files by pages and 32 KiB blocks, a few MiB at most for one save (a cubin is stored whole).
LOW_SPACE_BYTES = 64 << 20
#: Lines of ``PRAGMA quick_check`` output kept in a damage note.
NOTE_LINES = 5


def free_bytes(path: str) -> int | None:
    """Bytes free to this user on the file system that holds ``path`` (its folder when it does not exist yet);
    None when it cannot be asked."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)) or "."
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def device_of(path: str) -> str:
    """The mount point that holds ``path`` and its device, as ``"/mnt/x (tmpfs)"`` (``/proc/self/mounts``; the
    folder itself when that cannot be read)."""
    where = os.path.realpath(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)) or ".")
    best = ("", "")
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                point = parts[1].replace("\\040", " ")
                inside = where == point or where.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, parts[0])
    except OSError:
        pass
    return f"{best[0]} ({best[1]})" if best[0] else where


def error_code(e: BaseException) -> int | None:
    """The primary SQLite result code of ``e`` (``sqlite_errorcode & 0xff``), or None (not an sqlite3 error)."""
    code = getattr(e, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


#: The files SQLite keeps beside a store ``S``: its write-ahead log, the log's shared-memory index, a rollback
#: journal (https://www.sqlite.org/tempfiles.html).
COMPANIONS = (("-wal", "its write-ahead log"), ("-shm", "its write-ahead log's shared-memory index"),
              ("-journal", "its rollback journal"))


def _kind_of(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is, in words, when it is not a regular file (None when it is one)."""
    import stat
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return None if stat.S_ISREG(mode) else "not a regular file"


def companion_problem(path: str) -> tuple[str, str] | None:
    """The first file SQLite keeps beside the store at ``path`` (:data:`COMPANIONS`) that exists and is not a
    regular file — a folder at ``S-wal`` makes every open fail with "unable to open database file", which reads as
    read-only media — as (its path, what it is and is for); None when there is none."""
    for suffix, role in COMPANIONS:
        other = path + suffix
        if not os.path.lexists(other):
            continue
        try:
            kind = _kind_of(os.stat(other).st_mode)     # a link is judged by what it points at
        except OSError:
            kind = "a broken symbolic link"
        if kind is not None:
            return other, f"{kind}, not a file ({role}, which SQLite makes beside the store)"
    return None


def companion_message(path: str, e: BaseException) -> str:
    """The message for a store one of whose companion files is not a regular file (:func:`companion_problem`)."""
    found = companion_problem(path)
    other, what = found if found is not None else (path + "-wal", "not a regular file")
    return (f"the results store {path} cannot be opened: {other} is {what}; the store itself was not changed "
            f"(sqlite: {e}). Move {other} aside (e.g. `mv {other} {other}.bad`: a folder or a FIFO holds none of "
            "the store's rows) and run the command again, or pass --store PATH to use another store.")


def classify(e: BaseException, path: str) -> str:
    """What ``e``, raised on the store at ``path``, means: ``"full"`` (no space left), ``"companion"`` (a file SQLite
    keeps beside the store is a folder, FIFO or device: :func:`companion_problem`), ``"read-only"`` (the file or its
    folder cannot be written), ``"locked"``, ``"damaged"`` (SQLite found the file corrupt or not a database) or
    ``"io"`` (another I/O error: the file was not changed by it)."""
    code, text = error_code(e), str(e).lower()
    if (code in (SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_READONLY) or "unable to open" in text or "i/o error" in text) \
            and companion_problem(path) is not None:
        return "companion"
    low = free_bytes(path)
    if code == SQLITE_FULL or "disk is full" in text or (code == SQLITE_IOERR and low is not None
                                                         and low < LOW_SPACE_BYTES):
        return "full"
    if code in (SQLITE_READONLY, SQLITE_CANTOPEN) or "readonly" in text or "unable to open" in text:
        return "read-only"
    if "locked" in text or "busy" in text:
        return "locked"
    if code == SQLITE_IOERR or "disk i/o error" in text:
        return "io"
    return "damaged"


def full_message(path: str, e: BaseException) -> str:
    """The message for a store that met a full disk (:func:`classify` ``"full"``)."""
    free = free_bytes(path)
    return (f"no space left on {device_of(path)}: {free if free is not None else 'an unknown number of'} bytes free, "
            f"the store {path} is intact (SQLite rolled the write back; sqlite: {e}). Free some space and run the "
            "command again: what was saved before stays, and it goes on from there. Do not move the store aside.")


def writable(path: str) -> bool:
    """Whether this process could write the store at ``path`` and the files SQLite keeps beside it (its folder)."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    return os.access(folder, os.W_OK) and (not os.path.exists(path) or os.access(path, os.W_OK))


def note_path(path: str) -> str:
    """The damage note beside the store at ``path``."""
    return path + ".damaged"


def quick_check(conn: sqlite3.Connection, full: bool = False) -> list[str]:
    """``PRAGMA quick_check`` on ``conn``: ``[]`` when the file is sound, else SQLite's first lines of what is wrong
    (at most :data:`NOTE_LINES`; a file too damaged to check gives the error's text). ``full``: ``PRAGMA
    integrity_check`` instead, which also checks that every index holds exactly its table's rows (quick_check does
    not: an index whose rows no longer match its table, "row 4 missing from index", passes it; 0.25 s against 0.20 s
    for a 300 MB file of 1,000 rows on the 2-core machine, docs/LOG.md)."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = conn.execute(f"PRAGMA {pragma}({NOTE_LINES})").fetchall()
    except sqlite3.DatabaseError as e:
        return [str(e)]
    lines = [str(r[0]) for r in rows]
    return [] if lines == ["ok"] else lines


def write_note(path: str, problems: list[str]) -> bool:
    """Leave the damage note for the store at ``path`` (its problems, one a line). False when it cannot be written
    (the damage is still said by the command that found it).

    The note is written to a new temporary file in the store's folder and renamed over :func:`note_path`
    (``os.replace``), never opened in place: whatever was at that path (a symbolic link, to the store itself or to
    any other file; a FIFO, which an ``open`` for writing blocks on until a reader comes; a regular file) is replaced,
    not followed or waited on (a link ``s.sqlite.damaged -> s.sqlite`` overwrote the store with the note, a FIFO hung
    ``history`` and ``store prune``: a hostile tester, 2026-12-05). A folder at that path stays, and the note is not
    written."""
    import tempfile
    target = note_path(path)
    folder = os.path.dirname(os.path.abspath(target))
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(target) + ".", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(problems) + "\n")
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temp)
        return False
    return True


def clear_note(path: str) -> None:
    """Remove the damage note of the store at ``path`` (its check passed)."""
    try:
        os.remove(note_path(path))
    except OSError:
        pass


def damaged_message(path: str, problems: list[str], pragma: str = "quick_check") -> str:
    """The message for a store whose :func:`quick_check` failed (``pragma``: the check that found it): it is
    damaged, and how to recover."""
    shown = "; ".join(p.replace("\n", " ")[:200] for p in problems[:NOTE_LINES])
    return (f"the results store {path} is damaged (PRAGMA {pragma}: {shown}). Something other than SQLite wrote "
            "into it (untrusted code run during a command can reach the file). To recover: "
            f"`sqlite3 {path} .recover | sqlite3 {path}.recovered`, check it with `tileprobe history --store "
            f"{path}.recovered`, then move the damaged file aside and the recovered one in its place (where the damage "
            "is heavy, `.recover` can save nothing: an empty .recovered file, which that history says); or pass "
            "--store PATH to start another store. tileprobe does not delete results.")

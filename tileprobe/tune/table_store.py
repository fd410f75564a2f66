"""A tune table as a file many processes write and several machines' tables merge into.

Two jobs, both about keeping every row of a table (``tileprobe tune --export``, schema in
:mod:`tileprobe.tune.export`) whole:

* **Concurrent writers** (:func:`update_table`): each change to a table is one read-modify-write under an exclusive
  ``flock`` on ``TABLE.lock`` beside it, written to a temporary file in the same folder, flushed to disk and renamed
  over the table. Readers (``tileprobe use``, the README's reader) never see a half-written file (a rename is atomic
  on one file system), and writers (ranks of one program, tunes run side by side) never lose each other's rows (the
  lock serialises them: the second reads what the first wrote). The lock is advisory: processes that write the file
  another way are not held back.
* **Merge** (:func:`merge_tables`): tables made on different GPUs or machines become one. A row's identity is its
  kernel, problem and provenance (:data:`IDENTITY`: arch, GPU name, SM count, tileiras build, cuda-tile version,
  timing mode, kernel source hash): rows that differ in any of them are all kept, so one file answers an H100 and an
  H200 alike (``tileprobe use`` picks the row whose provenance holds where it runs). Two rows with one identity and
  the same pick (case and hints) are one row; with different picks they are a :class:`Conflict`, and the merge is
  refused (nothing is written) with both rows named.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tileprobe.errors import TileprobeError, shown
from tileprobe.schema import json_text
from tileprobe.tune.table_doc import Provenance, TuneRow, TuneTable

#: A row's fields that, beside its kernel and problem, tell rows apart in a merge: where and how it was measured.
#: The same fields ``tileprobe use`` checks a row against the machine it runs on (capture.PROVENANCE) and the timing.
IDENTITY = ("arch", "gpu", "num_sms", "tileiras", "cuda_tile", "timing", "source_sha256")


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the exclusive advisory lock of table ``path`` (``flock`` on ``path + ".lock"``, created 0o644 and kept:
    removing it while another process waits on it would let a third take a second lock).

    Raises:
        OSError: the lock file cannot be created (the folder is not writable).
        TileprobeError: a folder, link, FIFO or device is where the lock file goes (the path and the fix named).
    """
    import errno
    import fcntl
    import stat
    lock = path + ".lock"
    refused = TileprobeError(f"{shown(lock)}: not a regular file (a folder, link, FIFO or device), so the table "
                             f"cannot be locked; remove it (tileprobe makes a plain file there) and run again")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), 0o644)
    except OSError as e:
        if e.errno in (errno.EISDIR, errno.ELOOP, errno.ENXIO) or os.path.islink(lock):
            raise refused from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise refused
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)        # closing the descriptor releases the lock


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` by a temporary file in its folder (unique to this process and thread), flushed to
    disk, then renamed over ``path``: a reader sees the old file or the new one, never a part."""
    import threading
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def update_table(path: str, change: Callable[[dict | None], dict], read: Callable[[str], dict]) -> dict:
    """Apply ``change`` to the table at ``path`` under its lock and write the result atomically; return it.

    ``change`` gets the table as it is now (``read(path)``, or None when there is no file yet) and returns the
    document to write. ``read`` raises for a file that is not a table; the file is then left as it is.

    Raises:
        TileprobeError: what ``read`` or ``change`` raise (nothing is written).
        OSError: the folder is not writable.
    """
    with locked(path):
        current = read(path) if os.path.exists(path) else None
        doc = change(current)
        write_atomic(path, json_text(doc))
        with contextlib.suppress(OSError):    # without it, the hook reads the table whole
            write_index(path, doc)
    return doc


#: The table's index (read by the start-up hook: tileprobe/record/capture/tables.py ``INDEX_SUFFIX``, ``INDEX_SCHEMA``).
_INDEX_SUFFIX = ".index"
_INDEX_SCHEMA = 1
_INDEX_KEY = re.compile(r"[0-9a-f]{16}")


def write_index(table: str, doc: dict) -> None:
    """Write the index of ``doc``, just written to ``table``, in place of any older one (a new folder, renamed into
    place): ``TABLE.index/meta.json`` (the table's size, mtime and SHA-256, and the buckets' digest) and ``XY.json`` per first two hex digits of the
    search key's SHA-256, each ``[[kernel, row], …]``. Its reader is the start-up hook's (tileprobe/record/capture/tables.py,
    ``index_rows``, where the format is described; tests/test_table_index.py holds the two together). Raises
    OSError when it cannot (the table stays; the hook then reads it whole)."""
    import shutil
    import tempfile
    buckets: dict = {}
    for kernel, rows in TuneTable.from_dict(doc).rows().items():
        for row in rows if isinstance(rows, list) else ():
            search = row.search_block() if isinstance(row, TuneRow) else None
            key = search.key if search is not None else None
            if isinstance(key, str) and _INDEX_KEY.fullmatch(key):
                buckets.setdefault(hashlib.sha256(key.encode()).hexdigest()[:2], []).append([kernel, row.to_dict()])
    folder = table + _INDEX_SUFFIX
    tmp = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".tmp-", dir=os.path.dirname(os.path.abspath(table)))
    hashes: dict[str, str] = {}      # each bucket's SHA-256 (hex): their digest is checked by `tileprobe use`
    try:
        for name, pairs in buckets.items():
            data = json_text(pairs, indent=None).encode("utf-8")     # as the table writes its rows
            with open(os.path.join(tmp, name + ".json"), "wb") as b:
                b.write(data)
            hashes[name] = hashlib.sha256(data).hexdigest()
        st = os.stat(table)
        digest = hashlib.sha256()
        with open(table, "rb") as t:
            for block in iter(lambda: t.read(1 << 20), b""):
                digest.update(block)
        with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
            # not the ctime: a copy (cp -p, tar, a package) has a new one, and its index must still answer; the
            # table's and the buckets' SHA-256 are checked once per `tileprobe use` command (capture/tables.py
            # index_mismatch)
            json.dump({"schema": _INDEX_SCHEMA, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                       "sha256": digest.hexdigest(), "buckets_sha256": _buckets_digest(hashes)}, f)
        old = f"{folder}.old-{os.getpid()}"
        if os.path.lexists(folder):
            os.rename(folder, old)     # a file or a link there is moved aside too, never written through
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if os.path.isdir(old) and not os.path.islink(old):
        shutil.rmtree(old, ignore_errors=True)
    elif os.path.lexists(old):
        os.remove(old)


# --- merge ------------------------------------------------------------------------------------------------------

def _buckets_digest(hashes: dict[str, str]) -> str:
    """The SHA-256 (hex) of the lines ``"XY HASH\n"`` of an index's buckets in name order (``hashes``: bucket name
    ``XY`` -> the SHA-256 of its file's bytes): one field of ``meta.json`` covers every bucket, so the file each
    searching process reads stays its few hundred bytes. The same rule as the reader's
    (tileprobe/record/capture/tables.py ``buckets_digest``; tests/test_table_index.py holds them together)."""
    return hashlib.sha256("".join(f"{name} {h}\n" for name, h in sorted(hashes.items())).encode()).hexdigest()


@dataclass(frozen=True)
class TableRow:
    """One row of a table read for a merge: where it came from, its identity (kernel, problem, :data:`IDENTITY`)
    and its pick (case and hints as canonical JSON), the row itself (JSON data) kept to be written back."""
    source: str
    kernel: str
    index: int
    identity: tuple
    pick: str
    data: dict

    @property
    def where(self) -> str:
        """``A.json: kernels.vadd[2]``."""
        return f"{self.source}: kernels.{self.kernel}[{self.index}]"


@dataclass(frozen=True)
class Conflict:
    """Two rows of one identity whose picks differ: ``first`` kept so far, ``second`` the one that disagrees."""
    first: TableRow
    second: TableRow

    def reason(self) -> str:
        """One sentence naming both rows, their picks and the identity they share."""
        ident = ", ".join(f"{f}={v}" for f, v in zip(("problem", *IDENTITY), self.first.identity[1:]) if v is not None)
        return (f"{self.first.kernel}: {self.first.where} picks {self.first.pick} but {self.second.where} picks "
                f"{self.second.pick} for the same problem and provenance ({ident})")


@dataclass
class MergeResult:
    """What :func:`merge_tables` made: the merged document, how many rows each source gave, rows dropped as exact
    duplicates (same identity, same pick), and the conflicts (the merge is refused when there is any)."""
    doc: dict
    rows_from: dict[str, int]
    duplicates: int
    conflicts: list[Conflict]


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def table_rows(source: str, doc: dict) -> list[TableRow]:
    """Every row of a table document (as read from ``source``) as a :class:`TableRow`.

    Raises:
        TileprobeError: ``kernels`` is not an object of row lists (the place named).
    """
    kernels = TuneTable.from_dict(doc).kernels
    if not isinstance(kernels, dict):
        raise TileprobeError(f"{source}: \"kernels\" is not an object of rows; give a table `tileprobe tune --export` "
                             "wrote")
    out = []
    for kernel, rows in kernels.items():
        if not isinstance(rows, list):
            raise TileprobeError(f"{source}: kernels.{kernel} is not a list of rows")
        for i, row in enumerate(rows):
            if not isinstance(row, TuneRow):
                raise TileprobeError(f"{source}: kernels.{kernel}[{i}] is not a row object")
            values = row.provenance_values()
            for f, value in zip(IDENTITY, values):
                if isinstance(value, (list, dict)):
                    raise TileprobeError(f"{source}: kernels.{shown(kernel)}[{i}].{f} is a JSON "
                                         f"{'list' if isinstance(value, list) else 'object'}, not a single value "
                                         "(a string or number, as `tileprobe tune --export` writes); mend or drop the row")
            identity = (kernel, _canon(row.problem), *values)
            pick = _canon({"case": row.case, "hints": row.hints})
            out.append(TableRow(source, kernel, i, identity, pick, row.to_dict()))
    return out


def merge_tables(docs: list[tuple[str, dict]], make_doc: Callable[[dict, list[dict]], dict]) -> MergeResult:
    """Merge tables ``[(source, document), …]`` in order: every row kept once per identity (module doc).

    ``make_doc(kernels, provenances)`` builds the merged document around the merged ``kernels`` (rows in first-seen
    order under their kernel) and the sources' ``provenance`` blocks (:func:`tileprobe.tune.export.merged_document`).

    Raises:
        TileprobeError: a document's rows are not rows (the place named).
    """
    kept: dict[tuple, TableRow] = {}
    conflicts: list[Conflict] = []
    rows_from: dict[str, int] = {}
    duplicates = 0
    for source, doc in docs:
        rows = table_rows(source, doc)
        rows_from[source] = len(rows)
        for row in rows:
            first = kept.get(row.identity)
            if first is None:
                kept[row.identity] = row
            elif first.pick == row.pick:
                duplicates += 1
            else:
                conflicts.append(Conflict(first, row))
    kernels: dict[str, list[dict]] = {}
    for row in kept.values():
        kernels.setdefault(row.kernel, []).append(row.data)
    provenances = [p.to_dict() for p in (TuneTable.from_dict(doc).provenance for _, doc in docs)
                   if isinstance(p, Provenance)]
    return MergeResult(make_doc(kernels, provenances), rows_from, duplicates, conflicts)

"""Read a tune table as the capture must: regular files only, size-limited, strict JSON; a row's own figures
checked. Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import json
import os
import re
import sys

from .fields import Record

TABLE_SCHEMA = 1                # the tune table's schema_version this file reads (tileprobe.tune.export)


class RowChoice(Record):
    """A row's ``search`` block (the table's pick: its search ``key``, the program's ``config`` and the ``hints``
    its ``hints_fn`` gave) or ``default`` block (the program's default configuration, raced beside the pick), with
    their figures in µs (``median_us``: the race's median; ``final_us``: steady-state, when measured)."""
    __slots__ = ("config", "final_us", "hints", "key", "median_us")
    key: object
    config: object
    hints: object
    median_us: object
    final_us: object

    def choice(self) -> dict:
        """The configuration as the search's candidates are compared (``{"config": …, "hints": …}``, JSON)."""
        return {"config": self.config, "hints": self.hints}


class TableRow(Record):
    """One row of a tune table as the capture answers from it (``tileprobe.tune.export`` writes it): the pick
    (``search``), the program's default (``default``; None when the row has none), its own figures (``median_us``,
    ``samples``, ``ci_us`` [low, high] µs, ``num_sms``) and ``raw``, the row's object (its provenance fields, read by
    :func:`~.facts.stale_reasons`)."""
    __slots__ = ("ci_us", "default", "final_us", "median_us", "num_sms", "raw", "samples", "search")
    search: RowChoice
    default: RowChoice | None
    median_us: object
    final_us: object
    samples: object
    ci_us: object
    num_sms: object
    raw: dict


def table_row(d: dict) -> TableRow:
    """The :class:`TableRow` of a row's JSON object (a ``search`` or ``default`` that is no object reads as
    empty / None)."""
    row = TableRow.from_json(d)
    row.search = RowChoice.from_json(row.search) if isinstance(row.search, dict) else RowChoice()
    row.default = RowChoice.from_json(row.default) if isinstance(row.default, dict) else None
    row.raw = d
    return row


def row_problems(row: TableRow) -> list[str]:
    """Why a row's own figures are invalid (empty: they are fine): ``median_us`` not a finite positive number, a
    ``samples`` count or ``ci_us`` bound that is negative or not finite, ``num_sms`` not an integer."""
    import math
    out = []

    def bad(v, allow_none=False):
        if v is None:
            return not allow_none
        return isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0

    if bad(row.median_us) or row.median_us == 0:
        out.append(f"invalid row: median_us is {row.median_us!r}, not a positive number of µs")
    if bad(row.samples, allow_none=True):
        out.append(f"invalid row: samples is {row.samples!r}, not a count")
    ci = row.ci_us
    if ci is not None and (not isinstance(ci, list) or any(bad(v, allow_none=True) for v in ci)):
        out.append(f"invalid row: ci_us is {ci!r}, not two non-negative µs")
    n = row.num_sms
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        out.append(f"invalid row: num_sms is a {type(n).__name__} ({n!r}), not an integer SM count")
    return out


TABLE_LIMIT_BYTES = 1 << 30     # 1 GiB, as the result readers (tileprobe.schema)


class TableReadError(ValueError):
    """A tune table or recording that cannot be read as one; the message names the file and the problem."""


#: A table above this size is said once, with the fix, in each process that reads it (a searching one): parsing
#: costs about 0.1 s per 1 MB on the 2-core machine (benchmarks/programs/bench_hook.py).
TABLE_WARN_BYTES = 32 << 20


def _open_regular(path: str, flags: int) -> int:
    """A descriptor of the regular file ``path`` opened with ``flags`` plus ``O_NONBLOCK``, ``O_NOCTTY``: opening
    a FIFO does not wait for its other end, and anything but a regular file is closed and refused.

    Raises:
        OSError: it cannot be opened, or it is not a regular file (a FIFO, device, socket or directory).
    """
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):     # said as such, not as the open's ENXIO of a lone FIFO
        raise OSError(f"{path}: not a regular file (a FIFO, device or directory); tileprobe reads and writes "
                      "regular files only")
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file (a FIFO, device or directory); tileprobe reads and writes "
                          "regular files only")
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_regular(path: str, data: bytes) -> None:
    """Append ``data`` to the regular file ``path`` (created when missing) in one ``write``; never blocks on a
    FIFO or device there.

    Raises:
        OSError: it cannot be opened or written, or it is not a regular file.
    """
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_regular(path: str, limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes``; never blocks on a FIFO, never reads a device
    for ever.

    Raises:
        OSError: it cannot be opened or is not a regular file.
        TableReadError: it holds more than ``limit_bytes`` bytes (the message names the file and the limit).
    """
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit_bytes:          # refused from its size, before a byte is read
            raise TableReadError(f"{path}: {size:,} bytes, more than the {limit_bytes:,} bytes tileprobe reads")
        raw = f.read(limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise TableReadError(f"{path}: more than the {limit_bytes:,} bytes tileprobe reads")
    return raw


def read_json_file(path: str, limit_bytes: int = TABLE_LIMIT_BYTES):
    """The JSON document in the regular file ``path`` (at most ``limit_bytes``, UTF-8, nested no deeper than
    Python's recursion limit lets the parser go).

    Raises:
        OSError: it cannot be opened or stat'ed.
        TableReadError: not a regular file (a FIFO or device would hang or never end), too large, not UTF-8, not
            JSON, nested too deep; the message starts with ``path``.
    """
    import stat
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise TableReadError(f"{path}: not a regular file (a FIFO, device or directory); give a file")
    if st.st_size > limit_bytes:
        raise TableReadError(f"{path}: {st.st_size:,} bytes, more than the {limit_bytes:,} bytes tileprobe reads")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):   # replaced between stat and open
            raise TableReadError(f"{path}: not a regular file; give a file")
        raw = f.read(limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise TableReadError(f"{path}: more than the {limit_bytes:,} bytes tileprobe reads")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TableReadError(f"{path}: not UTF-8 text (byte {e.start:,})") from None
    except json.JSONDecodeError as e:
        raise TableReadError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise TableReadError(f"{path}: nested deeper than the JSON reader goes (about "
                             f"{sys.getrecursionlimit():,} levels; tileprobe writes 6)") from None
    except ValueError as e:          # an integer of more than 4,300 digits
        raise TableReadError(f"{path}: {e}") from None


#: The index beside a tune table ``T`` (folder ``T.index``, written by ``tileprobe tune --export``:
#: ``tileprobe.tune.export._write_index``, which a test holds to this reader): ``meta.json``
#: names the table's size and mtime it was made from (not its ctime: a table shipped with ``cp -p``, ``tar`` or a
#: package has a new ctime, and its index must still answer), and each ``XY.json`` holds the rows (``[[kernel, row], …]``)
#: whose search key's own SHA-256 starts with the two hex digits ``XY`` (:func:`index_bucket`: spread evenly
#: whatever the keys look like). A searching process reads one bucket (a 256th of the
#: table) instead of the whole table (a 154 MB table took 17-22 s and 0.9 GB to read, 2026-12-05); an index that
#: is missing, damaged or older than the table is passed over and the table is read whole, as before.
INDEX_SUFFIX = ".index"
INDEX_SCHEMA = 1
_INDEX_KEY = re.compile(r"[0-9a-f]{16}")
#: Set by ``tileprobe use`` to the table's path when that table's index does not hold the table's SHA-256
#: (:func:`index_mismatch`): every process of the command then reads the table whole, not that index.
ENV_NO_INDEX = "TILEPROBE_USE_NO_INDEX"
_META_SHA = "sha256"          # meta.json's field: the table's SHA-256 (hex) when the index was written
_META_BUCKETS = "buckets_sha256"  # meta.json's field: the buckets' digest at export (:func:`buckets_digest`)
_BUCKET_FILE = re.compile(r"([0-9a-f]{2})\.json")


def index_mismatch(table: str) -> str | None:
    """Why the index beside ``table`` is not that table's, or None when it is (or there is no index). Once per
    ``tileprobe use`` command, not per process: the table's bytes are hashed (SHA-256, ``meta.json``'s ``sha256``,
    written at export), which catches an edit whose ``meta.json`` was rewritten to the edited table's size and mtime
    (the per-process check, :func:`index_rows`, reads only those); then the buckets' (:func:`bucket_mismatch`),
    which catches a bucket edited, added or removed while the table was not (a forged row that only the index held
    was served: a hostile tester, 2026-12-05). An index without these hashes is not trusted either. What this cannot
    catch: a process that writes the table, the buckets and a ``meta.json`` with the new hashes, and an edit made
    after the check."""
    import hashlib
    folder = table + INDEX_SUFFIX
    if not os.path.lexists(folder):
        return None
    try:
        meta = json.loads(read_regular(os.path.join(folder, "meta.json"), 1 << 16))
        want = meta.get(_META_SHA) if isinstance(meta, dict) else None
        if not isinstance(want, str):
            return "its meta.json holds no sha256 of the table (an older tileprobe wrote it, or not tileprobe)"
        digest = hashlib.sha256()
        with open(table, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError, RecursionError) as e:
        return f"its meta.json cannot be read ({e})"
    if digest.hexdigest() != want:
        return "the table's SHA-256 is not the one its meta.json names (the table was edited after the export)"
    return bucket_mismatch(folder, meta.get(_META_BUCKETS), min(size, TABLE_LIMIT_BYTES))


def buckets_digest(hashes: dict[str, str]) -> str:
    """The digest of an index's buckets that ``meta.json`` carries (``buckets_sha256``): the SHA-256 (hex) of the
    lines ``"XY HASH\n"`` in bucket-name order, ``hashes`` mapping each bucket's name ``XY`` to the SHA-256 (hex) of
    its file's bytes. One field for all 256 buckets keeps ``meta.json``, which every searching process reads, its few
    hundred bytes. The writer's rule is the same (tileprobe/tune/table_store.py ``_buckets_digest``)."""
    import hashlib
    return hashlib.sha256("".join(f"{name} {h}\n" for name, h in sorted(hashes.items())).encode()).hexdigest()


def bucket_mismatch(folder: str, want: object, limit_bytes: int) -> str | None:
    """Why the buckets (``XY.json``) in the index ``folder`` are not those whose digest ``want`` is (``meta.json``'s
    ``buckets_sha256``, :func:`buckets_digest`), or None when they are. Each bucket is read bounded (``limit_bytes``:
    the table's size; a larger one is not genuine, as :func:`index_rows` judges) and only when it is a regular file:
    about the table's bytes read once more, once per ``tileprobe use`` command (never in the searching processes)."""
    import hashlib
    if not isinstance(want, str):
        return "its meta.json holds no SHA-256 of its buckets (an older tileprobe wrote it, or not tileprobe)"
    hashes: dict[str, str] = {}
    try:
        names = sorted(m.group(1) for m in map(_BUCKET_FILE.fullmatch, os.listdir(folder)) if m)
        for name in names:
            hashes[name] = hashlib.sha256(read_regular(os.path.join(folder, name + ".json"), limit_bytes)).hexdigest()
    except (OSError, ValueError) as e:
        return f"its buckets cannot be read ({e})"
    if buckets_digest(hashes) != want:
        return ("its buckets are not the ones its meta.json names (a bucket was edited, added or removed after the "
                "export)")
    return None


def index_bucket(key: str) -> str:
    """The bucket of search ``key`` in a table's index: the first two hex digits of the key's SHA-256."""
    import hashlib
    return hashlib.sha256(key.encode()).hexdigest()[:2]


def index_rows(table: str, key: str) -> list | None:
    """The ``(kernel, row)`` pairs of search ``key`` from the index beside ``table`` (:data:`INDEX_SUFFIX`): ``[]``
    when the index is current and holds none; None when there is no current index (the caller reads the table)."""
    folder = table + INDEX_SUFFIX
    if os.environ.get(ENV_NO_INDEX) == table:      # `tileprobe use` found it is not this table's
        return None
    try:
        st = os.stat(table)
        meta = json.loads(read_regular(os.path.join(folder, "meta.json"), 1 << 16))
        if not (isinstance(meta, dict) and meta.get("schema") == INDEX_SCHEMA and meta.get("size") == st.st_size
                and meta.get("mtime_ns") == st.st_mtime_ns) \
                or not _INDEX_KEY.fullmatch(key):
            return None
        bucket = os.path.join(folder, index_bucket(key) + ".json")
        if not os.path.lexists(bucket):
            return []
        # a bucket holds a part of the table's rows: one larger than the table itself is not genuine (refused from
        # its size before it is read, and the table is read instead)
        pairs = json.loads(read_regular(bucket, min(st.st_size, TABLE_LIMIT_BYTES)))
        # a bucket of another shape than [[kernel, row], ...] was not written by us: no index (the table is read),
        # never "no rows" (which would hide the table's row)
        if not (isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                                and isinstance(p[1], dict) and isinstance(p[1].get("search"), dict)
                                                for p in pairs)):
            return None
        return [(k, r) for k, r in pairs if r["search"].get("key") == key]
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, MemoryError):
        return None

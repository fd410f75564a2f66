"""A bundle is data: read ``tileprobe audit --bundle DIR`` safely on the GPU machine.

A bundle is ``DIR/audit.json`` (the audit's result JSON, :mod:`tileprobe.schema`) and ``DIR/cubins/<sha256>.cubin``.
It may come from anywhere, so reading it runs nothing and reads nothing outside it:

* ``audit.json`` must be a regular file holding a tileprobe result; every variant's fields that a run uses are
  checked (types; ``arch`` a known target; ``cubin_sha256`` null or 64 lowercase hex digits). A malformed one is a
  :class:`~tileprobe.errors.TileprobeError` naming the file and the field (``variants[3].cubin_sha256``), never a
  traceback.
* Cubins are read only as ``DIR/cubins/<64 hex digits>.cubin``: the name is checked before it becomes a path (no
  ``..``, no absolute path, no NUL), ``cubins/`` must be a real folder of the bundle (not a link), and each file must
  be a regular file (opened with ``O_NOFOLLOW | O_NONBLOCK``: a symlink out of the bundle or a FIFO is refused,
  never followed or waited on) of at most :data:`MAX_CUBIN_BYTES`.
* Probe code is imported only from probe files given on the command line (``tileprobe run --bundle DIR
  probe.py``): the probe paths a bundle records are names, never imported
  (:func:`tileprobe.run.session.resolve_probe_path` with ``trust_recorded=False``).
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable
from typing import Any

from tileprobe.errors import PATH_SHOWN_CHARS, CubinError, TileprobeError, shown
from tileprobe.model.arch import get_arch
from tileprobe.schema import VariantRecord, check_fields, load


def _echo(path: str) -> str:
    """``path`` as a message echoes it: control characters escaped (a newline cannot forge a line of output)."""
    return shown(path, limit=PATH_SHOWN_CHARS)


SHA256_RE = re.compile(r"[0-9a-f]{64}")
#: Largest cubin a bundle may hold (the largest seen from tileiras is a few MB; a FlashInfer FP4 GEMM < 4 MB).
MAX_CUBIN_BYTES = 256 << 20
#: Largest audit.json read (a 10,000-variant audit with SASS traits is about 40 MB).
MAX_AUDIT_JSON_BYTES = 512 << 20

_MAKE = "make one where tileiras is with `tileprobe audit PROBE --arch sm_90 --bundle DIR` and copy DIR here"


def _regular(path: str, what: str) -> os.stat_result:
    """lstat ``path`` and require a regular file (no link, FIFO, device); raise naming ``what``."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise TileprobeError(f"{_echo(path)}: {what} cannot be read ({e.strerror or e}); {_MAKE}") from e
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
            "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise TileprobeError(f"{_echo(path)}: {what} is {kind}; a bundle holds regular files only (it is read as data, "
                             "links are not followed)")
    return st


def read_regular(path: str, limit: int, what: str) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit``), opened without following a link or blocking on a
    FIFO. Raises TileprobeError naming ``what`` otherwise."""
    _regular(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise TileprobeError(f"{_echo(path)}: {what} cannot be opened ({e.strerror or e})") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):   # swapped between lstat and open
            raise TileprobeError(f"{_echo(path)}: {what} is not a regular file")
        if st.st_size > limit:
            raise TileprobeError(f"{_echo(path)}: {what} is {st.st_size:,} bytes, over the {limit:,}-byte limit")
        return f.read(limit + 1)[:limit]


def check_variant(i: int, v: Any, doc: str) -> None:
    """Raise TileprobeError naming ``doc`` and the field (``variants[i].cubin_sha256``) when variant ``v`` is not
    what a run can use."""
    where = f"{doc}: variants[{i}]"
    check_fields(i, v, doc, _MAKE)
    sha = v.get("cubin_sha256")
    if sha is not None and not SHA256_RE.fullmatch(sha):
        raise TileprobeError(f"{where}.cubin_sha256 is {sha[:80]!r}, not 64 lowercase hex digits (a cubin's "
                             "SHA-256 names its file in cubins/); the bundle is damaged or was not written by "
                             "tileprobe")
    try:
        get_arch(v["arch"])
    except TileprobeError as e:
        raise TileprobeError(f"{where}.arch: {e}") from e


def read_audit_json(path: str) -> dict:
    """The checked result document of a bundle's ``audit.json`` (see the module doc)."""
    raw = read_regular(path, MAX_AUDIT_JSON_BYTES, "the bundle's audit.json")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TileprobeError(f"{_echo(path)}: not UTF-8 text (byte {e.start}); {_MAKE}") from e
    except json.JSONDecodeError as e:
        raise TileprobeError(f"{_echo(path)}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}); {_MAKE}") from e
    except RecursionError:
        raise TileprobeError(f"{_echo(path)}: nested deeper than the JSON reader goes (about "
                             f"{sys.getrecursionlimit():,} levels; tileprobe writes 6); {_MAKE}") from None
    except ValueError:               # an integer of more than 4,300 digits (Python's int/str limit)
        raise TileprobeError(f"{_echo(path)}: holds a number of more than 4,300 digits (Python's limit for reading an "
                             f"integer): not a tileprobe result; {_MAKE}") from None
    if not isinstance(doc, dict):
        raise TileprobeError(f"{_echo(path)}: holds {type(doc).__name__}, not a tileprobe result object; {_MAKE}")
    if not isinstance(doc.get("schema_version"), int) or isinstance(doc.get("schema_version"), bool):
        raise TileprobeError(f"{_echo(path)}: schema_version is {doc.get('schema_version')!r}, not an integer; {_MAKE}")
    if not isinstance(doc.get("variants"), list):
        raise TileprobeError(f"{_echo(path)}: variants is {type(doc.get('variants')).__name__}, not a list; {_MAKE}")
    if not isinstance(doc.get("environment", {}), dict):
        raise TileprobeError(f"{_echo(path)}: environment is not an object; {_MAKE}")
    for i, v in enumerate(doc["variants"]):
        check_variant(i, v, path)
    return doc


def cubin_reader(bundle: str) -> Callable[[str], bytes | None]:
    """A SHA-256 → cubin bytes function reading only ``bundle/cubins/<sha256>.cubin`` (see the module doc):
    None when the file is not there; TileprobeError for a name that is not 64 hex digits, a link, a FIFO or an
    oversized file."""
    folder = os.path.join(bundle, "cubins")

    def get(sha: str) -> bytes | None:
        if not isinstance(sha, str) or not SHA256_RE.fullmatch(sha):
            raise CubinError(f"cubin name {str(sha)[:80]!r} is not 64 lowercase hex digits; a bundle's cubins are "
                             "named by their SHA-256")
        try:
            st = os.lstat(folder)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            raise CubinError(f"{folder} is not a folder of the bundle (a link or a file): cubins are read only from "
                             "the bundle's own cubins/ folder")
        path = os.path.join(folder, sha + ".cubin")
        if not os.path.lexists(path):
            return None
        return read_regular(path, MAX_CUBIN_BYTES, f"cubin {sha[:12]}…")
    return get


def load_bundle_records(path: str, judge=None) -> tuple[list[VariantRecord], dict]:
    """The records and environment of bundle ``path`` (checked: module doc). ``judge``: as
    :func:`tileprobe.schema.load`."""
    if not os.path.isdir(path):
        raise TileprobeError(f"{_echo(path)}: not a tileprobe bundle (no such folder); {_MAKE}")
    doc = os.path.join(path, "audit.json")
    if not os.path.lexists(doc):
        raise TileprobeError(f"{_echo(path)}: not a tileprobe bundle (no audit.json); {_MAKE}")
    data = read_audit_json(doc)
    try:
        return load(data, judge=judge, source=doc)
    except (TypeError, ValueError, KeyError) as e:   # a field this check does not cover, e.g. a bad nested value
        raise TileprobeError(f"{doc}: a variant cannot be read ({type(e).__name__}: {e}); {_MAKE}") from e

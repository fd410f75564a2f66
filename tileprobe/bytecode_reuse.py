"""One tileiras run per distinct Tile IR program: a compile whose bytecode equals one already compiled (with the
same compiler and flags) reuses that compile's cubin, remarks or failure instead of running tileiras again.

Used by ``tileprobe reduce``, whose candidates often differ only where cuTile's output does not (a renamed local,
a dead value, a constant that folds). The compile hook (:func:`tileprobe._cutile.install_compile_hook`) turns it
on in a compile worker when ``$TILEPROBE_BYTECODE_REUSE`` names a folder; the folder is shared by the workers of
one reduction and removed with it.

What counts as equal (:func:`code_key`): the bytecode file as cuTile wrote it (``cuda/tile/_bytecode/writer.py``,
cuda-tile 1.5–1.7: a 12-byte header, then sections ``id | varint length | [varint alignment, 0xCB padding] |
payload``), less what depends on where the kernel's source lives: the Debug section (0x03: the source line and
column of each operation) is left out, and in the String section (0x01) the probe file's own path, folder and file
name (the worker names it: :func:`set_source`) count as the same string, and a helper's debug name in it
(``scaled@module:19:1_s1``) is taken without its line. Any other string, a printf format or an assert message
with a ``/`` in it included, must be equal. Everything else (the operations, types,
constants, hints, the kernel's symbol) must be equal byte for byte. Two bytecodes that differ only in the line
table compile to the same code (tileiras ``--lineinfo`` adds a line table to the cubin, not instructions); the
reused cubin carries the first candidate's line table, which no verdict reads. A bytecode this module cannot
parse gets the sha256 of all its bytes (reused only when identical).

A compile that timed out is not reused (the next one may finish); a compiler's exit with an error or a signal is
(the same program fails the same way). Two workers compiling the same key at once: the second waits for the first
(an ``flock`` on the key's lock file, released by the kernel if the first is killed) and reuses its answer.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tileprobe.cachefile import read_cache_bytes, write_cache_bytes

#: The environment variable that names the shared folder (unset or empty: every compile runs tileiras).
REUSE_ENV = "TILEPROBE_BYTECODE_REUSE"

#: Section ids of cuTile's bytecode writer (``_bytecode/writer.py``, ``_Section``).
_STRING, _DEBUG = 0x01, 0x03
_HEADER = 12      # b"\x7fTileIR\x00", major, minor, 2-byte tag
#: A helper's debug name, ``scaled@module:19:1_s1``: its module and source line (cuda-tile 1.7).
_SITE = re.compile(rb"@[\w.]*:\d+:\d+")
#: Each compile reused is one line in this file of the folder (``key``): what :func:`reused_count` counts.
HITS = "hits.log"


class _Malformed(Exception):
    """The bytes are not cuTile's bytecode layout (the key is then the sha256 of the whole file)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Malformed
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def sections(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(section id, payload)`` of a bytecode file, in file order (padding left out).

    Raises:
        _Malformed: not the layout of cuda-tile 1.5–1.7's writer (module doc)."""
    if len(data) < _HEADER or not data.startswith(b"\x7fTileIR\x00"):
        raise _Malformed
    pos = _HEADER
    while pos < len(data):
        head = data[pos]
        pos += 1
        if head == 0:
            return
        length, pos = _varint(data, pos)
        if head & 0x80:
            align, pos = _varint(data, pos)
            if align < 1 or align > 4096:
                raise _Malformed
            pos += -pos % align
        if pos + length > len(data):
            raise _Malformed
        yield head & 0x7F, data[pos:pos + length]
        pos += length
    raise _Malformed      # no end-of-bytecode marker


def _strings(payload: bytes) -> list[bytes]:
    """The items of a table section with 4-byte offsets (``_write_table(table, 4, ...)``)."""
    count, pos = _varint(payload, 0)
    pos += -pos % 4
    if pos + 4 * count > len(payload):
        raise _Malformed
    offsets = [int.from_bytes(payload[pos + 4 * i:pos + 4 * i + 4], "little") for i in range(count)]
    data = payload[pos + 4 * count:]
    ends = offsets[1:] + [len(data)]
    if any(a > b for a, b in zip(offsets, ends)) or (offsets and offsets[0] != 0):
        raise _Malformed
    return [data[a:b] for a, b in zip(offsets, ends)]


#: The probe file being compiled in this worker (:func:`set_source`); its locations are what :func:`code_key`
#: leaves out of the String section.
_SOURCE: str | None = None


def set_source(probe_path: str | None) -> None:
    """Name the probe file whose kernels this worker compiles next (None: none known; then every string counts).
    Called by the compile worker before each compile (``tileprobe.compile.job``)."""
    global _SOURCE
    _SOURCE = probe_path


def _locations(probe_path: str | None) -> tuple[frozenset[bytes], re.Pattern[bytes] | None]:
    """The strings that are ``probe_path``'s location (its path as given, absolute and resolved, their folders,
    its file name) and the pattern of a helper's debug name in it (``name@<stem>:line:column_<id>``, the stem as
    ``cuda/tile/_ir2bytecode.py`` makes it)."""
    if not probe_path:
        return frozenset(), None
    paths = {probe_path, os.path.abspath(probe_path), os.path.realpath(probe_path)}
    names = paths | {os.path.dirname(p) for p in paths} | {os.path.basename(p) for p in paths}
    stem = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(os.path.basename(probe_path))[0]) or "anonymous"
    site = re.compile(rb"[^@\s]+@" + re.escape(stem.encode()) + rb":\d+:\d+_\w+")
    return frozenset(os.fsencode(n) for n in names if n), site


def code_key(data: bytes, probe_path: str | None = None) -> str:
    """sha256 (hex) of a bytecode file with its source locations left out (module doc: what counts as equal).
    ``probe_path``: the probe file compiled; only its own path, folder and file name, and the source site of a
    helper's debug name in it, count as the same string (None: every string counts as it is)."""
    h = hashlib.sha256()
    where, site = _locations(probe_path)
    try:
        parts = list(sections(data))
        h.update(data[:_HEADER])
        for sid, payload in parts:
            if sid == _DEBUG:
                continue
            h.update(b"S%d:" % sid)
            if sid == _STRING:
                for s in _strings(payload):
                    if s in where:
                        s = b"<path>"
                    elif site is not None and site.fullmatch(s):
                        s = _SITE.sub(b"@<site>", s)
                    h.update(s + b"\x00")
            else:
                h.update(b"%d:" % len(payload) + payload)
        return h.hexdigest()
    except _Malformed:
        return "raw-" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Failed:
    """A reused failure: tileiras' exit code (negative: the signal that ended it), stdout and stderr."""
    returncode: int
    stdout: str
    stderr: str


def failure_of(e: BaseException) -> Failed | None:
    """The tileiras run a raised ``e`` reports: its ``__cause__``'s exit code and output when that is a
    ``CalledProcessError`` (as the contained compiler raises cuTile's error), else None (a timeout: not reused)."""
    import subprocess
    cause = e.__cause__
    if isinstance(cause, subprocess.CalledProcessError):
        def text(b: object) -> str:
            return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b or "")
        return Failed(cause.returncode, text(cause.output), text(cause.stderr))
    return None


def compile_once(folder: str, bytecode_path: str, context: list[str], cubin_path: str, remarks_path: str | None,
                 run: Callable[[], object], replay: Callable[[Failed], BaseException]) -> bool:
    """Compile ``bytecode_path`` with ``run()`` unless an equal one (:func:`code_key` and ``context``: the
    compiler's path and version and the flags without file names) was compiled before in ``folder``: then its
    cubin is copied to ``cubin_path`` (and its remarks to ``remarks_path``), or its failure raised again
    (``replay``; a failure is kept when :func:`failure_of` reads one from what ``run()`` raised). Returns True when
    reused.

    Raises:
        whatever ``run()`` raises; ``replay(failed)`` for a reused failure.
    """
    with open(bytecode_path, "rb") as f:
        key = hashlib.sha256((code_key(f.read(), _SOURCE) + "\x00" + "\x00".join(context)).encode()).hexdigest()
    entry = os.path.join(folder, key)
    fd = _lock_fd(folder, entry + ".lock")
    if fd is None:        # the folder or the lock is not ours to use: compile, reuse nothing
        run()
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)      # an equal compile in another worker: wait for its answer
        if _reuse(entry, cubin_path, remarks_path, replay):
            return True
        try:
            run()
        except BaseException as e:
            failed = failure_of(e)
            if failed is not None:
                _write(entry + ".failed.json", json.dumps([failed.returncode, failed.stdout, failed.stderr]).encode())
            raise
        if remarks_path:
            remarks = read_cache_bytes(remarks_path, MAX_ENTRY_BYTES)
            if remarks is not None:
                _write(entry + ".remarks", remarks)
        cubin = read_cache_bytes(cubin_path, MAX_ENTRY_BYTES)
        if cubin is not None:
            _write(entry + ".cubin", cubin)
        return False
    finally:
        os.close(fd)      # releases the flock


def _lock_fd(folder: str, path: str) -> int | None:
    """A descriptor of the key's lock file (a regular file, opened without blocking or following a link; anything
    else there is removed once and the file made again), or None when there is none to have."""
    for _ in range(2):
        try:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW, 0o600)
        except OSError:
            _drop(path)
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        _drop(path)
    return None


#: Largest cubin or failure record read back from the folder (bytes); a bigger one is a miss (a reduction's cubins
#: are a few hundred KiB).
MAX_ENTRY_BYTES = 64 << 20


#: ELF's ``e_machine`` of a cubin: EM_CUDA (190, the ELF machine registry; what tileiras writes).
EM_CUDA = 190


def is_cubin(data: bytes) -> bool:
    """Whether ``data`` opens as a cubin does: a 64-byte ELF64 header (magic, class 2) whose machine is EM_CUDA."""
    return len(data) >= 64 and data.startswith(b"\x7fELF\x02") and int.from_bytes(data[18:20], "little") == EM_CUDA


def _drop(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _failure(data: bytes) -> Failed | None:
    """The failure record ``[exit code, stdout, stderr]`` (written by :func:`compile_once`), or None when not one."""
    try:
        v = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(v, list) and len(v) == 3 and type(v[0]) is int and isinstance(v[1], str)
            and isinstance(v[2], str)):
        return None
    return Failed(v[0], v[1], v[2])


def _reuse(entry: str, cubin_path: str, remarks_path: str | None,
           replay: Callable[[Failed], BaseException]) -> bool:
    """Answer from ``entry``'s cubin or failure record. Anything wrong with them (not a regular file, a link, bigger
    than :data:`MAX_ENTRY_BYTES`, a cubin that is not a CUDA ELF file (:func:`is_cubin`), a record that does not parse) is a miss: the bad
    entry is removed and False returned, so the candidate is compiled afresh (never a verdict of its own)."""
    cubin = read_cache_bytes(entry + ".cubin", MAX_ENTRY_BYTES) if not os.path.islink(entry + ".cubin") else None
    if cubin is not None and is_cubin(cubin):
        remarks = None
        if remarks_path and not os.path.islink(entry + ".remarks"):
            remarks = read_cache_bytes(entry + ".remarks", MAX_ENTRY_BYTES)
        try:
            with open(cubin_path, "wb") as f:
                f.write(cubin)
            if remarks is not None and remarks_path:
                with open(remarks_path, "wb") as f:
                    f.write(remarks)
        except OSError:
            return False
        _hit(entry)
        return True
    if os.path.lexists(entry + ".cubin"):
        _drop(entry + ".cubin")
        _drop(entry + ".remarks")
    data = read_cache_bytes(entry + ".failed.json", MAX_ENTRY_BYTES) \
        if not os.path.islink(entry + ".failed.json") else None
    failed = _failure(data) if data is not None else None
    if failed is None:
        if os.path.lexists(entry + ".failed.json"):
            _drop(entry + ".failed.json")
        return False
    _hit(entry)
    raise replay(failed)


def _hit(entry: str) -> None:
    """One line in the folder's :data:`HITS` log; a log that is not a regular file is left alone (no count)."""
    path = os.path.join(os.path.dirname(entry), HITS)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW, 0o600)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, (os.path.basename(entry) + "\n").encode())
        finally:
            os.close(fd)


def _write(path: str, data: bytes) -> None:
    write_cache_bytes(path, data)


def reused_count(folder: str) -> int:
    """How many compiles in ``folder`` were answered from an equal bytecode's compile (0 when none or no folder)."""
    try:
        with open(os.path.join(folder, HITS), encoding="utf-8") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0

"""One tileiras run per distinct Tile IR program: a compile whose bytecode equals one already compiled (with the
same compiler and flags) reuses that compile's cubin, remarks or failure instead of running tileiras again.

Used by ``tileprobe reduce``, whose candidates often differ only where cuTile's output does not (a renamed local,
a dead value, a constant that folds). The compile hook (:func:`tileprobe._cutile.install_compile_hook`) turns it
on in a compile worker when ``$TILEPROBE_BYTECODE_REUSE`` names a folder; the folder is shared by the workers of
one reduction and removed with it.

What counts as equal (:func:`code_key`): the bytecode file as cuTile wrote it (``cuda/tile/_bytecode/writer.py``,
cuda-tile 1.5–1.7: a 12-byte header, then sections ``id | varint length | [varint alignment, 0xCB padding] |
payload``), less what depends on where the kernel's source lives: the Debug section (0x03: the source line and
column of each operation) is left out, and in the String section (0x01) every string that holds a ``/`` or ends in
``.py`` (the source file's name and folder) counts as the same string, and a helper's debug name
(``scaled@module:19:1_s1``) is taken without its module and line. Everything else (the operations, types,
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
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass

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


def code_key(data: bytes) -> str:
    """sha256 (hex) of a bytecode file with its source locations left out (module doc: what counts as equal)."""
    h = hashlib.sha256()
    try:
        parts = list(sections(data))
        h.update(data[:_HEADER])
        for sid, payload in parts:
            if sid == _DEBUG:
                continue
            h.update(b"S%d:" % sid)
            if sid == _STRING:
                for s in _strings(payload):
                    h.update(_SITE.sub(b"@<site>", b"<path>" if b"/" in s or s.endswith(b".py") else s) + b"\x00")
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
        key = hashlib.sha256((code_key(f.read()) + "\x00" + "\x00".join(context)).encode()).hexdigest()
    os.makedirs(folder, exist_ok=True)
    entry = os.path.join(folder, key)
    with open(entry + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # an equal compile in another worker: wait for its answer
        try:
            if _reuse(entry, cubin_path, remarks_path, replay):
                with open(os.path.join(folder, HITS), "a") as log:
                    log.write(key + "\n")
                return True
            try:
                run()
            except BaseException as e:
                failed = failure_of(e)
                if failed is not None:
                    _write(entry + ".failed.json", json.dumps([failed.returncode, failed.stdout, failed.stderr]).encode())
                raise
            with contextlib.suppress(OSError):
                if remarks_path and os.path.exists(remarks_path):
                    shutil.copyfile(remarks_path, entry + ".remarks.tmp")
                    os.replace(entry + ".remarks.tmp", entry + ".remarks")
                shutil.copyfile(cubin_path, entry + ".tmp")
                os.replace(entry + ".tmp", entry + ".cubin")
            return False
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _reuse(entry: str, cubin_path: str, remarks_path: str | None,
           replay: Callable[[Failed], BaseException]) -> bool:
    if os.path.exists(entry + ".cubin"):
        shutil.copyfile(entry + ".cubin", cubin_path)
        if remarks_path and os.path.exists(entry + ".remarks"):
            shutil.copyfile(entry + ".remarks", remarks_path)
        return True
    if os.path.exists(entry + ".failed.json"):
        with open(entry + ".failed.json", encoding="utf-8") as f:
            code, out, err = json.load(f)       # [exit code, stdout, stderr] (written by compile_once)
        with open(os.path.join(os.path.dirname(entry), HITS), "a") as log:
            log.write(os.path.basename(entry) + "\n")
        raise replay(Failed(int(code), str(out), str(err)))
    return False


def _write(path: str, data: bytes) -> None:
    with contextlib.suppress(OSError):
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)


def reused_count(folder: str) -> int:
    """How many compiles in ``folder`` were answered from an equal bytecode's compile (0 when none or no folder)."""
    try:
        with open(os.path.join(folder, HITS), encoding="utf-8") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0

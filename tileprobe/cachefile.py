"""Cache files read safely (a leaf): tileprobe's own caches under the user cache dir (``compilers.json``,
``compiler-hashes.json``, ``plans/*.json``) are read only when they are regular files of at most a few MiB; anything
else — a FIFO (whose ``open`` blocks for ever), a link to ``/dev/zero`` (whose read never ends), a folder, a huge
file — is a cache miss, never a hang or a memory blow-up (a hostile tester, 2026-12-02: a FIFO in ``plans/`` hung
the audit; ``/dev/zero`` took 10 GB in 60 s). Writes are atomic (a temp file in the same folder, then
``os.replace``) and leave no temp file behind on failure.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile

#: Largest cache file read (bytes); a bigger one is a miss. A plan entry with TileGym and torch loaded is ~0.3 MiB.
MAX_CACHE_BYTES = 16 << 20


def read_cache_bytes(path: str, limit_bytes: int = MAX_CACHE_BYTES) -> bytes | None:
    """The bytes of cache file ``path``, or None when it is missing, not a regular file (checked on the opened
    descriptor, opened without blocking), larger than ``limit_bytes``, or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit_bytes:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit_bytes + 1)
        return data if len(data) <= limit_bytes else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write_cache_bytes(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically; False (and no temp file left) when it cannot."""
    folder = os.path.dirname(path) or "."
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return False

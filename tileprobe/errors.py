"""One error family for everything a user can fix.

The CLI catches :class:`TileprobeError` once (``cli.main``), prints its message and exits 1; any other
exception is a tileprobe bug and keeps its traceback (the asv ``UserError`` habit).
Every message says what failed, why, and what to do about it.
"""
from __future__ import annotations


class TileprobeError(Exception):
    """A problem the user can fix: bad input, a missing tool, an unknown architecture.

    The message must name the problem and the fix.
    """


class ProbeError(TileprobeError):
    """A probe file could not be loaded or describes an impossible launch.

    ``path`` and ``lineno`` point at the offending line when known.
    """

    def __init__(self, message: str, path: str | None = None, lineno: int | None = None):
        self.path = path
        self.lineno = lineno
        where = f"{path}:{lineno}: " if path and lineno else (f"{path}: " if path else "")
        super().__init__(where + message)


class ToolchainError(TileprobeError):
    """tileiras (or its ptxas / libnvvm) is missing, mismatched or unusable."""


class CubinError(TileprobeError):
    """A file is not a cubin tileprobe can read (not ELF, not CUDA, truncated)."""


class StoreError(TileprobeError):
    """The results store is unreadable, newer than this tileprobe, or locked."""

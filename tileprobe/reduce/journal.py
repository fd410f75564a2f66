"""The reduction's journal, ``OUT/reduce-state.json``: what a stopped reduction needs to go on without compiling
anything twice — the smallest kernel so far, the steps kept, the edits that failed, every candidate's answer —
and what the earlier runs cost (candidates compiled, wall seconds), so a resumed run's report says both.

The file is JSON (written by atomic replace); it is read back into a :class:`Journal` and checked field by field:
a journal of other arguments (another ``key``) starts the reduction afresh, a damaged one (not JSON, a field of
the wrong type or shape) is a :class:`JournalError` naming the file, the field and the fix, never a traceback.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from tileprobe.cachefile import read_cache_bytes
from tileprobe.errors import TileprobeError

#: Largest journal read back (bytes); a bigger one is refused as damaged.
MAX_STATE_BYTES = 256 << 20
#: Largest ``compiled`` and ``wall_s`` read back: a billion candidates, a billion seconds (32 years); a journal
#: beyond them is damaged (a hostile tester's 10**30 candidates and NaN seconds, 2026-12-05).
MAX_COMPILED, MAX_WALL_S = 10**9, 1e9

#: One compiler's answer on a candidate: (tileiras version, property holds, audit line).
Judgement = tuple[str, bool, str]


class JournalError(TileprobeError):
    """``reduce-state.json`` cannot be read back (not JSON, a field of the wrong type or shape): the message names
    the file and the field, and says to delete it (start afresh) or give another ``-o``."""


@dataclass
class Journal:
    """A reduction's state. ``key``: digest of the arguments it belongs to; ``current``: the smallest interesting
    probe module so far; ``kept``: the steps kept, in order; ``failed``: keys of the edits that failed
    (:attr:`tileprobe.reduce.passes.Candidate.key`); ``needle``: the failure signature kept ("" for other
    properties); ``memo``: candidate digest → judgements per compiler; ``compiled`` and ``wall_s``: candidates
    compiled and wall seconds of all runs so far."""
    key: str
    current: str = ""
    kept: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    needle: str = ""
    memo: dict[str, tuple[Judgement, ...]] = field(default_factory=dict)
    compiled: int = 0
    wall_s: float = 0.0

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps({"key": self.key, "current": self.current, "kept": self.kept, "failed": self.failed,
                           "needle": self.needle, "compiled": self.compiled, "wall_s": self.wall_s,
                           "memo": {k: [list(j) for j in js] for k, js in self.memo.items()}})


def _fix(path: str, what: str) -> JournalError:
    return JournalError(f"{path}: {what}: this reduction journal is damaged (or not one tileprobe reduce wrote). "
                        f"Delete it to start the reduction afresh, or give another -o folder; the probe itself is "
                        f"untouched")


def _strings(path: str, data: dict, name: str) -> list[str]:
    v = data.get(name, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _fix(path, f"{name!r} is not a list of strings")
    return v


def _judgements(path: str, k: str, v: object) -> tuple[Judgement, ...]:
    # the memo was written as [interesting, [[version, holds, line], ...]] before it kept the judgements alone
    js = v[1] if isinstance(v, list) and len(v) == 2 and isinstance(v[0], bool) else v
    if not isinstance(js, list) or not all(isinstance(j, list) and len(j) == 3 and isinstance(j[0], str)
                                           and isinstance(j[1], bool) and isinstance(j[2], str) for j in js):
        raise _fix(path, f"'memo' entry {k[:16]!r} is not a list of [version, holds, line]")
    return tuple((j[0], j[1], j[2]) for j in js)


def load(path: str, key: str) -> Journal | None:
    """The journal at ``path`` when it belongs to ``key``; None when there is none, or it belongs to other
    arguments (the reduction starts afresh and overwrites it).

    Raises:
        JournalError: the file is not a regular file of at most 256 MiB holding a JSON object with a string
            ``key``, or a field has the wrong type or shape (module doc).
    """
    import os
    if not os.path.lexists(path):
        return None
    data = read_cache_bytes(path, MAX_STATE_BYTES)     # regular files only: a FIFO or a device is no journal
    if data is None:
        raise _fix(path, f"not a readable regular file of at most {MAX_STATE_BYTES >> 20} MiB")
    try:
        st = json.loads(data)
    except ValueError as e:
        raise _fix(path, f"not JSON ({e})") from None
    except RecursionError:
        raise _fix(path, "nested deeper than the JSON reader goes (a journal nests 3 levels)") from None
    if not isinstance(st, dict) or not isinstance(st.get("key"), str):
        raise _fix(path, "not a JSON object with a string 'key'")
    if st["key"] != key:
        return None
    for name in ("current", "needle"):
        if not isinstance(st.get(name, ""), str):
            raise _fix(path, f"{name!r} is not a string")
    memo = st.get("memo", {})
    if not isinstance(memo, dict):
        raise _fix(path, "'memo' is not an object of candidate digest → judgements")
    compiled, wall = st.get("compiled", 0), st.get("wall_s", 0.0)
    if type(compiled) is not int or not 0 <= compiled <= MAX_COMPILED:
        raise _fix(path, f"'compiled' is not a whole count from 0 to {MAX_COMPILED:.0e}")
    if type(wall) not in (int, float) or not math.isfinite(wall) or not 0 <= wall <= MAX_WALL_S:
        raise _fix(path, f"'wall_s' is not a finite number of seconds from 0 to {MAX_WALL_S:.0e} (NaN and "
                         f"Infinity are not)")
    return Journal(key, st.get("current", ""), _strings(path, st, "kept"), _strings(path, st, "failed"),
                   st.get("needle", ""), {k: _judgements(path, k, v) for k, v in memo.items()}, compiled,
                   float(wall))

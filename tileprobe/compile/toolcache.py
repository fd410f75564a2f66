"""What the audit asks about compilers, asked once: the tileiras cuTile picks by default, and each
tileiras binary's build string and targets.

Finding cuTile's default tileiras imports ``cuda.tile._compile`` (torch: 2.06 s on the 2-core machine) and reads
package metadata (1.15 s more: docs/LOG.md §18); ``tileiras --version`` and ``--help`` are two more processes.
A warm re-audit, every variant in the store, needs all three for the store keys and nothing else from cuTile.

* Per process: each answer is kept in memory.
* Across processes: in ``<user cache dir>/compilers.json``. The default compiler's entry is valid while the
  things cuTile's lookup reads are unchanged: ``PATH``, ``LD_LIBRARY_PATH``, ``CUDA_HOME``, ``CUDA_PATH``,
  ``sys.prefix``, the cuda-tile version and the modification time of every folder on ``sys.path`` (installing or
  removing a tileiras wheel changes its site-packages folder), and the binary it names still exists unchanged. A
  binary's facts are valid while its path, size, modification time and inode are those it had when asked.
  ``TILEPROBE_TOOLCACHE=0`` turns the file off (memory only).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Imports inside functions here are lazy on purpose: at the module head they would add 0.07 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

_memory: dict[str, object] = {}
#: Entries the cache file keeps (the newest).
_MAX_ENTRIES = 64


def _path() -> str | None:
    if os.environ.get("TILEPROBE_TOOLCACHE", "1") == "0":
        return None
    from platformdirs import user_cache_dir
    return os.path.join(user_cache_dir("tileprobe"), "compilers.json")


def _read() -> dict:
    path = _path()
    if path is None:
        return {}
    from tileprobe.cachefile import read_cache_bytes
    raw = read_cache_bytes(path)       # a FIFO, /dev/zero or a huge file is a miss, never a hang
    try:
        data = json.loads(raw) if raw is not None else {}
        return data if isinstance(data, dict) else {}
    except (ValueError, RecursionError):
        return {}


def _write(key: str, value) -> None:
    path = _path()
    if path is None:
        return
    data = _read()
    data.pop(key, None)
    data = dict(list(data.items())[-(_MAX_ENTRIES - 1):])   # the newest entries (one per environment, binary)
    data[key] = value
    from tileprobe.cachefile import write_cache_bytes
    write_cache_bytes(path, json.dumps(data).encode())


def _stat(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _lookup_inputs() -> str:
    """What cuTile's default-compiler lookup depends on, as one text (module doc)."""
    from tileprobe import _cutile
    env = [os.environ.get(k, "") for k in ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")]
    # sys.path[0] is the script's folder or the cwd: it differs per command and holds no installed package
    folders = [(p, (_stat(p) or [None, None])[1]) for p in sorted(set(sys.path[1:])) if p and os.path.isdir(p)]
    return json.dumps([env, sys.prefix, sys.executable, _cutile.cutile_version(), folders])


def _default_key(inputs: str) -> str:
    return "default:" + hashlib.sha256(inputs.encode()).hexdigest()[:16]


def cached_default() -> str | None:
    """The tileiras cuTile picked last time in this environment, if nothing it depends on changed; else None."""
    known = _memory.get("default")
    if isinstance(known, str):       # remember_default keeps a path
        return known
    inputs = _lookup_inputs()
    entry = _read().get(_default_key(inputs))
    if not isinstance(entry, dict) or entry.get("inputs") != inputs:
        return None
    path = entry.get("tileiras")
    if not isinstance(path, str) or _stat(path) != entry.get("stat"):
        return None
    _memory["default"] = path
    return path


def remember_default(path: str) -> None:
    """Keep ``path`` as the tileiras cuTile picks in this environment (found by a loader child)."""
    if not path:
        return
    _memory["default"] = path
    inputs = _lookup_inputs()
    _write(_default_key(inputs), {"inputs": inputs, "tileiras": path, "stat": _stat(path)})


def binary_fact(kind: str, tileiras: str, ask: Callable[[str], T]) -> T:
    """``ask(tileiras)`` (``kind``: ``build`` or ``targets``), answered from memory or the cache file while the
    binary is unchanged (module doc). What ``ask`` raises is raised, and nothing is kept."""
    stat = _stat(tileiras)
    key = f"{kind}:{os.path.abspath(tileiras)}"
    hit = _memory.get(key)
    if isinstance(hit, tuple) and hit[0] == stat:
        return hit[1]
    entry = _read().get(key) if stat is not None else None
    if isinstance(entry, dict) and entry.get("stat") == stat and "value" in entry:
        _memory[key] = (stat, entry["value"])
        return entry["value"]
    value = ask(tileiras)
    if stat is not None:
        _memory[key] = (stat, value)
        if value or kind == "build":
            _write(key, {"stat": stat, "value": value})
    return value

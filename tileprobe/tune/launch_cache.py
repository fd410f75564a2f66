"""Launch facts kept across tunes, one candidate at a time: a warm re-tune whose candidates are all stored asks the
probe's loader for no fact it had before.

A candidate's launch facts (its grid and runtime arguments, :func:`tileprobe.tune.static.probe_launch`) come from
the probe's own ``grid`` and ``args``, run in a contained loader child (:func:`~tileprobe.tune.static.launch_facts`).
They were kept by the plan cache (:mod:`tileprobe.probe.plancache`) one *batch* at a time: the question was every
candidate that had landed together, and which landed together changes from tune to tune (the race thread takes what
the store or the compiles gave since it last looked). So the first and second warm re-tunes of the TileGym matmul
and FMHA on the H100 missed and waited 7–9.5 s inside their race for a fresh loader to import torch and TileGym
(docs/LOG.md §42); a tune hit only when its batches happened to match an earlier one's.

Here one entry per probe file (in the plan cache's folder, with its validity: the question — the file's path, the
interpreter, ``sys.path``, the working folder, tileprobe's version, the environment — and every module file the
loaders ran, unchanged) maps each candidate's own question to its facts. A candidate's question is what
``probe_launch`` reads: the probe's index in its file, the SM count, the problem's values, the configuration
(tunables and hints), and of its compile record the kernel, arch, hints, effective hints and signature
(:func:`item_key`). A fact that failed is not kept (it is asked again next time, as the plan cache keeps no report
with errors), nor one whose text holds an object's address (``at 0x…``: it would differ in another process and
split a group of identical launches). What ``grid`` or ``args`` read besides modules (a data file, the clock) is
not tracked, as for the plan cache; ``TILEPROBE_PLAN_CACHE=0`` turns both off. The entry is written by the loader
session's saver thread (:func:`learn`); tests/test_tune_launch_cache.py; benchmarks/tune/bench_warm_facts.py.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The entry's question (:func:`tileprobe.probe.plancache.key`): one per probe file.
QUESTION = {"task": "launch facts, one candidate at a time"}
#: An object's address in a repr: a fact holding one is not kept (module doc).
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

_lock = threading.Lock()    # learn() is a read-modify-write of one entry: the race thread and the main thread


@dataclass(frozen=True)
class LaunchItem:
    """One candidate's launch question: ``index`` (the probe in its file), ``num_sms``, the problem's ``values``,
    the ``config`` (``[tunables, hints]`` as pairs) and of its compile record what
    :func:`tileprobe.tune.static.probe_launch` reads: ``kernel``, ``arch``, ``hints``, ``effective_hints`` and
    ``signature`` (its argument descriptions, a list)."""
    index: int
    num_sms: int
    values: dict
    config: list
    kernel: str
    arch: str
    hints: dict
    effective_hints: dict
    signature: list


@dataclass
class FactsEntry:
    """A kept entry as read from its JSON: ``facts`` (item key → ``[grid, runtime]``) and ``files`` (the code files
    the loaders ran, :func:`tileprobe.probe.plancache.code_files`)."""
    facts: dict[str, Any] = field(default_factory=dict)
    files: list = field(default_factory=list)


def item_key(item: LaunchItem) -> str:
    """SHA-256 (hex) of what :func:`tileprobe.tune.static.probe_launch` reads for ``item`` (module doc)."""
    doc = [item.index, item.num_sms, item.values, item.config, item.kernel, item.arch, item.hints,
           item.effective_hints, item.signature]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()


def _entry_key(path: str) -> str:
    from tileprobe.probe.plancache import key
    return key(path, QUESTION)


def _entry(path: str) -> tuple[dict, list]:
    """The kept facts of ``path`` (item key → [grid, runtime]) and the code files they were made with; empty when
    there is no entry, or a file it ran has changed (:func:`tileprobe.probe.plancache.lookup`)."""
    from tileprobe.jsonrecord import FieldError, from_dict
    from tileprobe.probe import plancache
    data = plancache.lookup(_entry_key(path))
    try:
        entry = from_dict(FactsEntry, data, where="a kept launch-facts entry") if data is not None else FactsEntry()
    except FieldError:
        return {}, []
    return entry.facts, entry.files


def known(path: str, items: Sequence[LaunchItem]) -> list[list | None]:
    """Each item's kept facts (``[grid, runtime]``, each through :func:`checked`), None where none is kept, the code it
    ran has changed, or the fact is not what the fresh path would give. Inside a loader session the entry is read once
    (:func:`_kept`) and then answered from memory."""
    kept = _kept(path)
    facts = kept.facts if kept is not None else _entry(path)[0]
    return [checked(facts.get(item_key(item))) for item in items]


def checked(got: object) -> list | None:
    """A kept fact as the fresh path would give it (``[[x, y, z], runtime list]``, the grid through
    :func:`tileprobe.run.launch.grid3`: whole numbers within CUDA's grid limits), or None (a miss: the fact is asked
    of the loader afresh) for anything else: an entry file is data anyone who can write the cache folder may forge."""
    from tileprobe.errors import ProbeError
    from tileprobe.run.launch import grid3
    if not (isinstance(got, list) and len(got) == 2 and isinstance(got[0], list) and isinstance(got[1], list)):
        return None
    try:
        grid = grid3(got[0])
    except ProbeError:
        return None
    return [list(grid), got[1]] if list(grid) == got[0] else None


@dataclass
class _Kept:
    """A probe file's entry held in memory for one loader session: its ``facts`` and ``files`` as they will be
    written, and whether a write is waiting in the saver thread (``pending``: learning more then schedules none)."""
    facts: dict
    files: list
    pending: bool = False


#: loader session -> probe file -> its entry in memory (:func:`_kept`); gone with the session.
_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kept(path: str) -> _Kept | None:
    """``path``'s entry for the current loader session, read from the plan cache the first time (None outside a
    session). Each intake of the race read the whole entry again — decoded and its module files checked — and it
    grows by every fact learnt: 0.35 s of an intake of 16 TileGym matmul candidates at 32 facts kept (cProfile, the
    loaded 2-core machine, 2026-12-05); the files a session's loader ran do not change under it (its modules are
    imported once, :func:`tileprobe.probe.plancache.code_files`)."""
    from tileprobe.probe import plancache
    from tileprobe.probe.contained import current_session
    session = current_session()
    if session is None or not plancache.enabled():
        return None
    with _lock:
        by_path = _memo.setdefault(session, {})
        if path not in by_path:
            facts, files = _entry(path)
            by_path[path] = _Kept(dict(facts), list(files))
        return by_path[path]


def _merged_files(old: list, new: list) -> list:
    """The code files of both lists, by path (a missing module by name); ``new`` describes a path ``old`` has."""
    by_path = {e[0]: e for e in old if isinstance(e, list) and e}
    by_path.update({e[0]: e for e in new if isinstance(e, list) and e})
    return sorted(by_path.values(), key=lambda e: str(e[0]))


def learn(path: str, items: Sequence[LaunchItem], facts: Sequence[object], code_files: list) -> int:
    """Keep each item's fact (``[grid, runtime]``; an error text is not kept, nor a fact naming an address) with
    ``code_files``, the modules the loader had run (:func:`tileprobe.probe.plancache.code_files`). Inside a loader
    session the facts join the session's entry in memory (:func:`_kept`) and the entry is written whole by the
    session's saver thread while the tune goes on, at most one write waiting (encoding the entry took 0.3-0.7 s on
    the loaded 2-core machine: not in the race's path, and not once per intake); outside one it is read, merged and
    written here. Returns the facts to keep; never raises (a write that fails is a miss next time)."""
    from tileprobe.probe import plancache
    from tileprobe.probe.contained import current_session
    if not code_files or not plancache.enabled():
        return 0
    fresh = {item_key(i): f for i, f in zip(items, facts)
             if checked(f) is not None and not ADDRESS.search(json.dumps(f, default=repr))}
    if not fresh:
        return 0
    session = current_session()
    kept = _kept(path) if session is not None else None
    if kept is None or session is None:
        _merge_and_save(path, fresh, code_files)
        return len(fresh)
    with _lock:
        kept.facts.update(fresh)
        kept.files = _merged_files(kept.files, code_files)
        schedule, kept.pending = not kept.pending, True
    if schedule and not session.save_later(_save_kept, path, kept):
        _save_kept(path, kept)
    return len(fresh)


def _save_kept(path: str, kept: _Kept) -> None:
    """Write ``kept`` as it is now (the saver thread: facts learnt while a write waited go in the same write)."""
    from tileprobe.jsonrecord import to_dict
    from tileprobe.probe import plancache
    with _lock:
        kept.pending = False
        entry = FactsEntry(dict(kept.facts), list(kept.files))
    plancache.save(_entry_key(path), to_dict(entry), entry.files)


def _merge_and_save(path: str, fresh: dict, code_files: list) -> None:
    """Merge ``fresh`` facts into ``path``'s entry and write it (serialised: the saver thread, the callers)."""
    from tileprobe.jsonrecord import to_dict
    from tileprobe.probe import plancache
    with _lock:
        old, old_files = _entry(path)
        entry = FactsEntry({**old, **fresh}, _merged_files(old_files, code_files))
        plancache.save(_entry_key(path), to_dict(entry), entry.files)

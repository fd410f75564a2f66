"""What the results store (and result JSON files) hold: ``tileprobe history`` and the records other commands read.

* :func:`history`: stored audits, compiles and runs matching filters, newest first (a :class:`History`).
* :func:`write_history_json` / :func:`write_history_csv`: the same as a result document or one CSV row per compile.
* :func:`load_records`: variant records from result JSON files and/or a store, with verdicts judged afresh
  (``tileprobe report`` reads them).

Filters everywhere: ``kernel`` (exact probe label), ``arch`` (``sm_90``; aliases such as ``90`` accepted),
``tileiras`` (a substring of the compiler build string, e.g. ``"13.4"``).
"""
from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Sequence
from typing import TextIO

from tileprobe.analyses.results import History, StoredAudit, StoredCompile, StoredRun
from tileprobe.errors import UsageError
from tileprobe.judge.verdict import judge_records
from tileprobe.model.arch import get_arch
from tileprobe.schema import VariantRecord, dump, json_text, load
from tileprobe.select import format_value, select
from tileprobe.store import Store

#: Columns of :func:`write_history_csv`, in order (one row per stored compile; ``median_us`` and ``gpu``: its
#: newest run).
CSV_COLUMNS = ["created", "kernel", "case", "hints", "arch", "tileiras", "cuda_tile", "status", "failure", "threads",
               "registers", "shared_bytes", "stack_bytes", "ctas_per_sm", "median_us", "gpu", "compile_s", "reg_pool", "host",
               "probe", "source_sha256", "cubin_sha256", "key"]


def history(store: Store, *, kernel: str | None = None, arch: str | None = None, tileiras: str | None = None,
            limit: int | None = None, where: dict | None = None) -> History:
    """Audits, compiles and runs matching the filters (module doc), newest first, at most ``limit`` of each
    (None or 0: all). What ``tileprobe history`` lists. ``where``: only compiles (and runs of them, and audits
    holding them) whose case and hints match (:mod:`tileprobe.select`).

    Raises:
        StoreError: the store is damaged or locked. TileprobeError: an unknown ``arch``. UsageError: a ``kernel``
            with no stored compile (naming the kernels there are).
    """
    check_kernel(store, kernel)
    most = None if where else (limit or None)
    audits = [StoredAudit.from_dict(a) for a in store.audits(kernel=kernel, arch=arch, tileiras=tileiras, limit=most)]
    compiles = [StoredCompile.from_dict(c)
                for c in store.compiles(kernel=kernel, arch=arch, tileiras=tileiras, limit=most)]
    runs = [StoredRun.from_dict(r) for r in store.runs(kernel=kernel, arch=arch, tileiras=tileiras, limit=most)]
    if where:
        from tileprobe.select import matches_values
        compiles = [c for c in compiles if matches_values(c.case or {}, c.hints or {}, where)]
        keys = {c.key for c in compiles}
        runs = [r for r in runs if r.compile_key in keys]
        audits = [a for a in audits if keys & set(a.compile_keys or ())]
        n = limit or None
        audits, compiles, runs = audits[:n], compiles[:n], runs[:n]
    listed = {a.id for a in audits}
    pruned = [c.pruned_text(i) for i, c in store.pruned_audits() if i in listed]
    return History(store.path, audits, compiles, runs, pruned)


def check_kernel(store: Store, kernel: str | None) -> None:
    """Refuse a ``--kernel`` the store has never compiled (a typo listed empty tables and exit 0).

    Raises:
        UsageError: naming the kernels the store has, with the closest first when one is close.
    """
    if not kernel:
        return
    known = store.kernels()
    if kernel in known:
        return
    near = difflib.get_close_matches(kernel, known, n=1)
    raise UsageError(f"--kernel {kernel!r}: no stored compile of that kernel"
                     + (f" (did you mean {near[0]!r}?)" if near else "")
                     + (f"; the store has {', '.join(known)}" if known else "; the store holds no compile yet"))


def write_history_json(store: Store, dest: str | TextIO, where: dict | None = None, **filters) -> int:
    """Write a result document (``tileprobe/schema.py``: ``report`` and ``compare`` read it) of the newest compile
    per matching variant, with verdicts, plus ``audits`` and ``runs``, to the path or text stream ``dest``.

    ``filters``: ``kernel``, ``arch``, ``tileiras`` (module doc); ``where``: case and hint values. Returns the
    number of records (variants) written.
    """
    records = select(store.records(**filters, judge=judge_records), where)
    doc = dump(records, {"store": store.path})
    hist = history(store, where=where, **filters)
    doc.update(audits=[a.to_dict() for a in hist.audits], runs=[r.to_dict() for r in hist.runs])
    _write_text(dest, json_text(doc))
    return len(records)


def write_history_csv(store: Store, dest: str | TextIO, where: dict | None = None, **filters) -> int:
    """Write one CSV row per matching stored compile (columns: :data:`CSV_COLUMNS`; case and hints as
    ``NAME=VALUE`` words) to the path or text stream ``dest``; ``where``: case and hint values. Returns the number
    of rows written (the header not counted)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_COLUMNS, extrasaction="ignore")
    w.writeheader()
    rows = history(store, where=where, **filters).compiles
    for row in rows:
        w.writerow(dict(row.to_dict(), case=_kv(row.case or {}), hints=_kv(row.hints or {})))
    _write_text(dest, buf.getvalue())
    return len(rows)


def _kv(d: dict) -> str:
    """``NAME=VALUE`` words; a tuple (a JSON list in the store) as the table cells write it, ``TILE=256×256×64``
    (:func:`tileprobe.select.format_value`: no space inside a word)."""
    return " ".join(f"{k}={format_value(v)}" for k, v in d.items())


def _write_text(dest: str | TextIO, text: str) -> None:
    if hasattr(dest, "write"):
        dest.write(text)
        return
    with open(dest, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def load_records(*, store: str | None = None, json_files: Sequence[str] = (), use_store: bool = True,
                 kernel: str | None = None, arch: str | None = None, tileiras: str | None = None,
                 audit_id: int | None = None, where: dict | None = None) -> tuple[list[VariantRecord], list[str]]:
    """Records from result JSON files and/or a results store, and the list of their sources (paths).

    From the store: the newest compile per variant with verdicts judged afresh over them, or with ``audit_id``
    that audit's records and verdicts. ``store``: its path (None: the default store, created if missing).
    ``where``: only the records whose case and hint values match (judged before selecting: verdicts compare
    every value of a hint); raises WhereError listing the values when none match.

    Raises:
        TileprobeError: an unreadable or newer result file, an unknown ``arch``. StoreError: a store that
            cannot be read, or a ``store`` path that does not exist.
    """
    records: list[VariantRecord] = []
    sources: list[str] = []
    arch = get_arch(arch).name if arch else None
    for path in json_files:
        recs, _ = load(path, judge=judge_records)
        records.extend(r for r in recs if (not kernel or r.kernel == kernel) and (not arch or r.arch == arch)
                       and (not tileiras or tileiras in r.tileiras))
        sources.append(path)
    if use_store:
        with Store.open(store, must_exist=bool(store), check=True) as s:
            records.extend(s.records(kernel=kernel, arch=arch, tileiras=tileiras, audit_id=audit_id,
                                     judge=judge_records))
            sources.append(s.path + (f" (audit {audit_id})" if audit_id is not None else ""))
    if where:
        from tileprobe.select import select_or_explain
        records = select_or_explain(records, where)
    return records, sources

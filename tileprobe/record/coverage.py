"""What share of a run under ``tileprobe use`` the table answered: per kernel, searches and launches.

The hook side (:mod:`tileprobe.record.usehook`, in every Python process of the program) appends ``search`` lines
(one per search call: ``outcome`` ``answered`` | ``default`` | ``pinned`` | ``missed`` | ``stale`` | ``off``, the
reason, the problem's arguments) and ``launches`` lines (absolute counts per kernel and per how its configuration was
chosen; the last line of a process wins) to ``cov-<pid>-<ns>.jsonl`` files in one folder. :func:`read_coverage`
adds them up after the program ended and finds, for each miss, the nearest row of the table: same kernel, nearest
problem (:func:`problem_distance`).

Launches are counted on the host when ``ct.launch`` is called, by the kernel's Python function and how that
kernel's configuration was chosen at the time: ``table`` (its last search in the process was answered from the table,
its default, or a pin), ``own`` (its last search ran the program's own search), ``none`` (the kernel never searched).
GPU time is not measured: launches are asynchronous, and the host time of a launch call holds cuTile's JIT compile
on first calls, so neither is GPU time.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict
from tileprobe.record.argdesc import arg_desc
from tileprobe.record.tabledoc import RecordedSearchDoc, TableDoc, recorded_searches, table_doc

ANSWERED = ("answered", "default", "pinned")
OUTCOMES = ("answered", "default", "pinned", "missed", "stale", "off")
#: What one search-problem argument costs in :func:`problem_distance` when it cannot be compared (another dtype,
#: rank, kind): far more than any shape difference (a factor of 2 in one extent costs 1).
MISMATCH = 1000.0


@dataclass
class NearestRow:
    """The table's row nearest to a missed search: same kernel, the smallest :func:`problem_distance`.
    ``key``: the row's search key (what ``--pin KERNEL=KEY`` takes); ``config``: its configuration;
    ``problem``: its problem as text (``float32[4096], float32[4096]``); ``distance``: log2 units."""
    key: str
    config: object
    problem: str
    distance: float


@dataclass
class SearchMiss:
    """One distinct search (kernel, key, outcome, reason) that ran the program's own search (key ``-``: one that
    could not be described): the reason (for ``stale``:
    what changed), its problem as text, how often it was called, and the nearest row (None: the kernel has no row
    with a known problem)."""
    kernel: str
    key: str
    outcome: str
    reason: str
    problem: str
    calls: int = 1
    nearest: NearestRow | None = None


@dataclass
class KernelCoverage:
    """One kernel's searches by outcome (calls) and launches by how their configuration was chosen."""
    kernel: str
    searches: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    launches_table: int = 0
    launches_own: int = 0
    launches_none: int = 0
    misses: list[SearchMiss] = field(default_factory=list)

    @property
    def answered(self) -> int:
        """Search calls answered by tileprobe (from the table, its default, a pin)."""
        return sum(self.searches[o] for o in ANSWERED)

    @property
    def total(self) -> int:
        """Search calls seen."""
        return sum(self.searches.values())


@dataclass
class Coverage:
    """A run's coverage: one :class:`KernelCoverage` per kernel (by name), the processes that wrote events, the
    lines that could not be read. Shares in percent, None when there was nothing to count."""
    kernels: list[KernelCoverage]
    processes: int = 0
    unreadable: int = 0

    @property
    def searches(self) -> tuple[int, int]:
        """(answered, total) search calls."""
        return sum(k.answered for k in self.kernels), sum(k.total for k in self.kernels)

    @property
    def launches(self) -> tuple[int, int]:
        """(ran a table configuration, launches of kernels that searched): launches of kernels that never
        searched (``none``) are not the table's to answer and are left out of the share."""
        return (sum(k.launches_table for k in self.kernels),
                sum(k.launches_table + k.launches_own for k in self.kernels))

    @property
    def search_share(self) -> float | None:
        """Percent of search calls answered."""
        a, t = self.searches
        return 100.0 * a / t if t else None

    @property
    def launch_share(self) -> float | None:
        """Percent of the searching kernels' launches that ran a configuration tileprobe gave."""
        a, t = self.launches
        return 100.0 * a / t if t else None

    def below(self, minimum: float) -> list[str]:
        """What falls below ``minimum`` percent (empty: nothing), each as ``searches 50.0 % (1/2)``. A run in which
        no search was seen at all is below any minimum above 0: a CI gate must not pass a run whose hook never
        loaded or whose program never searched."""
        if minimum > 0 and self.searches[1] == 0:
            return ["no search was seen (0 searches: did the program run its searches under this hook?)"]
        out = []
        for what, share, (a, t) in (("searches", self.search_share, self.searches),
                                    ("launches", self.launch_share, self.launches)):
            if share is not None and share < minimum:
                out.append(f"{what} {share:.1f} % ({a:,}/{t:,})")
        return out

    def to_json(self) -> dict:
        """The JSON document ``--coverage-json`` writes (``kind`` ``tileprobe.use-coverage``)."""
        a, t = self.searches
        la, lt = self.launches
        return {"kind": "tileprobe.use-coverage", "schema_version": 1, "processes": self.processes,
                "unreadable_lines": self.unreadable,
                "searches": {"answered": a, "total": t, "share_pct": self.search_share},
                "launches": {"table": la, "searching_kernels": lt, "share_pct": self.launch_share,
                             "none": sum(k.launches_none for k in self.kernels),
                             "what": "host-side ct.launch calls; GPU time not measured"},
                "kernels": [{**asdict(k), "answered": k.answered, "total": k.total} for k in self.kernels]}


def problem_text(problem: list) -> str:
    """A search problem's arguments (``[[position, argument JSON], …]``) as ``float32[4096], 7``."""
    return ", ".join(_arg_text(d) for _, d in problem) or "(no problem arguments)"


def _arg_text(d: object) -> str:
    a = arg_desc(d)
    if a is None:
        return str(d)
    if a.kind == "array":
        return f"{str(a.dtype).replace('torch.', '')}[{'x'.join(map(str, a.shape or []))}]"
    if a.kind == "scalar":
        return repr(a.value)
    if a.kind == "sequence":
        return "(" + ", ".join(_arg_text(x) for x in a.items or []) + ")"
    return str(a.name or a.type or a.kind)


def problem_distance(a: list, b: list) -> float:
    """How far two search problems are apart: the sum over argument positions of |log2(x+1) − log2(y+1)| over
    array extents and numeric scalars, :data:`MISMATCH` for each argument of another dtype, rank or kind, infinity
    when the positions differ. 0: the same problem."""
    da, db = {int(p): d for p, d in a}, {int(p): d for p, d in b}
    if set(da) != set(db):
        return math.inf
    return sum(_arg_distance(da[p], db[p]) for p in da)


def _log(v) -> float:
    return math.log2(abs(float(v)) + 1.0)


def _arg_distance(x: object, y: object) -> float:
    ax, ay = arg_desc(x), arg_desc(y)
    if ax is None or ay is None or ax.kind != ay.kind:
        return MISMATCH
    if ax.kind == "array":
        sx, sy = ax.shape or [], ay.shape or []
        if ax.dtype != ay.dtype or len(sx) != len(sy):
            return MISMATCH
        return sum(abs(_log(m) - _log(n)) for m, n in zip(sx, sy))
    if ax.kind == "scalar":
        vx, vy = ax.value, ay.value
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (vx, vy))
        return abs(_log(vx) - _log(vy)) if numeric else (0.0 if vx == vy else MISMATCH)
    if ax.kind == "sequence":
        ix, iy = ax.items or [], ay.items or []
        return MISMATCH if len(ix) != len(iy) else sum(_arg_distance(p, q) for p, q in zip(ix, iy))
    return 0.0 if x == y else MISMATCH


@dataclass
class _TableRow:
    kernel: str
    key: str
    config: object
    problem: list


def _recorded_problems(recorded: list[RecordedSearchDoc]) -> dict:
    """Search key → problem (``[[position, argument JSON], …]``) of the recording's searches that know it."""
    by_key = {}
    for s in recorded:
        configs = s.config_docs()
        if s.key and s.problem_args:
            by_key[s.key] = s.problem_args
        elif s.key and configs:
            args = configs[0].args or []
            by_key[s.key] = [[i, args[i]] for i in s.problem or [] if i < len(args)]
    return by_key


def table_rows(table: TableDoc, recorded: list[RecordedSearchDoc]) -> list[_TableRow]:
    """The search rows of a tune table with their problems: from the row's ``search.problem_args`` (``tune
    --export`` writes it) or else from the recording beside the table (``recorded``: ``record.json``'s
    ``searches``); rows whose problem is known by neither are left out."""
    by_key = _recorded_problems(recorded)
    out = []
    for kernel, searches in table.row_searches().items():
        for search in searches:
            if not search.key:
                continue
            problem = search.problem_args or by_key.get(search.key)
            if problem is not None:
                out.append(_TableRow(kernel, search.key, search.config, problem))
    return out


def nearest_row(kernel: str, problem: list, rows: list[_TableRow]) -> NearestRow | None:
    """The row of ``kernel`` (its name, or the last part of a qualified name) nearest to ``problem``."""
    names = {kernel, kernel.rsplit(".", 1)[-1]}
    best = None
    for r in rows:
        if r.kernel not in names:
            continue
        d = problem_distance(problem, r.problem)
        if math.isfinite(d) and (best is None or d < best.distance):
            best = NearestRow(r.key, r.config, problem_text(r.problem), round(d, 3))
    return best


#: The most bytes of one process's coverage events file this reads (a line per search, one per launch count).
COVERAGE_LIMIT_BYTES = 256 << 20


@dataclass(frozen=True)
class CoverageEvent:
    """One line of a process's coverage events file, as :mod:`tileprobe.record.usehook` writes it. ``t``:
    ``search`` | ``launches``. A ``search`` line: ``kernel``, ``key`` (``-``: a search that could not be described),
    ``outcome`` (:data:`OUTCOMES`), ``reason`` and ``problem`` (``[[position, argument JSON], …]``); a ``launches``
    line: ``counts`` (``[[kernel, how, n], …]``). Fields are taken as they come (a line may be anyone's): the
    counting checks them."""
    t: Any = None
    kernel: Any = None
    key: Any = None
    outcome: Any = None
    reason: Any = None
    problem: Any = None
    counts: Any = None


def _lines(path: str) -> tuple[list[CoverageEvent], int]:
    """The events (JSON objects) of one events file, and how many lines could not be read (a process killed mid-write, or a
    line no tileprobe wrote). Regular files only, opened non-blocking and read to :data:`COVERAGE_LIMIT_BYTES`: a
    FIFO, device, folder or larger file is one unreadable line, never a hang."""
    from .capture.tables import read_regular
    try:
        raw = read_regular(path, COVERAGE_LIMIT_BYTES)
    except (OSError, ValueError):
        return [], 1
    bad, out = 0, []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            bad += 1
            continue
        if isinstance(obj, dict):
            out.append(from_dict(CoverageEvent, obj))
        else:
            bad += 1
    return out, bad


def _launch_counts(counts) -> list | None:
    """``[[kernel, how, n], …]`` of a ``launches`` line, or None when it is not that shape."""
    if not isinstance(counts, list):
        return None
    out = []
    for c in counts:
        if not (isinstance(c, list) and len(c) == 3 and isinstance(c[1], str) and isinstance(c[2], int)
                and not isinstance(c[2], bool) and c[2] >= 0):
            return None
        out.append((str(c[0]), c[1], c[2]))
    return out


def _search_line(ev: CoverageEvent, kernels: dict, misses: dict, rows: list) -> None:
    """Count one ``search`` line. Raises on a line no tileprobe wrote (TypeError, ValueError, …): the caller skips
    it, before anything is counted."""
    kernel, outcome, problem = str(ev.kernel), ev.outcome, ev.problem or []
    miss = None
    if outcome not in ANSWERED:
        mk = (kernel, str(ev.key), outcome, str(ev.reason or ""))   # undescribed: key "-"
        if mk not in misses:
            if not isinstance(problem, list):
                raise TypeError("problem is not a list")
            miss = SearchMiss(kernel, str(ev.key), outcome, str(ev.reason or ""), problem_text(problem))
            miss.nearest = nearest_row(kernel, problem, rows)
    k = kernels.setdefault(kernel, KernelCoverage(kernel))
    k.searches[outcome] += 1
    if outcome not in ANSWERED:
        if miss is not None:
            misses[mk] = miss
        else:
            misses[mk].calls += 1


def read_coverage(events_dir: str, table: TableDoc | Mapping, recorded: list | None = None) -> Coverage:
    """Add up the events under ``events_dir`` (module doc) against ``table`` (the tune table, as a
    :class:`~tileprobe.record.tabledoc.TableDoc` or its JSON document) and its recording's searches (``recorded``:
    ``record.json``'s ``searches``, as records or JSON objects, for the rows' problems). A missing folder is a run with no search and no
    counted launch."""
    kernels: dict[str, KernelCoverage] = {}
    misses: dict[tuple, SearchMiss] = {}
    rows = table_rows(table_doc(table), recorded_searches(recorded or []))
    cov = Coverage([])
    names = sorted(n for n in os.listdir(events_dir) if n.startswith("cov-")) if os.path.isdir(events_dir) else []
    for name in names:
        lines, bad = _lines(os.path.join(events_dir, name))
        cov.processes += 1
        cov.unreadable += bad
        last_counts: list = []
        for ev in lines:
            if ev.t == "launches":
                counts = _launch_counts(ev.counts or [])
                if counts is None:
                    cov.unreadable += 1
                else:
                    last_counts = counts
            elif ev.t == "search" and isinstance(ev.outcome, str) and ev.outcome in OUTCOMES:
                try:
                    _search_line(ev, kernels, misses, rows)
                except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError):
                    cov.unreadable += 1
        for kernel, how, n in last_counts:
            k = kernels.setdefault(kernel, KernelCoverage(kernel))
            if how in ("table", "own", "none"):
                setattr(k, f"launches_{how}", getattr(k, f"launches_{how}") + n)
    for m in misses.values():
        kernels[m.kernel].misses.append(m)
    cov.kernels = sorted(kernels.values(), key=lambda k: k.kernel)
    return cov

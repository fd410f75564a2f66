"""Answer searches from a tune table (``tileprobe use``): a row whose key and provenance match returns its
configuration as a ``TuningResult``; a miss runs the program's search and is appended to ``TABLE.misses.jsonl``.
Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import json
import os
import sys
import time

from . import facts
from .describe import _plain, _site, _Sites
from .ext import usehook
from .facts import stale_reasons
from .result import _tuning_result
from .search import Search, _strict_text
from .tables import (
    TABLE_SCHEMA,
    TABLE_WARN_BYTES,
    TableReadError,
    append_regular,
    index_rows,
    read_json_file,
    row_problems,
    table_row,
)


class Answerer:
    """Answers searches from a tune table (``tileprobe tune --export``): rows with a ``search`` block, indexed by
    the search key. The table is read at the first search of the process, not before: a process that never
    searches opens neither the table nor its misses file. Never raises into the program: an unreadable table is said
    once and every search runs."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.misses_path = self.path + ".misses.jsonl"
        self.said: set = set()
        self.rows: dict = {}
        self.facts: dict | None = None    # this process's device facts (facts.device_facts), at the first answer
        self.answered = 0
        self.broken = False
        self.loaded = False
        self.read_s: float | None = None   # seconds the table read took (None: not read yet)

    def load(self) -> None:
        """Read the table once (the first search calls it): index its rows by search key; a table above
        :data:`TABLE_WARN_BYTES` is said once with the fix, an unreadable one once with the reason."""
        if self.loaded:
            return
        self.loaded = True
        t0 = time.perf_counter()
        try:
            doc = read_json_file(self.path)
            if isinstance(doc, dict) and isinstance(doc.get("schema_version"), int) and \
                    doc["schema_version"] > TABLE_SCHEMA:
                raise TableReadError(f"{self.path}: schema_version {doc['schema_version']}, newer than the "
                                     f"{TABLE_SCHEMA} this tileprobe reads (upgrade tileprobe)")
            for kernel, rows in (doc.get("kernels") or {}).items():
                for row in rows:
                    key = (row.get("search") or {}).get("key")
                    if key:
                        self.rows.setdefault(key, []).append((kernel, row))
        except (OSError, ValueError, AttributeError, TypeError, RecursionError, MemoryError) as e:
            self.broken = True
            self.say_once("table", f"cannot read the table {self.path} ({type(e).__name__}: {e}); every search "
                                   "runs as the program wrote it")
        self.read_s = time.perf_counter() - t0
        try:
            size = os.stat(self.path).st_size
        except OSError:
            size = 0
        if size > TABLE_WARN_BYTES:
            self.say_once("size", f"the table {self.path} is {size / 1e6:,.0f} MB: each process that searches reads "
                                  f"all of it ({self.read_s:.1f} s here); give this program a table of its own "
                                  "kernels (`tileprobe tune --export SMALL.json -- COMMAND`)")

    def say_once(self, what: str | tuple, text: str) -> None:
        """One line on stderr per ``what`` (a reason; a reason and a search key)."""
        if what in self.said:
            return
        self.said.add(what)
        sys.stderr.write(f"tileprobe use: {_plain(text)}\n")

    def answer(self, search: Search, frame):
        """A ``TuningResult`` for ``search`` from its row, or None (a miss: said once, noted)."""
        try:
            return self._answer(search, frame)
        except Exception as e:
            self.say_once("error", f"answering a search failed ({type(e).__name__}: {e}); it runs as the program "
                                   "wrote it")
            return None

    def _answer(self, search: Search, frame):
        found = None if self.loaded else index_rows(self.path, search.key)   # one bucket of a current index
        if found is None:
            self.load()
            if self.broken:              # said once when the table was read; no misses noted beside it
                return None
            found = self.rows.get(search.key)
        name = search.kernel_names.qualname or search.kernel_names.name or "kernel"
        ext = usehook()
        control = ext.steer(self, search, name) if ext is not None else []     # --off / --pin: [its answer]
        if control:
            return control[0]
        if not found:
            return self._miss(search, frame, name, "no row for this search (its problem or its configurations are "
                                                   "not in the table)")
        names = {search.kernel_names.name, name, name.rsplit(".", 1)[-1]}
        rows = [table_row(r) for k, r in found if k in names]
        if not rows:
            return self._miss(search, frame, name, f"the table's row for this search is under another kernel "
                                                   f"({', '.join(sorted({k for k, _ in found}))})")
        if self.facts is None:
            self.facts = facts.device_facts()   # looked up at the call: a test may stand in for it
        here = {**self.facts, "source_sha256": search.source_sha256}
        judged = [(row_problems(r) or stale_reasons(r.raw, here), r) for r in rows]
        fresh = [r for why, r in judged if not why]
        if len(fresh) > 1:     # rows of other GPUs (a merged table) are not duplicates here
            self.say_once(("dup", search.key), f"{name}: {len(fresh)} rows for one search ({search.key}) in "
                                               f"{self.path}; the last that holds here answers")
        if not fresh:
            why = judged[-1][0]
            return self._miss(search, frame, name, ("" if why[0].startswith("invalid") else "stale row: ") +
                              "; ".join(why), "missed" if why[0].startswith("invalid") else "stale")
        row = fresh[-1]
        want, outcome = row.search.choice(), "answered"
        if ext is not None:      # never worse than the program's default configuration (the row's own figures)
            want, outcome = ext.never_worse_for(self, row, name, want)
        wanted = _strict_text(want)
        for i, c in enumerate(search.config_descs):
            if _strict_text(c.choice()) == wanted:
                self.answered += 1
                if ext is not None:
                    ext.get().searched(search, name, outcome)
                return _tuning_result(search.configs[i], row.median_us, row.samples, row.ci_us)
        return self._miss(search, frame, name, "the table's configuration is not among the program's candidates")

    def _miss(self, search: Search, frame, name: str, reason: str, outcome: str = "missed"):
        ext = usehook()
        if ext is not None:              # every call counts in the coverage, said or not
            ext.get().searched(search, name, outcome, reason)
        if search.key in self.said:      # said and noted once per search and process
            return None
        self.say_once(search.key, f"{name}: {reason}; running the program's own search (noted in "
                                  f"{self.misses_path})")
        try:
            sites = _Sites().frames(frame) if frame is not None else (None, None)
            line = {"t": "miss", "time": time.time(), "reason": reason, "argv": list(sys.argv),
                    "kernel": search.kernel_doc, **search.doc((_site(sites[0]), _site(sites[1])))}
            append_regular(self.misses_path, (json.dumps(line, default=repr) + "\n").encode("utf-8"))
        except Exception as e:
            self.say_once("misses", f"cannot note the miss in {self.misses_path}: {type(e).__name__}: {e}")
        return None

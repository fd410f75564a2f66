"""A tune table's document and its recording's searches as records, read once where the JSON is read.

``tileprobe tune --export`` writes the table (``{"kind": "tileprobe.tune", "schema_version": N, "kernels": {name:
[row, …]}}``, each row with a ``search`` object: ``key``, ``config``, ``problem_args``); ``tileprobe record`` writes
``record.json``, whose ``searches`` (:func:`tileprobe.record.searches.search_summary`) give the rows' problems and
the program's configurations. The capture (loaded into programs, standard library only) reads the table on its own;
this is the reading of the commands (``use``'s checks, ``--pin``, coverage).

Fields are taken as they come (``Any``): the files are the user's, and each reader checks what it uses; a value of
the wrong shape reads as missing where the readers below say so.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tileprobe.jsonrecord import from_dict


@dataclass(frozen=True)
class RowSearch:
    """A table row's ``search`` object: the search ``key`` (hex), the program's ``config`` (its configuration as
    JSON) and ``problem_args`` (``[[position, argument JSON], …]``, written by ``tune --export``)."""
    key: Any = None
    config: Any = None
    problem_args: Any = None


@dataclass(frozen=True)
class _Row:
    search: Any = None


@dataclass(frozen=True)
class TableDoc:
    """A tune table's document: ``kind`` (``tileprobe.tune``), ``schema_version`` (int), ``kernels`` (kernel name →
    list of rows)."""
    kind: Any = None
    schema_version: Any = None
    kernels: Any = None

    def row_searches(self) -> dict[str, list[RowSearch]]:
        """Per kernel whose rows are a list, the ``search`` objects of its rows that have one (rows without one,
        or that are no objects, left out; a kernel with none maps to [])."""
        kernels = self.kernels if isinstance(self.kernels, Mapping) else {}
        out: dict[str, list[RowSearch]] = {}
        for name, rows in kernels.items():
            if not isinstance(rows, list):
                continue
            searches = [from_dict(_Row, r).search for r in rows if isinstance(r, Mapping)]
            out[name] = [from_dict(RowSearch, s) for s in searches if isinstance(s, Mapping)]
        return out


def table_doc(doc: object) -> TableDoc:
    """The :class:`TableDoc` of a table's JSON document (a TableDoc as it is; anything that is no object: an empty
    table)."""
    if isinstance(doc, TableDoc):
        return doc
    return from_dict(TableDoc, doc) if isinstance(doc, Mapping) else TableDoc()


@dataclass(frozen=True)
class RecordedConfigDoc:
    """One configuration of a recorded search in ``record.json``: the program's ``config`` (JSON), the ``hints`` its
    ``hints_fn`` gave, its ``label`` (``C0`` …) and ``text``; a launch log's configurations also carry ``args``
    (argument descriptions, :mod:`tileprobe.record.argdesc`) and ``grid``."""
    config: Any = None
    hints: Any = None
    args: Any = None
    grid: Any = None
    label: Any = None
    text: Any = None


@dataclass(frozen=True)
class RecordedSearchDoc:
    """One of ``record.json``'s ``searches``: the kernel's ``name``, the search ``key``, its ``configs``
    (:class:`RecordedConfigDoc` objects: :meth:`config_docs`), ``problem`` (argument positions) and
    ``problem_args`` (``[[position, argument JSON], …]``)."""
    name: Any = None
    key: Any = None
    configs: Any = None
    problem: Any = None
    problem_args: Any = None

    def config_docs(self) -> list[RecordedConfigDoc]:
        """The configurations that are JSON objects, in order ([] when there is no list)."""
        configs = self.configs if isinstance(self.configs, list) else []
        return [from_dict(RecordedConfigDoc, c) for c in configs if isinstance(c, Mapping)]


def recorded_searches(searches: object) -> list[RecordedSearchDoc]:
    """``record.json``'s ``searches`` as records (items that are no objects left out; [] for no list). Records pass
    through as they are."""
    items = searches if isinstance(searches, list) else []
    return [s if isinstance(s, RecordedSearchDoc) else from_dict(RecordedSearchDoc, s)
            for s in items if isinstance(s, (Mapping, RecordedSearchDoc))]

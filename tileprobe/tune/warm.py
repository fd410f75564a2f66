"""A new shape starts warm: a search whose kernel already has rows for other problems races first the picks of its
nearest rows.

A program's searches of one kernel at several shapes (a serving stack's batch sizes, a model's layers) mostly pick
the same few configurations, and a neighbouring shape's winner is the best first guess for a new one (the budgeted
search takes the store's picks of the same kernel first for the same reason: :mod:`tileprobe.tune.search`). When
``tileprobe tune -- COMMAND`` (or ``--refresh``, for the misses ``use`` noted) tunes a search, the table it exports
into may hold rows of the same kernel for other problems: their picks, nearest problem first, become the first
configurations of the new search's space (:func:`warm_first`), so they are compiled, and raced, first; the rest of
the space keeps its order and the search is otherwise the same (the same candidates, the same race).

*Nearest*: problems are compared by their dimensions (:func:`tileprobe.record.searches.problem_dims`: the shapes of the problem's arrays and
its integer scalars, in argument order), as the sum over dimensions of ``|log2(a / b)|`` (4096 is as near to 2048 as
to 8192); rows whose dimensions have another count are farthest, in table order.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tileprobe.tune.space import Config, Problem
from tileprobe.tune.table_doc import TuneRow, TuneTable

#: How many of the nearest rows' picks a new search takes first.
WARM_ROWS = 3


@dataclass(frozen=True)
class KnownPick:
    """A row of the table for a search of the kernel: its problem's dimensions and its pick (the program's
    configuration as JSON, with the hints the program gave it)."""
    dims: tuple[int, ...]
    config: str
    where: str


def config_text(config, hints) -> str:
    """A configuration as canonical JSON text (how a row's pick and a search's configuration are matched)."""
    return json.dumps({"config": config, "hints": hints or {}}, sort_keys=True, default=repr)


def distance(a: Sequence[int], b: Sequence[int]) -> float:
    """``Σ |log2(a_i / b_i)|`` (module doc); infinity when the counts differ (a zero counts as 1)."""
    if len(a) != len(b):
        return math.inf
    return sum(abs(math.log2(max(x, 1) / max(y, 1))) for x, y in zip(a, b))


def known_picks(table: Mapping, kernel: str, skip_key: str) -> list[KnownPick]:
    """The search rows of ``kernel`` in a table document (JSON) other than the search ``skip_key``'s, with the
    dimensions :func:`tileprobe.tune.export.annotate_searches` wrote (rows without them are left out)."""
    out = []
    rows = TuneTable.from_dict(dict(table)).rows().get(kernel) or []
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        search = row.search_block() if isinstance(row, TuneRow) else None
        if search is None or search.key == skip_key or not isinstance(search.dims, list):
            continue
        dims = tuple(int(x) for x in search.dims if isinstance(x, int) and not isinstance(x, bool))
        out.append(KnownPick(dims, config_text(search.config, search.hints),
                             f"kernels.{kernel}[{i}] ({'×'.join(map(str, dims)) or 'no dimensions'})"))
    return out


def warm_labels(picks: Sequence[KnownPick], dims: Sequence[int], labels: Mapping[str, str],
                rows: int = WARM_ROWS) -> list[tuple[str, str]]:
    """``[(label, where), …]``: the new search's configurations (``labels``: configuration text → its label) that
    the ``rows`` nearest known picks chose, nearest first, each once; picks not in the new space are passed over."""
    ranked = sorted(range(len(picks)), key=lambda i: (distance(picks[i].dims, dims), i))
    out: list[tuple[str, str]] = []
    for i in ranked[:rows]:
        label = labels.get(picks[i].config)
        if label is not None and label not in [x for x, _ in out]:
            out.append((label, picks[i].where))
    return out


def warm_first(problem: Problem, first: Sequence[str]) -> Problem:
    """``problem`` with the configurations whose tunable ``config`` value is in ``first`` moved to the front (in
    ``first``'s order), the others after them in their order, and those named its ``first`` (what a budgeted search
    takes first after the default: :func:`tileprobe.tune.budgeted.first_guesses`); the default and the rest
    unchanged. Without a budget the order is the compile order: the warm configurations land, and race, first."""
    if not first:
        return problem
    rank = {label: i for i, label in enumerate(first)}

    def label_of(c: Config) -> str | None:
        label = dict(c.tunables).get("config")
        return label if isinstance(label, str) else None

    def key(ic: tuple[int, Config]) -> tuple[int, int]:
        label = label_of(ic[1])
        return (rank[label] if label in rank else len(rank), ic[0])
    ordered = [c for _, c in sorted(enumerate(problem.configs), key=key)]
    warm = tuple(c for c in ordered if label_of(c) in rank)
    return replace(problem, configs=ordered, first=warm)


def apply_warm(problems: Sequence[Problem], warm: Mapping[str, Sequence[str]] | None) -> list[Problem]:
    """Each problem of a probe named in ``warm`` (probe label → the labels to race first) ordered by
    :func:`warm_first`; the others as they are. The tune's ordering hook (:func:`tileprobe.tune.pipeline.tune`'s
    ``warm_first``)."""
    if not warm:
        return list(problems)
    return [warm_first(p, warm.get(p.probe.label) or ()) for p in problems]

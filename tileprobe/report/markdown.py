"""Markdown ready to paste into a compiler bug report: environment, per-version tables, reasons, repro."""
from __future__ import annotations

from typing import Iterable

from ..schema import VariantRecord
from .common import case_columns, group_tables, sass_columns, headers, hint_columns, verdict_columns, row_cells, short_build, verdict_cells, verdict_text, noteworthy


def table_md(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table; pipes in cells are escaped."""
    esc = lambda c: str(c).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def environment_md(env: dict) -> str:
    """The environment block: tileprobe, Python, platform, cuda-tile, tileiras builds, GPU if any."""
    lines = [f"- {k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def audit_markdown(records: Iterable[VariantRecord], environment: dict, command: str = "") -> str:
    """The whole audit as Markdown: one table per kernel and compiler, then the noteworthy verdicts (partial,
    ignored, infeasible, unchanged: :data:`tileprobe.schema.NOTEWORTHY_STATUSES`) and failures."""
    records = list(records)
    parts = ["## tileprobe audit\n", environment_md(environment)]
    if command:
        parts.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    for (kernel, tileiras, arch), rows in group_tables(records).items():
        hints, cases, vcols = hint_columns(rows), case_columns(rows), verdict_columns(rows)
        parts.append(f"\n### {kernel} · {arch} · {short_build(tileiras)}\n\n")
        extra = sass_columns(rows)
        parts.append(table_md(headers(hints, cases) + [name for name, _ in extra] + [f"{h} verdict" for h in vcols],
                              [row_cells(r, hints, cases) + [fn(r) for _, fn in extra] + verdict_cells(r, vcols)
                               for r in rows]))
        notes = [f"- {_label(r)}: {verdict_text(r, long=True)}" for r in rows
                 if not r.ok or any(noteworthy(v) for v in r.verdicts.values())]
        if notes:
            parts.append("\n" + "\n".join(notes) + "\n")
    from ..explain import advice
    lines = advice(records)
    if lines:
        parts.append("\n### Advice\n\n" + "".join(f"- {line}\n" for line in lines))
    return "".join(parts)


def _label(r: VariantRecord) -> str:
    return " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or "declared hints"

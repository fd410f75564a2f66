"""Markdown ready to paste into a compiler bug report: environment, per-version tables, reasons, repro; for audits,
comparisons, bisections, doctor findings and GPU runs."""
from __future__ import annotations

from typing import Iterable, Sequence

from ..analyses.bisect import BisectResult
from ..analyses.compare import Comparison
from ..analyses.doctor import Finding
from ..audit.explain import advice
from ..schema import VariantRecord
from .common import (RUN_COLUMNS, best_lines, case_columns, failure_groups, failure_of, group_label, group_tables,
                     headers, hint_columns, noteworthy, record_side, row_cells, sass_columns, short_build,
                     verdict_cells, verdict_columns, verdict_text)


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
                 if r.ok and any(noteworthy(v) for v in r.verdicts.values())]
        notes += failures_md(rows)
        if notes:
            parts.append("\n" + "\n".join(notes) + "\n")
    lines = advice(records)
    if lines:
        parts.append("\n### Advice\n\n" + "".join(f"- {line}\n" for line in lines))
    return "".join(parts)


def _code(text: str, indent: str = "  ") -> str:
    """A fenced code block (indented into a list item); a fence longer than any backtick run inside."""
    fence = "```"
    while fence in text:
        fence += "`"
    body = "\n".join(indent + line for line in text.splitlines())
    return f"{indent}{fence}\n{body}\n{indent}{fence}"


def failures_md(rows: Iterable[VariantRecord]) -> list[str]:
    """One list item per failure group: the variants, the class, the compiler's own words (a code block), the fix
    and the repeat command (a code block)."""
    out = []
    for group in failure_groups(rows):
        r = group[0]
        item = [f"- **{failure_of(r)}** — {group_label(group)}"]
        if (r.message or r.error or "").strip():
            item.append(_code((r.message or r.error).strip()))
        if r.fix:
            item.append(f"  fix: {r.fix}")
        if r.repro:
            item.append("  repeat:\n" + _code(r.repro))
        out.append("\n".join(item))
    return out


def _label(r: VariantRecord) -> str:
    return " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or "declared hints"


def compare_markdown(comparison: Comparison, command: str = "") -> str:
    """Markdown for a bug report: the environment, the changed variants (regressions first), the repro command."""
    c = comparison
    parts = ["## tileprobe compare\n\n", f"- A: {c.name_a}\n- B: {c.name_b}\n"]
    if c.environment:
        parts.append(environment_md(c.environment))
    if command:
        parts.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    rows = [[ch.mark, ch.label(), record_side(ch.a), record_side(ch.b), "; ".join(ch.details)]
            for ch in c.changes if ch.kind != "same"]
    parts.append("\n" + table_md(["", "variant", "A", "B", "what changed"], rows) if rows else "\nNo differences.\n")
    same = sum(ch.kind == "same" for ch in c.changes)
    parts.append(f"\n{same} variant(s) identical (same machine code and resources).\n")
    return "".join(parts)


def bisect_markdown(res: BisectResult, command: str = "") -> str:
    """The steps as a Markdown table and the conclusion, for a bug report."""
    rows = [[s.version, "yes" if s.holds else "no", s.summary] for s in res.steps]
    out = [f"## tileprobe bisect: `{res.prop}`\n\n", table_md(["tileiras", "holds", "variant"], rows),
           f"\nFirst release where it changed: **{res.first_bad}** (last like the good one: {res.last_good}).\n"]
    if command:
        out.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    return "".join(out)


def doctor_markdown(findings: Sequence[Finding]) -> str:
    """Findings as a Markdown list, to paste into a bug report."""
    lines = ["## tileprobe doctor", ""]
    for f in findings:
        lines.append(f"- **{f.level}** {f.topic}: {f.message}" + (f"  \n  fix: {f.fix}" if f.fix else ""))
    return "\n".join(lines) + "\n"


def run_markdown(records: Sequence[VariantRecord], environment: dict, command: str = "") -> str:
    """The audit's Markdown, then a run table (status, times, error, occupancy) and the best hints."""
    parts = [audit_markdown(records, environment, command=command), "\n## tileprobe run\n\n"]
    gpu = environment.get("gpu") or {}
    if gpu:
        parts.append(f"GPU: {gpu.get('name')} ({gpu.get('sm')}), driver {gpu.get('driver')}, SM clock "
                     f"{gpu.get('clock_sm_mhz')} MHz (max {gpu.get('clock_max_sm_mhz')}), "
                     f"memory clock {gpu.get('clock_mem_mhz')} MHz\n\n")
    rows = [[r.kernel, r.arch, " ".join(f"{k}={v}" for k, v in r.case.items()) or "-",
             " ".join(f"{k}={v}" for k, v in r.hints.items()) or "-", *[fn(r) for _, fn in RUN_COLUMNS],
             ((r.run or {}).get("error") or "").splitlines()[0][:120] if (r.run or {}).get("error") else ""]
            for r in records if r.run]
    parts.append(table_md(["kernel", "arch", "case", "hints", *[h for h, _ in RUN_COLUMNS], "error"], rows))
    best = best_lines(records)
    if best:
        parts.append("\n" + "\n".join(f"- {b}" for b in best) + "\n")
    return "".join(parts)

"""Helpers shared by the renderers: grouping, labels and number formats."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..schema import VariantRecord

#: Column order for a variant row: (header, function of a record).
VERDICT_MARK = {"honoured": "honoured", "partial": "partial", "ignored": "IGNORED", "infeasible": "infeasible"}


def fmt_kv(d: dict) -> str:
    """``{"a": 1, "b": True}`` → ``a=1 b=True``; empty → ``-``."""
    return " ".join(f"{k}={v}" for k, v in d.items()) or "-"


def fmt_int(v) -> str:
    return "-" if v is None else f"{v:,}"


def group_tables(records: Iterable[VariantRecord]) -> dict[tuple[str, str], list[VariantRecord]]:
    """Records per (kernel, tileiras build), in the order given."""
    out: dict[tuple[str, str], list[VariantRecord]] = defaultdict(list)
    for r in records:
        out[(r.kernel, r.tileiras)].append(r)
    return out


def verdict_text(r: VariantRecord, long: bool = False) -> str:
    """``occupancy honoured`` …; the reasons too when ``long``."""
    if not r.ok:
        return r.status
    parts = []
    for hint, v in r.verdicts.items():
        text = f"{hint} {VERDICT_MARK.get(v['status'], v['status'])}"
        parts.append(f"{text}: {v['reason']}" if long else text)
    return "; ".join(parts) or "-"


def row_cells(r: VariantRecord) -> list[str]:
    """Cells of one variant row: arch, case, hints, threads, registers, shared B, stack B, CTAs/SM, limiter."""
    if not r.ok:
        return [r.arch, fmt_kv(r.case), fmt_kv(r.hints), "-", "-", "-", "-", "-", r.status]
    return [r.arch, fmt_kv(r.case), fmt_kv(r.hints), str(r.threads), str(r.registers), fmt_int(r.shared_bytes),
            fmt_int(r.stack_bytes), str(r.ctas_per_sm), r.limiter or "-"]


HEADERS = ["arch", "case", "hints", "threads", "regs", "shared B", "stack B", "CTAs/SM", "limiter"]

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


def group_tables(records: Iterable[VariantRecord]) -> dict[tuple[str, str, str], list[VariantRecord]]:
    """Records per (kernel, tileiras build, arch), in the order given."""
    out: dict[tuple[str, str, str], list[VariantRecord]] = defaultdict(list)
    for r in records:
        out[(r.kernel, r.tileiras, r.arch)].append(r)
    return out


def hint_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Hint names that have a verdict in any of ``rows``, in first-seen order."""
    names: dict[str, None] = {}
    for r in rows:
        for h in list(r.hints) + list(r.verdicts):
            names.setdefault(h, None)
    return list(names)


def short_build(tileiras: str) -> str:
    """``Cuda compilation tools, release 13.4, V13.4.92`` → ``tileiras 13.4.92``."""
    import re
    m = re.search(r"V(\d+\.\d+\.\d+)", tileiras or "")
    return f"tileiras {m.group(1)}" if m else (tileiras or "tileiras ?")


def verdict_text(r: VariantRecord, long: bool = False) -> str:
    """``occupancy honoured`` …; the reasons too when ``long``."""
    if not r.ok:
        return r.status
    parts = []
    for hint, v in r.verdicts.items():
        text = f"{hint} {VERDICT_MARK.get(v['status'], v['status'])}"
        parts.append(f"{text}: {v['reason']}" if long else text)
    return "; ".join(parts) or "-"


def case_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Case constant names in ``rows``, in first-seen order."""
    names: dict[str, None] = {}
    for r in rows:
        for c in r.case:
            names.setdefault(c, None)
    return list(names)


def row_cells(r: VariantRecord, hints: list[str], cases: list[str] | None = None) -> list[str]:
    """Cells of one variant row: each case constant, each hint's value, threads, registers, shared B, stack B,
    CTAs/SM, limiter."""
    cases = list(r.case) if cases is None else cases
    lead = [str(r.case.get(c, "-")) for c in cases] + [str(r.hints.get(h, "-")) for h in hints]
    if not r.ok:
        return lead + ["-", "-", "-", "-", "-", "-"]
    return lead + [str(r.threads), str(r.registers), fmt_int(r.shared_bytes), fmt_int(r.stack_bytes),
                   str(r.ctas_per_sm), LIMITER_SHORT.get(r.limiter, r.limiter or "-")]


#: Short limiter names for narrow tables.
LIMITER_SHORT = {"threads": "threads", "registers": "regs", "shared_memory": "smem", "cta_slots": "slots"}


def headers(hints: list[str], cases: list[str]) -> list[str]:
    """Column headers matching :func:`row_cells`."""
    return [*cases, *hints, "threads", "regs", "smem B", "stack B", "CTAs/SM", "limiter"]


def verdict_cells(r: VariantRecord, hints: list[str]) -> list[str]:
    """One verdict status per hint column (``-`` when none)."""
    if not r.ok:
        return [r.status] + ["-"] * (len(hints) - 1) if hints else []
    return [r.verdicts.get(h, {}).get("status", "-") for h in hints]


NUMERIC = {"threads", "regs", "smem B", "stack B", "CTAs/SM"}

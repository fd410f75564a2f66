"""Helpers shared by the renderers: grouping, labels and number formats."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..schema import NOTEWORTHY_STATUSES, VariantRecord

#: How a verdict status reads in text (``ignored`` in capitals: the hint fell short and did nothing).
VERDICT_MARK = {"honoured": "honoured", "met": "met", "partial": "partial", "ignored": "IGNORED",
                "infeasible": "infeasible", "changed": "changed", "unchanged": "unchanged", "baseline": "baseline"}


def noteworthy(v: dict) -> bool:
    """Whether brief output shows this verdict's reason (:data:`tileprobe.schema.NOTEWORTHY_STATUSES`)."""
    return v.get("status") in NOTEWORTHY_STATUSES


def fmt_kv(d: dict) -> str:
    """``{"a": 1, "b": True}`` → ``a=1 b=True``; empty → ``-``."""
    return " ".join(f"{k}={v}" for k, v in d.items()) or "-"


def fmt_value(v) -> str:
    """A case or hint value for a table cell: tuples as ``128×128×32``."""
    if isinstance(v, (tuple, list)):
        return "×".join(map(str, v))
    return str(v)


def fmt_int(v) -> str:
    return "-" if v is None else f"{v:,}"


def group_tables(records: Iterable[VariantRecord]) -> dict[tuple[str, str, str], list[VariantRecord]]:
    """Records per (kernel, tileiras build, arch), in the order given."""
    out: dict[tuple[str, str, str], list[VariantRecord]] = defaultdict(list)
    for r in records:
        out[(r.kernel, r.tileiras, r.arch)].append(r)
    return out


def _first_seen(names_per_row: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(n for names in names_per_row for n in names))


def hint_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Kernel hints set by any of ``rows`` (their values get a column), in first-seen order."""
    return _first_seen(r.hints for r in rows)


def verdict_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Hints and per-load knobs with a verdict in any of ``rows`` (a verdict column each), first-seen order."""
    return _first_seen([*r.hints, *r.verdicts] for r in rows)


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
    return _first_seen(r.case for r in rows)


def row_cells(r: VariantRecord, hints: list[str], cases: list[str] | None = None) -> list[str]:
    """Cells of one variant row: each case constant, each hint's value, threads, registers, shared B, stack B,
    CTAs/SM, limiter."""
    cases = list(r.case) if cases is None else cases
    lead = [fmt_value(r.case.get(c, "-")) for c in cases] + [fmt_value(r.hints.get(h, "-")) for h in hints]
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


def tma_data_ops(r: VariantRecord) -> int | None:
    """TMA / bulk-copy data instructions in the variant's SASS (None without SASS traits)."""
    from ..verdict import tma_data_ops as count
    return count(r)


def sass_columns(rows: Iterable[VariantRecord]) -> list[tuple[str, callable]]:
    """Extra (header, cell) columns shown when the data exists: cluster dims, spills (LDL/STL), TMA, matrix ops."""
    rows = list(rows)
    cols: list[tuple[str, callable]] = []
    if any(r.cluster_dims for r in rows):
        cols.append(("cluster", lambda r: "×".join(map(str, r.cluster_dims)) if r.cluster_dims else "-"))
    if any(r.sass and "spill_loads" in r.sass for r in rows):
        cols.append(("LDL/STL", lambda r: f"{r.sass['spill_loads']}/{r.sass['spill_stores']}"
                     if r.sass and "spill_loads" in r.sass else "-"))
        cols.append(("TMA", lambda r: str(tma_data_ops(r)) if tma_data_ops(r) is not None else "-"))
        cols.append(("MMA", lambda r: ",".join(r.sass.get("matrix_families", [])) or "-"
                     if r.sass and "matrix" in r.sass else "-"))
    return cols


def remark_lines(r: VariantRecord, limit: int = 6) -> list[str]:
    """Short lines for the compiler remarks that explain something (failures, misses, hint defaults skipped)."""
    out = []
    for rem in r.remarks:
        if rem.get("kind") in ("Passed",) and "Failed" not in rem.get("name", ""):
            continue
        loc = f"line {rem['line']}: " if rem.get("line") else ""
        detail = "; ".join(d.split("): ", 1)[-1] for d in rem.get("details", [])[:2])
        out.append(f"{loc}{rem.get('message') or rem.get('name')}" + (f" ({detail})" if detail else ""))
    return out[:limit]


def ptx_text(r: VariantRecord) -> str:
    """The compiler's decision as the embedded PTX states it: ``.maxnreg 168 .reqntid 384 .minnctapersm 1``."""
    p = r.ptx or {}
    parts = []
    if p.get("maxnreg"):
        parts.append(f".maxnreg {p['maxnreg']}")
    if p.get("reqntid"):
        parts.append(".reqntid " + ",".join(map(str, p["reqntid"])))
    if p.get("minnctapersm"):
        parts.append(f".minnctapersm {p['minnctapersm']}")
    return " ".join(parts)

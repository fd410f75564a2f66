"""Tables that fit a terminal: which columns an audit table shows at a given width, and what it says it left out.

Every audit table keeps the columns that identify a row (case constants, hint values) and the numbers that decide
residency: registers, shared memory, CTAs/SM, and the verdicts. When the table is wider than the console, these
steps run in order until it fits, and each leaves a note under the table:

1. verdicts are abbreviated (``hon``, ``IGN`` …) and a legend lists the abbreviations used;
2. case constants with one value in every row move into the title (``· TILE=128×128``);
3. the other columns are dropped, least important first (:data:`DROP_ORDER`), and the note names them — never one
   that shows a problem in some row (:attr:`Column.problem`: spill counts where a variant spills);
4. hint names in headers are shortened (``occ`` for occupancy, :data:`HEADER_ABBREV`) and a line says so;
5. if the kept columns alone are still too wide, :attr:`Fitted.folded` is set and the audit prints one line per
   row instead of a table (``tileprobe.report.terminal.print_fitted_table``): nothing is cut.

``--wide`` skips all of it. Widths are measured on the plain cell text as rich draws it: each cell padded by one
space either side, one rule between columns and at both edges.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

#: Verdict abbreviations for narrow tables (legend under the table).
VERDICT_ABBREV = {"honoured": "hon", "met": "met", "unverified": "unver", "partial": "part", "ignored": "IGN",
                  "infeasible": "infeas",
                  "changed": "chg", "unchanged": "unch", "baseline": "base", "compile_error": "error",
                  "compiler_crash": "crash", "timeout": "timeout", "probe_error": "probe"}

#: Columns that may be dropped, least important first (headers as :func:`tileprobe.report.common.headers` and the
#: SASS and run columns name them). ``stack B`` goes early when LDL/STL (the spill counts it hints at) is shown.
#: ``reg pool`` goes first when no row says HANG RISK (with one, the terminal never drops it: ``audit_columns``):
#: a column of ``ok`` tells less than the MMA and TMA columns. ``instr`` (code size) goes before all of them.
DROP_ORDER = ("instr", "reg pool", "MMA", "TMA", "stack B", "IQR %", "rel err", "threads", "drv CTAs/SM", "limiter",
              "cluster", "LDL/STL", "status")


#: Hint names shortened in headers when a table is still too wide after dropping columns (step 4; a note says so).
HEADER_ABBREV = {"occupancy": "occ", "num_ctas": "ctas", "opt_level": "opt", "num_worker_warps": "warps",
                 "latency": "lat", "allow_tma": "tma"}


@dataclass
class Column:
    """One table column: header (may hold a line break), plain cells, alignment, and whether it may be dropped."""
    header: str
    cells: list[str]
    justify: Literal["left", "right"] = "left"
    keep: bool = True
    kind: str = "data"            # "id" (case/hint value), "data", "verdict"
    styled: list[str] | None = None   # cells with rich markup (verdict colours), same text as ``cells``
    problem: bool = False         # it shows a problem (spills) in some row: never dropped

    @property
    def width(self) -> int:
        """Columns the column takes, padding included: the longest header line or cell + 2."""
        lines = [*self.header.split("\n"), *self.cells]
        return max((len(s) for s in lines), default=0) + 2


def table_width(columns: Sequence[Column]) -> int:
    """Width of a rich table of ``columns`` with a rule at both edges and between columns."""
    return sum(c.width for c in columns) + len(columns) + 1


@dataclass
class Fitted:
    """What :func:`fit_columns` decided: the columns to draw, the extra title text, and the notes to print."""
    columns: list[Column]
    title_extra: str = ""
    abbreviated: bool = False
    dropped: list[str] = field(default_factory=list)
    folded: bool = False
    legend: list[str] = field(default_factory=list)
    short_headers: list[str] = field(default_factory=list)   # "occ occupancy" for each header shortened


def _abbreviate(columns: list[Column]) -> list[str]:
    used = []
    for c in columns:
        if c.kind != "verdict":
            continue
        for i, text in enumerate(c.cells):
            short = VERDICT_ABBREV.get(text, text)
            if short != text and f"{short} {text}" not in used:
                used.append(f"{short} {text}")
            c.cells[i] = short
            if c.styled is not None:
                c.styled[i] = c.styled[i].replace(f"]{text}[", f"]{short}[") if "[" in c.styled[i] else short
    return used


def _shorten_headers(columns: list[Column]) -> list[str]:
    """Replace the hint names of :data:`HEADER_ABBREV` in headers (``occupancy`` → ``occ``, ``occupancy\nverdict``
    → ``occ\nverdict``); returns ``"occ occupancy"`` for each name shortened."""
    used = []
    for c in columns:
        lines = c.header.split("\n")
        short = HEADER_ABBREV.get(lines[0])
        if short and c.kind in ("id", "verdict"):
            c.header = "\n".join([short, *lines[1:]])
            if f"{short} {lines[0]}" not in used:
                used.append(f"{short} {lines[0]}")
    return used


def _fold_constants(columns: list[Column]) -> tuple[list[Column], str]:
    keep, extra = [], []
    for c in columns:
        if c.kind == "id" and len(c.cells) > 1 and len(set(c.cells)) == 1 and not c.header.endswith("verdict"):
            extra.append(f"{c.header}={c.cells[0]}")
        else:
            keep.append(c)
    return keep, " ".join(extra)


def fit_columns(columns: list[Column], width: int, wide: bool = False,
                rank: Callable[[Column], int] | None = None) -> Fitted:
    """Choose what to show of ``columns`` within ``width`` terminal columns (see module doc)."""
    out = Fitted(list(columns))
    if wide or table_width(out.columns) <= width:
        return out
    out.legend = _abbreviate(out.columns)
    out.abbreviated = bool(out.legend)
    if table_width(out.columns) > width:
        folded, extra = _fold_constants(out.columns)
        if extra:
            out.columns, out.title_extra = folded, extra
    order = {h: i for i, h in enumerate(DROP_ORDER)}
    droppable = sorted((c for c in out.columns if not c.keep and not c.problem),
                       key=rank or (lambda c: order.get(c.header, -1)))
    for c in droppable:
        if table_width(out.columns) <= width:
            break
        out.columns.remove(c)
        out.dropped.append(c.header.replace("\n", " "))
    if table_width(out.columns) > width:
        out.short_headers = _shorten_headers(out.columns)
    out.folded = table_width(out.columns) > width
    return out

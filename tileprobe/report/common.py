"""Helpers shared by the renderers: grouping, labels and number formats."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tileprobe.jsonrecord import from_dict
from tileprobe.model.arch import NOT_SOURCED
from tileprobe.model.sass import tma_data_ops
from tileprobe.records import PtxFacts, SassFacts
from tileprobe.schema import NOTEWORTHY_STATUSES, VariantRecord, VariantRun, Verdict, short_build

#: How a verdict status reads in text (``ignored`` in capitals: the hint fell short and did nothing).
VERDICT_MARK = {"honoured": "honoured", "met": "met", "unverified": "unverified", "partial": "partial", "ignored": "IGNORED",
                "infeasible": "infeasible", "changed": "changed", "unchanged": "unchanged", "baseline": "baseline"}


def noteworthy(v: Verdict) -> bool:
    """Whether brief output shows this verdict's reason (:data:`tileprobe.schema.NOTEWORTHY_STATUSES`)."""
    return v.status in NOTEWORTHY_STATUSES


def fmt_kv(d: dict) -> str:
    """``{"a": 1, "TILE": [64, 64]}`` → ``a=1 TILE=64×64`` (values as the tables print them, which ``--where``
    reads back); empty → ``-``."""
    return " ".join(f"{k}={fmt_value(v)}" for k, v in d.items()) or "-"


#: What each verdict status means, in the README's rule order (legends of the Markdown and HTML reports).
VERDICT_MEANING = {
    "infeasible": "the goal cannot be met on this arch for the CTA the compiler built",
    "met": "the goal is met and the reference (the hint-less build, else the lowest value) met it too: "
           "the hint bought nothing toward it",
    "honoured": "the goal is met and the reference falls short of it: the hint reached the goal",
    "unverified": "met or not by a rule no driver has checked (the 1 KB reserve reading, a GPC layout)",
    "partial": "short of the goal but moved toward it against the reference (decided before code identity)",
    "ignored": "short of the goal and nothing moved toward it against the reference",
    "changed": "no goal; the code or resources differ from the baseline's",
    "unchanged": "no goal; the same code and resources as the baseline",
    "baseline": "no goal; the value the others are compared with",
}


def verdict_legend(statuses: Iterable[str | None]) -> list[str]:
    """``status: meaning`` for each of ``statuses`` that :data:`VERDICT_MEANING` knows, in its order."""
    present = set(statuses)
    return [f"{s}: {m}" for s, m in VERDICT_MEANING.items() if s in present]


#: The one name of the build without a hint (the probe's value None) in every table, label and plot.
HINTLESS = "hint-less"


def variant_label(r: VariantRecord) -> str:
    """``GATHER=True TILE=64×64 occupancy=2`` (case constants, then hints; ``declared hints`` when none): a valid
    ``--where`` once the spaces are commas, except that a hint the variant leaves to the kernel reads as the table
    cell does, ``occupancy=16 (declared)`` or ``occupancy=hint-less`` (:func:`hint_cell`; it read
    ``occupancy=None`` beside a table saying ``16 (declared)``)."""
    if not (r.case or r.hints):
        return "declared hints"
    hints = " ".join(f"{k}={fmt_value(v) if v is not None else _left_to_kernel(r, k)}" for k, v in r.hints.items())
    return " ".join(x for x in (fmt_kv(r.case) if r.case else "", hints) if x)


def _left_to_kernel(r: VariantRecord, hint: str) -> str:
    """A hint the variant leaves to the kernel, for a label: as its table cell (``16 (declared)``, ``hint-less``),
    also ``hint-less`` when the record never resolved it (a variant that failed first)."""
    cell = hint_cell(r, hint)
    return HINTLESS if cell == "-" else cell


def fmt_value(v) -> str:
    """A case or hint value for a table cell: tuples as ``128×128×32`` (:func:`tileprobe.select.format_value`, which
    ``--where`` reads back)."""
    from tileprobe.select import format_value
    return format_value(v)


def fmt_int(v) -> str:
    """An integer with thousands separators (``100,484``); ``-`` for None."""
    return "-" if v is None else f"{v:,}"


def group_tables(records: Iterable[VariantRecord]) -> dict[tuple[str, str, str], list[VariantRecord]]:
    """Records per (kernel, tileiras build, arch), in the order given except that within a case the hint-less
    build of a hint comes before its values (:func:`hintless_first`): one order in every report."""
    out: dict[tuple[str, str, str], list[VariantRecord]] = defaultdict(list)
    for r in records:
        out[(r.kernel, r.tileiras, r.arch)].append(r)
    return {key: hintless_first(rows) for key, rows in out.items()}


def hintless_first(rows: Sequence[VariantRecord]) -> list[VariantRecord]:
    """``rows`` grouped by case (first-seen order) and, within a case, ordered hint by hint (first-seen order of
    the hints) with the hint-less value (None: :data:`HINTLESS`) first and the set values in first-seen order: the
    audit's order (cases × hint values) kept, with the hint-less build first wherever a store or file put it."""
    def first_seen(values) -> dict[str, int]:
        return {v: i for i, v in enumerate(dict.fromkeys(values))}
    cases = first_seen(fmt_kv(r.case) for r in rows)
    hints = list(dict.fromkeys(h for r in rows for h in r.hints))
    seen = {h: first_seen(repr(r.hints.get(h)) for r in rows if r.hints.get(h) is not None) for h in hints}

    def key(r: VariantRecord) -> tuple:
        return (cases[fmt_kv(r.case)],
                *((0, 0) if r.hints.get(h) is None else (1, seen[h][repr(r.hints.get(h))]) for h in hints))
    return sorted(rows, key=key)


def _first_seen(names_per_row: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(n for names in names_per_row for n in names))


def hint_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Kernel hints set by any of ``rows`` (their values get a column), in first-seen order."""
    return _first_seen(r.hints for r in rows)


def verdict_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Hints and per-load knobs with a verdict in any of ``rows`` (a verdict column each), first-seen order."""
    return _first_seen([*r.hints, *r.verdicts] for r in rows)


def failure_of(r: VariantRecord) -> str:
    """The failure class of a failed record (``r.failure``; its status for a record without one)."""
    return r.failure or r.status


def failure_counts(rows: Iterable[VariantRecord]) -> str:
    """``12 unsupported_feature, 1 timeout``: ``rows`` counted by failure class (:func:`failure_of`), most first."""
    return ", ".join(f"{n} {c}" for c, n in Counter(failure_of(r) for r in rows).most_common())


#: The reason line of a variant whose SASS nvdisasm could not read (terminal and Markdown).
SASS_UNREAD = "SASS not read (LDL/STL, TMA and MMA shown as -)"


def failure_brief(r: VariantRecord, width: int = 100) -> str:
    """``compiler_crash: tileiras was killed by SIGSEGV (signal 11)``: the class and the first line of the
    compiler's message, cut to ``width`` characters."""
    first = next((ln.strip() for ln in (r.message or r.error or "").splitlines() if ln.strip()), "")
    if len(first) > width:
        first = first[:width - 1] + "…"
    return f"{failure_of(r)}: {first}" if first else failure_of(r)


def failure_groups(rows: Iterable[VariantRecord]) -> list[list[VariantRecord]]:
    """The failed ``rows`` grouped by (failure class, message), in first-seen order: one note per group, so 216
    variants refused for one reason print one message, not 216."""
    groups: dict[tuple, list[VariantRecord]] = {}
    for r in rows:
        if not r.ok:
            groups.setdefault((failure_of(r), r.message or r.error), []).append(r)
    return list(groups.values())


def group_label(group: Sequence[VariantRecord], shown: int = 3) -> str:
    """One row's label, or ``4 variants (a, b, c, +1 more)``."""
    if len(group) == 1:
        return variant_label(group[0])
    names = ", ".join(variant_label(r) for r in group[:shown]) + (f", +{len(group) - shown} more"
                                                              if len(group) > shown else "")
    return f"{len(group)} variants ({names})"


def verdict_text(r: VariantRecord, long: bool = False) -> str:
    """``occupancy honoured`` …; the reasons too when ``long``; a failed variant's class (and message)."""
    if not r.ok:
        return failure_brief(r) if long else failure_of(r)
    parts = []
    for hint, v in r.verdicts.items():
        text = f"{hint} {VERDICT_MARK.get(v.status or '', v.status)}"
        parts.append(f"{text}: {v.reason}" if long else text)
    return "; ".join(parts) or "-"


def case_columns(rows: Iterable[VariantRecord]) -> list[str]:
    """Case constant names in ``rows``, in first-seen order."""
    return _first_seen(r.case for r in rows)


def hint_cell(r: VariantRecord, hint: str) -> str:
    """A hint's value in a table: the variant's value; when the variant leaves it to the kernel (``None`` or not
    set), the value in force, e.g. ``16 (declared)`` (``ByTarget`` resolved for the arch), or ``hint-less`` when
    the kernel declares none either (:data:`HINTLESS`: the one name every report gives that build)."""
    value = r.hints.get(hint)
    if value is not None:
        return fmt_value(value)
    if hint not in r.effective_hints:   # not known (a variant that failed before its hints were resolved)
        return "-"
    declared = r.effective_hints[hint]
    return HINTLESS if declared is None else f"{fmt_value(declared)} (declared)"


def row_cells(r: VariantRecord, hints: list[str], cases: list[str] | None = None) -> list[str]:
    """Cells of one variant row: each case constant, each hint's value, threads, registers, shared B, stack B,
    CTAs/SM, limiter."""
    cases = list(r.case) if cases is None else cases
    lead = [fmt_value(r.case.get(c, "-")) for c in cases] + [hint_cell(r, h) for h in hints]
    if not r.ok:
        return lead + ["-", "-", "-", "-", "-", "-"]
    ctas = str(r.ctas_per_sm) if r.ctas_per_sm is not None else "not sourced" if r.arch in NOT_SOURCED else "-"
    return lead + [str(r.threads), str(r.registers), fmt_int(r.shared_bytes), fmt_int(r.stack_bytes),
                   ctas, LIMITER_SHORT.get(r.limiter or "", r.limiter or "-")]


#: Short limiter names for narrow tables.
LIMITER_SHORT = {"threads": "threads", "registers": "regs", "shared_memory": "smem", "cta_slots": "slots"}


#: The shared-memory column: the cubin's ``.nv.shared.<kernel>`` size (= cuobjdump SHARED; on sm_90 it includes the
#: 1 KB per-CTA reserve, FIELD_NOTES), the same figure the verdict reasons quote.
SMEM_HEADER = "smem B (cubin)"


def smem_column_note(arch: str) -> str:
    """What the shared-memory column holds on ``arch``, once under its first table: whether the cubin's size
    includes the 1 KB per-CTA reserve, and what that rests on (``ArchLimits.smem_reserve_rule``: driver-checked on
    sm_90, the cubin's layout elsewhere); '' for an arch without limits."""
    from tileprobe.model.arch import get_arch
    try:
        rule = get_arch(arch).smem_reserve_rule
    except Exception:
        return ""
    if not rule:
        return ""
    basis = rule.split(":")[0].replace(", not driver-checked", "").split(" 20")[0]   # no date: it fits 100 columns
    how = "includes the 1 KB per-CTA reserve" if "includes the 1 KB reserve" in rule else \
        "excludes the 1 KB per-CTA reserve, added on top"
    return f"{SMEM_HEADER} on {arch}: {how} ({basis})"


def headers(hints: list[str], cases: list[str]) -> list[str]:
    """Column headers matching :func:`row_cells`."""
    return [*cases, *hints, "threads", "regs", SMEM_HEADER, "stack B", "CTAs/SM", "limiter"]


def verdict_cells(r: VariantRecord, hints: list[str]) -> list[str]:
    """One verdict status per hint column (``-`` when none)."""
    if not r.ok:
        return [failure_of(r)] + ["-"] * (len(hints) - 1) if hints else []
    return [r.verdict_status(h, "-") or "-" for h in hints]


NUMERIC = {"threads", "regs", SMEM_HEADER, "stack B", "CTAs/SM"}
#: Columns a fitted terminal table never drops (besides case constants, hint values and verdicts).
KEPT = {"regs", SMEM_HEADER, "CTAs/SM", "median µs"}


#: The register-pool column: the setmaxnreg balance verdict, ``HANG RISK`` spelled out loud.
POOL_HEADER = "reg pool"
POOL_CELLS = {"hang_risk": "HANG RISK", "pool_ok": "ok", "unknown": "unknown", "none": "-"}


def pool_cell(r: VariantRecord) -> str:
    """The register-pool cell of a record: ``HANG RISK`` / ``ok`` / ``unknown``, ``-`` without setmaxnreg,
    ``not read`` when the SASS was not read (nothing was checked: not the same as no setmaxnreg)."""
    if not r.ok:
        return "-"
    if r.pool_verdict is None:
        return "not read"
    return POOL_CELLS.get(r.pool_verdict, str(r.pool_verdict))


def pool_line(r: VariantRecord) -> str | None:
    """``register pool hang_risk: <reason>`` for a record whose SASS has setmaxnreg, else None."""
    if not r.ok or r.pool_verdict in (None, "none"):
        return None
    return f"register pool {r.pool_verdict}: {r.pool_reason}"


def compile_timeout_line(r: VariantRecord) -> str | None:
    """``compile 42.9 s exceeds the program's compiler timeout of 5 s by 37.9 s`` for a record checked against a
    compiler timeout whose compile exceeds it, else None."""
    ct = r.compile_timeout
    if not r.exceeds_compile_timeout or ct is None or ct.margin_s is None:
        return None
    return (f"compile {ct.compile_s:.2f} s exceeds the program's compiler timeout of {ct.timeout_s:g} s "
            f"({ct.source or ''}) by {-ct.margin_s:.2f} s on this machine (compiles run side by side, so "
            "a quieter machine may be faster): a program that compiles it under that timeout on a cold cache may "
            "fail with TileCompilerTimeoutError")


def sass_columns(rows: Iterable[VariantRecord]) -> list[tuple[str, Callable[[VariantRecord], str]]]:
    """Extra (header, cell) columns shown when the data exists: cluster dims, code size (``instr``: SASS
    instructions, NOPs excluded), spills (LDL/STL), TMA, matrix ops, and the register-pool verdict when any variant's SASS has setmaxnreg (:data:`POOL_HEADER`)."""
    rows = list(rows)
    cols: list[tuple[str, Callable[[VariantRecord], str]]] = []
    if any(r.cluster_dims for r in rows):
        cols.append(("cluster", lambda r: "×".join(map(str, r.cluster_dims)) if r.cluster_dims else "-"))
    if any(r.sass and "instructions" in r.sass for r in rows):     # code size: SASS instructions, NOPs excluded
        cols.append(("instr", lambda r: fmt_int(r.sass.instructions) if r.sass and "instructions" in r.sass
                     else "-"))
    if any(r.sass and "spill_loads" in r.sass for r in rows):
        cols.append(("LDL/STL", lambda r: f"{r.sass.spill_loads}/{r.sass.spill_stores}"
                     if r.sass and "spill_loads" in r.sass else "-"))
        cols.append(("TMA", lambda r: str(tma_data_ops(r)) if tma_data_ops(r) is not None else "-"))
        cols.append(("MMA", lambda r: ",".join(r.sass.matrix_families or []) or "-"
                     if r.sass and "matrix" in r.sass else "-"))
    if any(r.ok and r.pool_verdict not in (None, "none") for r in rows):
        cols.append((POOL_HEADER, pool_cell))
    return cols


@dataclass(frozen=True)
class Remark:
    """One compiler remark of a record (``VariantRecord.remarks``: the JSON objects
    :func:`tileprobe.model.remarks.parse_remarks` makes): its ``kind`` (``Passed``, ``Missed``, ``Analysis``,
    ``Failure``), the remark's ``name``, the compiler ``pass_name`` that made it (the JSON's ``pass``), its
    ``message``, the source ``line`` and the ``details`` lines. Values as the JSON holds them (a stored remark is not
    re-checked); a missing key reads ``""`` (``line``: None, ``details``: none)."""
    kind: Any = ""
    name: Any = ""
    message: Any = ""
    line: Any = None
    details: Any = ()
    pass_name: Any = ""

    @classmethod
    def of(cls, d: Any) -> Remark | None:
        """The remark of a record's JSON object, or None for an item that is no object (a damaged file)."""
        if not isinstance(d, dict):
            return None
        return replace(from_dict(cls, d, where="a compiler remark"), pass_name=d.get("pass", ""))


def remarks_of(r: VariantRecord) -> list[Remark]:
    """The compiler remarks of ``r`` as records (items that are no objects left out)."""
    return [rem for rem in map(Remark.of, r.remarks or []) if rem is not None]


def remark_lines(r: VariantRecord, limit: int | None = 6) -> list[str]:
    """Short lines for the compiler remarks that explain something (failures, misses, hint defaults skipped)."""
    out = []
    for rem in remarks_of(r):
        if rem.kind in ("Passed",) and "Failed" not in rem.name:
            continue
        loc = f"line {rem.line}: " if rem.line else ""
        detail = "; ".join(d.split("): ", 1)[-1] for d in list(rem.details or ())[:2])
        out.append(f"{loc}{rem.message or rem.name}" + (f" ({detail})" if detail else ""))
    return out[:limit] if limit is not None else out


def ptx_text(r: VariantRecord) -> str:
    """The compiler's decision as the embedded PTX states it: ``.maxnreg 168 .reqntid 384 .minnctapersm 1``."""
    p = r.ptx if r.ptx is not None else PtxFacts()
    parts = []
    if p.maxnreg:
        parts.append(f".maxnreg {p.maxnreg}")
    if p.reqntid:
        parts.append(".reqntid " + ",".join(map(str, p.reqntid)))
    if p.minnctapersm:
        parts.append(f".minnctapersm {p.minnctapersm}")
    return " ".join(parts)


def record_side(r: VariantRecord | None) -> str:
    """One side of a compare row: ``384×168r 100,484B 1/SM occupancy honoured; 26.0 µs``, with ``171/122 LDL/STL``
    after the CTAs/SM when the SASS shows spills (``-`` when absent, the status when it failed)."""
    if r is None:
        return "-"
    if not r.ok:
        return failure_brief(r, 80)
    v = ", ".join(f"{h} {x.status}" for h, x in r.verdicts.items())
    run = r.run or VariantRun()
    t = f"; {run.median_us:.1f} µs" if run.median_us and run.status in (None, "ok") else ""
    if run.status not in (None, "ok"):
        t = f"; run {run.status}"
    sass = r.sass or SassFacts()
    spill = f" {sass.spill_loads}/{sass.spill_stores} LDL/STL" if sass.spill_loads or sass.spill_stores else ""
    hang = " HANG RISK" if r.hang_risk else ""
    return f"{r.threads}×{r.registers}r {r.shared_bytes:,}B {r.ctas_per_sm}/SM{spill}{hang} {v}{t}"


# --- GPU runs -----------------------------------------------------------------------------------------------------

def run_label(r: VariantRecord) -> str:
    """``kernel arch NAME=VALUE …`` for run progress and warnings."""
    return " ".join([r.kernel, r.arch, *(f"{k}={fmt_value(v)}" for k, v in [*r.case.items(), *r.hints.items()])])


def run_cell(r: VariantRecord) -> str:
    """``ok 26.0 µs ±1.2%`` / ``wrong (rel err 0.31)`` / ``hang`` … for one record (``-`` when it did not run)."""
    run = r.run or VariantRun()
    st = run.status
    if st is None:
        return "-"
    t = f" {run.median_us:,.1f} µs ±{run.spread_pct or 0:.1f}%" if run.median_us is not None else ""
    if st == "wrong" and run.rel_err is not None:
        return f"wrong (rel err {run.rel_err:.3g}){t}"
    return f"{st}{t}"


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _occ_cell(run: VariantRun) -> str:
    d = run.driver_ctas_per_sm
    if d is None:
        return "-"
    return f"{d}" if run.occupancy_agrees is not False else f"{d} ≠ {run.static_ctas_per_sm}"


#: (header, cell function) pairs for the run columns beside the audit's.
RUN_COLUMNS = [
    ("status", lambda r: (r.run or VariantRun()).status or "-"),
    ("median µs", lambda r: _fmt((r.run or VariantRun()).median_us, ",.1f")),
    ("IQR %", lambda r: _fmt((r.run or VariantRun()).spread_pct, ".1f")),
    ("rel err", lambda r: _fmt((r.run or VariantRun()).rel_err, ".2g")),
    ("drv CTAs/SM", lambda r: _occ_cell(r.run or VariantRun())),
]


@dataclass
class BestHints:
    """One kernel case's fastest correct hints under one compiler (an item of
    :func:`tileprobe.run.session.best_hints`): the best variant's hints and median (µs), the default variant's, and
    the speed-up of the best over the default (None without a default variant)."""
    kernel: str
    arch: str
    case: dict | None = None
    tileiras: str | None = ""
    best_hints: dict | None = None
    best_us: float = 0.0
    default_hints: dict | None = None
    default_us: float | None = None
    speedup: float | None = None


def best_lines(best: Iterable[dict]) -> list[str]:
    """One line per kernel case and compiler: the compiler version, the fastest correct hint and its speed-up over
    the default variant. ``best``: the dicts of :func:`tileprobe.run.session.best_hints`
    (:meth:`tileprobe.run.session.RunResult.best_hints`), read into :class:`BestHints`.

    Raises:
        tileprobe.jsonrecord.FieldError: an item that does not fit :class:`BestHints` (named with its field)."""
    out = []
    for b in (from_dict(BestHints, d, where="the best hints") for d in best):
        case = fmt_kv(b.case) if b.case else ""
        hints = fmt_kv(b.best_hints) if b.best_hints else "declared hints"
        head = " ".join(x for x in (b.kernel, b.arch, short_build(b.tileiras or ""), case) if x)
        line = f"{head}: best {hints} {b.best_us:,.1f} µs"
        if b.speedup is not None:
            dflt = fmt_kv(b.default_hints) if b.default_hints else "declared hints"
            line += f", {b.speedup:.2f}× vs default {dflt} {b.default_us or 0.0:,.1f} µs"
        out.append(line)
    return out


def table_md(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table. Cells are text: pipes, brackets and a tag's ``<`` are escaped (a case
    value ``![x](http://…)`` is not an image, ``<img>`` not HTML) and line breaks become spaces."""
    def esc(c) -> str:
        text = str(c).replace("\\", "\\\\").replace("\n", " ")
        for ch in "|[]":
            text = text.replace(ch, "\\" + ch)
        return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)     # a tag's start; "p < 0.001" stays as it is
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def change_group_line(group) -> str:
    """One line for a :class:`~tileprobe.analyses.compare.ChangeGroup`: the topic, how many variants, and for a
    numeric topic the range of B − A and the values (``instructions: 60 variants, +4 … +16 (203 → 219 the most
    common)``); the same text in the terminal, Markdown and HTML reports."""
    n = len(group.changes)
    text = f"{group.topic}: {n} variant{'s' if n != 1 else ''}"
    if group.deltas:
        lo, hi = min(group.deltas), max(group.deltas)
        span = f"{lo:+,}" if lo == hi else f"{lo:+,} … {hi:+,}"
        pairs = Counter(zip(group.before, group.after))
        (a, b), k = pairs.most_common(1)[0]
        common = f"{a:,} → {b:,}" + (f" in {k}" if k != n else "")
        text += f", {span} ({common})"
    return text

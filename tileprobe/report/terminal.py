"""Terminal output (rich): the audit's tables (one per kernel, compiler build and arch, like the occupancy report's
log), and the tables and reports of compare (:mod:`tileprobe.report.compare_text`, re-exported), doctor, gate, history, toolchain list and run."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from rich.console import Console
from rich.table import Table

from tileprobe.analyses.results import Finding, GateResult, History
from tileprobe.model.arch import NOT_SOURCED
from tileprobe.report.common import (
    KEPT,
    NUMERIC,
    POOL_CELLS,
    POOL_HEADER,
    RUN_COLUMNS,
    SASS_UNREAD,
    VERDICT_MARK,
    best_lines,
    case_columns,
    compile_timeout_line,
    failure_counts,
    failure_groups,
    failure_of,
    fmt_int,
    fmt_kv,
    fmt_value,
    group_label,
    group_tables,
    headers,
    hint_columns,
    noteworthy,
    pool_line,
    ptx_text,
    remark_lines,
    row_cells,
    run_label,
    sass_columns,
    short_build,
    smem_column_note,
    variant_label,
    verdict_cells,
    verdict_columns,
)
from tileprobe.report.compare_text import render_compare, render_compare_table  # noqa: F401 (callers import them here)
from tileprobe.report.fit import DROP_ORDER, Column, Fitted, fit_columns, table_width
from tileprobe.report.text import cell, escape, say
from tileprobe.schema import VariantRecord, VariantRun, Verdict
from tileprobe.select import format_value
from tileprobe.toolchain import NVCC_PKG, NVVM_PKG

_STYLE = {"honoured": "green", "met": "cyan", "unverified": "yellow", "partial": "yellow", "ignored": "bold red", "infeasible": "magenta",
          "changed": "blue", "unchanged": "dim", "baseline": "dim",
          "ok": "green", "wrong": "bold red", "hang": "bold red", "crash": "bold red",
          "compiler_crash": "bold red", "timeout": "bold red", "compile_error": "red", "unsupported_target": "yellow",
          "unsupported_feature": "yellow", "broken_environment": "bold red", "probe_error": "red"}


def _styled(text: str):
    """A verdict or status cell, coloured when it is one tileprobe knows (stored text is never markup)."""
    return cell(text, _STYLE.get(text, ""))


def render_audit(records: Iterable[VariantRecord], console: Console | None = None, reasons: bool = True,
                 extra_columns: list[tuple[str, Callable[[VariantRecord], str]]] | None = None,
                 brief: bool = False, wide: bool = False, advice: Sequence[str] = ()) -> None:
    """Print one table per (kernel, tileiras, arch); below it every verdict's reason (only the noteworthy ones —
    unverified, partial, ignored, infeasible, unchanged — when ``brief``), the compiler's PTX decision and remarks, each failure's
    message and repro command; then, with ``reasons``, the ``advice`` lines (:meth:`AuditResult.advice
    <tileprobe.audit.pipeline.AuditResult.advice>`). ``extra_columns``: (header, cell function) pairs, e.g. run times.

    Each table fits the console's width (:mod:`tileprobe.report.fit`: registers, shared memory, CTAs/SM and the
    verdicts always shown and never truncated; verdicts abbreviated with a legend, then other columns dropped
    with a note); ``wide`` shows every column at full width whatever the console's width.
    """
    console = console or Console()
    records = list(records)
    explained: set[str] = set()        # archs whose shared-memory column was explained under a table
    for (kernel, tileiras, arch), rows in group_tables(records).items():
        title = f"{kernel} · {arch} · {short_build(tileiras)}"
        print_fitted_table(console, title, audit_columns(rows, extra_columns), wide)
        spills = spill_line(rows)
        if spills:
            say(console, f"  {spills}")
        smem = smem_column_note(arch) if arch not in explained and any(r.ok for r in rows) else ""
        if smem:
            say(console, f"  {smem}")
            explained.add(arch)
        if arch in NOT_SOURCED:
            say(console, f"  {NOT_SOURCED[arch]}")
        if reasons:
            _print_reasons(console, rows, brief)
        console.print()
    if reasons and advice:
        say(console, "advice:")
        for line in advice:
            say(console, f"  {line}")


def audit_columns(rows: list[VariantRecord],
                  extra_columns: list[tuple[str, Callable[[VariantRecord], str]]] | None = None) -> list[Column]:
    """The columns of one audit table (:class:`~tileprobe.report.fit.Column`): case constants and hint values
    (kept), resources (registers, shared memory and CTAs/SM kept), SASS and ``extra_columns``, then verdicts."""
    hints, cases, vcols = hint_columns(rows), case_columns(rows), verdict_columns(rows)
    names = headers(hints, cases)
    body = [row_cells(r, hints, cases) for r in rows]
    cols = []
    for i, h in enumerate(names):
        ident = i < len(cases) + len(hints)
        cols.append(Column(h.replace(" (", "\n("), [b[i] for b in body], "right" if h in NUMERIC else "left",
                           keep=ident or h in KEPT, kind="id" if ident else "data"))
    has_ldl = any(name == "LDL/STL" for name, _ in sass_columns(rows))
    for name, fn in sass_columns(rows) + list(extra_columns or []):
        cells = [fn(r) for r in rows]
        hang = name == POOL_HEADER and POOL_CELLS["hang_risk"] in cells   # a predicted hang is never dropped
        cols.append(Column(name, cells, "right", keep=name in KEPT or hang, problem=_shows_spills(name, cells, has_ldl)))
    for c in cols:       # stack B carries the spill hint when the SASS was not read
        if c.header == "stack B" and not has_ldl:
            c.problem = any(x not in ("0", "-", "") for x in c.cells)
    for j, h in enumerate(vcols):
        cells = [verdict_cells(r, vcols)[j] for r in rows]
        cols.append(Column("verdict" if len(vcols) == 1 else f"{h}\nverdict", cells, kind="verdict",
                           styled=[_styled(c) for c in cells]))
    return cols


def _shows_spills(name: str, cells: list[str], has_ldl: bool) -> bool:
    """Whether column ``name`` shows a spill in some row (such a column is never dropped to fit)."""
    if name == "LDL/STL":
        return any(c not in ("0/0", "-", "") for c in cells)
    return False


def _sass_key(r: VariantRecord, key: str):
    """The SASS fact ``key`` of ``r`` (``spill_loads`` …), or ``"-"`` when its SASS summary has no such key."""
    return getattr(r.sass, key) if r.sass and key in r.sass else "-"


def spill_line(rows: Sequence[VariantRecord]) -> str:
    """``spills: 7 of 8 variants (146–6,640 LDL, 188–6,600 STL)`` from the SASS, else from the stack frame
    (``stack: 3 of 8 variants use a stack frame (176–8,720 B)``); "" when none spills."""
    ok = [r for r in rows if r.ok]
    counted = [(r, r.sass) for r in ok if r.sass is not None and "spill_loads" in r.sass]
    spill = [(r, sass) for r, sass in counted if sass.spill_loads or sass.spill_stores]
    if spill:
        ldl = [sass.spill_loads or 0 for _, sass in spill]
        stl = [sass.spill_stores or 0 for _, sass in spill]
        span = lambda xs: f"{min(xs):,}" if min(xs) == max(xs) else f"{min(xs):,}–{max(xs):,}"
        return f"spills: {len(spill)} of {len(ok)} variants ({span(ldl)} LDL, {span(stl)} STL)"
    if not counted:
        stack = [r.stack_bytes for r in ok if r.stack_bytes]
        if stack:
            return (f"stack: {len(stack)} of {len(ok)} variants use a stack frame ({min(stack):,}–{max(stack):,} B; "
                    "SASS not read: spills or a local array)")
    return ""


def print_fitted_table(console: Console, title: str, columns: list[Column], wide: bool = False,
                       more: str = "--wide shows every column", rank: Callable[[Column], int] | None = None) -> Fitted:
    """Draw ``columns`` as a rich table fitted to the console (:func:`~tileprobe.report.fit.fit_columns`), then
    the notes: the verdict legend and what was left out (``more``: how to see it). Narrower than the kept columns
    alone (about 60 columns for one hint), one line per row instead: a table there would squeeze columns to
    nothing. ``rank``: the order columns are dropped in (default: the audit's, :data:`~tileprobe.report.fit.DROP_ORDER`).
    Returns what :func:`~tileprobe.report.fit.fit_columns` decided."""
    has_ldl = any(c.header == "LDL/STL" for c in columns)
    order = {h: i for i, h in enumerate(DROP_ORDER)}

    def audit_rank(c: Column) -> int:   # without spill counts, stack B is the spill hint: keep it longer
        return order.get("LDL/STL", 0) if c.header == "stack B" and not has_ldl else order.get(c.header, -1)
    fitted = fit_columns(columns, console.width, wide=wide, rank=rank or audit_rank)
    # The title is a line of its own: a rich table title is wrapped to the table's width and padded with spaces.
    say(console, title + (f" · {fitted.title_extra}" if fitted.title_extra else ""))
    if fitted.folded:
        _print_rows(console, fitted.columns)
    else:
        _print_table_of(console, fitted.columns, wide)
    notes = []
    if fitted.folded:
        notes.append(f"one line per variant: a table does not fit {console.width} columns")
    if fitted.legend:
        notes.append("verdicts: " + " · ".join(fitted.legend))
    if fitted.dropped:
        notes.append(f"not shown at {console.width} columns: {', '.join(fitted.dropped)} ({more})")
    if fitted.short_headers:
        notes.append("headers: " + " · ".join(fitted.short_headers))
    for n in notes:
        say(console, n)
    return fitted


def _print_table_of(console: Console, columns: list[Column], wide: bool) -> None:
    """The rich table of ``columns`` (each at least as wide as its widest cell); ``wide``: never cropped."""
    table = Table()
    for c in columns:
        table.add_column(cell(c.header), justify=c.justify, no_wrap=True, overflow="fold", min_width=c.width - 2)
    for i in range(len(columns[0].cells) if columns else 0):
        table.add_row(*(cell(c.cells[i]) if c.styled is None else c.styled[i] for c in columns))
    needed = table_width(columns)
    if wide and needed > console.width:
        saved, console.width = console.width, needed
        try:
            console.print(table, crop=False)
        finally:
            console.width = saved
    else:
        console.print(table)


def _print_rows(console: Console, columns: list[Column]) -> None:
    """Each row as one line, ``occ=2 · regs 128 · smem B (cubin) 113,176 · …`` (the terminal wraps it)."""
    for i in range(len(columns[0].cells) if columns else 0):
        parts = [f"{c.header}={c.cells[i]}" if c.kind == "id" else f"{c.header.replace(chr(10), ' ')} {c.cells[i]}"
                 for c in columns]
        say(console, "  " + " · ".join(parts))


def summary_lines(records: Iterable[VariantRecord]) -> list[str]:
    """One line per (kernel, arch, compiler): ``w4a16_gemm sm_120 tileiras 13.4.92: 12 variants, regs 128–255,
    CTAs/SM 1–2, 6 spill; occupancy 4 met, 3 honoured, 5 IGNORED`` (spill: LDL/STL in the SASS, or a stack frame
    when the SASS was not read; failures counted when any)."""
    groups = group_tables(records)
    width = max((len(k) for k, _, _ in groups), default=0)
    out = []
    for (kernel, tileiras, arch), rows in groups.items():
        ok = [r for r in rows if r.ok]

        def span(field):
            vals = sorted({getattr(r, field) for r in ok if getattr(r, field) is not None})
            return "-" if not vals else str(vals[0]) if len(vals) == 1 else f"{vals[0]}–{vals[-1]}"
        spills = sum(1 for r in ok if (r.sass and (r.sass.spill_loads or r.sass.spill_stores))
                     or (not (r.sass and "spill_loads" in r.sass) and r.stack_bytes))
        parts = [f"{len(rows)} variant{'s' if len(rows) != 1 else ''}"]
        if len(rows) > len(ok):
            parts.append(f"{len(rows) - len(ok)} failed ({failure_counts(r for r in rows if not r.ok)})")
        if ok:
            parts += [f"regs {span('registers')}", f"CTAs/SM {span('ctas_per_sm')}", f"{spills} spilling"]
            unread = sum(1 for r in ok if r.sass and "error" in r.sass)
            if unread:
                parts.append(f"{unread} with SASS unread (nvdisasm failed: spills from the stack frame)")
        counts = []
        for hint in verdict_columns(ok):
            n: dict[str, int] = {}
            for r in ok:
                st = r.verdict_status(hint)
                if st:
                    n[st] = n.get(st, 0) + 1
            counts.append(f"{hint} " + ", ".join(f"{k} {VERDICT_MARK.get(st, st)}" for st, k in n.items()))
        line = f"{kernel:<{width}}  {arch:<6} {short_build(tileiras)}: {', '.join(parts)}"
        out.append(line + ("; " + "; ".join(counts) if counts else ""))
    return out


def render_summary(records: Iterable[VariantRecord], console: Console) -> None:
    """``tileprobe audit --summary``: one line per kernel, arch and compiler (:func:`summary_lines`)."""
    for line in summary_lines(records):
        say(console, line)


def print_failures(console: Console, rows: Iterable[VariantRecord]) -> None:
    """Each failure once per (class, message) group: the variants, the class, the compiler's own words, the fix
    and the command that repeats it."""
    for group in failure_groups(rows):
        r = group[0]
        say(console, f"  {group_label(group)}: {failure_of(r)}")
        for line in (r.message or r.error or "").strip().splitlines():
            say(console, f"    {line}")
        if r.fix:
            say(console, f"    fix: {r.fix}")
        if r.repro:
            say(console, f"    repeat: {r.repro}")


def _repeated_notes(reasons, min_len: int = 80) -> list[str]:
    """Parentheticals of at least ``min_len`` characters that recur in two or more reasons of a table (
    the H200 layout's caveat, 90 characters, repeated in every cluster line made reasons of 1,779 characters): each is
    printed once as a numbered note and the reasons say ``[n]``."""
    seen: dict[str, int] = {}
    for text in reasons:
        for m in set(re.findall(r"\([^()]{%d,}\)" % min_len, text)):
            seen[m] = seen.get(m, 0) + 1
    return [t for t, n in seen.items() if n >= 2]


def _one_value_hints(rows: list[VariantRecord]) -> dict[str, tuple[str, str, int]]:
    """Hints audited at one value in this table whose every verdict is the same "nothing shows the hint changed
    the code" (such a hint got a line per variant): hint → (value, status, variants), said once."""
    ok = [r for r in rows if r.ok]
    out = {}
    for hint in dict.fromkeys(h for r in ok for h in r.verdicts):
        values = {repr(r.hints.get(hint)) for r in ok}
        verdicts = [r.verdicts.get(hint) or Verdict(None) for r in ok]
        statuses = {v.status for v in verdicts}
        if (len(ok) > 1 and len(values) == 1 and len(statuses) == 1 and None not in statuses
                and all("nothing shows the hint changed the code" in v.reason for v in verdicts)):
            value = ok[0].hints.get(hint)
            status = statuses.pop()
            assert status is not None   # None not in statuses (the condition above)
            out[hint] = (format_value(value) if value is not None else "declared", status, len(ok))
    return out


def _remark_sets(rows: list[VariantRecord]) -> tuple[frozenset, dict]:
    """(the remarks every compiled variant of the table carries, {id(record): its other remarks}), each a set of
    :func:`remark_lines` (tileiras varies their order, so a list made the same remarks look new)."""
    sets = {id(r): frozenset(remark_lines(r, limit=None)) for r in rows if r.ok}
    common = frozenset.intersection(*sets.values()) if len(sets) > 1 else frozenset()
    return common, {k: v - common for k, v in sets.items()}


def _remark_order(line: str) -> tuple:
    head = line.split(":", 1)[0]
    return (int(head[5:]) if head.startswith("line ") and head[5:].isdigit() else 0, line)


def _print_reasons(console: Console, rows: list[VariantRecord], brief: bool) -> None:
    shown_remarks: set = set()
    print_failures(console, rows)
    silent = _one_value_hints(rows)
    notes = _repeated_notes(r.verdicts[h].reason for r in rows if r.ok for h in r.verdicts if h not in silent)
    for hint, (value, status, n) in silent.items():
        say(console, f"  {hint}: one value audited ({value}): {status} for all {n} variants; nothing shows the hint "
                     "changed the code")
    for i, text in enumerate(notes, start=1):
        if not brief or any(noteworthy(v) and text in v.reason for r in rows for v in r.verdicts.values()):
            say(console, f"  [{i}] {text[1:-1]}")
    common, own = _remark_sets(rows)
    if common and not brief:
        say(console, f"  remarks of all {len(own)} variants:")
        for line in sorted(common, key=_remark_order)[:6]:
            say(console, f"    remark: {line}")
    for r in rows:
        label = variant_label(r)
        if not r.ok:
            continue
        said = []              # lines of this variant printed so far: a PTX or remark line goes under its own label

        def line(text: str) -> None:
            say(console, f"  {label}: {text}")
            said.append(text)
        for hint, v in r.verdicts.items():
            if hint in silent:
                continue
            if not brief or noteworthy(v):
                reason = v.reason
                for i, text in enumerate(notes, start=1):
                    reason = reason.replace(text, f"[{i}]")
                line(f"{hint} {v.status}: {reason}")
        if r.sass and "error" in r.sass:
            line(f"{SASS_UNREAD}: {r.sass.error}")
        pool = pool_line(r)
        if pool and (r.hang_risk or not brief):
            line(pool)
        slow = compile_timeout_line(r)
        if slow:
            line(slow)
        if r.deterministic is False:
            if not said:
                say(console, f"  {label}:")
                said.append(label)
            say(console, f"    tileiras gave {len(r.code_hashes)} different machine codes over repeated compiles of "
                         "this variant; verdicts treat any shared code as the same")
        if brief:
            continue
        ptx = ptx_text(r)
        rem = own.get(id(r), frozenset())
        rem = rem if rem and rem not in shown_remarks else frozenset()
        if (ptx or rem) and not said:      # no reason line of its own: the label first, never under another's
            say(console, f"  {label}:")
        if ptx:
            say(console, f"    PTX: {ptx}")
        if rem:
            shown_remarks.add(rem)
            for text in sorted(rem, key=_remark_order)[:6]:
                say(console, f"    remark: {text}")


# --- doctor -------------------------------------------------------------------------------------------------------

_LEVEL_MARK = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "error": "[bold red]✗[/]"}


def render_doctor(findings: Sequence[Finding], console: Console) -> None:
    """Print findings: a mark (✓ ! ✗), the topic, the message, and the fix on its own line."""
    for f in findings:
        console.print(f"{_LEVEL_MARK[f.level]} [bold]{escape(f.topic)}[/]: {escape(f.message)}", soft_wrap=True,
                      highlight=False)      # a long finding is one line: the terminal wraps it, a pipe keeps it whole
        if f.fix:
            console.print(f"    [cyan]fix[/]: {escape(f.fix)}", soft_wrap=True, highlight=False)


# --- gate ---------------------------------------------------------------------------------------------------------

def gate_text(g: GateResult) -> str:
    """The gate's report: one block per expectation (ok / FAIL / CANNOT CHECK) with a line per failing variant."""
    lines = []
    for e in g.expectations:
        fails = [f for f in g.failures if f.expectation == e.text]
        hard = [f for f in fails if not f.unchecked]
        if not fails:
            lines.append(f"ok    {e.text} ({len(g.records)} variant(s))")
            continue
        tag = "FAIL " if hard or not g.allow_unchecked else "SKIP "
        what = "cannot be checked" if not hard else f"{len(hard)} of {len(g.records)} variant(s)"
        lines.append(f"{tag} {e.text}: {what}")
        lines.extend(f"      {f}" for f in fails)
    failed = {f.expectation for f in g.failures if not f.unchecked or not g.allow_unchecked}
    if g.passed:
        lines.append(f"gate passed: {len(g.expectations)} expectation(s) on {len(g.records)} variant(s)")
    else:
        lines.append(f"gate FAILED: {len(failed)} of {len(g.expectations)} expectation(s) not met on "
                     f"{len(g.records)} variant(s)")
    return "\n".join(lines)


# --- history ------------------------------------------------------------------------------------------------------

#: History columns that move into the table's title when every row has one value (``compiles · kernel rms_norm``),
#: and columns never wrapped (a time or an id cut in two is unreadable).
_TITLE_COLUMNS = ("kernel", "arch", "compiler", "GPU", "driver", "host")
_WHOLE_COLUMNS = ("id", "when (UTC)", "regs", "CTAs/SM", "µs", "s", "variants", "status")


def _print_table(console: Console, title: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """``title`` on a line of its own (with the columns that hold one value in every row), then a table whose
    other text cells wrap (fold) rather than end in "…" when narrow."""
    rows = [list(r) for r in rows]
    same = [j for j, h in enumerate(headers) if h in _TITLE_COLUMNS and len(rows) > 1
            and len({r[j] for r in rows}) == 1 and rows[0][j]]
    say(console, " · ".join([title, *(f"{headers[j]} {rows[0][j]}" for j in same)]))
    keep = [j for j in range(len(headers)) if j not in same]
    t = Table()
    for j in keep:
        t.add_column(cell(headers[j]), overflow="fold", no_wrap=headers[j] in _WHOLE_COLUMNS)
    for row in rows:
        t.add_row(*(cell(row[j]) for j in keep))
    console.print(t)


def _when(created: str) -> str:
    """A stored ISO time as the history tables show it: ``2026-12-01 21:04:48`` (UTC)."""
    return created[:19].replace("T", " ")


def _num(v, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def render_history(hist: History, console: Console, limit: int | None = None) -> None:
    """The store's path, then tables of its audits, compiles and (when any) runs; with ``limit``, a note that
    only the newest ``limit`` of each are listed."""
    say(console, f"store: {hist.store}")
    _print_table(console, "audits", ("id", "when (UTC)", "host", "variants", "s", "command"),
                 [(str(a.id), _when(a.created or ""), a.host or "", str(a.n_variants),
                   f"{a.wall_s or 0:.1f}", a.command_line or "") for a in hist.audits])
    for line in hist.pruned:     # the counts above are of what is still stored
        say(console, f"{line}: the variants counted are those still stored")
    pool = any(c.reg_pool not in (None, "none") for c in hist.compiles)   # shown when any has one
    _print_table(console, "compiles", ("when (UTC)", "kernel", "case", "hints", "arch", "compiler", "status", "regs",
                                       "CTAs/SM", "compile s", *((POOL_HEADER,) if pool else ()), "µs"),
                 [(_when(c.created or ""), c.kernel or "", fmt_kv(c.case or {}), fmt_kv(c.hints or {}), c.arch or "",
                   short_build(c.tileiras) if c.tileiras else "", c.failure or c.status or "", _num(c.registers),
                   _num(c.ctas_per_sm), _num(c.compile_s, ".2f"),
                   *((POOL_CELLS.get(c.reg_pool or "none", str(c.reg_pool)),) if pool else ()),
                   _num(c.median_us, ".1f")) for c in hist.compiles])
    if hist.runs:
        _print_table(console, "runs", ("when (UTC)", "kernel", "case", "hints", "arch", "GPU", "driver", "status",
                                       "µs"),
                     [(_when(r.created or ""), r.kernel or "", fmt_kv(r.case or {}), fmt_kv(r.hints or {}), r.arch or "",
                       r.gpu or "", r.driver or "", r.status or "", _num(r.median_us, ".1f"))
                      for r in hist.runs])
    if limit:
        say(console, f"(newest {limit} of each; --limit 0 lists all, --json/--csv export all)")


# --- toolchain list -----------------------------------------------------------------------------------------------

def render_toolchains(toolchains: Sequence, console: Console, empty_hint: str) -> None:
    """A table of :class:`~tileprobe.toolchain.Toolchain` s (version, source, nvcc and nvvm pins, path), or
    ``empty_hint`` when there are none."""
    if not toolchains:
        say(console, empty_hint)
        return
    table = Table("version", "source", "nvcc", "nvvm")
    table.add_column("path", overflow="fold")
    for t in toolchains:
        src = "pip (this environment)" if t.source == "pip" else t.source
        table.add_row(*map(cell, (t.version, src, t.pins.get(NVCC_PKG, ""), t.pins.get(NVVM_PKG, ""), t.root)))
    console.print(table)


# --- run ----------------------------------------------------------------------------------------------------------

def render_run(records: Sequence[VariantRecord], console: Console, wide: bool = False, advice: Sequence[str] = (),
               best: Sequence[dict] = ()) -> None:
    """The audit tables with the run columns (:data:`~tileprobe.report.common.RUN_COLUMNS`) and the ``advice``
    lines, each failed run's first error line and every timing warning, then the best hint per case (``best``: the
    dicts of :meth:`RunResult.best_hints <tileprobe.run.session.RunResult.best_hints>`; ``advice``: its
    :meth:`~tileprobe.run.session.RunResult.advice`)."""
    render_audit(records, console, extra_columns=RUN_COLUMNS, wide=wide, advice=advice)
    for r in records:
        run = r.run or VariantRun()
        if run.status not in (None, "ok") or run.warnings:
            msg = (run.error or "").strip().splitlines()
            if run.status != "ok":
                say(console, f"  {run_label(r)}: {run.status}: {msg[0] if msg else ''}")
            for w in run.warnings or []:
                say(console, f"  {run_label(r)}: warning: {w}")
    for line in best_lines(best):
        say(console, line)


# --- machine code --------------------------------------------------------------------------------------------------

def _variant_name(r: VariantRecord) -> str:
    return " ".join([r.kernel, r.arch, *(f"{k}={fmt_value(v)}" for k, v in [*r.case.items(), *r.hints.items()]),
                     "·", short_build(r.tileiras)])


def render_sass_diff(diff, a: VariantRecord, b: VariantRecord, console: Console, full: bool = False) -> None:
    """Two variants' machine code (a :class:`~tileprobe.model.sass_diff.SassDiff`): resources and instruction
    classes side by side, a one-line verdict, then the alignment (register names normalised)."""
    say(console, f"A: {_variant_name(a)}\nB: {_variant_name(b)}")
    t = Table(title_justify="left")
    for h in ("", "A", "B"):
        t.add_column(h, justify="left" if not h else "right")
    spills = [f"{_sass_key(r, 'spill_loads')}/{_sass_key(r, 'spill_stores')}" for r in (a, b)]
    rows: list[tuple[str, object, object]] = [
        ("threads", a.threads, b.threads), ("registers", a.registers, b.registers),
        ("shared B (cubin)", fmt_int(a.shared_bytes), fmt_int(b.shared_bytes)),
        ("stack B", a.stack_bytes, b.stack_bytes), ("CTAs/SM", a.ctas_per_sm, b.ctas_per_sm),
        ("LDL/STL", spills[0], spills[1]), ("instructions", f"{len(diff.a):,}", f"{len(diff.b):,}")]
    rows += [(f"  {name}", f"{x:,}", f"{y:,}") for name, x, y in diff.classes]
    for name, x, y in rows:
        t.add_row(name, str(x), str(y), style=None if str(x) == str(y) else "bold")
    console.print(t)
    if diff.same_bytes:
        verdict = "machine code: the same instructions, register for register"
    elif diff.identical:
        verdict = "machine code: the same instructions with other register numbers (a renaming, nothing else)"
    else:
        verdict = (f"machine code differs: {diff.changed:,} instruction(s) outside the aligned runs "
                   "(registers normalised; - only in A, + only in B)")
    say(console, verdict)
    if not diff.identical:
        for line in diff.lines(limit=10 ** 9 if full else 200):
            say(console, line)

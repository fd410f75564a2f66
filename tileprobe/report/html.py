"""``tileprobe report``: one self-contained HTML file of audit (and run) records.

Per kernel: the audit table of each compiler build (the terminal table's columns, a verdict per hint with its
reason as a tooltip and, below the table, as text), plots of registers per thread, shared memory per CTA and CTAs
per SM against each hint that varies (x axis: the hint's values; one line per compiler version and case; verdicts
as coloured markers; for ``occupancy`` the asked CTAs/SM as a dashed line), median time against the hint when
records carry ``run.median_us``, and the compiler remarks (de-duplicated, with the variants that gave each).

Self-contained: inline CSS, plots as inline SVG drawn by matplotlib (Agg canvas, ``svg.fonttype`` none so text
stays text), no script and no external URL. Everything from users or compilers (kernel and case names, messages,
remarks) goes through :func:`html.escape`; matplotlib escapes the text it writes into the SVG, and ``$`` is escaped
so labels are never read as mathtext. matplotlib is optional (extra ``report``): without it the report has the
tables and says how to get the plots.
"""
from __future__ import annotations

import datetime
import html
import io
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from tileprobe.analyses.results import CompilerSteps, group_changes
from tileprobe.errors import TileprobeError
from tileprobe.report.common import (
    HINTLESS,
    NUMERIC,
    VERDICT_MARK,
    VERDICT_MEANING,
    case_columns,
    change_group_line,
    failure_groups,
    failure_of,
    fmt_kv,
    fmt_value,
    group_label,
    group_tables,
    headers,
    hint_columns,
    noteworthy,
    remarks_of,
    row_cells,
    sass_columns,
    short_build,
    variant_label,
    verdict_columns,
    verdict_legend,
)
from tileprobe.report.text import clean
from tileprobe.schema import VariantRecord, VariantRun, build_order

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: verdict → (colour, matplotlib marker); the table cells use the same colours.
VERDICT_STYLE = {"honoured": ("#1a7f37", "o"), "met": ("#0969da", "v"), "unverified": ("#9a6700", "P"),
                 "partial": ("#bf8700", "D"),
                 "ignored": ("#cf222e", "X"), "infeasible": ("#8250df", "s"), "changed": ("#1b7c83", "^"),
                 "unchanged": ("#6e7781", "x"), "baseline": ("#8c959f", ".")}
#: One colour per series, Okabe & Ito's colour-blind-safe palette ("Color Universal Design", 2008), yellow last
#: (weakest on white); past 8 series the colours repeat with another dash pattern.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"]
_LINESTYLES = ["-", "--", ":", "-."]   # per round of the palette; older compilers dashed
_METRICS = [("registers", "registers / thread", 1), ("shared_bytes", "shared memory / CTA (KiB)", 1024),
            ("ctas_per_sm", "CTAs / SM", 1)]
_COUNTS = {"registers", "ctas_per_sm"}     # integer ticks
NO_MATPLOTLIB = ("Plots need matplotlib, which is not installed: pip install 'tileprobe[report]' "
                 "(or pip install matplotlib) and run tileprobe report again.")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1400px;
color:#1f2328;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:20px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
h3{font-size:15px;margin:20px 0 6px}.meta{color:#59636e;margin:0 0 12px}.meta td{padding:0 12px 0 0;vertical-align:top}
table.audit{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0}
table.audit th,table.audit td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
table.audit th{background:#f6f8fa}table.audit td.num{text-align:right}tr.failed td{background:#fff1f0}
.v{display:inline-block;border-radius:10px;padding:0 8px;margin:1px 2px;color:#fff;font-size:12px;cursor:help}
.v-honoured{background:#1a7f37}.v-met{background:#0969da}.v-unverified{background:#9a6700}.v-partial{background:#bf8700}.v-ignored{background:#cf222e}
.v-infeasible{background:#8250df}.v-changed{background:#1b7c83}.v-unchanged{background:#6e7781}
.v-baseline{background:#8c959f}.v-failed{background:#59636e}.v-hang_risk{background:#cf222e}.v-unknown{background:#6e7781}
ul.reasons{margin:4px 0 10px;padding-left:20px;color:#393f46}ul.reasons li{margin:2px 0}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f6f8fa;padding:1px 4px;border-radius:4px}
pre{padding:6px;white-space:pre-wrap;overflow-wrap:anywhere}
.arch{display:flex;flex-wrap:wrap;gap:0 24px;align-items:flex-start}
.arch>.tables{flex:1 1 640px;min-width:0;overflow-x:auto}.arch>.plots{flex:1 1 560px;min-width:0}
figure{margin:10px 0 18px}figure svg{max-width:100%;height:auto}figcaption{color:#59636e;font-size:13px}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
nav ul{columns:3;padding-left:20px}details summary{cursor:pointer;font-weight:600;margin:8px 0}
tr.regression td:first-child{color:#cf222e;font-weight:700}tr.improvement td:first-child{color:#1a7f37;font-weight:700}
"""


def _e(value) -> str:
    return html.escape(clean("" if value is None else str(value)), quote=True)   # no ESC/BEL in the file either


def _sort_value(v):
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, repr(v))


def _x(r: VariantRecord, hint: str):
    """Where a variant sits on a plot's x axis: its value of ``hint`` (set, else declared), or :data:`HINTLESS`."""
    v = r.hint(hint)
    return HINTLESS if v is None else v


def _x_order(v) -> tuple:
    """The x axis' order, the tables' too: the hint-less build first, then the values (:func:`_sort_value`)."""
    return (0, (0, 0, "")) if v == HINTLESS else (1, _sort_value(v))


def _median_us(r: VariantRecord):
    run = r.run or VariantRun()
    value = run.median_us
    return value if isinstance(value, (int, float)) and run.status in (None, "ok") else None


# --- tables -------------------------------------------------------------------------------------------------------

def _verdict_cells(r: VariantRecord, hints: list[str]) -> list[str]:
    """One cell per hint column: the verdict as a coloured badge whose tooltip is its reason."""
    if not r.ok:
        first = (r.message or r.error or "").strip().splitlines()
        badge = f'<span class="v v-failed" title="{_e(first[0] if first else r.status)}">{_e(failure_of(r))}</span>'
        return [badge] + ["-"] * (len(hints) - 1) if hints else []
    cells = []
    for h in hints:
        v = r.verdicts.get(h)
        if v is None:
            cells.append("-")
            continue
        status = v.status
        cells.append(f'<span class="v v-{_e(status)}" title="{_e(v.reason)}">'
                     f'{_e(VERDICT_MARK.get(status or "", status))}</span>')
    return cells


def _label(r: VariantRecord) -> str:
    return variant_label(r)


def audit_table(rows: Sequence[VariantRecord]) -> str:
    """The audit table of one (kernel, compiler, arch) — the terminal table's columns with the SASS ones (cluster,
    LDL/STL, TMA, MMA), a verdict badge per hint (reason as tooltip) — and below it the reason of every noteworthy
    verdict (partial, ignored, infeasible, unchanged) and each distinct failure message once
    (:func:`failure_notes`)."""
    hints, cases = hint_columns(rows), case_columns(rows)
    timed = any(_median_us(r) is not None for r in rows)
    extra = sass_columns(rows)
    cols = headers(hints, cases) + [name for name, _ in extra] + (["median µs"] if timed else [])
    judged = verdict_columns(rows) or ["-"]   # hints and knobs; none: still one verdict column (failures show there)
    verdict_heads = [f"{h} verdict" if len(judged) > 1 else "verdict" for h in judged]
    out = ['<table class="audit"><thead><tr>', *(f"<th>{_e(h)}</th>" for h in cols + verdict_heads),
           "</tr></thead><tbody>"]
    numeric = NUMERIC | {"median µs", "LDL/STL", "TMA"}
    for r in rows:
        values = row_cells(r, hints, cases) + [fn(r) for _, fn in extra]
        if timed:
            t = _median_us(r)
            values.append("-" if t is None else f"{t:,.1f}")
        cells = [f'<td class="num">{_e(c)}</td>' if h in numeric else f"<td>{_e(c)}</td>"
                 for h, c in zip(cols, values)]
        cells += [f"<td>{c}</td>" for c in _verdict_cells(r, judged)]
        out.append(("<tr>" if r.ok else '<tr class="failed">') + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    notes = failure_notes(rows)
    notes += [f'<li><b>{_e(_label(r))}</b>: <span class="v v-{_e(r.pool_verdict)}">register pool '
              f'{_e(r.pool_verdict)}</span> {_e(r.pool_reason)}</li>'
              for r in rows if r.hang_risk or r.pool_verdict == "unknown"]
    for r in rows:
        for hint, v in (r.verdicts.items() if r.ok else ()):
            if noteworthy(v):
                notes.append(f'<li><b>{_e(_label(r))}</b>: <span class="v v-{_e(v.status)}">{_e(hint)} '
                             f'{_e(v.status)}</span> {_e(v.reason)}</li>')
    if notes:
        out.append('<ul class="reasons">' + "".join(notes) + "</ul>")
    return "".join(out)


def failure_notes(rows: Sequence[VariantRecord]) -> list[str]:
    """One ``<li>`` per distinct (failure class, message) among the failed variants
    (:func:`tileprobe.report.common.failure_groups`): the variants that gave it, the class, the compiler's message
    once, the fix and the first one's repeat command."""
    out = []
    for group in failure_groups(rows):
        r = group[0]
        fix = f"<br>fix: {_e(r.fix)}" if r.fix else ""
        repro = f"<br>repeat: <code>{_e(r.repro)}</code>" if r.repro else ""
        out.append(f"<li><b>{_e(group_label(group))}</b>: {_e(failure_of(r))}"
                   f"<pre>{_e((r.message or r.error or '').strip())}</pre>{fix}{repro}</li>")
    return out


def remarks_section(rows: Sequence[VariantRecord]) -> str:
    """Compiler remarks of these records, each distinct remark once with the variants that gave it."""
    seen: dict[tuple, list[str]] = defaultdict(list)
    for r in rows:
        for m in remarks_of(r):
            key = (m.kind, m.name or m.pass_name, m.message, tuple(m.details or ()), m.line)
            seen[key].append(f"{short_build(r.tileiras)} {r.arch} {_label(r)}")
    if not seen:
        return ""
    order = {"Failure": 0, "Missed": 1, "Analysis": 2, "Passed": 3}
    items = sorted(seen.items(), key=lambda kv: (order.get(kv[0][0], 4), -len(kv[1]), kv[0][1]))
    body = "".join(
        f"<tr><td>{_e(kind)}</td><td>{_e(name)}</td><td>{_e(msg)}</td><td>{'<br>'.join(_e(d) for d in details)}</td>"
        f'<td class="num">{_e(line if line is not None else "-")}</td>'
        f'<td title="{_e(chr(10).join(labels))}">{len(labels)}</td></tr>'
        for (kind, name, msg, details, line), labels in items)
    opened = " open" if len(items) <= 12 else ""
    return (f"<details{opened}><summary>Compiler remarks ({len(items)} distinct)</summary>"
            '<table class="audit"><thead><tr><th>kind</th><th>remark</th><th>message</th><th>details</th>'
            f"<th>line</th><th>variants</th></tr></thead><tbody>{body}</tbody></table></details>")


# --- plots --------------------------------------------------------------------------------------------------------

def have_matplotlib() -> bool:
    """Whether matplotlib imports (the plots need it; without it the report has tables only)."""
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _mpl(text) -> str:
    """Text for matplotlib: ``$`` escaped so names are never parsed as mathtext."""
    return str(text).replace("$", r"\$")


def varying_hints(rows: Sequence[VariantRecord]) -> list[str]:
    """Hints that take two or more values among these records, in first-seen order."""
    values: dict[str, set] = {}
    for r in rows:
        for h, v in r.hints.items():
            values.setdefault(h, set()).add(repr(v))
    return [h for h, vs in values.items() if len(vs) > 1]


def series_styles(keys: Sequence[tuple], builds: Sequence[str]) -> dict[tuple, dict]:
    """Line style per series key ``(build, case, other hints)``: a palette colour per (case, other hints) — the
    same colour for one case under every compiler — and per compiler a dash pattern (the newest solid) and width
    (older ones wider, so identical lines stay visible); past 8 cases the colours repeat with another dash."""
    cases = list(dict.fromkeys(k[1:] for k in keys))      # in the records' order (the tables')
    out = {}
    for k in keys:
        i, j = cases.index(k[1:]), builds.index(k[0])
        older = len(builds) - 1 - j
        ls = _LINESTYLES[(i // len(PALETTE) + older) % len(_LINESTYLES)]
        # earlier cases and older compilers wider: lines that coincide stay visible as an outline
        lw = 1.4 + 1.4 * (len(cases) - 1 - i) / max(1, len(cases) - 1) + 1.2 * older
        out[k] = dict(color=PALETTE[i % len(PALETTE)], ls=ls, lw=round(lw, 2))
    return out


def hint_figure_svg(rows: Sequence[VariantRecord], hint: str, title: str, salt: str) -> str:
    """An inline ``<svg>``: registers, shared memory, CTAs/SM (and time, with its p25–p75 interval) against ``hint``
    for these records.

    One line per (compiler version, case, other hints), coloured per :func:`series_styles`; each point's marker
    shape is the verdict of ``hint`` (:data:`VERDICT_STYLE`), filled with the series colour (``ignored``: a large
    X in red). The legend shows each series' line sample and the verdict shapes that occur; count axes get
    integer ticks.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    xs = sorted({repr(_x(r, hint)): _x(r, hint) for r in rows if r.ok}.values(), key=_x_order)
    timed = any(_median_us(r) is not None for r in rows)
    metrics = list(_METRICS) + ([("median_us", "median time (µs), bar: p25–p75", 1)] if timed else [])
    builds = sorted({r.tileiras for r in rows}, key=build_order)
    series: dict[tuple, list[VariantRecord]] = defaultdict(list)
    for r in rows:
        if not r.ok:   # a series without a drawn point gets no legend entry
            continue
        others = {k: v for k, v in r.hints.items() if k != hint}
        series[(r.tileiras, fmt_kv(r.case) if r.case else "", fmt_kv(others) if others else "")].append(r)
    builds = [b for b in builds if any(k[0] == b for k in series)]
    styles = series_styles(list(series), builds)
    seen_verdicts: list[str] = []
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "font.size": 9}):
        fig = Figure(figsize=(3.4 * len(metrics), 3.4 + 0.22 * ((len(series) + 3) // 4)), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(metrics), squeeze=False)[0]
        handles = []
        order = list(dict.fromkeys(k[1:] for k in series))
        for key, recs in sorted(series.items(), key=lambda kv: (order.index(kv[0][1:]), builds.index(kv[0][0]))):
            _draw_series(axes, metrics, recs, xs, hint, styles[key], seen_verdicts)
            label = " · ".join(x for x in (short_build(key[0]) if len(builds) > 1 else "", key[1], key[2]) if x)
            handles.append(Line2D([], [], label=_mpl(label or short_build(key[0])), **styles[key]))
        for v in (v for v in VERDICT_STYLE if v in seen_verdicts):
            c, m = VERDICT_STYLE[v]
            handles.append(Line2D([], [], ls="", marker=m, mfc="#d0d7de" if v != "ignored" else c, mec="#1f2328",
                                  mew=0.8, ms=8, label=v))
        if _style_axes(axes, metrics, xs, hint):
            handles.append(Line2D([], [], ls=":", color="#59636e", lw=1.2, label="CTAs/SM asked"))
        fig.suptitle(_mpl(title), fontsize=10)
        fig.legend(handles=handles, loc="outside lower center", ncol=legend_columns(
            [str(h.get_label()) for h in handles], 3.4 * len(metrics)), frameon=False, fontsize=8, handlelength=3.2)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _clean_svg(buf.getvalue(), title)


def legend_columns(labels: Sequence[str], width_in: float, font_pt: float = 8.0) -> int:
    """Legend columns that fit a figure ``width_in`` inches wide (4 columns of long labels were wider than
    the figure and cut at its left edge): each entry takes its longest label at about 0.6 × the font size per
    character plus the line sample and padding (3.2 + 2 font sizes); at most 4, at least 1."""
    longest = max((len(x) for x in labels), default=1)
    entry_pt = 0.6 * font_pt * longest + 5.2 * font_pt
    return max(1, min(4, len(labels), int(width_in * 72 * 0.95 // entry_pt)))


def _draw_series(axes, metrics, recs, xs, hint, style, seen_verdicts: list) -> None:
    """One line per panel for these records (compiled ones); a verdict-shaped marker at each point; on the time
    panel a p25–p75 bar."""
    pos = {repr(v): i for i, v in enumerate(xs)}
    recs = sorted((r for r in recs if r.ok and repr(_x(r, hint)) in pos), key=lambda r: pos[repr(_x(r, hint))])
    for ax, (field, _, scale) in zip(axes, metrics):
        pts = [(pos[repr(_x(r, hint))], _metric(r, field) / scale, r) for r in recs if _metric(r, field) is not None]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], alpha=0.9, **style)
        for x, y, r in pts:
            status = r.verdict_status(hint)
            if status and status not in seen_verdicts:
                seen_verdicts.append(status)
            colour, m = VERDICT_STYLE.get(status, (style["color"], "."))
            ignored = status == "ignored"      # the verdict to spot: a large X in its own colour
            ax.plot([x], [y], m, mfc=colour if ignored else style["color"], mec="#1f2328", mew=0.8,
                    ms=10 if ignored else 7, zorder=4 if ignored else 3)
            if field == "median_us":
                lo, hi = (r.run or VariantRun()).p25_us, (r.run or VariantRun()).p75_us
                if lo is not None and hi is not None:
                    ax.vlines([x], [lo], [hi], color=style["color"], lw=3, alpha=0.5, zorder=2)


def _style_axes(axes, metrics, xs, hint) -> bool:
    """Ticks at the hint values, labels, grid, y from 0, integer ticks on counts; the asked CTAs/SM line for
    occupancy (returns whether it was drawn)."""
    from matplotlib.ticker import MaxNLocator
    values = [(i, v) for i, v in enumerate(xs) if v != HINTLESS]
    asked = hint == "occupancy" and bool(values) and all(isinstance(v, int) and not isinstance(v, bool)
                                                        for _, v in values)
    for ax, (field, ylabel, _) in zip(axes, metrics):
        ax.set_xticks(range(len(xs)), [_mpl(HINTLESS if v == HINTLESS else fmt_value(v)) for v in xs])
        ax.set_xlabel(_mpl(hint))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if field == "ctas_per_sm" and asked:
            ax.plot([i for i, _ in values], [v for _, v in values], ":", color="#59636e", lw=1.2, zorder=1)
        ax.set_ylim(bottom=0)
        if field in _COUNTS:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return asked


def _metric(r: VariantRecord, field: str):
    return _median_us(r) if field == "median_us" else getattr(r, field, None)


def _clean_svg(svg: str, title: str) -> str:
    """matplotlib's SVG file → an inline ``<svg>``: no XML prolog, DOCTYPE (a URL), comments or namespace URLs."""
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2)
    return svg.replace("<svg", f'<svg role="img" aria-label="{_e(title)}"', 1)


def _arch_order(arch: str) -> tuple:
    from tileprobe.model.arch import get_arch
    try:
        return (get_arch(arch).cc, arch)
    except TileprobeError:
        return ((999, 0), arch)


#: Most lines one figure draws: past it the figure is a note (a 20,000-variant audit drew 16,785 lines
#: for minutes; more than a few dozen lines are not readable in one figure anyway).
MAX_PLOT_SERIES = 64


def kernel_plots(rows: Sequence[VariantRecord], kernel_index: int) -> str:
    """Figures for one kernel: per arch, one per varying hint; an arch where no variant compiled gets a note
    instead of empty axes."""
    by_arch: dict[str, list[VariantRecord]] = defaultdict(list)
    for r in rows:
        by_arch[r.arch].append(r)
    return "".join(arch_plots(recs, kernel_index) for _, recs in sorted(by_arch.items(),
                                                                          key=lambda kv: _arch_order(kv[0])))


def arch_plots(recs: Sequence[VariantRecord], kernel_index: int) -> str:
    """The figures of one kernel on one arch (``recs``, every compiler): one per varying hint, the hint-less build
    first on the x axis; a note instead when no variant compiled. :func:`render_html` puts them beside that arch's
    tables."""
    if not recs:
        return ""
    out: list[str] = []
    arch = recs[0].arch
    if not any(r.ok for r in recs):
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(_count(r.status for r in recs).items()))
        out.append(f'<p class="note">{_e(recs[0].kernel)} on {_e(arch)}: no plot, every variant failed '
                   f"({_e(statuses)}); the message is in the table's notes above.</p>")
        return "".join(out)
    for j, hint in enumerate(varying_hints(recs)):
        for k, (build, part) in enumerate(plot_groups(recs, hint)):
            title = f"{recs[0].kernel} on {arch}: resources vs {hint}" + (f" · {short_build(build)}" if build
                                                                          else "")
            n = len({(r.tileiras, fmt_kv(r.case), fmt_kv({k2: v for k2, v in r.hints.items() if k2 != hint}))
                     for r in part})
            if n > MAX_PLOT_SERIES:   # 16,785 lines took minutes to draw and read as nothing
                out.append(f'<p class="note">{_e(title)}: no plot, {n:,} lines (one per case and compiler) are '
                           f"more than the {MAX_PLOT_SERIES} a figure shows; the tables beside it have every variant "
                           "(narrow the report with --where or --kernel for a plot).</p>")
                continue
            svg = hint_figure_svg(part, hint, title, salt=f"tileprobe-{kernel_index}-{arch}-{j}-{k}")
            out.append(f'<figure class="plot">{svg}<figcaption>{_e(title)}; one colour per case'
                       f"{' (dash: compiler)' if len({r.tileiras for r in part}) > 1 else ''}; marker shape: "
                       f"the verdict of {_e(hint)}</figcaption></figure>")
    return "".join(out)


#: Most lines in one plot; above it, one plot per compiler (32 series in one plot could not be read).
MAX_SERIES = 12


def plot_groups(recs: Sequence[VariantRecord], hint: str) -> list[tuple[str, list[VariantRecord]]]:
    """The plots of ``hint`` for one kernel and arch: one ``("", recs)`` when its series (compiler × case × other
    hints, with a drawn point) are at most :data:`MAX_SERIES`, else one ``(build, its records)`` per compiler
    that has data, newest first."""
    drawn = [r for r in recs if r.ok]
    keys = {(r.tileiras, repr(r.case), repr({k: v for k, v in r.hints.items() if k != hint})) for r in drawn}
    builds = sorted({r.tileiras for r in drawn}, key=build_order, reverse=True)
    if len(keys) <= MAX_SERIES or len(builds) < 2:
        return [("", list(recs))]
    return [(b, [r for r in recs if r.tileiras == b]) for b in builds]


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _changes_table(changes) -> str:
    """A table of changes: mark, variant, what changed."""
    body = "".join(f'<tr class="{_e(c.kind)}"><td>{_e(c.mark)}</td><td>{_e(c.label())}</td>'
                   f"<td>{_e('; '.join(c.details))}</td></tr>" for c in changes)
    return ('<table class="audit"><thead><tr><th></th><th>variant</th><th>what changed</th></tr>'
            f"</thead><tbody>{body}</tbody></table>")


def compiler_changes_section(steps: CompilerSteps | None) -> str:
    """What changed between each pair of consecutive compiler versions of one kernel (``steps``:
    :func:`tileprobe.analyses.compare.compiler_steps`; None: no section): regressions first; identical variants
    counted; the builds left out of the comparison named first."""
    if steps is None:
        return ""
    out = []
    if steps.left_out:   # only a build none of whose variants another build audited: no partner to compare with
        out.append('<p class="meta">Not compared (no variant also audited with another compiler): ' + ", ".join(
            f"{_e(short_build(b))} ({n} variant{'s' if n != 1 else ''})" for b, n in steps.left_out) + "</p>")
    for old, new, changes in steps.steps:
        shown = [c for c in changes if c.kind != "same"]
        same = len(changes) - len(shown)
        head = (f"<h3>What changed from {_e(short_build(old))} to {_e(short_build(new))}</h3>"
                f'<p class="meta">{len(shown)} variant(s) changed, {same} identical (same machine code and resources)'
                "; ! regression, * improvement, x code or resources changed, ? on one side only</p>")
        if not shown:
            out.append(head)
            continue
        judged = [c for c in shown if c.kind != "changed"]
        changed = [c for c in shown if c.kind == "changed"]
        groups = group_changes(changes)
        summary = ("<p>Changed ({}), by kind of change:</p><ul>{}</ul>".format(
            f"{len(changed)} variant{'s' if len(changed) != 1 else ''}",
            "".join(f"<li>{_e(change_group_line(g))}</li>" for g in groups)) if groups else "")
        why = list(dict.fromkeys(w for c in shown for w in c.why))
        out.append(head + (_changes_table(judged) if judged else "") + summary
                   + (f"<details><summary>each changed variant ({len(changed)})</summary>{_changes_table(changed)}"
                      "</details>" if changed else "")
                   + ('<p class="meta">why: ' + " · ".join(_e(w) for w in why) + "</p>" if why else ""))
    return "".join(out)


# --- the page -----------------------------------------------------------------------------------------------------

def render_html(records: Iterable[VariantRecord], *, title: str = "tileprobe report", sources: Sequence[str] = (),
                plots: bool = True, compiler_steps: Mapping[tuple[str, str], CompilerSteps] | None = None) -> str:
    """The whole report as one HTML string (see module doc). ``plots=False`` or no matplotlib: tables only.
    ``compiler_steps``: what changed between compiler builds per (kernel, probe file), each section's first part
    (:func:`tileprobe.analyses.compare.compiler_steps_by_kernel`); a section without one has none."""
    from tileprobe._version import __version__
    records = list(records)
    # one section per (kernel, probe file): two probes may name different kernels alike
    by_key: dict[tuple[str, str], list[VariantRecord]] = defaultdict(list)
    for r in records:
        by_key[(r.kernel, r.probe)].append(r)
    names: dict[str, int] = defaultdict(int)
    for kernel, _ in by_key:
        names[kernel] += 1
    kernels = {(f"{k} ({os.path.basename(p)})" if names[k] > 1 and p else k): (rows, (k, p))
               for (k, p), rows in by_key.items()}
    with_plots = plots and have_matplotlib()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = [("generated", f"{now} by tileprobe {__version__}"), ("sources", ", ".join(sources) or "-"),
            ("compilers", ", ".join(sorted({r.tileiras for r in records if r.tileiras})) or "-"),
            ("cuda-tile", ", ".join(sorted({r.cuda_tile for r in records if r.cuda_tile})) or "-"),
            ("archs", ", ".join(sorted({r.arch for r in records})) or "-"),
            ("variants", f"{len(records)} ({sum(not r.ok for r in records)} failed to compile)")]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>",
             '<table class="meta">' + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in meta)
             + "</table>",
             "<p>Verdicts: " + "".join(f'<span class="v v-{s}" title="{_e(VERDICT_MEANING.get(s, s))}">{s}</span>'
                                       for s in VERDICT_STYLE)
             + ' <span class="v v-failed">failed</span> — hover a verdict for its reason.</p>'
             + "<p class=\"meta\">" + " · ".join(_e(line) for line in verdict_legend(("met", "honoured", "partial",
                                                                                      "ignored"))) + "</p>"]
    if plots and not with_plots:
        parts.append(f'<p class="note">{_e(NO_MATPLOTLIB)}</p>')
    if len(kernels) > 1:
        parts.append("<nav><ul>" + "".join(f'<li><a href="#k{i}">{_e(k)}</a> ({len(v)} variants)</li>'
                                            for i, (k, (v, _)) in enumerate(kernels.items())) + "</ul></nav>")
    for i, (kernel, (rows, key)) in enumerate(kernels.items()):
        parts.append(f'<section id="k{i}"><h2>{_e(kernel)}</h2>')
        probes = sorted({r.probe for r in rows if r.probe})
        if probes:
            parts.append(f'<p class="meta">probe: {", ".join(f"<code>{_e(p)}</code>" for p in probes)}</p>')
        parts.append(compiler_changes_section((compiler_steps or {}).get(key)))   # what changed first
        tables = group_tables(rows)
        for arch in dict.fromkeys(a for _, _, a in tables):   # each arch's tables, then its plots beside them
            parts.append('<div class="arch"><div class="tables">')
            for (_, build, a), trows in tables.items():
                if a == arch:
                    parts.append(f"<h3>{_e(arch)} · {_e(short_build(build))}</h3>"
                                 f'<p class="meta">{_e(build)}</p>{audit_table(trows)}')
            parts.append("</div>")
            if with_plots:
                parts.append(f'<div class="plots">{arch_plots([r for r in rows if r.arch == arch], i)}</div>')
            parts.append("</div>")
        parts.append(remarks_section(rows))
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(records: Iterable[VariantRecord], path: str, **kw) -> None:
    """Write :func:`render_html` to ``path``."""
    text = render_html(records, **kw)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)

"""Terminal output of ``tileprobe compare`` (rich): the short form (counts, regressions and improvements with what
changed and why, the variants that only changed grouped one line per kind of change) and the wide table of A and B
side by side, with the GPU times under each when both sides ran. :mod:`tileprobe.report.terminal` re-exports
:func:`render_compare` and :func:`render_compare_table`."""
from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from tileprobe.analyses.results import Comparison
from tileprobe.report.common import change_group_line, record_side
from tileprobe.report.releases import change_text, time_text
from tileprobe.report.text import cell, say

#: Details of a change that are resources only (shown on an "also" line, after what costs time).
_MINOR = ("threads ", "registers ", "shared B ", "stack B ", "machine code differs")


def render_compare(comparison: Comparison, console: Console | None = None, wide: bool = False,
                   details: bool = False) -> None:
    """The comparison, short: the counts first, then each regression, improvement and one-sided variant
    as ``mark variant`` and indented lines: what changed (what costs time first), why, and the resource changes;
    the kernel named once when there is one. The variants that only changed are grouped by kind of change, one
    line per group with counts (:func:`tileprobe.analyses.compare.group_changes`); ``details`` lists each of them
    too. ``wide``: the table of A and B side by side instead (:func:`render_compare_table`)."""
    changes, console = comparison.changes, console or Console()
    if wide:
        render_compare_table(comparison, console)
        return
    say(console, f"A: {comparison.name_a}")
    say(console, f"B: {comparison.name_b}")
    if _say_nothing_compared(comparison, console):
        return
    say(console, _counts_line(comparison))
    kernels = {r.kernel for c in changes for r in (c.a, c.b) if r is not None}
    shown = [c for c in changes if c.kind != "same" and (details or c.kind != "changed")]
    if len(kernels) == 1 and shown:
        say(console, f"{next(iter(kernels))}:")
    width = max(40, console.width)
    for c in shown:
        label = c.label()
        if len(kernels) == 1:
            label = label.split(" ", 1)[1] if " " in label else label
        judged, rest = c.details[:c.judged], c.details[c.judged:]
        notable = [d for d in rest if not d.startswith(_MINOR)]
        minor = [d for d in rest if d.startswith(_MINOR)]
        parts = ["; ".join(judged)] if judged else []
        if notable:
            parts.append(("changed: " if judged else "") + "; ".join(notable))
        if minor:
            parts.append(("also " if parts else "") + ", ".join(minor))
        text = " · ".join(parts)
        one = f"{c.mark} {label}: {text}"
        if len(one) < width:
            say(console, one)
            continue
        say(console, f"{c.mark} {label}")
        for line in textwrap.wrap(text, width - 1, initial_indent="    ", subsequent_indent="    ",
                                  break_on_hyphens=False):
            say(console, line)
    _render_change_groups(comparison, console, details)
    why = list(dict.fromkeys(w for c in changes if c.kind != "same" for w in c.why))
    if why:
        say(console, "why:")
        for w in why:
            for line in textwrap.wrap(w, width - 1, initial_indent="  - ", subsequent_indent="    ",
                                      break_on_hyphens=False):
                say(console, line)
    _render_times(comparison, console)
    say(console, "! regression   * improvement   x changed, same residency and verdicts   ? on one side only"
                 + ("   (= same code: counted, not listed)" if any(c.kind == "same" for c in changes) else ""))


def _say_nothing_compared(comparison: Comparison, console: Console) -> bool:
    """Say so when nothing was compared (no claim of a comparison): no variant on either side, none on
    both, or ``--regressions`` keeping none (then the counts of all). Returns whether it said so."""
    changes = comparison.changes
    if comparison.total is not None and not changes:
        say(console, f"no regression among the {comparison.total} variant(s) compared")
        return True
    if not changes:
        say(console, "nothing was compared: both sides are empty (no variant in A or B)")
        return True
    if all(c.kind == "unmatched" for c in changes):      # the conclusion first, not under 20 '?' rows
        say(console, "nothing was compared: no variant is on both sides (variants match by kernel, case, hints and "
                     f"arch; A has {_sides_text([c.a for c in changes])}, B has {_sides_text([c.b for c in changes])})")
        say(console, _counts_line(comparison))
        return True
    return False


def _counts_line(comparison: Comparison) -> str:
    changes = comparison.changes
    n = sum(c.kind == "regression" for c in changes)
    if comparison.total is not None:
        return f"{n} regression(s) shown of {comparison.total} variant(s) compared"
    one_side = sum(c.kind == "unmatched" for c in changes)
    return (f"{n} regression(s), {sum(c.kind == 'improvement' for c in changes)} improvement(s), "
            f"{sum(c.kind == 'changed' for c in changes)} changed, {sum(c.kind == 'same' for c in changes)} same"
            + (f", {one_side} on one side only" if one_side else ""))


def _render_change_groups(comparison: Comparison, console: Console, details: bool) -> None:
    """``x changed, by kind of change:`` and one line per group (:func:`change_group_line`)."""
    from tileprobe.analyses.results import group_changes
    groups = group_changes(comparison.changes)
    if not groups:
        return
    n = sum(c.kind == "changed" for c in comparison.changes)
    say(console, f"x changed ({n} variant{'s' if n != 1 else ''}), by kind of change"
                 + ("" if details else " (--details lists each variant)") + ":")
    for g in groups:
        say(console, f"    {change_group_line(g)}")


def render_compare_table(comparison: Comparison, console: Console | None = None) -> None:
    """A rich table: mark, variant, A and B resources/verdicts, what changed; then the legend and the counts."""
    changes, console = comparison.changes, console or Console()
    say(console, f"A: {comparison.name_a}")
    say(console, f"B: {comparison.name_b}")
    if _say_nothing_compared(comparison, console):
        return
    t = Table()
    for h in ("", "variant", "A", "B", "what changed"):
        t.add_column(h)
    style = {"!": "bold red", "*": "green", "x": "yellow"}
    for c in changes:
        m = c.mark
        t.add_row(cell(m, style.get(m, "")), cell(c.label()), cell(record_side(c.a)), cell(record_side(c.b)),
                  cell("; ".join(c.details)))
    console.print(t)
    _render_times(comparison, console)
    say(console, "! regression (new crashes and hangs first)   * improvement   x code, resources or failure class "
                 "changed, same residency and verdicts   = same machine code   ? on one side only")
    say(console, _counts_line(comparison))


def _sides_text(records: Sequence) -> str:
    """``rms_norm on sm_90`` for the records of one side of a comparison (``nothing`` when none)."""
    recs = [r for r in records if r is not None]
    if not recs:
        return "nothing"
    return f"{', '.join(sorted({r.kernel for r in recs}))} on {', '.join(sorted({r.arch for r in recs}))}"


def _render_times(comparison: Comparison, console: Console) -> None:
    """With GPU runs on both sides: every variant's time under A and B (median ± 95 % CI of the mean) and the
    change by the noise rule (:mod:`tileprobe.analyses.noise`), as the comparison carries them."""
    if not comparison.timed:
        return
    say(console, f"times: A {comparison.name_a}, B {comparison.name_b} (Welch t-test p < 0.05 and ≥ 2 %)")
    t = Table()
    for h in ("", "variant", "A", "B", "change"):
        t.add_column(h)
    for c in comparison.changes:
        if c.a is not None and c.b is not None and (c.a.run or c.b.run):
            t.add_row(cell(c.mark), cell(c.label()), cell(time_text(c.a, c.time_a)), cell(time_text(c.b, c.time_b)),
                      cell(change_text(c)))
    console.print(t)

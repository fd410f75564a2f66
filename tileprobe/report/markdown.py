"""Markdown ready to paste into a compiler bug report: environment, per-version tables, reasons, repro; for audits,
comparisons, bisections, doctor findings and GPU runs."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from tileprobe.analyses.results import BisectResult, Comparison, Finding, TimeBisectResult, group_changes
from tileprobe.report.common import (
    RUN_COLUMNS,
    SASS_UNREAD,
    best_lines,
    case_columns,
    change_group_line,
    compile_timeout_line,
    failure_groups,
    failure_of,
    fmt_kv,
    group_tables,
    headers,
    hint_columns,
    noteworthy,
    pool_line,
    record_side,
    row_cells,
    sass_columns,
    short_build,
    table_md,
    variant_label,
    verdict_cells,
    verdict_columns,
    verdict_legend,
    verdict_text,
)
from tileprobe.report.releases import gpu_line, releases_markdown
from tileprobe.schema import VariantRecord


def environment_md(env: dict) -> str:
    """The environment block: tileprobe, Python, platform, cuda-tile, tileiras builds, GPU if any. A list of more
    than one value (two compilers' banners) gets one sub-item per value, never run together on one line."""
    lines = []
    for k, v in env.items():
        if isinstance(v, list) and len(v) > 1:
            lines.append(f"- {k}:\n" + "\n".join(f"  - {' '.join(str(x).split())}" for x in v))
        else:
            lines.append(f"- {k}: {', '.join(map(str, v)) if isinstance(v, list) else v}")
    return "\n".join(lines) + "\n"


def display_path(path: str) -> str:
    """``path`` as a report shows it: relative to the working folder when under it, else ``~/…`` when under the
    home folder, else as given — a pasted report names no user's absolute folders."""
    try:
        full = os.path.abspath(path)
        cwd, home = os.getcwd(), os.path.expanduser("~")
        if full == cwd or full.startswith(cwd + os.sep):
            return os.path.relpath(full, cwd)
        if home not in ("", "/") and (full == home or full.startswith(home + os.sep)):
            return "~" + full[len(home):]
    except (OSError, ValueError):
        pass
    return path


def kernel_packages_md(paths: Sequence[str]) -> str:
    """``- kernel packages: tilegym 1.5.1, torch 2.9.0`` — the installed distributions the probe files import
    (top-level ``import`` / ``from … import`` of each file, by ``importlib.metadata.packages_distributions``),
    without the standard library, tileprobe and cuda-tile (listed above); '' when none or unreadable. The
    versions a kernel taken from a package (TileGym …) was audited with, for a report that stands alone."""
    import ast
    import importlib.metadata as md
    import sys
    names: set[str] = set()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    names -= set(sys.stdlib_module_names) | {"tileprobe", "cuda", "__future__"}
    if not names:
        return ""
    try:
        dists = md.packages_distributions()
    except Exception:
        return ""
    found = {}
    for name in sorted(names):
        for dist in dists.get(name, []):
            try:
                found[dist] = md.version(dist)
            except md.PackageNotFoundError:
                continue
    return ("- kernel packages: " + ", ".join(f"{d} {v}" for d, v in sorted(found.items())) + "\n") if found else ""


def audit_markdown(records: Iterable[VariantRecord], environment: dict, command: str = "",
                   advice: Sequence[str] = ()) -> str:
    """The whole audit as a compiler bug report, ready to paste: what went wrong first (failed variants with the
    compiler's message and repeat command, noteworthy verdicts: partial, ignored, infeasible, unchanged —
    :data:`tileprobe.schema.NOTEWORTHY_STATUSES`), the environment and compiler versions, the command that
    reproduces it, one table per kernel, arch and compiler, the ``advice`` lines (:meth:`AuditResult.advice
    <tileprobe.audit.pipeline.AuditResult.advice>`), and the probe file itself (:func:`probe_section`)."""
    records = list(records)
    probes = sorted({r.probe for r in records if r.probe})
    parts = ["## tileprobe audit\n", environment_md(environment), versions_md(records), kernel_packages_md(probes)]
    if command:
        parts.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    parts.append(problems_md(records))
    for (kernel, tileiras, arch), rows in group_tables(records).items():
        hints, cases, vcols = hint_columns(rows), case_columns(rows), verdict_columns(rows)
        parts.append(f"\n### {kernel} · {arch} · {short_build(tileiras)}\n\n")
        extra = sass_columns(rows)
        parts.append(table_md(headers(hints, cases) + [name for name, _ in extra] + [f"{h} verdict" for h in vcols],
                              [row_cells(r, hints, cases) + [fn(r) for _, fn in extra] + verdict_cells(r, vcols)
                               for r in rows]))
        notes = [f"- {_label(r)}: {verdict_text(r, long=True)}" for r in rows
                 if r.ok and any(noteworthy(v) for v in r.verdicts.values())]
        notes += [f"- {_label(r)}: {SASS_UNREAD}: {_one_line(r.sass.error or '')}"
                  for r in rows if r.ok and r.sass and "error" in r.sass]
        notes += [f"- {_label(r)}: {pool_line(r)}" for r in rows if r.hang_risk or r.pool_verdict == "unknown"]
        notes += [f"- {_label(r)}: {compile_timeout_line(r)}" for r in rows if r.exceeds_compile_timeout]
        if notes:
            parts.append("\n" + "\n".join(notes) + "\n")
    legend = verdict_legend(v.status for r in records for v in r.verdicts.values())
    if legend:
        parts.append("\nVerdicts:\n\n" + "".join(f"- {line}\n" for line in legend))
    if advice:
        parts.append("\n### Advice\n\n" + "".join(f"- {line}\n" for line in advice))
    parts.append(kernel_section(records))
    parts.append(probe_section(probes))
    return "".join(parts)


def kernel_section(records: Sequence[VariantRecord]) -> str:
    """``### The kernel``: the source of each audited ``@ct.kernel`` function found outside the probe files printed
    in full (a kernel imported from TileGym …; :func:`tileprobe.report.kernel_source.find_kernel_source`, which reads
    files and runs nothing), with its file and line; '' when every kernel is in a printed probe or none is found."""
    from tileprobe.report.kernel_source import KERNEL_MAX_LINES, find_kernel_source
    printed = {os.path.abspath(p) for p in {r.probe for r in records if r.probe} if _probe_lines(p) <= PROBE_MAX_LINES}
    found: dict[tuple[str, int], tuple[str, str]] = {}
    for probe, symbol, kernel in dict.fromkeys((r.probe, r.symbol, r.kernel) for r in records if r.probe and r.symbol):
        src = find_kernel_source(probe, symbol)
        if src is not None and src.path not in printed:
            found.setdefault((src.path, src.line), (kernel, src.text))
    out = []
    for (path, line), (kernel, text) in found.items():
        where = f"`{display_path(path)}:{line}` ({kernel})"
        n = text.count("\n") + 1
        if n > KERNEL_MAX_LINES:
            out.append(f"\n{where}: {n} lines, attach it\n")
            continue
        fence = "````" if "```" in text else "```"
        out.append(f"\n{where}:\n\n{fence}python\n{text.rstrip()}\n{fence}\n")
    return "\n### The kernel\n" + "".join(out) if out else ""


def _probe_lines(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().count("\n")
    except OSError:
        return PROBE_MAX_LINES + 1


def versions_md(records: Sequence[VariantRecord]) -> str:
    """The compiler builds, archs and GPUs of these records as list items (for the environment block)."""
    builds = sorted({r.tileiras for r in records if r.tileiras})
    out = [f"- compiler: {short_build(b)} (`{b}`)" for b in builds]
    out.append(f"- archs: {', '.join(sorted({r.arch for r in records}))}")
    gpus = sorted({str(r.run.gpu) for r in records if r.run and r.run.gpu})
    if gpus:
        out.append(f"- GPU: {', '.join(gpus)}")
    return "\n".join(out) + "\n"


def problems_md(records: Sequence[VariantRecord]) -> str:
    """``### What went wrong``: each distinct failure once per kernel, arch and compiler (the failure class, the
    variants, the compiler's own words in a code block, the fix, the repeat command), then the variants with a
    noteworthy verdict; '' when there is neither."""
    failed = [(key, group) for key, rows in group_tables(records).items() for group in failure_groups(rows)]
    odd = [r for r in records if r.ok and any(noteworthy(v) for v in r.verdicts.values())]
    if not failed and not odd:
        return ""
    out = ["\n### What went wrong\n"]
    for (kernel, tileiras, arch), group in failed:
        r = group[0]
        who = "; ".join(_label(x) for x in group[:MAX_NAMED]) + (
            f"; +{len(group) - MAX_NAMED} more" if len(group) > MAX_NAMED else "")
        out.append(f"\n- **{kernel} · {arch} · {short_build(tileiras)}: {failure_of(r)}** in {len(group)} "
                   f"variant(s): {who}\n")
        text = (r.message or r.error or "").strip()
        if text:
            out.append(_code("\n".join(text.splitlines()[-30:])) + "\n")
        if r.fix:
            out.append(f"  fix: {r.fix}\n")
        if r.repro:
            out.append(_repeat(r.repro))
    for r in odd:
        for hint, v in r.verdicts.items():
            if noteworthy(v):
                out.append(f"- {r.kernel} · {r.arch} · {short_build(r.tileiras)} · {_label(r)}: **{hint} "
                           f"{v.status}**: {v.reason}\n")
    return "".join(out)


def _one_line(text: str) -> str:
    """``text`` on one line (a Markdown list item)."""
    return " ".join(str(text).split())


#: Variants named in one failure item of the bug report (the rest are counted).
MAX_NAMED = 20


def _code(text: str, indent: str = "  ") -> str:
    """A fenced code block (indented into a list item); a fence longer than any backtick run inside."""
    fence = "```"
    while fence in text:
        fence += "`"
    body = "\n".join(indent + line for line in text.splitlines())
    return f"{indent}{fence}\n{body}\n{indent}{fence}"


def _repeat(command: str) -> str:
    """``repeat: `cmd` `` inline for a short one-line command, else the command in a code block (easy to copy)."""
    if len(command) <= 80 and "\n" not in command and "`" not in command:
        return f"  repeat: `{command}`\n"
    return "  repeat:\n" + _code(command) + "\n"


#: Probe files longer than this are named, not pasted.
PROBE_MAX_LINES = 300


def probe_section(paths: Sequence[str]) -> str:
    """``### The probe``: each probe file's text in a ``python`` block (named only when it cannot be read or is
    longer than :data:`PROBE_MAX_LINES`), so the report carries the launch it describes."""
    if not paths:
        return ""
    out = ["\n### The probe\n"]
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            out.append(f"\n`{display_path(path)}`: not readable here ({e.strerror or e})\n")
            continue
        if text.count("\n") > PROBE_MAX_LINES:
            out.append(f"\n`{display_path(path)}`: {text.count(chr(10))} lines, attach it\n")
            continue
        fence = "````" if "```" in text else "```"
        out.append(f"\n`{display_path(path)}`:\n\n{fence}python\n{text.rstrip()}\n{fence}\n")
    return "".join(out)


def _label(r: VariantRecord) -> str:
    return variant_label(r)


def compare_markdown(comparison: Comparison, command: str = "", details: bool = False) -> str:
    """Markdown for a bug report: the two sides, the environment, the repro command, the regressions,
    improvements and one-sided variants (regressions first), the variants that only changed as one line per kind of
    change (every one of them too with ``details``), and with ``--probe`` the probe file (:func:`probe_section`).
    Over GPU runs: the timed report of :func:`tileprobe.report.releases.releases_markdown`."""
    c = comparison
    if c.timed:
        return releases_markdown(c, command) + probe_section(sorted({r.probe for r in c.audited if r.probe}))
    parts = ["## tileprobe compare\n\n", f"- A: {c.name_a}\n- B: {c.name_b}\n"]
    if c.environment:
        parts.append(environment_md(c.environment))
    if command:
        parts.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    rows = [[ch.mark, ch.label(), record_side(ch.a), record_side(ch.b), "; ".join(ch.details)]
            for ch in c.changes if ch.kind != "same" and (details or ch.kind != "changed")]
    groups = group_changes(c.changes)
    if not c.changes:     # no claim of a comparison that did not happen
        parts.append(f"\nNo regression among the {c.total} variant(s) compared.\n" if c.total is not None else
                     "\nNothing was compared: both sides are empty.\n")
        return "".join(parts) + probe_section(sorted({r.probe for r in c.audited if r.probe}))
    if rows:
        parts.append("\n" + table_md(["", "variant", "A", "B", "what changed"], rows))
    if groups:
        n = sum(ch.kind == "changed" for ch in c.changes)
        parts.append(f"\nChanged ({n} variant{'s' if n != 1 else ''}), by kind of change:\n\n"
                     + "".join(f"- {change_group_line(g)}\n" for g in groups))
    if not rows and not groups:
        parts.append("\nNo differences.\n")
    why = list(dict.fromkeys(w for ch in c.changes for w in ch.why))
    if why:
        parts.append("\nWhy:\n\n" + "".join(f"- {w}\n" for w in why))
    same = sum(ch.kind == "same" for ch in c.changes)
    if c.total is not None:
        parts.append(f"\n{len(c.changes)} of {c.total} variant(s) shown.\n")
    else:
        parts.append(f"\n{same} variant(s) identical (same machine code and resources).\n")
    parts.append(probe_section(sorted({r.probe for r in c.audited if r.probe})))
    return "".join(parts)


def bisect_markdown(res: BisectResult, command: str = "") -> str:
    """The steps as a Markdown table and the conclusion, for a bug report."""
    rows = [[s.version, "yes" if s.holds else "no", s.summary] for s in res.steps]
    out = [f"## tileprobe bisect: `{res.prop}`\n\n", table_md(["tileiras", "holds", "variant"], rows),
           f"\nFirst release where it changed: **{res.first_bad}** (last like the good one: {res.last_good}).\n"]
    if command:
        out.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    return "".join(out)


def time_bisect_markdown(res: TimeBisectResult, command: str = "") -> str:
    """A bisection by time (:class:`~tileprobe.analyses.results.TimeBisectResult`): every release's time and
    whether the property held, the skipped releases, the answer, the GPU and the command."""
    rows = [[s.version, "yes" if s.holds else "**no**", s.summary] for s in res.steps]
    out = [f"## tileprobe bisect by time: `{res.prop}`\n\n", table_md(["tileiras", "holds", "time (median ± 95 % CI)"],
                                                                     rows)]
    if res.skipped:
        out += ["\n"] + [f"- skipped {v}: {why}\n" for v, why in res.skipped.items()]
    out.append(f"\n{res.conclusion()}.\n\nEvery release was run ({res.rounds} interleaved rounds, samples pooled); a "
               "change counts when Welch's t-test gives p < 0.05 and it exceeds the property's margin.\n")
    out.append(f"\n- GPU: {gpu_line(res.environment or {}, [])}\n")
    if command:
        out.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    return "".join(out)


def doctor_markdown(findings: Sequence[Finding]) -> str:
    """Findings as a Markdown list, to paste into a bug report."""
    lines = ["## tileprobe doctor", ""]
    for f in findings:
        lines.append(f"- **{f.level}** {f.topic}: {f.message}" + (f"  \n  fix: {f.fix}" if f.fix else ""))
    return "\n".join(lines) + "\n"


def run_markdown(records: Sequence[VariantRecord], environment: dict, command: str = "", advice: Sequence[str] = (),
                 best: Sequence[dict] = ()) -> str:
    """The audit's Markdown with the ``advice`` lines, then a run table (status, times, error, occupancy) and the
    best hints (``best``: :meth:`RunResult.best_hints <tileprobe.run.session.RunResult.best_hints>`; ``advice``:
    its :meth:`~tileprobe.run.session.RunResult.advice`)."""
    parts = [audit_markdown(records, environment, command=command, advice=advice), "\n## tileprobe run\n\n"]
    gpu = environment.get("gpu") or {}
    if gpu:
        parts.append(f"GPU: {gpu.get('name')} ({gpu.get('sm')}), driver {gpu.get('driver')}, SM clock "
                     f"{gpu.get('clock_sm_mhz')} MHz (max {gpu.get('clock_max_sm_mhz')}), "
                     f"memory clock {gpu.get('clock_mem_mhz')} MHz\n\n")
    rows = [[r.kernel, r.arch, fmt_kv(r.case), fmt_kv(r.hints), *[fn(r) for _, fn in RUN_COLUMNS],
             r.run.error.splitlines()[0][:120] if r.run.error else ""]
            for r in records if r.run]
    parts.append(table_md(["kernel", "arch", "case", "hints", *[h for h, _ in RUN_COLUMNS], "error"], rows))
    lines = best_lines(best)
    if lines:
        parts.append("\n" + "\n".join(f"- {b}" for b in lines) + "\n")
    return "".join(parts)

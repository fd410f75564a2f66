"""Compiler releases side by side by measured time: the rows of ``compare`` over GPU runs and the
Markdown a compiler bug report needs (both releases' tables with times, the changed cases with their ratio, the
environment, the command that repeats it).

Times: the median and, after ``±``, the 95 % confidence half-width of the mean
(:meth:`tileprobe.analyses.noise.TimeStats.ci95_us`); a change is one beyond noise by the rule of
:mod:`tileprobe.analyses.noise` (Welch's t-test at p < 0.05 and ≥ 2 % of the median). Both come computed in the
comparison (:class:`~tileprobe.analyses.results.Change`: ``time_a``, ``time_b``, ``time``).
"""
from __future__ import annotations

import json

from tileprobe.analyses.results import Change, Comparison
from tileprobe.report.common import fmt_kv, short_build, table_md
from tileprobe.schema import VariantRecord, VariantRun, p_text


def time_text(r: VariantRecord | None, st) -> str:
    """``13,360.0 ± 12.1 µs`` for an ok run (``st``: its :class:`~tileprobe.analyses.noise.TimeStats`, as a
    :class:`~tileprobe.analyses.results.Change` carries them); the run status (``hang``, ``wrong``, ``crash``,
    ``error``) otherwise; ``-`` when it did not run (or did not compile: the failure class)."""
    if r is None:
        return "-"
    if not r.ok:
        return r.failure or r.status
    run = r.run or VariantRun()
    if not run.status:
        return "-"
    if run.status != "ok":
        return run.status
    if st is None:
        return f"{run.median_us:,.1f} µs" if run.median_us is not None else "ok"
    return f"{st.median_us:,.1f} ± {st.ci95_us():,.1f} µs"


def change_text(ch: Change) -> str:
    """What the times and statuses say for one pair: ``1.65× slower (p 1e-12)``, ``within noise (1.01×)``, or the
    status change (``run ok → hang``)."""
    status = [d for d in ch.details if d.startswith(("run ", "status "))]
    if status:
        return "; ".join(status)
    if ch.a is None or ch.b is None:
        return "; ".join(ch.details)
    tc = ch.time
    if tc is None:
        return "-"
    if tc.changed:
        return f"{tc.ratio_text()} ({p_text(tc.p)})"
    return f"within noise ({tc.ratio:.3f}×)"


def variant_order(r: VariantRecord) -> tuple:
    """Sort key of a release table: kernel, arch, case, then hint values (numbers by value)."""
    hints = [(k, (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))) for k, v in sorted(r.hints.items())]
    return (r.kernel, r.arch, json.dumps(r.case, sort_keys=True, default=str), hints)


def side_rows(sides: list[tuple]) -> list[list[str]]:
    """One release's table, in :func:`variant_order`: kernel, arch, case, hints, threads, regs, smem B, CTAs/SM,
    verdicts, time ± noise. ``sides``: (record, its :class:`~tileprobe.analyses.noise.TimeStats` or None) pairs."""
    rows = []
    for r, st in sorted(sides, key=lambda side: variant_order(side[0])):
        verdicts = ", ".join(f"{h} {v.status}" for h, v in r.verdicts.items()) if r.ok else "-"
        rows.append([r.kernel, r.arch, fmt_kv(r.case) or "-", fmt_kv(r.hints) or "-",
                     _n(r.threads), _n(r.registers), _n(r.shared_bytes), _n(r.ctas_per_sm), verdicts or "-",
                     time_text(r, st)])
    return rows


SIDE_HEADERS = ["kernel", "arch", "case", "hints", "threads", "regs", "smem B", "CTAs/SM", "verdict", "time"]


def changed_rows(c: Comparison) -> list[list[str]]:
    """The changed cases, regressions first: mark, variant, A time, B time, the change, static facts beside."""
    rows = []
    for ch in c.changes:
        if ch.kind in ("same", "changed") and not _status_moved(ch):
            continue
        static = [d for d in ch.details if not d.startswith(("time ", "run ", "status "))]
        same = ch.a is not None and ch.b is not None and ch.a.same_code(ch.b)
        rows.append([ch.mark, ch.label(), time_text(ch.a, ch.time_a), time_text(ch.b, ch.time_b), change_text(ch),
                     "; ".join(static) or ("same machine code" if same else "machine code differs")])
    return rows


CHANGED_HEADERS = ["", "variant", "A", "B", "change", "static facts"]


def _status_moved(ch: Change) -> bool:
    return any(d.startswith(("run ", "status ")) for d in ch.details)


def _n(v) -> str:
    return "-" if v is None else f"{v:,}"


def gpu_line(env: dict, records: list[VariantRecord]) -> str:
    """``NVIDIA H200 (sm_90), driver 580.x, SM clock 1980 MHz (max 1980), memory 3201 MHz`` from the run's
    environment (or the GPU name the records' runs carry)."""
    gpu = env.get("gpu") or {}
    if gpu:
        return (f"{gpu.get('name')} ({gpu.get('sm')}), driver {gpu.get('driver')}, SM clock {gpu.get('clock_sm_mhz')} "
                f"MHz (max {gpu.get('clock_max_sm_mhz')}), memory clock {gpu.get('clock_mem_mhz')} MHz")
    names = sorted({str(r.run.gpu_name) for r in records if r.run and r.run.gpu})
    return ", ".join(names) or "not recorded"


def releases_markdown(c: Comparison, command: str = "") -> str:
    """The report of a timed comparison, ready to paste into a GitHub issue: the verdict line, the changed cases
    (regressions first, with the ratio and the static facts), both releases' tables with times, the environment
    (GPU, driver, clocks, compilers, cuda-tile) and the command that repeats it."""
    a = [(ch.a, ch.time_a) for ch in c.changes if ch.a is not None]
    b = [(ch.b, ch.time_b) for ch in c.changes if ch.b is not None]
    rows = changed_rows(c)
    n_reg = sum(ch.kind == "regression" for ch in c.changes)
    parts = [f"## {c.name_a} vs {c.name_b}: times on the GPU\n\n",
             f"{n_reg} regression(s) of {len(c.changes)} variant(s). A change counts when Welch's t-test gives "
             f"p < 0.05 and the median moved by at least {c.min_effect:.0%}; ± is the 95 % confidence half-width "
             "of the mean.\n\n"]
    parts.append("### Changed\n\n" + (table_md(CHANGED_HEADERS, rows) if rows else "Nothing moved beyond noise; "
                                      "no status changed.\n"))
    for name, recs in ((c.name_a, a), (c.name_b, b)):
        parts.append(f"\n### {name}\n\n" + table_md(SIDE_HEADERS, side_rows(recs)))
    env = c.environment or {}
    parts.append("\n### Environment\n\n")
    records = [r for r, _ in a + b]
    parts.append(f"- GPU: {gpu_line(env, records)}\n")
    for build in dict.fromkeys(r.tileiras for r in records):
        parts.append(f"- compiler: {short_build(build)} (`{build}`)\n")
    for k in ("cuda_tile", "python", "platform", "tileprobe"):
        if env.get(k):
            parts.append(f"- {k.replace('_', '-')}: {env[k]}\n")
    every = [("# where tileiras is: compile both releases into one bundle", env.get("audit_command")),
             ("# on the GPU machine: run it (releases interleaved)", env.get("run_command")),
             ("# compare", command)]
    steps = [(note, cmd) for note, cmd in every if cmd]
    if steps:
        parts.append("\nReproduce:\n\n```\n" + "\n".join(f"{n}\n{cmd}" if len(steps) > 1 else cmd
                                                       for n, cmd in steps) + "\n```\n")
    return "".join(parts)

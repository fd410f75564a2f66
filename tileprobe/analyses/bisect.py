"""``tileprobe bisect``: the first published tileiras release where a property of one variant changed.

    tileprobe bisect examples/w4a16_gemm.py --arch sm_120 --where "GATHER=True,LOOP=True,occupancy=2" \\
        --property "occupancy honoured" --good 13.3.36 --bad 13.4.92

The candidates are the published ``nvidia-cuda-tileiras`` releases from GOOD to BAD (the registry's list is the
truth; see :func:`tileprobe.toolchain.published_versions`). Each step installs the release as a managed toolchain
if needed, audits the selected case with every hint value (a verdict compares values), and evaluates the property
with the gate's expectation language (:func:`tileprobe.gate.parse_expectation`). Binary search assumes the property
changes once between GOOD and BAD; every step is printed so a non-monotonic history is visible.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..errors import TileprobeError


@dataclass
class Step:
    """One bisection step: the release, whether the property held, and the selected records' summary."""
    version: str
    holds: bool
    summary: str
    detail: list[str] = field(default_factory=list)


@dataclass
class BisectResult:
    """The steps in the order run, and the last release like GOOD and the first like BAD."""
    steps: list[Step]
    last_good: str
    first_bad: str
    prop: str


def candidates(published: Sequence[str], good: str, bad: str) -> list[str]:
    """Published releases from ``good`` to ``bad`` inclusive, in release order (either direction of time)."""
    from ..toolchain import _sort_key, match_version
    good, bad = match_version(good, published), match_version(bad, published)
    ordered = sorted(published, key=_sort_key)
    i, j = ordered.index(good), ordered.index(bad)
    return ordered[i:j + 1] if i <= j else list(reversed(ordered[j:i + 1]))


def bisect_versions(versions: Sequence[str], evaluate: Callable[[str], Step],
                    on_step: Callable[[Step], None] | None = None) -> BisectResult:
    """Binary search over ``versions`` (GOOD first, BAD last) with ``evaluate(version) -> Step``.

    Raises:
        TileprobeError: the property has the same value at GOOD and BAD (nothing to bisect).
    """
    steps: list[Step] = []

    def run(v):
        s = evaluate(v)
        steps.append(s)
        if on_step:
            on_step(s)
        return s

    first, last = run(versions[0]), run(versions[-1])
    if first.holds == last.holds:
        raise TileprobeError(f"the property is {'true' if first.holds else 'false'} at both {versions[0]} and "
                             f"{versions[-1]}: nothing to bisect. Check --good/--bad and --where.")
    lo, hi = 0, len(versions) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if run(versions[mid]).holds == first.holds:
            lo = mid
        else:
            hi = mid
    return BisectResult(steps, versions[lo], versions[hi], "")


def make_evaluator(probe: str, arch: str, where: dict, prop: str, jobs: int | None = None) -> Callable[[str], Step]:
    """An ``evaluate(version)`` that audits the selected case with that tileiras and checks ``prop``."""
    from .gate import _check_where_names, audit_selected, check, parse_expectation, select
    from ..audit.probe import load_probes
    from ..toolchain import resolve_toolchains
    parse_expectation(prop)  # fail early on a malformed property
    _check_where_names(where, load_probes(probe))  # and on a --where naming nothing

    def evaluate(version: str) -> Step:
        tc = resolve_toolchains([version], auto_install=True)[0]
        result = audit_selected(probe, arch, where=where, toolchains=[tc], jobs=jobs)
        chosen = select(result.records, where)
        if not chosen:
            raise TileprobeError(f"--where {where} matches no variant of {probe}")
        failures = check(chosen, [prop])
        summary = "; ".join(_summary(r) for r in chosen)
        return Step(version, not failures, summary, [str(f) for f in failures])

    return evaluate


def _summary(r) -> str:
    if not r.ok:
        return f"{r.status}"
    v = ", ".join(f"{h} {x['status']}" for h, x in r.verdicts.items())
    return f"{r.threads} threads × {r.registers} regs, {r.shared_bytes:,} B, {r.ctas_per_sm} CTA/SM, {v}"


def render_markdown(res: BisectResult, command: str = "") -> str:
    """The steps as a Markdown table and the conclusion, for a bug report."""
    from ..report.markdown import table_md
    rows = [[s.version, "yes" if s.holds else "no", s.summary] for s in res.steps]
    out = [f"## tileprobe bisect: `{res.prop}`\n\n", table_md(["tileiras", "holds", "variant"], rows),
           f"\nFirst release where it changed: **{res.first_bad}** (last like the good one: {res.last_good}).\n"]
    if command:
        out.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    return "".join(out)


def cmd_bisect(args) -> int:
    from ..cli import _console
    from .gate import parse_where
    from ..toolchain import published_versions
    console = _console()
    versions = candidates(published_versions(), args.good, args.bad)
    console.print(f"bisecting {len(versions)} releases: {', '.join(versions)}", highlight=False)
    evaluate = make_evaluator(args.probe, args.arch, parse_where(args.where), args.property, args.jobs)

    def show(s: Step):
        console.print(f"  tileiras {s.version}: {'holds' if s.holds else 'does not hold'} — {s.summary}",
                      highlight=False, markup=False)

    res = bisect_versions(versions, evaluate, show)
    res.prop = args.property
    if args.format == "markdown":
        sys.stdout.write(render_markdown(res, " ".join(["tileprobe", *sys.argv[1:]])))
    else:
        console.print(f"first release where `{args.property}` changed: tileiras {res.first_bad} "
                      f"(last like {versions[0]}: {res.last_good})", highlight=False, markup=False)
    if args.json:
        import json
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"property": res.prop, "first_bad": res.first_bad, "last_good": res.last_good,
                       "steps": [s.__dict__ for s in res.steps]}, f, indent=1)
    return 0


def add_parser(sub, add_common) -> None:
    p = sub.add_parser("bisect", help="first tileiras release where a property of a variant changed")
    p.add_argument("probe", metavar="PROBE")
    p.add_argument("--arch", required=True, help="one target, e.g. sm_120")
    p.add_argument("--where", required=True, help='the variant: case constants and hint values, e.g. '
                   '"GATHER=True,LOOP=True,occupancy=2"')
    p.add_argument("--property", required=True, help='what to test, in `tileprobe gate --expect` form, e.g. '
                   '"occupancy honoured", "registers<=128", "ctas_per_sm>=2", "no spills"')
    p.add_argument("--good", required=True, help="a release where the property has its old value, e.g. 13.3.36")
    p.add_argument("--bad", required=True, help="a release where it changed, e.g. 13.4.92")
    p.add_argument("--jobs", "-j", type=int, default=None)
    add_common(p)
    p.set_defaults(func=cmd_bisect)

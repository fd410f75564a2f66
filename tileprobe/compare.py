"""What changed between two result sets: two compiler versions in one audit, or two stored/JSON audits or runs.

Variants are matched by (kernel, case, hints, arch). Each pair gets a mark, in the spirit of asv's compare:

====  =========================================================================================================
``!``  regression: a hint's goal met in A (honoured or met) and not in B, fewer CTAs/SM, new stack use (spills), compiled → failed,
       slower beyond the measured noise
``*``  improvement: the reverse of any of the above
``x``  machine code or resources changed, residency and verdicts the same
``=``  same machine code and resources
``?``  only one side has the variant
====  =========================================================================================================

Verdict ranks: honoured = met > partial > ignored > infeasible; a change between honoured and met (the hint now
makes, or no longer makes, the difference) and any change of a no-goal status (changed / unchanged / baseline)
is listed as a change, not a regression. Regressions are listed first. Times are compared only when both sides ran on the same GPU; the noise bound is
the larger interquartile range of the two (or 1% of the median when a run has no spread).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from .errors import TileprobeError
from .schema import VariantRecord, load

MARKS = {"regression": "!", "improvement": "*", "changed": "x", "same": "=", "unmatched": "?"}
_RANK = {"regression": 0, "improvement": 1, "changed": 2, "unmatched": 3, "same": 4}
_VERDICT_RANK = {"honoured": 3, "met": 3, "partial": 2, "ignored": 1, "infeasible": 0}


@dataclass
class Change:
    """One matched variant: its kind (regression/improvement/changed/same/unmatched) and what changed."""
    key: tuple
    a: VariantRecord | None
    b: VariantRecord | None
    kind: str = "same"
    details: list[str] = field(default_factory=list)
    severity: int = 9

    @property
    def mark(self) -> str:
        return MARKS[self.kind]

    def label(self) -> str:
        r = self.a or self.b
        parts = [f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]]
        return f"{r.kernel} {r.arch} " + (" ".join(parts) or "declared hints")


def match_key(r: VariantRecord) -> tuple:
    """How variants are paired across result sets."""
    return (r.kernel, json.dumps(r.case, sort_keys=True, default=str), json.dumps(r.hints, sort_keys=True, default=str),
            r.arch)


def compare_records(a: list[VariantRecord], b: list[VariantRecord]) -> list[Change]:
    """Pair ``a`` and ``b`` and classify every pair (see module doc). Regressions first."""
    ia = {match_key(r): r for r in a}
    ib = {match_key(r): r for r in b}
    out = []
    for key in list(dict.fromkeys([*ia, *ib])):
        ra, rb = ia.get(key), ib.get(key)
        ch = Change(key, ra, rb)
        if ra is None or rb is None:
            ch.kind = "unmatched"
            ch.details.append("only in " + ("A" if rb is None else "B"))
        else:
            _classify(ch, ra, rb)
        out.append(ch)
    out.sort(key=lambda c: (_RANK[c.kind], c.severity))
    return out


def _classify(ch: Change, a: VariantRecord, b: VariantRecord) -> None:
    worse, better, changed = [], [], []
    if a.ok != b.ok:
        (worse if a.ok else better).append(f"status {a.status} → {b.status}")
    if a.ok and b.ok:
        for hint in sorted(set(a.verdicts) | set(b.verdicts)):
            va = a.verdicts.get(hint, {}).get("status")
            vb = b.verdicts.get(hint, {}).get("status")
            if va != vb and va and vb:
                _verdict_change(f"{hint} {va} → {vb}", va, vb, worse, better, changed)
        if (a.ctas_per_sm or 0) != (b.ctas_per_sm or 0):
            (worse if (b.ctas_per_sm or 0) < (a.ctas_per_sm or 0) else better).append(
                f"CTAs/SM {a.ctas_per_sm} → {b.ctas_per_sm}")
        if bool(a.stack_bytes) != bool(b.stack_bytes):
            (worse if b.stack_bytes else better).append(
                f"stack {a.stack_bytes} → {b.stack_bytes} B ({'new stack use: spills?' if b.stack_bytes else 'no stack'})")
        for name, va, vb in (("threads", a.threads, b.threads), ("registers", a.registers, b.registers),
                             ("shared B", a.shared_bytes, b.shared_bytes)) + (
                (("stack B", a.stack_bytes, b.stack_bytes),) if bool(a.stack_bytes) == bool(b.stack_bytes) else ()):
            if va != vb:
                changed.append(f"{name} {va} → {vb}")
        if not a.same_code(b) and not changed:
            changed.append("machine code differs")
    t = _time_change(a, b)
    if t:
        kind, text = t
        (worse if kind == "slower" else better).append(text)
    ch.details = worse + better + [c for c in changed if c not in worse + better]
    ch.kind = "regression" if worse else "improvement" if better else "changed" if changed else "same"
    ch.severity = _severity(worse or better)


def _verdict_change(text: str, va: str, vb: str, worse: list, better: list, changed: list) -> None:
    """File one verdict change under worse / better (ranked statuses that moved) or changed (see module doc)."""
    ra, rb = _VERDICT_RANK.get(va), _VERDICT_RANK.get(vb)
    if ra is None or rb is None or ra == rb:
        changed.append(text)
    else:
        (worse if rb < ra else better).append(text)


def _severity(items: list[str]) -> int:
    """Order within a kind: verdict changes first, then residency, failures, spills, time."""
    order = ("status", "CTAs/SM", "time", "stack")
    best = 0 if any(" → " in i and i.split()[1] in _VERDICT_RANK for i in items) else 9
    for i, word in enumerate(order, start=1):
        if any(item.startswith(word) for item in items):
            best = min(best, i)
    return best


def _time_change(a: VariantRecord, b: VariantRecord):
    ra, rb = a.run or {}, b.run or {}
    ma, mb = ra.get("median_us"), rb.get("median_us")
    if not ma or not mb or ra.get("status") != "ok" or rb.get("status") != "ok":
        return None
    if (ra.get("gpu") or {}).get("name") != (rb.get("gpu") or {}).get("name"):
        return None
    noise = max(_iqr(ra), _iqr(rb), 0.01 * min(ma, mb))
    if abs(mb - ma) <= noise:
        return None
    return ("slower" if mb > ma else "faster"), f"time {ma:.1f} → {mb:.1f} µs ({mb / ma:.2f}x, noise ±{noise:.1f})"


def _iqr(run: dict) -> float:
    p25, p75 = run.get("p25_us"), run.get("p75_us")
    return float(p75 - p25) if p25 is not None and p75 is not None else 0.0


def split_by_compiler(records: list[VariantRecord]) -> tuple[list[VariantRecord], list[VariantRecord], str, str]:
    """An audit with two tileiras builds → (A records, B records, A build, B build), in the audit's order."""
    builds = list(dict.fromkeys(r.tileiras for r in records))
    if len(builds) != 2:
        raise TileprobeError(f"need exactly two compiler builds to compare, found {len(builds)}: {builds}. "
                             "Audit with --tileiras A,B or give two result files.")
    return ([r for r in records if r.tileiras == builds[0]], [r for r in records if r.tileiras == builds[1]],
            builds[0], builds[1])


def _load_side(spec: str, store_path: str | None) -> tuple[list[VariantRecord], str]:
    if os.path.exists(spec):
        recs, env = load(spec)
        return recs, f"{spec} ({', '.join(env.get('tileiras', []))})"
    from .store import Store
    store = Store.open(store_path, must_exist=bool(store_path))
    try:
        recs = store.audit_records(spec)
    except (AttributeError, KeyError) as e:
        raise TileprobeError(f"{spec!r} is neither a result file nor a stored audit id; "
                             "see `tileprobe history` for ids") from e
    return recs, f"stored audit {spec}"


# --- rendering -------------------------------------------------------------------------------------------------

def render_terminal(changes: list[Change], name_a: str, name_b: str, console=None) -> None:
    """A rich table: mark, variant, A and B resources/verdicts, what changed."""
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    t = Table(title=f"A: {name_a}\nB: {name_b}", title_justify="left")
    for h in ("", "variant", "A", "B", "what changed"):
        t.add_column(h)
    style = {"!": "bold red", "*": "green", "x": "yellow"}
    for c in changes:
        m = c.mark
        t.add_row(f"[{style[m]}]{m}[/]" if m in style else m, c.label(), _side(c.a), _side(c.b),
                  "; ".join(c.details))
    console.print(t)
    console.print("! regression   * improvement   x code or resources changed, same residency and verdicts   "
                  "= same machine code   ? on one side only", highlight=False, markup=False)
    n = sum(c.kind == "regression" for c in changes)
    console.print(f"{n} regression(s), {sum(c.kind == 'improvement' for c in changes)} improvement(s), "
                  f"{sum(c.kind == 'changed' for c in changes)} changed, {sum(c.kind == 'same' for c in changes)} same")


def _side(r: VariantRecord | None) -> str:
    if r is None:
        return "-"
    if not r.ok:
        return r.status
    v = ", ".join(f"{h} {x['status']}" for h, x in r.verdicts.items())
    t = f"; {r.run['median_us']:.1f} µs" if r.run and r.run.get("median_us") else ""
    return f"{r.threads}×{r.registers}r {r.shared_bytes:,}B {r.ctas_per_sm}/SM {v}{t}"


def render_markdown(changes: list[Change], name_a: str, name_b: str, environment: dict | None = None,
                    command: str = "") -> str:
    """Markdown for a bug report: the environment, the changed variants (regressions first), the repro command."""
    from .report.markdown import environment_md, table_md
    parts = ["## tileprobe compare\n\n", f"- A: {name_a}\n- B: {name_b}\n"]
    if environment:
        parts.append(environment_md(environment))
    if command:
        parts.append(f"\nReproduce:\n\n```\n{command}\n```\n")
    rows = [[c.mark, c.label(), _side(c.a), _side(c.b), "; ".join(c.details)] for c in changes if c.kind != "same"]
    parts.append("\n" + table_md(["", "variant", "A", "B", "what changed"], rows) if rows else "\nNo differences.\n")
    same = sum(c.kind == "same" for c in changes)
    parts.append(f"\n{same} variant(s) identical (same machine code and resources).\n")
    return "".join(parts)


def to_json(changes: list[Change]) -> list[dict]:
    """JSON-ready rows: kind, mark, variant label, details, and both records."""
    return [{"kind": c.kind, "mark": c.mark, "variant": c.label(), "details": c.details,
             "a": c.a.to_dict() if c.a else None, "b": c.b.to_dict() if c.b else None} for c in changes]


# --- CLI -------------------------------------------------------------------------------------------------------

def cmd_compare(args) -> int:
    from .cli import _console
    env: dict = {}
    if args.probe:
        from .audit import audit
        from .cli import _split, _toolchains
        if not args.tileiras or len(_split(args.tileiras)) != 2:
            raise TileprobeError("with --probe, give two compilers: --tileiras A,B (e.g. 13.3.36,13.4.92)")
        result = audit([args.probe], _split(args.arch), toolchains=_toolchains(args.tileiras), jobs=args.jobs)
        a, b, name_a, name_b = split_by_compiler(result.records)
        env = result.environment
        if args.format == "table":
            from .report.terminal import render_audit
            render_audit(result.records, _console())
    elif len(args.results) == 2:
        a, name_a = _load_side(args.results[0], args.store)
        b, name_b = _load_side(args.results[1], args.store)
    elif len(args.results) == 1:
        recs, env = load(args.results[0])
        a, b, name_a, name_b = split_by_compiler(recs)
    else:
        raise TileprobeError("compare what? give two result files (or stored audit ids), one file holding two "
                             "compiler builds, or --probe P --tileiras A,B")
    changes = compare_records(a, b)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(to_json(changes), f, indent=1, default=str)
    if args.format == "markdown":
        sys.stdout.write(render_markdown(changes, name_a, name_b, env, " ".join(["tileprobe", *sys.argv[1:]])))
    elif args.format == "table":
        render_terminal(changes, name_a, name_b, _console())
    return 0


def add_parser(sub, add_common) -> None:
    p = sub.add_parser("compare", help="what changed between two compiler versions or two result sets")
    p.add_argument("results", nargs="*", metavar="RESULT", help="two result JSON files / stored audit ids, or one "
                   "file with two compiler builds")
    p.add_argument("--probe", help="audit this probe with the two --tileiras versions and compare them")
    p.add_argument("--tileiras", metavar="A,B", help="two compiler versions (with --probe)")
    p.add_argument("--arch", default="sm_90,sm_120", help="targets (with --probe)")
    p.add_argument("--jobs", "-j", type=int, default=None)
    p.add_argument("--store", metavar="PATH", help="results store for stored audit ids")
    add_common(p)
    p.set_defaults(func=cmd_compare)

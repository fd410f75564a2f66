"""Group distinct launches into probe plans: one probe per kernel function, one case per distinct launch.

A *case* is one JIT signature (when :mod:`.signatures` could compute it; otherwise one set of arguments): launches
that differ only in what the signature ignores (a shape that keeps its divisibility, a scalar's value, the grid)
fall into one case, represented by its most frequent launch. The hints a case was launched with (declared, or set
by ``replace_hints``) are values of the probe's hint grid, so each launched (case, hints) pair is one variant. Cases are ranked by launch count and the first ``top`` are written; the
rest are summarised, so a program that launches thousands of shapes gives one probe with its most frequent ones.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from tileprobe.record.model import KernelRef, Launch

#: Occupancy values a default hint grid picks neighbours from.
OCCUPANCY_LADDER = (1, 2, 4, 8, 16)
HINT_MODES = ("around", "launched")


@dataclass
class Case:
    """Launches JIT compiles to one cubin; ``launches[0]`` (the most frequent) represents them."""
    label: str
    launches: list[Launch]
    symbol: str | None = None

    @property
    def rep(self) -> Launch:
        """The representative launch of the case (the first, most frequent one): its arguments are written."""
        return self.launches[0]

    @property
    def count(self) -> int | None:
        """Launches in this case; None when a source does not count (the compile cache)."""
        counts = [la.count for la in self.launches]
        known = [c for c in counts if c is not None]
        return None if len(known) < len(counts) else sum(known)

    def hint_sets(self) -> list[tuple[dict, int | None]]:
        """The distinct launch hints of this case's launches with their counts, most frequent first."""
        out: dict[str, list] = {}
        for la in self.launches:
            key = json.dumps(la.launch_hints, sort_keys=True, default=repr)
            if key not in out:
                out[key] = [la.launch_hints, 0]
            out[key][1] = None if out[key][1] is None or la.count is None else out[key][1] + la.count
        return sorted((tuple(v) for v in out.values()), key=lambda hv: -(hv[1] or 0))

    def sites(self) -> Counter:
        """Call sites (``file:line``) of the case's launches with their launch counts."""
        out: Counter[str] = Counter()
        for la in self.launches:
            out.update(la.sites)
        return out

    def launch_sites(self) -> Counter:
        """Where ``ct.launch`` itself was called (inside the library), with launch counts."""
        out: Counter[str] = Counter()
        for la in self.launches:
            out.update(la.launch_sites)
        return out


@dataclass
class ProbePlan:
    """One probe to write: the kernel, its cases (``top`` most frequent) and those left out, the hint grid."""
    kernel: KernelRef
    cases: list[Case]
    omitted: list[Case] = field(default_factory=list)
    hints: dict = field(default_factory=dict)
    archs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int | None:
        """Launches of this kernel, written and left out; None when a source does not count them."""
        counts = [c.count for c in self.cases + self.omitted]
        known = [n for n in counts if n is not None]
        return None if len(known) < len(counts) else sum(known)

    @property
    def distinct(self) -> int:
        """Distinct launches (argument layouts × hints × grids) of this kernel, written and left out."""
        return sum(len(c.launches) for c in self.cases + self.omitted)

    def variant_hints(self, launch_hints: dict) -> dict:
        """The hint values of the variant that reproduces a launch with these launch hints (None: as declared)."""
        return {h: plain_hint(launch_hints.get(h), self.archs) for h in self.hints}


def plain_hint(value, archs=()):
    """A launch hint as a plain value: a ``ByTarget`` (recorded as ``{"by_target": …, "default": …}``) resolved for
    the one recorded arch, else its default."""
    if isinstance(value, dict) and "by_target" in value:
        if len(archs) == 1 and archs[0] in value["by_target"]:
            return value["by_target"][archs[0]]
        return value.get("default")
    return value


def _neighbours(v: int) -> list[int]:
    lower = [x for x in OCCUPANCY_LADDER if x < v]
    higher = [x for x in OCCUPANCY_LADDER if x > v]
    return ([lower[-1]] if lower else []) + ([higher[0]] if higher else [])


def hint_grid(cases: list[Case], declared: dict, archs=(), mode: str = "around") -> dict:
    """The probe's ``hints=``: every hint set at launch with its launched values (``None``: as declared), and with
    ``mode="around"`` the occupancy's neighbours in 1, 2, 4, 8, 16 (of the declared value, or of 1 when none)."""
    sets = [hints for c in cases for hints, _ in c.hint_sets()]
    names = list(dict.fromkeys(h for hints in sets for h in hints))
    if mode == "around" and "occupancy" not in names:
        names.append("occupancy")
    grid = {}
    for h in names:
        values = []
        for hints in sets:
            v = plain_hint(hints.get(h), archs)
            values.append(v)
            if mode == "around" and h == "occupancy":
                base = v if v is not None else plain_hint(declared.get("occupancy"), archs)
                values += _neighbours(base if isinstance(base, int) else 1)
        values = list(dict.fromkeys(values))
        values.sort(key=lambda x: (x is not None, x if x is not None else 0))
        if values != [None]:
            grid[h] = values
    return grid


def group(launches: list[Launch], *, top: int = 10, hints: str = "around") -> list[ProbePlan]:
    """Probe plans, one per kernel function, in order of launch count.

    Args:
        launches: distinct launches (merged), with ``symbol`` set where the JIT signature is known.
        top: cases written per kernel (the most frequent); the others are listed in the plan's ``omitted``.
        hints: ``"around"`` (launched hints plus occupancy neighbours) or ``"launched"`` (only launched values).
    """
    if hints not in HINT_MODES:
        raise ValueError(f"hints={hints!r}: give one of {', '.join(HINT_MODES)}")
    per_kernel: dict[tuple, list[Launch]] = {}
    for la in launches:
        per_kernel.setdefault(la.kernel.key, []).append(la)
    plans = []
    for group_launches in per_kernel.values():
        cases: dict[str, list[Launch]] = {}
        for la in group_launches:
            key = la.symbol or json.dumps(la.args, sort_keys=True, default=repr)
            cases.setdefault(key, []).append(la)
        ranked = sorted(cases.values(), key=lambda ls: -sum(la.count or 0 for la in ls))
        made = [Case(f"L{i}", sorted(ls, key=lambda la: -(la.count or 0)), ls[0].symbol)
                for i, ls in enumerate(ranked, 1)]
        kernel = group_launches[0].kernel
        archs = sorted({a for la in group_launches for a in la.archs})
        plan = ProbePlan(kernel, made[:top], made[top:], archs=archs)
        plan.hints = hint_grid(plan.cases, kernel.declared, archs, hints)
        plans.append(plan)
    plans.sort(key=lambda p: -(p.total or 0))
    return plans

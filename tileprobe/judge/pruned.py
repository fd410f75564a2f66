"""The pruned occupancy space as data: per case, the occupancy values that build distinct kernels.

Values whose builds have the same machine code and resources (:func:`_code_classes`, the advice's
rule) are one kernel: timing more than one of them measures the same code. Per group of variants that
differ only in occupancy (kernel, arch, compiler, case, other hints: the advice's groups), the first value of each
identical set is kept — the hint-less build first, then the lowest value — and the others name the value they
build the same as. Variants that cannot launch (0 CTAs/SM) or are predicted to hang are left out of the space.

``audit --json`` writes :func:`pruned_space` under ``pruned_space``; the advice prints :func:`paste_lines`, one
Python list per kernel, arch and compiler that a user pastes into a configuration list (TileGym's
``_get_configs``, an ``exhaustive_search`` space).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tileprobe.model.arch import has_limits
from tileprobe.schema import VariantRecord, short_build


@dataclass(frozen=True)
class PrunedCase:
    """One group's pruned space.

    Attributes:
        kernel, arch, tileiras: the group's kernel, target and compiler build (the banner).
        case: the case constants (``{"TILE": 128}``); hints: the other hints set (``{"num_ctas": 2}``).
        distinct: the occupancy values that build distinct kernels, in order (None: the hint-less build, the
            kernel's own value).
        same_as: each left-out value (as text, JSON keys are strings) → the kept value it builds the same as.
    """
    kernel: str
    arch: str
    tileiras: str
    case: dict
    hints: dict
    distinct: list = field(default_factory=list)
    same_as: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready (``audit --json``'s ``pruned_space`` entries)."""
        return {"kernel": self.kernel, "arch": self.arch, "tileiras": self.tileiras, "case": self.case,
                "hints": self.hints, "distinct": {"occupancy": self.distinct}, "same_as": {"occupancy": self.same_as}}

    def configs(self) -> list[dict]:
        """The distinct configurations as dicts: case, other hints, and ``occupancy`` unless hint-less. A value
        stored as a JSON list is given back as the tuple the probe wrote (``TILE=(256, 256, 64)``: a list would
        not paste into a configuration list whose kernel takes a tuple constant)."""
        fixed = {k: _as_tuple(v) for k, v in {**self.case, **self.hints}.items()}
        return [{**fixed, **({} if v is None else {"occupancy": v})} for v in self.distinct]


def _as_tuple(value):
    """``value`` with its lists, nested ones too, turned into tuples (JSON keeps a probe's tuples as lists)."""
    return tuple(_as_tuple(x) for x in value) if isinstance(value, (list, tuple)) else value


def pruned_space(records: Iterable[VariantRecord]) -> list[PrunedCase]:
    """The pruned occupancy space of ``records`` (module doc), one :class:`PrunedCase` per group that sets
    occupancy, in the advice's order."""
    out = []
    for rows in _occupancy_groups(records):
        launchable = [r for r in rows if r.ctas_per_sm and not r.hang_risk]
        if not launchable:
            continue
        r0 = rows[0]
        case = PrunedCase(r0.kernel, r0.arch, r0.tileiras, dict(r0.case),
                          {k: v for k, v in r0.hints.items() if k != "occupancy" and v is not None})
        for cls in _code_classes(launchable):
            kept = _value(cls[0])
            case.distinct.append(kept)
            for other in cls[1:]:
                case.same_as[str(_value(other))] = kept
        out.append(case)
    return out


def _value(r: VariantRecord):
    return None if r.hintless("occupancy") else r.hint("occupancy")


def paste_lines(space: Iterable[PrunedCase]) -> list[str]:
    """One line per kernel, arch and compiler: ``vadd sm_90 tileiras 13.4.92: distinct builds (paste into a
    configuration list): [{'TILE': 256, 'occupancy': 1}, …]`` — every case's distinct configurations, as a Python
    list literal."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for c in space:
        groups.setdefault((c.kernel, c.arch, c.tileiras), []).extend(c.configs())
    return [f"{kernel} {arch} {short_build(build)}: distinct builds (paste into a configuration list): {configs!r}"
            for (kernel, arch, build), configs in groups.items()]


def _occupancy_groups(records: Iterable[VariantRecord]) -> list[list[VariantRecord]]:
    """The compiled variants that differ only in occupancy, one list per group, the hint-less build first, then by
    value (the hint-less build without a declared value counts: it is what the hint is weighed against)."""
    groups: dict[tuple, list[VariantRecord]] = defaultdict(list)
    for r in records:
        if r.ok and has_limits(r.arch) and (r.hint("occupancy") is not None or r.hintless("occupancy")):
            groups[r.group_key("occupancy")].append(r)
    keyed = [sorted(rows, key=lambda r: (not r.hintless("occupancy"), int(r.hint("occupancy") or 0)))
             for rows in groups.values()]
    return [rows for rows in keyed if any(r.hint("occupancy") is not None and not r.hintless("occupancy")
                                          for r in rows)]


def _code_classes(rows: list[VariantRecord]) -> list[list[VariantRecord]]:
    """``rows`` split into sets with the same machine code and resources (identical builds), in ``rows``' order."""
    classes: list[list[VariantRecord]] = []
    for r in rows:
        home = next((c for c in classes if _same_build(c[0], r)), None)
        if home is None:
            classes.append([r])
        else:
            home.append(r)
    return classes


def _same_build(a: VariantRecord, b: VariantRecord) -> bool:
    res = lambda x: (x.threads, x.registers, x.shared_bytes, x.stack_bytes, tuple(x.cluster_dims or ()))
    return a.same_code(b) and res(a) == res(b)

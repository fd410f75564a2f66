"""The search space of a tune: problems, and per problem the configurations left after the probe's constraints.

A probe's case names split in two (:class:`~tileprobe.probe.define.Probe` ``tunable=``): the **tunable** names are knobs
(tile sizes, a TMA switch) and the others are the **problem** (shapes, dtypes). Each combination of problem values
is tuned on its own, over every combination of tunable values × hint values — a :class:`Config`. A probe without
``tunable`` tunes the hints only, once per case.

Constraints (``constraint=`` / ``constraints=``: functions ``(case, hints) -> bool``) run here, before anything is
compiled; each rejection is counted under the constraint's name.

**The default configuration** of a problem (what a candidate's output is compared with when the probe has no
``reference``): the probe's ``default={name: value}`` where given; otherwise, per tunable name its first value,
and per hint ``None`` (as the kernel declares) when listed, else cuTile's own default (occupancy 1, num_ctas 1,
opt_level 3; ``cuda/tile/_compiler_options.py``, cuda-tile 1.7.0) when listed, else the first listed value.
It must be one of the configurations the constraints keep; when it is not, :attr:`Problem.default` is ``None``
and :attr:`Problem.default_note` says why.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tileprobe.errors import ProbeError
from tileprobe.jsonrecord import from_dict
from tileprobe.probe.define import Probe, _probe_error_from
from tileprobe.schema import canonical, value_key

#: cuTile's value of each kernel hint when a kernel declares none (cuda/tile/_compiler_options.py, 1.7.0); the
#: same table as ``tileprobe.run.session.HINT_DEFAULTS`` (not imported: that module belongs to the GPU side).
CUTILE_HINT_DEFAULTS = {"occupancy": 1, "num_ctas": 1, "opt_level": 3}


@dataclass(frozen=True)
class Config:
    """One candidate configuration of a problem: tunable case values and hint values, as (name, value) pairs in
    the probe's declaration order (hashable)."""
    tunables: tuple
    hints: tuple

    def case(self, problem: dict) -> dict:
        """The full case (problem values, then tunable values) handed to the probe's ``args`` and ``grid``."""
        return {**problem, **dict(self.tunables)}

    @property
    def hints_dict(self) -> dict:
        """The configuration's hints as a dict (hint name → value)."""
        return dict(self.hints)

    @property
    def label(self) -> str:
        """``TILE_M=128 occupancy=2`` (``declared hints`` when there is nothing to show)."""
        parts = [f"{k}={_short(v)}" for k, v in (*self.tunables, *self.hints)]
        return " ".join(parts) or "declared hints"

    def to_dict(self) -> dict:
        """``{"case": {tunable: value}, "hints": {hint: value}}`` as JSON reads it back."""
        return {"case": canonical(dict(self.tunables)), "hints": canonical(dict(self.hints))}

    def key(self) -> str:
        """A stable text key of the configuration (sorted JSON of :meth:`to_dict`)."""
        return value_key(self.to_dict())


def _short(v: Any) -> str:
    """A value in a label as the audit tables print it (tuples ``128×128×128`` everywhere)."""
    if isinstance(v, (tuple, list)):
        return "×".join(str(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class ProbeInfo:
    """What the tune's own process knows of a probe it loaded from a file: its names and facts, as data.
    The probe's code (``args``, ``grid``, constraints) ran in a contained child (:mod:`tileprobe.tune.static`),
    never here. ``reference`` / ``grid``: True when the probe has one, else None (as :class:`Probe` reads)."""
    source: str
    index: int
    label: str
    lineno: int | None = None
    reference: bool | None = None
    grid: bool | None = None
    source_sha256: str = ""
    args_context: tuple = ()      # the context keywords its args() takes (arch, hints, num_sms)


@dataclass
class Problem:
    """One problem case of one probe and its configurations.

    values: the problem's case values (``{}`` when every case name is tunable). configs: the configurations the
    constraints kept, in declaration order. rejected: constraint name → configurations it rejected (a
    configuration is counted under the first constraint that rejects it). default: the default configuration
    (module doc) or None, with ``default_note`` saying why not.
    """
    probe: Probe | ProbeInfo
    values: dict
    configs: list[Config] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)
    default: Config | None = None
    default_note: str = ""
    #: configurations to take first (a new shape's warm start: :func:`tileprobe.tune.warm.warm_first`)
    first: tuple[Config, ...] = ()

    @property
    def label(self) -> str:
        """``M=4096 N=4096`` or ``all cases`` when the problem has no values."""
        return " ".join(f"{k}={_short(v)}" for k, v in self.values.items()) or "(one problem)"

    @property
    def total(self) -> int:
        """Configurations before the constraints."""
        return len(self.configs) + sum(self.rejected.values())

    def key(self) -> str:
        """The problem as stable JSON (sorted keys; the store's and the export's key)."""
        return value_key(canonical(self.values))


def problem_data(p: Problem, source_sha256: str = "") -> dict:
    """``p`` as data for :mod:`tileprobe.probe.wire` (its probe as :class:`ProbeInfo` fields)."""
    probe = p.probe
    info = {"source": probe.source or "", "index": probe.index, "label": probe.label,
            "lineno": getattr(probe, "lineno", None), "reference": True if probe.reference is not None else None,
            "grid": True if probe.grid is not None else None, "source_sha256": source_sha256,
            "args_context": list(getattr(probe, "args_context", ()))}
    cfg = lambda c: [list(c.tunables), list(c.hints)] if c is not None else None
    return {"probe": info, "values": dict(p.values), "configs": [cfg(c) for c in p.configs],
            "rejected": dict(p.rejected), "default": cfg(p.default), "default_note": p.default_note}


@dataclass
class _ProblemData:
    """A problem as :func:`problem_data` writes it and the loader child sends it (checked by its fields on reading:
    :func:`tileprobe.jsonrecord.from_dict`)."""
    probe: ProbeInfo
    values: dict
    configs: list
    rejected: dict
    default: Any
    default_note: Any


def problem_from_data(d: dict) -> Problem:
    """The :class:`Problem` of :func:`problem_data` (its probe a :class:`ProbeInfo`). Raises
    :class:`~tileprobe.jsonrecord.FieldError` (a ValueError naming the field), TypeError or IndexError for data of
    another shape (a configuration that is not a pair of lists of pairs)."""
    m = from_dict(_ProblemData, d, where="a problem")
    info = replace(m.probe, args_context=tuple(str(x) for x in m.probe.args_context or ()))
    cfg = lambda x: Config(tuple(tuple(kv) for kv in x[0]), tuple(tuple(kv) for kv in x[1]))
    default = None if m.default is None else cfg(m.default)
    return Problem(info, dict(m.values), [cfg(c) for c in m.configs], dict(m.rejected), default,
                   str(m.default_note))


def constraint_name(fn: Callable) -> str:
    """A constraint's name in reports: its function name, or ``<lambda> (file.py:12)`` for a lambda."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    code = getattr(fn, "__code__", None)
    if name == "<lambda>" and code is not None:
        return f"<lambda> ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    return name


def constraints_of(probe: Probe) -> list[Callable]:
    """The probe's constraints: ``constraints`` then ``constraint``."""
    return [*probe.constraints, *([probe.constraint] if probe.constraint is not None else [])]


def _cross(grid: dict) -> list[tuple]:
    names = list(grid)
    return [tuple(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def problems(probe: Probe) -> list[Problem]:
    """Every problem of ``probe`` with its configurations after the constraints, in declaration order.

    Raises:
        ProbeError: a constraint raised (pointing at its line in the probe file) or returned None.
    """
    tunable = [n for n in probe.cases if n in set(probe.tunable)]
    problem_grid = {n: v for n, v in probe.cases.items() if n not in set(probe.tunable)}
    tune_grid = _cross({n: probe.cases[n] for n in tunable})
    hint_grid = _cross(dict(probe.hints))
    checks = constraints_of(probe)
    out = []
    for values in _cross(problem_grid):
        prob = Problem(probe, dict(values), rejected={constraint_name(fn): 0 for fn in checks})
        for tunables, hints in itertools.product(tune_grid, hint_grid):
            cfg = Config(tunables, hints)
            rejected_by = _first_rejection(checks, cfg.case(prob.values), dict(hints), probe)
            if rejected_by is None:
                prob.configs.append(cfg)
            else:
                prob.rejected[rejected_by] = prob.rejected.get(rejected_by, 0) + 1
        prob.rejected = {k: n for k, n in prob.rejected.items() if n}   # declaration order, counted ones
        prob.default, prob.default_note = default_config(probe, prob.configs, bool(checks))
        out.append(prob)
    return out


def _first_rejection(checks: Sequence[Callable], case: dict, hints: dict, probe: Probe) -> str | None:
    for fn in checks:
        try:
            ok = fn(dict(case), dict(hints))
        except Exception as e:  # the probe's own code failed: say where
            raise _probe_error_from(e, probe.source, f"constraint {constraint_name(fn)} failed on case {case} "
                                    f"hints {hints}") from e
        if ok is None:   # a forgotten return: not a silent rejection
            raise ProbeError(f"constraint {constraint_name(fn)} returned None for case {case} hints {hints}: "
                             "return True to keep a configuration, False to drop it", probe.source)
        if not ok:
            return constraint_name(fn)
    return None


def default_values(probe: Probe) -> dict:
    """The default configuration's values by name (tunable case names and hints; module doc)."""
    out = {}
    for n in probe.tunable:
        out[n] = list(probe.cases[n])[0]
    for h, values in probe.hints.items():
        values = list(values)
        if None in values:
            out[h] = None
        elif h in CUTILE_HINT_DEFAULTS and CUTILE_HINT_DEFAULTS[h] in values:
            out[h] = CUTILE_HINT_DEFAULTS[h]
        else:
            out[h] = values[0]
    out.update(probe.default or {})
    return out


def default_config(probe: Probe, configs: Sequence[Config], constrained: bool = False) -> tuple[Config | None, str]:
    """The default configuration among ``configs`` and a note (empty when found; else why not)."""
    want = default_values(probe)
    for cfg in configs:
        if all(value_key(v) == value_key(want[k]) for k, v in (*cfg.tunables, *cfg.hints)):
            return cfg, ""
    label = " ".join(f"{k}={v}" for k, v in want.items()) or "declared hints"
    why = "a constraint rejected it" if constrained else "it is not among the configurations"
    return None, f"default configuration {label}: {why}; candidates cannot be checked without reference="

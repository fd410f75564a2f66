"""The static stage of a tune, on any CPU: compile the candidates, drop the failures, time identical launches once.

1. **Compile** every configuration the constraints kept, through :func:`tileprobe.audit.audit` (parallel compile
   processes, the store: what is stored is not compiled again) — or take the records of a ``--bundle`` made by
   ``tileprobe audit --bundle`` where tileiras is.
2. **Drop, counting per rule**: a configuration whose compile failed (the rule is its status: ``compile_error``,
   ``compiler_crash``, ``timeout``, ``probe_error``), or that the bundle lacks (``not_in_bundle``).
3. **Exact duplicates** (rule ``duplicate_launch``): candidates whose launches are identical are timed once and
   reported as one group, every member named. Identical means all of: the same machine code and resources
   (``code_sha256``, threads, registers, shared and stack bytes, cluster shape), the same data in the cubin's
   constant banks and global-initialiser sections (hashed here), the same grid — the probe's
   ``grid(case, hints, num_sms)`` for the target GPU's SM count — and the same runtime arguments (every launch
   argument that is not a compile-time constant: array shapes, dtypes, strides, alignment and fill, scalars).

Nothing else is a filter: a hint judged ``ignored`` or ``infeasible`` stays a candidate whenever its launch
differs (on the H200 the persistent RMSNorm at occupancy 16 runs the occupancy-8 cubin on a grid of SMs × 16 and
was faster than occupancy 8 with TMA on, 1,229 vs 1,309 µs), and spills are reported, not filtered.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import ProbeError
from ..audit.probe import load_probes
from ..schema import VariantRecord, canonical, value_key
from ..audit.signature import ArraySpec
from .space import Config, Problem, problems

DUPLICATE = "duplicate_launch"
NOT_IN_BUNDLE = "not_in_bundle"


@dataclass
class Candidate:
    """One configuration of one problem and what the static stage made of it.

    status: ``ok`` or the rule that dropped it (a compile status, ``not_in_bundle``). same_as: for a duplicate,
    the candidate timed in its place; members: for a timed candidate, its group (itself first).
    """
    problem: Problem
    config: Config
    record: VariantRecord | None = None
    status: str = "ok"
    reason: str = ""
    grid: tuple | None = None
    launch_key: str | None = None
    same_as: "Candidate | None" = None
    members: list = field(default_factory=list)

    @property
    def id(self) -> str:
        """The candidate's name in the race and the reports: its configuration's label."""
        return self.config.label

    @property
    def case(self) -> dict:
        """The full case (problem then tunable values) for the probe's ``args`` and ``grid``."""
        return self.config.case(self.problem.values)


@dataclass
class Plan:
    """One problem's candidates after the static stage; ``dropped``: rule → count (constraints included, as
    ``constraint:<name>``)."""
    problem: Problem
    candidates: list[Candidate]
    dropped: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def raced(self) -> list[Candidate]:
        """The candidates the GPU stage times: compiled, and not a duplicate of another."""
        return [c for c in self.candidates if c.status == "ok" and c.same_as is None]

    def find(self, config: Config | None) -> Candidate | None:
        """The candidate of ``config``, or None (also for ``config=None``)."""
        return next((c for c in self.candidates if config is not None and c.config == config), None)


def load_space(probe_paths: Sequence[str], *, where: dict | None = None, cases: dict | None = None,
               hints: dict | None = None) -> tuple[list[Problem], list[str]]:
    """Every problem of every probe file; probe errors (file and line) are collected, the others go on.

    ``cases`` / ``hints`` replace the probes' values (``--case`` / ``--hint``,
    :func:`tileprobe.audit.where.apply_overrides`); ``where`` keeps the configurations whose full case and hints
    match it (``--where``), and the problems left with any.
    """
    from ..audit.where import apply_overrides, same_value
    out, errors = [], []
    for path in probe_paths:
        try:
            for probe in apply_overrides(load_probes(path), cases, hints):
                out.extend(problems(probe))
        except ProbeError as e:
            errors.append(str(e))
    if where:
        def keep(p: Problem, c) -> bool:
            values = {**c.case(p.values), **c.hints_dict}
            return all(k in values and same_value(values[k], v) for k, v in where.items())
        kept = [[c for c in p.configs if keep(p, c)] for p in out]
        if out and not any(kept):
            from ..audit.where import WhereError, format_value
            seen: dict[str, dict] = {k: {} for k in where}
            for p in out:
                for c in p.configs:
                    values = {**c.case(p.values), **c.hints_dict}
                    for k in where:
                        if k in values:
                            seen[k].setdefault(repr(values[k]), values[k])
            text = ",".join(f"{k}={format_value(v)}" for k, v in where.items())
            raise WhereError(f"--where {text} matches no configuration to tune; " + "; ".join(
                f"{k} takes {', '.join(format_value(v) for v in vals.values()) or 'no value (not a case or hint)'}"
                for k, vals in seen.items()))
        for p, configs in zip(out, kept):
            p.configs = configs
        out = [p for p in out if p.configs]
    return out, errors


def _want_key(path: str, label: str, case: dict, hints: dict) -> tuple:
    return (os.path.basename(path), label, value_key(canonical(case)), value_key(canonical(hints)))


def wanted(problems_: Sequence[Problem]) -> set[tuple]:
    """The (probe file name, probe label, case, hints) keys of every configuration to compile."""
    return {_want_key(p.probe.source or "", p.probe.label, c.case(p.values), c.hints_dict)
            for p in problems_ for c in p.configs}


def compile_records(probe_paths: Sequence[str], problems_: Sequence[Problem], arch: str, **audit_kw):
    """Compile the configurations (and only them) for ``arch`` with :func:`tileprobe.audit.audit`; ``audit_kw``
    goes to it (store, jobs, timeout_s, progress, toolchains). Returns the AuditResult."""
    from ..audit import audit
    keys = wanted(problems_)
    return audit(list(probe_paths), [arch],
                 select=lambda v: _want_key(v.probe_path, v.probe_name, v.case_dict, v.hints_dict) in keys,
                 **audit_kw)


def make_plans(problems_: Sequence[Problem], records: Sequence[VariantRecord], arch: str,
               missing_status: str = "not_compiled") -> list[Plan]:
    """Match each configuration to its record (same probe file name, label, case, hints and arch); count the
    constraint rejections and the failed compiles per rule."""
    by_key = {_want_key(r.probe, r.kernel, r.case, r.hints): r for r in records if r.arch == arch}
    plans = []
    for p in problems_:
        plan = Plan(p, [], {f"constraint:{k}": n for k, n in p.rejected.items()})
        for cfg in p.configs:
            rec = by_key.get(_want_key(p.probe.source or "", p.probe.label, cfg.case(p.values), cfg.hints_dict))
            c = Candidate(p, cfg, rec)
            if rec is None:
                c.status, c.reason = missing_status, f"no {arch} record for it"
            elif not rec.ok:
                c.status, c.reason = rec.status, (rec.error or "").strip()
            if c.status != "ok":
                plan.dropped[c.status] = plan.dropped.get(c.status, 0) + 1
            plan.candidates.append(c)
        if p.default_note and p.probe.reference is None:
            plan.notes.append(p.default_note)
        plans.append(plan)
    return plans


def constant_data_sha256(cubin: bytes) -> str:
    """SHA-256 over the cubin's constant-bank and global-initialiser sections (name without the kernel suffix,
    type, size, and bytes unless NOBITS): data the machine code reads that ``code_sha256`` does not cover."""
    import io
    from elftools.elf.elffile import ELFFile
    h = hashlib.sha256()
    elf = ELFFile(io.BytesIO(cubin))
    items = []
    for s in elf.iter_sections():
        if s.name.startswith((".nv.constant", ".nv.global")):
            kind = re.sub(r"^(\.nv\.constant\d+)\..*$", r"\1", s.name)
            data = b"" if s["sh_type"] == "SHT_NOBITS" else s.data()
            items.append((kind, s["sh_type"], s["sh_size"], data))
    for kind, typ, size, data in sorted(items, key=lambda x: (x[0], x[2], x[3])):
        h.update(f"{kind}|{typ}|{size}|".encode() + hashlib.sha256(data).digest())
    return h.hexdigest()


def _arg_key(arg: Any) -> Any:
    if isinstance(arg, ArraySpec):
        init = {k: _fill_key(v) if callable(v) else v for k, v in (arg.init or {}).items()}
        return {"array": arg.describe(), "init": init}
    if isinstance(arg, (list, tuple)):
        return [_arg_key(a) for a in arg]
    return [type(arg).__name__, repr(arg)]


def _fill_key(fn: Callable) -> str:
    cells = getattr(fn, "__closure__", None) or ()
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}" + \
        repr([c.cell_contents for c in cells])


def launch_key(c: Candidate, num_sms: int, cubin: bytes | None) -> tuple[str, tuple]:
    """The identity of a candidate's launch (module doc) as text, and its grid.

    Raises:
        ProbeError: the probe's ``grid`` or ``args`` failed, or the probe has no ``grid``.
    """
    from ..audit.probe import context_kwargs
    from ..run.launch import grid3
    from ..run.worker import grid_hints, launch_context
    probe, rec = c.problem.probe, c.record
    if probe.grid is None:
        raise ProbeError("the probe has no grid=: tuning needs grid(case, hints, num_sms)", probe.source)
    record = rec.to_dict()
    try:
        grid = grid3(probe.grid(dict(c.case), grid_hints(record), num_sms,
                                **context_kwargs(probe.grid, arch=rec.arch)))
    except Exception as e:
        from ..audit.probe import _probe_error_from
        raise _probe_error_from(e, probe.source, f"grid({c.case}) failed") from e
    args = probe.launch_args(c.case, **launch_context(record, num_sms))   # issue 27: as run and the GPU stage do
    sig = rec.signature or []
    runtime = [_arg_key(a) for i, a in enumerate(args) if i >= len(sig) or sig[i].get("kind") != "constant"]
    parts = {"code": rec.code_sha256, "data": constant_data_sha256(cubin) if cubin else rec.cubin_sha256,
             "threads": rec.threads, "registers": rec.registers, "shared": rec.driver_shared_bytes,
             "stack": rec.stack_bytes, "cluster": rec.cluster_dims, "grid": list(grid), "args": runtime}
    return value_key(parts), grid


def dedupe(plan: Plan, num_sms: int, cubin_get: Callable[[str], bytes | None]) -> None:
    """Group ``plan``'s compiled candidates by :func:`launch_key`; the first of each group is timed, the others
    get ``same_as`` and are counted under ``duplicate_launch``. A candidate whose grid or args fail is dropped
    as ``probe_error``."""
    groups: dict[str, Candidate] = {}
    for c in plan.candidates:
        if c.status != "ok":
            continue
        try:
            c.launch_key, c.grid = launch_key(c, num_sms, cubin_get(c.record.cubin_sha256))
        except ProbeError as e:
            c.status, c.reason = "probe_error", str(e)
            plan.dropped["probe_error"] = plan.dropped.get("probe_error", 0) + 1
            continue
        rep = groups.setdefault(c.launch_key, c)
        rep.members.append(c)
        if rep is not c:
            c.same_as = rep
            plan.dropped[DUPLICATE] = plan.dropped.get(DUPLICATE, 0) + 1

"""The static stage of a tune, on any CPU: compile the candidates, drop the failures, time identical launches once.

1. **Compile** every configuration the constraints kept, through :func:`tileprobe.audit.audit` (parallel compile
   processes, the store: what is stored is not compiled again) — or take the records of a ``--bundle`` made by
   ``tileprobe audit --bundle`` where tileiras is.
2. **Drop, counting per rule**: a configuration whose compile failed (the rule is its status: ``compile_error``,
   ``compiler_crash``, ``timeout``, ``probe_error``), that the bundle lacks (``not_in_bundle``), or whose SASS the
   register-pool check predicts to hang (``hang_risk``: not launched unless ``run_hang_risk``).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tileprobe.errors import ProbeError
from tileprobe.probe.define import load_probes
from tileprobe.probe.signature import ArraySpec
from tileprobe.probe.zygote import prefetch_heavy
from tileprobe.schema import VariantRecord, canonical, value_key
from tileprobe.tune.space import Config, ProbeInfo, Problem, problems

if TYPE_CHECKING:
    from tileprobe.tune.launch_cache import LaunchItem

# Imports inside functions here are lazy on purpose: at the module head they would add 0.19 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

DUPLICATE = "duplicate_launch"
NOT_IN_BUNDLE = "not_in_bundle"
HANG_RISK = "hang_risk"


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
    same_as: Candidate | None = None
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
    groups: dict = field(default_factory=dict)    # launch key → the candidate timed for the group (dedupe)

    def raced(self) -> list[Candidate]:
        """The candidates the GPU stage times: compiled, and not a duplicate of another."""
        return [c for c in self.candidates if c.status == "ok" and c.same_as is None]

    def find(self, config: Config | None) -> Candidate | None:
        """The candidate of ``config``, or None (also for ``config=None``)."""
        return next((c for c in self.candidates if config is not None and c.config == config), None)


def space_task(path: str, stage: Callable[[str], None], cases: dict | None = None,
               hints: dict | None = None) -> tuple[list[dict], list[str]]:
    """In a contained loader child (:func:`tileprobe.probe.contained.run_probe_tasks`): import the probe file, apply
    the overrides, run each probe's constraints; return (its problems as :func:`~tileprobe.tune.space.problem_data`,
    errors). What the probe's code does (raise, exit, values that are not data) is its error, with its line."""
    from tileprobe.audit.pipeline import source_sha256
    from tileprobe.probe import wire
    from tileprobe.probe.define import _probe_error_from, probe_code_guard
    from tileprobe.select import WhereError, apply_overrides
    from tileprobe.tune.space import problem_data
    stage("importing the probe file")
    try:
        with probe_code_guard():
            probes = apply_overrides(load_probes(path), cases, hints, check=False)
    except WhereError:          # a --case value of the wrong kind: the command line's error (loader_child._serve_job)
        raise
    except ProbeError as e:
        return [], [str(e)]
    except BaseException as e:
        return [], [str(_probe_error_from(e, os.path.abspath(path), "importing the probe file"))]
    out, errors = [], []
    for probe in probes:
        stage(f"probe {probe.label!r}: its constraints and kernel")
        try:
            with probe_code_guard():
                found = problems(probe)
                digest = source_sha256(probe)
            data = [problem_data(p, digest) for p in found]
            wire.encode([d["values"] for d in data], "cases")
            wire.encode([d["configs"] for d in data], "tunable cases and hints")
        except wire.NotData as e:
            errors.append(str(ProbeError(f"probe {probe.label!r}: {e}", probe.source, probe.lineno)))
            continue
        except ProbeError as e:
            errors.append(str(e))
            continue
        except BaseException as e:
            errors.append(str(_probe_error_from(e, probe.source, f"probe {probe.label!r}")))
            continue
        out.extend(data)
    return out, errors


def load_space(probe_paths: Sequence[str], *, where: dict | None = None, cases: dict | None = None,
               hints: dict | None = None, probe_timeout_s: float | None = None) -> tuple[list[Problem], list[str]]:
    """Every problem of every probe file; probe errors (file and line) are collected, the others go on.

    The probe files are imported, and their constraints run, in contained children as ``tileprobe audit`` loads
    probes (:func:`tileprobe.probe.contained.run_probe_tasks`: ``probe_timeout_s`` per step, default
    :data:`~tileprobe.probe.contained.PROBE_TIMEOUT_S`); the problems come back as data, their probes as
    :class:`~tileprobe.tune.space.ProbeInfo`. ``cases`` / ``hints`` replace the probes' values (``--case`` /
    ``--hint``, :func:`tileprobe.select.apply_overrides`); ``where`` keeps the configurations whose full case
    and hints match it (``--where``), and the problems left with any.
    """
    from tileprobe.probe.contained import PROBE_TIMEOUT_S, run_probe_tasks
    from tileprobe.select import same_value
    from tileprobe.tune.space import problem_from_data
    out, errors = [], []
    reports = run_probe_tasks(probe_paths, "tileprobe.tune.static:space_task",
                              [{"cases": cases, "hints": hints}] * len(probe_paths),
                              timeout_s=probe_timeout_s or PROBE_TIMEOUT_S)
    if reports and not any(rep.errors for rep in reports):   # the compile side's import starts now
        prefetch_heavy(any(rep.uses_torch for rep in reports))
    for rep in reports:
        errors.extend(rep.errors)
        for d in rep.data or []:
            try:
                out.append(problem_from_data(d))
            except (TypeError, KeyError, ValueError, IndexError) as e:
                errors.append(f"{rep.path}: the loader sent a problem of the wrong shape ({e})")
                break
    if cases and out:    # --case names: checked across all files (the children took each file alone)
        from types import SimpleNamespace

        from tileprobe.select import check_case_names
        check_case_names(cases, [SimpleNamespace(cases={*p.values, *(n for c in p.configs for n, _ in c.tunables)})
                                 for p in out])
    if where:
        def keep(p: Problem, c) -> bool:
            values = {**c.case(p.values), **c.hints_dict}
            return all(k in values and same_value(values[k], v) for k, v in where.items())
        kept = [[c for c in p.configs if keep(p, c)] for p in out]
        if out and not any(kept):
            from tileprobe.select import WhereError, format_value
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


def config_key(problem: Problem, config: Config) -> tuple:
    """The key of ``config`` of ``problem`` that :func:`variant_key` and :func:`record_key` give its variant and its
    record (probe file name, probe label, case, hints)."""
    return _want_key(problem.probe.source or "", problem.probe.label, config.case(problem.values), config.hints_dict)


def variant_key(v) -> tuple:
    """A compile variant's key (:func:`config_key`)."""
    return _want_key(v.probe_path, v.probe_name, v.case_dict, v.hints_dict)


def record_key(rec: VariantRecord) -> tuple:
    """A record's key (:func:`config_key`); its arch is not part of it."""
    return _want_key(rec.probe, rec.kernel, rec.case, rec.hints)


def wanted(problems_: Sequence[Problem]) -> set[tuple]:
    """The (probe file name, probe label, case, hints) keys of every configuration to compile."""
    return {config_key(p, c) for p in problems_ for c in p.configs}


def compile_records(probe_paths: Sequence[str], problems_: Sequence[Problem], arch: str, **audit_kw):
    """Compile the configurations (and only them) for ``arch`` with :func:`tileprobe.audit.audit`; ``audit_kw``
    goes to it (store, jobs, timeout_s, progress, toolchains). Returns the AuditResult."""
    from tileprobe.audit import audit
    keys = wanted(problems_)
    return audit(list(probe_paths), [arch],
                 select=lambda v: variant_key(v) in keys,
                 **audit_kw)


def make_plans(problems_: Sequence[Problem], records: Sequence[VariantRecord], arch: str,
               missing_status: str = "not_compiled", run_hang_risk: bool = False) -> list[Plan]:
    """Match each configuration to its record (same probe file name, label, case, hints and arch); count the
    constraint rejections, the failed compiles and (unless ``run_hang_risk``) the predicted hangs per rule."""
    by_key = {record_key(r): r for r in records if r.arch == arch}
    plans = []
    for p in problems_:
        plan = Plan(p, [], {f"constraint:{k}": n for k, n in p.rejected.items()})
        for cfg in p.configs:
            rec = by_key.get(config_key(p, cfg))
            c = Candidate(p, cfg, rec)
            if rec is None:
                c.status, c.reason = missing_status, f"no {arch} record for it"
                plan.dropped[missing_status] = plan.dropped.get(missing_status, 0) + 1
            else:
                _give_record(plan, c, rec, run_hang_risk)
            plan.candidates.append(c)
        if p.default_note and p.probe.reference is None:
            plan.notes.append(p.default_note)
        plans.append(plan)
    return plans


def _give_record(plan: Plan, c: Candidate, rec: VariantRecord, run_hang_risk: bool) -> None:
    """``c``'s status from its record ``rec`` (``ok``, the failure's, or ``hang_risk`` unless ``run_hang_risk``),
    with the reason, and a status other than ``ok`` counted in ``plan.dropped``: :func:`make_plans` all at once,
    :class:`Landing` as the compiles land."""
    c.status = "ok"
    if not rec.ok:
        c.status, c.reason = rec.status, failed_reason(rec)
    elif rec.hang_risk and not run_hang_risk:
        c.status, c.reason = HANG_RISK, hang_risk_reason(rec)
    if c.status != "ok":
        plan.dropped[c.status] = plan.dropped.get(c.status, 0) + 1


def failed_reason(rec: VariantRecord) -> str:
    """Why a candidate's compile failed: the record's error; for a ``timeout``, with tune's own remedy (its
    compile limit is ``--compile-timeout``, not the GPU task's ``--timeout``; the compiler's message names neither).
    The store keeps a timeout whatever the limit was (its key has no limit), and ``tune`` has no
    ``--retry-failed``: the remedy says how to compile it again."""
    text = (rec.error or "").strip()
    if rec.status == "timeout" and "--compile-timeout" not in text:
        first, nl, rest = text.partition("\n")      # on the first line: the compact output shows only that one
        first = first.rstrip("\r")
        text = (f"{first} (tune: raise the limit with --compile-timeout S or Probe(timeout_s=S); a stored timeout is "
                "reused: add --no-store, or re-audit into the same store with `tileprobe audit PROBE --arch ARCH "
                f"--timeout S --retry-failed`){nl}{rest}").lstrip()
    return text


def hang_risk_reason(rec: VariantRecord) -> str:
    """Why a candidate the register-pool check predicts to hang is not launched."""
    return ("not launched: the register-pool check predicts a hang (--run-hang-risk launches it): "
            + rec.pool_reason)


#: The status of a candidate whose compile has not landed yet (racing while compiling).
COMPILING = "compiling"


def pending_plans(problems_: Sequence[Problem]) -> list[Plan]:
    """The plans before any compile has landed: every candidate :data:`COMPILING`, constraints counted
    (:class:`Landing` fills them in as records come)."""
    plans = []
    for p in problems_:
        plan = Plan(p, [Candidate(p, cfg, None, COMPILING) for cfg in p.configs],
                    {f"constraint:{k}": n for k, n in p.rejected.items()})
        if p.default_note and p.probe.reference is None:
            plan.notes.append(p.default_note)
        plans.append(plan)
    return plans


class Landing:
    """Records matched to the candidates of ``plans`` (:func:`pending_plans`) as their compiles land, as
    :func:`make_plans` matches them all at once: same probe file name, label, case, hints and ``arch``."""

    def __init__(self, plans: Sequence[Plan], arch: str, run_hang_risk: bool = False):
        self.arch, self.plans, self.run_hang_risk = arch, list(plans), run_hang_risk
        self.by_key = {config_key(pl.problem, c.config): (pl, c) for pl in plans for c in pl.candidates}

    def land(self, rec: VariantRecord) -> tuple[Plan, Candidate] | None:
        """Give ``rec`` to its candidate (status ``ok`` or the failure's, counted); None when it is none of
        theirs or its candidate has one already."""
        hit = self.by_key.get(record_key(rec)) if rec.arch == self.arch else None
        if hit is None or hit[1].record is not None:
            return None
        plan, c = hit
        c.record = rec
        _give_record(plan, c, rec, self.run_hang_risk)
        return hit

    def finish(self, missing_status: str = "not_compiled") -> None:
        """Every candidate whose record never came gets ``missing_status`` (counted)."""
        for plan in self.plans:
            for c in plan.candidates:
                if c.status == COMPILING:
                    c.status, c.reason = missing_status, f"no {self.arch} record for it"
                    plan.dropped[missing_status] = plan.dropped.get(missing_status, 0) + 1


def constant_data_sha256(cubin: bytes) -> str:
    """SHA-256 over the cubin's constant-bank and global-initialiser sections (name without the kernel suffix,
    type, size, and bytes unless NOBITS): data the machine code reads that ``code_sha256`` does not cover."""
    from tileprobe.model.cubin import cubin_sections
    h = hashlib.sha256()
    items = []
    for s in cubin_sections(cubin):
        if s.name.startswith((".nv.constant", ".nv.global")):
            kind = re.sub(r"^(\.nv\.constant\d+)\..*$", r"\1", s.name)
            items.append((kind, s.type, s.size, s.data))     # no bytes for SHT_NOBITS
    for kind, typ, size, data in sorted(items, key=lambda x: (x[0], x[2], x[3])):
        h.update(f"{kind}|{typ}|{size}|".encode() + hashlib.sha256(data).digest())
    return h.hexdigest()


def _record(c: Candidate) -> VariantRecord:
    """The record of a compiled candidate (status ``ok``): never None there, as :func:`make_plans` and
    :class:`Landing` give a candidate without one another status."""
    rec = c.record
    assert rec is not None     # by construction: the callers take only compiled candidates (status ok, a record)
    return rec


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


def probe_launch(c: Candidate, num_sms: int, args_memo: dict | None = None) -> tuple[tuple, list]:
    """The probe's own part of a launch's identity: its grid for ``num_sms`` and its runtime arguments (every launch
    argument that is not a compile-time constant), as data. Runs the probe's ``grid`` and ``args``: in the process
    that holds the :class:`~tileprobe.probe.define.Probe` (a contained child for probe files, :func:`launch_task`).
    ``args_memo``: the ``args`` made so far for other candidates, by case and the context ``args`` takes
    (:func:`_case_args`), shared by the candidates of one case.

    Raises:
        ProbeError: the probe's ``grid`` or ``args`` failed, or the probe has no ``grid``.
    """
    from tileprobe.probe.define import context_kwargs
    from tileprobe.run.launch import grid3
    from tileprobe.run.worker import grid_hints
    probe, rec = c.problem.probe, _record(c)
    # by construction: a probe held as data (ProbeInfo) has this run in its contained child (launch_facts)
    assert not isinstance(probe, ProbeInfo)
    if probe.grid is None:
        raise ProbeError("the probe has no grid=: tuning needs grid(case, hints, num_sms)", probe.source)
    record = rec.to_dict()
    try:
        grid = grid3(probe.grid(dict(c.case), grid_hints(record), num_sms,
                                **context_kwargs(probe.grid, arch=rec.arch)))
    except Exception as e:
        from tileprobe.probe.define import _probe_error_from
        raise _probe_error_from(e, probe.source, f"grid({c.case}) failed") from e
    sig = rec.signature or []
    def runtime_of(args: tuple) -> list:
        return [_arg_key(a) for i, a in enumerate(args) if i >= len(sig) or sig[i].get("kind") != "constant"]
    runtime = runtime_of(_case_args(probe, c.case, record, num_sms, args_memo))
    if args_memo is not None and _names_an_address(runtime):    # an object of its own: made for this one, as before
        runtime = runtime_of(_case_args(probe, c.case, record, num_sms, None))
    return grid, runtime


def _case_args(probe, case: dict, record: dict, num_sms: int, memo: dict | None) -> tuple:
    """``probe.launch_args`` for ``case`` with the record's launch context, as run and the GPU stage make them;
    taken from ``memo`` (then kept in it) when made before for the same case and the same context keywords ``args``
    declares (:func:`~tileprobe.run.worker.launch_context`): the candidates of one case differ in hints, which an
    ``args`` that takes no ``hints=`` never sees. The TileGym matmul's 648 configurations are 27 cases."""
    from tileprobe.probe.define import context_kwargs
    from tileprobe.run.worker import launch_context
    ctx = launch_context(record, num_sms)
    if memo is None:
        return probe.launch_args(case, **ctx)
    key = value_key([case, context_kwargs(probe.args, **ctx)])
    if key not in memo:
        memo[key] = probe.launch_args(case, **ctx)
    return memo[key]


def _names_an_address(runtime: list) -> bool:
    """Whether a runtime argument's text holds an object's address (``at 0x…``): such an object is made per
    candidate, never shared (sharing it would make two candidates' launches look alike where they did not)."""
    import json

    from tileprobe.tune.launch_cache import ADDRESS
    return bool(ADDRESS.search(json.dumps(runtime, default=repr)))


def launch_task(path: str, stage: Callable[[str], None], index: int, num_sms: int,
                items: list) -> tuple[list, list[str]]:
    """In a contained loader child: :func:`probe_launch` for each item (``[values, config, record dict]`` of one
    candidate of probe ``index`` of ``path``). Returns ([[grid, runtime] or an error text per item], errors)."""
    from tileprobe.probe import wire
    from tileprobe.probe.define import _probe_error_from, probe_code_guard
    from tileprobe.tune.space import Config, Problem
    stage("importing the probe file")
    try:
        with probe_code_guard():
            probe = load_probes(path)[index]
    except BaseException as e:
        return [], [str(e) if isinstance(e, ProbeError) else
                    str(_probe_error_from(e, os.path.abspath(path), "importing the probe file"))]
    out: list[list | str] = []
    args_memo: dict = {}      # the probe's args by case: the candidates of one case share them (_case_args)
    for values, config, rec in items:
        c = Candidate(Problem(probe, values), Config(tuple(map(tuple, config[0])), tuple(map(tuple, config[1]))),
                      VariantRecord.from_dict(rec))
        stage(f"grid() and args() of {c.id}" + (f" ({c.problem.label})" if values else ""))
        try:
            with probe_code_guard():
                grid, runtime = probe_launch(c, num_sms, args_memo)
            wire.encode([list(grid), runtime], "the launch")
            out.append([list(grid), runtime])
        except wire.NotData as e:
            out.append(str(ProbeError(f"args({c.case}) gave a launch argument that is not data: {e}", probe.source)))
        except ProbeError as e:
            out.append(str(e))
        except BaseException as e:
            out.append(str(_probe_error_from(e, probe.source, f"grid() or args() of {c.case}")))
    return out, []


def launch_facts(plans: Sequence[Plan], num_sms: int, probe_timeout_s: float | None = None) -> dict:
    """:func:`probe_launch` of every compiled candidate whose probe came from a file
    (:class:`~tileprobe.tune.space.ProbeInfo`): ``id(candidate)`` → (grid, runtime) or a :class:`ProbeError` (its
    ``grid``/``args`` failed, hung or ended its process). Facts kept by an earlier tune of unchanged code are taken
    from :mod:`tileprobe.tune.launch_cache`; only the others are asked of contained children (one per probe),
    and what they answer is kept for the next tune."""
    from tileprobe.tune.space import ProbeInfo
    groups: dict[tuple, list[Candidate]] = {}
    for plan in plans:
        if isinstance(plan.problem.probe, ProbeInfo):
            for c in plan.candidates:
                if c.status == "ok" and c.record is not None:
                    groups.setdefault((plan.problem.probe.source, plan.problem.probe.index), []).append(c)
    facts: dict = {}
    asked: dict[tuple, list[Candidate]] = {}
    items: dict[int, LaunchItem] = {}       # id(candidate) -> its key in the launch-facts cache
    from tileprobe.tune import launch_cache
    for k, cands in groups.items():
        items.update((id(c), _launch_item(c, k[1], num_sms)) for c in cands)
        for c, got in zip(cands, launch_cache.known(k[0], [items[id(c)] for c in cands])):
            if got is not None:
                facts[id(c)] = (tuple(got[0]), got[1])
            else:
                asked.setdefault(k, []).append(c)
    facts.update(_asked_facts(asked, num_sms, probe_timeout_s, items))
    return facts


def _launch_item(c: Candidate, index: int, num_sms: int) -> LaunchItem:
    """The :class:`~tileprobe.tune.launch_cache.LaunchItem` of candidate ``c`` (of probe ``index`` in its file)."""
    from tileprobe.tune.launch_cache import LaunchItem
    rec = _record(c)
    return LaunchItem(index, num_sms, dict(c.problem.values), [list(c.config.tunables), list(c.config.hints)],
                      rec.kernel, rec.arch, dict(rec.hints or {}), dict(rec.effective_hints or {}),
                      list(rec.signature or []))


def _asked_facts(groups: dict[tuple, list[Candidate]], num_sms: int, probe_timeout_s: float | None,
                 items: dict[int, LaunchItem]) -> dict:
    """:func:`launch_facts` of ``groups`` (``(probe file, index)`` → candidates) from contained children, kept under
    each candidate's ``items[id(candidate)]``."""
    from tileprobe.probe.contained import PROBE_TIMEOUT_S, run_probe_tasks
    from tileprobe.tune import launch_cache
    keys = list(groups)
    args = [{"index": i, "num_sms": num_sms, "items": [[dict(c.problem.values), [list(c.config.tunables),
                                                                                 list(c.config.hints)],
                                                        _record(c).to_dict()] for c in groups[k]]}
            for k in keys for i in [k[1]]]
    reports = run_probe_tasks([k[0] for k in keys], "tileprobe.tune.static:launch_task", args,
                              timeout_s=probe_timeout_s or PROBE_TIMEOUT_S, kept=False) if keys else []
    facts: dict = {}
    for k, rep in zip(keys, reports):
        got = rep.data if isinstance(rep.data, list) and len(rep.data) == len(groups[k]) else None
        why = "; ".join(rep.errors) or f"{k[0]}: the loader gave no launch for these candidates"
        for j, c in enumerate(groups[k]):
            item = got[j] if got is not None else why
            if got is None and f" of {c.id}" not in why:     # the child stopped at another candidate
                item = f"{k[0]}: not tried: the probe's process was stopped at another candidate: {why}"
            fact = None if type(item) is str else launch_cache.checked(item)   # a child's answer is data to check
            if type(item) is str:
                facts[id(c)] = ProbeError(item)       # its text names the probe file and line already
            elif fact is None:
                facts[id(c)] = ProbeError(f"{k[0]}: the loader's launch for {c.id} is not [grid, runtime arguments]"
                                          f" with a grid CUDA can launch: {str(item)[:200]!r}")
            else:
                facts[id(c)] = (tuple(fact[0]), fact[1])
        if got is not None and not rep.errors:
            launch_cache.learn(k[0], [items[id(c)] for c in groups[k]], got, rep.code_files)
    return facts


def launch_key(c: Candidate, num_sms: int, cubin: bytes | None, facts: tuple | None = None) -> tuple[str, tuple]:
    """The identity of a candidate's launch (module doc) as text, and its grid; ``facts``: its
    :func:`probe_launch` from :func:`launch_facts` (else it is called here, for a probe held in this process).

    Raises:
        ProbeError: the probe's ``grid`` or ``args`` failed, or the probe has no ``grid``.
    """
    rec = _record(c)
    grid, runtime = facts if facts is not None else probe_launch(c, num_sms)
    parts = {"code": rec.code_sha256, "data": constant_data_sha256(cubin) if cubin else rec.cubin_sha256,
             "threads": rec.threads, "registers": rec.registers, "shared": rec.driver_shared_bytes,
             "stack": rec.stack_bytes, "cluster": rec.cluster_dims, "grid": list(grid), "args": runtime}
    return value_key(parts), grid


def dedupe(plan: Plan, num_sms: int, cubin_get: Callable[[str], bytes | None], facts: dict | None = None) -> None:
    """Group ``plan``'s compiled candidates by :func:`launch_key`; the first of each group is timed, the others
    get ``same_as`` and are counted under ``duplicate_launch``. A candidate whose grid or args fail is dropped
    as ``probe_error``. ``facts``: :func:`launch_facts` of the plans (made here for this plan when not given)."""
    from tileprobe.tune.space import ProbeInfo
    if facts is None and isinstance(plan.problem.probe, ProbeInfo):
        facts = launch_facts([plan], num_sms)
    for c in plan.candidates:
        if c.launch_key is None:
            dedupe_one(plan, c, num_sms, cubin_get, (facts or {}).get(id(c)))


def dedupe_one(plan: Plan, c: Candidate, num_sms: int, cubin_get: Callable[[str], bytes | None],
               fact=None) -> bool:
    """:func:`dedupe` for one candidate of ``plan`` (one that landed while the race runs), ``fact`` its
    :func:`launch_facts` entry: True when it is to be timed (compiled, its grid and args work, and no earlier
    candidate has its launch)."""
    if c.status != "ok":
        return False
    try:
        if isinstance(fact, ProbeError):
            raise fact
        sha = _record(c).cubin_sha256      # None: no cubin to look up (every getter finds none for it)
        c.launch_key, c.grid = launch_key(c, num_sms, cubin_get(sha) if sha is not None else None, fact)
    except ProbeError as e:
        c.status, c.reason = "probe_error", str(e)
        plan.dropped["probe_error"] = plan.dropped.get("probe_error", 0) + 1
        return False
    rep = plan.groups.setdefault(c.launch_key, c)
    rep.members.append(c)
    if rep is not c:
        c.same_as = rep
        plan.dropped[DUPLICATE] = plan.dropped.get(DUPLICATE, 0) + 1
        return False
    return True

"""``tileprobe.tune.tune()``: the whole tune in one function — plan, compile (while the GPU worker starts), drop,
dedupe, race per problem, check, store, compare with the last compiler's tune, export. ``tileprobe tune`` is this
call plus printing (``tileprobe/cli/tune.py``, its tables in ``tileprobe/report/tune.py``); the method is in
``docs/TUNE.md``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tileprobe.compile.toolcache import cached_default
from tileprobe.errors import TileprobeError
from tileprobe.model.arch import get_arch
from tileprobe.model.sass import SASS_GATE, have_nvdisasm
from tileprobe.probe.contained import PROBE_TIMEOUT_S, loader_sessions, prefetch_compiler_lookup
from tileprobe.probe.zygote import speculate_torch_free, warm_starts
from tileprobe.run.clocks import compute_capability
from tileprobe.run.early import WorkerStarter, discard_early_worker, take_early_worker
from tileprobe.run.watchdog import WorkerStartError
from tileprobe.tune.assemble import compare_previous, problem_result
from tileprobe.tune.gpu import CHECK_TASK, TIME_TASK, TimingSettings, WorkerBench
from tileprobe.tune.overlap import Overlap, budget_share
from tileprobe.tune.race import MIN_RACE_S, Race, RaceSettings
from tileprobe.tune.result import NO_SM_COUNT, ProblemResult, TuneResult
from tileprobe.tune.search import SearchSettings
from tileprobe.tune.static import (
    Landing,
    Plan,
    compile_records,
    dedupe,
    launch_facts,
    load_space,
    make_plans,
    pending_plans,
)
from tileprobe.tune.table_doc import GpuInfo, TimingSettingsData, TuneEnvironment
from tileprobe.tune.warm import apply_warm

if TYPE_CHECKING:
    from tileprobe.toolchain import Toolchain
    from tileprobe.tune.space import Config


def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): the CLI's start-up share."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


#: The thread that starts the GPU worker (:class:`tileprobe.run.early.WorkerStarter`; this name kept for callers).
_WorkerStarter = WorkerStarter


def _check_seconds(*, budget_s, startup_s) -> None:
    """``budget_s`` (None, or seconds > 0) and ``startup_s`` (None, or seconds ≥ 0), finite: a NaN, negative or
    zero budget would silently act as spent, a negative start-up would lengthen it (hostile test, session 7).

    Raises:
        TileprobeError: naming the argument, its value and what to give."""
    for name, value, least in (("budget_s", budget_s, "> 0"), ("startup_s", startup_s, ">= 0")):
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            (value > 0 if name == "budget_s" else value >= 0)
        if not ok:
            raise TileprobeError(f"tune settings: {name}={value!r}: give a finite number of seconds {least}"
                                 + (" (or None: no budget)" if name == "budget_s" else " (or None)"))


def _settings(strategy, budget_s, tie_pct, confidence, min_samples, max_samples, seed, timing) -> tuple:
    try:
        return (RaceSettings(strategy=strategy, budget_s=budget_s, tie_pct=tie_pct, confidence=confidence,
                             min_samples=min_samples, max_samples=max_samples, seed=seed), TimingSettings(mode=timing))
    except ValueError as e:
        raise TileprobeError(f"tune settings: {e}") from e


def _target_arch(arch: str | None, starter: _WorkerStarter | None) -> str:
    """``arch`` if given; else the GPU's, from NVML / nvidia-smi without CUDA, else from the started worker."""
    if arch:
        return get_arch(arch).name
    cc = compute_capability()
    if cc is not None:
        return get_arch(f"sm_{cc[0]}{cc[1]}").name
    if starter is None:
        raise TileprobeError("no GPU found to tune for: give --arch (e.g. --arch sm_90) with --dry-run")
    return get_arch(GpuInfo.from_dict(starter.wait()[0]).sm).name


def _records(paths, problems, arch, bundle, store, jobs, compile_timeout_s, toolchains, progress, overrides=None,
             executor=None, on_record=None, schedule=None):
    """(records, cubin getter, environment, probe errors) from a bundle or from compiling here (``schedule``: a
    :class:`~tileprobe.compile.schedule.ChosenSchedule` for the audit)."""
    if bundle:
        from tileprobe.run.session import load_bundle
        records, env, get = load_bundle(bundle)
        archs = sorted({r.arch for r in records})
        if arch not in archs:
            raise TileprobeError(f"the bundle {bundle} has no {arch} records (it has {', '.join(archs) or 'none'}): "
                                 f"make it with `tileprobe audit PROBE --arch {arch} --bundle DIR`")
        return records, get, env, []
    res = compile_records(paths, problems, arch, store=store, jobs=jobs, timeout_s=compile_timeout_s,
                          **(overrides or {}),
                          toolchains=toolchains, with_sass=SASS_GATE if have_nvdisasm() else False,
                          executor=executor, on_record=on_record,
                          schedule=schedule,
                          progress=(lambda k, n: progress("compile", (k, n))) if progress else None)

    def get(sha):
        data = res.cubins.get(sha)
        return data if data is not None or store is None else store.cubin(sha)
    return res.records, get, res.environment, res.probe_errors


def tune(probe_paths: Sequence[str], *, arch: str | None = None, budget_s: float | None = None,
         strategy: str = "race", timing: str = "sustained", export: str | None = None, bundle: str | None = None,
         store=None, jobs: int | None = None, timeout_s: float = 60.0, compile_timeout_s: float = 300.0,
         seed: int = 0, tie_pct: float = 1.0, confidence: float = 0.95, min_samples: int = 10,
         max_samples: int = 300, num_sms: int | None = None, dry_run: bool = False, watchdog=None,
         toolchains: Sequence[Toolchain] | None = None, tasks: tuple[str, str] = (TIME_TASK, CHECK_TASK),
         progress: Callable | None = None, startup_s: float | None = None, where: dict | None = None,
         cases: dict | None = None, hints: dict | None = None, executor=None,
         probe_timeout_s: float | None = None, run_hang_risk: bool = False,
         search_full_max: int | None = None, final: bool = True, check_first: bool = False,
         warm_first: Mapping[str, Sequence[str]] | None = None) -> TuneResult:
    """Tune probe files on this machine's GPU: the fastest correct configuration per (kernel, problem case).

    Args:
        probe_paths: probe files (see README "Tuning": ``tunable=``, ``constraint=``, ``default=``).
        arch: target (default: this GPU's).
        budget_s: seconds of wall time, counted from ``startup_s`` before this call (the CLI's ``--budget``: the
            command's wall time), shared among the problems (None: no limit). Each race gets an equal share of
            what is left; when a problem has more than ``search_full_max`` configurations (default: 4 × the
            compile jobs) and compiles are made here, the compiles count too: the space is searched continuously,
            a balanced sample first, then the neighbours of the race's leaders, compiled while the race runs
            (:mod:`tileprobe.tune.search`); what was not reached is ``not_searched``.
        strategy: ``race`` (successive elimination) or ``exhaustive`` (every candidate sampled alike).
        timing: ``sustained`` (default), ``burst``, ``eager`` or ``graph`` (docs/TUNE.md "Timing modes").
        export: write the JSON table for host code there (merged into an existing table).
        bundle: take records and cubins from ``tileprobe audit --bundle DIR`` (no tileiras needed here).
        store: a :class:`~tileprobe.store.Store` (compiles reused, results saved, last compiler's tune compared).
        jobs, compile_timeout_s, toolchains: as for :func:`tileprobe.audit.audit`.
        timeout_s: per GPU task (a batch or a check) before it is a hang.
        seed: inputs' seed and the rounds' shuffle. tie_pct, confidence, min_samples, max_samples: the race
            (:class:`~tileprobe.tune.race.RaceSettings`). final: False for no steady-state final (the CLI's
            ``--no-final``; :mod:`tileprobe.tune.race`, module doc 7). check_first: check every candidate before
            its first batch (``--bit-exact``), not only the finalists.
        num_sms: the SM count the grids are made for, and that ``args(..., num_sms=)`` gets (default: the GPU's;
            needed to dedupe with ``dry_run``, where a probe whose ``args`` takes ``num_sms`` gets the arch's
            reference GPU's, :func:`tileprobe.model.cluster.reference_num_sms`).
        dry_run: stop after the static stage (no GPU needed).
        watchdog: a :class:`~tileprobe.run.watchdog.Watchdog` to use (default: one made and closed here), or
            anything with its interface (a Ray GPU slot, :class:`tileprobe.exec.ray_exec.RayGpuSlot`). The races
            run on this one GPU: a race compares candidates' batches, and batches timed on two GPUs (or on a GPU
            shared with another busy worker) are not one sample (docs/SCALE.md, "Tuning on several GPUs").
        executor: a :mod:`tileprobe.exec` executor for the candidates' compiles (default: the local pool).
        probe_timeout_s: seconds each step of probe code may take (import, constraints, ``grid``, ``args``); the
            probe files are loaded and run in contained children, as ``tileprobe audit`` does (default
            :data:`~tileprobe.probe.contained.PROBE_TIMEOUT_S`).
        tasks: the worker tasks (time, check) as ``"module:function"``; tests plant fakes.
        progress: ``progress(kind, data)`` for printing: ``compile``, ``plans``, ``worker``, ``race``, ``round``, ``rejudge``,
            ``problem``.
        startup_s: the caller's start-up time before this call (s; the CLI's: :func:`process_age_s`): part of
            ``budget_s``, and of the time split.
        where: keep the configurations matching ``{name: value}`` (``--where``; :mod:`tileprobe.select`).
        cases, hints: ``{name: [values]}`` replacing the probes' own (``--case`` / ``--hint``).
        run_hang_risk: race the candidates the register-pool check predicts to hang too (default: dropped under
            the rule ``hang_risk``, named by ``progress("hang_risk", records)`` before any race).
        search_full_max: with ``budget_s``: the largest space compiled whole (see ``budget_s``).
        warm_first: probe label → tunable ``config`` values its problems race first (a new shape's warm start,
            :mod:`tileprobe.tune.warm`); the rest of each space keeps its order.

    Returns a :class:`~tileprobe.tune.result.TuneResult`.

    Raises:
        TileprobeError: nothing to tune (no probe loaded), bad settings (a NaN, negative or zero ``budget_s``; a
            negative ``startup_s``), a bundle without the GPU's arch, or no GPU worker could start
            (:class:`~tileprobe.run.watchdog.WorkerStartError`).
    """
    t0 = time.perf_counter()
    _check_seconds(budget_s=budget_s, startup_s=startup_s)
    if bundle:            # a damaged or missing bundle is said before the GPU worker starts
        from tileprobe.run.session import load_bundle
        load_bundle(bundle)
    result = TuneResult(dry_run=dry_run, times={"startup_s": startup_s})
    if progress is not None:
        progress = _counting_compiles(result, progress)
    race_settings, timing_settings = _settings(strategy, budget_s, tie_pct, confidence, min_samples, max_samples,
                                               seed, timing)
    if not final:
        race_settings = dataclasses.replace(race_settings, final_max=0)
    if check_first:
        race_settings = dataclasses.replace(race_settings, check_first=True)
    with contextlib.nullcontext() if bundle else warm_starts(), loader_sessions():   # the compile side's cuTile
        # import starts now, beside the plan; each probe file is imported once, its loader child kept for the
        # plan, the audit's load and the launch facts; so does the default compiler's lookup
        if not bundle and not toolchains and cached_default() is None:
            prefetch_compiler_lookup(probe_timeout_s or PROBE_TIMEOUT_S)
        return _tune(t0, result, race_settings, timing_settings, probe_paths, arch, export, bundle, store, jobs,
                     timeout_s, compile_timeout_s, seed, confidence, num_sms, dry_run, watchdog, toolchains, tasks,
                     progress, where, cases, hints, executor, probe_timeout_s, run_hang_risk, search_full_max,
                     warm_first)


def _tune(t0, result, race_settings, timing_settings, probe_paths, arch, export, bundle, store, jobs, timeout_s,
          compile_timeout_s, seed, confidence, num_sms, dry_run, watchdog, toolchains, tasks, progress, where, cases,
          hints, executor, probe_timeout_s, run_hang_risk=False, search_full_max=None, warm_first=None) -> TuneResult:
    own = watchdog is None and not dry_run
    early = take_early_worker(timeout_s) if own else None   # started at the command's first line (run/early.py)
    if early is None:
        discard_early_worker()     # a dry run, or a watchdog given: an early worker is not this tune's
    if early is not None:
        watchdog, starter = early
    else:
        if not dry_run:    # the GPU worker starts now (torch, a CUDA context: 3.5-5.3 s on the H200), beside the plan
            from tileprobe.run.watchdog import Watchdog
            watchdog = watchdog or Watchdog(timeout_s=timeout_s)
        starter = _WorkerStarter(watchdog) if not dry_run else None
    try:
        if not bundle:    # cuTile's compiler side imported beside the loaders
            speculate_torch_free(probe_paths)
            _load_ahead(probe_paths, arch, cases, hints, num_sms, probe_timeout_s)
        problems, result.probe_errors = load_space(probe_paths, where=where, cases=cases, hints=hints,
                                                   probe_timeout_s=probe_timeout_s)
        problems = apply_warm(problems, warm_first)     # a new shape's warm start: nearest rows' picks first
        if not problems:
            from tileprobe.errors import IncompleteError  # exit 3, as audit's "no probe could be loaded"
            raise IncompleteError("nothing to tune: no probe could be loaded:\n  " + "\n  ".join(result.probe_errors))
        result.times["plan_s"] = time.perf_counter() - t0
        arch = _target_arch(arch, starter)
        gpu, compile_sms = None, num_sms
        if compile_sms is None and not bundle and any("num_sms" in p.probe.args_context for p in problems):
            if starter is not None:   # args(..., num_sms=) is compiled for this GPU's SM count
                gpu = _gpu(result, starter, arch, progress)
                compile_sms = GpuInfo.from_dict(gpu).num_sms
            else:
                from tileprobe.model.cluster import reference_num_sms
                compile_sms = reference_num_sms(arch)
        overrides = {"cases": cases, "hints": hints, "num_sms": compile_sms,
                     **({"probe_timeout_s": probe_timeout_s} if probe_timeout_s else {})}
        search = _search_settings(race_settings, jobs, seed, search_full_max)
        if _wants_search(race_settings, search, problems, dry_run, bundle):   # --budget over a large space
            plans = _searched(result, problems, arch, starter, watchdog, probe_paths, store, jobs, compile_timeout_s,
                              toolchains, progress, overrides, executor, num_sms, timing_settings, race_settings,
                              search, timeout_s, seed, tasks, probe_timeout_s, run_hang_risk, gpu, t0)
        elif not dry_run and not bundle:      # race the first problem while compiling
            plans = _overlapped(result, problems, arch, starter, watchdog, probe_paths, store, jobs, compile_timeout_s,
                                toolchains, progress, overrides, executor, num_sms,
                                timing_settings, race_settings, timeout_s, seed, tasks, probe_timeout_s, run_hang_risk,
                                gpu)
        else:
            left: dict[int, list[Config]] = {}
            if dry_run and _wants_search(race_settings, search, problems, False, bundle):   # the search's first sample
                problems, left = _dry_run_samples(problems, search, store)
            plans = _sequential(result, problems, arch, starter, watchdog, probe_paths, bundle, store, jobs,
                                compile_timeout_s, toolchains, progress, overrides, executor, num_sms,
                                timing_settings, race_settings, timeout_s, seed, tasks, dry_run, confidence,
                                probe_timeout_s, run_hang_risk, gpu, compile_sms)
            if left:
                from tileprobe.tune.budgeted import add_not_sampled
                for plan in plans:
                    add_not_sampled(plan, left.get(id(plan.problem), []))
                result.problems = [problem_result(p, None, arch, confidence) for p in plans]
    finally:
        if own:
            watchdog.close()
        if starter is not None:
            starter.release()
    _finish(result, plans, store, export, t0)
    return result


def _load_ahead(paths, arch: str | None, cases, hints, num_sms, probe_timeout_s) -> int:
    """The audit's load of the probe files started beside the plan (:mod:`tileprobe.probe.ahead`), for the target
    ``arch`` or the GPU's from NVML (none when neither is known without the GPU worker), with the audit's own
    question (:data:`tileprobe.audit.pipeline.MAX_VARIANTS`, the overrides, the SM count given). Returns the loads
    started."""
    from tileprobe.audit.pipeline import MAX_VARIANTS, distinct_files
    from tileprobe.model.arch import check_target
    from tileprobe.probe.contained import load_ahead
    cc = compute_capability() if not arch else None
    name = arch or (f"sm_{cc[0]}{cc[1]}" if cc is not None else None)
    if not name:
        return 0
    try:
        target = check_target(get_arch(name).name)
    except TileprobeError:
        return 0
    return load_ahead(distinct_files(paths), [target], timeout_s=probe_timeout_s or PROBE_TIMEOUT_S,
                      max_variants=MAX_VARIANTS, cases=cases, hints=hints, num_sms=num_sms)


def _counting_compiles(result: TuneResult, progress: Callable) -> Callable:
    """``progress`` that also adds each ``("compile", ("total", n))`` (n: compiles to make, not from the store) to
    ``result.compiled``."""
    def cb(kind, data):
        if kind == "compile" and data[0] == "total":
            result.compiled = (result.compiled or 0) + data[1]
        progress(kind, data)
    return cb


def _search_settings(race: RaceSettings, jobs: int | None, seed: int, full_max: int | None) -> SearchSettings:
    """The budgeted search's settings: a wave is the compile jobs (default: every CPU)."""
    from tileprobe.procs import default_jobs
    return SearchSettings(jobs=max(1, jobs or default_jobs()), full_max=full_max, seed=seed)


def _wants_search(race: RaceSettings, search: SearchSettings, problems, dry_run: bool, bundle) -> bool:
    """A budget, compiles to make here, and a problem larger than the search's ``full_max``."""
    return (race.budget_s is not None and not dry_run and not bundle
            and any(len(p.configs) > search.full_max for p in problems))


def _dry_run_samples(problems, search: SearchSettings, store) -> tuple[list, dict]:
    """A dry run with ``--budget``: each problem larger than ``search.full_max`` cut to the search's first sample
    (:func:`tileprobe.tune.budgeted.dry_run_sample`); returns the problems and ``{id(problem): configurations left
    out}``."""
    from tileprobe.tune.budgeted import dry_run_sample
    out, left = [], {}
    for p in problems:
        if len(p.configs) > search.full_max:
            p, rest = dry_run_sample(p, search, store)
            left[id(p)] = rest
        out.append(p)
    return out, left


def _searched(result, problems, arch, starter, wd, probe_paths, store, jobs, compile_timeout_s, toolchains, progress,
              overrides, executor, num_sms, timing, settings, search, timeout_s, seed, tasks, probe_timeout_s,
              run_hang_risk, gpu, t0) -> list[Plan]:
    """The budgeted search (:mod:`tileprobe.tune.budgeted`): each problem compiled in the order
    :class:`~tileprobe.tune.search.SearchOrder` chooses while its race runs, within its share of the budget, counted
    from the process's start (``startup_s`` before ``t0``); a problem of at most ``search.full_max`` configurations
    is compiled whole (its first wave is all of it). Returns the plans."""
    from tileprobe.tune.budgeted import SearchContext, search_problem
    asked: dict = {} if gpu is None else {"gpu": gpu}

    def wait_gpu() -> dict:
        if "gpu" not in asked:
            asked["gpu"] = _gpu(result, starter, arch, progress)
        return asked["gpu"]
    records = lambda probs, schedule, on_record: _records(
        probe_paths, probs, arch, None, store, jobs, compile_timeout_s, toolchains, progress, overrides, executor,
        on_record=on_record, schedule=schedule)
    bench_kw = dict(watchdog=wd, probe_paths=probe_paths, search_dirs=[os.getcwd()], timing=timing,
                    timeout_s=timeout_s, seed=seed, tasks=tasks, trust_recorded=True)
    ctx = SearchContext(records, wait_gpu, bench_kw, settings, search, arch, run_hang_risk, probe_timeout_s, num_sms,
                        progress)
    # --budget bounds the command's wall time: the process's start-up before this call counts
    plans, deadline = [], t0 + settings.budget_s - (result.times.get("startup_s") or 0.0)
    try:
        for i, problem in enumerate(problems):
            share = max(0.0, deadline - time.perf_counter()) / (len(problems) - i)
            one = search if len(problem.configs) > search.full_max else \
                dataclasses.replace(search, sample=len(problem.configs))
            found = search_problem(ctx, problem, time.perf_counter() + share, store, one)
            plans.append(found.plan)
            result.aborted = result.aborted or found.aborted
            res = problem_result(found.plan, found.outcome, arch, settings.confidence)
            result.problems.append(res)
            if progress:
                progress("problem", res)
    finally:
        ctx.release()
    _say_hang_risk(plans, run_hang_risk, progress)
    result.probe_errors += [e for e in ctx.probe_errors if e not in result.probe_errors]
    for plan in plans:
        _grid_errors(result, plan)
    gpu_info = wait_gpu()
    result.environment = _environment(ctx.environment or {}, gpu_info, arch,
                                      num_sms or GpuInfo.from_dict(gpu_info).num_sms,
                                      timing, settings, None)
    result.environment["search"] = {"full_max": search.full_max, "sample": search.sample, "jobs": search.jobs,
                                    "round_cap": search.round_cap, "leaders": search.leaders}
    result.times.update(compile_s=ctx.compile_s, race_s=sum(p.race_s or 0.0 for p in result.problems),
                        check_s=sum(p.check_s or 0.0 for p in result.problems))
    result.environment["clocks"] = _clock_range(result.problems)
    return plans


def _sequential(result, problems, arch, starter, watchdog, probe_paths, bundle, store, jobs, compile_timeout_s,
                toolchains, progress, overrides, executor, num_sms, timing_settings, race_settings, timeout_s, seed,
                tasks, dry_run, confidence, probe_timeout_s, run_hang_risk=False, gpu=None,
                compile_sms=None) -> list[Plan]:
    """Compile (or read the bundle), then race problem after problem (a dry run stops before the race)."""
    t1 = time.perf_counter()
    records, get, env, errors = _records(probe_paths, problems, arch, bundle, store, jobs, compile_timeout_s,
                                         toolchains, progress, overrides, executor)
    result.probe_errors += [e for e in errors if e not in result.probe_errors]
    result.times["compile_s"] = time.perf_counter() - t1
    plans = make_plans(problems, records, arch, "not_in_bundle" if bundle else "not_compiled", run_hang_risk)
    _say_hang_risk(plans, run_hang_risk, progress)
    gpu = gpu if gpu is not None else _gpu(result, starter, arch, progress)
    num_sms = num_sms or GpuInfo.from_dict(gpu).num_sms or compile_sms   # a dry run: the SM count args() was compiled for
    reference = None
    if not num_sms and dry_run:     # no GPU and no --num-sms: the arch's reference GPU's, as audit does
        from tileprobe.model.arch import get_arch
        from tileprobe.model.cluster import REFERENCE_GPUS
        layout = REFERENCE_GPUS.get(get_arch(arch).name)
        num_sms, reference = (layout.num_sms, layout.gpu) if layout is not None else (None, None)
    _dedupe_all(result, plans, num_sms, get, probe_timeout_s)
    result.environment = _environment(env, gpu, arch, num_sms, timing_settings, race_settings, bundle)
    if reference:
        result.environment["num_sms_reference"] = reference
    if progress:
        progress("plans", plans)
    if dry_run:
        result.problems = [problem_result(p, None, arch, confidence) for p in plans]
    else:
        _race_all(result, plans, watchdog, get, probe_paths, bundle, timing_settings, race_settings, timeout_s,
                  seed, tasks, progress, arch)
    return plans


def _say_hang_risk(plans: list[Plan], run_hang_risk: bool, progress) -> None:
    """Name the candidates the register-pool check predicts to hang before any is raced."""
    risky = [c.record for p in plans for c in p.candidates if c.record is not None and c.record.ok
             and c.record.hang_risk]
    if risky and progress:
        progress("hang_risk", (risky, run_hang_risk))


def _dedupe_all(result, plans: list[Plan], num_sms, get, probe_timeout_s) -> None:
    """Dedupe every plan (grid() and args() in contained children); failures of grid()/args() said once each."""
    facts = launch_facts(plans, num_sms, probe_timeout_s) if num_sms else {}
    for plan in plans:
        if num_sms:
            dedupe(plan, num_sms, get, facts)
        else:
            plan.notes.append(NO_SM_COUNT)
        _grid_errors(result, plan)


def _grid_errors(result, plan: Plan) -> None:
    result.probe_errors += list(dict.fromkeys(   # grid()/args() that failed: said once each, exit 3
        c.reason for c in plan.candidates if c.status == "probe_error" and c.record is not None
        and c.record.ok and c.reason not in result.probe_errors))


def _overlapped(result, problems, arch, starter, wd, probe_paths, store, jobs, compile_timeout_s, toolchains,
                progress, overrides, executor, num_sms, timing, settings, timeout_s, seed, tasks,
                probe_timeout_s=None, run_hang_risk=False, gpu=None) -> list[Plan]:
    """Compile every candidate here while the first problem races in a thread (:mod:`tileprobe.tune.overlap`);
    then race the other problems as before (``gpu``: the worker's info when it was awaited before compiling, for
    probes whose ``args`` take the SM count). Returns the plans."""
    plans = pending_plans(problems)
    landing = Landing(plans, arch, run_hang_risk)
    bench_kw = dict(watchdog=wd, probe_paths=probe_paths, search_dirs=[os.getcwd()], timing=timing,
                    timeout_s=timeout_s, seed=seed, tasks=tasks, trust_recorded=True)
    wait_gpu = (lambda: gpu) if gpu is not None else (lambda: _gpu(result, starter, arch, progress))
    ov = Overlap(plans[0], landing, wait_gpu, num_sms, NO_SM_COUNT, bench_kw,
                 budget_share(settings, len(plans)), lambda sha: None,
                 lambda plan, outcome: problem_result(plan, outcome, arch, settings.confidence), progress,
                 lambda plan, n: launch_facts([plan], n, probe_timeout_s))
    try:
        t1 = time.perf_counter()
        try:
            _, get, env, errors = _records(probe_paths, problems, arch, None, store, jobs, compile_timeout_s,
                                           toolchains, progress, overrides, executor, on_record=ov.on_record)
        finally:
            ov.compiled()
        result.times["compile_s"] = time.perf_counter() - t1
        result.probe_errors += [e for e in errors if e not in result.probe_errors]
        ov.fallback_get = get        # the store's cubins, from this thread only (SQLite)
        ov.join()
        if ov.error is not None:
            raise ov.error
        landing.finish("not_compiled")
        _say_hang_risk(plans, run_hang_risk, progress)
        num_sms = num_sms or GpuInfo.from_dict(ov.gpu or {}).num_sms
        _grid_errors(result, plans[0])
        _dedupe_all(result, plans[1:], num_sms, ov.get, probe_timeout_s)
        result.environment = _environment(env, ov.gpu, arch, num_sms, timing, settings, None)
        if progress:
            progress("plans", plans)
        result.aborted = ov.aborted
        result.problems.append(ov.result)
        if progress:
            progress("problem", ov.result)
        _race_all(result, plans[1:], wd, ov.get, probe_paths, None, timing, settings, timeout_s, seed, tasks,
                  progress, arch)
        result.times["race_s"] = result.times.get("race_s", 0.0) + ov.race_s
        result.times["race_while_compiling_s"] = ov.overlap_s
        result.times["check_s"] = sum(p.check_s for p in result.problems)
        result.environment["clocks"] = _clock_range(result.problems)
    finally:
        ov.release()
    return plans


def _gpu(result: TuneResult, starter, arch: str, progress) -> dict:
    if starter is None:
        return {}
    gpu, start_s, waited_s = starter.wait()
    result.times.update(worker_start_s=start_s, worker_wait_s=waited_s)
    if progress:
        progress("worker", gpu)
    info = GpuInfo.from_dict(gpu)
    if info.sm and get_arch(info.sm).name != arch:
        raise TileprobeError(f"this GPU is {info.name} ({info.sm}) but the tune targets {arch}: drop --arch "
                             f"or give --arch {info.sm} (with --bundle: audit the bundle for {info.sm})")
    return gpu


def _environment(env: dict, gpu: dict, arch: str, num_sms, timing: TimingSettings, race: RaceSettings,
                 bundle: str | None) -> dict:
    keep = ("name", "sm", "num_sms", "driver", "uuid", "pci_bus_id", "memory_bytes", "l2_bytes", "clocks",
            "cuda_driver_api", "torch", "cuda_core", "l2_flush_bytes")
    return {**{k: v for k, v in env.items() if k not in ("tileiras",)}, "arch": arch, "num_sms": num_sms,
            "gpu": {k: gpu.get(k) for k in keep if k in gpu}, "tileiras": ", ".join(env.get("tileiras") or []),
            "timing": timing.mode, "timing_settings": timing.to_dict(), "strategy": race.strategy,
            "race": {"min_samples": race.min_samples, "max_samples": race.max_samples, "tie_pct": race.tie_pct,
                     "confidence": race.confidence, "budget_s": race.budget_s, "seed": race.seed,
                     "final_pct": race.final_pct, "final_max": race.final_max, "final_passes": race.final_passes},
            "bundle": os.path.abspath(bundle) if bundle else None}


def _race_all(result: TuneResult, plans: list[Plan], wd, get, probe_paths, bundle, timing, settings, timeout_s,
              seed, tasks, progress, arch: str) -> None:
    t0 = time.perf_counter()
    search = [] if bundle else [os.getcwd()]   # a bundle is data: probe code only from the paths given
    for i, plan in enumerate(plans):
        raced = plan.raced()
        share = settings.budget_s
        if share is not None:   # the budget is shared: each race gets an equal share of what is left
            share = max(MIN_RACE_S, max(0.0, settings.budget_s - (time.perf_counter() - t0)) / (len(plans) - i))
        if result.aborted or not raced:
            res = problem_result(plan, None, arch, settings.confidence)
            res.notes.append((result.aborted and f"not raced: {result.aborted}") or "no candidate left to time")
            result.problems.append(res)
            continue
        dflt = plan.find(plan.problem.default)
        dflt = (dflt.same_as or dflt) if dflt is not None and dflt.status == "ok" else None
        bench = WorkerBench(wd, {c.id: c for c in raced}, get, probe_paths=probe_paths, search_dirs=search,
                            timing=timing, timeout_s=timeout_s, seed=seed, default=dflt, tasks=tasks,
                            trust_recorded=not bundle)
        if progress:
            progress("race", plan)
        try:
            outcome = Race([c.id for c in raced], bench.measure, bench.check,
                           dataclasses.replace(settings, budget_s=share), progress=progress, final=bench.final).run()
        except WorkerStartError as e:
            result.aborted, outcome = f"no GPU worker could be started: {e}", None
        res = problem_result(plan, outcome, arch, settings.confidence)
        result.problems.append(res)
        if progress:
            progress("problem", res)
    result.times["race_s"] = time.perf_counter() - t0
    result.times["check_s"] = sum(p.check_s for p in result.problems)
    result.environment["clocks"] = _clock_range(result.problems)


def _clock_range(problems: list[ProblemResult]) -> dict:
    out = {}
    for key in ("sm_mhz", "mem_mhz"):
        xs = [x for p in problems for r in p.candidates for x in ((r.clocks or {}).get(key) or [])]
        out[key] = [min(xs), max(xs)] if xs else None
    return out


def _finish(result: TuneResult, plans: list[Plan], store, export: str | None, t0: float) -> None:
    """Compare with the last compiler's tune, save to the store, write the export; the time split's end."""
    t = time.perf_counter()
    if store is not None and not result.dry_run:
        _link(result, plans, store)
        _store(result, store)
    result.times["store_s"] = time.perf_counter() - t
    if result.times.get("race_s") is not None and not result.dry_run:
        result.times["race_kernel_s"] = race_kernel_s(result)
    if export and not result.dry_run:
        from tileprobe.tune.export import write_export
        write_export(result, export)
    result.times["total_s"] = time.perf_counter() - t0 + (result.times.get("startup_s") or 0.0)


def race_kernel_s(result: TuneResult) -> float:
    """The kernel time the races timed (s): each problem's :attr:`~tileprobe.tune.result.ProblemResult.kernel_s`,
    times the launches one sample stands for (``graph`` timing: ``graph_launches`` per replay, each sample their
    mean; the other modes: one). Over ``times["race_s"]`` it is the race's efficiency in the time split."""
    env = TuneEnvironment.from_dict(result.environment)
    per_sample = TimingSettingsData.from_dict(env.timing_settings or {}).graph_launches if env.timing == "graph" \
        else 1
    return sum(p.kernel_s for p in result.problems) * (per_sample or 1)


def _link(result: TuneResult, plans: list[Plan], store) -> None:
    """Give each stored row its compile key and each problem its source hash (the store's provenance)."""
    from tileprobe.audit.pipeline import source_sha256
    for plan, res in zip(plans, result.problems):
        res.source_sha256 = getattr(plan.problem.probe, "source_sha256", "")    # hashed where the probe loaded
        try:
            res.source_sha256 = res.source_sha256 or source_sha256(plan.problem.probe)
        except (OSError, TileprobeError, AttributeError):
            pass
        keys = {c.id: store.key_of(c.record) for c in plan.candidates if c.record is not None}
        for row in res.candidates:
            if row.config is not None:
                row.linked, row.compile_key = True, keys.get(row.label)


def _store(result: TuneResult, store) -> None:
    env = TuneEnvironment.from_dict(result.environment)
    gpu_name = env.gpu_info().name
    for p in result.problems:
        if p.verdict == "not_run":
            continue
        prev = store.previous_tune(p.kernel, p.problem, gpu_name, env.timing, p.tileiras)
        p.previous = compare_previous(p, prev)
        store.save_tune(p.to_dict(), result.environment)

"""``run_probes``: time and check every audited variant on this machine's GPU, one worker under a watchdog.

The timed cubin is the audited cubin: each variant's exact cubin (by ``cubin_sha256``) is loaded with cuda-core
and launched per cuTile's calling convention (:mod:`tileprobe.run.launch`); its SHA-256 is checked first. Audit
records and cubins can come from

* an :class:`~tileprobe.audit.AuditResult` (``result.records``, ``result.cubins``),
* a bundle directory written on another machine (``tileprobe audit … --bundle DIR``: ``DIR/audit.json`` and
  ``DIR/cubins/<sha256>.cubin``; :func:`load_bundle`) — compile where tileiras is, run where the GPU is,
* the results store, or anything else that maps a SHA-256 to bytes (a mapping, a callable, or an object with a
  ``cubin(sha)`` / ``get_cubin(sha)`` / ``load_cubin(sha)`` method).

Each run variant gets ``record.run`` (fields: :data:`tileprobe.run.worker.RUN_FIELDS`): status ``ok`` |
``wrong`` | ``hang`` | ``crash`` | ``error``, ``median_us``, ``p25_us``, ``p75_us``, ``reps``, ``rel_err``,
``warnings``, ``driver_ctas_per_sm``, ``static_ctas_per_sm``, ``occupancy_agrees``, ``error`` …; the environment
gets ``gpu`` (name, sm, driver, clocks) and ``run`` (the settings).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from tileprobe.errors import StoreError, TileprobeError
from tileprobe.judge.verdict import judge_records
from tileprobe.model.arch import get_arch
from tileprobe.run import watchdog as _watchdog
from tileprobe.run.multi import ranked
from tileprobe.run.taskdata import GpuInfo
from tileprobe.run.watchdog import DEFAULT_TIMEOUT_S, Watchdog, WorkerStartError
from tileprobe.run.worker import run_dict
from tileprobe.schema import VariantRecord, VariantRun

# Imports inside functions here are lazy on purpose: at the module head they would add 0.10 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

TASK = "tileprobe.run.worker:run_variant"
#: Record fields the worker needs (the rest of a record stays in the parent).
_TASK_FIELDS = ("kernel", "probe", "case", "hints", "effective_hints", "arch", "symbol", "signature", "threads",
                "registers", "driver_shared_bytes", "ctas_per_sm", "cubin_sha256")
#: cuTile's value of each kernel hint when a kernel declares none (cuda/tile/_compiler_options.py, 1.7.0).
HINT_DEFAULTS = {"occupancy": 1, "num_ctas": 1, "opt_level": 3}


@dataclass
class RunResult:
    """The records (with ``run`` attached to those that ran), the environment (with ``gpu``), the sweep's
    wall time (s), how many variants ran, why others did not, why the sweep stopped early (if it did), and
    (:func:`run_sweep` with a store) why its runs could not be stored."""
    records: list[VariantRecord]
    environment: dict = field(default_factory=dict)
    wall_s: float = 0.0
    ran: int = 0
    skipped: list[str] = field(default_factory=list)
    aborted: str | None = None
    restarts: int = 0
    store_error: str | None = None

    def best_hints(self) -> list[dict]:
        """The fastest correct variant per kernel, case, arch and compiler and its speed-up over the default one
        (:func:`best_hints` of :attr:`records`)."""
        return best_hints(self.records)

    def advice(self) -> list[str]:
        """The advice lines over :attr:`records` (:func:`tileprobe.judge.advice.advice`): static, and measured
        where the records carry runs."""
        from tileprobe.judge.advice import advice
        return advice(self.records)


# --- where records and cubins come from ----------------------------------------------------------------------

def load_bundle(path: str) -> tuple[list[VariantRecord], dict, Callable[[str], bytes | None]]:
    """Read a bundle directory: ``audit.json`` (the audit's JSON) and ``cubins/<sha256>.cubin``, as data
    (:mod:`tileprobe.run.bundle`: fields checked, cubins read only from ``cubins/`` as regular files, no probe code
    imported from what the bundle records).

    Returns the records, the audit's environment and a cubin getter (SHA-256 → bytes or None).

    Raises:
        TileprobeError: no such directory, no ``audit.json``, a malformed one (naming the file and the field), or
            a result written by a newer tileprobe.
    """
    from tileprobe.run.bundle import cubin_reader, load_bundle_records
    records, env = load_bundle_records(path, judge=judge_records)
    env = dict(env)
    env["bundle"] = os.path.abspath(path)
    return records, env, cubin_reader(path)


def cubin_getter(source: Any) -> Callable[[str], bytes | None]:
    """A SHA-256 → cubin-bytes function for a mapping, a callable, a bundle path, an AuditResult or a store."""
    if source is None:
        return lambda sha: None
    if isinstance(source, (str, os.PathLike)):
        return load_bundle(os.fspath(source))[2]
    if isinstance(source, Mapping):
        return source.get
    if hasattr(source, "cubins") and isinstance(source.cubins, Mapping):
        return source.cubins.get
    for name in ("cubin", "get_cubin", "load_cubin"):
        if callable(getattr(source, name, None)):
            return getattr(source, name)
    if callable(source):
        return source
    raise TypeError(f"cannot get cubins from a {type(source).__name__}")


def resolve_probe_path(recorded: str, probe_paths: Sequence[str] = (), search_dirs: Sequence[str] = (), *,
                       trust_recorded: bool = True) -> str | None:
    """The probe file on this machine for a record's ``probe`` path (written on the audit machine): a given probe
    file with the same path or base name; and, with ``trust_recorded`` (records audited here, not read from a
    bundle), the recorded path itself or the base name in ``search_dirs``. A bundle is data: its records' paths are
    never imported (``trust_recorded=False``), only the probe files given on the command line."""
    base = os.path.basename(recorded)
    for p in probe_paths:
        if os.path.abspath(p) == os.path.abspath(recorded):
            return os.path.abspath(p)
    for p in probe_paths:
        if os.path.basename(p) == base and os.path.isfile(p):
            return os.path.abspath(p)
    if not trust_recorded:
        return None
    if os.path.isfile(recorded):
        return os.path.abspath(recorded)
    for d in search_dirs:
        cand = os.path.join(d, base)
        if os.path.isfile(cand):
            return os.path.abspath(cand)
    return None


# --- the sweep -------------------------------------------------------------------------------------------------

def run_probes(records: Iterable[VariantRecord], cubins: Any = None, *, probe_paths: Sequence[str] = (),
               search_dirs: Sequence[str] = (), timeout_s: float = DEFAULT_TIMEOUT_S, reps: int | None = None,
               warmup: int | None = None, warmup_ms: float | None = None, seed: int = 0,
               watchdog: Watchdog | None = None, environment: dict | None = None,
               timing_mode: str = "sustained", trust_recorded: bool = True,
               progress: Callable[[int, int, VariantRecord], None] | None = None, where: dict | None = None,
               cases: dict | None = None, hints: dict | None = None, gpus: Sequence[int] | None = None,
               slots: Sequence | None = None, run_hang_risk: bool = False) -> RunResult:
    """Check and time every ``ok`` variant compiled for this GPU's architecture.

    Args:
        records: audit records (e.g. ``AuditResult.records`` or from :func:`load_bundle`).
        cubins: where the cubins are (see :func:`cubin_getter`); default: ``records`` must come with an
            AuditResult passed here instead.
        probe_paths: probe files given by the user (matched to records by path, then by base name).
        search_dirs: more folders to look for probe files by base name (e.g. the bundle's and the working dir).
        timeout_s: per-variant limit (s) before a variant is called ``hang`` and its worker is killed.
        reps, warmup, warmup_ms: timing settings (:func:`tileprobe.run.timing.measure`; None: its defaults).
        timing_mode: ``sustained`` (default, as do_bench) or ``burst`` (as cuda.tile.tune); docs/TUNE.md.
        seed: base seed of the inputs; variant *i* uses ``seed + i`` (recorded in ``run.seed``).
        watchdog: a running :class:`Watchdog` to use (default: one made and closed here).
        environment: the audit's environment, to which ``gpu`` and ``run`` are added.
        progress: ``progress(i, n, record)`` after each variant.
        trust_recorded: import probe code from the paths the records name (records audited here); False for a
            bundle's records: only ``probe_paths`` (see :func:`resolve_probe_path`).
        gpus: device indexes, one worker each (``--gpus``; :func:`tileprobe.run.multi.parse_gpus`); more than one,
            or ``slots`` given, runs :func:`run_probes_on_gpus`. slots: started or not
            :class:`~tileprobe.run.multi.Slot` s (e.g. Ray actors from :mod:`tileprobe.exec`).
        run_hang_risk: launch variants the register-pool check predicts to hang (``hang_risk``); by
            default they are not launched: their ``run`` is ``status: skipped`` with the reason (a hang costs the
            watchdog's timeout and may leave the GPU unusable).

    Returns a :class:`RunResult`; the records are the same objects, with ``run`` set on those that ran (each run's
    ``gpu``: index, name, uuid, PCI bus id).

    Raises:
        WorkerStartError: no worker could start at all (no GPU, …). A worker that cannot be restarted in the
            middle of a sweep stops it: ``RunResult.aborted`` says why and the variants run so far are kept.
    """
    if slots is not None or (gpus is not None and len(gpus) > 1):
        from tileprobe.run.multi import local_slots
        if slots is None:
            assert gpus is not None      # by construction: the condition above, without slots
            slots = local_slots(gpus, timeout_s)
        return run_probes_on_gpus(records, cubins, slots, probe_paths=probe_paths, search_dirs=search_dirs,
                                  timeout_s=timeout_s, timing=dict(reps=reps, warmup=warmup, warmup_ms=warmup_ms,
                                                                   timing_mode=timing_mode), seed=seed,
                                  environment=environment, trust_recorded=trust_recorded, progress=progress,
                                  run_hang_risk=run_hang_risk)
    t0 = time.perf_counter()
    records = list(records)
    get = cubin_getter(cubins)
    own = watchdog is None
    wd = watchdog or Watchdog(timeout_s=timeout_s)
    result = RunResult(records, dict(environment or {}))
    try:
        gpu = dict(wd.start())
        here = GpuInfo.from_wire(gpu)
        todo = _select(records, here.sm, result.skipped, run_hang_risk)
        for i, rec in enumerate(todo):
            try:
                rec.run = _run_one(wd, rec, get, probe_paths, search_dirs, timeout_s,
                                   dict(seed=seed + i, reps=reps, warmup=warmup, warmup_ms=warmup_ms,
                                        timing_mode=timing_mode), trust_recorded)
            except WorkerStartError as e:
                rec.run = new_run(status="crash", error=f"no worker could be started for this variant: {e}")
                result.aborted = str(e)
                break
            rec.run.gpu = here.ref((gpus or [0])[0])
            result.ran += 1
            if progress:
                progress(i + 1, len(todo), rec)
        result.restarts = wd.restarts
        run_env = {"timeout_s": timeout_s, "reps": reps, "warmup": warmup, "timing_mode": timing_mode,
                   "warmup_ms": warmup_ms, "seed": seed, "block": [1, 1, 1], "l2_flush_bytes": here.l2_flush_bytes}
    finally:
        if own:
            wd.close()
    result.wall_s = time.perf_counter() - t0
    # the environment's JSON: the GPU's hello as it came, and the run's settings (worker start-up apart)
    result.environment.update(gpu=gpu, run={**run_env, "sweep_wall_s": round(result.wall_s, 3)})
    return result


def run_probes_on_gpus(records: Iterable[VariantRecord], cubins: Any, slots: Sequence, *,
                       probe_paths: Sequence[str] = (), search_dirs: Sequence[str] = (),
                       timeout_s: float = DEFAULT_TIMEOUT_S, timing: dict | None = None, seed: int = 0,
                       environment: dict | None = None, trust_recorded: bool = True,
                       progress: Callable[[int, int, VariantRecord], None] | None = None,
                       run_hang_risk: bool = False) -> RunResult:
    """:func:`run_probes` on several GPU workers at once (:mod:`tileprobe.run.multi`): the slots start together,
    then each takes the next variant when it is free. Variant *i* keeps seed ``seed + i`` whichever GPU runs it, so
    the results equal a one-GPU run's except for the timings. Runs on a GPU shared by two slots are flagged
    ``shared_gpu`` and never ranked. The environment gets ``gpu`` (the first started slot's) and ``gpus`` (each
    slot: GPU, shared or not, worker start-up s, variants run).

    Raises:
        WorkerStartError: no slot could start. UsageError: the GPUs are of different architectures.
    """
    from tileprobe.run import multi
    t0 = time.perf_counter()
    records, get = list(records), cubin_getter(cubins)
    result = RunResult(records, dict(environment or {}))
    timing = dict(timing or {})
    try:
        multi.start_slots(slots)
        live = [s for s in slots if s.error is None]
        if not live:
            raise WorkerStartError("no GPU worker could start: " + "; ".join(f"GPU {s.device}: {s.error}" for s in slots))
        multi.check_same_arch(slots)
        gpu = dict(live[0].info)
        here = live[0].gpu
        todo = _select(records, here.sm, result.skipped, run_hang_risk)

        def run_one(slot, pos, rec):
            return _run_one(slot.worker, rec, get, probe_paths, search_dirs, timeout_s,
                            dict(seed=seed + pos, **timing), trust_recorded)
        result.aborted = multi.dispatch(slots, todo, run_one, progress)
        result.ran = sum(s.ran for s in slots)
        result.restarts = sum(getattr(s.worker, "restarts", 0) for s in slots)
        if any(s.shared for s in slots):
            result.skipped.append(multi.SHARED_WARNING.replace("timed", "runs were timed", 1))
        result.environment.update(gpu=gpu, gpus=multi.environment(slots))
        run_env = {"timeout_s": timeout_s, "seed": seed, "block": [1, 1, 1], "l2_flush_bytes": here.l2_flush_bytes,
                   "gpus": [s.device for s in slots], **timing}
    finally:
        multi.close_slots(slots)
    result.wall_s = time.perf_counter() - t0
    # the environment's JSON: the run's settings (worker start-up apart)
    result.environment.update(run={**run_env, "sweep_wall_s": round(result.wall_s, 3)})
    return result


def _select(records: list[VariantRecord], sm: str | None, skipped: list[str],
            run_hang_risk: bool = False) -> list[VariantRecord]:
    """The records to run: compiled fine, for this GPU's architecture, and — unless ``run_hang_risk`` — not
    predicted to hang (those get ``run = skipped``, :func:`hang_risk_skip`)."""
    todo = []
    here = get_arch(sm).name if sm else None
    for r in records:
        if not r.ok:
            continue
        if here and get_arch(r.arch).name != here:
            skipped.append(f"{r.kernel} {r.arch}: compiled for {r.arch}, this GPU is {here}")
            continue
        if r.hang_risk and not run_hang_risk:
            r.run = hang_risk_skip(r)
            skipped.append(f"{hang_risk_label(r)}: not launched: {r.run.error}")
            continue
        todo.append(r)
    return todo


#: How a run that was not launched for a predicted hang says so (``run.error``), before the check's reason.
HANG_SKIP = "the register-pool check predicts a hang (--run-hang-risk launches it anyway)"


def new_run(**fields: Any) -> VariantRun:
    """A run result with every field of :data:`tileprobe.run.worker.RUN_FIELDS`, in its order (defaults for those
    not given), then any other of ``fields`` (a worker's whole result, which the pipe carries as a dict)."""
    return VariantRun.from_dict(run_dict(**fields))


def hang_risk_skip(r: VariantRecord) -> VariantRun:
    """The ``run`` of a variant not launched because the register-pool check predicts a hang."""
    return new_run(status="skipped", register_pool="hang_risk", cubin_sha256=r.cubin_sha256,
                    static_ctas_per_sm=r.ctas_per_sm, threads=r.threads,
                    error=f"{HANG_SKIP}: {r.pool_reason}")


def hang_risk_label(r: VariantRecord) -> str:
    """``kernel arch NAME=VALUE …`` of a record (for the lines that name predicted hangs)."""
    values = " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()])
    return " ".join(x for x in (r.kernel, r.arch, values) if x)


def hang_risks(records: Iterable[VariantRecord]) -> list[VariantRecord]:
    """The compiled records the register-pool check predicts to hang (what ``run`` and ``tune`` name before
    running)."""
    return [r for r in records if r.ok and r.hang_risk]


def _run_one(wd: Watchdog, rec: VariantRecord, get, probe_paths, search_dirs, timeout_s, timing: dict,
             trust_recorded: bool = True) -> VariantRun:
    """Check and time ``rec`` in the worker of ``wd``: its result as the worker sent it (converted from the pipe's
    dict), or an ``error``/``hang``/``crash`` result, with the round trip (s), the worker's pid and the
    register-pool prediction added."""
    try:
        cubin = get(rec.cubin_sha256) if rec.cubin_sha256 else None
    except TileprobeError as e:   # a bundle's cubin that is a link, a FIFO, oversized, or badly named
        return new_run(status="error", error=str(e))
    if cubin is None:
        return new_run(status="error", error=f"cubin {rec.cubin_sha256} not found (bundle incomplete?)")
    if hashlib.sha256(cubin).hexdigest() != rec.cubin_sha256:
        return new_run(status="error", error=f"cubin {rec.cubin_sha256}: its bytes hash to another SHA-256; "
                        "the file was changed after the audit")
    path = resolve_probe_path(rec.probe, probe_paths, search_dirs, trust_recorded=trust_recorded)
    if path is None:
        return new_run(status="error", error=probe_not_given(rec.probe, trust_recorded))
    task = {"record": {k: getattr(rec, k) for k in _TASK_FIELDS}, "cubin": cubin, "probe_path": path, **timing}
    out = wd.submit(TASK, task, timeout_s=timeout_s)
    base = dict(seed=timing["seed"], cubin_sha256=rec.cubin_sha256, static_ctas_per_sm=rec.ctas_per_sm,
                threads=rec.threads)
    if out.status == "done":
        run = new_run(**out.value)
    elif out.status == "hang":
        run = new_run(status="hang", error=out.error, **base)
    elif out.status == "crash":
        run = new_run(status="crash", error=out.error, fatal=True, **base)
    else:   # the task raised: a tileprobe bug in the worker, reported as an error of this variant
        run = new_run(status="error", error=out.error, **base)
    run.roundtrip_s = round(out.wall_s, 6)
    run.worker_pid = out.worker_pid
    run.register_pool = rec.pool_verdict      # the prediction beside what happened
    return run


def probe_not_given(recorded: str, trust_recorded: bool) -> str:
    """Why a record's probe file was not found (the run's error)."""
    if not trust_recorded:
        return (f"probe file {os.path.basename(recorded)} not given: a bundle is data, and tileprobe imports probe "
                "code only from probe files named on the command line (tileprobe run --bundle DIR "
                f"path/to/{os.path.basename(recorded)})")
    return (f"probe file {recorded} not found on this machine: pass it on the command line "
            "(tileprobe run PROBE.py --bundle DIR)")


# --- reading the results ---------------------------------------------------------------------------------------

def is_default_variant(rec: VariantRecord) -> bool:
    """True when every hint of the variant is left as declared (``None``) or set to cuTile's own default
    (:data:`HINT_DEFAULTS`). A kernel that declares other values is best probed with ``None`` in the hint list."""
    return all(v is None or (k in HINT_DEFAULTS and v == HINT_DEFAULTS[k]) for k, v in rec.hints.items())


def best_hints(records: Iterable[VariantRecord]) -> list[dict]:
    """Per (kernel, case, arch, compiler): the fastest correct variant and its speed-up over the default one.

    Returns dicts with ``kernel``, ``case``, ``arch``, ``tileiras`` (build), ``best_hints``, ``best_us``, ``default_hints``,
    ``default_us`` and ``speedup`` (default / best; None when no default variant ran correctly).
    """
    groups: dict = {}
    for r in records:
        if ranked(r.run):   # ok, timed, not on a shared GPU (tileprobe.run.multi)
            key = (r.kernel, json.dumps(r.case, sort_keys=True, default=str), r.arch, r.tileiras)
            groups.setdefault(key, []).append(r)
    out = []
    for (kernel, _, arch, build), rows in groups.items():
        best = min(rows, key=lambda r: r.run.median_us)
        default = next((r for r in rows if is_default_variant(r)), None)
        out.append({"kernel": kernel, "case": best.case, "arch": arch, "tileiras": build, "best_hints": best.hints,
                    "best_us": best.run.median_us, "default_hints": default.hints if default else None,
                    "default_us": default.run.median_us if default else None,
                    "speedup": (default.run.median_us / best.run.median_us) if default else None})
    return out


def run_audit(result, **kw) -> RunResult:
    """:func:`run_probes` for an :class:`~tileprobe.audit.AuditResult` (its records, cubins and environment)."""
    kw.setdefault("environment", result.environment)
    return run_probes(result.records, result.cubins, **kw)


# --- `tileprobe run`: audit (or read a bundle), run, store -----------------------------------------------------

def run_sweep(probes: Sequence[str] = (), *, arch: str | None = None, bundle: str | None = None, store=None,
              timeout_s: float = DEFAULT_TIMEOUT_S, reps: int | None = None, warmup: int | None = None, seed: int = 0,
              jobs: int | None = None, command_line: str = "", timing_mode: str = "sustained", on_gpu: Callable[[dict], None] | None = None,
              on_probe_error: Callable[[str], None] | None = None,
              progress: Callable[[int, int, VariantRecord], None] | None = None, where: dict | None = None,
              cases: dict | None = None, hints: dict | None = None, gpus: Sequence[int] | None = None,
              slots: Sequence | None = None, executor=None, run_hang_risk: bool = False,
              on_hang_risk: Callable[[list[VariantRecord], bool], None] | None = None) -> RunResult:
    """``tileprobe run``: audit ``probes`` for this GPU's arch (or ``arch``), or read the audit a ``bundle``
    directory carries (:func:`load_bundle`; ``probes`` then picks its probes by file name and is where their code
    is imported from: a bundle is data, the probe paths it records are never imported), then check and time
    every variant (:func:`run_probes`) in a worker under a :class:`Watchdog`.

    Args:
        store: a :class:`~tileprobe.store.Store`: the audit reuses and fills it (saved with ``command_line``) and
            each run is saved to it; a store error is reported in ``RunResult.store_error`` (nothing lost).
        timeout_s: per-variant limit (s) before a hang; reps, warmup, seed, timing_mode: as :func:`run_probes`.
        jobs: parallel compiles for the audit. on_gpu(gpu): once the worker is up (name, sm, num_sms, driver).
        on_probe_error(text): for each probe the audit could not build. progress(i, n, record): after each variant.
        where: run only the variants matching ``{name: value}`` (``--where``; :mod:`tileprobe.select`).
        cases, hints: ``{name: [values]}`` replacing the probes' own (``--case`` / ``--hint``; not with a bundle).
        gpus, slots: several GPU workers (``--gpus``): :func:`run_probes_on_gpus`; ``on_gpu`` then gets the first
            GPU, with ``gpus``: every slot's.
        executor: a :mod:`tileprobe.exec` executor (``--executor ray``): the audit's compiles go through it, and
            its ``gpu_slots`` are the GPU workers (one per entry of ``gpus``, default one).
        run_hang_risk: launch the variants predicted to hang too (:func:`run_probes`). on_hang_risk(records,
            launched): before any variant runs, with the variants predicted to hang (only when there are some).

    Raises:
        TileprobeError: neither ``probes`` nor ``bundle``; a bundle without ``probes``; an unreadable or malformed
            bundle (checked before the GPU worker starts). WorkerStartError: no worker could start (no GPU, …).
    """
    if not probes and not bundle:
        raise TileprobeError("give probe files to audit and run, or --bundle DIR with an audit made elsewhere")
    from_bundle = _from_bundle(bundle, probes, arch) if bundle else None   # read and checked before any GPU work
    audit_id = None
    if from_bundle and store is not None:
        audit_id = import_bundle(store, from_bundle[0], from_bundle[1], from_bundle[2], command_line)
    if executor is not None and slots is None and executor.name != "local":
        from tileprobe.run.multi import Slot
        slots = [Slot(g, w) for g, w in zip(gpus or [0], executor.gpu_slots(gpus or [0], timeout_s=timeout_s))]
    if slots is not None or (gpus is not None and len(gpus) > 1):
        result = _sweep_on_gpus(probes, from_bundle, slots, gpus, executor=executor, arch=arch, bundle=bundle,
                                store=store, timeout_s=timeout_s, seed=seed, jobs=jobs, command_line=command_line,
                                on_gpu=on_gpu, on_probe_error=on_probe_error, progress=progress, where=where,
                                cases=cases, hints=hints,
                                timing=dict(reps=reps, warmup=warmup, warmup_ms=None, timing_mode=timing_mode),
                                run_hang_risk=run_hang_risk, on_hang_risk=on_hang_risk)
        return _finish(result, store, command_line, audit_id)
    watchdog = (_watchdog.Watchdog(timeout_s=timeout_s, env={"CUDA_VISIBLE_DEVICES": str(gpus[0])}) if gpus
                else _watchdog.Watchdog(timeout_s=timeout_s))
    with watchdog as wd:
        gpu = wd.start()
        if on_gpu:
            on_gpu(gpu)
        records, env, cubins, search = _sweep_records(gpu, from_bundle, probes, arch, jobs, store, command_line,
                                                      on_probe_error, where, cases, hints, executor)
        _name_hang_risks(records, gpu, run_hang_risk, on_hang_risk)
        result = run_probes(records, cubins, probe_paths=probes, search_dirs=search, timeout_s=timeout_s,
                            reps=reps, warmup=warmup, seed=seed, watchdog=wd, environment=env, progress=progress,
                            timing_mode=timing_mode, trust_recorded=not bundle, gpus=gpus,
                            run_hang_risk=run_hang_risk)
    return _finish(result, store, command_line, audit_id)


def _name_hang_risks(records, gpu: dict, run_hang_risk: bool, on_hang_risk) -> None:
    """Call ``on_hang_risk`` with the variants of this GPU's arch predicted to hang, before any runs. ``gpu``: the
    worker's hello info."""
    sm = GpuInfo.from_wire(gpu).sm
    here = get_arch(sm).name if sm else None
    risky = [r for r in hang_risks(records) if here is None or get_arch(r.arch).name == here]
    if risky and on_hang_risk:
        on_hang_risk(risky, run_hang_risk)


def _sweep_records(gpu: dict, from_bundle, probes, arch, jobs, store, command_line, on_probe_error, where, cases,
                   hints, executor) -> tuple:
    """What a sweep runs, for one GPU worker or several: the bundle's records, or an audit here for the GPU's arch
    (or ``arch``); then the ``where`` selection and the release interleaving (:func:`interleave_releases`).
    Returns (records, environment, cubins, search dirs)."""
    if from_bundle:
        records, env, cubins, search = from_bundle
    else:
        here = GpuInfo.from_wire(gpu)
        target = arch or here.sm
        if target is None:
            raise TileprobeError("the GPU worker did not say its GPU's architecture (its hello has no 'sm'): give "
                                 "--arch sm_XX")
        records, env, cubins, search = _audit_here(probes, target, jobs, store, command_line,
                                                   on_probe_error, where=where, cases=cases, hints=hints,
                                                   executor=executor, num_sms=here.num_sms)
    if where:
        from tileprobe.select import select_or_explain
        records = select_or_explain(records, where)
    return interleave_releases(records), env, cubins, search


def _finish(result: RunResult, store, command_line: str, audit_id) -> RunResult:
    """Note the command and the stored bundle audit in the environment, and save the runs to ``store``."""
    if command_line:
        result.environment["run_command"] = command_line
    if audit_id is not None:
        result.environment["stored_audit"] = audit_id
    if store is not None:
        result.store_error = save_runs(store, result)
    return result


def _sweep_on_gpus(probes, from_bundle, slots, gpus, *, executor, arch, bundle, store, timeout_s, seed, jobs, command_line,
                   on_gpu, on_probe_error, progress, where, cases, hints, timing, run_hang_risk=False,
                   on_hang_risk=None) -> RunResult:
    """:func:`run_sweep` with several GPU workers: they start (together) while nothing else runs, so worker
    start-up is apart from the sweep's timing (``environment["gpus"][i]["worker_start_s"]``)."""
    from tileprobe.run import multi
    slots = slots if slots is not None else multi.local_slots(gpus, timeout_s)
    try:
        multi.start_slots(slots)
        live = [s for s in slots if s.error is None]
        if not live:
            raise WorkerStartError("no GPU worker could start: " + "; ".join(f"GPU {s.device}: {s.error}"
                                                                              for s in slots))
        gpu = dict(live[0].info, gpus=multi.environment(slots))
        if on_gpu:
            on_gpu(gpu)
        records, env, cubins, search = _sweep_records(gpu, from_bundle, probes, arch, jobs, store, command_line,
                                                      on_probe_error, where, cases, hints, executor)
        _name_hang_risks(records, gpu, run_hang_risk, on_hang_risk)
        result = run_probes_on_gpus(records, cubins, slots, probe_paths=probes, search_dirs=search,
                                    timeout_s=timeout_s, timing=timing, seed=seed, environment=env,
                                    trust_recorded=not bundle, progress=progress, run_hang_risk=run_hang_risk)
    finally:
        multi.close_slots(slots)
    return result


def interleave_releases(records: Sequence[VariantRecord], offset: int = 0) -> list[VariantRecord]:
    """The run order of records compiled by several tileiras releases: each variant (kernel, case,
    hints, arch) under every release back to back, and the release that goes first rotates from one variant to the
    next (v1: A B C, v2: B C A, v3: C A B …), so clock and thermal drift over the sweep hits every release alike
    instead of favouring the one run first. Variants keep their order; one release: the order is unchanged.
    Records of a variant some release lacks keep their place in the rotation of those present. ``offset`` shifts
    the rotation (round k of a repeated sweep passes k, so a one-variant sweep alternates too)."""
    builds = list(dict.fromkeys(r.tileiras for r in records))
    if len(builds) < 2:
        return list(records)
    groups: dict[tuple, dict[str, list[VariantRecord]]] = {}
    for r in records:
        key = (r.kernel, r.probe, json.dumps(r.case, sort_keys=True, default=str),
               json.dumps(r.hints, sort_keys=True, default=str), r.arch)
        groups.setdefault(key, {}).setdefault(r.tileiras, []).append(r)
    out: list[VariantRecord] = []
    for i, by_build in enumerate(groups.values()):
        j = (i + offset) % len(builds)
        for b in builds[j:] + builds[:j]:
            out.extend(by_build.get(b, []))
    return out


def _from_bundle(bundle: str, probes: Sequence[str], arch: str | None):
    records, env, cubins = load_bundle(bundle)
    if not probes:
        names = sorted({os.path.basename(r.probe) for r in records})
        raise TileprobeError(f"--bundle {bundle}: name its probe files too ({', '.join(names) or 'none recorded'}): a "
                             "bundle is data, and tileprobe imports probe code only from probe files given on the "
                             f"command line: tileprobe run --bundle {bundle} path/to/{names[0] if names else 'probe.py'}")
    if probes:
        given = {os.path.basename(p) for p in probes}
        records = [r for r in records if os.path.basename(r.probe) in given]
    if arch:
        records = [r for r in records if get_arch(r.arch).name == get_arch(arch).name]
    return records, env, cubins, []   # a bundle is data: probe code only from the paths on the command line


def import_bundle(store, records: Sequence[VariantRecord], env: dict, cubins, command_line: str) -> int:
    """Store a bundle's compiles and its audit (so this machine's runs of it are stored, keyed by release, and
    ``tileprobe compare AUDIT_ID`` / ``history`` see them); return the stored audit's id."""
    store.import_records(records, cubin_getter(cubins), env.get("cuda_tile"))
    return store.save_audit(SimpleNamespace(records=list(records), environment=env, wall_s=0.0),
                            command_line or f"run --bundle {env.get('bundle', '')}")


def _audit_here(probes: Sequence[str], arch: str, jobs: int | None, store, command_line: str, on_probe_error,
                executor=None, **select):
    from tileprobe.audit import audit
    result = audit(list(probes), [get_arch(arch).name], jobs=jobs, store=store, executor=executor, **select)
    if store is not None:
        store.save_audit(result, command_line)
    for e in result.probe_errors:
        if on_probe_error:
            on_probe_error(e)
    return result.records, result.environment, result.cubins, [os.getcwd()]


def save_runs(store, result: RunResult) -> str | None:
    """Save every run of ``result`` to ``store`` (a :class:`~tileprobe.store.Store`); return None, or the
    :class:`~tileprobe.errors.StoreError` message that stopped the saving (the runs before it are kept)."""
    gpu = result.environment.get("gpu", {})
    for r in result.records:
        if r.run:
            try:
                own = r.run.gpu if isinstance(r.run.gpu, dict) else {}   # a name in stored runs
                store.save_run(r, r.run, {**gpu, **{k: v for k, v in own.items() if v}})
            except StoreError as e:
                return str(e)
    return None

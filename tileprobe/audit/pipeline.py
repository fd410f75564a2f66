"""The audit pipeline in one place: probes → variants → compile → cubin → occupancy → verdicts → records.

No GPU is needed. ``audit()`` is what ``tileprobe audit`` runs; every other command builds on its records.
"""
from __future__ import annotations

import dataclasses
import itertools
import platform
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..errors import CubinError, ProbeError, TileprobeError
from ..model.arch import get_arch
from ..model.cubin import CubinInfo
from ..model.occupancy import theoretical_occupancy
from ..schema import FAILURE_FIXES, VariantRecord, canonical, derive_failure, short_build, value_key
from .compile import DEFAULT_TIMEOUT_S, CompileResult, Variant, compile_variants
from .probe import NoProbeDefined, Probe, load_probes
from .verdict import judge_records


@dataclass
class AuditResult:
    """Records of one audit, the probe errors met on the way, and the environment it ran in."""
    records: list[VariantRecord] = field(default_factory=list)
    probe_errors: list[str] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    wall_s: float = 0.0
    cubins: dict = field(default_factory=dict)   # cubin_sha256 -> bytes (for the store and `run`)
    notes: list[str] = field(default_factory=list)   # e.g. helper files skipped (issue 12)


def source_sha256(probe: Probe) -> str:
    """SHA-256 over the probe file and the file that defines its kernel (the store's notion of "same code")."""
    import hashlib
    import inspect
    h = hashlib.sha256()
    files = [probe.source]
    try:
        files.append(inspect.getsourcefile(probe.resolve_kernel()._pyfunc))
    except (TypeError, OSError, ProbeError):
        pass
    for f in dict.fromkeys(x for x in files if x):
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def plan_variants(probes: Sequence[Probe], archs: Sequence[str]) -> list[Variant]:
    """Every (probe, case, hints, arch) to compile, in a stable order."""
    out = []
    for p in probes:
        digest = source_sha256(p)
        for arch in archs:
            if p.archs and get_arch(arch).name not in {get_arch(a).name for a in p.archs}:
                continue
            for case in p.case_grid():
                for hints in p.hint_grid():
                    out.append(Variant(p.source or "", p.index, p.label, tuple(case.items()),
                                       tuple(hints.items()), get_arch(arch).name, digest,
                                       tuple(p.knobs.items())))
    return out


def record_from(res: CompileResult) -> VariantRecord:
    """Turn one compile result into a variant record: read the cubin and compute occupancy."""
    v = res.variant
    rec = VariantRecord(kernel=v.probe_name, probe=v.probe_path, case=canonical(v.case_dict),
                        hints=canonical(v.hints_dict),
                        arch=v.arch, tileiras=res.tileiras, status=res.status, cuda_tile=res.cuda_tile,
                        effective_hints=res.effective_hints, error=res.error, repro=res.repro,
                        compile_s=round(res.compile_s, 3), symbol=res.symbol, signature=res.signature,
                        knobs=dict(v.knobs), failure=res.failure, message=res.message, fix=res.fix)
    if res.status != "ok" and not rec.failure:   # a result made without a class (e.g. a tileprobe bug in a worker)
        rec.failure, rec.message = derive_failure(res.status, res.error)
        rec.fix = rec.fix or FAILURE_FIXES.get(rec.failure, "")
    if res.status != "ok" or res.cubin is None:
        return rec
    try:
        info = CubinInfo.from_bytes(res.cubin)
    except CubinError as e:
        rec.status, rec.failure, rec.error = "compile_error", "compile_error", f"unreadable cubin: {e}"
        rec.message, rec.fix = rec.error, "the compiler wrote a cubin tileprobe cannot read: report it with the cubin"
        return rec
    k = info.kernel(res.symbol) if res.symbol and any(x.name == res.symbol for x in info.kernels) else info.kernel()
    rec.threads, rec.registers, rec.max_regs = k.threads_per_cta, k.regs_per_thread, k.max_regs
    rec.shared_bytes, rec.driver_shared_bytes = k.smem_static_bytes, k.smem_driver_bytes
    rec.stack_bytes = k.stack_bytes
    rec.cluster_dims = list(k.cluster_dims) if k.cluster_dims else None
    rec.cubin_sha256, rec.code_sha256 = info.sha256, info.code_sha256
    if k.ptx is not None:
        rec.ptx = {"maxnreg": k.ptx.maxnreg, "reqntid": list(k.ptx.reqntid) if k.ptx.reqntid else None,
                   "minnctapersm": k.ptx.minnctapersm}
    occ = theoretical_occupancy(get_arch(v.arch), k.threads_per_cta, k.regs_per_thread, k.smem_driver_bytes)
    rec.ctas_per_sm, rec.warps_per_sm = occ.ctas_per_sm, occ.warps_per_sm
    rec.occupancy_pct, rec.limiter = round(occ.occupancy_pct, 1), occ.limiter
    if res.remarks:
        from ..model.remarks import parse_remarks
        rec.remarks = parse_remarks(res.remarks)
    rec.sass = res.sass
    return rec


def resolve_compiler(tc: dict) -> dict:
    """Fill a toolchain dict's ``tileiras`` path (default: the one cuTile would pick), ``build`` string and
    ``targets`` (what its ``--help`` lists; asked once per toolchain, ``[]`` when unknown)."""
    from . import _cutile
    tc = dict(tc)
    if not tc.get("tileiras"):
        tc["tileiras"] = _cutile.current_compiler()
    tc["build"] = _cutile.tileiras_build(tc["tileiras"])
    if "targets" not in tc:
        tc["targets"] = _cutile.tileiras_targets(tc["tileiras"])
    return tc


def refuse_unlisted(variants: Sequence[Variant], tc: dict) -> tuple[list[CompileResult], list[Variant]]:
    """Split ``variants`` into results for the archs compiler ``tc`` does not list (``unsupported_target``,
    nothing compiled: :func:`tileprobe.audit.failure.unsupported_target`) and the variants to compile."""
    from . import _cutile
    from .failure import help_command, unsupported_target
    targets = tc.get("targets") or []
    refused, todo = [], []
    for v in variants:
        if targets and v.arch not in targets:
            res = CompileResult(v, "compile_error", tileiras=tc["build"], tileiras_path=tc["tileiras"],
                                cuda_tile=_cutile.cutile_version(), repro=help_command(tc["tileiras"]))
            refused.append(res.fail(unsupported_target(v.arch, targets, tc["tileiras"], tc["build"])))
        else:
            todo.append(v)
    return refused, todo


def environment(tileiras_builds: Iterable[str] = ()) -> dict:
    """Provenance of a result set: host, Python, cuda-tile and the tileiras builds used."""
    from .._version import __version__
    from . import _cutile
    return {"tileprobe": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
            "cuda_tile": _cutile.cutile_version(), "tileiras": sorted(set(tileiras_builds))}


def audit(probe_paths: Sequence[str], archs: Sequence[str], *, toolchains: Sequence[dict] | None = None,
          jobs: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, with_sass: bool = False,
          store=None, progress: Callable | None = None,
          select: Callable[[Variant], bool] | None = None, repeat: int = 1,
          where: dict | None = None, cases: dict | None = None, hints: dict | None = None,
          retry_failed: bool = False) -> AuditResult:
    """Audit probe files for architectures, with one or more tileiras toolchains.

    Args:
        probe_paths: probe files (each defines ``probe`` or ``probes``).
        archs: targets such as ``["sm_90", "sm_120"]`` (see :data:`tileprobe.model.arch.ARCHS`).
        toolchains: ``[{"tileiras": path, "lib_dirs": [...]}]``; ``None`` = the tileiras cuTile would pick.
        jobs: parallel compile workers (default: all CPUs).
        timeout_s: per-variant compiler timeout (s).
        with_sass: also disassemble each cubin for SASS traits (needs nvdisasm).
        store: a :class:`tileprobe.store.Store`; variants already there are not compiled again and new ones are
            saved as they finish.
        progress: ``progress(kind, n)`` callback, per toolchain: ("stored", n) the variants taken from the store,
            then ("total", n) the compiles to run (repeats included), then ("advance", 1) per finished compile.
        select: keep only the planned variants for which ``select(variant)`` is true (e.g. one case).
        repeat: compile each variant this many times (≥ 1); records then carry ``code_hashes`` and
            ``deterministic``, and verdicts/compare treat any shared code hash as "same code" (FIELD_NOTES:
            tileiras is not always deterministic). Repeats bypass the store.
        where: ``{name: value}`` (:func:`tileprobe.audit.where.parse_where`): compile only the cases whose
            constants match (every value of each hint: verdicts compare them); hint items are for the caller to
            select records with (:func:`tileprobe.audit.where.select`).
        cases, hints: ``{name: [values]}`` replacing (hints: or adding) the probes' own values
            (``--case`` / ``--hint``; :func:`tileprobe.audit.where.apply_overrides`).
        retry_failed: compile again the variants the store holds as failed (by default a stored failure is the
            answer, except probe errors and broken environments: :meth:`tileprobe.store.Store.lookup`).

    A variant for an arch the compiler does not list (``tileiras --help``, asked once per toolchain) is not
    compiled: its record says ``unsupported_target``.

    A broken probe file is reported in ``probe_errors`` (file and line) and the other probes go on.
    Raises :class:`TileprobeError` only when nothing can be audited (unknown arch, no probe loaded, a ``where``
    or override that names nothing or selects nothing: :class:`~tileprobe.audit.where.WhereError`).
    """
    import time
    t0 = time.perf_counter()
    archs = [get_arch(a).name for a in archs]
    result = AuditResult()
    probes: list[Probe] = []
    for path in probe_paths:
        try:
            probes.extend(load_probes(path))
        except NoProbeDefined as e:   # issue 12: a helper module among several files is not a broken probe
            if len(probe_paths) == 1:
                result.probe_errors.append(str(e))
            else:
                result.notes.append(f"{path}: skipped, it defines no probe (a helper module?)")
        except ProbeError as e:
            result.probe_errors.append(str(e))
    if not probes:
        raise TileprobeError("no probe could be loaded:\n  " + "\n  ".join(result.probe_errors + result.notes))
    from .where import apply_overrides, case_filter
    probes = apply_overrides(probes, cases, hints)
    variants = case_filter(where, probes, plan_variants(probes, archs))
    if select is not None:
        variants = [v for v in variants if select(v)]
    if repeat < 1:
        raise TileprobeError(f"--repeat {repeat}: give 1 or more compiles per variant")
    for tc in toolchains or [{}]:
        tc = resolve_compiler(tc)
        todo = variants
        if store is not None:
            cached, todo = store.lookup(variants, tc, with_sass=with_sass, retry_failed=retry_failed)
            result.records.extend(cached)
            failed = sum(not r.ok for r in cached)
            if failed:
                result.notes.append(f"{failed} failed variant(s) taken from the store, not compiled again "
                                    f"({short_build(tc['build'])}); --retry-failed compiles them again")
            for rec in cached:
                data = store.cubin(rec.cubin_sha256) if rec.cubin_sha256 else None
                if data is not None:
                    result.cubins[rec.cubin_sha256] = data
        extra = [dataclasses.replace(v, rep=i) for i in range(1, repeat) for v in variants
                 if not tc.get("targets") or v.arch in tc["targets"]]
        if progress:
            progress("stored", len(variants) - len(todo))
            progress("total", len(todo) + len(extra))
        repeats: dict[tuple, list[str]] = {}
        refused, todo = refuse_unlisted(todo, tc)
        compiled = compile_variants(todo + extra, tileiras=tc.get("tileiras"), lib_dirs=tc.get("lib_dirs"),
                                    jobs=jobs, timeout_s=timeout_s, with_sass=with_sass)
        for res in itertools.chain(refused, compiled):
            if progress:
                progress("advance", 1)
            if res.variant.rep:
                if res.cubin is not None:
                    repeats.setdefault(_base(res.variant), []).append(CubinInfo.from_bytes(res.cubin).code_sha256)
                continue
            rec = record_from(res)
            if res.cubin is not None and rec.cubin_sha256:
                result.cubins[rec.cubin_sha256] = res.cubin
            if store is not None:
                store.save_compile(res, rec, tc)
            result.records.append(rec)
        if repeat > 1:
            _mark_determinism(result.records, repeats, tc["build"])
    probe_errors = {r.error for r in result.records if r.status == "probe_error"}
    result.probe_errors.extend(sorted(probe_errors))
    judge_records(result.records)
    if store is not None:
        store.attach_runs(result.records)
    order = {_order_key(v.probe_path, v.probe_name, v.case_dict, v.hints_dict, v.arch): i
             for i, v in enumerate(variants)}
    result.records.sort(key=lambda r: (r.tileiras, order.get(_order_key(r.probe, r.kernel, r.case, r.hints, r.arch), 0)))
    result.environment = environment(r.tileiras for r in result.records if r.tileiras)
    result.wall_s = time.perf_counter() - t0
    return result


def _base(v: Variant) -> tuple:
    return _order_key(v.probe_path, v.probe_name, v.case_dict, v.hints_dict, v.arch)


def _mark_determinism(records: list[VariantRecord], repeats: dict[tuple, list[str]], build: str) -> None:
    """Attach the distinct code hashes of the repeated compiles to each ok record of compiler ``build``."""
    for r in records:
        if r.ok and r.tileiras == build:
            hashes = repeats.get(_order_key(r.probe, r.kernel, r.case, r.hints, r.arch), [])
            r.code_hashes = sorted(set(hashes) | {r.code_sha256})
            r.deterministic = len(r.code_hashes) == 1


def _order_key(probe: str, kernel: str, case: dict, hints: dict, arch: str) -> tuple:
    return (probe, kernel, value_key(case), value_key(hints), arch)


def write_bundle(folder: str, result: AuditResult) -> None:
    """Hand an audit to another machine (e.g. the GPU host): ``folder/audit.json`` (the result JSON) and
    ``folder/cubins/<sha256>.cubin`` (every cubin of ``result``).

    ``tileprobe run --bundle folder`` reads this layout (:func:`tileprobe.run.session.load_bundle`); no tileiras
    is needed there.

    Raises:
        OSError: the folder cannot be created or written.
    """
    import os
    from ..schema import write_json
    os.makedirs(os.path.join(folder, "cubins"), exist_ok=True)
    for sha, data in result.cubins.items():
        with open(os.path.join(folder, "cubins", sha + ".cubin"), "wb") as f:
            f.write(data)
    write_json(result.records, result.environment, os.path.join(folder, "audit.json"))

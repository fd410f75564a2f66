"""The audit's variants and records: every (probe, case, hints, arch) to compile, in a stable order
(:func:`iter_variants`); a compile result made a :class:`~tileprobe.schema.VariantRecord` (cubin read,
occupancy computed: :func:`record_from`); the compiler-timeout check of compiled records."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from tileprobe.compile.job import CompileResult, Variant
from tileprobe.errors import CubinError
from tileprobe.model.arch import get_arch, has_limits
from tileprobe.model.cluster import reference_num_sms
from tileprobe.model.cubin import CubinInfo
from tileprobe.model.occupancy import theoretical_occupancy
from tileprobe.model.sass import split_register_pool
from tileprobe.probe.contained import ProbePlan, _target_name, probe_code_sha256, probe_targets, source_sha256
from tileprobe.records import CompileTimeout
from tileprobe.schema import FAILURE_FIXES, VariantRecord, canonical, derive_failure


def iter_variants(probes: Sequence, archs: Sequence[str]) -> Iterator[Variant]:
    """Every (probe, case, hints, arch) to compile, in a stable order, one at a time (nothing is held in memory).

    ``probes``: :class:`~tileprobe.probe.contained.ProbePlan` s (what the loader found; their broken variants are
    left out) or :class:`~tileprobe.probe.define.Probe` s.
    """
    archs = [_target_name(a) for a in archs]
    for p in probes:
        digest = p.source_sha256 if isinstance(p, ProbePlan) else source_sha256(p)
        mine = probe_targets(p.archs, archs)
        skipped = p.skipped if isinstance(p, ProbePlan) else None
        cases, hint_grid = p.case_grid(), p.hint_grid()
        for arch in mine:
            num_sms = _args_num_sms(p, arch)
            for ci, case in enumerate(cases):
                for hi, hints in enumerate(hint_grid):
                    if skipped is None or not skipped(ci, hi, arch):
                        compiled = (p.compile_sha256(ci, hi, arch) if isinstance(p, ProbePlan)
                                    else probe_code_sha256(p, case, hints, arch, num_sms))
                        yield Variant(p.source or "", p.index, p.label, tuple(case.items()), tuple(hints.items()),
                                      arch, digest, tuple(p.knobs.items()), timeout_s=p.timeout_s, num_sms=num_sms,
                                      compile_sha256=compiled)


def _args_num_sms(p, arch: str) -> int | None:
    """The SM count the variant's ``args`` gets: the plan's, or for a Probe the arch's reference GPU's
    when its ``args`` takes ``num_sms``."""
    if isinstance(p, ProbePlan):
        return p.args_num_sms(arch)
    if "num_sms" not in p.args_context:
        return None
    return reference_num_sms(arch)


def plan_variants(probes: Sequence, archs: Sequence[str]) -> list[Variant]:
    """:func:`iter_variants` as a list."""
    return list(iter_variants(probes, archs))


def record_from(res: CompileResult) -> VariantRecord:
    """Turn one compile result into a variant record: read the cubin and compute occupancy."""
    v = res.variant
    rec = VariantRecord(kernel=v.probe_name, probe=v.probe_path, case=canonical(v.case_dict),
                        hints=canonical(v.hints_dict),
                        arch=v.arch, tileiras=res.tileiras, status=res.status, cuda_tile=res.cuda_tile,
                        bytecode=res.bytecode, bytecode_sha256=res.bytecode_sha256,
                        effective_hints=res.effective_hints, error=res.error, repro=res.repro,
                        compile_s=round(res.compile_s, 3), symbol=res.symbol, signature=res.signature,
                        knobs=dict(v.knobs), failure=res.failure, message=res.message, fix=res.fix)
    if res.status != "ok" and not rec.failure:   # a result made without a class (e.g. a tileprobe bug in a worker)
        rec.failure, rec.message = derive_failure(res.status, res.error)
        rec.fix = rec.fix or FAILURE_FIXES.get(rec.failure or "", "")
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
        rec.ptx = k.ptx.record()
    if not has_limits(v.arch):   # sm_107 is compiled and read; its CTAs/SM are not sourced (NOT_SOURCED)
        rec.limiter = None
        rec.sass, rec.register_pool = split_register_pool(res.sass)
        return rec
    occ = theoretical_occupancy(get_arch(v.arch), k.threads_per_cta, k.regs_per_thread, k.smem_driver_bytes)
    rec.ctas_per_sm, rec.warps_per_sm = occ.ctas_per_sm, occ.warps_per_sm
    rec.occupancy_pct, rec.limiter = round(occ.occupancy_pct, 1), occ.limiter
    if res.remarks:
        from tileprobe.model.remarks import parse_remarks
        rec.remarks = parse_remarks(res.remarks)
    rec.sass, rec.register_pool = split_register_pool(res.sass)
    return rec


def check_compile_timeout(records: Iterable[VariantRecord], timeout_s: float,
                          source: str = "--compiler-timeout") -> None:
    """Set ``compile_timeout`` on every compiled record: the program's compiler timeout (``timeout_s``,
    as ``ct.compiler_timeout`` sets it), the variant's compile time (``compile_s``: tileiras wall time on the
    machine that compiled it, as stored), the margin (timeout − compile time) and whether the compile exceeds it —
    a compile that long would fail in the program with ``TileCompilerTimeoutError`` on a cold cache."""
    for r in records:
        if r.ok:
            r.compile_timeout = CompileTimeout(timeout_s=timeout_s, compile_s=r.compile_s,
                                               margin_s=round(timeout_s - r.compile_s, 3),
                                               exceeds=r.compile_s > timeout_s, source=source)

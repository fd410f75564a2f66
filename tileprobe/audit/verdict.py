"""Verdicts: did the compiler do what each hint asked, judged from the final cubin.

Statuses (one per hint per variant):

* ``honoured`` — the hint took effect. For ``occupancy=N``: theoretical CTAs/SM ≥ N.
* ``partial`` — moved toward the goal and fell short (occupancy: more CTAs/SM than the baseline, fewer than N).
* ``ignored`` — no effect: the same machine code and resources as another value of the hint, or no residency
  change. File hashes always differ between hint values (the embedded Tile IR carries them), so this compares
  ``code_sha256`` (machine code + resources) and residency, never the file hash.
* ``infeasible`` — the hint cannot be met on this arch for the CTA the compiler built, whatever it does
  (e.g. occupancy 16 × 256 threads = 4096 > 2048 threads per SM on sm_90; clusters before sm_90).

The *baseline* of a variant is the variant that differs only in that hint and has its smallest value (hint-less
variants count as the declared value).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ..model.arch import get_arch
from ..schema import VariantRecord

HONOURED, PARTIAL, IGNORED, INFEASIBLE = "honoured", "partial", "ignored", "infeasible"


def assign_verdicts(records: Iterable[VariantRecord], hint_names: Iterable[str]) -> None:
    """Fill ``record.verdicts`` for every hint in ``hint_names`` that the record sets or inherits (kernel hints
    and the probe's per-load knobs)."""
    records = list(records)
    for hint in hint_names:
        groups: dict[tuple, list[VariantRecord]] = defaultdict(list)
        for r in records:
            groups[r.group_key(hint)].append(r)
        for group in groups.values():
            for r in group:
                if r.ok and r.hint(hint) is not None:
                    v = _JUDGES.get(hint, _judge_generic)(hint, r, group)
                    if v is not None:
                        r.verdicts[hint] = v


def judge_records(records: Iterable[VariantRecord]) -> None:
    """(Re)compute every record's verdicts from the records alone: all kernel hints they set and all per-load
    knobs their probes declare. Used for records read back from the store or a JSON file."""
    from .probe import KERNEL_HINTS
    records = list(records)
    for r in records:
        r.verdicts = {}
    # hints the probe varies, and hints the kernel itself declares (``@ct.kernel(occupancy=2)``, ByTarget
    # resolved for the arch); opt_level is always declared (default 3), so it is judged only when varied
    hints = sorted({h for r in records for h in r.hints if h in KERNEL_HINTS}
                   | {h for r in records for h, v in r.effective_hints.items()
                      if v is not None and h in KERNEL_HINTS and h != "opt_level"})
    knobs = sorted({k for r in records for k in r.knobs})
    assign_verdicts(records, hints + knobs)


def _others(hint: str, r: VariantRecord, group: list[VariantRecord]) -> list[VariantRecord]:
    return [o for o in group if o is not r and o.ok and o.hint(hint) != r.hint(hint)]


def _same_code(hint, r, group) -> VariantRecord | None:
    for o in sorted(_others(hint, r, group), key=lambda o: _sort_key(o.hint(hint))):
        if r.same_code(o) and _resources(o) == _resources(r):
            return o
    return None


def _sort_key(v):
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def _resources(r: VariantRecord) -> tuple:
    return (r.threads, r.registers, r.shared_bytes, r.stack_bytes, tuple(r.cluster_dims or ()))


def _fmt_res(r: VariantRecord) -> str:
    return f"{r.threads} threads × {r.registers} registers, {r.shared_bytes:,} B shared"


def _ctas(n: int) -> str:
    return f"{n} CTA" if n == 1 else f"{n} CTAs"


def _verdict(status: str, reason: str) -> dict:
    return {"status": status, "reason": reason}


def judge_occupancy(hint: str, r: VariantRecord, group: list[VariantRecord]) -> dict:
    """Verdict for ``occupancy=N`` from residency (CTAs/SM), the arch's hard limits and the other values.

    Reasons that are not ``honoured`` end with what the CTA would need for N (:func:`tileprobe.audit.explain.what_it_takes`).
    """
    v = _judge_occupancy(hint, r, group)
    if v["status"] in (PARTIAL, IGNORED):
        from .explain import what_it_takes
        v["reason"] += f"; {what_it_takes(r, int(r.hint(hint)))}"
    return v


def _judge_occupancy(hint: str, r: VariantRecord, group: list[VariantRecord]) -> dict:
    n = int(r.hint(hint))
    limits = get_arch(r.arch)
    ctas = r.ctas_per_sm or 0
    if n > limits.max_ctas_per_sm:
        return _verdict(INFEASIBLE, f"{n} CTAs/SM exceeds the {limits.max_ctas_per_sm} CTA slots per SM on {r.arch}")
    if n * r.threads > limits.max_threads_per_sm:
        return _verdict(INFEASIBLE, f"{n} × {r.threads} threads = {n * r.threads:,} > {limits.max_threads_per_sm:,} "
                                    f"threads per SM on {r.arch}; got {_ctas(ctas)}/SM ({_fmt_res(r)})")
    if ctas == 0:
        return _verdict(INFEASIBLE, f"the CTA cannot launch on {r.arch} (limiter: {r.limiter}; {_fmt_res(r)})")
    if ctas >= n:
        return _verdict(HONOURED, f"{_ctas(ctas)}/SM ≥ {n} ({_fmt_res(r)}; limiter: {r.limiter})")
    twin = _same_code(hint, r, group)
    if twin is not None:
        return _verdict(IGNORED, f"same machine code and resources as {hint}={twin.hint(hint)}: {_ctas(ctas)}/SM < {n} "
                                 f"({_fmt_res(r)}; limiter: {r.limiter})")
    base = _baseline(hint, r, group)
    if base is not None and ctas > (base.ctas_per_sm or 0):
        return _verdict(PARTIAL, f"{ctas} CTAs/SM (up from {base.ctas_per_sm} at {hint}={base.hint(hint)}) "
                                 f"but < {n}; limiter: {r.limiter} ({_fmt_res(r)})")
    changed = ""
    if base is not None and _resources(base) != _resources(r):
        changed = f"; code changed vs {hint}={base.hint(hint)} ({_fmt_res(base)}) without changing residency"
    return _verdict(IGNORED, f"{_ctas(ctas)}/SM < {n}; limiter: {r.limiter} ({_fmt_res(r)}){changed}")


def _baseline(hint, r, group) -> VariantRecord | None:
    cands = [o for o in group if o.ok and o.hint(hint) is not None and o is not r]
    lower = [o for o in cands if _sort_key(o.hint(hint)) < _sort_key(r.hint(hint))]
    return min(lower, key=lambda o: _sort_key(o.hint(hint))) if lower else None


def judge_num_ctas(hint: str, r: VariantRecord, group: list[VariantRecord]) -> dict:
    """Verdict for ``num_ctas=N``: the cubin's cluster size against N (clusters exist from sm_90)."""
    n = int(r.hint(hint))
    size = 1
    for d in r.cluster_dims or ():
        size *= int(d)
    cc = get_arch(r.arch).cc
    if n > 1 and cc < (9, 0):
        return _verdict(INFEASIBLE, f"thread-block clusters need sm_90 or later; {r.arch} has none")
    if size == n:
        dims = "×".join(map(str, r.cluster_dims)) if r.cluster_dims else "none (1 CTA)"
        return _verdict(HONOURED, f"cluster {dims} = {n} CTA(s)")
    return _verdict(IGNORED, f"cluster of {size} CTA(s) (dims {r.cluster_dims or 'none'}), asked {n}")


def _judge_generic(hint: str, r: VariantRecord, group: list[VariantRecord]) -> dict:
    """opt_level / num_worker_warps: say what changed in the cubin relative to the other values."""
    others = _others(hint, r, group)
    if not others:
        return _verdict(HONOURED, f"only value audited; {_fmt_res(r)}")
    twin = _same_code(hint, r, group)
    if twin is not None:
        return _verdict(IGNORED, f"same machine code and resources as {hint}={twin.hint(hint)}")
    base = min(others, key=lambda o: _sort_key(o.hint(hint)))
    diffs = [f"{name} {a}→{b}" for name, a, b in (
        ("threads", base.threads, r.threads), ("registers", base.registers, r.registers),
        ("shared B", base.shared_bytes, r.shared_bytes), ("stack B", base.stack_bytes, r.stack_bytes))
        if a != b]
    what = ", ".join(diffs) if diffs else "machine code differs, same resources"
    return _verdict(HONOURED, f"vs {hint}={base.hint(hint)}: {what}")


def tma_data_ops(r: VariantRecord) -> int | None:
    """TMA / bulk-copy *data* instructions (:data:`tileprobe.model.sass.TMA_DATA_OPCODES`) in the variant's SASS;
    None when the record has no SASS traits."""
    sass = r.sass or {}
    if "tma" not in sass:
        return None
    from ..model.sass import TMA_DATA_OPCODES
    return sum(n for op, n in sass["tma"].items() if op in TMA_DATA_OPCODES)


def judge_allow_tma(hint: str, r: VariantRecord, group: list[VariantRecord]) -> dict | None:
    """Verdict for a load's ``allow_tma`` (a probe knob) from the TMA / bulk-copy instructions in the SASS.

    Needs SASS traits (``--sass``, nvdisasm); without them no verdict is given. Other loads and stores of the
    kernel may use TMA whatever this knob says, so ``allow_tma=False`` is judged against the ``True`` variant.
    """
    allowed = bool(r.hint(hint))
    cc = get_arch(r.arch).cc
    if cc < (9, 0):
        return _verdict(INFEASIBLE if allowed else HONOURED, f"no TMA before sm_90 ({r.arch})")
    n = tma_data_ops(r)
    if n is None:
        return None
    from ..model.sass import TMA_DATA_OPCODES
    ops = ", ".join(f"{op}×{c}" for op, c in sorted((r.sass or {}).get("tma", {}).items())
                    if op in TMA_DATA_OPCODES) or "none"
    if allowed:
        if n:
            return _verdict(HONOURED, f"{n} TMA/bulk-copy data instruction(s) ({ops})")
        why = [d for rem in r.remarks if "Tma" in rem.get("name", "") for d in rem.get("details", [])]
        return _verdict(IGNORED, "no TMA instructions" + (f"; tileiras: {why[0]}" if why else ""))
    sib = [o for o in group if o.ok and o is not r and bool(o.hint(hint)) and tma_data_ops(o) is not None]
    if n == 0:
        return _verdict(HONOURED, "no TMA instructions")
    if sib and n < tma_data_ops(sib[0]):
        return _verdict(HONOURED, f"TMA data instructions {tma_data_ops(sib[0])} → {n} (the others come from other "
                                  f"loads/stores: {ops})")
    return _verdict(IGNORED, f"still {n} TMA data instruction(s) ({ops})")


_JUDGES = {"occupancy": judge_occupancy, "num_ctas": judge_num_ctas, "allow_tma": judge_allow_tma}

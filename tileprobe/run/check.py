"""Is the kernel's output right? Relative error against the probe's reference, NaN and unwritten elements.

The measure is the relative error in the 2-norm, ``‖out − ref‖₂ / ‖ref‖₂``, computed on float32 copies
(float64 for integer and float64 outputs), over the elements where the reference is not NaN. It is compared
with a tolerance chosen by the output's dtype (:data:`DEFAULT_TOLERANCE`) unless the probe gives one.
A check fails (status ``wrong``) when:

* the shapes differ;
* any element is NaN where the reference is not (outputs start as NaN, so this also catches unwritten
  floating-point elements), or still holds the integer poison (see :func:`tileprobe.run.arrays.poison_value`);
* the relative error exceeds the tolerance.

The tolerances are of the order of a few units in the last place of the output dtype accumulated over a
reduction: bf16 has 8 significant bits (2⁻⁸ ≈ 3.9e-3), fp16 11 (4.9e-4), fp32 24 (6e-8, but accumulation order
and TF32 tensor cores give ~1e-4).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tileprobe.probe.signature import dtype_name
from tileprobe.run.arrays import is_floating, is_poisoned

#: Relative-error bound per output dtype (overridable by ``Probe.tolerance``).
DEFAULT_TOLERANCE: dict[str, float] = {
    "bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-4, "float64": 1e-10,
    "float8_e4m3fn": 1.25e-1, "float8_e5m2": 2.5e-1, "float8_e8m0fnu": 5e-1,
    "int8": 0.0, "int16": 0.0, "int32": 0.0, "int64": 0.0,
    "uint8": 0.0, "uint16": 0.0, "uint32": 0.0, "uint64": 0.0, "bool": 0.0,
}


@dataclass
class CheckResult:
    """The verdict on one output array (or on all of a variant's outputs, see :func:`combine`).

    status: ``ok`` | ``wrong``. rel_err: ‖out − ref‖₂ / ‖ref‖₂ (absolute ‖out − ref‖₂ when ‖ref‖₂ = 0), or None
    when it could not be computed (shape mismatch). max_abs_err: largest |out − ref|. nan_count: NaN where the
    reference is not NaN. unwritten_count: integer elements still holding the poison. tolerance: the bound used.
    """
    status: str
    rel_err: float | None
    tolerance: float
    max_abs_err: float | None = None
    nan_count: int = 0
    unwritten_count: int = 0
    elements: int = 0
    message: str = ""
    arg: int | None = None
    per_arg: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (what ``record.run`` keeps of the check)."""
        return asdict(self)


def tolerance_for(dtype, override: Any = None, arg: int | None = None) -> float:
    """The relative-error bound for an output: ``override`` (a number, or a mapping from argument index or dtype
    name to a number) if it covers this output, else :data:`DEFAULT_TOLERANCE` by dtype (1e-2 if unknown)."""
    name = dtype_name(dtype)
    if isinstance(override, Mapping):
        for key in (arg, name):
            if key in override and override[key] is not None:
                return float(override[key])
    elif override is not None:
        return float(override)
    return DEFAULT_TOLERANCE.get(name, 1e-2)


def compare(out, expected, *, tolerance: float | None = None, arg: int | None = None) -> CheckResult:
    """Check one output tensor against its expected value (a tensor, or anything ``torch.as_tensor`` takes).

    Args:
        out: the kernel's output (torch tensor, any device).
        expected: the reference value; moved to ``out``'s device, broadcast to its shape if it is a scalar.
        tolerance: relative-error bound; ``None`` picks :func:`tolerance_for` the output dtype.
        arg: the output's argument index (for messages).
    """
    import torch
    tol = tolerance_for(out.dtype) if tolerance is None else float(tolerance)
    where = f"argument {arg}" if arg is not None else "output"
    exp = torch.as_tensor(expected, device=out.device)
    if exp.dim() == 0 and out.dim() > 0:
        exp = exp.expand(out.shape)
    if tuple(exp.shape) != tuple(out.shape):
        return CheckResult("wrong", None, tol, elements=out.numel(), arg=arg,
                           message=f"{where}: reference shape {tuple(exp.shape)} != output shape {tuple(out.shape)}")
    wide = torch.float32 if is_floating(out.dtype) and out.dtype != torch.float64 else torch.float64
    o, e = out.to(wide), exp.to(wide)
    valid = ~torch.isnan(e)
    nan_count = int((torch.isnan(o) & valid).sum())
    unwritten = 0
    if not is_floating(out.dtype):
        unwritten = int((is_poisoned(out) & ~is_poisoned(exp.to(out.dtype))).sum())
    diff = torch.where(valid, o - e, torch.zeros((), dtype=wide, device=o.device))
    diff = torch.nan_to_num(diff, nan=0.0)
    ref_norm = float(torch.linalg.vector_norm(torch.where(valid, e, torch.zeros_like(e))))
    err_norm = float(torch.linalg.vector_norm(diff))
    rel = err_norm / ref_norm if ref_norm > 0 else err_norm
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    res = CheckResult("ok", rel, tol, max_abs_err=max_abs, nan_count=nan_count, unwritten_count=unwritten,
                      elements=out.numel(), arg=arg)
    problems = []
    if nan_count:
        problems.append(f"{nan_count:,} of {out.numel():,} elements are NaN (unwritten, or computed NaN)")
    if unwritten:
        problems.append(f"{unwritten:,} of {out.numel():,} elements were never written (still poisoned)")
    if not math.isfinite(rel) or rel > tol:
        problems.append(f"relative error {rel:.3g} > tolerance {tol:.3g} (max |out − ref| {max_abs:.3g})")
    if problems:
        res.status, res.message = "wrong", f"{where}: " + "; ".join(problems)
    return res


def check_outputs(args, expected: Mapping[int, Any], tolerance: Any = None) -> CheckResult:
    """Check every output the reference names (``{arg_index: expected}``) and combine the verdicts.

    Raises:
        TypeError: ``expected`` is not a mapping of argument indices, or names an argument that is no tensor.
    """
    if not isinstance(expected, Mapping):
        raise TypeError(f"reference() must return {{arg_index: expected}}, got {type(expected).__name__}")
    results = []
    for idx, exp in expected.items():
        if not isinstance(idx, int) or not 0 <= idx < len(args) or not hasattr(args[idx], "dtype"):
            raise TypeError(f"reference() names argument {idx!r}, which is not an array argument of the launch")
        out = args[idx]
        results.append(compare(out, exp, tolerance=tolerance_for(out.dtype, tolerance, idx), arg=idx))
    return combine(results)


def bits_differing(out, expected) -> int | None:
    """How many elements of ``out`` differ in any bit from ``expected`` (both torch tensors): their bytes compared
    element by element, so ``-0.0`` differs from ``0.0`` and one NaN payload from another. None when they cannot
    be compared bit for bit (another dtype or shape)."""
    import torch
    exp = expected.to(out.device) if hasattr(expected, "to") else torch.as_tensor(expected, device=out.device)
    if exp.dtype != out.dtype or tuple(exp.shape) != tuple(out.shape):
        return None
    if out.numel() == 0:
        return 0
    size = out.element_size()
    a = out.contiguous().reshape(-1).view(torch.uint8).reshape(-1, size)
    b = exp.contiguous().reshape(-1).view(torch.uint8).reshape(-1, size)
    return int((a != b).any(dim=1).sum())


def check_bits(args, expected: Mapping[int, Any]) -> CheckResult:
    """The bit-exact check (``tileprobe tune --bit-exact``): every output argument (``{arg_index: expected}``, the
    default configuration's outputs) equal to its expected tensor in every bit; ``wrong`` names the first output
    that is not and how many elements differ. The relative error is not computed (None); tolerance 0."""
    for idx, exp in expected.items():
        out = args[idx]
        n = bits_differing(out, exp)
        if n:
            return CheckResult("wrong", None, 0.0, elements=out.numel(), arg=idx,
                               message=f"argument {idx}: {n:,} of {out.numel():,} elements differ in their bits from "
                                       "the default configuration's output (bit-exact)")
        if n is None:
            return CheckResult("wrong", None, 0.0, elements=out.numel(), arg=idx,
                               message=f"argument {idx}: another dtype or shape than the default configuration's "
                                       "output (bit-exact)")
    return CheckResult("ok", 0.0, 0.0)


@dataclass
class CandidateFigures:
    """A candidate's check fields (:func:`check_figures`): ``status`` ok | wrong, the relative error, tolerance and
    largest absolute error of the worst output, its NaN and unwritten element counts, ``message`` (why it is not
    ok, or what was not checked) and ``checks``: the checks passed (``tolerance``, ``bit-exact``)."""
    status: str
    rel_err: float | None
    tolerance: Any
    max_abs_err: float | None
    nan_count: int
    unwritten_count: int
    message: str
    checks: list[str]


def check_figures(args, expected: Mapping[int, Any], tolerance: Any = None, against: str = "reference",
                  bit_exact: bool = False) -> CandidateFigures:
    """A candidate's check: :func:`check_outputs` within tolerance, then, with ``bit_exact`` and
    ``against == "default"`` (``expected`` is the default configuration's output), :func:`check_bits`. A probe
    with a reference is checked within tolerance only, and the message says so."""
    res = check_outputs(args, expected, tolerance)
    out = CandidateFigures(res.status, res.rel_err, res.tolerance, res.max_abs_err, res.nan_count,
                           res.unwritten_count, res.message, ["tolerance"] if res.status == "ok" else [])
    if bit_exact and res.status == "ok" and against == "default":
        bits = check_bits(args, expected)
        if bits.status == "ok":
            out.checks.append("bit-exact")
        else:
            out.status, out.message = "wrong", bits.message
    elif bit_exact and res.status == "ok":
        out.message = ("bit-exact not checked: the probe has a reference=, checked within tolerance (bit-exact "
                       "compares with the default configuration's output)")
    return out


def check_against(args, expected: Mapping[int, Any], tolerance: Any = None, against: str = "reference",
                  bit_exact: bool = False) -> dict:
    """:func:`check_figures` as the check task's JSON fields: ``status``, ``rel_err``, ``tolerance``,
    ``max_abs_err``, ``nan_count``, ``unwritten_count``, ``message`` and ``checks``."""
    return asdict(check_figures(args, expected, tolerance, against, bit_exact))


def combine(results: list[CheckResult]) -> CheckResult:
    """One verdict for several outputs: ``wrong`` if any is; the relative error and tolerance of the output
    closest to (or furthest past) its bound; every output's figures in ``per_arg``."""
    if not results:
        return CheckResult("ok", None, 0.0, message="no outputs checked")
    worst = max(results, key=lambda r: (r.status == "wrong",
                                        -1 if r.rel_err is None else r.rel_err / max(r.tolerance, 1e-30)))
    out = CheckResult(
        "wrong" if any(r.status == "wrong" for r in results) else "ok", worst.rel_err, worst.tolerance,
        max_abs_err=max((r.max_abs_err for r in results if r.max_abs_err is not None), default=None),
        nan_count=sum(r.nan_count for r in results), unwritten_count=sum(r.unwritten_count for r in results),
        elements=sum(r.elements for r in results), arg=worst.arg,
        message="; ".join(r.message for r in results if r.message))
    out.per_arg = [{"arg": r.arg, "status": r.status, "rel_err": r.rel_err, "tolerance": r.tolerance}
                   for r in results]
    return out

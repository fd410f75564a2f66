"""Audit only the variants of one probe that a ``--where`` selects (what ``gate``, ``bisect`` and the pytest plugin
audit): the probe is loaded contained, the names of ``where`` are checked against its case constants and the
kernel hints, and the audit compiles the selected cases with every hint value (verdicts need them all)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tileprobe.audit.result import AuditResult
from tileprobe.toolchain import Toolchain


def check_where_names(where: Mapping[str, Any], probes: Sequence) -> None:
    """Refuse ``where`` names that are neither a case constant of ``probes`` (loaded plans) nor a kernel hint.

    Raises:
        tileprobe.select.WhereError: naming the unknown names, the case constants and the hints.
    """
    from tileprobe.model.hints import KERNEL_HINTS
    from tileprobe.select import check_names
    check_names(where, {c for p in probes for c in p.cases}, KERNEL_HINTS)


def audit_selected(probe_path: str, arch: str, *, where: Mapping[str, Any] | None = None,
                   toolchains: Sequence[Toolchain] | None = None, store=None, jobs: int | None = None,
                   timeout_s: float | None = None, command_line: str = "", with_sass: bool = False) -> AuditResult:
    """Audit the variants of ``probe_path`` whose case matches ``where`` (all hint values: verdicts need them).

    Returns the :class:`~tileprobe.audit.AuditResult`; variants in ``store`` are not compiled again, new ones
    are saved, and the audit is stored with ``command_line``. ``with_sass``: read the SASS too (``no hang risk``
    needs the register-pool check).

    Raises:
        ProbeError: the probe file did not load (its first error, file:line). tileprobe.select.WhereError: a
        ``where`` name is neither a case constant nor a hint (:func:`check_where_names`).
    """
    from tileprobe.audit.pipeline import audit
    from tileprobe.compile.job import DEFAULT_TIMEOUT_S
    from tileprobe.errors import ProbeError
    from tileprobe.probe.contained import load_plans
    from tileprobe.select import same_value
    where = dict(where or {})
    probes, errors = load_plans([probe_path], [arch])    # probe code runs contained, never in this process
    if not probes:
        raise ProbeError(errors[0] if errors else f"{probe_path}: no probe loaded")
    check_where_names(where, probes)
    case_where = {k: v for k, v in where.items() if any(k in p.cases for p in probes)}
    result = audit([probe_path], [arch], toolchains=toolchains, jobs=jobs, store=store,
                   timeout_s=timeout_s or DEFAULT_TIMEOUT_S, with_sass=with_sass,
                   select=lambda v: all(same_value(v.case_dict.get(k), want) for k, want in case_where.items()))
    if store is not None and command_line:
        store.save_audit(result, command_line)
    return result

"""The audit pipeline (no GPU): probe → signature → compile → cubin → occupancy → verdict.

``from tileprobe.audit import audit`` keeps working: the pipeline's API is re-exported lazily (PEP 562), so
importing :mod:`tileprobe.audit` does not import cuTile.

* :mod:`.probe` (the probe file: cases × hints grid), :mod:`.signature` (+ :mod:`._cutile`: JIT-faithful
  signature without a GPU), :mod:`.compile` (parallel ahead-of-time compiles), :mod:`.verdict` (honoured /
  partial / ignored / infeasible), :mod:`.explain` (what a CTA would need), :mod:`.pipeline` (the whole audit).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["audit", "AuditResult", "plan_variants", "record_from", "source_sha256", "environment",
           "resolve_compiler"]

if TYPE_CHECKING:
    from .pipeline import AuditResult, audit, environment, plan_variants, record_from, resolve_compiler, source_sha256


def __getattr__(name: str):
    """The pipeline's public names, imported on first use."""
    if name in __all__:
        from . import pipeline
        return getattr(pipeline, name)
    raise AttributeError(f"module 'tileprobe.audit' has no attribute {name!r}")

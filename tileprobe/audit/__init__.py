"""The audit pipeline (no GPU): probe → signature → compile → cubin → occupancy → verdict.

``from tileprobe.audit import audit`` keeps working: the pipeline's API is re-exported lazily (PEP 562), so
importing :mod:`tileprobe.audit` does not import cuTile.

The audit runs the pipeline's stages, each a package of its own:
:mod:`tileprobe.probe` (load and contain the probe file; the JIT signature) → :mod:`tileprobe.compile` (parallel
ahead-of-time compiles) → :mod:`tileprobe.model` (read the cubin and SASS; occupancy) → :mod:`tileprobe.judge`
(verdicts and advice), with :mod:`tileprobe.select` for what ``--where`` / ``--case`` / ``--hint`` pick;
:mod:`.pipeline` strings them together.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = [
    "AuditResult",
    "audit",
    "environment",
    "plan_variants",
    "record_from",
    "resolve_compiler",
    "source_sha256",
]

if TYPE_CHECKING:
    from tileprobe.audit.pipeline import (
        AuditResult,
        audit,
        environment,
        plan_variants,
        record_from,
        resolve_compiler,
        source_sha256,
    )


def __getattr__(name: str):
    """The pipeline's public names, imported on first use."""
    if name in __all__:
        from tileprobe.audit import pipeline
        return getattr(pipeline, name)
    raise AttributeError(f"module 'tileprobe.audit' has no attribute {name!r}")

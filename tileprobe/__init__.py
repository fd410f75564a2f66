"""tileprobe: see what tileiras did with your cuTile hints.

Audit (no GPU): compile a kernel ahead of time for any architecture and hint grid with the signature JIT would
use, read each cubin, compute theoretical occupancy and give each hint a verdict. Run (GPU): time and check
each variant. Compare / bisect compiler versions.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import TileprobeError, ProbeError, ToolchainError, CubinError, StoreError
from .probe import Probe, SpecArrays
from .signature import ArraySpec, jit_signature
from .stubs import stub_modules

__all__ = [
    "__version__", "Probe", "SpecArrays", "ArraySpec", "jit_signature", "stub_modules",
    "TileprobeError", "ProbeError", "ToolchainError", "CubinError", "StoreError",
]


def __getattr__(name):
    """Lazy ``tileprobe.AuditResult`` (the audit API pulls in cuTile only when used). The function ``audit`` lives
    in the submodule of the same name: ``from tileprobe.audit import audit``."""
    if name == "AuditResult":
        import importlib
        return importlib.import_module(".audit", __name__).AuditResult
    raise AttributeError(f"module 'tileprobe' has no attribute {name!r}")

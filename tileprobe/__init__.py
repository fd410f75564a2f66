"""tileprobe: see what tileiras did with your cuTile hints.

Audit (no GPU): compile a kernel ahead of time for any architecture and hint grid with the signature JIT would
use, read each cubin, compute theoretical occupancy and give each hint a verdict. Run (GPU): time and check
each variant. Compare / bisect compiler versions.

Every command is a Python call (the CLI in :mod:`tileprobe.cli` parses, calls it and renders the result):

=====================  ==================================================================================
``tileprobe audit``    :func:`tileprobe.audit.audit` → :class:`AuditResult`
``tileprobe run``      :func:`tileprobe.run.session.run_sweep` → :class:`RunResult`
``tileprobe compare``  :func:`tileprobe.analyses.compare.compare_results` → :class:`Comparison`
``tileprobe bisect``   :func:`tileprobe.analyses.bisect.bisect` → :class:`~tileprobe.analyses.bisect.BisectResult`
``tileprobe gate``     :func:`tileprobe.analyses.gate.run_gate` → :class:`GateResult`
``tileprobe history``  :func:`tileprobe.analyses.history.history` → :class:`History`
``tileprobe report``   :func:`tileprobe.cli.report.write_html_report`
``tileprobe doctor``   :func:`tileprobe.analyses.doctor.diagnose` → list of :class:`Finding`
``tileprobe toolchain``  :func:`tileprobe.toolchain.install`, :func:`~tileprobe.toolchain.local_toolchains`,
                       :func:`~tileprobe.toolchain.remove`
``tileprobe use``      :func:`tileprobe.use` (answer ``cuda.tile.tune`` searches from a tune table)
=====================  ==================================================================================

Names in ``__all__`` are imported on first use (PEP 562), so ``import tileprobe`` stays light (no cuTile, rich or
torch). ``audit`` and ``bisect`` are not listed here: ``tileprobe.audit`` is the audit package.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tileprobe._version import __version__

#: public name → the module that defines it
_WHERE = {
    "Probe": "probe.define", "SpecArrays": "probe.define", "ArraySpec": "probe.signature",
    "jit_signature": "probe.signature", "AuditResult": "audit.pipeline", "VariantRecord": "schema",
    "Store": "store", "Toolchain": "toolchain",
    "compare_results": "analyses.compare", "Comparison": "analyses.results",
    "run_gate": "analyses.gate", "GateResult": "analyses.results", "GateError": "analyses.gate",
    "diagnose": "analyses.doctor", "Finding": "analyses.results",
    "history": "analyses.history", "History": "analyses.results",
    "run_sweep": "run.session", "RunResult": "run.session", "write_html_report": "cli.report",
    "TileprobeError": "errors", "ProbeError": "errors", "ToolchainError": "errors", "CubinError": "errors",
    "StoreError": "errors", "stub_modules": "stubs", "use": "record.use",
}

__all__ = [
    "ArraySpec",
    "AuditResult",
    "Comparison",
    "CubinError",
    "Finding",
    "GateError",
    "GateResult",
    "History",
    "Probe",
    "ProbeError",
    "RunResult",
    "SpecArrays",
    "Store",
    "StoreError",
    "TileprobeError",
    "Toolchain",
    "ToolchainError",
    "VariantRecord",
    "__version__",
    "compare_results",
    "diagnose",
    "history",
    "jit_signature",
    "run_gate",
    "run_sweep",
    "stub_modules",
    "use",
    "write_html_report",
]
assert set(__all__) == {"__version__", *_WHERE}   # one list of the public names

if TYPE_CHECKING:  # the same names, for type checkers and import-graph tools
    from tileprobe.analyses.compare import compare_results
    from tileprobe.analyses.doctor import diagnose
    from tileprobe.analyses.gate import GateError, run_gate
    from tileprobe.analyses.history import history
    from tileprobe.analyses.results import Comparison, Finding, GateResult, History
    from tileprobe.audit.pipeline import AuditResult
    from tileprobe.cli.report import write_html_report
    from tileprobe.errors import CubinError, ProbeError, StoreError, TileprobeError, ToolchainError
    from tileprobe.probe.define import Probe, SpecArrays
    from tileprobe.probe.signature import ArraySpec, jit_signature
    from tileprobe.record.use import use
    from tileprobe.run.session import RunResult, run_sweep
    from tileprobe.schema import VariantRecord
    from tileprobe.store import Store
    from tileprobe.stubs import stub_modules
    from tileprobe.toolchain import Toolchain


def __getattr__(name: str):
    """The public names of :data:`__all__`, imported from their modules on first use."""
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'tileprobe' has no attribute {name!r}")

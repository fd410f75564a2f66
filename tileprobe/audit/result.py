"""What an audit gives: :class:`AuditResult` (its records, probe and target errors, environment, cubins),
the environment block of a result set, and the bundle that hands an audit to another machine."""
from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tileprobe import _cutile
from tileprobe._version import __version__
from tileprobe.judge.advice import advice
from tileprobe.schema import VariantRecord, write_json


@dataclass
class AuditResult:
    """Records of one audit, the probe errors met on the way, and the environment it ran in.

    ``probe_errors``: each broken probe's error once (file:line); ``target_errors``: each requested arch or compiler
    that could not be used; the audit is :attr:`complete` when both are empty.
    """
    records: list[VariantRecord] = field(default_factory=list)
    probe_errors: list[str] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    wall_s: float = 0.0
    cubins: dict = field(default_factory=dict)   # cubin_sha256 -> bytes (for the store and `run`)
    notes: list[str] = field(default_factory=list)   # e.g. helper files skipped
    target_errors: list[str] = field(default_factory=list)   # archs / compilers not usable
    #: ``on_record(record, cubin bytes or None)`` as each record lands, stored or compiled (the tune races
    #: while compiling); called in the audit's thread, before the verdicts.
    on_record: Callable | None = field(default=None, repr=False, compare=False)

    def landed(self, records: Iterable) -> None:
        """Tell :attr:`on_record` about ``records`` (already in :attr:`records`)."""
        if self.on_record is not None:
            for r in records:
                self.on_record(r, self.cubins.get(r.cubin_sha256) if r.cubin_sha256 else None)

    @property
    def complete(self) -> bool:
        """Every probe loaded and every requested arch and compiler could be used."""
        return not self.probe_errors and not self.target_errors

    def advice(self, selected: Iterable[VariantRecord] | None = None) -> list[str]:
        """The static advice lines of this audit (:func:`tileprobe.judge.advice.advice`), one group per kernel,
        case, other hints, arch and compiler; ``selected``: only the groups of these records (a ``--where``
        selection of :attr:`records`), each weighed over all of its audited values."""
        return advice(self.records, selected)


def environment(tileiras_builds: Iterable[str] = ()) -> dict:
    """Provenance of a result set: host, Python, cuda-tile and the tileiras builds used."""
    return {"tileprobe": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
            "cuda_tile": _cutile.cutile_version(), "tileiras": sorted(set(tileiras_builds))}


def write_bundle(folder: str, result: AuditResult) -> None:
    """Hand an audit to another machine (e.g. the GPU host): ``folder/audit.json`` (the result JSON) and
    ``folder/cubins/<sha256>.cubin`` (every cubin of ``result``).

    ``tileprobe run --bundle folder`` reads this layout (:func:`tileprobe.run.session.load_bundle`); no tileiras
    is needed there.

    Raises:
        OSError: the folder cannot be created or written.
    """
    os.makedirs(os.path.join(folder, "cubins"), exist_ok=True)
    for sha, data in result.cubins.items():
        with open(os.path.join(folder, "cubins", sha + ".cubin"), "wb") as f:
            f.write(data)
    write_json(result.records, result.environment, os.path.join(folder, "audit.json"))

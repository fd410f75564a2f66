"""What a probe loader reports to the tileprobe process, as records: one :class:`ProbePlan` per probe (names,
grids, hashes, the variants to leave out) in a :class:`FileReport` per file, and their round trip through plain data
(:func:`report_data`, :func:`report_from_data`: :mod:`tileprobe.probe.wire` JSON, never a pickle). Also the store
key's code hashes (:func:`code_sha256` and the rest), computed in the loader child from the probe's kernel and the
signature its ``args`` gave. The loader child (:mod:`tileprobe.probe.loader_child`) fills these records; the parent
side (:mod:`tileprobe.probe.loader`, :mod:`tileprobe.probe.contained`) reads them.
"""
from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tileprobe.errors import ProbeError


@dataclass
class ProbePlan:
    """What the parent needs of one probe, without its code (data only: :mod:`tileprobe.probe.wire`).

    ``cases`` / ``hints``: name → values, as in :class:`~tileprobe.probe.define.Probe`. ``skip``: variants to leave
    out because their hints or ``args`` failed in the loader, as (case index | None, hint index | None, arch | None)
    where None means "any". ``n_variants``: variants this probe plans for the requested targets, skips excluded
    (the whole grid when ``evaluated`` is False: it was larger than the audit's limit and was not tried).
    """
    source: str
    index: int
    label: str
    cases: dict
    hints: dict
    archs: tuple | None = None
    knobs: dict = field(default_factory=dict)
    timeout_s: float | None = None
    source_sha256: str = ""
    skip: frozenset = frozenset()
    n_variants: int = 0
    evaluated: bool = True
    lineno: int | None = None      # the line of ``Probe(...)`` in ``source`` (name clashes name it)
    # --- what each variant's compile depends on, and the SM count args() gets -------------------------------
    args_context: tuple = ()      # the context keywords args() takes (arch, hints, num_sms)
    num_sms: int | None = None    # the SM count given (audit/tune --num-sms); None: each arch's reference GPU's
    kernel_sha256: str = ""       # the file that defines the kernel (kernel_source_sha256)
    signatures: dict = field(default_factory=dict)   # (case index, hint index | None, arch | None) -> signature sha

    def args_num_sms(self, arch: str) -> int | None:
        """The SM count ``args`` gets for ``arch`` (None when it does not take ``num_sms``): the one given, else
        the arch's reference GPU's (:func:`tileprobe.model.cluster.reference_num_sms`)."""
        if "num_sms" not in self.args_context:
            return None
        from tileprobe.model.cluster import reference_num_sms
        return self.num_sms or reference_num_sms(arch)

    def compile_sha256(self, case_index: int, hint_index: int, arch: str) -> str:
        """SHA-256 of what compiling this variant depends on besides case, hints, arch and compiler: the kernel's
        source file and the launch signature ``args`` gave (constants, dtypes, divisibility); "" when the loader
        did not try ``args`` (then the store key falls back to :attr:`source_sha256`, the whole probe file)."""
        key = (case_index, hint_index, arch) if self.args_context else (case_index, None, None)
        return code_sha256(self.kernel_sha256, self.signatures.get(key, ""))

    def case_grid(self) -> list[dict]:
        """Every case as a dict (the cross product of ``cases``)."""
        return _cross(self.cases)

    def hint_grid(self) -> list[dict]:
        """Every hint combination as a dict; ``[{}]`` if none."""
        return _cross(self.hints)

    def targets(self, targets: Sequence[str]) -> list[str]:
        """The requested ``targets`` this probe is meant for (all when it names no ``archs``)."""
        return probe_targets(self.archs, targets)

    def skipped(self, case_index: int, hint_index: int, arch: str) -> bool:
        """Whether the loader found this variant's hints or ``args`` broken (it is then not compiled)."""
        s = self.skip
        return bool(s) and ((case_index, None, None) in s or (None, hint_index, None) in s
                            or (case_index, hint_index, arch) in s or (case_index, None, arch) in s)


@dataclass
class FileReport:
    """What loading one probe file gave: its probes' plans, its errors (each once, with file:line), a
    ``no_probe`` message when it defines none, and the first
    :data:`~tileprobe.probe.loader.OUTPUT_SHOWN_BYTES` of what it printed."""
    path: str
    plans: list[ProbePlan] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    no_probe: str | None = None
    output: str = ""
    output_bytes: int = 0         # all it printed (``output`` keeps the first OUTPUT_SHOWN_BYTES)
    default_tileiras: str = ""    # the tileiras cuTile picks here (the parent never imports cuTile itself)
    default_tileiras_error: str = ""
    data: Any = None              # what a task (run_probe_tasks) returned, as data
    uses_torch: bool = True       # torch was imported in the loader once its probes were loaded (False
    #                               lets compile workers start from a cuTile imported without torch)
    code_files: list = field(default_factory=list)   # [path, size, mtime_ns] of the modules the loader ran
    #                                                  (the report is kept while they are unchanged)
    usage_error: str = ""         # the command line's error the child found (a --case value of the wrong kind):
    #                               load_probe_files raises it as a WhereError, exit 2


def _cross(grid) -> list[dict]:
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def _grid_size(grid) -> int:
    return math.prod(len(v) for v in grid.values()) if grid else 1


def probe_targets(probe_archs: Sequence[str] | None, targets: Sequence[str]) -> list[str]:
    """The ``targets`` a probe with ``archs=probe_archs`` is meant for (all when it names none)."""
    if not probe_archs:
        return list(targets)
    mine = {_target_name(a) for a in probe_archs}
    return [t for t in targets if t in mine]


def _target_name(name: str) -> str:
    from tileprobe.errors import TileprobeError
    from tileprobe.model.arch import check_target, get_arch
    try:
        return check_target(name)
    except TileprobeError:
        try:
            return get_arch(name).name
        except TileprobeError:
            return str(name)


def code_sha256(kernel_sha256: str, signature_sha256: str) -> str:
    """The code part of the store key: SHA-256 over the kernel file's and the signature's digests;
    "" when either is unknown."""
    if not kernel_sha256 or not signature_sha256:
        return ""
    return hashlib.sha256(f"kernel:{kernel_sha256}|signature:{signature_sha256}".encode()).hexdigest()


def signature_sha256(sig) -> str:
    """SHA-256 of a cuTile ``KernelSignature`` as :func:`~tileprobe.probe.signature.describe_signature` reads it
    (symbol, each parameter's kind, dtype, constraints, constant values)."""
    from tileprobe.probe.signature import describe_signature
    text = json.dumps([sig.symbol, describe_signature(sig)], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def probe_code_sha256(probe, case: dict, hints: dict, arch: str, num_sms: int | None = None) -> str:
    """:func:`code_sha256` of one variant of a loaded :class:`~tileprobe.probe.define.Probe`, computed in this
    process (the in-process path of :func:`tileprobe.audit.pipeline.iter_variants`; audits use the loader
    child's :attr:`ProbePlan.signatures`). "" when the kernel, the hints or ``args`` fail."""
    from tileprobe._cutile import effective_hints
    from tileprobe.probe.signature import jit_signature
    try:
        kernel = probe.resolve_kernel()
        set_ = {k: v for k, v in hints.items() if v is not None}
        k = kernel.replace_hints(**set_) if set_ else kernel
        a = probe.launch_args(case, arch=arch, hints=effective_hints(k, arch), num_sms=num_sms)
        return code_sha256(kernel_source_sha256(probe), signature_sha256(jit_signature(k, a)))
    except Exception:
        return ""


def kernel_source_sha256(probe) -> str:
    """SHA-256 of the file that defines the probe's kernel (with the signature, what its compile
    depends on; a kernel defined in the probe file makes the probe file its source). "" when it has no file."""
    try:
        path = inspect.getsourcefile(probe.resolve_kernel()._pyfunc)
    except (TypeError, OSError, ProbeError):
        return ""
    if not path:
        return ""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def source_sha256(probe) -> str:
    """SHA-256 over the probe file and the file that defines its kernel (the store's notion of "same code")."""
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



def report_data(report: FileReport) -> dict:
    """``report`` as a dict of data for :mod:`tileprobe.probe.wire` (its plans as dicts too)."""
    out = {f.name: getattr(report, f.name) for f in fields(FileReport)}
    out["plans"] = [{f.name: getattr(p, f.name) for f in fields(ProbePlan)} for p in report.plans]
    return out


def report_from_data(data: Any, path: str) -> FileReport:
    """The :class:`FileReport` of :func:`report_data`'s dict, read as data. Raises :class:`~tileprobe.probe.wire.
    WireError` for a dict of another shape (fields missing, extra or of the wrong type)."""
    from tileprobe.probe import wire
    try:
        rep = _typed(FileReport, {**data, "plans": []})
        rep.plans = [_typed(ProbePlan, p) for p in data["plans"]]
    except (TypeError, KeyError, AttributeError) as e:
        raise wire.WireError(f"{path}: the loader's report has the wrong shape ({e})") from None
    return rep


_FIELD_TYPES = {"str": str, "int": int, "bool": bool, "dict": dict, "list": list, "frozenset": frozenset}


def _typed(cls, data: dict):
    """``cls(**data)`` after checking that ``data`` names exactly ``cls``'s fields and that each simple field (str,
    int, bool, dict, list, frozenset by its annotation) holds that type. Raises TypeError."""
    names = {f.name for f in fields(cls)}
    if type(data) is not dict or set(data) != names:
        raise TypeError(f"{cls.__name__} fields {sorted(data) if type(data) is dict else type(data).__name__}")
    for f in fields(cls):
        want = _FIELD_TYPES.get(str(f.type).split("[")[0])
        if want is not None and type(data[f.name]) is not want:
            raise TypeError(f"{cls.__name__}.{f.name} is a {type(data[f.name]).__name__}")
    return cls(**data)


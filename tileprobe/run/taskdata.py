"""The records the run worker's tasks take and give, and the worker's own state.

A task (:func:`tileprobe.run.worker.run_variant`, :func:`tileprobe.run.batch.time_batch`,
:func:`tileprobe.run.batch.check_candidate`) is called over the worker's pipe with JSON-like keywords and returns
a JSON-like object (:mod:`tileprobe.probe.wire`: a format that cannot run code). The edge is here, once per task:
the variant's fields come in as a dict and become a :class:`LaunchTarget` (:meth:`LaunchTarget.from_wire`, checked
by :func:`tileprobe.jsonrecord.from_dict`); a batch's and a check's results are built as :class:`BatchTiming` and
:class:`CandidateCheck` and leave as the very objects the tasks returned as dicts before
(:meth:`BatchTiming.to_wire`, same keys, same order); a failure becomes a :class:`Failure` before it is written
into either. Inside, the tasks use attributes.

:class:`WorkerState` is what :func:`tileprobe.run.worker.init_cuda` sets up in one worker process (device, stream,
timer, SM count) and the caches the tasks share.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict

__all__ = ["BatchTiming", "CandidateCheck", "Failure", "GpuInfo", "LaunchTarget", "WorkerState"]


@dataclass
class LaunchTarget:
    """The fields of a variant record (``VariantRecord.to_dict()``, or the tune task's subset
    :data:`tileprobe.run.session._TASK_FIELDS`) a worker task uses to load, launch and check it. Keys the task
    does not use are ignored; a missing key takes its default (the fields a task needs and lacks fail where they
    are used, as a status). Units: ``threads`` per CTA, ``ctas_per_sm`` the static model's, ``registers`` per
    thread, ``driver_shared_bytes`` bytes."""
    kernel: str = ""
    case: dict[str, Any] | None = None
    hints: dict[str, Any] | None = None
    effective_hints: dict[str, Any] | None = None
    arch: str | None = None
    symbol: str = ""
    signature: list | None = None
    threads: int | None = None
    ctas_per_sm: int | None = None
    cubin_sha256: str | None = None
    registers: int | None = None
    driver_shared_bytes: int | None = None

    @classmethod
    def from_wire(cls, record: Mapping | LaunchTarget) -> LaunchTarget:
        """The target of a task's ``record`` keyword (a record given as one is returned as it is).

        Raises:
            tileprobe.jsonrecord.FieldError: ``record`` is no object, or a field holds a value of another type
            (the message names the field and the value).
        """
        if isinstance(record, LaunchTarget):
            return record
        return from_dict(cls, record, where="the worker task's record")

    def grid_hints(self) -> dict:
        """The hints handed to ``Probe.grid``: the variant's hints, with ``None`` (as declared) replaced by the value
        in force (``effective_hints``)."""
        eff = self.effective_hints or {}
        return {k: (v if v is not None else eff.get(k)) for k, v in (self.hints or {}).items()}

    def hints_in_force(self) -> dict:
        """Every hint in force: the effective hints with the variant's own on top (:meth:`grid_hints`)."""
        return {**(self.effective_hints or {}), **self.grid_hints()}


@dataclass
class Failure:
    """What an exception in a task means (:func:`tileprobe.run.worker.classify`): ``status`` crash | error, the
    text shown (``error``), the CUDA error code (``cuda_error``, None when none was seen) and whether the worker's
    context is broken (``fatal``: the worker exits after replying)."""
    status: str
    error: str
    cuda_error: int | None = None
    fatal: bool = False


@dataclass
class BatchTiming:
    """What :func:`tileprobe.run.batch.time_batch` returns, as its dict (:meth:`to_wire`): ``status`` ok | crash |
    error, the samples (µs), the clock readings before and after them, the grid (3 ints), the failure's text, code
    and fatality, the warm-up launches and samples the timing mode ran (``warmup_launches``, ``n``), the batch's
    wall time (s), the driver's CTAs/SM (None: not asked) and the timing mode's other figures (``extra``:
    ``estimate_us``, ``graph_launches``, …, as :mod:`tileprobe.run.timing` names them)."""
    status: str | None = None
    samples_us: list = field(default_factory=list)
    clocks_before: Any = None
    clocks_after: Any = None
    grid: list | None = None
    error: str = ""
    cuda_error: int | None = None
    fatal: bool = False
    warmup_launches: int | None = None
    n: int = 0
    wall_s: float | None = None
    driver_ctas_per_sm: int | None = None
    extra: dict = field(default_factory=dict)

    def fail(self, failure: Failure) -> None:
        """Take ``failure``'s status, text, code and fatality."""
        self.status, self.error, self.cuda_error, self.fatal = (failure.status, failure.error, failure.cuda_error,
                                                                failure.fatal)

    def take_info(self, info: Mapping) -> None:
        """The timing mode's figures (the second item a ``*_batch`` of :mod:`tileprobe.run.timing` returns)."""
        rest = dict(info)
        self.warmup_launches = rest.pop("warmup_launches", self.warmup_launches)
        self.n = rest.pop("n", self.n)
        self.extra.update(rest)

    def to_wire(self) -> dict:
        """The task's reply: the dict ``time_batch`` returned before it was a record (keys in the same order;
        ``driver_ctas_per_sm`` only when the driver was asked)."""
        out = {"status": self.status, "samples_us": self.samples_us, "clocks_before": self.clocks_before,
               "clocks_after": self.clocks_after, "grid": self.grid, "error": self.error,
               "cuda_error": self.cuda_error, "fatal": self.fatal, "warmup_launches": self.warmup_launches,
               "n": self.n, "wall_s": self.wall_s}
        if self.driver_ctas_per_sm is not None:
            out = {**out, "driver_ctas_per_sm": self.driver_ctas_per_sm}
        return {**out, **self.extra}


@dataclass
class CandidateCheck:
    """What :func:`tileprobe.run.batch.check_candidate` returns, as its dict (:meth:`to_wire`): ``status`` ok |
    wrong | unchecked | crash | error, what the output was compared with (``against``: reference | default), the
    check's figures (:func:`tileprobe.run.check.check_against`), ``message`` (why it is not ok), the failure's text,
    code and fatality, and ``checks``: the checks passed (``tolerance``, ``bit-exact``; None: none ran)."""
    status: str | None = None
    error: str = ""
    cuda_error: int | None = None
    fatal: bool = False
    against: str | None = None
    rel_err: float | None = None
    tolerance: Any = None
    max_abs_err: float | None = None
    nan_count: int = 0
    unwritten_count: int = 0
    message: str = ""
    checks: list | None = None

    def fail(self, failure: Failure) -> None:
        """Take ``failure``'s status, code and fatality; its text is the error and the message."""
        self.status, self.error, self.cuda_error, self.fatal = (failure.status, failure.error, failure.cuda_error,
                                                                failure.fatal)
        self.message = failure.error

    def to_wire(self) -> dict:
        """The task's reply: the dict ``check_candidate`` returned before it was a record (keys in the same order;
        ``checks`` only when a check ran)."""
        out = {"status": self.status, "samples_us": [], "clocks_before": None, "clocks_after": None, "grid": None,
               "error": self.error, "cuda_error": self.cuda_error, "fatal": self.fatal, "warmup_launches": None,
               "n": 0, "wall_s": None, "against": self.against, "rel_err": self.rel_err, "tolerance": self.tolerance,
               "max_abs_err": self.max_abs_err, "nan_count": self.nan_count, "unwritten_count": self.unwritten_count,
               "message": self.message}
        return out if self.checks is None else {**out, "checks": self.checks}


@dataclass
class GpuInfo:
    """The GPU a worker runs on, as the worker's hello says it (:func:`tileprobe.run.worker.gpu_info`, or part of
    it from a stand-in): its name, arch (``sm_90``), SM count, UUID and PCI bus id (None when not said), the bytes
    the timer's L2 flush writes, and the clocks (MHz) nvidia-smi reported. Read once from the hello's info
    (:meth:`from_wire`); the info itself stays the JSON the environment records."""
    name: str | None = None
    sm: str | None = None
    num_sms: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    l2_flush_bytes: int | None = None
    clocks: dict | None = None

    @classmethod
    def from_wire(cls, info: Mapping) -> GpuInfo:
        """The GPU of a worker's hello ``info``.

        Raises:
            tileprobe.jsonrecord.FieldError: a field of another type (named)."""
        return from_dict(cls, info, where="the GPU worker's hello")

    def ref(self, index: int) -> dict:
        """What a run records of its GPU (``VariantRun.gpu``): device ``index``, name, UUID, PCI bus id."""
        return {"index": index, "name": self.name, "uuid": self.uuid, "pci_bus_id": self.pci_bus_id}


@dataclass
class WorkerState:
    """One worker process's state: the caches its tasks share (probes by (path, label, arch); loaded kernels by
    (cubin sha256, symbol), at most :data:`tileprobe.run.worker._KERNEL_CACHE_SIZE`), and what
    :func:`tileprobe.run.worker.init_cuda` sets up: the device (``cuda``, or ``cpu`` in the CPU fakes), the
    cuda-core stream and torch's, the timer (:class:`tileprobe.run.timing.TorchTimer`), ``synchronize``, the
    GPU's SM count, memory (bytes) and PCI bus id, its provenance (``gpu``: :func:`tileprobe.run.worker.gpu_info`)
    and the clock reader made on first use."""
    probes: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    device: str = "cuda"
    synchronize: Callable[[], Any] | None = None
    stream: Any = None
    torch_stream: Any = None
    timer: Any = None
    num_sms: int | None = None
    memory_bytes: int = 0
    pci_bus_id: str | None = None
    gpu: dict | None = None
    clock_reader: Any = None

"""The worker process: one fresh Python that owns the GPU context and serves many variants over a pipe.

Started by :mod:`tileprobe.run.watchdog` as ``python -m tileprobe.run.worker FD INIT`` (a new interpreter: never a
fork of a process that may hold a CUDA context), it talks over the inherited socket ``FD`` with
``multiprocessing.connection`` messages (records in :mod:`tileprobe.run.protocol`, tuples on the wire):

* worker → parent, once: ``("hello", ok, info)`` — ``info`` is what ``INIT`` (``"module:function"``) returned,
  e.g. the GPU's provenance from :func:`init_cuda`, or the traceback when it failed;
* parent → worker: ``("task", task_id, "module:function", kwargs)`` or ``("stop",)``;
* worker → parent: ``("started", task_id)`` once the task's function is imported (its timeout starts then: a
  loaded machine's import time is not a hang), then ``("result", task_id, ok, value)`` — the function's
  return value (a dict), or ``{"error": traceback, "exception": name}`` when it raised.

A task result with ``"fatal": True`` (a sticky CUDA error broke the context) makes the worker exit right after
replying, so the next variant runs in a clean context. The default task, :func:`run_variant`, returns the run
record exactly as it is stored (``VariantRecord.run``; fields in :data:`RUN_FIELDS`).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from tileprobe.run.taskdata import Failure, LaunchTarget, WorkerState

if TYPE_CHECKING:
    from tileprobe.schema import VariantRun

# Imports inside functions here are lazy on purpose: at the module head they would add 0.13 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: The fields of a stored run result (``VariantRecord.run``), with their defaults. Times in µs, durations in s.
#: status: ok | wrong | hang | crash | error (the variant could not be set up: probe, reference or argument
#: packing failed — the kernel was not judged) | skipped (not launched: the register-pool check predicted a
#: hang). register_pool: the static prediction beside what happened (``hang_risk`` | ``pool_ok`` | ``unknown``
#: | ``none`` | None when the SASS was not read).
RUN_FIELDS: dict[str, Any] = {
    "status": None, "median_us": None, "p25_us": None, "p75_us": None, "min_us": None, "mean_us": None,
    "stdev_us": None, "samples_us": None, "spread_pct": None, "reps": 0, "rel_err": None, "tolerance": None, "max_abs_err": None, "nan_count": 0,
    "unwritten_count": 0, "checked": False, "warnings": [], "driver_ctas_per_sm": None,
    "driver_ctas_per_sm_block1": None, "static_ctas_per_sm": None, "occupancy_agrees": None,
    "driver_registers": None, "driver_shared_bytes": None, "driver_local_bytes": None, "threads": None,
    "grid": None, "block": [1, 1, 1], "seed": None, "cubin_sha256": None, "error": "", "cuda_error": None,
    "fatal": False, "setup_s": None, "check_s": None, "time_s": None, "wall_s": None,
    "timing_mode": None, "clocks_before": None, "clocks_after": None, "clocks_during": None, "clocks_moved": None,
    "register_pool": None,
}


def run_dict(**fields) -> dict:
    """A run result with every field of :data:`RUN_FIELDS` (defaults for those not given)."""
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in RUN_FIELDS.items()}
    out.update(fields)
    return out


# --- worker state ------------------------------------------------------------------------------------------

#: Per-process state: caches, and what :func:`init_cuda` sets up (device, stream, timer, synchronize, SM count).
_STATE = WorkerState()
_KERNEL_CACHE_SIZE = 64


def init_import() -> dict:
    """The first half of :func:`init_cuda` for a spare worker of the kept-warm server
    (:mod:`tileprobe.run.warmserver`): import torch and the modules the tasks use, touch no GPU (no CUDA context
    while another command races on it). :func:`init_cuda`, run later as a task, finishes the set-up."""
    import torch  # noqa: F401  (the seconds of the start: imported now, while nobody waits)

    from tileprobe.run import launch, timing  # noqa: F401  (batch imports this module: it is loaded with the task)
    return {"pid": os.getpid(), "prepared": True}


def init_plain() -> dict:
    """An init that touches no GPU (for tests of the protocol and the watchdog)."""
    return {"pid": os.getpid()}


def init_cuda() -> dict:
    """Set up CUDA in this worker: torch on device 0 with its own stream, cuda-core on the same context, the L2
    flush buffer. Returns the GPU's provenance (:func:`gpu_info`).

    Raises:
        RuntimeError: torch sees no CUDA GPU.
    """
    import torch

    from tileprobe.run.launch import core_stream, cuda_core
    from tileprobe.run.timing import TorchTimer
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA GPU (torch.cuda.is_available() is False): GPU runs (tileprobe "
                           "run, tune) need an NVIDIA GPU, its driver and a CUDA build of torch")
    torch.cuda.init()
    dev = torch.cuda.current_device()
    cuda_core().Device(dev).set_current()
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    props = torch.cuda.get_device_properties(dev)
    timer = TorchTimer(_l2_bytes(dev))
    info = {**gpu_info(dev), "l2_flush_bytes": int(timer.flush_buffer.numel() * 4)}
    _STATE.stream, _STATE.torch_stream, _STATE.timer = core_stream(stream.cuda_stream), stream, timer
    _STATE.num_sms, _STATE.memory_bytes = props.multi_processor_count, int(props.total_memory)
    _STATE.pci_bus_id, _STATE.gpu = _pci_bus_id(dev), info
    _STATE.device, _STATE.synchronize = "cuda", torch.cuda.synchronize
    return info


def gpu_info(dev: int = 0) -> dict:
    """Provenance of the GPU: name, arch (``sm_90``), SMs, L2 and memory (bytes), driver, clocks (MHz), versions.

    Clocks, power, temperature, performance state and the driver's release string come from ``nvidia-smi`` when
    it is on PATH (``None`` otherwise); timings from different GPUs, drivers or clocks are not one sample.
    """
    import torch
    from cuda.bindings import driver

    from tileprobe.run.launch import check_cu
    props = torch.cuda.get_device_properties(dev)
    l2 = _l2_bytes(dev)
    drv = check_cu(driver.cuDriverGetVersion(), "cuDriverGetVersion")
    bus = _pci_bus_id(dev)
    smi = nvidia_smi(bus)
    clocks = {k.removeprefix("clock_"): smi.get(k) for k in
              ("clock_sm_mhz", "clock_mem_mhz", "clock_max_sm_mhz", "clock_max_mem_mhz", "clock_app_sm_mhz")}
    return {"name": props.name, "sm": f"sm_{props.major}{props.minor}", "cc": [props.major, props.minor],
            "num_sms": props.multi_processor_count, "l2_bytes": int(l2), "memory_bytes": int(props.total_memory),
            "cuda_driver_api": f"{drv // 1000}.{drv % 1000 // 10}", "pci_bus_id": bus,
            "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_core": _version("cuda-core"),
            "cuda_bindings": _version("cuda-bindings"), **smi, "clocks": clocks}


def _l2_bytes(dev: int) -> int:
    """The L2 cache of device ``dev`` in bytes (the driver's ``CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE``)."""
    from cuda.bindings import driver

    from tileprobe.run.launch import check_cu
    cudev = check_cu(driver.cuDeviceGet(dev), "cuDeviceGet")
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
    return int(check_cu(driver.cuDeviceGetAttribute(attr, cudev), "cuDeviceGetAttribute"))


def _pci_bus_id(dev: int) -> str:
    """The PCI bus id of device ``dev`` (``0000:19:00.0``), from the driver."""
    from cuda.bindings import driver

    from tileprobe.run.launch import check_cu
    cudev = check_cu(driver.cuDeviceGet(dev), "cuDeviceGet")
    return c_string(check_cu(driver.cuDeviceGetPCIBusId(32, cudev), "cuDeviceGetPCIBusId"))


def c_string(buf) -> str:
    """Text of a C char buffer (bytes or str): up to the first NUL. ``cuDeviceGetPCIBusId(32, dev)`` returns the
    whole 32-byte buffer, NUL and what follows it included (seen on the H200, 2026-11-29)."""
    text = buf.decode(errors="replace") if isinstance(buf, (bytes, bytearray)) else str(buf)
    return text.split("\x00", 1)[0].strip()


_SMI_FIELDS = [("driver_version", "driver", str), ("uuid", "uuid", str), ("clocks.sm", "clock_sm_mhz", float),
               ("clocks.mem", "clock_mem_mhz", float), ("clocks.max.sm", "clock_max_sm_mhz", float),
               ("clocks.max.mem", "clock_max_mem_mhz", float), ("clocks.applications.graphics",
                                                                 "clock_app_sm_mhz", float),
               ("power.draw", "power_w", float), ("power.limit", "power_limit_w", float),
               ("temperature.gpu", "temperature_c", float), ("pstate", "pstate", str),
               ("persistence_mode", "persistence_mode", str), ("compute_mode", "compute_mode", str)]


def nvidia_smi(bus_id: str | None = None, timeout_s: float = 15.0) -> dict:
    """GPU clocks and state from ``nvidia-smi --query-gpu`` (keys as in :data:`_SMI_FIELDS`; ``None`` for a field
    the GPU does not report). All fields in one call; if the driver rejects one, each is asked alone. ``{}`` when
    nvidia-smi is missing."""
    def query(fields, bus):
        cmd = ["nvidia-smi", f"--query-gpu={','.join(f for f, _, _ in fields)}", "--format=csv,noheader,nounits"]
        if bus:
            cmd += ["-i", bus]
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=True).stdout
        return dict(zip([k for _, k, _ in fields], [v.strip() for v in text.strip().splitlines()[0].split(",")]))

    raw: dict = {}
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        try:
            raw = query(_SMI_FIELDS, bus_id)
        except (subprocess.SubprocessError, IndexError, ValueError, OSError):
            bus = bus_id
            for f in _SMI_FIELDS:
                try:
                    raw.update(query([f], bus))
                except (subprocess.SubprocessError, IndexError, ValueError, OSError):
                    if bus:   # a bus id nvidia-smi does not understand: ask device 0 instead
                        bus = None
                        try:
                            raw.update(query([f], bus))
                        except (subprocess.SubprocessError, IndexError):
                            pass
    except OSError:   # no nvidia-smi
        return {}
    out = {}
    for _, key, conv in _SMI_FIELDS:
        value = raw.get(key, "")
        try:
            out[key] = conv(value) if value and "N/A" not in value and "Not Supported" not in value else None
        except ValueError:
            out[key] = value
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --- the variant task --------------------------------------------------------------------------------------

def _probe(path: str, label: str, arch: str | None = None):
    """The probe named ``label`` in file ``path`` (the only one of a one-probe file), loaded once; of probes sharing
    the name with disjoint ``archs``, the one meant for ``arch``."""
    from tileprobe.errors import ProbeError
    from tileprobe.probe.define import archs_overlap, load_probes
    key = (path, label, arch)
    if key not in _STATE.probes:
        probes = load_probes(path)
        named = [p for p in probes if p.label == label]
        match = ([p for p in named if arch is None or archs_overlap(p.archs, [arch])] or named
                 or (probes if len(probes) == 1 else []))
        if not match:
            raise ProbeError(f"no probe named {label!r} in {path} (it has {', '.join(p.label for p in probes)})")
        _STATE.probes[key] = match[0]
    return _STATE.probes[key]


def _kernel(cubin: bytes, symbol: str, sha: str | None):
    from tileprobe.run.launch import LoadedKernel
    cache = _STATE.kernels
    key = (sha, symbol)
    if key not in cache:
        if len(cache) >= _KERNEL_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[key] = LoadedKernel(cubin, symbol)
    return cache[key]


def grid_hints(record: dict | LaunchTarget) -> dict:
    """The hints handed to ``Probe.grid``: the variant's hints, with ``None`` (as declared) replaced by the value in
    force (``effective_hints``). ``record``: the variant record's dict, or its :class:`LaunchTarget`.

    Raises:
        tileprobe.jsonrecord.FieldError: a dict whose hints are no object."""
    return LaunchTarget.from_wire(record).grid_hints()


def launch_context(record: dict | LaunchTarget, num_sms: int | None) -> dict:
    """The keywords ``run``, ``tune`` (static stage, timed batches, checks) and the audit hand to a probe's ``args``
    (all alike): ``arch`` (the record's target), ``hints`` (every hint in force: the effective hints with
    the variant's own on top, None replaced by the effective value) and ``num_sms`` (the GPU's SM count, or the
    one the grids are made for). :meth:`~tileprobe.probe.define.Probe.launch_args` passes those ``args`` declares.
    ``record``: the variant record's dict, or its :class:`LaunchTarget`."""
    target = LaunchTarget.from_wire(record)
    return {"arch": target.arch, "hints": target.hints_in_force(), "num_sms": num_sms}


def probe_grid(probe, record: dict | LaunchTarget, num_sms: int | None, needs: str = "tileprobe run needs") -> tuple:
    """The probe's ``grid(case, hints, num_sms)`` (with ``arch=`` when it takes it) as a 3-tuple, for ``run`` and
    ``tune`` alike. Raises ProbeError when the probe has none or it fails."""
    from tileprobe.probe.define import context_kwargs
    from tileprobe.run.launch import grid3
    if probe.grid is None:
        raise _probe_error(f"the probe has no grid=: {needs} grid(case, hints, num_sms)", probe)
    target = LaunchTarget.from_wire(record)
    return grid3(_call_probe(probe, "grid", probe.grid, target.case, target.grid_hints(), num_sms,
                             **context_kwargs(probe.grid, arch=target.arch)))


def run_variant(record: dict, cubin: bytes, probe_path: str, seed: int = 0, reps: int | None = None,
                warmup: int | None = None, warmup_ms: float | None = None, timing: bool = True,
                timing_mode: str = "sustained") -> dict:
    """Check and time one audited variant in this worker. Returns the run record (:func:`run_dict`).

    Steps: load the cubin (cached) and ask the driver for occupancy and resources; make fresh inputs with
    :class:`~tileprobe.run.arrays.TorchArrays` (seeded with ``seed``); compute the probe's reference on them;
    launch once and check the outputs (:mod:`~tileprobe.run.check`); then time (:mod:`~tileprobe.run.timing`).
    Never raises for a failure of the kernel or the probe: those are statuses.

    Args:
        record: the variant record as a dict (``VariantRecord.to_dict()``: needs kernel, case, hints,
            effective_hints, symbol, signature, threads, ctas_per_sm, cubin_sha256).
        cubin: the audited cubin's bytes. probe_path: the probe file on this machine.
        reps, warmup, warmup_ms: see :func:`tileprobe.run.timing.measure` (None: its defaults).
        timing: False checks without timing.
        timing_mode: ``sustained`` (:func:`~tileprobe.run.timing.measure`, as do_bench) or ``burst`` (``reps``
            samples each synchronized alone after 3 warm-up launches, as cuda.tile.tune); the SM and memory clocks
            are read over the samples (``clocks_before``, ``clocks_during``, ``clocks_after``, ``clocks_moved``, and
            a warning when they moved: :func:`tileprobe.run.timing.time_variant`).
    """
    from tileprobe.probe.define import context_kwargs
    from tileprobe.run.check import check_outputs
    from tileprobe.run.launch import check_packing, pack_arguments
    from tileprobe.schema import VariantRun
    t0 = time.perf_counter()
    target = LaunchTarget.from_wire(record)
    out = VariantRun.from_dict(run_dict(seed=seed, cubin_sha256=target.cubin_sha256,
                                        static_ctas_per_sm=target.ctas_per_sm))
    warnings: list[str] = []
    out.warnings = warnings
    args = expected = None
    sync = synchronize
    launched = False
    try:
        from tileprobe.run.arrays import TorchArrays
        probe = _probe(probe_path, target.kernel, target.arch)
        kernel = _kernel(cubin, target.symbol, target.cubin_sha256)
        out.threads = target.threads
        facts = kernel.driver_facts(out.threads or 1)
        if not out.threads:   # an old record without threads: the cubin's REQNTID is the driver's maximum
            out.threads = facts["driver_max_threads_per_cta"]
            facts = kernel.driver_facts(out.threads)
        out = out.replace(**{k: v for k, v in facts.items() if k in out})
        out.occupancy_agrees = (None if out.static_ctas_per_sm is None
                                else out.driver_ctas_per_sm == out.static_ctas_per_sm)
        warnings.extend(_resource_warnings(target, out))
        case, ctx = target.case, launch_context(target, _STATE.num_sms)
        if probe.grid is None:
            raise _probe_error("the probe has no grid=: tileprobe run needs grid(case, hints, num_sms)", probe)
        args = probe.launch_args(case, TorchArrays(_STATE.device, seed), **ctx)
        grid = probe_grid(probe, target, _STATE.num_sms)
        out.grid = list(grid)
        packed = pack_arguments(target.signature or [], args, [p.size_bytes for p in kernel.params])
        check_packing(packed, kernel.params)
        if probe.reference is not None:
            expected = _call_probe(probe, "reference", probe.reference, case, args,
                                   **context_kwargs(probe.reference, arch=target.arch, hints=target.hints_in_force()))
        sync()
        out.setup_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        stream = _STATE.stream
        launched = True
        kernel.launch(stream, grid, packed)
        sync()
        out.status = "ok"
        if expected is not None:
            res = check_outputs(args, expected, probe.tolerance)
            out = out.replace(status=res.status, rel_err=res.rel_err, tolerance=res.tolerance,
                              max_abs_err=res.max_abs_err, nan_count=res.nan_count,
                              unwritten_count=res.unwritten_count, checked=True)
            if res.message:
                out.error = res.message
        else:
            warnings.append("no reference= in the probe: the output was not checked")
        expected = None
        out.check_s = time.perf_counter() - t1
        if timing:
            out = _time(out, kernel, stream, grid, packed, reps, warmup, warmup_ms, timing_mode)
    except Exception as exc:  # a failure of the kernel, the probe or the driver: a status, not an abort
        failure = failure_of(exc, launched)
        out = out.replace(status=failure.status, error=failure.error, cuda_error=failure.cuda_error,
                          fatal=failure.fatal)
    finally:
        args = expected = None
        out.wall_s = time.perf_counter() - t0
    return out.to_dict()


def synchronize() -> None:
    """Wait for this worker's GPU work (the synchronize :func:`init_cuda` set up; nothing before it ran)."""
    if _STATE.synchronize is not None:
        _STATE.synchronize()


def clock_reader():
    """This worker's :class:`~tileprobe.run.clocks.ClockReader` (made once, for the GPU of :func:`init_cuda`)."""
    if _STATE.clock_reader is None:
        from tileprobe.run.clocks import ClockReader
        _STATE.clock_reader = ClockReader(_STATE.pci_bus_id)
    return _STATE.clock_reader


def driver_occupancy(cubin: bytes, symbol: str, threads: int) -> dict:
    """Load a cubin and return only what the driver says of its kernel (no launch): CTAs/SM for ``threads``
    threads per CTA (and for 1), registers, static shared and local memory (bytes). See
    :meth:`~tileprobe.run.launch.LoadedKernel.driver_facts`."""
    from tileprobe.run.launch import LoadedKernel
    return LoadedKernel(cubin, symbol).driver_facts(threads)


def _time(out: VariantRun, kernel, stream, grid, packed, reps, warmup, warmup_ms, mode="sustained") -> VariantRun:
    """``out`` with the variant timed in ``mode``, the clocks read over its samples
    (:func:`tileprobe.run.timing.time_variant`); its warnings after ``out``'s."""
    from tileprobe.run.timing import time_variant
    t2 = time.perf_counter()
    res = time_variant(lambda: kernel.launch(stream, grid, packed), _STATE.timer, clock_reader(), mode=mode,
                       reps=reps, warmup=warmup, warmup_ms=warmup_ms)
    warnings = [*(out.warnings or []), *res.pop("warnings")]
    out = out.replace(**res)
    out.warnings = warnings
    out.time_s = time.perf_counter() - t2
    return out


def _resource_warnings(target: LaunchTarget, out: VariantRun) -> list[str]:
    w = []
    if out.occupancy_agrees is False:
        w.append(f"occupancy: the driver says {out.driver_ctas_per_sm} CTAs/SM for {out.threads} threads, "
                 f"the static model says {out.static_ctas_per_sm}")
    for ours, drivers, what in ((target.registers, out.driver_registers, "registers per thread"),
                                (target.driver_shared_bytes, out.driver_shared_bytes, "static shared memory (B)")):
        if ours is not None and drivers is not None and ours != drivers:
            w.append(f"{what}: the cubin says {ours}, the driver {drivers}")
    return w


def _probe_error(msg, probe):
    from tileprobe.errors import ProbeError
    return ProbeError(msg, probe.source)


def _call_probe(probe, what, fn, *a, **kw):
    from tileprobe.errors import ProbeError
    from tileprobe.probe.define import _probe_error_from
    try:
        return fn(*a, **kw)
    except ProbeError:
        raise
    except Exception as e:
        if _cuda_code(e) is not None:
            raise
        raise _probe_error_from(e, probe.source, f"{what}() failed") from e


def _cuda_code(exc: BaseException) -> int | None:
    from tileprobe.run.launch import CudaFault, error_code_from_text
    if isinstance(exc, CudaFault):
        return exc.code
    return error_code_from_text(str(exc))


def failure_of(exc: BaseException, launched: bool = True) -> Failure:
    """What an exception in a task means: a sticky CUDA error → ``crash`` + fatal (the worker must go); another
    CUDA error once the kernel was launched → ``crash``; before it (loading the cubin, the probe, the inputs, the
    reference, packing) → ``error`` (with the traceback's last frames when the exception is no tileprobe error and
    no CUDA error). Sticky codes: :data:`tileprobe.run.launch.STICKY_CUDA_ERRORS`."""
    from tileprobe.errors import TileprobeError
    from tileprobe.run.launch import STICKY_CUDA_ERRORS, context_status
    code = _cuda_code(exc)
    try:
        ctx = context_status()
    except Exception:  # no driver at all (CPU tests)
        ctx = 0
    if ctx in STICKY_CUDA_ERRORS:   # the context is broken whatever the exception said
        code = ctx
    text = str(exc) if isinstance(exc, TileprobeError) else f"{type(exc).__name__}: {exc}"
    cuda_like = type(exc).__name__ in ("CUDAError", "CudaFault", "AcceleratorError") or any(
        s in text for s in ("CUDA error", "CUDA_ERROR_"))
    sticky = code in STICKY_CUDA_ERRORS
    if sticky or (launched and not isinstance(exc, TileprobeError) and (code is not None or cuda_like)):
        if code is not None and sticky:
            text += f" — sticky CUDA error {code} ({STICKY_CUDA_ERRORS[code]}): the worker is replaced"
        return Failure("crash", text, code, sticky)
    return Failure("error", text if isinstance(exc, TileprobeError) or code is not None
                   else "".join(traceback.format_exception(exc, limit=-4)).strip(), code)


# --- the process ---------------------------------------------------------------------------------------------

def _import(name: str):
    from tileprobe.probe.define import import_object
    return import_object(name)


def _sender(conn) -> Callable[[tuple], None]:
    """A function that sends one message (a protocol tuple) to the parent as data (:mod:`tileprobe.probe.wire`):
    the parent never unpickles what this process, which runs probe code, sends. The connection's ``send_bytes``
    and the encoder (``wire.to_data``, ``wire.dumps``) are bound when it is made, before any task runs, so a task
    that replaces module globals or class attributes (``wire.dumps``, ``Connection.send_bytes``) cannot change what
    is sent for the tasks after it. Not a wall: code in this process can still reach the connection (through
    ``gc``); docs/FAILURES.md, "Limits", says what is promised."""
    from tileprobe.probe import wire
    send_bytes, dumps, to_data = conn.send_bytes, wire.dumps, wire.to_data

    def send(message: tuple) -> None:
        send_bytes(dumps(to_data(message), "the worker's message"))
    return send


def serve(conn, init: str) -> int:
    """The worker loop: hello, then tasks until ``stop`` or the parent goes away (:mod:`tileprobe.run.protocol`).
    Returns the exit code: 0 stopped, 2 the init failed, 3 a task's result was fatal. What it sends, receives and
    imports with is bound here, before the init or any task runs (:func:`_sender`).

    Raises:
        tileprobe.run.protocol.ProtocolError: the parent sent a message that is no task and no stop."""
    from tileprobe.run.protocol import Hello, Result, Started, Task, TaskError
    send, recv, import_ = _sender(conn), conn.recv, _import
    from_wire, error_of, format_exception = Task.from_wire, TaskError.of, traceback.format_exception
    try:
        info = import_(init)() or {}
        send(Hello(True, info).to_wire())
    except BaseException as e:  # report why the worker cannot start, then quit
        failure = error_of(e, "".join(format_exception(e)).strip(), with_message=True)
        send(Hello(False, failure.to_wire()).to_wire())
        return 2
    while True:
        try:
            task = from_wire(recv())
        except (EOFError, OSError):
            return 0
        if task is None:
            return 0
        try:
            call = import_(task.fn)
            send(Started(task.task_id).to_wire())     # the task's clock starts now, not while it imports
            result = Result(task.task_id, True, call(**task.kwargs))
            send(result.to_wire())
        except BaseException as e:  # the task's own failure: report it; the worker stays usable
            failure = error_of(e, "".join(format_exception(e)).strip())
            send(Result(task.task_id, False, failure.to_wire()).to_wire())
            continue
        if result.fatal:
            return 3


def main(argv: list[str] | None = None) -> int:
    """``python -m tileprobe.run.worker FD INIT``: serve on the inherited socket FD."""
    if __name__ == "__main__":   # one module object, whether run with -m or imported by name
        sys.modules.setdefault("tileprobe.run.worker", sys.modules[__name__])
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's business
    from tileprobe.procs import die_with_parent
    die_with_parent(signal.SIGKILL)                # SIGKILLed when its parent dies: none is left behind
    conn = Connection(int(argv[0]))
    code = serve(conn, argv[1] if len(argv) > 1 else "tileprobe.run.worker:init_cuda")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # skip interpreter teardown: a broken CUDA context can make it hang


if __name__ == "__main__":
    main()

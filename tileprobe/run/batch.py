"""Worker tasks of ``tileprobe tune``: time one batch of one candidate; check one candidate's output.

They run in the run worker (:mod:`tileprobe.run.worker`, started by the :class:`~tileprobe.run.watchdog.Watchdog`
with ``init_cuda``) like :func:`~tileprobe.run.worker.run_variant`, and share its caches (probes, loaded cubins)
and its rules: a failure of the kernel, the probe or the driver is a status, never an exception; a sticky CUDA
error sets ``fatal`` so the watchdog replaces the worker.

* :func:`time_batch`: inputs made once per (probe, case, seed) and kept while the worker lives (an LRU bounded
  by :data:`ARGS_CACHE_FRACTION` of the GPU's memory), the clocks read after the warm-up and after the samples,
  the samples taken in the requested timing mode (:func:`tileprobe.run.timing.sustained_batch` /
  :func:`~tileprobe.run.timing.burst_batch`).
* :func:`check_candidate`: fresh inputs, outputs poisoned (NaN / integer sentinel, as ``run`` does), one launch,
  compared with the probe's ``reference`` — or, without one, with the output of the default configuration
  launched on identically seeded inputs (the arrays the probe makes with ``arrays.empty`` are the outputs).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from tileprobe.run.taskdata import BatchTiming, CandidateCheck, LaunchTarget
from tileprobe.run.worker import (
    _STATE,
    _call_probe,
    _kernel,
    _probe,
    clock_reader,
    failure_of,
    launch_context,
    probe_grid,
    synchronize,
)

# Imports inside functions here are lazy on purpose: at the module head they would add 0.10 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Inputs kept per worker: at most this fraction of the GPU's memory (oldest dropped first).
ARGS_CACHE_FRACTION = 0.25
_ARGS: OrderedDict[tuple, tuple] = OrderedDict()


def _tracking_arrays(seed: int):
    """TorchArrays that also remember which tensors ``empty`` made (the outputs)."""
    from tileprobe.run.arrays import TorchArrays

    class TrackingArrays(TorchArrays):
        def __init__(self, device, seed):
            super().__init__(device, seed)
            self.outputs: list = []

        def empty(self, *a, **kw):
            t = super().empty(*a, **kw)
            self.outputs.append(t)
            return t
    return TrackingArrays(_STATE.device, seed)


def _nbytes(tensors) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors)


def _cached_args(probe, probe_path: str, record: dict | LaunchTarget, seed: int) -> tuple:
    """The candidate's launch arguments, made once per everything they depend on: probe, case, seed, and the arch,
    hints and SM count ``args`` is given (:func:`~tileprobe.run.worker.launch_context`). ``record``: the
    candidate's record fields (a dict, as a task gets them, or its :class:`LaunchTarget`)."""
    from tileprobe.schema import canonical, value_key
    target = LaunchTarget.from_wire(record)
    ctx = launch_context(target, _STATE.num_sms)
    used = {k: ctx[k] for k in probe.args_context}
    key = (probe_path, probe.label, value_key(target.case), seed, value_key(canonical(used)))
    if key in _ARGS:
        _ARGS.move_to_end(key)
        return _ARGS[key][0]
    arrays = _tracking_arrays(seed)
    args = probe.launch_args(target.case, arrays, **ctx)
    limit = ARGS_CACHE_FRACTION * _STATE.memory_bytes
    _ARGS[key] = (args, _nbytes(arrays.created))
    while len(_ARGS) > 1 and sum(b for _, b in _ARGS.values()) > limit:
        _ARGS.popitem(last=False)
    return args


def _prepare(target: LaunchTarget, cubin: bytes, probe_path: str, args) -> tuple:
    """(kernel, grid, packed arguments) of one candidate, with the packing checked against the cubin."""
    from tileprobe.run.launch import check_packing, pack_arguments
    probe = _probe(probe_path, target.kernel, target.arch)
    if probe.grid is None:
        from tileprobe.errors import ProbeError
        raise ProbeError("the probe has no grid=: tuning needs grid(case, hints, num_sms)", probe.source)
    kernel = _kernel(cubin, target.symbol, target.cubin_sha256)
    grid = probe_grid(probe, target, _STATE.num_sms, "tuning needs")
    packed = pack_arguments(target.signature or [], args, [p.size_bytes for p in kernel.params])
    check_packing(packed, kernel.params)
    return kernel, grid, packed


def l2_flush(probe, timer):
    """The flush a batch of ``probe`` runs before each timed launch: the timer's (``timer.flush``), or None for a
    probe made with ``flush_l2=False`` (a program's search that times without L2 flushes)."""
    return timer.flush if getattr(probe, "flush_l2", True) is not False else None


def run_timeout_error(probe, samples_us) -> str | None:
    """Why a batch breaks ``probe.run_timeout_s`` (a program's ``single_run_timeout_sec``: seconds one launch may
    take), or None: the slowest sample in seconds against the bound."""
    bound = getattr(probe, "run_timeout_s", None)
    slowest = max(samples_us, default=0.0) / 1e6
    if bound is None or slowest <= bound:
        return None
    return (f"a launch took {slowest:.3g} s, over the {bound:g} s the program's search allows one launch "
            "(single_run_timeout_sec)")


def time_batch(record: dict, cubin: bytes, probe_path: str, seed: int = 0, mode: str = "sustained",
               **mode_kw) -> dict:
    """Time one batch of one candidate (module doc). ``record``: the fields of
    :data:`tileprobe.run.session._TASK_FIELDS`; ``mode``: ``sustained`` | ``burst`` | ``eager`` | ``graph``;
    ``mode_kw``: that mode's settings (:func:`~tileprobe.run.timing.sustained_batch` /
    :func:`~tileprobe.run.timing.burst_batch` / :func:`~tileprobe.run.timing.eager_batch` /
    :func:`~tileprobe.run.timing.graph_batch`, whose ``capture`` is the worker timer's).

    Returns ``status`` (ok | crash | error), ``samples_us``, ``clocks_before``, ``clocks_after``, ``grid``,
    ``warmup_launches``, ``n``, ``error``, ``cuda_error``, ``fatal``, ``wall_s``, and on first sight of a cubin
    in this worker the driver's ``driver_ctas_per_sm``."""
    from tileprobe.run.timing import burst_batch, eager_batch, graph_batch, sustained_batch
    t0 = time.perf_counter()
    target = LaunchTarget.from_wire(record)
    out = BatchTiming()
    launched = False
    try:
        probe = _probe(probe_path, target.kernel, target.arch)
        args = _cached_args(probe, probe_path, target, seed)
        kernel, grid, packed = _prepare(target, cubin, probe_path, args)
        out.grid = list(grid)
        if target.threads:
            out.driver_ctas_per_sm = kernel.driver_facts(target.threads)["driver_ctas_per_sm"]
        timer, stream, clocks = _STATE.timer, _STATE.stream, clock_reader()
        seen: list = []
        launched = True
        modes: dict[str, Callable[..., tuple[list[float], dict]]] = {"burst": burst_batch, "eager": eager_batch,
                                                                     "graph": graph_batch}
        fn = modes.get(mode, sustained_batch)
        if mode == "graph":
            mode_kw = {**mode_kw, "capture": timer.capture}
        times, info = fn(lambda: kernel.launch(stream, grid, packed), event_factory=timer.event,
                         synchronize=timer.synchronize, flush=l2_flush(probe, timer),
                         between=lambda: seen.append(clocks.read()), **mode_kw)
        out.status, out.samples_us = "ok", times
        out.clocks_before, out.clocks_after = (seen[-1] if seen else None), clocks.read()
        out.take_info(info)
        over = run_timeout_error(probe, times)
        if over:
            out.status, out.error = "error", over
    except Exception as exc:  # the kernel's, the probe's or the driver's failure: a status
        out.fail(failure_of(exc, launched))
    out.wall_s = time.perf_counter() - t0
    return out.to_wire()


def check_candidate_bit_exact(record: dict, cubin: bytes, probe_path: str, seed: int = 0, default: dict | None = None,
                              default_cubin: bytes | None = None) -> dict:
    """:func:`check_candidate` with ``bit_exact``: the check task of ``tileprobe tune --bit-exact``."""
    return check_candidate(record, cubin, probe_path, seed, default, default_cubin, bit_exact=True)


def check_candidate(record: dict, cubin: bytes, probe_path: str, seed: int = 0, default: dict | None = None,
                    default_cubin: bytes | None = None, bit_exact: bool = False) -> dict:
    """Check one candidate's output (module doc). ``default``/``default_cubin``: the default configuration's
    record fields and cubin, used when the probe has no reference. ``bit_exact``: against the default's output,
    also every bit equal (:func:`tileprobe.run.check.check_bits`; a probe with a reference is checked against it
    within tolerance only, and says so).

    Returns ``status`` (ok | wrong | unchecked | crash | error), ``against`` (reference | default), ``rel_err``,
    ``tolerance``, ``max_abs_err``, ``nan_count``, ``unwritten_count``, ``message``, ``error``, ``fatal``, and
    ``checks``: the checks passed (``tolerance``, ``bit-exact``)."""
    from tileprobe.run.check import check_figures
    target = LaunchTarget.from_wire(record)
    out = CandidateCheck()
    launched = False
    try:
        probe = _probe(probe_path, target.kernel, target.arch)
        arrays = _tracking_arrays(seed)
        args = probe.launch_args(target.case, arrays, **launch_context(target, _STATE.num_sms))
        kernel, grid, packed = _prepare(target, cubin, probe_path, args)
        if probe.reference is not None:
            from tileprobe.probe.define import context_kwargs
            expected = _call_probe(probe, "reference", probe.reference, target.case, args,
                                   **context_kwargs(probe.reference, arch=target.arch,
                                                    hints=target.hints_in_force()))
            out.against = "reference"
        elif default is not None:
            # by construction: the caller (tune/gpu.py's check) gives the default's record and cubin together
            assert default_cubin is not None
            expected, why, fatal = _default_outputs(LaunchTarget.from_wire(default), default_cubin, probe_path, seed,
                                                    arrays, args)
            if expected is None:
                out.status, out.message, out.fatal = "unchecked", why, fatal
                return out.to_wire()
            out.against = "default"
        else:
            out.status, out.message = "unchecked", ("the probe has no reference= and there is no default "
                                                    "configuration to compare with: the output was not checked")
            return out.to_wire()
        launched = True
        kernel.launch(_STATE.stream, grid, packed)
        synchronize()
        res = check_figures(args, expected, probe.tolerance, out.against or "reference", bit_exact)
        out.status, out.rel_err, out.tolerance = res.status, res.rel_err, res.tolerance
        out.max_abs_err = res.max_abs_err
        out.nan_count, out.unwritten_count, out.message, out.checks = (res.nan_count, res.unwritten_count,
                                                                       res.message, res.checks)
    except Exception as exc:
        out.fail(failure_of(exc, launched))
    return out.to_wire()


def _default_outputs(default: LaunchTarget, cubin: bytes, probe_path: str, seed: int, arrays,
                     args) -> tuple[dict | None, str, bool]:
    """The default configuration's outputs on inputs seeded like the candidate's: ``({arg index: tensor}, "",
    False)``, or ``(None, why, fatal)`` when they cannot be had (``fatal``: the default's launch broke the
    worker's context)."""
    indices = [i for i, a in enumerate(args) if any(a is t for t in arrays.outputs)]
    if not indices:
        return None, ("no output arrays (made with arrays.empty) to compare with the default configuration's: the "
                      "output was not checked"), False
    probe = _probe(probe_path, default.kernel, default.arch)
    d_arrays = _tracking_arrays(seed)
    d_args = probe.launch_args(default.case, d_arrays, **launch_context(default, _STATE.num_sms))
    try:
        kernel, grid, packed = _prepare(default, cubin, probe_path, d_args)
        kernel.launch(_STATE.stream, grid, packed)
        synchronize()
    except Exception as exc:
        failed = failure_of(exc, True)
        return None, f"the default configuration failed, so the output was not checked: {failed.error}", failed.fatal
    return {i: d_args[i] for i in indices}, "", False

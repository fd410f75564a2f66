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

from tileprobe.run.worker import (
    _STATE,
    _call_probe,
    _classify,
    _kernel,
    _probe,
    clock_reader,
    launch_context,
    probe_grid,
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
    return TrackingArrays(_STATE["device"], seed)


def _nbytes(tensors) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors)


def _cached_args(probe, probe_path: str, record: dict, seed: int) -> tuple:
    """The candidate's launch arguments, made once per everything they depend on: probe, case, seed, and (issue
    27) the arch, hints and SM count ``args`` is given (:func:`~tileprobe.run.worker.launch_context`)."""
    from tileprobe.schema import canonical, value_key
    ctx = launch_context(record, _STATE["num_sms"])
    used = {k: ctx[k] for k in probe.args_context}
    key = (probe_path, probe.label, value_key(record["case"]), seed, value_key(canonical(used)))
    if key in _ARGS:
        _ARGS.move_to_end(key)
        return _ARGS[key][0]
    arrays = _tracking_arrays(seed)
    args = probe.launch_args(record["case"], arrays, **ctx)
    limit = ARGS_CACHE_FRACTION * (_STATE.get("gpu") or {}).get("memory_bytes", 0)
    _ARGS[key] = (args, _nbytes(arrays.created))
    while len(_ARGS) > 1 and sum(b for _, b in _ARGS.values()) > limit:
        _ARGS.popitem(last=False)
    return args


def _prepare(record: dict, cubin: bytes, probe_path: str, args) -> tuple:
    """(kernel, grid, packed arguments) of one candidate, with the packing checked against the cubin."""
    from tileprobe.run.launch import check_packing, pack_arguments
    probe = _probe(probe_path, record["kernel"], record.get("arch"))
    if probe.grid is None:
        from tileprobe.errors import ProbeError
        raise ProbeError("the probe has no grid=: tuning needs grid(case, hints, num_sms)", probe.source)
    kernel = _kernel(cubin, record["symbol"], record.get("cubin_sha256"))
    grid = probe_grid(probe, record, _STATE["num_sms"], "tuning needs")
    packed = pack_arguments(record["signature"], args, [p.size_bytes for p in kernel.params])
    check_packing(packed, kernel.params)
    return kernel, grid, packed


def _result(**fields) -> dict:
    out: dict = {"status": None, "samples_us": [], "clocks_before": None, "clocks_after": None, "grid": None,
           "error": "", "cuda_error": None, "fatal": False, "warmup_launches": None, "n": 0, "wall_s": None}
    out.update(fields)
    return out


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
    out = _result()
    launched = False
    try:
        probe = _probe(probe_path, record["kernel"], record.get("arch"))
        args = _cached_args(probe, probe_path, record, seed)
        kernel, grid, packed = _prepare(record, cubin, probe_path, args)
        out["grid"] = list(grid)
        if record.get("threads"):
            out["driver_ctas_per_sm"] = kernel.driver_facts(record["threads"])["driver_ctas_per_sm"]
        timer, stream, clocks = _STATE["timer"], _STATE["stream"], clock_reader()
        seen: dict = {}
        launched = True
        modes: dict[str, Callable[..., tuple[list[float], dict]]] = {"burst": burst_batch, "eager": eager_batch,
                                                                     "graph": graph_batch}
        fn = modes.get(mode, sustained_batch)
        if mode == "graph":
            mode_kw = {**mode_kw, "capture": timer.capture}
        times, info = fn(lambda: kernel.launch(stream, grid, packed), event_factory=timer.event,
                         synchronize=timer.synchronize, flush=l2_flush(probe, timer),
                         between=lambda: seen.update(c=clocks.read()), **mode_kw)
        out.update(status="ok", samples_us=times, clocks_before=seen.get("c"), clocks_after=clocks.read(), **info)
        over = run_timeout_error(probe, times)
        if over:
            out.update(status="error", error=over)
    except Exception as exc:  # the kernel's, the probe's or the driver's failure: a status
        _classify(out, exc, launched)
    out["wall_s"] = time.perf_counter() - t0
    return out


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
    from tileprobe.run.check import check_against
    out = _result(against=None, rel_err=None, tolerance=None, max_abs_err=None, nan_count=0, unwritten_count=0,
                  message="")
    launched = False
    try:
        probe = _probe(probe_path, record["kernel"], record.get("arch"))
        arrays = _tracking_arrays(seed)
        args = probe.launch_args(record["case"], arrays, **launch_context(record, _STATE["num_sms"]))
        kernel, grid, packed = _prepare(record, cubin, probe_path, args)
        if probe.reference is not None:
            from tileprobe.probe.define import context_kwargs
            ctx = launch_context(record, _STATE["num_sms"])
            expected = _call_probe(probe, "reference", probe.reference, record["case"], args,
                                   **context_kwargs(probe.reference, arch=ctx["arch"], hints=ctx["hints"]))
            out["against"] = "reference"
        elif default is not None:
            # by construction: the caller (tune/gpu.py's check) gives the default's record and cubin together
            assert default_cubin is not None
            expected, why = _default_outputs(default, default_cubin, probe_path, seed, arrays, args)
            if expected is None:
                out.update(status="unchecked", message=why["message"], fatal=why.get("fatal", False))
                return out
            out["against"] = "default"
        else:
            out.update(status="unchecked", message="the probe has no reference= and there is no default "
                       "configuration to compare with: the output was not checked")
            return out
        launched = True
        kernel.launch(_STATE["stream"], grid, packed)
        _STATE["synchronize"]()
        out.update(check_against(args, expected, probe.tolerance, out["against"], bit_exact))
    except Exception as exc:
        _classify(out, exc, launched)
        out["message"] = out["error"]
    return out


def _default_outputs(default: dict, cubin: bytes, probe_path: str, seed: int, arrays, args):
    """The default configuration's outputs on inputs seeded like the candidate's: ``({arg index: tensor}, None)``,
    or ``(None, {"message", "fatal"})`` when it cannot be had."""
    indices = [i for i, a in enumerate(args) if any(a is t for t in arrays.outputs)]
    if not indices:
        return None, {"message": "no output arrays (made with arrays.empty) to compare with the default "
                                 "configuration's: the output was not checked"}
    probe = _probe(probe_path, default["kernel"], default.get("arch"))
    d_arrays = _tracking_arrays(seed)
    d_args = probe.launch_args(default["case"], d_arrays, **launch_context(default, _STATE["num_sms"]))
    failed = _result()
    try:
        kernel, grid, packed = _prepare(default, cubin, probe_path, d_args)
        kernel.launch(_STATE["stream"], grid, packed)
        _STATE["synchronize"]()
    except Exception as exc:
        _classify(failed, exc, True)
        return None, {"message": f"the default configuration failed, so the output was not checked: "
                                 f"{failed['error']}", "fatal": failed["fatal"]}
    return {i: d_args[i] for i in indices}, None


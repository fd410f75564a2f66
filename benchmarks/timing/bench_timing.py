"""Four timers on the same cubins: tileprobe's ``sustained`` and ``burst`` modes, ``triton.testing.do_bench`` and
cuda.tile.tune's timer, with the GPU's SM and memory clocks read over each.

On the GPU host, in one process (the run worker, under tileprobe's watchdog: a variant that hangs or crashes is a
row with its status, the others go on), for each variant of a bundle made where tileiras is
(``benchmarks/probes/timing_set.py``: 14 variants of 5 kernels, 2.5 MB), with the cubin launched by tileprobe's own
launcher (``tileprobe.run.launch.LoadedKernel``: grid of the probe, block (1, 1, 1), as ``ct.launch``):

1. ``sustained``: ``tileprobe run``'s default (``run/timing.py::time_variant``): estimate, warm-up ≥ 25 ms, ``--reps``
   launches back to back, each after an L2 flush (a write of max(2 × L2, 256 MiB)), an event pair per launch.
2. ``burst``: ``tileprobe run --timing burst``: 3 warm-up launches, then ``--reps`` samples each alone (flush, event
   pair, launch, synchronize): the GPU idles between samples.
3. ``do_bench``: ``triton.testing.do_bench(launch, warmup=25, rep=100, return_mode="median")`` (256 MB flush).
4. ``cutile_tune``: cuda.tile.tune's timer as ``_TimingCandidate`` applies it to one candidate (cuda-tile 1.7.0,
   ``tune/_tune.py``): 3 warm-up samples, then batches of 5 (``_BATCH_REPEATS``) until ``converged()`` — at least 5
   samples and a 95 % margin ≤ 1 % of the mean or ≤ 0.5 µs, or 1,000 samples, or mean × samples > 5 s (here also
   ``--tune-wall-s``). Each sample is what ``cuda.tile._cext._benchmark`` does (cutile-python
   ``cext/tile_kernel.cpp``, ``benchmark()``): a new CUDA graph [allocate an L2-sized buffer → memset it to 0x5a →
   event → the kernel → event → free], instantiated, launched and synchronized alone. Here the graph is made by
   stream capture of those operations (the same nodes). cuda.tile.tune reports the samples' mean; the table
   compares their median like the others and lists the mean too. In ``exhaustive_search`` other candidates'
   batches interleave with this one's; here the candidate runs alone.
5. Control ``burst_l2_flush``: ``burst`` with cuTile's flush (an L2-sized buffer set to 0x5a) instead of
   tileprobe's — what is left between ``cutile_tune`` and ``burst`` when it matches.

Each method runs twice per variant, in the order sustained, do_bench, burst, cutile_tune, control and then in
reverse (A B C C B A), and its two medians are averaged: a drift of the GPU's state over the variant (heat,
power-limited clocks) hits every method alike (:func:`abba`; ``drift_pct`` keeps how far each method moved).
A :class:`~tileprobe.run.clocks.ClockPoller` reads the clocks (NVML) every 2 ms over each method. Per variant and
method, against do_bench: ``within 3%``; else ``clocks`` when the clock readings account for it (the SM — or
memory — clock differs by more than 1 % in the direction that explains the time difference, and the time difference
is at most the clock difference + 3 %: time scales as clock^-α with 0 ≤ α ≤ 1); else ``method`` when a stated
difference of method is shown by a measurement of this run (burst: the same code as sustained except the idle gaps,
and sustained within 3 % of do_bench; cutile_tune: within 3 % of burst, or of the L2-flush control); else
``unexplained``. Prints a table and writes ``OUT/bench_timing.json`` and ``OUT/bench_timing.txt``. Expected: 1–2
minutes for the 14 variants on an H200 (each method runs twice); at most ``--budget-s`` (270) + ``--timeout`` (60) + the worker's start, since
no variant starts after the budget is spent.

    tileprobe audit benchmarks/probes/timing_set.py --arch sm_90 --bundle out/timing_bundle --no-store --format none
    python3 benchmarks/timing/bench_timing.py --bundle out/timing_bundle --out OUT           # GPU host
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

#: The methods compared with do_bench, and the control.
METHODS = ("sustained", "burst", "do_bench", "cutile_tune")
CONTROL = "burst_l2_flush"
#: A difference within this (% of do_bench's median) is "within 3%"; the slack of the "clocks" rule (:func:`_by_clocks`).
TOLERANCE_PCT = 3.0
#: Clocks that differ by more than this (%) can account for a difference (one H200 step of 15 MHz is 0.8 %).
CLOCK_DIFF_PCT = 1.0
#: cuda.tile.tune's timer constants (cuda-tile 1.7.0, tune/_tune.py; tests/test_bench_timing.py compares them with
#: the installed package).
TUNE_WARMUP, TUNE_BATCH, TUNE_MIN_SAMPLES, TUNE_MAX_SAMPLES, TUNE_MAX_MEASURE_US = 3, 5, 5, 1000, 5_000_000
DEFAULT_BUDGET_S = 270.0
TASK = f"{os.path.abspath(__file__)}:bench_variant"


# --- CPU side: cuda.tile.tune's stopping rule, verdicts, table, the loop over variants ---------------------------

class TuneStats:
    """cuda.tile.tune's running statistics of one candidate (``_TimingCandidate._add_sample`` and ``converged``):
    Welford mean and variance of the samples (µs), 95 % margin = 1.96 × sqrt(variance / n)."""

    def __init__(self):
        self.n, self.mean_us, self.m2, self.error_margin_us = 0, 0.0, 0.0, 0.0

    def add(self, us: float) -> None:
        self.n += 1
        old = self.mean_us
        self.mean_us += (us - old) / self.n
        self.m2 += (us - old) * (us - self.mean_us)
        if self.n > 1:
            self.error_margin_us = math.sqrt(self.m2 / (self.n - 1) / self.n) * 1.96

    def converged(self) -> bool:
        return self.n >= TUNE_MIN_SAMPLES and (
            self.error_margin_us <= 0.01 * self.mean_us or self.error_margin_us <= 0.5
            or self.n >= TUNE_MAX_SAMPLES or self.mean_us * self.n > TUNE_MAX_MEASURE_US)


def tune_samples(sample, *, wall_limit_s: float = 10.0, clock=time.perf_counter) -> dict:
    """Time one candidate the way cuda.tile.tune does (module doc, method 4): ``sample()`` → µs of one sample.
    Returns ``samples_us``, ``mean_us``, ``error_margin_us``, ``converged``, ``stopped`` (converged | wall) and
    ``sample_wall_us`` (median wall time of one sample: graph build, launch, synchronize)."""
    for _ in range(TUNE_WARMUP):
        sample()
    stats, samples, walls = TuneStats(), [], []
    t0 = clock()
    while True:
        for _ in range(min(TUNE_BATCH, TUNE_MAX_SAMPLES - stats.n)):
            w0 = clock()
            us = float(sample())
            walls.append((clock() - w0) * 1e6)
            samples.append(us)
            stats.add(us)
        if stats.converged():
            stopped = "converged"
            break
        if clock() - t0 > wall_limit_s:
            stopped = "wall"
            break
    return {"samples_us": samples, "mean_us": stats.mean_us, "error_margin_us": stats.error_margin_us,
            "converged": stopped == "converged", "stopped": stopped, "sample_wall_us": statistics.median(walls)}


def _pct(a: float, b: float) -> float:
    return 100.0 * (a / b - 1.0)


def _median(m: dict | None) -> float | None:
    return (m or {}).get("median_us") or None


def _clock(m: dict, key: str) -> float | None:
    c = ((m or {}).get("clocks") or {}).get(key)
    return c.get("median") if c else None


def _by_clocks(m: dict, ref: dict) -> str | None:
    """The reason when the clock readings account for ``m``'s difference from ``ref``, else None.

    A kernel's time scales as clock^-α with 0 ≤ α ≤ 1 (α = 1: bound by the SM clock, as a compute-bound matmul
    nearly is; α = 0: bound by memory). So a method that ran at a clock x % higher can be up to about x % faster and
    no more: the clocks account for a time difference when they differ by more than :data:`CLOCK_DIFF_PCT` in the
    direction that explains it and the time difference is at most the clock difference plus :data:`TOLERANCE_PCT`.
    """
    t, t_ref = _median(m), _median(ref)
    d_time = _pct(t, t_ref)
    for key, name in (("sm_mhz", "SM"), ("mem_mhz", "memory")):
        f, f_ref = _clock(m, key), _clock(ref, key)
        if not f or not f_ref:
            continue
        d_clock = _pct(f, f_ref)
        if abs(d_clock) <= CLOCK_DIFF_PCT or d_time * d_clock >= 0 or abs(d_time) > abs(d_clock) + TOLERANCE_PCT:
            continue
        return (f"{name} clock {f:,.0f} vs {f_ref:,.0f} MHz (medians over the samples, {d_clock:+.1f}%): a time "
                f"difference of {d_time:+.1f}% is within what a clock difference can explain (time ∝ clock^-α, "
                "0 ≤ α ≤ 1)")
    return None


def judge(methods: dict) -> dict:
    """Per method (sustained, burst, cutile_tune) against do_bench: ``{"vs_do_bench_pct", "verdict", "why"}``,
    verdict ``within 3%`` | ``clocks`` | ``method`` | ``unexplained`` | ``n/a`` (module doc)."""
    ref = methods.get("do_bench")
    out: dict = {}
    for name in ("sustained", "burst", "cutile_tune"):
        m = methods.get(name)
        if not _median(m) or not _median(ref):
            out[name] = {"vs_do_bench_pct": None, "verdict": "n/a", "why": "not measured"}
            continue
        d = _pct(_median(m), _median(ref))
        v = {"vs_do_bench_pct": d}
        clocks = _by_clocks(m, ref)
        if abs(d) <= TOLERANCE_PCT:
            v.update(verdict="within 3%", why="")
        elif clocks:
            v.update(verdict="clocks", why=clocks)
        else:
            why = _by_method(name, methods, out)
            v.update(verdict="method" if why else "unexplained", why=why or "no clock or method difference measured "
                     "in this run accounts for it")
        out[name] = v
    return out


def _by_method(name: str, methods: dict, judged: dict) -> str | None:
    """The stated difference of method a measurement of this run shows, for ``burst`` and ``cutile_tune``."""
    s, b, t, c = (_median(methods.get(k)) for k in ("sustained", "burst", "cutile_tune", CONTROL))
    d_ref = _median(methods.get("do_bench"))
    if name == "burst" and s and abs(_pct(s, d_ref)) <= TOLERANCE_PCT:
        return (f"samples taken alone, with idle gaps: the same code as sustained, which is within "
                f"{_pct(s, d_ref):+.1f}% of do_bench here; burst vs sustained {_pct(b, s):+.1f}%, SM clock "
                f"{_clock(methods['burst'], 'sm_mhz') or 0:,.0f} vs {_clock(methods['sustained'], 'sm_mhz') or 0:,.0f} "
                "MHz")
    if name == "cutile_tune" and b and abs(_pct(t, b)) <= TOLERANCE_PCT and judged["burst"]["verdict"] in ("clocks",
                                                                                                      "method"):
        return f"samples taken alone, as tileprobe's burst ({_pct(t, b):+.1f}% from it): {judged['burst']['why']}"
    if name == "cutile_tune" and c and abs(_pct(t, c)) <= TOLERANCE_PCT:
        return (f"cuTile's L2-sized flush: burst with it is {_pct(c, d_ref):+.1f}% from do_bench and "
                f"{_pct(t, c):+.1f}% from cutile_tune; burst with tileprobe's flush {_pct(b, d_ref):+.1f}%"
                if b else f"cuTile's L2-sized flush: burst with it is within {_pct(t, c):+.1f}%")
    return None


def label(rec: dict) -> str:
    """``kernel K=V … occupancy=N`` of a variant record (dict)."""
    return " ".join([rec["kernel"].removeprefix("timing_"),
                     *(f"{k}={v}" for k, v in [*rec.get("case", {}).items(), *rec.get("hints", {}).items()])])


def _f(x, spec=",.1f") -> str:
    return "-" if x is None else format(x, spec)


_SHORT = {"within 3%": "ok", "clocks": "clk", "method": "meth", "unexplained": "??", "n/a": "n/a"}


def table(rows: list[dict]) -> str:
    """The text table (medians µs, ratios to do_bench, SM clock medians, verdicts), then each row's reasons."""
    head = (f"{'variant':46} {'sust µs':>8} {'burst µs':>8} {'do_bench':>8} {'cutile':>8} {'S/D':>6} {'B/D':>6} "
            f"{'T/D':>6} {'SM MHz S/B/D/T':>20} {'mem MHz':>9} verdict S/B/T")
    lines = [head, "-" * len(head)]
    notes = []
    for r in rows:
        m = r.get("methods") or {}
        if r.get("status") != "ok":
            first = (r.get("error") or "").strip().splitlines()
            lines.append(f"{r['label'][:46]:46} {r.get('status')}: {first[0][:100] if first else ''}")
            continue
        j = r["judged"]
        ratio = [_f(None if j[k]["vs_do_bench_pct"] is None else 1 + j[k]["vs_do_bench_pct"] / 100, ".3f")
                 for k in ("sustained", "burst", "cutile_tune")]
        sm = "/".join(_f(_clock(m.get(k), "sm_mhz"), ".0f") for k in METHODS)
        mem = sorted({_f(_clock(m.get(k), "mem_mhz"), ".0f") for k in METHODS})
        lines.append(f"{r['label'][:46]:46} " + " ".join(f"{_f(_median(m.get(k))):>8}" for k in METHODS)
                     + " " + " ".join(f"{x:>6}" for x in ratio) + f" {sm:>20} {'/'.join(mem):>9} "
                     + "/".join(_SHORT[j[k]["verdict"]] for k in ("sustained", "burst", "cutile_tune")))
        for k in ("sustained", "burst", "cutile_tune"):
            if j[k]["why"]:
                notes.append(f"  {r['label']}: {k} {j[k]['vs_do_bench_pct']:+.1f}% — {j[k]['verdict']}: {j[k]['why']}"
                             if j[k]["vs_do_bench_pct"] is not None else f"  {r['label']}: {k}: {j[k]['why']}")
    return "\n".join(lines + (["", "why (against do_bench):"] + notes if notes else []))


def summary(rows: list[dict]) -> dict:
    """Verdict counts per method, rows that ran, rows that failed."""
    ok = [r for r in rows if r.get("status") == "ok"]
    out = {"variants": len(rows), "ok": len(ok), "failed": len(rows) - len(ok)}
    for k in ("sustained", "burst", "cutile_tune"):
        counts: dict = {}
        for r in ok:
            v = r["judged"][k]["verdict"]
            counts[v] = counts.get(v, 0) + 1
        out[k] = counts
    out["unexplained"] = sum(r["judged"][k]["verdict"] == "unexplained" for r in ok
                             for k in ("sustained", "burst", "cutile_tune"))
    return out


def run_all(tasks: list[dict], submit, *, budget_s: float = DEFAULT_BUDGET_S, clock=time.monotonic,
            progress=print) -> list[dict]:
    """Submit every task (``submit(task) -> TaskOutcome``); a hang, crash or exception is that row's status; once
    ``budget_s`` has passed, the remaining variants are ``skipped``. Returns one row per task."""
    t0, rows = clock(), []
    for i, task in enumerate(tasks):
        row = {"label": label(task["record"]), "record": {k: task["record"].get(k) for k in
                                                          ("kernel", "case", "hints", "cubin_sha256")}}
        if clock() - t0 > budget_s:
            row.update(status="skipped", error=f"time budget of {budget_s:g} s spent")
        else:
            out = submit(task)
            if out.status == "done":
                row.update(out.value)
            else:
                row.update(status=out.status, error=out.error)
            row["wall_s"] = round(out.wall_s, 3)
        if row.get("status") == "ok":
            row["judged"] = judge(row["methods"])
        progress(f"[{i + 1}/{len(tasks)}] {row['label']}: {row.get('status')}"
                 + (f" ({row['wall_s']:.1f} s)" if "wall_s" in row else ""))
        rows.append(row)
    return rows


def tasks_from_bundle(bundle: str, arch: str | None, reps: int, tune_wall_s: float, probe_paths=()) -> list[dict]:
    """One task per compiled variant of the bundle (of ``arch`` when given), with its cubin and probe file."""
    import hashlib
    from tileprobe.errors import TileprobeError
    from tileprobe.run.session import _TASK_FIELDS, load_bundle, resolve_probe_path
    records, _, get = load_bundle(bundle)
    search = [os.path.join(ROOT, "benchmarks", "probes"), os.path.join(ROOT, "examples"), os.getcwd()]
    tasks = []
    for r in records:
        if not r.ok or (arch and r.arch != arch):
            continue
        cubin = get(r.cubin_sha256)
        if cubin is None or hashlib.sha256(cubin).hexdigest() != r.cubin_sha256:
            raise TileprobeError(f"{bundle}: cubin {r.cubin_sha256} missing or changed; make the bundle again")
        path = resolve_probe_path(r.probe, probe_paths, search)
        if path is None:
            raise TileprobeError(f"probe file {r.probe} not found here (looked in {', '.join(search)})")
        tasks.append({"record": {k: getattr(r, k) for k in _TASK_FIELDS}, "cubin": cubin, "probe_path": path,
                      "reps": reps, "tune_wall_s": tune_wall_s})
    return tasks


# --- GPU side: one variant, in the run worker (init_cuda done) ---------------------------------------------------

def bench_variant(record: dict, cubin: bytes, probe_path: str, reps: int = 100, tune_wall_s: float = 10.0,
                  seed: int = 0) -> dict:
    """Time one variant by the four methods and the control (module doc). A method that fails is kept as
    ``{"error"}``; a failure before any method (probe, inputs, launch) makes the row's status (``worker`` rules)."""
    from tileprobe.probe.define import context_kwargs
    from tileprobe.run import worker
    from tileprobe.run.arrays import TorchArrays
    from tileprobe.run.batch import _prepare
    from tileprobe.run.check import check_outputs
    from tileprobe.run.taskdata import LaunchTarget
    state = worker._STATE
    out = {"status": None, "error": "", "cuda_error": None, "fatal": False, "methods": {}, "check": None}
    launched = False
    try:
        probe = worker._probe(probe_path, record["kernel"])
        hints = {**(record.get("effective_hints") or {}), **worker.grid_hints(record)}
        args = probe.launch_args(record["case"], TorchArrays(state.device, seed), arch=record.get("arch"),
                                 hints=hints)
        kernel, grid, packed = _prepare(LaunchTarget.from_wire(record), cubin, probe_path, args)
        out["grid"] = list(grid)
        stream, timer, reader = state.stream, state.timer, worker.clock_reader()
        expected = None
        if probe.reference is not None:
            expected = worker._call_probe(probe, "reference", probe.reference, record["case"], args,
                                          **context_kwargs(probe.reference, arch=record.get("arch"), hints=hints))
        state.synchronize()
        launched = True
        kernel.launch(stream, grid, packed)
        state.synchronize()
        if expected is not None:
            res = check_outputs(args, expected, probe.tolerance)
            out["check"] = {"status": res.status, "rel_err": res.rel_err}
        expected = None

        def launch():
            kernel.launch(stream, grid, packed)
        l2 = state.gpu["l2_bytes"]
        fns = {"sustained": lambda: _tileprobe(launch, timer, reader, "sustained", reps),
               "do_bench": lambda: _do_bench(launch, reader),
               "burst": lambda: _tileprobe(launch, timer, reader, "burst", reps),
               "cutile_tune": lambda: _cutile_tune(kernel, grid, packed, l2, reader, tune_wall_s),
               CONTROL: lambda: _burst_l2_flush(launch, timer, reader, l2, reps)}
        out["methods"] = abba(fns)
        out["status"] = "ok"
    except Exception as exc:   # the kernel's, the probe's or the driver's failure: this row's status
        out.update(dataclasses.asdict(worker.failure_of(exc, launched)))
    return out


def abba(fns: dict) -> dict:
    """Run each method twice, in the order given and then in reverse (A B C C B A), and merge its two runs
    (:func:`merge_runs`): a drift of the GPU's state over the variant (heat, power-limited clocks) then hits every
    method alike instead of whichever ran last."""
    order = list(fns)
    runs: dict = {k: [] for k in order}
    for k in order + order[::-1]:
        runs[k].append(_safe(fns[k]))
    return {k: merge_runs(v) for k, v in runs.items()}


def merge_runs(runs: list[dict]) -> dict:
    """One method's result from its runs: the mean of their medians (µs), the widest quartiles, the mean of their
    median clocks, the runs themselves and how far the second moved from the first (``drift_pct``). Runs that
    failed are left out; when all failed, the first one's error."""
    ok = [r for r in runs if r.get("median_us")]
    if not ok:
        return runs[0]
    out = {"median_us": statistics.fmean(r["median_us"] for r in ok),
           "mean_us": statistics.fmean(r.get("mean_us") or r["median_us"] for r in ok),
           "p25_us": min(r.get("p25_us") or r["median_us"] for r in ok),
           "p75_us": max(r.get("p75_us") or r["median_us"] for r in ok),
           "n": sum(r.get("n") or 0 for r in ok), "runs": runs,
           "drift_pct": _pct(ok[-1]["median_us"], ok[0]["median_us"]) if len(ok) > 1 else None,
           "wall_s": sum(r.get("wall_s") or 0 for r in runs)}
    clocks: dict = {}
    for key in ("sm_mhz", "mem_mhz"):
        meds = [_clock(r, key) for r in ok if _clock(r, key)]
        clocks[key] = ({"min": min(r["clocks"][key]["min"] for r in ok if _clock(r, key)), "median": statistics.fmean(meds),
                        "max": max(r["clocks"][key]["max"] for r in ok if _clock(r, key))} if meds else None)
    out["clocks"] = clocks
    return out


def _safe(fn) -> dict:
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {e}"[:300]}
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def _stats(times_us, readings) -> dict:
    from tileprobe.run.clocks import clock_summary
    from tileprobe.run.timing import summarize
    s = summarize(times_us).to_dict()
    return {"median_us": s["median_us"], "mean_us": s["mean_us"], "p25_us": s["p25_us"], "p75_us": s["p75_us"],
            "n": s["reps"], "clocks": clock_summary(readings)}


def _polled(fn, reader):
    """``fn()`` with the clocks polled around it: (its value, the readings)."""
    from tileprobe.run.clocks import ClockPoller
    poller = ClockPoller(reader)
    poller.start()
    try:
        value = fn()
    finally:
        readings = poller.stop()
    return value, readings


def _tileprobe(launch, timer, reader, mode: str, reps: int) -> dict:
    from tileprobe.run.timing import time_variant
    r = time_variant(launch, timer, reader, mode=mode, reps=reps)
    return {"median_us": r["median_us"], "mean_us": r["mean_us"], "p25_us": r["p25_us"], "p75_us": r["p75_us"],
            "n": r["reps"], "clocks": r["clocks_during"], "warnings": r["warnings"]}


def _do_bench(launch, reader) -> dict:
    import triton.testing

    def run():
        try:
            return [float(x) for x in triton.testing.do_bench(launch, warmup=25, rep=100, return_mode="all")]
        except Exception:   # an older triton without return_mode="all"
            return [float(triton.testing.do_bench(launch, warmup=25, rep=100, return_mode="median"))]
    times_ms, readings = _polled(run, reader)
    out = _stats([t * 1000.0 for t in times_ms], readings)
    if len(times_ms) == 1:
        out["n"] = None       # only the median came back
    return out


def _burst_l2_flush(launch, timer, reader, l2_bytes: int, reps: int) -> dict:
    import torch
    from tileprobe.run.timing import burst_batch
    buf = torch.empty(max(int(l2_bytes), 1024), dtype=torch.uint8, device="cuda")
    times, readings = _polled(lambda: burst_batch(launch, event_factory=timer.event, synchronize=timer.synchronize,
                                                  flush=lambda: buf.fill_(0x5A), n=reps)[0], reader)
    return {**_stats(times, readings), "flush_bytes": int(buf.numel())}


class GraphSample:
    """One sample as ``cuda.tile._cext._benchmark`` takes it (module doc, method 4), the kernel launched by
    tileprobe's launcher into a stream being captured: returns the kernel's time (µs) between the two events.

    Should cuda-core's launch refuse to be captured, the samples fall back to ``cuLaunchKernel`` on the same
    function and packed arguments (``launcher`` says which was used, ``fallback_reason`` why)."""

    def __init__(self, kernel, grid, packed, l2_bytes: int, *, cu=None, core_stream=None):
        from tileprobe.run.launch import check_cu
        if cu is None:
            from cuda.bindings import driver as cu
        if core_stream is None:
            from tileprobe.run.launch import core_stream
        self.cu, self.check, self.kernel, self.grid, self.packed = cu, check_cu, kernel, grid, packed
        self.l2 = max(int(l2_bytes), 1024)              # cuTile: max(1024, L2 size)
        self.stream = check_cu(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value), "cuStreamCreate")
        self.core = core_stream(int(self.stream))
        self._instantiate = getattr(cu, "cuGraphInstantiateWithFlags", None) or cu.cuGraphInstantiate
        self.launcher, self.fallback_reason = "LoadedKernel", ""

    def __call__(self) -> float:
        if self.launcher == "LoadedKernel":
            try:
                return self._sample()
            except Exception as e:
                self.launcher, self.fallback_reason = "cuLaunchKernel", f"{type(e).__name__}: {e}"[:200]
        return self._sample()

    def _launch(self) -> None:
        if self.launcher == "LoadedKernel":
            self.kernel.launch(self.core, self.grid, self.packed)
            return
        import ctypes
        ptrs = (ctypes.c_void_p * len(self.packed))(*[ctypes.addressof(p) for p in self.packed])
        gx, gy, gz = self.grid
        self.check(self.cu.cuLaunchKernel(self.kernel.function(), gx, gy, gz, 1, 1, 1, 0, self.stream,
                                          ctypes.addressof(ptrs), 0), "cuLaunchKernel")

    def _sample(self) -> float:
        cu, ok, s = self.cu, self.check, self.stream
        ev = [ok(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT.value), "cuEventCreate") for _ in range(2)]
        external = cu.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL.value
        graph = None
        try:
            ok(cu.cuStreamBeginCapture(s, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
               "cuStreamBeginCapture")
            try:
                buf = ok(cu.cuMemAllocAsync(self.l2, s), "cuMemAllocAsync")
                ok(cu.cuMemsetD8Async(buf, 0x5A, self.l2, s), "cuMemsetD8Async")
                ok(cu.cuEventRecordWithFlags(ev[0], s, external), "cuEventRecordWithFlags")
                self._launch()
                ok(cu.cuEventRecordWithFlags(ev[1], s, external), "cuEventRecordWithFlags")
                ok(cu.cuMemFreeAsync(buf, s), "cuMemFreeAsync")
            finally:
                graph = ok(cu.cuStreamEndCapture(s), "cuStreamEndCapture")
            exe = ok(self._instantiate(graph, 0), "cuGraphInstantiate")
            try:
                ok(cu.cuGraphLaunch(exe, s), "cuGraphLaunch")
                ok(cu.cuStreamSynchronize(s), "cuStreamSynchronize")
                ms = ok(cu.cuEventElapsedTime(ev[0], ev[1]), "cuEventElapsedTime")
            finally:
                ok(cu.cuGraphExecDestroy(exe), "cuGraphExecDestroy")
        finally:
            if graph is not None:
                ok(cu.cuGraphDestroy(graph), "cuGraphDestroy")
            for e in ev:
                ok(cu.cuEventDestroy(e), "cuEventDestroy")
        return float(ms) * 1000.0

    def close(self) -> None:
        self.check(self.cu.cuStreamDestroy(self.stream), "cuStreamDestroy")


def _cutile_tune(kernel, grid, packed, l2_bytes: int, reader, wall_limit_s: float) -> dict:
    sample = GraphSample(kernel, grid, packed, l2_bytes)
    try:
        res, readings = _polled(lambda: tune_samples(sample, wall_limit_s=wall_limit_s), reader)
    finally:
        sample.close()
    out = _stats(res["samples_us"], readings)
    out.update(tune_mean_us=res["mean_us"], error_margin_us=res["error_margin_us"], stopped=res["stopped"],
               sample_wall_us=res["sample_wall_us"], flush_bytes=sample.l2, launcher=sample.launcher,
               fallback_reason=sample.fallback_reason)
    return out


# --- the command ----------------------------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, help="bundle of benchmarks/probes/timing_set.py (module doc)")
    p.add_argument("--out", required=True, help="folder for bench_timing.json and bench_timing.txt")
    p.add_argument("--arch", default=None, help="only this arch's variants (default: all in the bundle)")
    p.add_argument("--reps", type=int, default=100, help="samples of sustained, burst and the control (default 100)")
    p.add_argument("--tune-wall-s", type=float, default=10.0, help="cap on cutile_tune's samples per variant (s)")
    p.add_argument("--timeout", type=float, default=60.0, help="per-variant limit before it is a hang (s)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"start no variant after this many seconds (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--probe", action="append", default=[], help="probe file(s) for the bundle's variants")
    a = p.parse_args(argv)
    if a.reps < 5:
        p.error(f"--reps must be ≥ 5, got {a.reps}")
    return a


def header(gpu: dict, command: str) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"# timing methods on the same cubins — {now}\n"
            f"GPU: {gpu.get('name')} ({gpu.get('sm')}, {gpu.get('num_sms')} SMs, L2 "
            f"{(gpu.get('l2_bytes') or 0) / 2**20:.0f} MiB), driver {gpu.get('driver')}, torch {gpu.get('torch')}, "
            f"clocks at start: SM {gpu.get('clock_sm_mhz')} MHz (max {gpu.get('clock_max_sm_mhz')}), memory "
            f"{gpu.get('clock_mem_mhz')} MHz, {gpu.get('power_w')} W of {gpu.get('power_limit_w')} W\n"
            f"command: {command}\n")


def write(out_dir: str, head: str, rows: list[dict], extra: dict) -> str:
    """Write bench_timing.json (rows with every method's figures and clocks) and bench_timing.txt; return the
    text."""
    os.makedirs(out_dir, exist_ok=True)
    text = head + "\n" + table(rows) + "\n\nsummary: " + json.dumps(summary(rows)) + "\n"
    with open(os.path.join(out_dir, "bench_timing.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out_dir, "bench_timing.json"), "w", encoding="utf-8") as f:
        json.dump({**extra, "rows": rows, "summary": summary(rows)}, f, indent=1, default=str)
    return text


def main(argv=None) -> int:
    args = parse_args(argv)
    from tileprobe.run.watchdog import Watchdog
    t0 = time.monotonic()
    tasks = tasks_from_bundle(args.bundle, args.arch, args.reps, args.tune_wall_s, args.probe)
    command = " ".join([os.path.relpath(__file__, os.getcwd()), *(argv if argv is not None else sys.argv[1:])])
    with Watchdog(timeout_s=args.timeout) as wd:
        gpu = wd.start()
        print(header(gpu, command), flush=True)
        rows = run_all(tasks, lambda task: wd.submit(TASK, task, timeout_s=args.timeout),
                       budget_s=args.budget_s, progress=lambda s: print(s, flush=True))
    text = write(args.out, header(gpu, command), rows,
                 {"gpu": gpu, "command": command, "reps": args.reps, "seconds": round(time.monotonic() - t0, 1)})
    print(text)
    print(f"{time.monotonic() - t0:.1f} s")
    return 0 if any(r.get("status") == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

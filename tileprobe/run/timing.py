"""How long does one launch take on the GPU? CUDA events, warm-up, many repetitions, L2 flushed in between.

The method (the one ``triton.testing.do_bench`` uses, so the two can be compared):

1. **Estimate**: time a few launches to learn roughly how long one takes.
2. **Warm-up**: launch until ``warmup_ms`` of GPU time (at least ``warmup`` launches): clocks ramp up, lazy
   module loading and first-touch costs are paid outside the measurement.
3. **Repetitions**: ``reps`` times: flush the L2 cache (write a buffer at least twice the L2 size, so the
   inputs are not served from L2 as they would not be in a real model), record a start event, launch, record an
   end event. Because the flush is a long kernel in the same stream, the launch is already queued when the start
   event fires: the interval is the kernel's own GPU time, not the CPU's launch overhead.
4. **Statistics**: median, quartiles (p25, p75), min, max, mean, in µs; the spread is the inter-quartile range
   as a percentage of the median.

Everything that touches the GPU is injected (``launch``, ``flush``, ``event_factory``, ``synchronize``), so the
tests drive this module with a fake clock. Events follow torch's API: ``record()`` and
``start.elapsed_time(end)`` in **milliseconds**.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from tileprobe.run.clocks import POLL_INTERVAL_S, ClockPoller, clock_summary, clock_warning, clocks_moved

#: Below this median (µs) a launch is too short to time meaningfully: event resolution (~0.5 µs) and launch
#: jitter are a large part of it.
MIN_LAUNCH_US = 5.0
#: Above this inter-quartile range (% of the median) the timings are called noisy.
MAX_SPREAD_PCT = 5.0
#: Default repetitions and warm-up (launches, and at least this much GPU time).
DEFAULT_REPS = 100
DEFAULT_WARMUP = 10
DEFAULT_WARMUP_MS = 25.0
#: Smallest L2 flush buffer (bytes): triton.testing.do_bench writes 256 MB; we write max(2 × L2, this).
MIN_FLUSH_BYTES = 256 * 1024 * 1024
#: A tune's steady-state final (:mod:`tileprobe.tune.race`, module doc 7): warm-up (ms of GPU time) and samples
#: (ms, at most ``FINAL_MAX_N``) of each final batch. Under the H200's power cap a 4096³ fp16 matmul's samples read
#: 204 µs in the first 25 ms of load, 209 µs in the next 25 ms and 224–229 µs from 50 ms on, at every length up to
#: 800 ms (``benchmarks/tune/power_window.py``, 2026-12-03, docs/LOG.md §36): past 75 ms of warm-up a batch sees the
#: power-capped steady state that do_bench's 100 ms and a program's sustained load see.
FINAL_WARMUP_MS, FINAL_BATCH_MS, FINAL_MAX_N = 75.0, 50.0, 1000
#: Warm-up launches a final batch makes at most (75 ms of a 5-µs kernel is 15,000).
FINAL_MAX_WARMUP = 20000


@dataclass(frozen=True)
class TimingStats:
    """Per-launch GPU times of one variant, in µs. ``reps``: how many launches the statistics cover."""
    median_us: float
    p25_us: float
    p75_us: float
    min_us: float
    max_us: float
    mean_us: float
    reps: int

    @property
    def spread_pct(self) -> float:
        """Inter-quartile range as a percentage of the median (0 when the median is 0)."""
        return 100.0 * (self.p75_us - self.p25_us) / self.median_us if self.median_us > 0 else 0.0

    def to_dict(self) -> dict:
        """The fields (µs, counts) and ``spread_pct`` as a JSON-ready dict (as ``record.run`` stores them)."""
        d = asdict(self)
        d["spread_pct"] = round(self.spread_pct, 3)
        return d


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0 ≤ q ≤ 1) of sorted values by linear interpolation between closest ranks
    (numpy's default ``method="linear"``; ``statistics.quantiles(..., method="inclusive")``).

    Raises:
        ValueError: no values, or q outside [0, 1].
    """
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q} is outside [0, 1]")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_us: Sequence[float]) -> TimingStats:
    """Statistics of per-launch times (µs). Raises ValueError when there are none."""
    xs = sorted(float(t) for t in times_us)
    if not xs:
        raise ValueError("no timings to summarize")
    return TimingStats(median_us=statistics.median(xs), p25_us=quantile(xs, 0.25), p75_us=quantile(xs, 0.75),
                       min_us=xs[0], max_us=xs[-1], mean_us=statistics.fmean(xs), reps=len(xs))


#: Samples kept in a run record (``samples_us``): enough for the t-test of :mod:`tileprobe.analyses.noise`; a run
#: with more keeps an evenly spaced subset in launch order (its ``stdev_us`` still covers them all).
MAX_KEPT_SAMPLES = 500


def sample_fields(times_us: Sequence[float]) -> dict:
    """``{"stdev_us", "samples_us"}`` of per-launch times (µs): the sample standard deviation (0 for one sample)
    and the samples in launch order, rounded to 1 ns, at most :data:`MAX_KEPT_SAMPLES` (compare tests
    the difference between two releases on them)."""
    xs = [float(t) for t in times_us]
    step = max(1, math.ceil(len(xs) / MAX_KEPT_SAMPLES))
    return {"stdev_us": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0,
            "samples_us": [round(x, 3) for x in xs[::step]]}


def timing_warnings(stats: TimingStats, *, min_launch_us: float = MIN_LAUNCH_US,
                    max_spread_pct: float = MAX_SPREAD_PCT) -> list[str]:
    """Plain-text warnings about a measurement: too short to time, or too noisy."""
    out = []
    if stats.median_us < min_launch_us:
        out.append(f"launch takes {stats.median_us:.2f} µs (< {min_launch_us:g} µs): too short to time meaningfully "
                   "(event resolution ~0.5 µs, launch jitter); give the probe a larger problem size")
    if stats.spread_pct > max_spread_pct:
        out.append(f"high spread: IQR is {stats.spread_pct:.1f}% of the median (> {max_spread_pct:g}%): other work "
                   "on the GPU, clock changes or thermal throttling; rerun, or pin clocks (nvidia-smi -lgc)")
    return out


def measure(launch: Callable[[], None], *, event_factory: Callable[[], object], synchronize: Callable[[], None],
            flush: Callable[[], None] | None = None, reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP,
            warmup_ms: float = DEFAULT_WARMUP_MS, max_warmup: int = 1000,
            between: Callable[[], None] | None = None) -> tuple[TimingStats, list[float]]:
    """Time ``launch`` (see the module doc for the method). Returns the statistics and the raw times (µs).

    Args:
        launch: enqueues one launch of the kernel (asynchronous).
        event_factory: makes a timing event with ``record()`` and ``elapsed_time(end) -> ms``
            (e.g. ``lambda: torch.cuda.Event(enable_timing=True)``).
        synchronize: waits for the GPU (e.g. ``torch.cuda.synchronize``).
        flush: enqueues an L2 flush (e.g. ``buffer.zero_``); ``None`` skips flushing.
        reps: timed repetitions (≥ 1).
        warmup: minimum untimed launches; more are added until ``warmup_ms`` of estimated GPU time.
        max_warmup: cap on warm-up launches (a 1 µs kernel would otherwise ask for 25,000).
        between: called after the warm-up, before the timed repetitions (e.g. start reading the clocks).

    Raises:
        ValueError: ``reps`` < 1.
    """
    if reps < 1:
        raise ValueError(f"reps={reps}: at least one timed repetition is needed")
    flush = flush or (lambda: None)
    _estimate_and_warm(launch, flush, event_factory, synchronize, warmup, warmup_ms, max_warmup, between)
    times = _timed(launch, flush, event_factory, synchronize, reps)
    return summarize(times), times


def _estimate_and_warm(launch, flush, event_factory, synchronize, min_warmup: int, warmup_ms: float,
                       max_warmup: int, between) -> tuple[float, int]:
    """Time 3 launches (the estimate), launch untimed until ``warmup_ms`` of estimated GPU time (at least
    ``min_warmup``, at most ``max_warmup`` launches), then call ``between()``. Returns (estimate µs, warm-ups).

    The warm-up launches run back to back with no L2 flush between them, as ``triton.testing.do_bench``'s do: the
    warm-up is there to bring the clocks and the power draw to the kernel's own load, which a flush (a memset of
    :data:`MIN_FLUSH_BYTES` or more) between launches only dilutes. With a flush before each warm-up launch, a
    17-µs kernel's 25 ms of warm-up was 1,470 launches each behind a 256-MB memset: most of a race batch's GPU time
    (docs/LOG.md, the race's cost, 2026-12-05). The timed samples still come each after a flush."""
    estimate_us = statistics.median(_timed(launch, flush, event_factory, synchronize, 3))
    n_warm = min(max(min_warmup, math.ceil(warmup_ms / max(estimate_us / 1000.0, 1e-6))), max_warmup)
    for _ in range(n_warm):
        launch()
    synchronize()
    if between:
        between()
    return estimate_us, n_warm


def _timed(launch, flush, event_factory, synchronize, n: int) -> list[float]:
    pairs = [(event_factory(), event_factory()) for _ in range(n)]
    for start, end in pairs:
        flush()
        start.record()
        launch()
        end.record()
    synchronize()
    return [start.elapsed_time(end) * 1000.0 for start, end in pairs]


def flush_bytes(l2_bytes: int) -> int:
    """Size of the L2 flush buffer (bytes): at least twice the L2 size and at least :data:`MIN_FLUSH_BYTES`."""
    return max(2 * int(l2_bytes or 0), MIN_FLUSH_BYTES)


class TorchTimer:
    """The torch-backed pieces :func:`measure` takes, on the current CUDA stream: events, synchronize, L2 flush.

    Args:
        l2_bytes: the GPU's L2 size in bytes (the flush buffer is :func:`flush_bytes` of it).
        device: torch device index or string.
    """

    def __init__(self, l2_bytes: int, device="cuda"):
        import torch
        self._torch = torch
        self.flush_buffer = torch.empty(flush_bytes(l2_bytes) // 4, dtype=torch.int32, device=device)
        self._graphs: list = []      # the last captured graphs, kept alive while their replays may run

    def event(self):
        """A new timing-enabled ``torch.cuda.Event``."""
        return self._torch.cuda.Event(enable_timing=True)

    def synchronize(self):
        """Wait for all work on the device (``torch.cuda.synchronize``)."""
        self._torch.cuda.synchronize()

    def flush(self):
        """Overwrite the L2-sized flush buffer, so the next launch starts with a cold L2."""
        self.flush_buffer.zero_()

    def measure(self, launch, **kw) -> tuple[TimingStats, list[float]]:
        """:func:`measure` with this timer's events, flush and synchronize."""
        return measure(launch, event_factory=self.event, synchronize=self.synchronize, flush=self.flush, **kw)

    def capture(self, launch, launches: int) -> Callable[[], None]:
        """``launches`` calls of ``launch`` captured in one CUDA graph on the current stream
        (``torch.cuda.graph``; the launches must go to that stream, as the run worker's do); returns its replay.

        Raises:
            RuntimeError: what torch raises when a launch cannot be captured.
        """
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        self.synchronize()
        with torch.cuda.graph(graph, stream=torch.cuda.current_stream(), capture_error_mode="thread_local"):
            for _ in range(launches):
                launch()
        self._graphs = self._graphs[-7:] + [graph]
        return graph.replay


# --- timing modes of `tileprobe tune` (docs/TUNE.md "Timing modes") -------------------------------------------

#: ``sustained``: back to back as ``triton.testing.do_bench`` times (warm-up ≥ 25 ms, then an L2 flush and an event
#: pair per launch, one synchronize at the end). ``burst``: as ``cuda.tile.tune`` times (3 warm-up launches, then
#: each sample alone: L2 flush, event pair, launch, synchronize; the GPU idles between samples and batches).
#: ``eager``: host-inclusive, as a program that launches and waits (:func:`eager_batch`). ``graph``: CUDA-graph
#: replay, as serving stacks run kernels (:func:`graph_batch`).
TIMING_MODES = ("sustained", "burst", "eager", "graph")
#: Samples per sustained batch aim at this much GPU time (ms), between the bounds below.
BATCH_MS = 25.0
MIN_BATCH, MAX_BATCH = 5, 100
#: cuda.tile.tune's figures (tune/_tune.py: ``_BATCH_REPEATS``, ``_WARM_UP_REPEATS``, cuda-tile 1.7.0).
BURST_BATCH, BURST_WARMUP = 5, 3
#: ``eager``: host-inclusive samples per batch and untimed launches before them.
EAGER_BATCH, EAGER_WARMUP = 20, 3
#: ``graph``: launches captured in one CUDA graph, timed replays per batch, untimed replays before them.
GRAPH_LAUNCHES, GRAPH_BATCH, GRAPH_WARMUP = 10, 10, 2
#: ``graph`` in a tune: a replay holds launches for about this long (µs), so the launch gaps it hides are those of
#: kernels short enough for them to matter (a 5-µs launch cost beside a 200-µs replay is 2.5 %).
GRAPH_SPAN_US = 200.0


def sustained_batch(launch: Callable[[], None], *, event_factory, synchronize, flush=None,
                    warmup_ms: float = DEFAULT_WARMUP_MS, batch_ms: float = BATCH_MS, min_n: int = MIN_BATCH,
                    max_n: int = MAX_BATCH, max_warmup: int = 1000,
                    between: Callable[[], None] | None = None) -> tuple[list[float], dict]:
    """One batch in the ``sustained`` mode: estimate (3 timed launches), warm up for ``warmup_ms`` of GPU time,
    call ``between()`` (e.g. read the clocks), then ``n`` timed launches, each after an L2 flush, with
    n = ⌈batch_ms / estimate⌉ clamped to [min_n, max_n]. Returns the times (µs) and
    ``{"warmup_launches", "n", "estimate_us"}``. Arguments as in :func:`measure`."""
    flush = flush or (lambda: None)
    estimate_us, n_warm = _estimate_and_warm(launch, flush, event_factory, synchronize, 1, warmup_ms, max_warmup,
                                             between)
    n = min(max(min_n, math.ceil(batch_ms / max(estimate_us / 1000.0, 1e-6))), max_n)
    times = _timed(launch, flush, event_factory, synchronize, n)
    return times, {"warmup_launches": n_warm, "n": n, "estimate_us": estimate_us}


def _warm_up(launch, flush, synchronize, warmup: int, between) -> None:
    """``warmup`` untimed launches (each after an L2 flush), a synchronize, then ``between()``: the start of a
    ``burst`` or ``eager`` batch."""
    for _ in range(warmup):
        flush()
        launch()
    synchronize()
    if between:
        between()


def burst_batch(launch: Callable[[], None], *, event_factory, synchronize, flush=None, n: int = BURST_BATCH,
                warmup: int = BURST_WARMUP, between: Callable[[], None] | None = None) -> tuple[list[float], dict]:
    """One batch in the ``burst`` mode: ``warmup`` untimed launches, ``between()``, then ``n`` samples each taken
    alone (flush, start event, launch, end event, synchronize), as cuda.tile.tune's ``_benchmark`` does. Returns
    the times (µs) and ``{"warmup_launches", "n"}``."""
    flush = flush or (lambda: None)
    _warm_up(launch, flush, synchronize, warmup, between)
    times = []
    for _ in range(n):
        times.extend(_timed(launch, flush, event_factory, synchronize, 1))
    return times, {"warmup_launches": warmup, "n": n}


def eager_batch(launch: Callable[[], None], *, synchronize, flush=None, n: int = EAGER_BATCH,
                warmup: int = EAGER_WARMUP, between: Callable[[], None] | None = None,
                clock: Callable[[], float] = time.perf_counter, event_factory=None) -> tuple[list[float], dict]:
    """One batch in the ``eager`` mode (host-inclusive): ``warmup`` untimed launches, ``between()``, then ``n``
    samples, each the host's wall time (µs, ``clock`` in s) from the call of ``launch()`` until ``synchronize()``
    returns, after an L2 flush and a synchronize: what a program that launches eagerly and waits for the result
    sees — the launch's host cost (argument packing, the driver call), the kernel, and the synchronize's latency.
    ``event_factory`` is not used (no GPU events: the figure is the host's). Returns the times and
    ``{"warmup_launches", "n"}``."""
    flush = flush or (lambda: None)
    _warm_up(launch, flush, synchronize, warmup, between)
    times = []
    for _ in range(n):
        flush()
        synchronize()
        t0 = clock()
        launch()
        synchronize()
        times.append((clock() - t0) * 1e6)
    return times, {"warmup_launches": warmup, "n": n}


def graph_batch(launch: Callable[[], None], *, event_factory, synchronize, capture, flush=None,
                n: int = GRAPH_BATCH, launches: int = GRAPH_LAUNCHES, warmup: int = GRAPH_WARMUP,
                between: Callable[[], None] | None = None, batch_ms: float | None = None) -> tuple[list[float], dict]:
    """One batch in the ``graph`` mode (CUDA-graph replay, as serving stacks run kernels: vLLM's and SGLang's
    decode steps are replays of captured graphs): :data:`BURST_WARMUP` eager launches (module loading happens
    outside the capture), ``capture(launch, launches)`` (a replay callable of one graph holding ``launches``
    launches back to back, no flush between them), ``warmup`` untimed replays, ``between()``, then ``n`` samples,
    each an L2 flush, an event pair around one replay and the replay's time ÷ ``launches`` (µs per launch: the
    driver's per-launch host cost is gone, the launches of one replay share a warm L2 as consecutive layers' do
    not quite). Returns the times and ``{"warmup_launches", "n", "graph_launches"}``.

    With ``batch_ms`` (the tune's batches), the batch is sized by the kernel's time, as a sustained batch is: one
    more eager launch is timed (the estimate), a graph holds only as many launches as make a replay of
    :data:`GRAPH_SPAN_US` (at most ``launches``: a long kernel's launch cost is nothing beside it), one warm-up
    replay is made when a replay is longer than a millisecond, and the samples are ⌈batch_ms ÷ replay⌉ between
    :data:`MIN_BATCH` and ``n``. Without it, a 80-ms attention kernel's graph batch ran 133 launches (10.6 s)
    where its sustained batch ran 9, and the graph race cost 5.5× the sustained one (issue's H200 figures,
    2026-12-04); the info then has ``estimate_us`` too.

    Raises:
        Whatever ``capture`` raises (e.g. a launch the graph cannot hold): the candidate's error.
    """
    flush = flush or (lambda: None)
    _warm_up(launch, flush, synchronize, BURST_WARMUP, None)
    extra = {}
    if batch_ms is not None:
        estimate_us = _timed(launch, flush, event_factory, synchronize, 1)[0]
        launches = max(1, min(launches, math.ceil(GRAPH_SPAN_US / max(estimate_us, 1e-3))))
        replay_us = estimate_us * launches
        warmup = min(warmup, 1) if replay_us > 1000.0 else warmup
        n = min(max(MIN_BATCH, math.ceil(batch_ms * 1000.0 / max(replay_us, 1e-3))), n)
        extra = {"estimate_us": estimate_us}
    replay = capture(launch, launches)
    for _ in range(warmup):
        replay()
    synchronize()
    if between:
        between()
    times = [t / launches for t in _timed(replay, flush, event_factory, synchronize, n)]
    return times, {"warmup_launches": BURST_WARMUP + warmup * launches, "n": n, "graph_launches": launches, **extra}


# --- one variant of `tileprobe run` (docs/TIMING.md) ---------------------------------------------------------------

def time_variant(launch: Callable[[], None], timer, clocks=None, *, mode: str = "sustained", reps: int | None = None,
                 warmup: int | None = None, warmup_ms: float | None = None,
                 poll_interval_s: float | None = None) -> dict:
    """Time one variant as ``tileprobe run`` does, with the GPU clocks read over its samples.

    ``sustained`` (the default of ``run``): :func:`measure` through ``timer.measure`` — estimate, warm-up of
    ≥ ``warmup_ms``, ``reps`` launches back to back, each after an L2 flush (``triton.testing.do_bench``'s
    method). ``burst``: :func:`burst_batch` with ``n = reps`` — ``warmup`` (default 3) launches, then each sample
    alone with a synchronize (cuda.tile.tune's method). ``eager``: :func:`eager_batch` with ``n = reps`` (host
    wall time around launch and synchronize). ``graph``: :func:`graph_batch` with ``n = reps`` replays of a
    captured graph of :data:`GRAPH_LAUNCHES` launches (µs per launch). The clocks (``clocks``: a
    :class:`~tileprobe.run.clocks.ClockReader`, or None) are polled from the end of the warm-up to the end of the
    samples (:class:`~tileprobe.run.clocks.ClockPoller`).

    Args:
        launch: enqueues one launch. timer: a :class:`TorchTimer` (``measure``, ``event``, ``synchronize``,
            ``flush``). reps, warmup, warmup_ms: None for the mode's defaults. poll_interval_s: None for
            :data:`tileprobe.run.clocks.POLL_INTERVAL_S`.

    Returns:
        ``timing_mode``; ``median_us``, ``p25_us``, ``p75_us``, ``min_us``, ``mean_us``, ``spread_pct``, ``reps``;
        ``stdev_us`` and ``samples_us`` (:func:`sample_fields`: what compare's significance test needs);
        ``clocks_before`` / ``clocks_after`` (the first and last reading), ``clocks_during``
        (:func:`~tileprobe.run.clocks.clock_summary` of all), ``clocks_moved``; ``warnings`` (timing and clock
        warnings, plain text).

    Raises:
        ValueError: an unknown ``mode`` or ``reps`` < 1. Whatever ``launch`` (or, in ``graph``, the capture)
            raises (the poller is stopped first).
    """
    if mode not in TIMING_MODES:
        raise ValueError(f"timing mode {mode!r}: expected one of {', '.join(TIMING_MODES)}")
    poller = ClockPoller(clocks, POLL_INTERVAL_S if poll_interval_s is None else poll_interval_s) if clocks else None
    start = poller.start if poller else None
    try:
        if mode == "eager":
            times, _ = eager_batch(launch, synchronize=timer.synchronize, flush=timer.flush,
                                   n=DEFAULT_REPS if reps is None else reps,
                                   warmup=EAGER_WARMUP if warmup is None else warmup, between=start)
            stats = summarize(times)
        elif mode == "graph":
            times, _ = graph_batch(launch, event_factory=timer.event, synchronize=timer.synchronize,
                                   capture=timer.capture, flush=timer.flush, n=DEFAULT_REPS if reps is None else reps,
                                   warmup=GRAPH_WARMUP if warmup is None else warmup, between=start)
            stats = summarize(times)
        elif mode == "burst":
            times, _ = burst_batch(launch, event_factory=timer.event, synchronize=timer.synchronize,
                                   flush=timer.flush, n=DEFAULT_REPS if reps is None else reps,
                                   warmup=BURST_WARMUP if warmup is None else warmup, between=start)
            stats = summarize(times)
        else:
            kw = {k: v for k, v in (("reps", reps), ("warmup", warmup), ("warmup_ms", warmup_ms)) if v is not None}
            stats, times = timer.measure(launch, between=start, **kw)
    finally:
        readings = poller.stop() if poller else []
    d = stats.to_dict()
    out = {"timing_mode": mode, **{k: d[k] for k in ("median_us", "p25_us", "p75_us", "min_us", "mean_us",
                                                     "spread_pct", "reps")}}
    out.update(sample_fields(times))
    out.update(clocks_before=readings[0] if readings else None, clocks_after=readings[-1] if readings else None,
               clocks_during=clock_summary(readings), clocks_moved=clocks_moved(readings))
    out["warnings"] = timing_warnings(stats) + [w for w in (clock_warning(readings),) if w]
    return out

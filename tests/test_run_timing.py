"""``tileprobe run``'s timing of one variant (``run/timing.py::time_variant``) and its clock readings over the
samples (``run/clocks.py``: ClockPoller, clock_summary, clock_warning), on CPU with a fake GPU clock and fake
clock readers; the warning travels into the run record and the run table."""
from __future__ import annotations

import io
import time

import pytest
from rich.console import Console
from test_run_cpu import FAULTY, FakeGPU, FakeKernel, _add, _healthy_record

from tileprobe.run import clocks, timing, worker
from tileprobe.schema import VariantRun


class Timer:
    """What ``time_variant`` needs of a TorchTimer, on a fake GPU clock (the launch advances it)."""

    def __init__(self, gpu):
        self.gpu, self.event, self.synchronize, self.flush = gpu, gpu.event, gpu.synchronize, gpu.flush

    def measure(self, launch_fn, **kw):
        return timing.measure(launch_fn, event_factory=self.gpu.event, synchronize=self.gpu.synchronize,
                              flush=self.gpu.flush, **kw)


class ThrottlingReader:
    """SM clock 1,950 MHz until ``after`` launches have run, then 1,515 MHz with sw_power_cap (what do_bench's
    sustained load did on the H200, docs/gpu/2026-12-01/bench-tune-matmul.txt)."""
    source = "fake"

    def __init__(self, gpu, after):
        self.gpu, self.after, self.reads = gpu, after, []

    def read(self):
        self.reads.append(self.gpu.launches)
        hot = self.gpu.launches > self.after
        return {"sm_mhz": 1515.0 if hot else 1950.0, "mem_mhz": 3201.0,
                "reasons": ["sw_power_cap"] if hot else [], "source": "fake"}


def test_sustained_reads_clocks_after_the_warm_up_and_flags_a_move():
    gpu = FakeGPU([200.0])
    reader = ThrottlingReader(gpu, after=3 + 10)            # estimate 3 + warm-up 10 launches: then it throttles
    out = timing.time_variant(gpu.launch, Timer(gpu), reader, mode="sustained", reps=20, warmup=10, warmup_ms=1.0)
    assert reader.reads == [3 + 10, 3 + 10 + 20]               # after the warm-up, after the samples
    assert out["timing_mode"] == "sustained" and out["reps"] == 20 and out["median_us"] == pytest.approx(200.0)
    assert len(out["samples_us"]) == 20 and out["samples_us"][0] == pytest.approx(200.0, abs=1e-3)
    assert out["stdev_us"] == pytest.approx(0.0, abs=1e-3)
    assert out["clocks_before"]["sm_mhz"] == 1950.0 and out["clocks_after"]["sm_mhz"] == 1515.0
    assert out["clocks_during"] == {"n": 2, "sm_mhz": {"min": 1515.0, "median": 1732.5, "max": 1950.0},
                                    "mem_mhz": {"min": 3201.0, "median": 3201.0, "max": 3201.0},
                                    "reasons": ["sw_power_cap"], "source": "fake"}
    assert out["clocks_moved"] is True
    assert out["warnings"] == [
        "clocks moved during the samples: SM 1,515–1,950 MHz (median 1,732), memory 3,201 MHz over 2 readings; "
        "driver reasons: sw_power_cap: the median mixes clock states; compare variants timed at the same clocks, "
        "or pin them (nvidia-smi -lgc / -lmc) — docs/TIMING.md"]


def test_burst_at_steady_clocks_has_no_clock_warning():
    gpu = FakeGPU([200.0])
    reader = ThrottlingReader(gpu, after=10 ** 6)
    out = timing.time_variant(gpu.launch, Timer(gpu), reader, mode="burst", reps=8)
    assert reader.reads == [3, 3 + 8] and gpu.syncs == 1 + 8    # 3 warm-up launches, one synchronize per sample
    assert out["clocks_moved"] is False and out["warnings"] == [] and out["reps"] == 8
    with pytest.raises(ValueError, match="timing mode 'steady'"):
        timing.time_variant(gpu.launch, Timer(gpu), reader, mode="steady")


def test_without_a_clock_reader_nothing_is_claimed():
    gpu = FakeGPU([200.0])
    out = timing.time_variant(gpu.launch, Timer(gpu), None, reps=5, warmup=1, warmup_ms=0.0)
    assert (out["clocks_before"], out["clocks_during"], out["clocks_moved"]) == (None, None, None)


def test_memory_clock_moves_count_too():
    a = {"sm_mhz": 1980.0, "mem_mhz": 3201.0}
    assert clocks.clocks_moved([a, dict(a, mem_mhz=2619.0)]) is True
    assert clocks.clocks_moved([a, dict(a, sm_mhz=1965.0)]) is False     # one 15 MHz step: 0.76 %
    assert clocks.clock_warning([a, a]) is None and clocks.clock_summary([None]) is None


class NvmlLikeReader:
    source = "nvml"

    def __init__(self):
        self.n = 0

    def read(self):
        self.n += 1
        return {"sm_mhz": 1980.0 - self.n, "mem_mhz": 3201.0, "reasons": [], "source": "nvml"}


def test_poller_reads_while_the_work_runs_and_keeps_at_most_its_limit():
    reader = NvmlLikeReader()
    p = clocks.ClockPoller(reader, interval_s=0.002)
    p.start()
    time.sleep(0.1)                                           # the "samples": 100 ms at one reading per 2 ms
    got = p.stop()
    assert 5 <= len(got) <= 52 and got[0]["sm_mhz"] == 1979.0 and got[-1]["sm_mhz"] == 1980.0 - reader.n
    assert [r["sm_mhz"] for r in got] == sorted((r["sm_mhz"] for r in got), reverse=True)   # in order
    capped = clocks.ClockPoller(NvmlLikeReader(), interval_s=0.0005, max_readings=4)
    capped.start()
    time.sleep(0.05)
    assert len(capped.stop()) == 4                            # 3 first readings and the last
    smi = clocks.ClockPoller(type("Smi", (NvmlLikeReader,), {"source": "nvidia-smi"})(), interval_s=0.001)
    smi.start()
    time.sleep(0.02)
    assert len(smi.stop()) == 2                               # no thread with nvidia-smi: start and stop only


def use_fake_worker(monkeypatch, after: int, **state):
    """This process as a run worker on CPU: a kernel that adds 1 and advances a fake GPU clock by 200 µs per launch,
    a :class:`ThrottlingReader` that throttles after ``after`` launches; ``state``: more worker state."""
    from tileprobe.run import batch
    gpu = FakeGPU([200.0])

    class K(FakeKernel):
        def launch(self, stream, grid, packed):
            super().launch(stream, grid, packed)
            gpu.launch()
    k = K(_add(1.0))
    for key, value in dict(device="cpu", synchronize=gpu.synchronize, stream=None, num_sms=4, timer=Timer(gpu),
                           clock_reader=ThrottlingReader(gpu, after=after), **state).items():
        monkeypatch.setattr(worker._STATE, key, value)
    monkeypatch.setattr(worker, "_kernel", lambda cubin, symbol, sha: k)
    monkeypatch.setattr(batch, "_kernel", lambda cubin, symbol, sha: k)
    return gpu


@pytest.fixture
def throttled_worker(monkeypatch):
    return use_fake_worker(monkeypatch, after=1 + 3 + 10)


def test_the_warning_is_in_the_run_record_and_under_the_run_table(throttled_worker):
    out = worker.run_variant(_healthy_record(), b"", FAULTY, reps=20, warmup=10, warmup_ms=1.0)
    assert out["status"] == "ok" and out["clocks_moved"] is True and set(worker.RUN_FIELDS) <= set(out)
    assert out["clocks_during"]["sm_mhz"]["min"] == 1515.0
    warning = next(w for w in out["warnings"] if w.startswith("clocks moved during the samples: SM 1,515–1,950 MHz"))
    from tileprobe.report.terminal import render_run
    from tileprobe.schema import VariantRecord
    rec = VariantRecord(kernel="healthy", probe=FAULTY, case={}, hints={"occupancy": 1}, arch="sm_90",
                        tileiras="V13.4.92", status="ok", threads=128, registers=12, shared_bytes=0, ctas_per_sm=16,
                        limiter="threads", code_sha256="c", run=VariantRun.from_dict(out))
    buf = io.StringIO()
    render_run([rec], Console(file=buf, width=400, force_terminal=False))
    assert f"healthy sm_90 occupancy=1: warning: {warning}\n" in buf.getvalue()


def test_eager_times_the_host_from_the_launch_call_to_the_end_of_the_synchronize():
    """The host-inclusive mode. A fake host clock: each launch costs 7 µs of host time (packing, the
    driver call), each synchronize 3 µs; the GPU's own event time never enters the figure."""
    host = {"t": 0.0, "syncs": 0, "launches": 0, "flushes": 0}

    def launch():
        host["t"] += 7e-6
        host["launches"] += 1

    def synchronize():
        host["t"] += 3e-6
        host["syncs"] += 1

    def flush():
        host["flushes"] += 1
    seen = []
    times, info = timing.eager_batch(launch, synchronize=synchronize, flush=flush, n=5, warmup=2,
                                     between=lambda: seen.append(host["launches"]), clock=lambda: host["t"])
    assert times == pytest.approx([10.0] * 5) and info == {"warmup_launches": 2, "n": 5}
    assert seen == [2] and host["launches"] == 2 + 5 and host["flushes"] == 2 + 5
    assert host["syncs"] == 1 + 2 * 5          # after the warm-up; before and after each sample


def test_eager_is_a_mode_of_run_and_tune():
    from tileprobe.tune.gpu import TimingSettings
    gpu = FakeGPU([200.0])
    out = timing.time_variant(gpu.launch, Timer(gpu), None, mode="eager", reps=6)
    assert out["timing_mode"] == "eager" and out["reps"] == 6 and len(out["samples_us"]) == 6
    assert all(x >= 0 for x in out["samples_us"])
    assert TimingSettings(mode="eager").task_kwargs() == {"mode": "eager", "n": timing.EAGER_BATCH,
                                                          "warmup": timing.EAGER_WARMUP}


def test_graph_times_replays_of_captured_launches_per_launch():
    """The CUDA-graph mode. A fake GPU: 200 µs per launch; a replay of the captured graph runs its 10
    launches back to back (no flush between them, no host cost per launch); a sample is the replay ÷ 10."""
    gpu = FakeGPU([200.0], flush_us=50.0)
    captured = []

    def capture(launch, launches):
        before = gpu.launches
        captured.append(launches)

        def replay():
            for _ in range(launches):
                gpu.launch()
        assert gpu.launches == before          # capturing runs nothing
        return replay
    seen = []
    times, info = timing.graph_batch(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize,
                                     capture=capture, flush=gpu.flush, n=4, launches=10, warmup=2,
                                     between=lambda: seen.append(gpu.launches))
    assert times == pytest.approx([200.0] * 4)                  # the flush before each replay is outside the pair
    assert captured == [10] and info == {"warmup_launches": timing.BURST_WARMUP + 2 * 10, "n": 4,
                                         "graph_launches": 10}
    assert seen == [timing.BURST_WARMUP + 2 * 10]               # clocks read after the warm-up
    assert gpu.launches == timing.BURST_WARMUP + (2 + 4) * 10


def test_graph_batch_in_a_tune_is_sized_by_the_kernel_time():
    """With batch_ms (the tune's batches) a long kernel's graph batch costs what a sustained batch costs: a graph
    of one launch, one warm-up replay, the sustained mode's sample count; a short kernel's keeps 10 launches per
    replay (GRAPH_SPAN_US / 17 µs rounds up past 10)."""
    def capture_of(gpu, captured):
        def capture(launch, launches):
            captured.append(launches)

            def replay():
                for _ in range(launches):
                    gpu.launch()
            return replay
        return capture
    long_gpu, captured = FakeGPU([80_000.0], flush_us=50.0), []
    times, info = timing.graph_batch(long_gpu.launch, event_factory=long_gpu.event, synchronize=long_gpu.synchronize,
                                     capture=capture_of(long_gpu, captured), flush=long_gpu.flush, n=10, launches=10,
                                     warmup=2, batch_ms=25.0)
    assert captured == [1] and info["n"] == timing.MIN_BATCH == len(times) and info["graph_launches"] == 1
    assert info["estimate_us"] == pytest.approx(80_000.0) and times == pytest.approx([80_000.0] * timing.MIN_BATCH)
    assert long_gpu.launches == timing.BURST_WARMUP + 1 + 1 + timing.MIN_BATCH      # 10 launches, not 133
    sustained_gpu = FakeGPU([80_000.0], flush_us=50.0)
    timing.sustained_batch(sustained_gpu.launch, event_factory=sustained_gpu.event,
                           synchronize=sustained_gpu.synchronize, flush=sustained_gpu.flush)
    assert long_gpu.launches <= sustained_gpu.launches + 1
    short_gpu, captured = FakeGPU([17.0]), []
    times, info = timing.graph_batch(short_gpu.launch, event_factory=short_gpu.event,
                                     synchronize=short_gpu.synchronize, capture=capture_of(short_gpu, captured),
                                     flush=short_gpu.flush, n=10, launches=10, warmup=2, batch_ms=25.0)
    assert captured == [10] and info["n"] == 10 and times == pytest.approx([17.0] * 10)


def test_graph_is_a_mode_of_run_and_tune_and_recorded():
    from tileprobe.tune.gpu import TimingSettings
    gpu = FakeGPU([150.0])

    class GraphTimer(Timer):
        def capture(self, launch, launches):
            return lambda: [launch() for _ in range(launches)]
    out = timing.time_variant(gpu.launch, GraphTimer(gpu), None, mode="graph", reps=6)
    assert out["timing_mode"] == "graph" and out["reps"] == 6 and out["median_us"] == pytest.approx(150.0)
    s = TimingSettings(mode="graph")
    assert s.task_kwargs() == {"mode": "graph", "n": timing.GRAPH_BATCH, "warmup": timing.GRAPH_WARMUP,
                               "launches": timing.GRAPH_LAUNCHES, "batch_ms": timing.BATCH_MS}
    assert s.to_dict()["graph_launches"] == timing.GRAPH_LAUNCHES
    assert not any(k.startswith("graph_") for k in TimingSettings(mode="sustained").to_dict())  # as before

"""The tune's worker tasks (``tileprobe/run/batch.py``), the timing modes (``run/timing.py``) and the clock reader
(``run/clocks.py``) on CPU: CPU tensors, a fake kernel that computes through the packed pointers (from
``test_run_cpu.py``), a fake GPU clock for the events, a fake NVML."""
from __future__ import annotations

import os
import textwrap

import pytest
from test_run_cpu import FAULTY, FakeGPU, FakeKernel, _add, _healthy_record

from tileprobe.run import batch, clocks, timing, worker


class TimedKernel(FakeKernel):
    """The fake kernel, also advancing the fake GPU clock by its scripted time per launch."""

    def __init__(self, body, gpu):
        super().__init__(body)
        self.gpu = gpu

    def launch(self, stream, grid, packed):
        super().launch(stream, grid, packed)
        self.gpu.launch()


class FakeReader:
    """Clock readings that say how many launches had run when they were taken."""

    def __init__(self, gpu):
        self.gpu, self.reads = gpu, []

    def read(self):
        self.reads.append(self.gpu.launches)
        return {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": [], "launches": self.gpu.launches}


@pytest.fixture
def tune_worker(monkeypatch):
    gpu = FakeGPU([42.0])
    monkeypatch.setattr(worker._STATE, "device", "cpu")
    monkeypatch.setattr(worker._STATE, "synchronize", gpu.synchronize)
    monkeypatch.setattr(worker._STATE, "stream", None)
    monkeypatch.setattr(worker._STATE, "num_sms", 4)
    monkeypatch.setattr(worker._STATE, "timer", gpu)
    monkeypatch.setattr(worker._STATE, "memory_bytes", 1 << 30)
    monkeypatch.setattr(worker._STATE, "clock_reader", FakeReader(gpu))
    batch._ARGS.clear()
    kernels = {}

    def use(body, symbol="add_one"):
        kernels[symbol] = TimedKernel(body, gpu)
        return kernels[symbol]
    monkeypatch.setattr(batch, "_kernel", lambda cubin, symbol, sha: kernels[symbol])
    monkeypatch.setattr(worker, "_kernel", lambda cubin, symbol, sha: kernels[symbol])
    return use, gpu


def test_time_batch_sustained_reads_clocks_around_the_samples(tune_worker):
    use, gpu = tune_worker
    k = use(_add(1.0))
    out = batch.time_batch(_healthy_record(), b"", FAULTY, seed=1, mode="sustained", warmup_ms=1.0, batch_ms=1.0)
    assert out["status"] == "ok", out["error"]
    assert out["n"] == 24 == len(out["samples_us"])              # ceil(1 ms / 0.042 ms)
    assert out["warmup_launches"] == 24 and all(abs(x - 42.0) < 1e-6 for x in out["samples_us"])
    assert out["grid"] == [4, 1, 1] and out["driver_ctas_per_sm"] == 16
    # read after estimate + warm-up, and after the samples
    assert out["clocks_before"]["launches"] == 3 + 24 and out["clocks_after"]["launches"] == 3 + 24 + 24
    assert k.launches == 51 and gpu.flushes == 3 + 24     # the estimate's and the samples': none in the warm-up
    again = batch.time_batch(_healthy_record(), b"", FAULTY, seed=1, warmup_ms=1.0, batch_ms=1.0)
    assert again["status"] == "ok" and len(batch._ARGS) == 1    # the inputs were kept


def test_time_batch_burst_synchronizes_each_sample(tune_worker):
    use, gpu = tune_worker
    use(_add(1.0))
    out = batch.time_batch(_healthy_record(), b"", FAULTY, mode="burst", n=5, warmup=3)
    assert out["status"] == "ok" and out["n"] == 5 and out["warmup_launches"] == 3
    assert gpu.syncs == 1 + 5 and out["clocks_before"]["launches"] == 3


def test_time_batch_sticky_error_is_a_fatal_crash(tune_worker):
    use, _ = tune_worker

    def body(x, y):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    use(body)
    out = batch.time_batch(_healthy_record(), b"", FAULTY)
    assert (out["status"], out["fatal"], out["cuda_error"]) == ("crash", True, 700) and out["samples_us"] == []


def test_check_candidate_against_reference(tune_worker):
    use, _ = tune_worker
    use(_add(1.0))
    ok = batch.check_candidate(_healthy_record(), b"", FAULTY, seed=2)
    assert (ok["status"], ok["against"], ok["rel_err"]) == ("ok", "reference", 0.0)
    use(lambda x, y: None)    # writes nothing: the poisoned output shows
    bad = batch.check_candidate(_healthy_record(), b"", FAULTY, seed=2)
    assert bad["status"] == "wrong" and bad["nan_count"] == 1024 and "NaN" in bad["message"]


NO_REF = """
from tileprobe import Probe
probe = Probe(kernel="k.py:f", name="noref", grid=lambda case, hints, num_sms: (4,),
              args=lambda case, arrays: (arrays.randn((1024,), "float32"), arrays.empty((1024,), "float32"),
                                         case["K"]),
              cases={"K": [1, 2]}, tunable=("K",))
"""


def test_check_candidate_against_the_default_configuration(tune_worker, tmp_path):
    use, _ = tune_worker
    probe = tmp_path / "noref.py"
    probe.write_text(textwrap.dedent(NO_REF))
    sig = _healthy_record()["signature"][:2]
    rec = _healthy_record(kernel="noref", probe=str(probe), case={"K": 2}, symbol="cand",
                          signature=sig + [{"kind": "constant", "value": 2}])
    dflt = _healthy_record(kernel="noref", probe=str(probe), case={"K": 1}, symbol="dflt",
                           signature=sig + [{"kind": "constant", "value": 1}])
    use(_add(1.0), "dflt")
    use(_add(1.0), "cand")
    out = batch.check_candidate(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert (out["status"], out["against"], out["rel_err"]) == ("ok", "default", 0.0), out["error"]
    use(_add(1.5), "cand")
    out = batch.check_candidate(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert out["status"] == "wrong" and out["against"] == "default" and out["rel_err"] > 0.1
    none = batch.check_candidate(rec, b"", str(probe), seed=5)
    assert none["status"] == "unchecked" and "no reference=" in none["message"]

    def broken(x, y):
        raise ValueError("the default's own bug")
    use(broken, "dflt")
    out = batch.check_candidate(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert out["status"] == "unchecked" and "the default configuration failed" in out["message"]


def test_sustained_and_burst_batches_with_a_fake_clock():
    gpu = FakeGPU([100.0, 120.0])
    times, info = timing.sustained_batch(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize,
                                         flush=gpu.flush, warmup_ms=2.0, batch_ms=0.5, min_n=5, max_n=100)
    assert info["estimate_us"] == pytest.approx(100.0) and info["warmup_launches"] == 20 and info["n"] == 5 == len(times)
    assert gpu.syncs == 3 and set(round(t) for t in times) <= {100, 120}
    gpu = FakeGPU([10.0])
    times, info = timing.burst_batch(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize, n=4,
                                     warmup=2)
    assert info == {"warmup_launches": 2, "n": 4} and gpu.syncs == 1 + 4 and gpu.launches == 6


class FakeNVML:
    def __init__(self, sm=(1980, 1755), reasons=0x4):
        self.sm, self.reasons, self.by_bus = list(sm), reasons, []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        self.by_bus.append(bus)
        if bus != "00000000:19:00.0":
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return "h"

    def nvmlDeviceGetClockInfo(self, h, which):
        return self.sm.pop(0) if which == clocks.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.reasons


def test_clock_reader_with_nvml_and_moved_clocks():
    nvml = FakeNVML()
    r = clocks.ClockReader("0000:19:00.0", nvml=nvml)
    assert r.source == "nvml" and nvml.by_bus == ["0000:19:00.0", "00000000:19:00.0"]
    a, b = r.read(), r.read()
    assert a == {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": ["sw_power_cap"], "source": "nvml"}
    assert b["sm_mhz"] == 1755.0
    assert clocks.clocks_moved([a, b]) is True and clocks.clocks_moved([a, a]) is False
    assert clocks.clocks_moved([{"sm_mhz": 1980.0}, {"sm_mhz": 1965.0}]) is False   # one 15 MHz step: < 1 %
    assert clocks.clocks_moved([None]) is None
    assert clocks.reason_names(0x4 | 0x40 | 0x1000) == ["sw_power_cap", "hw_thermal_slowdown", "0x1000"]


def test_clock_reader_without_nvml_or_nvidia_smi(monkeypatch):
    monkeypatch.setattr(clocks.shutil, "which", lambda name: None)

    class Broken:
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")
    r = clocks.ClockReader(nvml=Broken())
    assert r.source is None and r.read() is None
    monkeypatch.setitem(os.environ, "PATH", "")
    assert clocks.compute_capability() is None or isinstance(clocks.compute_capability(), tuple)


def test_run_variant_burst_mode_and_clocks(tune_worker):
    use, gpu = tune_worker
    k = use(_add(1.0))
    out = worker.run_variant(_healthy_record(), b"", FAULTY, reps=6, warmup=2, timing_mode="burst")
    assert out["status"] == "ok" and out["timing_mode"] == "burst" and out["reps"] == 6
    # two syncs around the checked launch, one after the warm-up, then one per sample
    assert out["median_us"] == pytest.approx(42.0) and gpu.syncs == 2 + 1 + 6
    # clocks read after the warm-up (checked launch + 2) and after the samples
    assert out["clocks_before"]["launches"] == 1 + 2 and out["clocks_after"]["launches"] == 1 + 2 + 6
    assert out["clocks_during"]["n"] == 2 and out["clocks_during"]["sm_mhz"] == {"min": 1980.0, "median": 1980.0,
                                                                                 "max": 1980.0}
    assert out["clocks_moved"] is False and k.launches == 9

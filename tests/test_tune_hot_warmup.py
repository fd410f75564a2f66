"""The race's heat-up is paid once: a sustained batch that follows another within HOT_GAP_S warms up for
HOT_WARMUP_MS (tileprobe/tune/gpu.py); the first batch, one after a pause, the final's and other modes' keep theirs."""
from __future__ import annotations

import hashlib
import time

from tileprobe.run import timing
from tileprobe.run.watchdog import TaskOutcome
from tileprobe.tune import gpu
from tileprobe.tune.gpu import TimingSettings, WorkerBench


class RecordingWatchdog:
    def __init__(self):
        self.kwargs: list[dict] = []

    def submit(self, fn, kwargs, timeout_s=None):
        self.kwargs.append(kwargs)
        return TaskOutcome("done", value={"status": "ok", "samples_us": [10.0] * 5})


def bench(mode="sustained"):
    wd = RecordingWatchdog()
    b = WorkerBench(wd, {}, lambda sha: None, timing=TimingSettings(mode=mode))
    b.payload = lambda c: {"record": {}, "cubin": b"", "probe_path": "p.py"}   # no candidate records needed
    b.candidates = {"a": None, "b": None}
    return b, wd


def test_back_to_back_race_batches_share_one_heat_up(monkeypatch):
    b, wd = bench()
    assert b.measure("a", 1).status == "ok"
    b.measure("b", 1)
    b.measure_final("a", 1)
    monkeypatch.setattr(gpu, "HOT_GAP_S", 0.0)      # a pause longer than the gap: a full warm-up again
    time.sleep(0.01)
    b.measure("a", 2)
    warm = [k["warmup_ms"] for k in wd.kwargs]
    assert warm == [timing.DEFAULT_WARMUP_MS, gpu.HOT_WARMUP_MS, timing.FINAL_WARMUP_MS, timing.DEFAULT_WARMUP_MS]
    assert all(k["mode"] == "sustained" for k in wd.kwargs)


def test_other_modes_keep_their_warm_up():
    b, wd = bench("burst")
    b.measure("a", 1)
    b.measure("b", 1)
    assert [k["warmup"] for k in wd.kwargs] == [timing.BURST_WARMUP] * 2 and "warmup_ms" not in wd.kwargs[1]


def test_payload_hash_is_checked_as_before():
    """The hot warm-up does not bypass the payload's checks: a cubin whose bytes changed is an error batch."""
    wd = RecordingWatchdog()
    b = WorkerBench(wd, {}, lambda sha: b"other bytes")
    from types import SimpleNamespace
    rec = SimpleNamespace(cubin_sha256=hashlib.sha256(b"cubin").hexdigest(), probe="p.py")
    b.candidates = {"a": SimpleNamespace(id="a", record=rec)}
    out = b.measure("a", 1)
    assert out.status == "error" and "hash to another SHA-256" in out.error and wd.kwargs == []


def test_each_candidate_s_first_race_batch_is_a_short_look():
    b, wd = bench()
    b.measure("a", 1)
    b.measure("b", 1)
    b.measure("a", 2)
    b.measure_final("b", 1)
    b.measure("b", 2)
    looks = [k["batch_ms"] for k in wd.kwargs]
    assert looks == [gpu.FIRST_LOOK_MS, gpu.FIRST_LOOK_MS, timing.BATCH_MS, timing.FINAL_BATCH_MS, timing.BATCH_MS]
    assert gpu.FIRST_LOOK_MS < timing.BATCH_MS
    b, wd = bench("graph")      # graph batches are sized by their own rule
    b.measure("a", 1)
    assert wd.kwargs[0]["batch_ms"] == timing.BATCH_MS

"""The CPU side of ``benchmarks/timing/bench_timing.py``: cuda.tile.tune's stopping rule (against the installed
cuda-tile's own ``_TimingCandidate``), the verdicts against do_bench, the table, the loop over variants (a hang, a
crash, the time budget), the bundle's tasks, and one variant in a CPU worker with fake timers (the methods that
need a GPU, triton or a CUDA graph fail and are kept as errors)."""
from __future__ import annotations

import json
import os
import random

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bt():
    from support import load_script
    return load_script(os.path.join(ROOT, "benchmarks", "timing", "bench_timing.py"), register=True)


def test_the_tune_rule_is_cuda_tile_tunes(bt):
    from cuda.tile.tune import _tune
    assert (bt.TUNE_WARMUP, bt.TUNE_BATCH, bt.TUNE_MIN_SAMPLES, bt.TUNE_MAX_SAMPLES, bt.TUNE_MAX_MEASURE_US) == (
        _tune._WARM_UP_REPEATS, _tune._BATCH_REPEATS, _tune._MIN_REPEATS, _tune._MAX_REPEATS,
        _tune._MAX_MEASURE_TIME_US)
    rng = random.Random(4)
    theirs = _tune._TimingCandidate(config=None, grid=(1,), kernel=None, get_args=None, flush_l2=True)
    ours = bt.TuneStats()
    for i in range(40):
        x = rng.gauss(200.0, 6.0)
        theirs._add_sample(x)
        ours.add(x)
        assert ours.mean_us == pytest.approx(theirs.mean_us) and ours.n == theirs.num_samples
        assert ours.error_margin_us == pytest.approx(theirs.error_margin_us)
        assert ours.converged() == theirs.converged(), i


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_tune_samples_warm_up_batches_and_stops(bt):
    clock, calls = FakeClock(), []

    def steady():
        calls.append(1)
        clock.t += 0.001
        return 222.0
    out = bt.tune_samples(steady, clock=clock)
    assert len(calls) == 3 + 5 and out["samples_us"] == [222.0] * 5 and out["stopped"] == "converged"
    assert out["mean_us"] == 222.0 and out["error_margin_us"] == 0.0 and out["sample_wall_us"] == pytest.approx(1000)
    noisy = iter([100.0, 300.0] * 1000)
    out = bt.tune_samples(lambda: next(noisy), clock=clock)
    # ±100 µs around 200 µs would need ≈ 9,600 samples for a 1 % margin: cuda.tile.tune stops at 1,000
    assert len(out["samples_us"]) == 1000 and out["converged"] and out["mean_us"] == pytest.approx(200.0, abs=0.2)
    assert out["error_margin_us"] == pytest.approx(1.96 * 100.05 / 1000 ** 0.5, rel=1e-3)

    alternating = iter([100.0, 300.0] * 100)

    def slow():
        clock.t += 1.0
        return next(alternating)
    out = bt.tune_samples(slow, clock=clock, wall_limit_s=7.0)
    assert out["stopped"] == "wall" and not out["converged"] and len(out["samples_us"]) == 10


def _m(us, sm=1980.0, mem=3201.0):
    return {"median_us": us, "clocks": {"sm_mhz": {"median": sm}, "mem_mhz": {"median": mem}}}


def test_verdicts_against_do_bench(bt):
    # all close: within 3%
    j = bt.judge({"do_bench": _m(1114.0), "sustained": _m(1111.1), "burst": _m(1120.0), "cutile_tune": _m(1114.8)})
    assert [j[k]["verdict"] for k in ("sustained", "burst", "cutile_tune")] == ["within 3%"] * 3
    assert j["sustained"]["vs_do_bench_pct"] == pytest.approx(-0.26, abs=0.01)
    # sustained 5 % faster at a 5 % higher SM clock: accounted for by clocks
    j = bt.judge({"do_bench": _m(222.0, sm=1710.0), "sustained": _m(211.0, sm=1800.0), "burst": _m(222.0),
                  "cutile_tune": _m(221.0)})
    assert j["sustained"]["verdict"] == "clocks"
    assert j["sustained"]["why"] == ("SM clock 1,800 vs 1,710 MHz (medians over the samples, +5.3%): a time difference "
                                     "of -5.0% is within what a clock difference can explain (time ∝ clock^-α, "
                                     "0 ≤ α ≤ 1)")
    # 10 % faster at a clock only 2 % higher: more than the clocks can explain
    j = bt.judge({"do_bench": _m(222.0, sm=1710.0), "sustained": _m(200.0, sm=1745.0), "burst": _m(222.0),
                  "cutile_tune": _m(221.0)})
    assert j["sustained"]["verdict"] == "unexplained"
    # faster at a LOWER clock: the clocks cannot explain it
    j = bt.judge({"do_bench": _m(222.0, sm=1800.0), "sustained": _m(211.0, sm=1710.0), "burst": _m(222.0),
                  "cutile_tune": _m(221.0)})
    assert j["sustained"]["verdict"] == "unexplained"
    # burst 11 % faster at the same clocks; sustained within 3 %: the idle gaps (method)
    methods = {"do_bench": _m(222.0, sm=1530.0), "sustained": _m(218.0, sm=1530.0), "burst": _m(197.0, sm=1530.0),
               "cutile_tune": _m(196.0, sm=1530.0), "burst_l2_flush": _m(199.0)}
    j = bt.judge(methods)
    assert j["burst"]["verdict"] == "method" and j["burst"]["why"].startswith(
        "samples taken alone, with idle gaps: the same code as sustained, which is within -1.8% of do_bench here; "
        "burst vs sustained -9.6%, SM clock 1,530 vs 1,530 MHz")
    assert j["cutile_tune"]["verdict"] == "method"
    assert j["cutile_tune"]["why"].startswith("samples taken alone, as tileprobe's burst (-0.5% from it): ")
    # cutile_tune away from burst but next to the L2-flush control
    methods.update(cutile_tune=_m(186.0, sm=1530.0), burst_l2_flush=_m(187.0, sm=1530.0))
    j = bt.judge(methods)
    assert j["cutile_tune"]["verdict"] == "method" and j["cutile_tune"]["why"].startswith("cuTile's L2-sized flush")
    # nothing accounts for it
    j = bt.judge({"do_bench": _m(300.0), "sustained": _m(320.0), "burst": _m(330.0), "cutile_tune": _m(250.0)})
    assert [j[k]["verdict"] for k in ("sustained", "burst", "cutile_tune")] == ["unexplained"] * 3
    # no do_bench (triton missing): nothing to compare
    assert bt.judge({"sustained": _m(1.0), "do_bench": {"error": "ModuleNotFoundError"}})["burst"]["verdict"] == "n/a"


def _row_value(us, status="ok"):
    return {"status": status, "error": "", "methods": {
        "sustained": _m(us * 0.99), "burst": _m(us * 0.89, sm=1515.0), "do_bench": _m(us, sm=1515.0),
        "cutile_tune": _m(us * 0.885, sm=1515.0), "burst_l2_flush": _m(us * 0.89)}}


class Outcome:
    def __init__(self, status, value=None, error="", wall_s=1.5):
        self.status, self.value, self.error, self.wall_s = status, value, error, wall_s


def test_run_all_keeps_going_after_a_hang_and_a_crash_and_stops_at_the_budget(bt, tmp_path):
    tasks = [{"record": {"kernel": f"timing_k{i}", "case": {"T": i}, "hints": {"occupancy": 2}, "cubin_sha256": "s"}}
             for i in range(5)]
    answers = iter([Outcome("done", _row_value(222.0)), Outcome("hang", error="no result within 120 s"),
                    Outcome("crash", error="the worker died: killed by SIGSEGV"), Outcome("done", _row_value(1114.0))])
    clock = FakeClock()

    def submit(task):
        clock.t += 100.0
        return next(answers)
    said = []
    rows = bt.run_all(tasks, submit, budget_s=330.0, clock=clock, progress=said.append)
    assert [r["status"] for r in rows] == ["ok", "hang", "crash", "ok", "skipped"]
    assert said[0] == "[1/5] k0 T=0 occupancy=2: ok (1.5 s)" and said[4] == "[5/5] k4 T=4 occupancy=2: skipped"
    assert rows[0]["judged"]["burst"]["verdict"] == "method" and "judged" not in rows[1]
    s = bt.summary(rows)
    assert s == {"variants": 5, "ok": 2, "failed": 3, "sustained": {"within 3%": 2}, "burst": {"method": 2},
                 "cutile_tune": {"method": 2}, "unexplained": 0}
    text = bt.write(str(tmp_path), "# head\n", rows, {"gpu": {"name": "Fake H200"}})
    lines = text.splitlines()
    row0 = next(x for x in lines if x.startswith("k0 T=0 occupancy=2"))
    assert "219.8" in row0 and "222.0" in row0 and "0.990" in row0 and "0.890" in row0 and "0.885" in row0
    assert "1980/1515/1515/1515" in row0 and row0.endswith("ok/meth/meth")
    assert any(x.startswith("k1 T=1 occupancy=2") and "hang: no result within 120 s" in x for x in lines)
    assert "skipped: time budget of 330 s spent" in text
    saved = json.loads((tmp_path / "bench_timing.json").read_text())
    assert saved["summary"] == s and len(saved["rows"]) == 5 and saved["gpu"]["name"] == "Fake H200"
    assert (tmp_path / "bench_timing.txt").read_text() == text


def test_arguments(bt):
    a = bt.parse_args(["--bundle", "b", "--out", "o"])
    assert (a.reps, a.tune_wall_s, a.timeout, a.budget_s, a.arch) == (100, 10.0, 60.0, 270.0, None)
    with pytest.raises(SystemExit):
        bt.parse_args(["--bundle", "b", "--out", "o", "--reps", "2"])


def test_tasks_from_a_bundle(bt, tmp_path):
    import hashlib

    from tileprobe.errors import TileprobeError
    from tileprobe.schema import VariantRecord, write_json
    cubin = b"not really a cubin"
    sha = hashlib.sha256(cubin).hexdigest()
    (tmp_path / "cubins").mkdir()
    (tmp_path / "cubins" / f"{sha}.cubin").write_bytes(cubin)
    recs = [VariantRecord(kernel="timing_tilegym_rms_norm", probe="/elsewhere/benchmarks/probes/timing_set.py",
                          case={}, hints={"occupancy": o}, arch=arch, tileiras="V13.4.92", status="ok", threads=256,
                          registers=64, cubin_sha256=sha, symbol="k") for o, arch in ((1, "sm_90"), (4, "sm_100"))]
    write_json(recs, {}, str(tmp_path / "audit.json"))
    tasks = bt.tasks_from_bundle(str(tmp_path), "sm_90", 50, 10.0)
    assert len(tasks) == 1 and tasks[0]["cubin"] == cubin and tasks[0]["reps"] == 50
    assert tasks[0]["probe_path"] == os.path.join(ROOT, "benchmarks", "probes", "timing_set.py")
    assert tasks[0]["record"]["hints"] == {"occupancy": 1}
    assert len(bt.tasks_from_bundle(str(tmp_path), None, 50, 1)) == 2
    (tmp_path / "cubins" / f"{sha}.cubin").write_bytes(b"changed")
    with pytest.raises(TileprobeError, match="missing or changed"):
        bt.tasks_from_bundle(str(tmp_path), "sm_90", 50, 10.0)


def test_the_timing_set_has_14_variants_of_5_kernels():
    from tileprobe.probe.define import load_probes
    probes = load_probes(os.path.join(ROOT, "benchmarks", "probes", "timing_set.py"))
    counts = {p.label: len(p.case_grid()) * len(p.hint_grid()) for p in probes}
    assert counts == {"timing_rms_norm_large": 4, "timing_tilegym_rms_norm": 2, "timing_matmul_256x128x64": 1,
                      "timing_matmul_128x128x64": 2, "timing_matmul_256x128x32": 1, "timing_w4a16_gemm_sm90": 2,
                      "timing_persistent_matmul": 2}


def test_one_variant_in_a_cpu_worker(bt, monkeypatch):
    """sustained and burst through tileprobe's code on a fake GPU clock; do_bench (no triton here), the CUDA graph
    and the L2-flush control (no CUDA) fail and are kept as errors: the row is still ok."""
    from test_run_cpu import FAULTY, _healthy_record
    from test_run_timing import use_fake_worker
    use_fake_worker(monkeypatch, after=10 ** 6, gpu={"l2_bytes": 50 * 2**20})
    out = bt.bench_variant(_healthy_record(), b"", FAULTY, reps=10, tune_wall_s=1.0)
    assert out["status"] == "ok" and out["check"] == {"status": "ok", "rel_err": 0.0}
    m = out["methods"]
    # each method ran twice (A B C C B A): 2 × 10 samples, the mean of the two medians
    assert m["sustained"]["median_us"] == pytest.approx(200.0) and m["sustained"]["n"] == 20
    assert len(m["sustained"]["runs"]) == 2 and m["sustained"]["drift_pct"] == pytest.approx(0.0, abs=1e-9)
    assert m["burst"]["median_us"] == pytest.approx(200.0) and m["burst"]["clocks"]["sm_mhz"]["median"] == 1950.0
    assert "error" in m["do_bench"] and "error" in m["cutile_tune"] and "error" in m["burst_l2_flush"]
    j = bt.judge(m)
    assert j["sustained"]["verdict"] == "n/a"


class FakeDriver:
    """The cuda-bindings calls GraphSample makes, logged; events 2 ms apart; a capture that records its nodes."""

    def __init__(self):
        from cuda.bindings import driver as real
        self.CUstream_flags, self.CUevent_flags = real.CUstream_flags, real.CUevent_flags
        self.CUevent_record_flags, self.CUstreamCaptureMode = real.CUevent_record_flags, real.CUstreamCaptureMode
        self.log, self.capturing, self.nodes, self.live = [], False, [], set()

    def _ok(self, *v):
        return (0, *v)

    def cuStreamCreate(self, flags):
        return self._ok(7)

    def cuEventCreate(self, flags):
        e = f"ev{len(self.log)}"
        self.live.add(e)
        return self._ok(e)

    def cuStreamBeginCapture(self, s, mode):
        self.capturing, self.nodes = True, []
        return self._ok()

    def cuMemAllocAsync(self, n, s):
        self.nodes.append(("alloc", n))
        return self._ok(0xB00)

    def cuMemsetD8Async(self, p, v, n, s):
        self.nodes.append(("memset", v, n))
        return self._ok()

    def cuEventRecordWithFlags(self, e, s, flags):
        self.nodes.append(("event", e, flags))
        return self._ok()

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra):
        self.nodes.append(("cuLaunchKernel", f, (gx, gy, gz), (bx, by, bz), shmem))
        return self._ok()

    def cuMemFreeAsync(self, p, s):
        self.nodes.append(("free", p))
        return self._ok()

    def cuStreamEndCapture(self, s):
        self.capturing = False
        self.log.append(tuple(n[0] for n in self.nodes))
        return self._ok("graph")

    def cuGraphInstantiate(self, g, flags):
        return self._ok("exec")

    def cuGraphLaunch(self, e, s):
        return self._ok()

    def cuStreamSynchronize(self, s):
        return self._ok()

    def cuEventElapsedTime(self, a, b):
        return self._ok(0.222)

    def cuGraphExecDestroy(self, e):
        return self._ok()

    def cuGraphDestroy(self, g):
        return self._ok()

    def cuEventDestroy(self, e):
        self.live.discard(e)
        return self._ok()

    def cuStreamDestroy(self, s):
        return self._ok()


def test_graph_sample_builds_cutiles_graph_and_falls_back_to_cuLaunchKernel(bt):
    import ctypes
    cu = FakeDriver()

    class Kernel:
        def __init__(self, refuse):
            self.refuse, self.launches = refuse, 0

        def launch(self, stream, grid, packed):
            if self.refuse:
                raise RuntimeError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
            self.launches += 1
            cu.nodes.append(("LoadedKernel", stream, grid))

        def function(self):
            return "fn"
    packed = [ctypes.c_uint64(0x1000), ctypes.c_int32(4096)]
    ok = bt.GraphSample(Kernel(False), (512, 1, 1), packed, 60 * 2**20, cu=cu, core_stream=lambda h: ("core", h))
    assert ok() == pytest.approx(222.0) and ok.launcher == "LoadedKernel"
    assert cu.log == [("alloc", "memset", "event", "LoadedKernel", "event", "free")]
    assert cu.nodes[0] == ("alloc", 60 * 2**20) and cu.nodes[1] == ("memset", 0x5A, 60 * 2**20)
    assert cu.nodes[3] == ("LoadedKernel", ("core", 7), (512, 1, 1)) and not cu.live   # events destroyed
    fb = bt.GraphSample(Kernel(True), (512, 1, 1), packed, 0, cu=cu, core_stream=lambda h: ("core", h))
    assert fb() == pytest.approx(222.0) and fb.launcher == "cuLaunchKernel"
    assert fb.fallback_reason == "RuntimeError: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" and fb.l2 == 1024
    assert cu.log[-1] == ("alloc", "memset", "event", "cuLaunchKernel", "event", "free")
    assert cu.nodes[3] == ("cuLaunchKernel", "fn", (512, 1, 1), (1, 1, 1), 0) and not cu.capturing and not cu.live

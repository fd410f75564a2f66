"""``tileprobe run`` on a real GPU (marked ``gpu``: skipped where no CUDA GPU is present, see conftest.py).

Needs, on the GPU machine: torch with CUDA, cuda-core, cuda-bindings, cuda-tile and a tileiras toolchain (the
audit compiles here; see the command in docs or the report). What is checked:

* RMSNorm at a size where one launch takes ≥ 100 µs: every occupancy × TMA variant timed and checked, the best
  hint named with its speed-up over the default;
* the sm_90 W4A16 GEMM (integer-unpacked E2M1 weights): gather × loop × occupancy timed and checked;
* a planted hang and a planted crash are reported, the sweep finishes within the timeout plus 10 s per fault and
  the variants after each fault run in a clean worker;
* the same variant timed twice agrees within 1 %;
* the driver's occupancy (with the real CTA size) equals the static CTAs/SM for every bundled example variant;
* the exported cubin launched by our calling convention computes what cuTile's own ``ct.launch`` (JIT) does;
* the split-machines path: a bundle directory is run by ``tileprobe run --bundle``.
"""
from __future__ import annotations

import copy
import glob
import json
import os
import sys
import time

import pytest

from tileprobe.audit.pipeline import audit
from tileprobe.run.session import best_hints, run_probes
from tileprobe.run.watchdog import Watchdog
from tileprobe.schema import VariantRun

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
FAULTY = os.path.join(ROOT, "tests", "data", "faulty_kernels.py")
FAULT_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def wd():
    with Watchdog(timeout_s=120) as w:
        w.start()
        yield w


@pytest.fixture(scope="module")
def sm(wd):
    return wd.info["sm"]


_AUDITS: dict = {}


def audited(paths, sm):
    """Audit (compile) probe files for this GPU once per test session."""
    key = (tuple(paths), sm)
    if key not in _AUDITS:
        res = audit(list(paths), [sm])
        assert not res.probe_errors, res.probe_errors
        _AUDITS[key] = res
    return copy.deepcopy(_AUDITS[key])


def _table(records) -> str:
    rows = []
    for r in records:
        run = r.run or VariantRun()
        rows.append(f"{r.kernel} {r.case} {r.hints}: {run.status} {run.median_us} µs "
                    f"±{run.spread_pct}% rel_err={run.rel_err} driver={run.driver_ctas_per_sm} "
                    f"static={run.static_ctas_per_sm} {(run.error or '')[:300]}")
    return "\n".join(rows)


def test_rms_norm_large_all_variants_timed_and_checked(wd, sm):
    res = audited([os.path.join(EXAMPLES, "rms_norm_large.py")], sm)
    ok = [r for r in res.records if r.ok]
    assert len(ok) == 10   # ALLOW_TMA × occupancy 1, 2, 4, 8, 16
    out = run_probes(res.records, res.cubins, watchdog=wd, timeout_s=120, reps=100)
    print(_table(ok))
    for r in ok:
        assert r.run.status == "ok", _table([r])
        assert r.run.checked and r.run.rel_err <= r.run.tolerance
        assert r.run.reps == 100 and r.run.p25_us <= r.run.median_us <= r.run.p75_us
        assert r.run.median_us >= 100.0, "the large RMSNorm must take ≥ 100 µs per launch"
        assert r.run.block == [1, 1, 1] and r.run.grid[0] == wd.info["num_sms"] * r.hints["occupancy"]
    best = best_hints(ok)
    assert len(best) == 2 and all(b["speedup"] is not None for b in best)
    for b in best:
        print(f"best {b['case']}: {b['best_hints']} {b['best_us']:.1f} µs, {b['speedup']:.2f}x vs default "
              f"{b['default_hints']} {b['default_us']:.1f} µs")
    assert out.environment["gpu"]["name"]


def test_rms_norm_small_checked(wd, sm):
    res = audited([os.path.join(EXAMPLES, "rms_norm.py")], sm)
    run_probes(res.records, res.cubins, watchdog=wd, timeout_s=120, reps=30)
    print(_table(res.records))
    assert [r.run.status for r in res.records if r.ok] == ["ok"] * 10


def test_w4a16_sm90_gather_loop_occupancy(wd, sm):
    if sm != "sm_90":
        pytest.skip(f"the sm_90 W4A16 probe is for sm_90; this GPU is {sm}")
    res = audited([os.path.join(EXAMPLES, "w4a16_gemm_sm90.py")], sm)
    run_probes(res.records, res.cubins, watchdog=wd, timeout_s=300, reps=20)
    print(_table(res.records))
    ran = [r for r in res.records if r.ok]
    assert len(ran) == 12
    for r in ran:
        assert r.run.status == "ok", _table([r])
        assert r.run.median_us > 0


def test_planted_hang_and_crash_are_contained(sm):
    res = audited([FAULTY], sm)
    by_name = {r.kernel: r for r in res.records}
    assert set(by_name) == {"planted_hang", "healthy", "planted_crash"} and all(r.ok for r in res.records)
    with Watchdog(timeout_s=FAULT_TIMEOUT_S) as w:
        w.start()   # the first start-up is not a fault's cost
        t0 = time.perf_counter()
        run_probes(res.records, res.cubins, watchdog=w, timeout_s=FAULT_TIMEOUT_S, reps=10)
        took = time.perf_counter() - t0
        print(_table(res.records), f"\nsweep {took:.1f} s, {w.restarts} restarts")
        assert by_name["planted_hang"].run.status == "hang"
        assert by_name["healthy"].run.status == "ok"
        crash = by_name["planted_crash"].run
        assert crash.status == "crash", _table([by_name["planted_crash"]])
        assert crash.fatal and crash.cuda_error in (700, 719), crash.to_dict()
        assert took < 2 * (FAULT_TIMEOUT_S + 10) + 10
        # the variant after the crash runs in a clean worker
        again = copy.deepcopy(by_name["healthy"])
        run_probes([again], res.cubins, watchdog=w, timeout_s=FAULT_TIMEOUT_S, reps=10)
        assert again.run.status == "ok" and again.run.worker_pid != by_name["healthy"].run.worker_pid
        pids = list(w.pids)
    assert len(pids) >= 3
    assert not [p for p in pids if _our_child(p)], "a worker was left behind (alive or zombie)"


def _our_child(pid: int) -> bool:
    """Is ``pid`` still a process (or zombie) whose parent is this test process?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid()
    except OSError:
        return False


def test_same_variant_timed_twice_agrees_within_1pct(wd, sm):
    res = audited([os.path.join(EXAMPLES, "rms_norm_large.py")], sm)
    rec = next(r for r in res.records if r.ok and r.case["ALLOW_TMA"] and r.hints["occupancy"] == 4)
    a, b = copy.deepcopy(rec), copy.deepcopy(rec)
    run_probes([a], res.cubins, watchdog=wd, timeout_s=120, reps=200, seed=1)
    run_probes([b], res.cubins, watchdog=wd, timeout_s=120, reps=200, seed=2)
    m1, m2 = a.run.median_us, b.run.median_us
    print(f"repeat: {m1:.2f} µs vs {m2:.2f} µs ({100 * abs(m1 - m2) / m1:.2f} %)")
    assert abs(m1 - m2) / m1 < 0.01


def _bundled_examples() -> list[str]:
    """Example probes that load here (TileGym examples need the tilegym package)."""
    from tileprobe.errors import ProbeError
    from tileprobe.probe.define import load_probes
    out = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.py"))):
        try:
            load_probes(path)
        except ProbeError:
            continue
        out.append(path)
    return out


def test_driver_occupancy_equals_static_for_every_bundled_variant(wd, sm):
    paths = [p for p in _bundled_examples() if not p.endswith("rms_norm_large.py")] + [FAULTY]
    res = audited(paths, sm)
    ok = [r for r in res.records if r.ok]
    assert ok
    bad = []
    for r in ok:
        out = wd.submit("tileprobe.run.worker:driver_occupancy",
                        {"cubin": res.cubins[r.cubin_sha256], "symbol": r.symbol, "threads": r.threads})
        assert out.status == "done", out.error
        facts = out.value
        if facts["driver_ctas_per_sm"] != r.ctas_per_sm:
            bad.append(f"{r.kernel} {r.case} {r.hints}: driver {facts['driver_ctas_per_sm']} CTAs/SM at "
                       f"{r.threads} threads, static {r.ctas_per_sm} ({r.limiter}); block=1 gives "
                       f"{facts['driver_ctas_per_sm_block1']}")
        r.run = VariantRun.from_dict(facts)
    print(f"{len(ok)} variants checked")
    assert not bad, "\n".join(bad)


def test_driver_resources_equal_cubin_reading(wd, sm):
    res = audited([p for p in _bundled_examples() if not p.endswith("rms_norm_large.py")] + [FAULTY], sm)
    bad = []
    for r in (r for r in res.records if r.ok):
        facts = wd.submit("tileprobe.run.worker:driver_occupancy",
                          {"cubin": res.cubins[r.cubin_sha256], "symbol": r.symbol, "threads": r.threads}).value
        if (facts["driver_registers"], facts["driver_shared_bytes"]) != (r.registers, r.driver_shared_bytes):
            bad.append(f"{r.kernel} {r.case} {r.hints}: driver regs {facts['driver_registers']} shared "
                       f"{facts['driver_shared_bytes']} B; cubin regs {r.registers} shared {r.driver_shared_bytes} B")
    assert not bad, "\n".join(bad)


def test_bundle_directory_runs_through_the_cli(tmp_path, sm):
    from tileprobe.cli import main
    from tileprobe.schema import dump
    probe = os.path.join(EXAMPLES, "rms_norm.py")
    res = audited([probe], sm)
    bundle = tmp_path / "bundle"
    (bundle / "cubins").mkdir(parents=True)
    (bundle / "audit.json").write_text(json.dumps(dump(res.records, res.environment), default=str))
    for sha, data in res.cubins.items():
        (bundle / "cubins" / f"{sha}.cubin").write_bytes(data)
    out = tmp_path / "run.json"
    rc = main(["run", "--bundle", str(bundle), probe, "--reps", "20", "--json", str(out), "--format", "none",
               "--timeout", "60"])
    assert rc == 0
    doc = json.loads(out.read_text())
    statuses = [v["run"]["status"] for v in doc["variants"] if v["status"] == "ok"]
    assert statuses == ["ok"] * 10
    assert doc["environment"]["gpu"]["sm"] == sm and doc["environment"]["run"]["block"] == [1, 1, 1]


def test_aot_launch_computes_what_jit_launch_does(sm):
    """Our launch of the audited cubin (block (1,1,1), pointer/shape/strides packing) against ct.launch."""
    if getattr(sys.modules.get("cuda.tile._load_libcuda"), "_tileprobe_fake", False):
        pytest.skip("the fake driver of an in-process audit is installed in this process; run this file alone")
    import cuda.tile as ct
    import torch

    from tileprobe.probe.define import load_probes
    from tileprobe.run.arrays import TorchArrays
    from tileprobe.run.launch import LoadedKernel, check_packing, core_stream, cuda_core, grid3, pack_arguments
    probe_path = os.path.join(EXAMPLES, "rms_norm.py")
    res = audited([probe_path], sm)
    rec = next(r for r in res.records if r.ok and r.case["ALLOW_TMA"] and r.hints["occupancy"] == 2)
    probe = load_probes(probe_path)[0]
    torch.cuda.init()
    cuda_core().Device(torch.cuda.current_device()).set_current()
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)   # one stream for inputs, both launches and the outputs
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = grid3(probe.grid(rec.case, rec.hints, num_sms))
    ours = probe.launch_args(rec.case, TorchArrays("cuda", seed=7))
    jit = list(probe.launch_args(rec.case, TorchArrays("cuda", seed=7)))
    kernel = LoadedKernel(res.cubins[rec.cubin_sha256], rec.symbol)
    packed = pack_arguments(rec.signature, ours, [p.size_bytes for p in kernel.params])
    check_packing(packed, kernel.params)
    kernel.launch(core_stream(stream.cuda_stream), grid, packed)
    ct.launch(stream, grid[:1], probe.resolve_kernel().replace_hints(occupancy=2), tuple(jit))
    torch.cuda.synchronize()
    # same compiler, same signature: the same numbers (a packing mistake would give garbage or NaN)
    assert not torch.isnan(ours[1].float()).any() and not torch.isnan(ours[3]).any()
    torch.testing.assert_close(ours[3], jit[3], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours[1].float(), jit[1].float(), rtol=8e-3, atol=1e-2)
    print("bitwise equal:", torch.equal(ours[1], jit[1]) and torch.equal(ours[3], jit[3]))
    info = kernel.driver_facts(rec.threads)
    assert info["driver_ctas_per_sm"] == rec.ctas_per_sm

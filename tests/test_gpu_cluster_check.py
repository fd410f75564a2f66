"""The CPU side of ``benchmarks/audit/gpu_cluster_check.py``: arguments, configurations, GPCs from observations, the
comparison with a fake driver answer, and its two NVRTC kernels (compiled here; nothing is launched)."""
import hashlib
import os
import random

import pytest

from tileprobe.model.arch import get_arch
from tileprobe.model.cubin import CubinInfo
from tileprobe.model.occupancy import theoretical_occupancy
from tileprobe.schema import VariantRecord

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def gcc():
    from support import load_script
    return load_script(os.path.join(ROOT, "benchmarks", "audit", "gpu_cluster_check.py"), register=True)


LAYOUT = [18, 18, 18, 16, 16, 16, 16, 14]      # 132 SMs in 8 GPCs of even size ≤ 18 (one H100-like die)


def test_arguments(gcc):
    a = gcc.parse_args(["--out", "o"])
    assert (a.out, a.bundle, a.random, a.seed, a.layout_launches) == ("o", None, 48, 20261201, 3)
    with pytest.raises(SystemExit):
        gcc.parse_args(["--out", "o", "--random", "-1"])
    with pytest.raises(SystemExit):
        gcc.parse_args([])


def test_random_configurations_are_launchable_and_cover_every_cluster_size(gcc):
    configs = gcc.random_configs(random.Random(7), 48, "sm_90")
    assert len(configs) == 48 and configs == gcc.random_configs(random.Random(7), 48, "sm_90")
    assert {c.size for c in configs} == {2, 4, 8, 16}
    assert all(c.threads % 32 == 0 and 32 <= c.threads <= 1024 and c.reg_cap in gcc.REG_CAPS for c in configs)
    sm90 = get_arch("sm_90")
    assert all(theoretical_occupancy(sm90, c.threads, c.reg_cap, c.dyn_smem_bytes).ctas_per_sm >= 1 for c in configs)


def test_divergent_configurations_hit_their_ctas_per_sm(gcc):
    sm90 = get_arch("sm_90")
    for cfg, (ctas, size) in zip(gcc.divergent_configs("sm_90"), gcc.DIVERGENT):
        occ = theoretical_occupancy(sm90, cfg.threads, 32, cfg.dyn_smem_bytes)
        assert (occ.ctas_per_sm, occ.limiter, cfg.size) == (ctas, "shared_memory", size), cfg
    assert gcc.targeted_smem("sm_90", 1) == 227 * 1024       # the opt-in maximum: 1 CTA/SM
    assert gcc.targeted_smem("sm_90", 2) == 115_712           # (233,472 // 2 − 1,024) in 128-B units


def _observations(layout, seed=3, launches=3):
    """A fake scheduler: each cluster of k CTAs lands on k random SMs of one random GPC with at least k SMs."""
    rng, first, gpcs = random.Random(seed), 0, []
    for s in layout:
        gpcs.append(list(range(first, first + s)))
        first += s
    obs = []
    for k in (16, 8, 4, 2):
        for launch in range(launches):
            for cluster in range(4 * sum(layout) // k):
                gpc = rng.choice([g for g in gpcs if len(g) >= k])
                obs += [((k, launch), cluster, sm) for sm in rng.sample(gpc, k)]
    return obs, gpcs


def test_gpcs_are_recovered_from_cluster_co_residency(gcc):
    obs, gpcs = _observations(LAYOUT)
    found = gcc.gpcs_from_observations(obs)
    assert [len(g) for g in found] == sorted(LAYOUT, reverse=True)
    assert sorted(found) == sorted(gpcs)


def _fake_driver_facts(layout, cfg, lie=0):
    """What a driver that follows tileprobe's rule on ``layout`` would answer (``lie`` added to its count)."""
    ctas = theoretical_occupancy(get_arch("sm_90"), cfg.threads, cfg.reg_cap, cfg.dyn_smem_bytes).ctas_per_sm
    return {"regs": cfg.reg_cap, "static_smem": 0, "ctas_per_sm": ctas,
            "clusters": sum(s * ctas // cfg.size for s in layout if s >= cfg.size) + lie}


def test_comparison_with_a_fake_driver(gcc):
    configs = gcc.divergent_configs("sm_90") + gcc.random_configs(random.Random(1), 40, "sm_90")
    rows = [gcc.compare(c, _fake_driver_facts(LAYOUT, c), LAYOUT, "sm_90") for c in configs]
    assert all(r["match"] for r in rows)
    one_per_sm_16 = next(r for r in rows if r["label"] == "1 CTA(s)/SM by shared memory, clusters of 16")
    # 7 GPCs of ≥ 16 SMs hold one cluster of 16 each; the naive 132 × 1 ÷ 16 says 8
    assert (one_per_sm_16["model"], one_per_sm_16["naive"], one_per_sm_16["naive_differs"]) == (7, 8, True)
    three_per_sm_8 = next(r for r in rows if r["label"] == "3 CTA(s)/SM by shared memory, clusters of 8")
    assert (three_per_sm_8["model"], three_per_sm_8["naive"]) == (47, 49)    # 3×(6+6+6) + 4×6 + 5
    s = gcc.summary(rows)
    assert s["divergent"]["rows"] == 12 and s["divergent"]["match"] == 12 and s["divergent"]["naive_differs"] >= 8
    assert s["random"] == {"rows": 40, "match": 40, "naive_differs": s["random"]["naive_differs"],
                           "pooled_match": s["random"]["pooled_match"], "errors": 0}
    # on the H200's groups (2-SM pairs) the earlier pooled rule and the model part: 96 vs 92 clusters of 4 at 3/SM
    h200 = [18, 18, 16, 16, 16, 16, 16, 8, 2, 2, 2, 2]
    cfg = next(c for c in configs if c.label == "3 CTA(s)/SM by shared memory, clusters of 4")
    row = gcc.compare(cfg, _fake_driver_facts(h200, cfg), h200, "sm_90")
    assert (row["model"], row["pooled"], row["naive"], row["match"]) == (92, 96, 99, True)
    bad = gcc.compare(configs[0], _fake_driver_facts(LAYOUT, configs[0], lie=1), LAYOUT, "sm_90")
    assert not bad["match"]
    err = gcc.compare(configs[0], {"regs": 32, "static_smem": 0, "error": "CUDA_ERROR_INVALID_VALUE"}, LAYOUT,
                      "sm_90")
    assert not err["match"] and "CUDA_ERROR_INVALID_VALUE" in gcc.table([err])


def test_bundle_configurations_are_the_cluster_variants_of_the_arch(gcc):
    def rec(n, arch="sm_90", status="ok"):
        return VariantRecord(kernel="pm", probe="p.py", case={}, hints={"num_ctas": n, "occupancy": 2}, arch=arch,
                             tileiras="V13.4.92", status=status, threads=256, registers=128, shared_bytes=115_912,
                             driver_shared_bytes=114_888, ctas_per_sm=2, cluster_dims=[n, 1, 1] if n > 1 else None,
                             cubin_sha256=f"sha{n}{arch}", symbol="sym")
    cfgs = gcc.bundle_configs([rec(1), rec(2), rec(16), rec(2, "sm_100"), rec(4, status="compile_error")], "sm_90")
    assert [(c.size, c.cluster_dims, c.record["cubin_sha256"]) for c in cfgs] == [
        (2, (2, 1, 1), "sha2sm_90"), (16, (16, 1, 1), "sha16sm_90")]
    assert cfgs[0].label == "pm num_ctas=2 occupancy=2" and cfgs[0].record["driver_shared_bytes"] == 114_888


def test_the_kernels_compile_with_nvrtc(gcc):
    layout = CubinInfo.from_bytes(gcc.nvrtc_cubin(gcc.LAYOUT_SOURCE, "sm_90", "gpc_probe.cu")).kernel("gpc_probe")
    assert layout.smem_driver_bytes == 0 and layout.cluster_dims is None
    regs = CubinInfo.from_bytes(gcc.nvrtc_cubin(gcc.REGS_SOURCE, "sm_90", "regs_probe.cu", 64)).kernel("regs_probe")
    assert regs.regs_per_thread == 64                     # the kernel needs more: the cap is what it gets


def test_the_nvcc_fallback_builds_the_same_register_cap(gcc):
    import nvidia  # the nvidia-cuda-nvcc wheel of the test extra
    nvcc = os.path.join(list(nvidia.__path__)[0], "cu13", "bin", "nvcc")
    assert os.path.exists(nvcc), f"no nvcc at {nvcc}: pip install -e '.[test]'"
    cubin = gcc.nvcc_cubin(gcc.REGS_SOURCE, "sm_90", "regs_probe.cu", 96, nvcc=nvcc)
    assert CubinInfo.from_bytes(cubin).kernel("regs_probe").regs_per_thread == 96


def test_the_launch_configuration_carries_the_cluster(gcc):
    from cuda.bindings import driver as cu
    drv = object.__new__(gcc.Driver)                     # no GPU here: only the struct building is checked
    drv.cu = cu
    cfg = drv.config(2112, 128, 116_736, (16, 1, 1))
    assert (cfg.gridDimX, cfg.blockDimX, cfg.sharedMemBytes, cfg.numAttrs) == (2112, 128, 116_736, 1)
    assert cfg.attrs[0].id == cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (cfg.attrs[0].value.clusterDim.x, cfg.attrs[0].value.clusterDim.y) == (16, 1)


class FakeDriver:
    """Answers like a driver that follows tileprobe's rules on :data:`LAYOUT` (SM ids numbered GPC by GPC)."""

    def __init__(self):
        self.fns, self.rng = {}, random.Random(5)

    def info(self):
        return {"name": "Fake H200", "arch": "sm_90", "sms": 132, "driver": 13000, "smem_per_sm_bytes": 233_472,
                "smem_optin_bytes": 232_448}

    def function(self, cubin, symbol):
        regs, static = (int(cubin.split(b":")[1]), int(cubin.split(b":")[2])) if cubin.startswith(b"fake:") else (0, 0)
        self.fns[symbol + str(len(self.fns))] = (regs, static)
        return symbol + str(len(self.fns) - 1)

    def func_attr(self, fn, name):
        return self.fns[fn][0] if name.endswith("NUM_REGS") else self.fns[fn][1]

    def prepare(self, fn, dyn, size):
        pass

    def ctas_per_sm(self, fn, threads, dyn):
        regs, static = self.fns[fn]
        return theoretical_occupancy(get_arch("sm_90"), threads, regs, static + dyn).ctas_per_sm

    def max_active_clusters(self, fn, threads, dyn, dims):
        k = dims[0] * dims[1] * dims[2]
        return sum(s * self.ctas_per_sm(fn, threads, dyn) // k for s in LAYOUT if s >= k)

    def run_layout_kernel(self, fn, n_ctas, size, dyn, spin_ns):
        _, gpcs = _observations(LAYOUT, launches=1)
        rows = []
        for cluster in range(n_ctas // size):
            sms = self.rng.sample(self.rng.choice([g for g in gpcs if len(g) >= size]), size)
            rows += [[sm, cluster, rank, 0xC0FFEE] for rank, sm in enumerate(sms)]
        import numpy as np
        return np.array(rows, dtype=np.uint32)


def test_the_whole_check_with_a_fake_driver_and_bundle(gcc, tmp_path, monkeypatch, capsys):
    from tileprobe.schema import write_json
    (tmp_path / "b" / "cubins").mkdir(parents=True)
    recs = []
    for n, regs, drv_smem in ((2, 128, 114_888), (16, 255, 116_160)):
        data = f"fake:{regs}:{drv_smem}".encode()
        sha = hashlib.sha256(data).hexdigest()   # a bundle names cubins by their SHA-256 (checked)
        r = VariantRecord(kernel="pm", probe="p.py", case={"T": 1}, hints={"num_ctas": n}, arch="sm_90",
                          tileiras="V13.4.92", status="ok", threads=256, registers=regs, shared_bytes=drv_smem + 1024,
                          driver_shared_bytes=drv_smem, ctas_per_sm=2 if regs == 128 else 1,
                          cluster_dims=[n, 1, 1], cubin_sha256=sha, symbol=f"k{n}")
        (tmp_path / "b" / "cubins" / f"{sha}.cubin").write_bytes(data)
        recs.append(r)
    write_json(recs, {}, str(tmp_path / "b" / "audit.json"))
    monkeypatch.setattr(gcc, "Driver", FakeDriver)
    monkeypatch.setattr(gcc, "compile_cubin", lambda src, arch, name, regs=None: f"fake:{regs or 16}:0".encode())
    rc = gcc.main(["--out", str(tmp_path / "o"), "--bundle", str(tmp_path / "b"), "--random", "40"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.startswith("Fake H200 (sm_90, 132 SMs, driver 13000): 8 GPCs of [18, 18, 18, 16, 16, 16, 16, 14] SMs "
                          "(132 seen; cluster sizes [16, 8, 4, 2]; 0 inconsistent CTA records)")
    import json
    result = json.loads((tmp_path / "o" / "cluster_check.json").read_text())
    assert result["summary"]["bundle"] == {"rows": 2, "match": 2, "naive_differs": 1, "pooled_match": 2,
                                           "errors": 0}
    assert result["summary"]["divergent"]["rows"] == 12 and result["summary"]["random"]["rows"] == 40
    assert all(r["reserve_reading_matches"] for r in result["rows"] if r["kind"] == "bundle")

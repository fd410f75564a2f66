"""GPU check of tileprobe's cluster model (``tileprobe/model/cluster.py``) against ``cuOccupancyMaxActiveClusters``.

On a GPU with thread-block clusters (sm_90+; written for the H200), with the CUDA driver, cuda-bindings, cuda-core,
numpy and NVRTC (or else nvcc) to compile two small kernels. No tileiras is needed: the cuTile cubins come from a
bundle made where tileiras is.

1. **GPC layout.** A tiny NVRTC kernel is launched in clusters of 16, 8, 4 and 2 CTAs (16 with
   ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``), one CTA per SM (dynamic shared memory above half an
   SM), each CTA spinning a cluster-dependent time; every CTA records ``%smid`` and its cluster. All CTAs of a
   cluster run in one GPC (CUDA C++ Programming Guide, "Thread Block Clusters"), so SMs that ever share a
   cluster are in one GPC: the connected components are the GPCs (union-find).
2. **Driver vs model.** For every cluster variant of the bundle's sm_90 cubins, for fixed configurations chosen
   so that SMs × CTAs/SM ÷ cluster size overcounts, and for ``--random`` random ones (threads, registers through
   an NVRTC kernel compiled with ``max_register_count``, dynamic shared memory, cluster sizes 2, 4, 8, 16), it asks
   ``cuOccupancyMaxActiveClusters`` and compares with tileprobe's model on the measured layout: a cluster's CTAs
   on distinct SMs of one GPC, Σ over GPCs with SMs ≥ size of floor(SMs × CTAs/SM ÷ size), CTAs/SM from
   ``tileprobe.model.occupancy`` with the driver's own register and shared counts. It also prints the naive
   SMs × CTAs/SM ÷ size and the earlier "pooled" rule (the same sum over every GPC, whatever its size: tileprobe's
   model before the H200 run of 2026-12-01 matched 52 of 74 with it and 74 of 74 with the distinct-SM rule). For
   bundle cubins it also checks the per-CTA residency and the driver's static shared size against the audit's
   ``driver_shared_bytes`` (the 1 KB reserve reading, sm_90).

Prints a table and a summary; writes ``OUT/cluster_check.json``. Exit status 1 when any driver answer differs from
the model. Usage (benchmarks/audit/run.sh OUT cluster runs it)::

    tileprobe audit examples/tilegym_persistent_matmul.py examples/tilegym_matmul.py --arch sm_90 \\
        --bundle out/cluster_bundle --no-store                                  # CPU machine with tileiras
    python benchmarks/audit/gpu_cluster_check.py --bundle out/cluster_bundle --out $OUT --random 48   # GPU machine
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tileprobe.model.arch import get_arch  # noqa: E402
from tileprobe.model.cluster import cluster_size, max_active_clusters  # noqa: E402
from tileprobe.model.occupancy import theoretical_occupancy  # noqa: E402

CLUSTER_SIZES = (2, 4, 8, 16)
REG_CAPS = (24, 32, 40, 64, 96, 128, 168, 200, 255)
#: (CTAs/SM, cluster size) pairs where SMs × CTAs/SM ÷ size overcounts on GPCs whose SM counts are not multiples
#: of size / gcd(size, CTAs/SM): always checked first.
DIVERGENT = ((1, 4), (1, 8), (1, 16), (3, 4), (3, 8), (3, 16), (5, 8), (5, 16), (7, 16), (2, 16), (1, 2), (6, 16))
MARKER = 0xC0FFEE

LAYOUT_SOURCE = r'''
extern "C" __global__ void gpc_probe(unsigned int* out, unsigned long long spin_ns) {
    unsigned int smid, cid, rank;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) {
        unsigned int i = blockIdx.x;
        out[4 * i] = smid; out[4 * i + 1] = cid; out[4 * i + 2] = rank; out[4 * i + 3] = 0xC0FFEEu;
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        unsigned long long wait = spin_ns * (1ull + (cid * 2654435761u) % 7u);
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < wait);
    }
}
'''

REGS_SOURCE = r'''
#define NACC 192
extern "C" __global__ void regs_probe(float* out, const float* in, int n) {
    float acc[NACC];
    #pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = in[(threadIdx.x + 37 * i) % n];
    #pragma unroll 1
    for (int it = 0; it < n; ++it) {
        float x = in[it];
        #pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = fmaf(acc[i], acc[(i + 1) % NACC], x);
    }
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < NACC; ++i) s += acc[i] * (float)(i + 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
'''


# --- CPU side: configurations, layout from observations, model, comparison ----------------------------------------

@dataclass
class Config:
    """One occupancy question: ``threads`` per CTA, the register cap of the NVRTC kernel (or a bundle cubin's
    symbol), ``dyn_smem_bytes`` of dynamic shared memory, clusters of ``size`` CTAs; ``kind``: bundle | divergent |
    random; ``label``: what it is."""
    kind: str
    label: str
    threads: int
    size: int
    dyn_smem_bytes: int = 0
    reg_cap: int | None = None
    cluster_dims: tuple = ()
    record: dict = field(default_factory=dict)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for cluster_check.json")
    p.add_argument("--bundle", help="a tileprobe bundle (tileprobe audit … --arch sm_90 --bundle DIR)")
    p.add_argument("--random", type=int, default=48, help="random configurations (default 48; at least 40 asked)")
    p.add_argument("--seed", type=int, default=20261201, help="random seed (default 20261201)")
    p.add_argument("--spin-us", type=float, default=50.0, help="base spin of the layout kernel per CTA, µs")
    p.add_argument("--layout-launches", type=int, default=3, help="launches per cluster size to find the GPCs")
    a = p.parse_args(argv)
    if a.random < 0:
        p.error(f"--random must be ≥ 0, got {a.random}")
    return a


def targeted_smem(arch: str, ctas: int, static_bytes: int = 0) -> int:
    """Dynamic shared memory (bytes) that makes shared memory allow exactly ``ctas`` CTAs/SM on ``arch``: the
    largest per-CTA size that still fits ``ctas`` (tileprobe's rule: size + 1 KB reserve, 128-B units)."""
    lim = get_arch(arch)
    per_cta = lim.smem_per_sm_bytes // ctas - lim.smem_reserved_per_cta_bytes
    per_cta -= per_cta % lim.smem_alloc_unit_bytes
    return max(0, min(per_cta, lim.max_smem_per_cta_bytes) - static_bytes)


def divergent_configs(arch: str) -> list[Config]:
    """Configurations whose CTAs/SM is set by shared memory (128 threads, 32 registers) at the :data:`DIVERGENT`
    pairs."""
    return [Config("divergent", f"{c} CTA(s)/SM by shared memory, clusters of {k}", 128, k,
                   targeted_smem(arch, c), 32) for c, k in DIVERGENT]


def random_configs(rng: random.Random, n: int, arch: str) -> list[Config]:
    """``n`` random launchable configurations: threads (multiples of 32), a register cap from :data:`REG_CAPS`,
    dynamic shared memory (half aimed at a CTAs/SM, half uniform up to the opt-in maximum), cluster size from
    :data:`CLUSTER_SIZES`. A draw that cannot launch (model: 0 CTAs/SM) is drawn again."""
    lim, out = get_arch(arch), []
    while len(out) < n:
        threads, cap, size = 32 * rng.randint(1, 32), rng.choice(REG_CAPS), rng.choice(CLUSTER_SIZES)
        if rng.random() < 0.5:
            smem = targeted_smem(arch, rng.randint(1, 12))
        else:
            smem = rng.randint(0, lim.max_smem_per_cta_bytes)
        if theoretical_occupancy(lim, threads, cap, smem).ctas_per_sm == 0:
            continue
        out.append(Config("random", f"random #{len(out) + 1}", threads, size, smem, cap))
    return out


def bundle_configs(records, arch: str) -> list[Config]:
    """A configuration per compiled cluster variant (cluster size > 1) of ``arch`` in the bundle's records."""
    out = []
    for r in records:
        size = cluster_size(r.cluster_dims)
        if r.ok and r.arch == arch and size > 1:
            label = " ".join([r.kernel, *(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()])])
            out.append(Config("bundle", label, int(r.threads), size, 0, None, tuple(r.cluster_dims),
                              {"cubin_sha256": r.cubin_sha256, "symbol": r.symbol, "ctas_per_sm": r.ctas_per_sm,
                               "registers": r.registers, "driver_shared_bytes": r.driver_shared_bytes}))
    return out


def gpcs_from_observations(observations) -> list[list[int]]:
    """GPCs as sorted SM-id lists from (launch, cluster, smid) observations: SMs that ran CTAs of one cluster are
    joined (union-find); largest GPC first."""
    parent: dict[int, int] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    clusters: dict[tuple, list[int]] = {}
    for launch, cluster, smid in observations:
        clusters.setdefault((launch, cluster), []).append(smid)
        find(smid)
    for sms in clusters.values():
        for s in sms[1:]:
            parent[find(s)] = find(sms[0])
    groups: dict[int, list[int]] = {}
    for s in parent:
        groups.setdefault(find(s), []).append(s)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g[0]))


def model(sms_per_gpc, ctas_per_sm: int, size: int) -> dict:
    """tileprobe's count (distinct SMs) and the two others it is compared with, for clusters of ``size`` at
    ``ctas_per_sm``: the naive count and the earlier pooled rule (module doc)."""
    return {"model": max_active_clusters(sms_per_gpc, ctas_per_sm, size),
            "naive": sum(sms_per_gpc) * ctas_per_sm // size,
            "pooled": sum(s * ctas_per_sm // size for s in sms_per_gpc)}


def compare(cfg: Config, facts: dict, sms_per_gpc, arch: str) -> dict:
    """One table row: the driver's facts (``regs``, ``static_smem``, ``ctas_per_sm``, ``clusters`` or ``error``)
    against tileprobe's per-CTA residency and cluster model on ``sms_per_gpc``."""
    occ = theoretical_occupancy(get_arch(arch), cfg.threads, facts["regs"],
                                facts["static_smem"] + cfg.dyn_smem_bytes)
    row = {**asdict(cfg), **facts, "model_ctas_per_sm": occ.ctas_per_sm, "limiter": occ.limiter,
           **model(sms_per_gpc, occ.ctas_per_sm, cfg.size)}
    row["match"] = facts.get("clusters") == row["model"] and facts.get("ctas_per_sm") == occ.ctas_per_sm
    row["naive_differs"] = facts.get("clusters") is not None and facts["clusters"] != row["naive"]
    return row


def summary(rows: list[dict]) -> dict:
    """Counts per kind: rows, matches, rows where the naive count differs from the driver's, matches of the earlier
    pooled rule, driver errors."""
    out = {}
    for kind in ("bundle", "divergent", "random"):
        sel = [r for r in rows if r["kind"] == kind]
        out[kind] = {"rows": len(sel), "match": sum(r["match"] for r in sel),
                     "naive_differs": sum(r["naive_differs"] for r in sel),
                     "pooled_match": sum(r.get("clusters") == r["pooled"] for r in sel),
                     "errors": sum(1 for r in sel if r.get("error"))}
    return out


def table(rows: list[dict]) -> str:
    """Plain-text table (no dependency beyond the standard library)."""
    head = ("kind", "what", "thr", "regs", "smem B", "k", "CTA/SM model/driver", "naive", "pooled", "model", "driver",
            "ok")
    lines = ["  ".join(head)]
    for r in rows:
        lines.append("  ".join(str(x) for x in (
            r["kind"], r["label"][:64], r["threads"], r["regs"], r["static_smem"] + r["dyn_smem_bytes"], r["size"],
            f"{r['model_ctas_per_sm']}/{r.get('ctas_per_sm')}", r["naive"], r["pooled"], r["model"],
            r.get("clusters") if not r.get("error") else r["error"], "yes" if r["match"] else "NO")))
    return "\n".join(lines)


# --- GPU side --------------------------------------------------------------------------------------------------------

class Driver:
    """The few CUDA driver calls this check makes (cuda-bindings), on device 0's primary context."""

    def __init__(self):
        from cuda.bindings import driver as cu
        from tileprobe.run.launch import check_cu
        self.cu, self.ok = cu, check_cu
        self.ok(cu.cuInit(0), "cuInit")
        self.dev = self.ok(cu.cuDeviceGet(0), "cuDeviceGet")
        self.ctx = self.ok(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.ok(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self._keep = []

    def attr(self, name: str) -> int:
        return self.ok(self.cu.cuDeviceGetAttribute(getattr(self.cu.CUdevice_attribute, name), self.dev), name)

    def info(self) -> dict:
        name = self.ok(self.cu.cuDeviceGetName(128, self.dev), "cuDeviceGetName")
        cc = (self.attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
              self.attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
        return {"name": name.split(b"\0")[0].decode(), "arch": f"sm_{cc[0]}{cc[1]}",
                "sms": self.attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                "driver": self.ok(self.cu.cuDriverGetVersion(), "cuDriverGetVersion"),
                "smem_per_sm_bytes": self.attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
                "smem_optin_bytes": self.attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")}

    def function(self, cubin: bytes, symbol: str):
        import numpy as np
        image = np.frombuffer(cubin, dtype=np.uint8).copy()
        self._keep.append(image)
        module = self.ok(self.cu.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
        return self.ok(self.cu.cuModuleGetFunction(module, symbol.encode()), f"cuModuleGetFunction({symbol})")

    def func_attr(self, fn, name: str) -> int:
        return self.ok(self.cu.cuFuncGetAttribute(getattr(self.cu.CUfunction_attribute, name), fn), name)

    def prepare(self, fn, dyn_smem: int, size: int) -> None:
        """Allow ``dyn_smem`` bytes of dynamic shared memory and, above 8, non-portable cluster sizes."""
        fa = self.cu.CUfunction_attribute
        self.ok(self.cu.cuFuncSetAttribute(fn, fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(dyn_smem)),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        self.ok(self.cu.cuFuncSetAttribute(fn, fa.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                           1 if size > 8 else 0), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE)")

    def config(self, grid_ctas: int, threads: int, dyn_smem: int, dims):
        cu = self.cu
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = int(grid_ctas), 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = int(threads), 1, 1
        cfg.sharedMemBytes = int(dyn_smem)
        at = cu.CUlaunchAttribute()
        at.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        x, y, z = (tuple(dims) + (1, 1, 1))[:3]
        at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z = int(x), int(y), int(z)
        cfg.attrs, cfg.numAttrs = [at], 1
        return cfg

    def max_active_clusters(self, fn, threads: int, dyn_smem: int, dims) -> int:
        size = cluster_size(dims)
        cfg = self.config(size * self.attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"), threads, dyn_smem, dims)
        return self.ok(self.cu.cuOccupancyMaxActiveClusters(fn, cfg), "cuOccupancyMaxActiveClusters")

    def ctas_per_sm(self, fn, threads: int, dyn_smem: int) -> int:
        return self.ok(self.cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, int(threads), int(dyn_smem)),
                       "cuOccupancyMaxActiveBlocksPerMultiprocessor")

    def run_layout_kernel(self, fn, n_ctas: int, size: int, dyn_smem: int, spin_ns: int):
        """Launch ``gpc_probe`` (block 32) and return its (smid, cluster id, rank, marker) rows."""
        import numpy as np
        cu, nbytes = self.cu, 16 * n_ctas
        buf = self.ok(cu.cuMemAlloc(nbytes), "cuMemAlloc")
        self.ok(cu.cuMemsetD8(buf, 0, nbytes), "cuMemsetD8")
        args = [np.array([int(buf)], dtype=np.uint64), np.array([spin_ns], dtype=np.uint64)]
        params = np.array([a.ctypes.data for a in args], dtype=np.uint64)
        cfg = self.config(n_ctas, 32, dyn_smem, (size, 1, 1))
        self.ok(cu.cuLaunchKernelEx(cfg, fn, params.ctypes.data, 0), "cuLaunchKernelEx(gpc_probe)")
        self.ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        host = np.zeros(4 * n_ctas, dtype=np.uint32)
        self.ok(cu.cuMemcpyDtoH(host.ctypes.data, buf, nbytes), "cuMemcpyDtoH")
        self.ok(cu.cuMemFree(buf), "cuMemFree")
        return host.reshape(n_ctas, 4)


def nvrtc_cubin(source: str, arch: str, name: str, max_regs: int | None = None) -> bytes:
    """Compile CUDA C++ ``source`` to a cubin for ``arch`` with NVRTC (cuda-core ``Program``)."""
    from cuda.core import Program, ProgramOptions
    opts = ProgramOptions(arch=arch, name=name, max_register_count=max_regs)
    return bytes(Program(source, "c++", opts).compile("cubin").code)


def nvcc_cubin(source: str, arch: str, name: str, max_regs: int | None = None, nvcc: str | None = None) -> bytes:
    """The same with ``nvcc -cubin`` (``nvcc`` on PATH or in $CUDA_HOME/bin unless given)."""
    import shutil
    import subprocess
    import tempfile
    nvcc = nvcc or shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, name), os.path.join(tmp, "k.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-o", out, src] + ([f"-maxrregcount={max_regs}"] if max_regs else [])
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        with open(out, "rb") as f:
            return f.read()


def compile_cubin(source: str, arch: str, name: str, max_regs: int | None = None) -> bytes:
    """NVRTC, else nvcc (a GPU host whose NVRTC does not match cuda-bindings may still have a toolkit)."""
    try:
        return nvrtc_cubin(source, arch, name, max_regs)
    except Exception as nvrtc_error:                 # noqa: BLE001 - any NVRTC failure: try nvcc, report both
        try:
            return nvcc_cubin(source, arch, name, max_regs)
        except Exception as nvcc_error:              # noqa: BLE001
            raise RuntimeError(f"cannot compile {name}: NVRTC: {nvrtc_error}; nvcc: {nvcc_error}") from nvcc_error


def measure_layout(drv: Driver, info: dict, args) -> dict:
    """GPCs from cluster co-residency (module doc, step 1)."""
    fn = drv.function(compile_cubin(LAYOUT_SOURCE, info["arch"], "gpc_probe.cu"), "gpc_probe")
    dyn = targeted_smem(info["arch"], 1)                  # one CTA per SM
    obs, bad, sizes = [], 0, []
    for size in sorted(CLUSTER_SIZES, reverse=True):
        try:
            drv.prepare(fn, dyn, size)
            for launch in range(args.layout_launches):
                n_ctas = size * max(2, 4 * info["sms"] // size)
                rows = drv.run_layout_kernel(fn, n_ctas, size, dyn, int(args.spin_us * 1000))
                for i, (smid, cid, rank, marker) in enumerate(rows.tolist()):
                    bad += marker != MARKER or rank != i % size or cid != i // size
                    obs.append(((size, launch), i // size, smid))
            sizes.append(size)
        except Exception as e:                            # e.g. 16 refused: the smaller sizes still group SMs
            print(f"layout: clusters of {size} failed: {e}", file=sys.stderr)
    gpcs = gpcs_from_observations(obs)
    return {"gpcs": gpcs, "sms_per_gpc": [len(g) for g in gpcs], "sms_seen": sum(len(g) for g in gpcs),
            "cluster_sizes": sizes, "inconsistent_ctas": bad, "dyn_smem_bytes": dyn}


def driver_facts(drv: Driver, cfg: Config, fn) -> dict:
    """What the driver says of one configuration; ``error`` instead of ``clusters`` when a query fails."""
    facts = {"regs": drv.func_attr(fn, "CU_FUNC_ATTRIBUTE_NUM_REGS"),
             "static_smem": drv.func_attr(fn, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")}
    dims = cfg.cluster_dims or (cfg.size, 1, 1)
    try:
        drv.prepare(fn, cfg.dyn_smem_bytes, cfg.size)
        facts["ctas_per_sm"] = drv.ctas_per_sm(fn, cfg.threads, cfg.dyn_smem_bytes)
        facts["clusters"] = drv.max_active_clusters(fn, cfg.threads, cfg.dyn_smem_bytes, dims)
    except Exception as e:
        facts["error"] = str(e)[:120]
    return facts


def run(args) -> int:
    drv = Driver()
    info = drv.info()
    t0 = time.time()
    layout = measure_layout(drv, info, args)
    print(f"{info['name']} ({info['arch']}, {info['sms']} SMs, driver {info['driver']}): "
          f"{len(layout['sms_per_gpc'])} GPCs of {layout['sms_per_gpc']} SMs ({layout['sms_seen']} seen; "
          f"cluster sizes {layout['cluster_sizes']}; {layout['inconsistent_ctas']} inconsistent CTA records)")
    functions: dict = {}
    configs = _bundle(args, info, drv, functions) + divergent_configs(info["arch"])
    configs += random_configs(random.Random(args.seed), args.random, info["arch"])
    rows = [_row(drv, cfg, layout, info, functions) for cfg in configs]
    print(table(rows))
    result = {"gpu": info, "layout": layout, "rows": rows, "summary": summary(rows),
              "seconds": round(time.time() - t0, 1), "command": " ".join(sys.argv)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cluster_check.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)
    print(json.dumps(result["summary"]))
    return 0 if all(r["match"] for r in rows) else 1


def _row(drv: Driver, cfg: Config, layout: dict, info: dict, functions: dict) -> dict:
    """Query the driver for one configuration and compare (bundle rows also check the audit's numbers)."""
    key = cfg.record["cubin_sha256"] if cfg.kind == "bundle" else ("regs", cfg.reg_cap)
    if key not in functions:
        functions[key] = drv.function(compile_cubin(REGS_SOURCE, info["arch"], "regs_probe.cu", cfg.reg_cap),
                                      "regs_probe")
    row = compare(cfg, driver_facts(drv, cfg, functions[key]), layout["sms_per_gpc"], info["arch"])
    if cfg.kind == "bundle":
        rec = cfg.record
        row["audit_ctas_per_sm_matches"] = rec["ctas_per_sm"] == row.get("ctas_per_sm")
        row["reserve_reading_matches"] = rec["driver_shared_bytes"] == row["static_smem"]
        row["match"] = row["match"] and row["audit_ctas_per_sm_matches"] and row["reserve_reading_matches"]
    return row


def _bundle(args, info: dict, drv: Driver, functions: dict) -> list[Config]:
    """The bundle's cluster variants for this GPU's arch, their cubins loaded into ``functions``."""
    if not args.bundle:
        return []
    from tileprobe.run.session import load_bundle
    records, _, get = load_bundle(args.bundle)
    configs = bundle_configs(records, info["arch"])
    for cfg in configs:
        sha = cfg.record["cubin_sha256"]
        if sha not in functions:
            functions[sha] = drv.function(get(sha), cfg.record["symbol"])
    if not configs:
        print(f"bundle {args.bundle}: no {info['arch']} cluster variant", file=sys.stderr)
    return configs


def main(argv=None) -> int:
    args = parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

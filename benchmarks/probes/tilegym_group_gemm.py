"""TileGym 1.5.1's persistent group GEMM (``tilegym.ops.cutile.group_gemm._group_gemm_kernel``) as TileGym launches
it: lists of A, B, C (fp16, four GEMMs of different shapes), tiles of its autotune lists, and the persistent
constant ``NUM_SM = SMs // num_ctas * occupancy`` that is also the grid — so ``args`` needs the hints and the SM
count (``args(case, arrays, *, arch, hints, num_sms)``, README "Writing a probe").

A case where spills on sm_90 grow from tileiras 13.3.36 to 13.4.92, and the MMA family changes. Compiles are
slow (about 20 s each on a loaded 2-core machine), so it lives here rather than in ``examples/``.

    tileprobe audit benchmarks/probes/tilegym_group_gemm.py --arch sm_90,sm_120 --tileiras 13.3.36,default
    tileprobe compare --kernel tilegym_group_gemm --tileiras 13.3.36 --to 13.4.92

Needs ``pip install tilegym`` (and torch, which TileGym imports).
"""
from tileprobe import Probe

#: (M, K, N) of each GEMM in the group (the shapes of TileGym's group GEMM test, fp16).
GROUP = [(1024, 1024, 1024), (2048, 1024, 512), (512, 2048, 1024), (1024, 512, 2048)]
#: SM count used when the audit has none for the arch (sm_120: RTX 5090, 170 SMs, NVIDIA's product page).
FALLBACK_SMS = {"sm_120": 170}


def programs(hints, num_sms, arch=None) -> int:
    """TileGym's grid and NUM_SM: ``SMs // num_ctas * occupancy``."""
    sms = num_sms or FALLBACK_SMS.get(arch, 132)
    return sms // (hints.get("num_ctas") or 1) * (hints.get("occupancy") or 1)


def args(case, arrays, *, arch=None, hints=None, num_sms=None):
    tm, tn, tk = case["TILE"]
    a = [arrays.randn((m, k), "float16") for m, k, _ in GROUP]
    b = [arrays.randn((k, n), "float16") for _, k, n in GROUP]
    c = [arrays.empty((m, n), "float16") for m, _, n in GROUP]
    return (a, b, c, tm, tn, tk, programs(hints or {}, num_sms, arch), False)


def grid(case, hints, num_sms, *, arch=None):
    return (programs(hints, num_sms, arch),)


def reference(case, a):
    return {2: [(x.float() @ y.float()).to(x.dtype) for x, y in zip(a[0], a[1])]}


probe = Probe(
    kernel="tilegym.ops.cutile.group_gemm:_group_gemm_kernel",
    args=args,
    cases={"TILE": [(128, 128, 128), (256, 256, 64)]},
    hints={"num_ctas": [1, 2], "occupancy": [1, 2]},
    grid=grid,
    reference=reference,
    name="tilegym_group_gemm",
)

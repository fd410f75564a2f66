"""TileGym's static persistent matmul (``tilegym.ops.cutile.matmul._static_persistent_matmul_kernel``), the shape of
the FlashInfer #4465 case: a persistent GEMM whose autotune crosses ``num_ctas`` (thread-block clusters) with
``occupancy``. fp16 4096 x 4096 x 4096, tile 128 x 128 x 64 (a TileGym sm_100 autotune entry), grid as TileGym
launches it: ``min(SMs // num_ctas, tiles) * occupancy`` cuTile blocks (a block is a cluster of ``num_ctas`` CTAs).

Two probes: the FlashInfer-like grid (num_ctas 1, 2 × occupancy 1, 2, 4, 8) and larger clusters (num_ctas 4, 8, 16
× occupancy 1, 2; 16 is above the portable cluster size 8) for ``benchmarks/audit/gpu_cluster_check.py``.

Needs ``pip install tilegym`` (and torch, which TileGym imports).

    tileprobe audit examples/tilegym_persistent_matmul.py --arch sm_90,sm_100
"""
from tileprobe import Probe

M = N = K = 4096
TILE = (128, 128, 64)


def args(case, arrays):
    tm, tn, tk = TILE
    return (arrays.randn((M, K), "float16"), arrays.randn((K, N), "float16"), arrays.empty((M, N), "float16"),
            M, N, K, tm, tn, tk, False, False, 8, -1)


def grid(case, hints, num_sms):
    ctas, occ = hints.get("num_ctas") or 1, hints.get("occupancy") or 1
    tiles = (M // TILE[0]) * (N // TILE[1])
    return (min(num_sms // ctas, tiles) * occ,)


def reference(case, a):
    return {2: (a[0].float() @ a[1].float()).to(a[2].dtype)}


def _probe(name, hints):
    return Probe(kernel="tilegym.ops.cutile.matmul:_static_persistent_matmul_kernel", args=args, hints=hints,
                 grid=grid, reference=reference, name=name)


probes = [
    _probe("tilegym_persistent_matmul", {"num_ctas": [1, 2], "occupancy": [1, 2, 4, 8]}),
    _probe("tilegym_persistent_matmul_clusters", {"num_ctas": [4, 8, 16], "occupancy": [1, 2]}),
]

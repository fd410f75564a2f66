"""TileGym's tiled matmul (``tilegym.ops.cutile.matmul._matmul_kernel``) as a tuning problem: fp16, M = N = K = 4096,
tile M/N/K × occupancy × num_ctas — 48 configurations after the constraint (six (TILE_M, TILE_N) pairs × two
TILE_K × occupancy 1, 2 × num_ctas 1, 2). SIZE is the problem; the tile sizes are tunable; the hints are always
tuned. The grid is TileGym's own (``_cutile_autotune_matmul``: one CTA per output tile, swizzled in the kernel).

Needs ``pip install tilegym`` (and torch, which TileGym imports).

    tileprobe tune examples/tilegym_matmul_tune.py --export tuned.json      # on the GPU machine
    tileprobe tune examples/tilegym_matmul_tune.py --dry-run --arch sm_90 --num-sms 132   # static stage, any CPU
"""
from tileprobe import Probe

#: (TILE_M, TILE_N) pairs kept: TileGym's sm_80/sm_90 tiles and their transposes.
TILE_PAIRS = {(64, 128), (128, 64), (128, 128), (128, 256), (256, 128), (256, 256)}


def args(case, arrays):
    m = n = k = case["SIZE"]
    return (arrays.randn((m, k), "float16"), arrays.randn((k, n), "float16"), arrays.empty((m, n), "float16"),
            case["TILE_M"], case["TILE_N"], case["TILE_K"])


def reference(case, a):
    return {2: (a[0].float() @ a[1].float()).to(a[2].dtype)}


def tile_pairs(case, hints):
    """Only the (TILE_M, TILE_N) pairs of TILE_PAIRS."""
    return (case["TILE_M"], case["TILE_N"]) in TILE_PAIRS


def tiles_divide(case, hints):
    """The problem splits into whole tiles (no padded edge tiles to time)."""
    return all(case["SIZE"] % case[t] == 0 for t in ("TILE_M", "TILE_N", "TILE_K"))


def grid(case, hints, num_sms):
    return (-(-case["SIZE"] // case["TILE_M"]) * -(-case["SIZE"] // case["TILE_N"]),)


probe = Probe(
    kernel="tilegym.ops.cutile.matmul:_matmul_kernel",
    args=args,
    cases={"SIZE": [4096], "TILE_M": [64, 128, 256], "TILE_N": [64, 128, 256], "TILE_K": [32, 64]},
    tunable=("TILE_M", "TILE_N", "TILE_K"),
    hints={"occupancy": [1, 2], "num_ctas": [1, 2]},
    constraints=[tile_pairs, tiles_divide],
    grid=grid,
    reference=reference,
    name="tilegym_matmul_tune",
)

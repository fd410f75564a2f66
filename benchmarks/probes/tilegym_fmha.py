"""TileGym's causal attention forward (``tilegym.ops.cutile.attention._fmha_kernel``) as a tuning problem, for
``bench_tune.py`` (a compile-heavy kernel with at least 24 configurations). fp16, batch 4 × 16 heads ×
4,096 tokens × head dim 128 (no grouped queries, ``EVEN_K``), tile M × tile N × occupancy × num_ctas: TILE_M 64,
128, 256 × TILE_N 32, 64, 128 × occupancy 1, 2 × num_ctas 1, 2 = 36 configurations. The arguments and the grid
are TileGym's own (``_cutile_autotune_fmha``: ``(ceil(q_len / TILE_M), batch × heads, 1)``); the reference is
torch's ``scaled_dot_product_attention`` in fp32.

Needs ``pip install tilegym`` (and torch, which TileGym imports).
"""
import math

from tileprobe import Probe

B, H, S, D = 4, 16, 4096, 128


def args(case, arrays):
    q = arrays.randn((B, H, S, D), "float16")
    k = arrays.randn((B, H, S, D), "float16")
    v = arrays.randn((B, H, S, D), "float16")
    return (q, k, v, arrays.empty((B, H, S, D), "float16"), 1.0 / math.sqrt(D), 0, D, H,
            case["TILE_M"], case["TILE_N"], 1, True, True)


def reference(case, a):
    import torch.nn.functional as F
    out = F.scaled_dot_product_attention(a[0].float(), a[1].float(), a[2].float(), is_causal=True)
    return {3: out.to(a[3].dtype)}


def grid(case, hints, num_sms):
    return (-(-S // case["TILE_M"]), B * H, 1)


probe = Probe(
    kernel="tilegym.ops.cutile.attention:_fmha_kernel",
    args=args,
    cases={"TILE_M": [64, 128, 256], "TILE_N": [32, 64, 128]},
    tunable=("TILE_M", "TILE_N"),
    hints={"occupancy": [1, 2], "num_ctas": [1, 2]},
    grid=grid,
    reference=reference,
    tolerance=2e-2,
    name="tilegym_fmha",
)

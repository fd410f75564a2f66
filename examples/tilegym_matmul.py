"""TileGym's tiled matmul kernel (``tilegym.ops.cutile.matmul._matmul_kernel``), imported from the installed
package: fp16 4096 x 4096 x 4096, the tile shapes of TileGym's own autotune lists, crossed with occupancy and
num_ctas (thread-block clusters exist from sm_90).

Needs ``pip install tilegym`` (and torch, which TileGym imports).

    tileprobe audit examples/tilegym_matmul.py --arch sm_90,sm_100
"""
from tileprobe import Probe

M = N = K = 4096


def args(case, arrays):
    tm, tn, tk = case["TILE"]
    return (arrays.randn((M, K), "float16"), arrays.randn((K, N), "float16"), arrays.empty((M, N), "float16"),
            tm, tn, tk)


def reference(case, a):
    return {2: (a[0].float() @ a[1].float()).to(a[2].dtype)}


probe = Probe(
    kernel="tilegym.ops.cutile.matmul:_matmul_kernel",
    args=args,
    cases={"TILE": [(128, 128, 32), (256, 256, 64)]},
    hints={"occupancy": [1, 2], "num_ctas": [1, 2]},
    grid=lambda case, hints, num_sms: ((M // case["TILE"][0]) * (N // case["TILE"][1]),),
    reference=reference,
    name="tilegym_matmul",
)

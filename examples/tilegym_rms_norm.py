"""TileGym's static persistent RMSNorm (the kernel of the "why 255 registers" thread), imported from the
installed ``tilegym`` package, at the thread's size: 16384 x 512 bf16, tile 4 x 512, grid = SMs x occupancy.

Needs ``pip install tilegym`` (and torch, which TileGym imports).

    tileprobe audit examples/tilegym_rms_norm.py --arch sm_90
"""
from tileprobe import Probe

M, N = 16384, 512


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"), 4, 512, 1e-6, 0.0)


def reference(case, a):
    x, w = a[0].float(), a[2].float()
    rstd = (x.pow(2).mean(dim=1, keepdim=True) + 1e-6).rsqrt()
    return {1: (x * rstd * w).to(a[0].dtype), 3: rstd.reshape(-1)}


probe = Probe(
    kernel="tilegym.ops.cutile.rms_norm:_rms_norm_kernel_static_persistent",
    args=args,
    hints={"occupancy": [1, 2, 4, 8, 16]},
    grid=lambda case, hints, num_sms: (num_sms * (hints.get("occupancy") or 1),),
    reference=reference,
    name="tilegym_rms_norm_static_persistent",
)

"""The persistent RMSNorm of ``rms_norm.py`` at a size worth timing: 524288 × 512 bf16.

``rms_norm.py`` keeps the thread's 16384 × 512, where one launch takes tens of µs on an H200 and launch overhead
dominates (FIELD_NOTES, "The GPU machine"). Here one launch moves 2 × 524288 × 512 × 2 B ≈ 1.07 GB (read X, write
Y), about 270 µs at 4 TB/s, so occupancy and TMA choices show up as bandwidth. Same kernel, tile 4 × 512 and hint
grid as ``rms_norm.py`` (the kernel and reference are taken from that file, so the two cannot drift apart).

    tileprobe run examples/rms_norm_large.py          # on the GPU machine
    tileprobe tune examples/rms_norm_large.py         # the fastest correct (ALLOW_TMA, occupancy), checked
"""
import os

from tileprobe import Probe
from tileprobe.probe.define import import_object

_BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rms_norm.py")
M, N = 524288, 512
TILE_M, TILE_N = 4, 512


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"),
            TILE_M, TILE_N, 1e-6, 0.0, case["ALLOW_TMA"])


probe = Probe(
    kernel=f"{_BASE}:rms_norm_static_persistent",
    args=args,
    cases={"ALLOW_TMA": [True, False]},
    tunable=("ALLOW_TMA",),            # for `tileprobe tune`: one search space, TMA on/off × occupancy
    hints={"occupancy": [1, 2, 4, 8, 16]},
    grid=lambda case, hints, num_sms: (num_sms * (hints.get("occupancy") or 1),),
    reference=import_object(f"{_BASE}:reference"),
    name="rms_norm_large",
)

"""Eight tile shapes of the small fp16 matmul in ``kernels.py`` × occupancy 1, 2, 4: a probe with many cases, for
the HTML report's screenshot (``benchmarks/audit/report_screenshots.py``) and its tests.

    tileprobe audit tests/data/probe_matmul_tiles.py --arch sm_90
"""
import os

from tileprobe import Probe

M = N = K = 2048
TILES = [(64, 64, 32), (64, 64, 64), (64, 128, 32), (128, 64, 32), (128, 128, 32), (128, 128, 64), (128, 256, 32),
         (256, 128, 32)]

probe = Probe(
    kernel=os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.py") + ":matmul",
    args=lambda case, arrays: (arrays.randn((M, K), "float16"), arrays.randn((K, N), "float16"),
                               arrays.empty((M, N), "float16"), *case["TILE"]),
    cases={"TILE": TILES},
    hints={"occupancy": [1, 2, 4]},
    grid=lambda case, hints, num_sms: (M // case["TILE"][0], N // case["TILE"][1]),
    name="matmul_tiles",
)

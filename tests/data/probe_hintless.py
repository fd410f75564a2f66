"""The hint-less reference's real-cubin cases, one kernel (the fp16 matmul of ``kernels.py``, 2048³) under one name
for two archs:

- sm_89, ``occupancy=[None, 2, 4, 8]``: the TornadoVM report's shape of probe (a hint-less build beside the hint
  values). With tileiras 13.4.92 the hint-less build of TILE 128×128×64 has 255 registers, 98,304 B shared and
  1 CTA/SM; occupancy 2 halves the shared memory (49,152 B, 2 CTAs/SM); occupancy 4 and 8 build the hint-less
  code again. TILE 128×128×32 at occupancy 4 spills (4 CTAs/SM, 128 registers).
- sm_100, ``num_ctas=2`` × ``occupancy=[1, 2]``: the FlashInfer #4465 candidate (clusters of 2 at occupancy 2),
  whose clusters' residency on a B200 depends on a GPC layout no source gives.

    tileprobe audit tests/data/probe_hintless.py --arch sm_89,sm_100
"""
import os

from tileprobe import Probe

M = N = K = 2048
KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.py") + ":matmul"


def _args(case, arrays):
    return (arrays.randn((M, K), "float16"), arrays.randn((K, N), "float16"), arrays.empty((M, N), "float16"),
            *case["TILE"])


def _grid(case, hints, num_sms):
    return (M // case["TILE"][0], N // case["TILE"][1])


probes = [
    Probe(kernel=KERNEL, args=_args, grid=_grid, name="matmul_hintless", archs=["sm_89"],
          cases={"TILE": [(128, 128, 64), (128, 128, 32)]}, hints={"occupancy": [None, 2, 4, 8]}),
    Probe(kernel=KERNEL, args=_args, grid=_grid, name="matmul_hintless", archs=["sm_100"],
          cases={"TILE": [(128, 128, 64)]}, hints={"num_ctas": [2], "occupancy": [1, 2]}),
]

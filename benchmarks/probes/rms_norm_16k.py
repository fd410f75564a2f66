"""The persistent RMSNorm of ``examples/rms_norm_large.py`` at 16,384 × 512 bf16 (the seed thread's size), for
``bench_tune.py`` (on the H200 tileprobe tune took 1.51× cuda.tile.tune's wall time there). Kernel, tile
(4 × 512), reference and search space (TMA on/off × occupancy 1, 2, 4, 8, 16) are those of ``rms_norm_large.py``.
"""
import dataclasses
import os

from tileprobe.probe.define import load_probes

_LARGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "rms_norm_large.py")
_base = load_probes(os.path.abspath(_LARGE))[0]
M, N = 16_384, 512


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"),
            4, 512, 1e-6, 0.0, case["ALLOW_TMA"])


probe = dataclasses.replace(_base, args=args, name="rms_norm_16k", source=None)

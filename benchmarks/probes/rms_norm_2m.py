"""The persistent RMSNorm of ``examples/rms_norm_large.py`` at 2,097,152 × 512 bf16, for ``bench_tune.py``.

The tune benchmark asks for an RMSNorm "at a size where one launch takes at least 0.5 ms". At 524,288 × 512 the best
configuration ran in 288.5 µs on the H200 (docs/gpu/run-rms-norm-large-2026-11-29.txt), so this file makes the
problem four times larger: one launch moves 2 × 2,097,152 × 512 × 2 B ≈ 4.3 GB, about 1.1 ms at 4 TB/s for the best
configuration. Kernel, tile (4 × 512), reference and search space (TMA on/off × occupancy 1, 2, 4, 8, 16) are
those of ``rms_norm_large.py``.
"""
import dataclasses
import os

from tileprobe.probe.define import load_probes

_LARGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "rms_norm_large.py")
_base = load_probes(os.path.abspath(_LARGE))[0]
M, N = 2_097_152, 512


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"),
            4, 512, 1e-6, 0.0, case["ALLOW_TMA"])


probe = dataclasses.replace(_base, args=args, name="rms_norm_2m", source=None)

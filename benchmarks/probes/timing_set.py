"""The variants ``benchmarks/timing/bench_timing.py`` times four ways: 14 variants of 5 kernels, bundled from the probes of
``examples/`` with fewer cases and hints (the kernels, arguments, grids and references are those files').

- ``timing_rms_norm_large``: persistent RMSNorm, 524,288 × 512 bf16 (``examples/rms_norm_large.py``), ALLOW_TMA ×
  occupancy 2, 8 — memory-bound;
- ``timing_tilegym_rms_norm``: TileGym's static persistent RMSNorm, 16,384 × 512 bf16 (``examples/tilegym_rms_norm.py``),
  occupancy 1, 4 — memory-bound, short launches;
- ``timing_matmul_256x128x64``, ``…_128x128x64``, ``…_256x128x32``: TileGym ``_matmul_kernel``, fp16 4096³
  (``examples/tilegym_matmul_tune.py``), the 4 configurations of ``docs/gpu/2026-12-01/bench-tune-matmul.txt`` with
  do_bench medians of 222–245 µs — compute-bound;
- ``timing_w4a16_gemm_sm90``: W4A16 GEMM 16,384 × 6,144 × 6,144 (``examples/w4a16_gemm_sm90.py``), GATHER=False
  LOOP=False × occupancy 1, 2 — compute-bound;
- ``timing_persistent_matmul``: TileGym's static persistent matmul, fp16 4096³
  (``examples/tilegym_persistent_matmul.py``), num_ctas 2 × occupancy 1, 2 — compute-bound, clusters.

    tileprobe audit benchmarks/probes/timing_set.py --arch sm_90 --bundle out/timing_bundle --no-store --format none
"""
import dataclasses
import os

from tileprobe.probe.define import load_probes

_EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def _from(file: str, name: str, index: int = 0, **changes):
    """The ``index``-th probe of ``examples/FILE`` renamed ``name``, with ``changes`` (cases, hints …)."""
    base = load_probes(os.path.abspath(os.path.join(_EXAMPLES, file)))[index]
    return dataclasses.replace(base, name=name, source=None, **changes)


def _matmul(tm: int, tn: int, tk: int, occupancy: list, num_ctas: list):
    return _from("tilegym_matmul_tune.py", f"timing_matmul_{tm}x{tn}x{tk}",
                 cases={"SIZE": [4096], "TILE_M": [tm], "TILE_N": [tn], "TILE_K": [tk]},
                 hints={"occupancy": occupancy, "num_ctas": num_ctas})


probes = [
    _from("rms_norm_large.py", "timing_rms_norm_large", cases={"ALLOW_TMA": [True, False]},
          hints={"occupancy": [2, 8]}),
    _from("tilegym_rms_norm.py", "timing_tilegym_rms_norm", hints={"occupancy": [1, 4]}),
    _matmul(256, 128, 64, [2], [2]),
    _matmul(128, 128, 64, [1, 2], [1]),
    _matmul(256, 128, 32, [2], [2]),
    _from("w4a16_gemm_sm90.py", "timing_w4a16_gemm_sm90", cases={"GATHER": [False], "LOOP": [False]},
          hints={"occupancy": [1, 2]}),
    _from("tilegym_persistent_matmul.py", "timing_persistent_matmul", hints={"num_ctas": [2], "occupancy": [1, 2]}),
]

"""TileGym's tiled matmul (``tilegym.ops.cutile.matmul._matmul_kernel``) at fp16 4096³ over a large space, for
``bench_budget.py`` ("a ≥ 400-configuration space with --budget 30"): TILE_M, TILE_N, TILE_K each 3 values
× occupancy 1, 2, 4 × num_ctas 1, 2, 4 × opt_level 2, 3 = 486 configurations, no constraint (a tile the compiler or
the GPU cannot take is a failed candidate, as a user's space would have). Arguments, grid and reference are those
of ``examples/tilegym_matmul_tune.py``.

Needs ``pip install tilegym`` (and torch, which TileGym imports).
"""
import dataclasses
import os

from tileprobe.probe.define import load_probes

_BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tilegym_matmul_tune.py")
_base = load_probes(os.path.abspath(_BASE))[0]

probe = dataclasses.replace(
    _base,
    kernel="tilegym.ops.cutile.matmul:_matmul_kernel",   # the base's, named here as a user's probe names it
    cases={"SIZE": [4096], "TILE_M": [64, 128, 256], "TILE_N": [64, 128, 256], "TILE_K": [32, 64, 128]},
    hints={"occupancy": [1, 2, 4], "num_ctas": [1, 2, 4], "opt_level": [2, 3]},
    constraints=(), constraint=None, name="tilegym_matmul_486", source=None,
)

"""TileGym's tiled matmul at fp16 4096³ over a space of 648 configurations, for ``tune/bench_budget_seeds.py``
("`--budget 30` on a space of ≥ 600 configurations: pick ≤ 1.02× on at least 9 of 10 seeds"): the 486-configuration
space of ``tilegym_matmul_486.py`` with occupancy 1, 2, 3, 4 instead of 1, 2, 4 — TILE_M, TILE_N, TILE_K each 3
values × occupancy 4 × num_ctas 1, 2, 4 × opt_level 2, 3. No constraint: a tile the compiler or the GPU cannot take
is a failed candidate, as in a user's space.

Needs ``pip install tilegym`` (and torch, which TileGym imports).
"""
import dataclasses
import os

from tileprobe.probe.define import load_probes

_BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tilegym_matmul_tune.py")
_base = load_probes(os.path.abspath(_BASE))[0]

probe = dataclasses.replace(
    _base,
    kernel="tilegym.ops.cutile.matmul:_matmul_kernel",
    cases={"SIZE": [4096], "TILE_M": [64, 128, 256], "TILE_N": [64, 128, 256], "TILE_K": [32, 64, 128]},
    hints={"occupancy": [1, 2, 3, 4], "num_ctas": [1, 2, 4], "opt_level": [2, 3]},
    constraints=(), constraint=None, name="tilegym_matmul_648", source=None,
)

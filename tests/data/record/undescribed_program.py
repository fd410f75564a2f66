"""A program whose cuda.tile.tune searches tileprobe cannot fully describe (tests/test_hook_hostile.py), under
tests/data/record/fake_tune: one whose ``args_fn`` raises for one configuration (the program's own search fails
that one and picks among the rest) and whose configurations hold NaN, +inf, a 30-digit integer and nested data;
one whose ``grid_fn`` raises for every configuration; one of 3,000 configurations."""
import os
import sys
from types import SimpleNamespace

import cuda.tile as ct
import torch
from cuda.tile.tune import exhaustive_search

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels as k   # noqa: E402

N = 1024
x, y, z = torch.randn(N), torch.randn(N), torch.empty(N)
space = [SimpleNamespace(TILE=t, occupancy=o, scale=float("nan"), cap=float("inf"), seed=10 ** 30,
                         layout={"order": [1, 0], "swizzle": (t, None)}) for t in (256, 512, 1024) for o in (1, 2)]


def args_fn(cfg):
    if cfg.TILE == 256 and cfg.occupancy == 2:
        raise ValueError("this tile does not fit")
    return (x, y, z, cfg.TILE)


def grid(cfg):
    return (ct.cdiv(N, cfg.TILE), 1, 1)


result = exhaustive_search(space, None, grid, k.vadd, args_fn, lambda c: {"occupancy": c.occupancy}, quiet=True)
print(f"in part: pick TILE={result.best.config.TILE} occupancy={result.best.config.occupancy}")


def no_grid(cfg):
    raise ZeroDivisionError("no grid for this problem")


try:
    exhaustive_search(space, None, no_grid, k.vadd, args_fn, None, quiet=True)
except Exception as e:       # cuda.tile.tune: every configuration failed
    print(f"grid_fn for all: {type(e).__name__}")
big = [SimpleNamespace(TILE=256, occupancy=1, i=i) for i in range(3000)]
exhaustive_search(big, None, grid, k.vadd, lambda c: (x, y, z, c.TILE), None, quiet=True)
print("3,000 configurations: searched")

"""A program that autotunes a cuTile kernel the way TileGym does (tests/test_use.py), under
tests/data/record/fake_tune: ``cuda.tile.tune.exhaustive_search`` over ``SimpleNamespace`` configurations with
``grid_fn`` / ``args_fn`` / ``hints_fn``, the winner kept in a per-process dict keyed by the problem, then one
launch of the winner.

    python search_program.py [N ...]      # one search per problem size N (default 4096)

Prints, per problem, the pick (``result.best.config``), whether it is one of the program's own configuration
objects, and the output's check against torch.
"""
import os
import sys
from types import SimpleNamespace

import cuda.tile as ct
import torch
from cuda.tile.tune import exhaustive_search   # taken at import, as TileGym does

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels as k   # noqa: E402

_tune_cache: dict = {}


def configs():
    return [SimpleNamespace(TILE=t, occupancy=o) for t in (256, 512, 1024) for o in (1, 2)]


def vadd(x, y):
    z = torch.empty_like(x)
    n = x.shape[0]
    space = configs()
    key = (n, x.dtype)
    if key not in _tune_cache:
        with ct.compiler_timeout(5):
            result = exhaustive_search(space, None, lambda cfg: (ct.cdiv(n, cfg.TILE), 1, 1), k.vadd,
                                       lambda cfg: (x, y, z, cfg.TILE), lambda cfg: {"occupancy": cfg.occupancy},
                                       quiet=True)
        best = result.best.config
        own = any(best is c for c in space)
        _tune_cache[key] = best
        print(f"n={n} pick TILE={best.TILE} occupancy={best.occupancy} own={own} "
              f"type={type(result).__module__}.{type(result).__name__}")
    best = _tune_cache[key]
    ct.launch(None, (ct.cdiv(n, best.TILE), 1, 1), k.vadd.replace_hints(occupancy=best.occupancy),
              (x, y, z, best.TILE))
    return z


if __name__ == "__main__":
    torch.manual_seed(0)
    for n in [int(a) for a in sys.argv[1:]] or [4096]:
        x, y = torch.randn(n), torch.randn(n)
        z = vadd(x, y)
        print(f"n={n} check {'ok' if torch.equal(z, x + y) else 'WRONG'}")

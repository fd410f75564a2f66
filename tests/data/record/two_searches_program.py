"""A program with two searching kernels (tests/test_use_coverage.py), under tests/data/record/fake_tune: ``vadd``
over TILE × occupancy and ``scale_rows`` over TM, each searched once per problem with
``cuda.tile.tune.exhaustive_search`` and launched ``LAUNCHES`` times with its pick.

    python two_searches_program.py [N ...]      # vadd's problem sizes (default 4096); scale_rows: one problem

Prints each pick as ``vadd n=4096 pick TILE=1024 occupancy=1`` / ``scale_rows pick TM=32``.
"""
import os
import sys
from types import SimpleNamespace

import cuda.tile as ct
import torch
from cuda.tile.tune import exhaustive_search

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels as k   # noqa: E402

LAUNCHES = 3


def vadd(n):
    x, y = torch.randn(n), torch.randn(n)
    z = torch.empty_like(x)
    space = [SimpleNamespace(TILE=t, occupancy=o) for t in (256, 512, 1024) for o in (1, 2)]
    best = exhaustive_search(space, None, lambda c: (ct.cdiv(n, c.TILE), 1, 1), k.vadd, lambda c: (x, y, z, c.TILE),
                             lambda c: {"occupancy": c.occupancy}, quiet=True).best.config
    print(f"vadd n={n} pick TILE={best.TILE} occupancy={best.occupancy}")
    for _ in range(LAUNCHES):
        ct.launch(None, (ct.cdiv(n, best.TILE), 1, 1), k.vadd.replace_hints(occupancy=best.occupancy),
                  (x, y, z, best.TILE))


def scale_rows():
    x = torch.randn(512, 64).half()
    y = torch.empty_like(x)
    space = [SimpleNamespace(TM=tm) for tm in (16, 32, 64)]
    best = exhaustive_search(space, None, lambda c: (512 // c.TM, 1, 1), k.scale_rows,
                             lambda c: (x, y, 2.0, c.TM, 64), quiet=True).best.config
    print(f"scale_rows pick TM={best.TM}")
    for _ in range(LAUNCHES):
        ct.launch(None, (512 // best.TM, 1, 1), k.scale_rows, (x, y, 2.0, best.TM, 64))


if __name__ == "__main__":
    torch.manual_seed(0)
    for n in [int(a) for a in sys.argv[1:]] or [4096]:
        vadd(n)
    scale_rows()

"""A program that searches a float32 row sum over its chunk size TN (tests/test_bit_exact.py), under
tests/data/record/fake_tune: one ``cuda.tile.tune.exhaustive_search`` over TN in 64, 128, 256 (the first, 64, is
its default), then prints its pick."""
import os
import sys
from types import SimpleNamespace

import torch
from cuda.tile.tune import exhaustive_search

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sum_kernels as k   # noqa: E402

if __name__ == "__main__":
    torch.manual_seed(0)
    x, out = torch.randn(64, 1024), torch.empty(64)
    space = [SimpleNamespace(TN=tn) for tn in (64, 128, 256)]
    best = exhaustive_search(space, None, lambda c: (64, 1, 1), k.row_sum, lambda c: (x, out, c.TN),
                             quiet=True).best.config
    print(f"row_sum pick TN={best.TN}")

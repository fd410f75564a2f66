"""Runs the ops of ``autotune_pkg`` (tests/test_use_autotune.py) under tests/data/record/fake_tune.

    python autotune_program.py [N ...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from autotune_pkg import ops  # noqa: E402

if __name__ == "__main__":
    torch.manual_seed(0)
    for n in [int(a) for a in sys.argv[1:]] or [4096]:
        ops.run(n)

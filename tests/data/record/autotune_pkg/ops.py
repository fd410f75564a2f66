"""Two ops tuned through :func:`autotune_pkg.autotune.autotune`: ``add_nf`` (``flush_l2=False``,
``single_run_timeout_sec=30``) and ``add_bench`` (a ``benchmark_fn`` of its own)."""
import os
import sys
from types import SimpleNamespace

import cuda.tile as ct
import torch

from autotune_pkg.autotune import autotune, cdiv

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kernels as k  # noqa: E402

CONFIGS = [SimpleNamespace(TILE=t, occupancy=o) for t in (256, 512, 1024) for o in (1, 2)]


def _grid(cfg, x, y, z):
    return (cdiv(x.shape[0], cfg.TILE), 1, 1)


def _args(cfg, x, y, z):
    return (x, y, z, cfg.TILE)


def _hints(cfg):
    return {"occupancy": cfg.occupancy}


def _launch(cfg, x, y, z):
    ct.launch(None, (cdiv(x.shape[0], cfg.TILE), 1, 1), k.vadd.replace_hints(occupancy=cfg.occupancy),
              (x, y, z, cfg.TILE))
    return z


def my_benchmark(stream, grid, kernel, args):
    """The program's own timer (as a ``benchmark_fn`` would be)."""
    return 1.0


@autotune(k.vadd, CONFIGS, _grid, _args, _hints, key_fn=lambda x, y, z: ("nf", x.shape[0]), flush_l2=False,
          single_run_timeout_sec=30)
def add_nf(cfg, x, y, z):
    return _launch(cfg, x, y, z)


@autotune(k.vadd, CONFIGS, _grid, _args, _hints, key_fn=lambda x, y, z: ("bench", x.shape[0]), benchmark_fn=my_benchmark)
def add_bench(cfg, x, y, z):
    return _launch(cfg, x, y, z)


def run(n):
    x, y = torch.randn(n), torch.randn(n)
    for op in (add_nf, add_bench):
        z = op(x, y, torch.empty_like(x))
        print(f"{op.__name__} n={n} check {'ok' if torch.equal(z, x + y) else 'WRONG'}")

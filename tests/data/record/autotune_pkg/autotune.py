"""``autotune(...)``: a decorator in the shape of the coming ``cuda.tile.tune.autotune``: the search space, grid, args
and hints functions, and keyword arguments passed on to the tuner. ``exhaustive_search`` is bound by name here, at
import, before any tileprobe hook wraps cuda.tile.tune (the hook must rebind this module's name).

The tuner call passes ``flush_l2`` and ``single_run_timeout_sec`` (cuda-tile 1.7.0 takes both) and any ``extra``
keyword arguments (``benchmark_fn``, ``context_fn``, as the decorator will add): cuda-tile 1.7.0 rejects those with a
TypeError, and the decorated op then falls back to its first configuration, saying so.
"""
import functools

import cuda.tile as ct
from cuda.tile.tune import exhaustive_search     # bound by name at import, as the decorator's module does


def autotune(kernel, configs, grid_fn, args_fn, hints_fn=None, *, key_fn, flush_l2=True,
             single_run_timeout_sec=None, **extra):
    """Decorate ``launch(cfg, *args)``: the first call per ``key_fn(*args)`` searches ``kernel`` over ``configs`` and
    keeps the pick; every call launches with it."""
    def wrap(launch_with):
        picks = {}

        @functools.wraps(launch_with)
        def op(*args):
            key = key_fn(*args)
            if key not in picks:
                try:
                    result = exhaustive_search(configs, None, lambda c: grid_fn(c, *args), kernel,
                                               lambda c: args_fn(c, *args),
                                               (lambda c: hints_fn(c)) if hints_fn else None, quiet=True,
                                               flush_l2=flush_l2, single_run_timeout_sec=single_run_timeout_sec,
                                               **extra)
                    picks[key] = result.best.config
                except TypeError as e:
                    print(f"{launch_with.__name__}: search failed ({e}); first configuration")
                    picks[key] = configs[0]
                cfg = picks[key]
                print(f"{launch_with.__name__} key={key} pick TILE={cfg.TILE} occupancy={cfg.occupancy}")
            return launch_with(picks[key], *args)
        return op
    return wrap


def cdiv(a, b):
    return ct.cdiv(a, b)

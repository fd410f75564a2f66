"""The order compiles start in: the ones likely to take longest first (longest-processing-time-first scheduling).

A pool of ``jobs`` workers takes variants in the order it is given them. When the slowest compiles come last in
the plan's order (a probe's tile sizes usually grow along its lists), they start after the others and the stage
ends one slow compile after the rest: measured on one H100 device machine (16 CPUs, tileiras 13.4.92, 2026-12-05,
``benchmarks/tune/bench_warm_race.py --cutile``, docs/LOG.md §61), TileGym's causal FMHA compiled its 36 variants in
11.5 s although they added up to 70.1 s of worker time (4.4 s on 16 workers) and the slowest, its two TILE_M=256
TILE_N=128 variants, took 7.05 s each; its matmul, 6.0 s for 34.9 s of work whose slowest (TILE 256×256×64) took
3.1 s. Started first, a slow compile overlaps the many short ones.

Nothing is known of a variant's compile time before its first compile, so the order is a guess from what usually
makes tileiras work longer, read from those runs: larger tiles (the product of the case's whole-number values:
a kernel's constants, e.g. TILE_M × TILE_N × TILE_K), then fewer CTAs per SM asked (``occupancy``: more registers
per thread, RMSNorm's occupancy-1 TMA variant took 3.7 s beside 0.2 s for the others), then a higher
``opt_level``. A wrong guess costs only the order: every variant is still compiled, and results are reported in
the plan's order (:mod:`tileprobe.audit.pipeline`).
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from tileprobe.compile.job import Variant

_HINTS = ("occupancy", "opt_level")   # the two hints the guess reads (cuTile's names)


def predicted_cost(v: Variant) -> tuple[float, float, float]:
    """A sort key, smallest first = likely slowest compile first: (−log₂ of the case's tile product,
    occupancy, −opt_level). The product is of the case's whole numbers and those inside its tuples and lists, one
    level deep (:func:`_whole_numbers`); whole numbers ≤ 1 and booleans do not count. A hint the variant does not
    set counts as occupancy 1 (cuTile's default is "auto", the compiler's choice: placed with the heaviest) and
    opt_level 3 (cuTile's default: ``ct.kernel``'s docstring, cuda-tile 1.7.0)."""
    size = sum(math.log2(x) for x in _whole_numbers(v.case_dict.values()))
    occupancy, opt_level = (v.hints_dict.get(name) for name in _HINTS)
    return (-size, float(occupancy) if isinstance(occupancy, (int, float)) else 1.0,
            -float(opt_level) if isinstance(opt_level, (int, float)) else -3.0)


def _whole_numbers(values) -> list[int]:
    """The absolute values above 1 of the whole numbers among ``values`` and inside their tuples and lists (a tile
    written ``TILE=(256, 256, 64)``, as TileGym's matmul example does), booleans left out."""
    out: list[int] = []
    for x in values:
        if isinstance(x, (tuple, list)):
            out += _whole_numbers(y for y in x if not isinstance(y, (tuple, list)))
        elif isinstance(x, int) and not isinstance(x, bool) and abs(x) > 1:
            out.append(abs(x))
    return out


def longest_first(variants: Iterable[Variant]) -> list[Variant]:
    """``variants`` (read whole) sorted by :func:`predicted_cost`; ties keep their given order (a stable sort)."""
    return sorted(variants, key=predicted_cost)

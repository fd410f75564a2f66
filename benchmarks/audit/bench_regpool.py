"""Time of the SASS read of one cubin, in its parts (a compile job's time beyond tileiras is mostly this):
``nvdisasm -c``, the traits parse (:func:`tileprobe.model.sass.parse_nvdisasm`) and the register-pool check
(:func:`tileprobe.model.sass.register_pool`: the listing parsed again and walked once per warp), each the best
of ``--repeat`` runs, in seconds, with the listing's size and the pool verdict.

    python benchmarks/audit/bench_regpool.py KERNEL.cubin [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _best(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None) -> int:
    from tileprobe.model import sass
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cubin")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    with open(a.cubin, "rb") as f:
        cubin = f.read()
    tool = sass.find_nvdisasm()
    t_dis, listing = _best(lambda: sass.disassemble(cubin), a.repeat)
    t_parse, traits = _best(lambda: sass.parse_nvdisasm(listing), a.repeat)
    kernel = traits.kernel(None)
    t_pool, pool = _best(lambda: sass.register_pool(cubin, listing, kernel.name, traits.target), a.repeat)
    print(f"{os.path.basename(a.cubin)}: {len(cubin):,} bytes, {listing.count(chr(10)):,} listing lines ({tool})")
    print(f"  nvdisasm {t_dis:.3f} s, traits parse {t_parse:.3f} s, register-pool check {t_pool:.3f} s "
          f"(verdict {pool.verdict}), best of {a.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

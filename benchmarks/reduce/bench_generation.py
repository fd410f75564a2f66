"""How long ``tileprobe reduce`` spends building candidates (no compile): one round's candidates of a synthetic
kernel of N lines, the time to the first batch, and how soon a budget that has run out stops the generation.

    python benchmarks/reduce/bench_generation.py [--lines 100 400 800] [--batch 4]

A round builds each candidate by copying the probe's syntax tree, editing it, cleaning dead code and unparsing it
(:func:`tileprobe.reduce.passes.candidates`); on a big kernel that is seconds per batch before anything compiles.
The budget is checked between two builds, so a reduction over its budget stops within one build, not one round.
Prints one line per size: statements, candidates built in the round, wall seconds for the round, for the first
batch, and for a generation whose budget has already run out.
"""
from __future__ import annotations

import argparse
import ast
import os
import time


def kernel(lines: int) -> str:
    """A probe whose kernel has ``lines`` statements: chains of loads, arithmetic and stores (every store an effect,
    so nothing is dead code and each statement is a deletion candidate)."""
    body = ["    i = ct.bid(0)"]
    for n in range((lines - 1) // 3):
        body += [f"    a{n} = ct.load(A, index=(i,), shape=(T,))", f"    b{n} = a{n} * {n + 1} + a{n}",
                 f"    ct.store(B, index=(i,), tile=b{n})"]
    return ("import cuda.tile as ct\nfrom tileprobe import Probe\nT = 128\n\n@ct.kernel\ndef k(A, B):\n"
            + "\n".join(body) + "\n\nprobe = Probe(kernel=k, args=lambda case, arrays: (1, 2), name='k')\n")


def measure(lines: int, batch: int) -> dict:
    from tileprobe.reduce.passes import candidates
    tree = ast.parse(kernel(lines))
    t0 = time.monotonic()
    first = None
    n = 0
    for _ in candidates(tree, {}):
        n += 1
        if n == batch:
            first = time.monotonic() - t0
    full = time.monotonic() - t0
    t1 = time.monotonic()
    stopped = list(candidates(tree, {}, stop=lambda: True))
    return {"statements": len(tree.body[3].body), "built": n, "round_s": full, "first_batch_s": first,
            "stopped_s": time.monotonic() - t1, "after_stop": len(stopped)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="*", default=[100, 400, 800])
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    print(f"# candidate generation, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for lines in a.lines:
        r = measure(lines, a.batch)
        print(f"{r['statements']} statements: {r['built']} candidates in {r['round_s']:.1f} s for the round, first "
              f"batch of {a.batch} in {r['first_batch_s'] or 0:.2f} s; a run-out budget stops it in "
              f"{r['stopped_s'] * 1000:.0f} ms ({r['after_stop']} built)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The SASS facts of many cubins, read one nvdisasm run per cubin (``sass_facts``, the audit's way until
2026-12-05) and in one batch (``sass_facts_many``: one raw run per target, identical code once): the CPU seconds of
nvdisasm (child processes) and of this process (parsing, the register-pool walk) for each, and whether every
result is equal.

    python benchmarks/audit/bench_sass_batch.py [--store STORE.sqlite | CUBIN ...]

With ``--store``: every cubin of a results store (e.g. one ``benchmarks/audit/bench_audit_pace.py``'s audit
filled, or ``tileprobe audit … --store S``), with its kernel's name; else the cubins given (default: tests/data's).
"""
from __future__ import annotations

import argparse
import glob
import os
import resource
import sqlite3
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def _cpu() -> tuple[float, float]:
    """(CPU s of finished child processes, CPU s of this process)."""
    c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime, s.ru_utime + s.ru_stime


def _items(args) -> list[tuple[bytes, str]]:
    from tileprobe.model.cubin import CubinInfo
    if args.store:
        with sqlite3.connect(args.store) as c:
            rows = c.execute("SELECT c.data, k.symbol FROM compiles k JOIN cubins c ON c.sha256 = k.cubin_sha256")
            return [(bytes(data), symbol or "") for data, symbol in rows]
    paths = args.cubins or sorted(glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.cubin"), recursive=True))
    return [(open(p, "rb").read(), CubinInfo.from_path(p).kernels[0].name) for p in paths]


def main(argv=None) -> int:
    from tileprobe.model.sass import sass_facts
    from tileprobe.model.sass_batch import sass_facts_many
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cubins", nargs="*")
    ap.add_argument("--store", help="read every cubin of this results store")
    items = _items(ap.parse_args(argv))
    c0 = _cpu()
    old = [sass_facts(cubin, symbol) for cubin, symbol in items]
    c1 = _cpu()
    new = sass_facts_many(items)
    c2 = _cpu()
    same = sum(o == n for o, n in zip(old, new))
    instructions = sum(s.instructions or 0 for s, _ in new)
    print(f"{len(items)} cubins, {instructions:,} instructions in their kernels; results equal: {same}/{len(items)}")
    print(f"one nvdisasm run per cubin: nvdisasm {c1[0] - c0[0]:.2f} s CPU, this process {c1[1] - c0[1]:.2f} s CPU")
    print(f"batched (raw runs by target): nvdisasm {c2[0] - c1[0]:.2f} s CPU, this process {c2[1] - c1[1]:.2f} s CPU")
    return 0 if same == len(items) else 1


if __name__ == "__main__":
    sys.exit(main())

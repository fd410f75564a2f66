"""The audit's overhead per batch of ``tileprobe reduce``: the first 4 candidates of the seed example's folded
variant checked (compiled) with a fresh store, then the same batch checked again by fresh Oracles on that store
(every variant from the store: loading the files and the store's lookups only), without and with the compilers
one after another.

    python benchmarks/reduce/bench_overhead.py [--out DIR]

Prints one line per check: seconds for the batch and the load average.
"""
import argparse
import ast
import os
import tempfile
import time

from tileprobe.reduce.engine import _normalized
from tileprobe.reduce.fold import fold_variant
from tileprobe.reduce.oracle import Oracle
from tileprobe.reduce.passes import candidates
from tileprobe.reduce.prop import parse_property
from tileprobe.store import Store
from tileprobe.toolchain import resolve_toolchains

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--out", default=None, help="work folder and store (default: a new temp folder)")
out = ap.parse_args().out or tempfile.mkdtemp(prefix="bench-overhead-")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
src = _normalized(ast.unparse(fold_variant(ast.parse(open(f"{ROOT}/examples/w4a16_gemm.py").read()), {"GATHER": True, "LOOP": True})))
cands = [c.source for c in candidates(ast.parse(src), {"occupancy": 2})][:4]
tcs = resolve_toolchains(["13.3.36", "13.4.92"])
work = os.path.join(out, "work")
os.makedirs(work, exist_ok=True)
store = Store.open(os.path.join(out, "store.sqlite"))
for label, want in (("compiled, unstaged", (True,)), ("from the store, unstaged", (True,)), ("from the store, staged", (True, False))):
    o = Oracle("sm_120", tcs, parse_property("occupancy honoured"), want, {"occupancy": 2}, work, store=store)
    t0 = time.monotonic()
    outs = o.check(cands)
    print(f"{label}: 4 candidates in {time.monotonic() - t0:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)

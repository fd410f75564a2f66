"""The race's intake of landed candidates, timed on the CPU: the launch facts (grids and runtime arguments) of
batches of landed candidates asked the way the race thread asks them (``launch_facts([Plan(problem, batch)],
num_sms)`` inside the tune's loader session, after the plan's load left an idle loader child of the probe file).

No compile and no GPU: each candidate gets a compile record made here with what the facts read (kernel, arch, hints,
a signature whose tile sizes are constants), as a compiled candidate would have. The plan cache is on, in a folder of
this run's own (as in a tune: the facts are kept, so each batch is of candidates not asked before).

    python benchmarks/tune/bench_intake.py [PROBE] [--batch 16] [--batches 4] [--num-sms 132] [--seed 0]
        [--cubin tests/data/cubins/matmul_sm_90.cubin]

Default probe: benchmarks/probes/tilegym_matmul_648.py (needs TileGym and torch on ``sys.path``). Prints the plan's
wall, then each intake's wall (and the dedupe's with ``--cubin``) and the mean.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "probes", "tilegym_matmul_648.py")


def _record(c, arch: str):
    from tileprobe.schema import VariantRecord
    hints = dict(c.config.hints)
    sig = [{"kind": "array"}] * 3 + [{"kind": "constant", "value": v} for _, v in c.config.tunables]
    return VariantRecord.from_dict({"kernel": "_matmul_kernel", "case": c.case, "arch": arch, "hints": hints,
                                    "code_sha256": "c" * 64, "cubin_sha256": "d" * 64,
                                    "effective_hints": hints, "signature": sig, "status": "ok",
                                    "tileiras": "13.4.92", "probe": "bench"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe", nargs="?", default=DEFAULT)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--num-sms", type=int, default=132)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--cubin", default=None,
                    help="a cubin to dedupe each candidate with as the race does (dedupe_one: its constant data "
                         "parsed per candidate), e.g. tests/data/cubins/matmul_sm_90.cubin; timed apart")
    ap.add_argument("--seed", type=int, default=0,
                    help="the candidates in a shuffled order, as a search lands them (-1: the space's order)")
    a = ap.parse_args()
    os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="bench_intake_"))
    os.environ["TILEPROBE_PLAN_CACHE"] = "1"
    from tileprobe.probe.contained import loader_sessions
    from tileprobe.tune.static import Candidate, Plan, dedupe_one, launch_facts, load_space
    path = os.path.abspath(a.probe)
    with loader_sessions():
        t0 = time.perf_counter()
        problems, errors = load_space([path])
        print(f"plan: {time.perf_counter() - t0:.2f} s, {sum(len(p.configs) for p in problems)} configurations"
              + (f"; errors: {errors}" if errors else ""))
        if errors:
            return 1
        problem = problems[0]
        cands = [Candidate(problem, cfg) for cfg in problem.configs]
        if a.seed >= 0:
            random.Random(a.seed).shuffle(cands)
        for c in cands:
            c.record = _record(c, a.arch)
        cubin = open(a.cubin, "rb").read() if a.cubin else None
        plan = Plan(problem, cands)
        walls, dedupes = [], []
        for b in range(a.batches):
            batch = cands[b * a.batch:(b + 1) * a.batch]
            t0 = time.perf_counter()
            facts = launch_facts([Plan(problem, batch)], a.num_sms)
            walls.append(time.perf_counter() - t0)
            if cubin is not None:
                t0 = time.perf_counter()
                for c in batch:
                    dedupe_one(plan, c, a.num_sms, lambda sha: cubin, facts.get(id(c)))
                dedupes.append(time.perf_counter() - t0)
            bad = [f for f in facts.values() if isinstance(f, Exception)]
            print(f"intake {b}: {len(batch)} candidates, {walls[-1]:.2f} s, {len(facts)} facts, {len(bad)} errors"
                  + (f" ({bad[0]})" if bad else "") + (f"; dedupe {dedupes[-1]:.3f} s" if dedupes else ""))
        from tileprobe.probe.contained import current_session
        session = current_session()
        kids = f"; loader children started {session.started}, reused {session.reused}" if session else ""
        print(f"mean intake: {sum(walls) / len(walls):.2f} s; load average {os.getloadavg()[0]:.1f}{kids}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

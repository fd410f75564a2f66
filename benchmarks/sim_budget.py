"""The budgeted search (tileprobe/tune/search.py) replayed on a recorded full tune, to compare search settings
without a GPU: each configuration's compile time and race median come from a full tune's JSON (``tileprobe tune
--json``, every configuration compiled and timed, e.g. bench_budget.py's ``full.json`` from the H200); compiles run
on ``--jobs`` fake workers (compile time + ``--overhead`` s each), a round starts ``--round-start`` s after it is
asked (the audit's own setup), a race costs ``--batch`` s per candidate per round of halving and times candidates
in order until its budget is spent (the rest skipped, as the real race). Prints, per seed, how many were compiled
and timed and the pick's median over the full tune's pick's, then how many seeds were within 1.02.

    python benchmarks/sim_budget.py FULL.json [--budget 30 --plan 9 --seeds 20] [--round1-share 0.5 --round-cap 64]
    python benchmarks/sim_budget.py docs/gpu/2026-12-03/s7a-full-486.json.gz --plan 10 --seeds 60   # the H200's
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tileprobe.tune import search as S  # noqa: E402
from tileprobe.tune.race import Entry, RaceOutcome  # noqa: E402
from tileprobe.tune.space import Config  # noqa: E402


def load(path: str):
    """The first problem's rows of a tune's JSON (``.json`` or gzip-ed ``.json.gz``): config -> (compile s, median
    µs, status)."""
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        p = json.load(f)["problems"][0]
    rows = {}
    for c in p["candidates"]:
        cfg = Config(tuple(c["config"]["case"].items()), tuple(c["config"]["hints"].items()))
        rows[cfg] = (c.get("compile_s") or 0.0, c.get("median_us"), c["status"])
    return rows


class Replay:
    def __init__(self, rows, a, t0: float):
        self.rows, self.a, self.now = rows, a, t0
        self.timed: set = set()
        self.compiled: set = set()
        self.by_label = {c.label: c for c in rows}

    def clock(self):
        return self.now

    def compile(self, batch, stop_at=None, at_least=0, room=None):
        self.now += self.a.round_start
        free = [self.now] * self.a.jobs
        reached, longest = [], 0.0
        for i, c in enumerate(batch):
            slot = min(range(self.a.jobs), key=lambda j: free[j])
            t = free[slot]
            if i >= at_least and ((stop_at is not None and t >= stop_at) or (room is not None and not room(i, t))):
                break
            dur = self.rows[c][0] + self.a.overhead
            free[slot] = t + dur
            longest = max(longest, self.rows[c][0])
            reached.append(c)
        self.now = max(free) if reached else self.now
        self.compiled |= set(reached)
        ok = [c.label for c in reached if self.rows[c][1]]
        return S.Compiled(ok, reached, longest, len(reached) - len(ok), {c.label: self.rows[c][0] for c in reached})

    def race(self, ids, budget_s):
        t0, entries, spent = self.now, [], 0.0
        for i in ids:
            if spent + self.a.batch > budget_s:
                entries.append(Entry(i, status="skipped"))
                continue
            spent += self.a.batch
            entries.append(Entry(i, samples=[self.rows[self.by_label[i]][1]]))
            self.timed.add(i)
        timed = [e for e in entries if e.samples]
        rounds_cost = self.a.batch * len(timed)     # the later rounds of halving: about as much again
        self.now = t0 + min(budget_s, spent + rounds_cost)
        if not timed:
            return RaceOutcome(entries, "no winner", None, [], "budget", [], self.now - t0, 0.0, 0.0)
        best = min(timed, key=lambda e: statistics.median(e.samples))
        for e in timed:
            e.status = "winner" if e is best else "eliminated"
        return RaceOutcome(entries, "winner", best.id, [best.id], "one survivor", [{"round": 1}], self.now - t0, 0, 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("full")
    ap.add_argument("--budget", type=float, default=30.0)
    ap.add_argument("--plan", type=float, default=9.0, help="s from the tune's start to round 1 (start-up + plan)")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--overhead", type=float, default=1.08,
                    help="s per compile job beyond tileiras (1.08: the H200's full tune of 2026-12-03)")
    ap.add_argument("--round-start", type=float, default=1.0)
    ap.add_argument("--batch", type=float, default=0.045,
                    help="s per candidate per race round (0.045: the H200's race of 49 matmul candidates took 4.4 s in "
                         "two rounds, 2026-12-03)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--round1-share", type=float, default=S.ROUND1_SHARE)
    ap.add_argument("--round-cap", type=int, default=None)
    ap.add_argument("--leaders", type=int, default=S.SearchSettings().leaders)
    a = ap.parse_args(argv)
    rows = load(a.full)
    configs = list(rows)
    full_best = min(c for c in configs if rows[c][1]) if False else min((c for c in configs if rows[c][1]),
                                                                       key=lambda c: rows[c][1])
    S.ROUND1_SHARE = a.round1_share
    ok = 0
    for seed in range(a.seeds):
        rep = Replay(rows, a, a.plan)
        settings = S.SearchSettings(jobs=a.jobs, seed=seed, round_cap=a.round_cap, leaders=a.leaders)
        out = S.BudgetedSearch(configs, rep.compile, rep.race, lambda c: c.label, settings, a.budget,
                               clock=rep.clock).run()
        pick = out.outcome.pick if out.outcome else None
        ratio = rows[rep.by_label[pick]][1] / rows[full_best][1] if pick else float("inf")
        ok += ratio <= 1.02
        print(f"seed {seed:2d}: rounds {len(out.rounds)}, compiled {len(rep.compiled):3d}, timed {len(rep.timed):3d}, "
              f"end {rep.now:5.1f} s, pick/full {ratio:.3f}")
    print(f"within 1.02: {ok} of {a.seeds} (budget {a.budget} s, plan {a.plan} s, round-1 share {a.round1_share}, "
          f"round cap {a.round_cap or 'default'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

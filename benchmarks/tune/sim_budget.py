"""The budgeted search (tileprobe/tune/search.py's SearchOrder) replayed on a recorded full tune, to compare search
settings without a GPU: each configuration's compile time and race median come from a full tune's JSON (``tileprobe
tune --json``, every configuration compiled and timed, e.g. bench_budget.py's ``full.json`` from the H200); compiles
run on ``--jobs`` fake workers (compile time + ``--overhead`` s each) from ``--plan`` + ``--round-start`` s (the
audit's own setup), each asking the order for its next configuration as it frees up (one still running at the
order's ``cut_at`` gives nothing); the race times each landed
candidate with one batch (``--batch`` s) when the GPU is free and the leaders again once per step. Noise-free: each
candidate's time is its recorded median. Prints, per seed, how many were compiled and timed, when the replay ended
and the pick's median over the full tune's pick's, then how many seeds were within 1.02.

    python benchmarks/tune/sim_budget.py FULL.json [--budget 30 --plan 9 --seeds 20] [--leaders 2 --round-cap 64]
    python benchmarks/tune/sim_budget.py docs/gpu/2026-12-03/s7a-full-486.json.gz --plan 10 --seeds 60   # the H200's
    python benchmarks/tune/sim_budget.py docs/gpu/2026-12-05c/s15-full-648.json.gz --race intake --plan 10.5 \
        --overhead 1.6 --within 1.01 --seeds 30      # the H100's 648, the race as it ran (intake_race)

``--within 1.01`` for the 648: the race's medians of the next family (TILE 128 × 128 × 32 with 1 CTA, 215.4 µs, 1.017×
the best's 211.7) read 1.03× the best by do_bench on the H100 (2026-12-05), so 1.02 on the medians counts misses.
``--no-codes``: the order is not told which compiles share their machine code (the search until 2026-12-05).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tileprobe.tune import search as S  # noqa: E402
from tileprobe.tune.space import Config  # noqa: E402


#: Each configuration's launch (the configuration timed for it: ``same_launch_as`` of the full tune, else itself),
#: filled by :func:`load`.
launch: dict = {}


def load(path: str):
    """The first problem's rows of a tune's JSON (``.json`` or gzip-ed ``.json.gz``): config -> (compile s, median
    µs, status)."""
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
        p = json.load(f)["problems"][0]
    rows = {}
    labels: dict = {}
    for c in p["candidates"]:
        cfg = Config(tuple(c["config"]["case"].items()), tuple(c["config"]["hints"].items()))
        rows[cfg] = (c.get("compile_s") or 0.0, c.get("median_us"), c["status"])
        labels[c["label"]] = cfg
    for c in p["candidates"]:    # the launch each configuration shares (timed once): its representative
        launch[labels[c["label"]]] = labels.get(c.get("same_launch_as") or c["label"], labels[c["label"]])
    return rows


def compile_jobs(rows, a, order, t0: float, advance, landed: list) -> int:
    """The ``--jobs`` fake compile jobs from ``t0``: each free job asks ``order`` for its next configuration, which
    lands after its recorded compile time + ``--overhead`` (appended to ``landed`` as (time, configuration) unless
    still compiling at the order's cut: killed, no record); ``advance(t)`` lets the replay's race keep up before each
    event. Returns how many were compiled."""
    import heapq
    events = [(t0, i, "free", None) for i in range(a.jobs)]
    heapq.heapify(events)
    n, compiled = a.jobs, 0
    while events:
        t, _, kind, c = heapq.heappop(events)
        advance(t)
        if kind == "land":
            if t > order.cut_at:
                continue
            order.landed(c, rows[c][0], None if a.no_codes else launch.get(c, c).key())
            landed.append((t, c))
            continue
        nxt = order.next(t)
        if nxt is None:
            continue
        compiled += 1
        done = t + rows[nxt][0] + a.overhead
        heapq.heappush(events, (done, n, "land", nxt))
        heapq.heappush(events, (done, n + 1, "free", None))
        n += 2
    return compiled


def continuous(rows, a, seed: int):
    """The continuous search (:class:`~tileprobe.tune.search.SearchOrder`) replayed: ``--jobs`` fake compile jobs ask
    the order for their next configuration as they free up; the race (one GPU) times each landed candidate with one
    batch (``--batch`` s) as soon as it is free, and each leader again once per ``--leaders`` newcomers; the leaders
    the order reads are the fastest timed so far. Returns (pick, compiled, timed, end s)."""
    configs = list(rows)
    timed: dict = {}
    leaders = lambda: sorted(timed, key=timed.get)[:a.leaders]  # noqa: E731
    settings = S.SearchSettings(jobs=a.jobs, seed=seed, round_cap=a.round_cap, leaders=a.leaders)
    order = S.SearchOrder(configs, [], settings, a.budget, leaders)
    t0 = a.plan + a.round_start
    gpu = max(t0, a.gpu_ready)
    landed: list = []       # (landing time, configuration) not yet timed

    def advance(t: float) -> None:
        """The race keeps up with what landed before ``t``."""
        nonlocal gpu
        while landed and gpu <= t:
            new = [x for x in landed if x[0] <= gpu] or [landed[0]]
            gpu = max(gpu, new[0][0])
            for x in new:
                landed.remove(x)
                if rows[x[1]][1]:
                    timed[x[1]] = rows[x[1]][1]
                gpu += a.batch
            gpu += a.batch * len(leaders())
    compiled = compile_jobs(rows, a, order, t0, advance, landed)
    for t, c in landed:
        gpu = max(gpu, t) + a.batch
        if rows[c][1]:
            timed[c] = rows[c][1]
    end = gpu + a.batch * 2 * a.leaders + 0.5
    pick = min(timed, key=timed.get) if timed else None
    return pick, compiled, len(timed), end


def intake_race(rows, a, seed: int):
    """The search replayed with the race as it ran on the GPU (``--race intake``, session 15's H100 logs): the race
    takes in what landed in batches, each costing ``--intake`` s (the landed candidates' grids and arguments asked
    of a contained child of the probe, which imports the probe's packages) and a round of one batch
    (``--batch`` s) per racing candidate; after each round only those within ``--keep`` of the fastest stay racing.
    The order reads the fastest of all those timed (``--racing-leaders``: of the racing ones only). Configurations
    of one launch (the full tune's ``same_launch_as``) are timed once. The race takes nothing in past its line,
    ``--budget`` − FINISH_S − ``--final-reserve`` − ``--intake`` (the final's share and the longest intake are held
    back): what lands later is skipped. Returns (pick, compiled, timed, end s)."""
    configs = list(rows)
    timed: dict = {}
    racing: set = set()
    seen: set = set()
    leaders = lambda: sorted(racing if a.racing_leaders else timed, key=timed.get)[:a.leaders]  # noqa: E731
    settings = S.SearchSettings(jobs=a.jobs, seed=seed, round_cap=a.round_cap, leaders=a.leaders)
    order = S.SearchOrder(configs, [], settings, a.budget, leaders)
    t0 = a.plan + a.round_start
    line = a.budget - S.FINISH_S - a.final_reserve - a.intake
    state = {"free": max(t0, a.gpu_ready), "step": None}
    landed: list = []

    def advance(t: float) -> None:
        while True:
            step = state["step"]
            if step is not None:
                if step[0] > t:
                    return
                for c in step[1]:
                    racing.add(c)
                if racing:
                    best = min(timed[c] for c in racing)
                    racing.intersection_update({c for c in racing if timed[c] <= best * (1 + a.keep)})
                state["step"] = None
                continue
            if not landed:
                return
            start = max(state["free"], min(x[0] for x in landed))
            if start > t or start >= line:
                return
            batch = [x for x in landed if x[0] <= start]
            for x in batch:
                landed.remove(x)
            new = []
            for _, c in batch:
                rep = launch.get(c, c)
                if rows[c][1] and rep not in seen:
                    seen.add(rep)
                    timed[c] = rows[c][1]
                    new.append(c)
            done = start + a.intake + a.batch * (len(racing) + len(new))
            state["free"], state["step"] = done, (done, new)

    compiled = compile_jobs(rows, a, order, t0, advance, landed)
    advance(float("inf"))
    pick = min(timed, key=timed.get) if timed else None
    return pick, compiled, len(timed), state["free"]


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
    ap.add_argument("--round-cap", type=int, default=None)
    ap.add_argument("--leaders", type=int, default=S.SearchSettings().leaders)
    ap.add_argument("--gpu-ready", type=float, default=0.0, help="s from the tune's start to the GPU worker's start")
    ap.add_argument("--race", choices=("batch", "intake"), default="batch",
                    help="batch: each landed candidate timed alone as soon as the GPU is free; intake: the race as it "
                         "ran on the H100 on 2026-12-05 (intake_race)")
    ap.add_argument("--intake", type=float, default=2.3,
                    help="s per intake of landed candidates (--race intake; 2.3: the H100's logs of 2026-12-05)")
    ap.add_argument("--keep", type=float, default=0.01,
                    help="fraction of the fastest's median within which candidates stay racing (--race intake)")
    ap.add_argument("--final-reserve", type=float, default=2.5,
                    help="s the race keeps for its steady-state final (--race intake)")
    ap.add_argument("--within", type=float, default=1.02, help="a pick counts when its median ≤ this × the best's")
    ap.add_argument("--racing-leaders", action="store_true",
                    help="--race intake: the order reads the racing candidates' leaders only (the search until "
                         "2026-12-05), not the fastest of all those timed")
    ap.add_argument("--no-codes", action="store_true", help="the order is not told which compiles share their code")
    a = ap.parse_args(argv)
    rows = load(a.full)
    configs = list(rows)
    full_best = min((c for c in configs if rows[c][1]), key=lambda c: rows[c][1])
    ok = 0
    for seed in range(a.seeds):
        pick, compiled, ntimed, end = (intake_race if a.race == "intake" else continuous)(rows, a, seed)
        ratio = rows[pick][1] / rows[full_best][1] if pick else float("inf")
        ok += ratio <= a.within
        print(f"seed {seed:2d}: compiled {compiled:3d}, timed {ntimed:3d}, end {end:5.1f} s, pick/full {ratio:.3f}")
    print(f"within {a.within}: {ok} of {a.seeds} (budget {a.budget} s, plan {a.plan} s, leaders {a.leaders}, "
          f"round cap {a.round_cap or 'default'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

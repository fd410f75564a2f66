"""Ranks of one program on one machine (torchrun-style: N processes with RANK / LOCAL_RANK / WORLD_SIZE): under
``tileprobe use`` each missed search is searched by one rank and every rank answers with its pick; under
``tileprobe tune -- CMD`` each search the ranks make is tuned once.

No GPU: the ranks run ``tests/data/record/search_program.py`` under ``tests/data/record/fake_tune`` (the real
``exhaustive_search`` over a fake timer that logs every trial to ``$FAKE_TUNE_LOG``), started by
``tests/data/record/ranks_launcher.py``. ``FAKE_RANK_NOISE`` makes each rank's timer prefer another TILE (rank r:
256 × 2**(r % 3)), so ranks that search on their own pick differently.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "search_program.py")
LAUNCHER = str(DATA / "ranks_launcher.py")
FAKE = str(DATA / "fake_tune")
TRIALS_PER_SEARCH = 48        # the program's 6 configurations × (3 warm-up + 5 timed runs) in cuda.tile.tune
TEST_USE = str(ROOT / "tests" / "test_use.py")


def _env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)]), FAKE_TUNE_LOG=str(tmp_path / "trials.log"),
               FAKE_RANK_NOISE="1", **extra)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "TILEPROBE_USE_RUN"):
        env.pop(name, None)
    return env


def _trials(tmp_path) -> int:
    p = tmp_path / "trials.log"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _picks(stdout: str) -> dict:
    """``{(rank, n): "TILE=… occupancy=…"}`` from the launcher's prefixed output."""
    return {(int(r), int(n)): pick for r, n, pick in
            re.findall(r"\[rank (\d+)\] n=(\d+) pick (TILE=\d+ occupancy=\d+)", stdout)}


def _empty_table(path: Path) -> Path:
    path.write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "provenance": {}, "kernels": {}}))
    return path


def _rank_args(n: int) -> dict:
    """Every rank searches n=1000; the odd ranks also n=2000 (same and overlapping searches)."""
    return {f"RANK_ARGS_{i}": "1000 2000" if i % 2 else "1000" for i in range(n)}


# --- use: one search per miss across ranks ---------------------------------------------------------------------

def test_ranks_searching_on_their_own_pick_differently(tmp_path):
    """The control: without tileprobe, each rank runs the program's search and its noise picks its own winner."""
    out = subprocess.run([sys.executable, LAUNCHER, "2", sys.executable, PROGRAM], capture_output=True, text=True,
                         env=_env(tmp_path, **_rank_args(2)), timeout=300)
    assert out.returncode == 0, out.stderr
    picks = _picks(out.stdout)
    assert picks[(0, 1000)] != picks[(1, 1000)]
    assert _trials(tmp_path) == 3 * TRIALS_PER_SEARCH        # rank 0: n=1000; rank 1: n=1000 and n=2000


@pytest.mark.parametrize("ranks", [2, 4])
def test_each_miss_is_searched_once_and_every_rank_gets_the_same_answer(tmp_path, ranks):
    table = _empty_table(tmp_path / "t.json")
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--", sys.executable, LAUNCHER,
                          str(ranks), sys.executable, PROGRAM], capture_output=True, text=True,
                         env=_env(tmp_path, **_rank_args(ranks)), timeout=600)
    assert out.returncode == 0, out.stderr
    picks = _picks(out.stdout)
    assert len(picks) == ranks + ranks // 2                  # every rank's n=1000, the odd ranks' n=2000
    assert len({p for (_, n), p in picks.items() if n == 1000}) == 1, picks
    assert len({p for (_, n), p in picks.items() if n == 2000}) == 1, picks
    assert out.stdout.count("check ok") == len(picks)
    assert _trials(tmp_path) == 2 * TRIALS_PER_SEARCH, out.stderr     # two distinct searches, each run once
    assert not (tmp_path / "t.json.shared").exists()         # the run's shared folder is gone with the run
    from tileprobe.record.log import read_misses
    assert sorted(s.configs[0].args[0]["shape"][0] for s in read_misses(str(table) + ".misses.jsonl")) == \
        [1000, 2000]                                         # noted by every rank, merged to one miss per search


# --- the shared folder itself: one searcher per key, many at once ------------------------------------------------

RANK = textwrap.dedent("""
    import importlib.util, os, sys, time
    spec = importlib.util.spec_from_file_location("r", sys.argv[1])
    r = importlib.util.module_from_spec(spec); spec.loader.exec_module(r)
    folder, key, log = sys.argv[2], sys.argv[3], sys.argv[4]

    class Best:
        def __init__(self, i):
            self.config, self.mean_us, self.num_samples, self.error_margin_us = i, 1.0, 5, 0.1

    class Result:
        def __init__(self, i):
            self.best = Best(i)

    def run():
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(0.3)
        return Result(int(os.environ["MINE"]))

    res = r.Shared(folder).search_once(key, lambda res: res.best.config, run, lambda e: Result(e["config_index"]))
    print(res.best.config)
    """)


def test_many_ranks_at_once_search_one_key_once_and_share_its_pick(tmp_path):
    log = tmp_path / "searches.log"
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(ROOT / "tileprobe" / "record" / "capture_ranks.py"),
                               str(tmp_path / "shared"), "abc123", str(log)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, MINE=str(10 + i))) for i in range(8)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8
    (searcher,) = log.read_text().splitlines()               # one search
    assert len(set(outs)) == 1 and 10 <= int(outs[0]) < 18   # every rank: the searcher's pick
    entry = json.loads((tmp_path / "shared" / "abc123.json").read_text())
    assert entry["config_index"] == int(outs[0]) and entry["pid"] == int(searcher)


def test_a_rank_whose_search_fails_lets_the_next_one_search(tmp_path):
    from tileprobe.record.capture_ranks import Shared
    shared = Shared(str(tmp_path / "shared"))
    started = threading.Event()
    errors, results = [], []

    def failing():
        started.set()
        time.sleep(0.3)
        raise RuntimeError("the program's search failed")

    def first():
        try:
            shared.search_once("k1", lambda r: r, failing, lambda e: e)
        except RuntimeError as e:
            errors.append(str(e))
    t = threading.Thread(target=first)
    t.start()
    started.wait(10)
    # a second rank (another descriptor of the lock: flock excludes it as it would another process) waits, then,
    # finding no pick, searches itself
    results.append(Shared(str(tmp_path / "shared")).search_once("k1", lambda r: 3, lambda: "own", lambda e: "entry"))
    t.join(10)
    assert errors == ["the program's search failed"] and results == ["own"]


def test_not_a_rank_or_no_run_means_no_sharing(tmp_path):
    from tileprobe.record.capture_ranks import shared_folder
    t = str(tmp_path / "t.json")
    assert shared_folder(t, {"WORLD_SIZE": "4"}) is None                      # no run to tell apart
    assert shared_folder(t, {"TILEPROBE_USE_RUN": "abc", "WORLD_SIZE": "1"}) is None
    assert shared_folder(t, {"TILEPROBE_USE_RUN": "a/../b", "WORLD_SIZE": "2"}) == t + ".shared" + os.sep + "ab"
    assert shared_folder(t, {"TORCHELASTIC_RUN_ID": "x1", "WORLD_SIZE": "2"}) == \
        t + ".shared" + os.sep + f"torchrun-x1-{os.getppid()}"


# --- tune -- CMD: the ranks' searches tuned once each, then answered alike -----------------------------------------

def _tune_cli(args, env, cwd):
    code = textwrap.dedent(f"""
        import sys
        import tileprobe.cli.tune as t
        from tileprobe.run.watchdog import Watchdog
        from tileprobe.tune.pipeline import tune
        def fake(args, ex, wd, store, startup_s, err):
            with Watchdog(timeout_s=10.0, init={TEST_USE + ':init_fake_gpu'!r}) as w:
                return tune(args.probes, arch="sm_90", watchdog=w, tasks=({TEST_USE + ':fake_time'!r},
                            {TEST_USE + ':fake_check'!r}), store=store, export=args.export, num_sms=132, jobs=2)
        t._tune = fake
        from tileprobe.cli import main
        sys.exit(main(sys.argv[1:]))
        """)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900)


def test_tune_of_four_ranks_tunes_each_search_once_and_use_answers_every_rank_alike(tmp_path):
    env = _env(tmp_path, TILEPROBE_STORE=str(tmp_path / "store.db"), **_rank_args(4))
    out = _tune_cli(["tune", "--export", "t.json", "--", sys.executable, LAUNCHER, "4", sys.executable, PROGRAM], env,
                    str(tmp_path))
    assert out.returncode == 0, out.stderr
    searches = json.loads((tmp_path / "t.json.record" / "record.json").read_text())["searches"]
    assert sorted(s["count"] for s in searches) == [2, 4]     # n=2000: 2 ranks; n=1000: all 4
    assert "(2 search row(s) written)" in " ".join(out.stderr.split())
    rows = json.loads((tmp_path / "t.json").read_text())["kernels"]["vadd"]
    assert len(rows) == 2 and {r["search"]["config"]["TILE"] for r in rows} == {1024}   # test_use.FAKE_US: C4
    (tmp_path / "trials.log").unlink(missing_ok=True)
    used = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(tmp_path / "t.json"), "--",
                           sys.executable, LAUNCHER, "4", sys.executable, PROGRAM], capture_output=True, text=True,
                          env=_env(tmp_path, **_rank_args(4)), timeout=600)
    assert used.returncode == 0, used.stderr
    picks = _picks(used.stdout)
    assert len(picks) == 6 and set(picks.values()) == {"TILE=1024 occupancy=1"}
    assert _trials(tmp_path) == 0 and "tileprobe use" not in used.stderr

"""A new shape starts warm (tileprobe.tune.warm): a search whose kernel has rows for other problems races first the
picks of its nearest rows; the rest of the search is as it was."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tileprobe.tune.space import Config, ProbeInfo, Problem
from tileprobe.tune.warm import KnownPick, apply_warm, config_text, distance, known_picks, warm_first, warm_labels

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "search_program.py")
TEST_USE = str(ROOT / "tests" / "test_use.py")


def _problem(n: int = 6) -> Problem:
    info = ProbeInfo(source="p.py", index=0, label="vadd@abcd1234")
    configs = [Config((("config", f"C{i}"),), (("occupancy", 1 + i % 2),)) for i in range(n)]
    return Problem(info, {"search": "abcd1234"}, configs, default=configs[0])


def test_distance_is_log_scale_and_counts_must_agree():
    assert distance((4096,), (2048,)) == distance((4096,), (8192,)) == 1.0
    assert distance((4096, 64), (4096, 64)) == 0.0
    assert distance((4096,), (4096, 1)) == float("inf")


def test_the_nearest_rows_picks_come_first_each_once_and_only_from_the_space():
    c = {i: config_text({"TILE": t}, {"occupancy": 1}) for i, t in enumerate((256, 512, 1024))}
    picks = [KnownPick((8192,), c[2], "far"), KnownPick((1024,), c[0], "near"), KnownPick((2048,), c[0], "next"),
             KnownPick((1500,), config_text({"TILE": 64}, {}), "not in the space")]
    labels = {c[0]: "C0", c[1]: "C2", c[2]: "C4"}
    assert warm_labels(picks, (1200,), labels) == [("C0", "near")]       # 3 nearest: 1500 (absent), 1024, 2048
    assert warm_labels(picks, (1200,), labels, rows=4) == [("C0", "near"), ("C4", "far")]
    assert warm_labels([], (1200,), labels) == []


def test_warm_first_moves_only_the_named_configurations_to_the_front():
    p = _problem()
    q = warm_first(p, ["C4", "C1"])
    assert [dict(c.tunables)["config"] for c in q.configs] == ["C4", "C1", "C0", "C2", "C3", "C5"]
    assert q.default == p.default and q.values == p.values and sorted(q.configs, key=str) == sorted(p.configs, key=str)
    assert [dict(c.tunables)["config"] for c in q.first] == ["C4", "C1"] and p.first == ()
    from tileprobe.tune.budgeted import first_guesses
    assert first_guesses(q) == [p.configs[0], p.configs[4], p.configs[1]]     # the default, then the warm start
    assert warm_first(p, []) is p
    (r,) = apply_warm([p], {"other@00000000": ["C5"]})
    assert r.configs == p.configs
    (r,) = apply_warm([p], {"vadd@abcd1234": ["C5"]})
    assert dict(r.configs[0].tunables)["config"] == "C5"


def test_known_picks_skip_the_search_itself_and_rows_without_dimensions():
    doc = {"kernels": {"vadd": [
        {"search": {"key": "a", "dims": [4096, 4096, 4096], "config": {"TILE": 1024}, "hints": {"occupancy": 1}}},
        {"search": {"key": "b", "dims": [1000], "config": {"TILE": 256}, "hints": {}}},
        {"search": {"key": "c", "config": {"TILE": 512}}}, {"problem": {"N": 1}}]}}
    picks = known_picks(doc, "vadd", skip_key="b")
    assert [(p.dims, p.where) for p in picks] == [((4096, 4096, 4096), "kernels.vadd[0] (4096×4096×4096)")]
    assert known_picks(doc, "other", "x") == []


def _cli(args, tmp):
    code = textwrap.dedent(f"""
        import sys
        import tileprobe.cli.tune as t
        from tileprobe.run.watchdog import Watchdog
        from tileprobe.tune.pipeline import tune
        def fake(args, ex, wd, store, startup_s, err):
            with Watchdog(timeout_s=10.0, init={TEST_USE + ':init_fake_gpu'!r}) as w:
                return tune(args.probes, arch="sm_90", watchdog=w, tasks=({TEST_USE + ':fake_time'!r},
                            {TEST_USE + ':fake_check'!r}), store=store, export=args.export, num_sms=132, jobs=2,
                            warm_first=args.warm_first)
        t._tune = fake
        from tileprobe.cli import main
        sys.exit(main(sys.argv[1:]))
        """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(DATA / "fake_tune"), str(ROOT)]),
               FAKE_TUNE_LOG=str(tmp / "trials.log"), TILEPROBE_STORE=str(tmp / "store.db"))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=str(tmp),
                          timeout=900)


def test_a_new_shape_races_the_nearest_rows_pick_first_and_picks_as_cold(tmp_path):
    first = _cli(["tune", "--export", "t.json", "--", sys.executable, PROGRAM, "4096"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "warm start" not in first.stderr                      # nothing known of vadd yet: a cold start
    (row,) = json.loads((tmp_path / "t.json").read_text())["kernels"]["vadd"]
    assert row["search"]["dims"] == [4096, 4096, 4096]
    second = _cli(["tune", "--export", "t.json", "--", sys.executable, PROGRAM, "2048"], tmp_path)
    assert second.returncode == 0, second.stderr
    err = " ".join(second.stderr.split())
    assert "races first C4 (the pick of kernels.vadd[0] (4096×4096×4096))" in err, err
    rows = json.loads((tmp_path / "t.json").read_text())["kernels"]["vadd"]
    assert sorted((r["search"]["dims"][0], r["case"]["config"]) for r in rows) == [(2048, "C4"), (4096, "C4")]

"""``tileprobe tune`` on a real GPU (marked ``gpu``: skipped where no CUDA GPU is present, see conftest.py).

Needs what ``tests/test_run_gpu.py`` needs (torch with CUDA, cuda-core, cuda-bindings, cuda-tile, tileiras), and
nvidia-ml-py for the clocks. Checked:

* the large RMSNorm (one launch ≥ 100 µs): every candidate gets a fate, the winner (or each tied candidate) is
  checked against the reference, samples carry SM clocks, the result is stored and exported;
* a planted hanging and a planted crashing candidate (``tests/data/faulty_tune.py``): the tune finishes, reports
  both, names a healthy winner, and leaves no worker behind;
* burst mode records itself and takes 5-sample batches; graph mode (CUDA-graph replays) records itself and picks
  what sustained picks, within 2 %;
* split machines: ``tileprobe audit --bundle`` then ``tileprobe tune --bundle`` (exit 0, export written).
"""
from __future__ import annotations

import json
import os
import time

import pytest

from tileprobe.run import timing as run_timing
from tileprobe.store import Store
from tileprobe.tune import tune

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
FAULTY = os.path.join(ROOT, "tests", "data", "faulty_tune.py")


def _rows(p) -> dict:
    return {r.label: r for r in p.candidates if r.config}


def _print(res) -> None:
    for p in res.problems:
        for r in p.candidates:
            print(f"{p.kernel} {r.label}: {r.status} {r.median_us} [{r.ci_lo_us}, "
                  f"{r.ci_hi_us}] n={r.n} clocks={r.clocks} {(r.reason or '')[:200]}")
    print(res.times)


def test_rms_norm_large_tune_names_a_checked_winner(tmp_path):
    export = tmp_path / "tuned.json"
    with Store.open(str(tmp_path / "s.sqlite")) as store:
        res = tune([os.path.join(EXAMPLES, "rms_norm_large.py")], store=store, export=str(export), timeout_s=120)
        _print(res)
        (p,) = res.problems
        assert p.verdict in ("winner", "tie") and p.pick is not None
        rows = _rows(p)
        assert len(rows) == 10 and all(r.status in ("winner", "tie", "eliminated", "duplicate_launch")
                                       for r in rows.values()), rows
        for r in [p.pick, *p.tie]:
            assert r.check["status"] == "ok" and r.check["against"] == "reference"
            assert r.median_us >= 100.0 and r.ci_lo_us <= r.median_us <= r.ci_hi_us
        assert all(r.n >= 5 for r in rows.values() if r.status != "duplicate_launch")
        assert p.pick.clocks["sm_mhz"] is not None, "no SM clock readings (nvidia-ml-py or nvidia-smi missing?)"
        assert res.environment["timing"] == "sustained" and res.times["race_s"] > 0
        assert store.tunes(kernel="rms_norm_large")[0]["verdict"] == p.verdict
    doc = json.loads(export.read_text())
    (row,) = doc["kernels"]["rms_norm_large"]
    assert row["hints"] == p.pick.config["hints"] and doc["provenance"]["arch"] == res.environment["arch"]


def test_planted_hang_and_crash_are_reported_and_a_healthy_winner_named():
    t0 = time.perf_counter()
    res = tune([FAULTY], timeout_s=10.0)
    took = time.perf_counter() - t0
    _print(res)
    (p,) = res.problems
    rows = _rows(p)
    assert rows["TILE=256 MODE=1"].status == "hang"
    assert rows["TILE=256 MODE=2"].status == "crash", rows["TILE=256 MODE=2"]
    assert p.pick.label in ("TILE=256 MODE=0", "TILE=1024 MODE=0") and p.pick.check["status"] == "ok"
    assert took < 300


def test_burst_mode_is_recorded():
    res = tune([os.path.join(EXAMPLES, "rms_norm.py")], timing="burst", timeout_s=120, budget_s=60)
    _print(res)
    assert res.environment["timing"] == "burst"
    for p in res.problems:
        assert p.pick is not None
        assert all(r.n % 5 == 0 for r in p.candidates if r.n and r.status != "duplicate_launch")


def test_graph_mode_times_replays_and_agrees_with_sustained_on_the_order():
    """CUDA-graph replay timing; recorded, per-launch figures, and on the large RMSNorm (≥ 100 µs per
    launch, where the driver's launch cost is noise) the same pick as the sustained mode's or one within 2 %."""
    probe = os.path.join(EXAMPLES, "rms_norm_large.py")
    graph = tune([probe], timing="graph", timeout_s=120, budget_s=60)
    _print(graph)
    sustained = tune([probe], timing="sustained", timeout_s=120, budget_s=60)
    assert graph.environment["timing"] == "graph"
    (g,), (s,) = graph.problems, sustained.problems
    assert g.pick is not None and g.pick.check["status"] == "ok"
    assert all(r.n % run_timing.GRAPH_BATCH == 0 for r in g.candidates
               if r.n and r.status != "duplicate_launch")
    by_label = {r.label: r for r in s.candidates if r.median_us}
    assert by_label[g.pick.label].median_us <= 1.02 * s.pick.median_us, (g.pick.label, s.pick.label)


def test_tune_from_a_bundle(tmp_path):
    from tileprobe.cli import main
    bundle, export = tmp_path / "bundle", tmp_path / "tuned.json"
    import tileprobe.run.clocks as clocks
    cc = clocks.compute_capability()
    arch = f"sm_{cc[0]}{cc[1]}" if cc else "sm_90"
    assert main(["audit", os.path.join(EXAMPLES, "rms_norm.py"), "--arch", arch, "--bundle", str(bundle),
                 "--no-store", "--format", "none"]) == 0
    code = main(["tune", "--bundle", str(bundle), os.path.join(EXAMPLES, "rms_norm.py"), "--no-store",
                 "--export", str(export), "--budget", "30"])
    assert code == 0
    doc = json.loads(export.read_text())
    assert len(doc["kernels"]["rms_norm"]) == 2    # ALLOW_TMA True / False are two problems here

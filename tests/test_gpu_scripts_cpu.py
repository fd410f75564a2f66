"""The CPU side of the scale suite's GPU steps (benchmarks/scale/run.sh): benchmarks/scale/gpu_runs_compare.py on
run results made here with real worker processes and a fake task (tests/fake_gpu_tasks.py), as `--gpus 0` and
`--gpus 0,0` would make them."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from tileprobe.run import multi, session
from tileprobe.schema import VariantRecord, write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUBIN = b"fake cubin"
SHA = hashlib.sha256(CUBIN).hexdigest()


def _run(tmp_path, gpus, name):
    probe = tmp_path / "p.py"
    probe.write_text("")
    recs = [VariantRecord(kernel="k", probe=str(probe), case={"T": t}, hints={"occupancy": o}, arch="sm_90",
                          tileiras="t", status="ok", cubin_sha256=SHA, symbol="s", threads=128)
            for t in (1, 2) for o in (1, 2)]
    slots = multi.local_slots(gpus, 30.0, init="tests.fake_gpu_tasks:fake_init")
    res = session.run_probes(recs, {SHA: CUBIN}, slots=slots)
    path = str(tmp_path / name)
    write_json(res.records, res.environment, path)
    return path


def _compare(*argv):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "scale", "gpu_runs_compare.py"), *argv],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def test_shared_run_compares_as_same_statuses_flagged_and_unranked(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "TASK", "tests.fake_gpu_tasks:fake_run")
    one, shared = _run(tmp_path, [0], "one.json"), _run(tmp_path, [0, 0], "shared.json")
    p = _compare(one, shared, "--expect", "shared", "--out", str(tmp_path / "c.md"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "statuses identical: **yes** (4 variants)" in p.stdout and "check: **pass**" in p.stdout
    assert "best-hint lines: one worker 2, several workers 0" in p.stdout
    assert p.stdout.count("| True |") >= 4 + 2            # 4 variants + 2 worker rows flagged shared
    assert (tmp_path / "c.md").read_text() == p.stdout
    assert _compare(one, shared, "--expect", "distinct").returncode == 1   # shared timings are not "distinct"


def test_two_gpus_compare_with_speedup_and_gpu_per_variant(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "TASK", "tests.fake_gpu_tasks:fake_run")
    one, two = _run(tmp_path, [0], "one.json"), _run(tmp_path, [0, 1], "two.json")
    p = _compare(one, two, "--expect", "distinct")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "speed-up" in p.stdout and "best-hint lines: one worker 2, several workers 2" in p.stdout
    rows = [line for line in p.stdout.splitlines() if line.startswith("| k sm_90")]
    assert len(rows) == 4 and {r.split("|")[4].strip() for r in rows} <= {"0", "1"}

"""A recorded probe, tuned, and its export read back by host code without tileprobe:
the CPU side of ``benchmarks/programs/gpu_record_tilegym.py tune``.

The recorded probe is TileGym's softmax kernel from the H200 recording kept in ``tests/data/record/h200``. The
script's dry run writes its tunable form and compiles the candidates (sm_90); a tune with fake GPU tasks (planted in
this file, as ``tests/test_tune_pipeline.py`` does) exports a table;
``benchmarks/programs/tilegym_tuned_softmax.py`` reads it with the README's reader and makes the launch it would
make on the GPU.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = os.path.abspath(__file__)
ROOT = Path(HERE).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "programs" / "gpu_record_tilegym.py"
HOST = ROOT / "benchmarks" / "programs" / "tilegym_tuned_softmax.py"
TASKS = (f"{HERE}:fake_time", f"{HERE}:fake_check")
INIT = f"{HERE}:init_fake_gpu"
#: Fake medians per occupancy (None: as declared, 4): occupancy 8 wins.
FAKE_US = {"None": 120.0, "8": 100.0}

pytest.importorskip("tilegym")


# --- fakes that run in the worker process --------------------------------------------------------------------

def init_fake_gpu():
    return {"name": "Fake H200", "sm": "sm_90", "num_sms": 132, "driver": "580.159.04", "pid": os.getpid()}


def fake_time(record, cubin, probe_path, seed=0, mode="sustained", **kw):
    import random
    us = FAKE_US[str(dict(record["hints"]).get("occupancy"))]
    rng = random.Random(seed)
    clocks = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}
    return {"status": "ok", "samples_us": [rng.gauss(us, us * 0.002) for _ in range(10)], "clocks_before": clocks,
            "clocks_after": clocks, "grid": [528, 1, 1], "n": 10, "mode": mode, "warmup_launches": 3}


def fake_check(record, cubin, probe_path, seed=0, default=None, default_cubin=None):
    return {"status": "ok", "against": "reference", "rel_err": 0.0, "tolerance": 1e-4}


# --- the script's dry run --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """``gpu_record_tilegym.py tune --dry-run`` over two occupancies (two sm_90 compiles)."""
    out = tmp_path_factory.mktemp("tune") / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "tune", "--out", str(out), "--dry-run", "--jobs", "2",
                           "--hints", '{"occupancy": [null, 8]}'], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc.stdout


def test_dry_run_makes_the_recorded_probe_tunable_and_compiles_it(dry):
    out, stdout = dry
    lines = stdout.strip().splitlines()
    assert [ln[:10] for ln in lines] == ["[tune 1/4]", "[tune 2/4]", "[tune 3/4]", "[tune 4/4]"]
    assert "probes from the H200 recording" in lines[0] and (out / "tune" / "record" / "probes" / "_softmax_kernel.py").exists()
    assert "problem {'N_ROWS': 4096, 'DIM_COLS': 2048}, hints {'occupancy': [None, 8]} (2 configurations)" in lines[1]
    assert "2 candidate(s) compiled, 2 to time (none dropped)" in lines[2]
    assert "skipped (a dry run exports no table" in lines[3]
    with open(out / "tune" / "tune.json") as f:
        (problem,) = json.load(f)["problems"]
    rows = {c["label"]: c for c in problem["candidates"]}
    assert set(rows) == {"occupancy=None", "occupancy=8"} and all(r["registers"] for r in rows.values())
    assert all(r["grid"] == [528, 1, 1] for r in rows.values())     # the recorded grid, from the host's rule


def test_the_tunable_probe_poisons_the_output_and_checks_against_torch(dry):
    import torch

    from tileprobe.probe.define import load_probes
    from tileprobe.run.arrays import TorchArrays
    out, _ = dry
    probe = load_probes(str(out / "tune" / "_softmax_kernel_tunable.py"))[0]
    (case,) = probe.case_grid()
    args = probe.launch_args(case, TorchArrays("cpu", seed=3))
    assert [tuple(a.shape) for a in args[:2]] == [(4096, 2048), (4096, 2048)] and args[2:] == (4096, 2048, 2048)
    assert torch.isnan(args[0]).all() and not torch.isnan(args[1]).any()
    expected = probe.reference(case, args)[0]
    assert torch.allclose(expected, torch.softmax(args[1], dim=-1)) and torch.allclose(expected.sum(-1), torch.ones(4096))
    assert probe.grid(case, {}, 132) == (528, 1, 1) and probe.grid(case, {}, 148) == (592, 1, 1)


def test_tuned_export_is_read_back_by_host_code_without_tileprobe(dry, tmp_path, compile_count):
    from tileprobe.run.watchdog import Watchdog
    from tileprobe.store import Store
    from tileprobe.tune import tune
    out, _ = dry
    export = tmp_path / "tuned.json"
    with Watchdog(timeout_s=5.0, init=INIT, grace_s=0.5) as wd, Store.open(str(out / "tune" / "results.sqlite")) as s:
        res = tune([str(out / "tune" / "_softmax_kernel_tunable.py")], arch="sm_90", watchdog=wd, tasks=TASKS,
                   store=s, timeout_s=5.0, export=str(export))
    (p,) = res.problems
    assert p.verdict == "winner" and p.pick.label == "occupancy=8"
    assert compile_count.n == 0                                         # the dry run's compiles, from the store
    (row,) = json.loads(export.read_text())["kernels"]["_softmax_kernel"]
    assert row["problem"] == {"N_ROWS": 4096, "DIM_COLS": 2048} and row["hints"] == {"occupancy": 8}
    # the host program reads it, run as the script's step 4 runs it (no tileprobe on its path)
    rc, line = _script().run_host("_softmax_kernel", str(export), row["problem"], str(tmp_path), True)
    assert rc == 0, (tmp_path / "host.txt").read_text()
    assert line.startswith("host program (dry run): read _softmax_kernel occupancy=8 from the table (case {}); "
                           "would launch grid (528, 1, 1) with (output, input, 4096, 2048, 2048); "
                           "tileprobe not imported (exit 0; log ")
    env = dict(os.environ, PYTHONPATH="")
    missing = subprocess.run([sys.executable, str(HOST), str(export), "--rows", "8192", "--dry-run"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert missing.returncode == 2 and "no row for _softmax_kernel N_ROWS=8192 DIM_COLS=2048" in missing.stdout


def _script():
    """benchmarks/programs/gpu_record_tilegym.py as a module (its step 4: the host program, run as the script runs
    it)."""
    from support import load_script
    return load_script(SCRIPT)


def test_host_program_carries_the_readme_reader_verbatim():
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(r"<!-- tune-reader -->\s*```python\n(.*?)```", readme, re.S).group(1)
    reader = snippet[snippet.index("def tuned_config"):]
    host = HOST.read_text()
    copied = host[host.index("# --- tune-reader"):host.index("# --- end tune-reader")]
    assert reader.strip() in copied and "import tileprobe" not in host and "from tileprobe" not in host

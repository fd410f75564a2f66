"""``tileprobe tune --bit-exact``: a candidate whose output differs in any bit from the default configuration's is
dropped, and each table row says which checks its pick passed; the table carries the program's default beside it.

A float32 row sum whose chunk size TN changes the order of its additions (``tests/data/record/sum_kernels.py``): on
the CPU, :func:`row_sum` computes what each configuration would, and the check compares it with the default's (TN
64) through the same :func:`tileprobe.run.check.check_against` the GPU's check task calls. The tune runs the real
pipeline (compiles for sm_90 here) with the GPU tasks faked in this file.
"""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from test_run_cpu import _healthy_record
from test_tune_worker import NO_REF, tune_worker  # noqa: F401  (the worker's CPU fixture)

HERE = os.path.abspath(__file__)
ROOT = Path(HERE).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "row_sum_program.py")
FAKE = str(DATA / "fake_tune")
#: The program's configurations (C0 is its default) and the fake medians (µs): the larger chunks are faster.
TN = {"C0": 64, "C1": 128, "C2": 256}
US = {"C0": 30.0, "C1": 20.0, "C2": 10.0}


def row_sum(x: torch.Tensor, tn: int) -> torch.Tensor:
    """Each row of ``x`` (float32) summed in chunks of ``tn``, the chunk sums added in order (the kernel's order)."""
    acc = torch.zeros(x.shape[0], dtype=torch.float32)
    for j in range(x.shape[1] // tn):
        acc = acc + x[:, j * tn:(j + 1) * tn].sum(dim=1)
    return acc


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(64, 1024, generator=torch.Generator().manual_seed(seed))


# --- the GPU's tasks, faked (they run in the worker process) ------------------------------------------------------

def init_fake_gpu():
    return {"name": "NVIDIA H200", "sm": "sm_90", "num_sms": 132, "driver": "580.159.04", "pid": os.getpid()}


def fake_time(record, cubin, probe_path, seed=0, mode="sustained", **kw):
    us = US[record["case"]["config"]]
    rng = random.Random(hash((record["case"]["config"], seed)))
    clocks = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}
    return {"status": "ok", "samples_us": [rng.gauss(us, us * 0.002) for _ in range(10)], "clocks_before": clocks,
            "clocks_after": clocks, "grid": [64, 1, 1], "n": 10, "mode": mode, "warmup_launches": 3}


def _check(record, default, seed, bit_exact):
    from tileprobe.run.check import check_against
    if default is None:
        return {"status": "unchecked", "against": None, "message": "the default configuration"}
    x = _inputs(seed)
    out = row_sum(x, TN[record["case"]["config"]])
    expected = row_sum(x, TN[default["case"]["config"]])
    return {"against": "default", **check_against((out,), {0: expected}, None, "default", bit_exact)}


def fake_check(record, cubin, probe_path, seed=0, default=None, default_cubin=None):
    return _check(record, default, seed, False)


def fake_check_bit_exact(record, cubin, probe_path, seed=0, default=None, default_cubin=None):
    return _check(record, default, seed, True)


def _tune(tmp_path, *options):
    """``tileprobe tune [OPTIONS] --export t.json -- python row_sum_program.py`` with the GPU tasks faked; the check
    task is the bit-exact one when ``--bit-exact`` is given, as the CLI picks it (:func:`tileprobe.cli.tune.tasks_of`)."""
    code = textwrap.dedent(f"""
        import sys
        import tileprobe.cli.tune as t
        from tileprobe.run.watchdog import Watchdog
        from tileprobe.tune.pipeline import tune
        def fake(args, ex, wd, store, startup_s, err):
            chosen = t.tasks_of(args)
            task = chosen.get("tasks", (None, "tileprobe.run.batch:check_candidate"))[1]
            check = {HERE!r} + (":fake_check_bit_exact" if task.endswith("_bit_exact") else ":fake_check")
            with Watchdog(timeout_s=10.0, init={HERE + ":init_fake_gpu"!r}) as w:
                return tune(args.probes, arch="sm_90", watchdog=w, tasks=({HERE + ":fake_time"!r}, check),
                            store=store, export=args.export, num_sms=132, jobs=2,
                            check_first=chosen.get("check_first", False))
        t._tune = fake
        from tileprobe.cli import main
        sys.exit(main(sys.argv[1:]))
        """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)]), TILEPROBE_STORE=str(tmp_path / "s.db"))
    return subprocess.run([sys.executable, "-c", code, "tune", *options, "--export", "t.json", "--", sys.executable,
                           PROGRAM], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)


def test_the_chunk_size_changes_bits_within_the_tolerance():
    from tileprobe.run.check import check_against, check_bits
    x = _inputs(0)
    default, other = row_sum(x, 64), row_sum(x, 256)
    assert check_bits((row_sum(x, 64),), {0: default}).status == "ok"
    tol = check_against((other,), {0: default}, None, "default", bit_exact=False)
    assert tol["status"] == "ok" and tol["checks"] == ["tolerance"] and 0 < tol["rel_err"] < 1e-4
    bits = check_against((other,), {0: default}, None, "default", bit_exact=True)
    n = int((other != default).sum())
    assert bits["status"] == "wrong" and n > 0 and bits["checks"] == ["tolerance"]
    assert f"argument 0: {n:,} of 64 elements differ in their bits" in bits["message"]
    signed = check_bits((torch.tensor([-0.0, 1.0]),), {0: torch.tensor([0.0, 1.0])})    # equal values, other bits
    assert signed.status == "wrong" and "1 of 2 elements" in signed.message


def test_bit_exact_drops_candidates_that_round_differently_and_rows_say_their_checks(tmp_path):
    out = _tune(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    (row,) = json.loads((tmp_path / "t.json").read_text())["kernels"]["row_sum"]
    assert row["case"] == {"config": "C2"} and row["checks"] == ["tolerance"]      # the fastest, within tolerance
    assert row["default"]["config"] == {"TN": 64} and row["default"]["config_index"] == 0
    assert abs(row["default"]["median_us"] - 30.0) < 0.3 and abs(row["median_us"] - 10.0) < 0.1

    out = _tune(tmp_path, "--bit-exact")
    assert out.returncode == 0, out.stdout + out.stderr
    (row,) = json.loads((tmp_path / "t.json").read_text())["kernels"]["row_sum"]
    assert row["case"] == {"config": "C0"} and row["search"]["config"] == {"TN": 64}
    assert row["checks"] == ["default"] and row["default"]["median_us"] == row["median_us"]
    text = " ".join(out.stdout.split())
    for label in ("TN=128", "TN=256"):  # C1, C2 by the program's own values: within tolerance (the first tune
        assert f"wrong: {label}: argument 0: " in text                   # kept C2), not bit for bit: dropped untimed
        assert re.search(rf"{label} │ wrong │ - │ - │", text), out.stdout
    assert text.count("differ in their bits from the default configuration's output (bit-exact)") == 2


def test_the_worker_check_task_drops_a_candidate_that_rounds_differently(tune_worker, tmp_path):  # noqa: F811
    """``run/batch.py: check_candidate_bit_exact`` on the CPU worker: the default writes x + 1, the candidate
    (x + 0.5) + 0.5 in float32 — the same within tolerance, other bits where the halves round."""
    import numpy as np
    use, _ = tune_worker
    probe = tmp_path / "noref.py"
    probe.write_text(textwrap.dedent(NO_REF))
    sig = _healthy_record()["signature"][:2]
    rec = _healthy_record(kernel="noref", probe=str(probe), case={"K": 2}, symbol="cand",
                          signature=sig + [{"kind": "constant", "value": 2}])
    dflt = _healthy_record(kernel="noref", probe=str(probe), case={"K": 1}, symbol="dflt",
                           signature=sig + [{"kind": "constant", "value": 1}])

    def halves(x, y):
        y[:] = (x + np.float32(0.5)) + np.float32(0.5)
    use(lambda x, y: y.__setitem__(slice(None), x + np.float32(1.0)), "dflt")
    use(halves, "cand")
    from tileprobe.run import batch
    tol = batch.check_candidate(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert (tol["status"], tol["checks"]) == ("ok", ["tolerance"]) and 0 < tol["rel_err"] < 1e-6, tol
    bits = batch.check_candidate_bit_exact(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert bits["status"] == "wrong" and bits["checks"] == ["tolerance"], bits
    assert "elements differ in their bits from the default configuration's output (bit-exact)" in bits["message"]
    use(lambda x, y: y.__setitem__(slice(None), x + np.float32(1.0)), "cand")
    same = batch.check_candidate_bit_exact(rec, b"", str(probe), seed=5, default=dflt, default_cubin=b"")
    assert (same["status"], same["checks"]) == ("ok", ["tolerance", "bit-exact"]), same


def test_check_first_drops_a_wrong_candidate_before_its_first_batch():
    """``RaceSettings(check_first=True)`` (``--bit-exact``): every candidate checked before it is timed; a wrong one
    is never measured, the others are raced as usual and not checked again."""
    from test_tune_race import FakeGPU

    from tileprobe.tune.race import Race, RaceSettings
    plan = {"fast_wrong": (150.0, 0.5), "right": (200.0, 0.5), "slow": (300.0, 0.5)}
    gpu = FakeGPU(plan, wrong={"fast_wrong"})
    out = Race(list(plan), gpu.measure, gpu.check, RaceSettings(check_first=True), clock=gpu.clock).run()
    e = {x.id: x for x in out.entries}
    assert e["fast_wrong"].status == "wrong" and not e["fast_wrong"].samples
    assert "fast_wrong" not in {cid for cid, _ in gpu.calls} and sorted(gpu.checked) == sorted(plan)
    assert out.pick == "right" and e["right"].check["status"] == "ok"

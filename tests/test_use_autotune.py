"""A package that reaches cuda.tile.tune as the coming ``cuda.tile.tune.autotune`` decorator does
(``tests/data/record/autotune_pkg``: ``exhaustive_search`` bound by name in its own module at import, keyword
arguments passed on): its searches are captured with those arguments, tuned honouring ``flush_l2`` and
``single_run_timeout_sec``, answered under ``use``; a search with a ``benchmark_fn`` of its own is refused with the
reason.

No GPU: the program runs the real ``exhaustive_search`` under ``tests/data/record/fake_tune`` (trials logged, with
``no-flush`` for ``flush_l2=False``); the tune runs the real pipeline (compiles for sm_90 here) with the fake GPU
tasks below, which ask the worker's own rule (:func:`tileprobe.run.batch.l2_flush`) whether to flush.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = os.path.abspath(__file__)
ROOT = Path(HERE).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "autotune_program.py")
FAKE = str(DATA / "fake_tune")
TASKS = (f"{HERE}:fake_time", f"{HERE}:fake_check")
INIT = f"{HERE}:init_fake_gpu"
FLUSH_LOG = "TP_FAKE_FLUSH_LOG"
FAKE_US = {"C0": 30.0, "C1": 30.0, "C2": 20.0, "C3": 20.0, "C4": 10.0, "C5": 10.0}   # C4 wins (TILE 1024, occ 1)


# --- fakes that run in the worker process --------------------------------------------------------------------

def init_fake_gpu():
    return {"name": "NVIDIA H200", "sm": "sm_90", "num_sms": 132, "driver": "580.159.04", "pid": os.getpid()}


class _Timer:
    def flush(self):
        pass


def fake_time(record, cubin, probe_path, seed=0, mode="sustained", **kw):
    from tileprobe.run.batch import l2_flush
    from tileprobe.run.worker import _probe
    probe = _probe(probe_path, record["kernel"], record.get("arch"))
    with open(os.environ[FLUSH_LOG], "a") as f:
        f.write(f"{record['case']['config']} {'flush' if l2_flush(probe, _Timer()) else 'no-flush'} "
                f"{probe.run_timeout_s}\n")
    us = FAKE_US[record["case"]["config"]]
    rng = random.Random(hash((record["case"]["config"], seed)))
    clocks = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}
    return {"status": "ok", "samples_us": [rng.gauss(us, us * 0.002) for _ in range(10)], "clocks_before": clocks,
            "clocks_after": clocks, "grid": [4, 1, 1], "n": 10, "mode": mode, "warmup_launches": 3}


def fake_check(record, cubin, probe_path, seed=0, default=None, default_cubin=None):
    return {"status": "ok", "against": "default", "rel_err": 0.0, "tolerance": 1e-4}


def _env(tmp_path, **extra):
    return dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)]), FAKE_TUNE_LOG=str(tmp_path / "trials.log"),
                **{FLUSH_LOG: str(tmp_path / "flush.log")}, **extra)


def _cli(args, env, cwd):
    code = textwrap.dedent(f"""
        import sys
        import tileprobe.cli.tune as t
        from tileprobe.run.watchdog import Watchdog
        from tileprobe.tune.pipeline import tune
        def fake(args, ex, wd, store, startup_s, err):
            with Watchdog(timeout_s=10.0, init={INIT!r}) as w:
                return tune(args.probes, arch="sm_90", watchdog=w, tasks={TASKS!r}, store=store, export=args.export,
                            num_sms=132, jobs=2)
        t._tune = fake
        from tileprobe.cli import main
        sys.exit(main(sys.argv[1:]))
        """)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """``tileprobe tune --export table.json -- python autotune_program.py 4096`` (fake GPU)."""
    tmp = tmp_path_factory.mktemp("autotune")
    proc = _cli(["tune", "--export", "table.json", "--", sys.executable, PROGRAM, "4096"],
                _env(tmp, TILEPROBE_STORE=str(tmp / "store.db")), str(tmp))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp, proc


def test_the_decorators_searches_are_captured_with_their_keyword_arguments(tuned):
    tmp, proc = tuned
    (s,) = json.loads((tmp / "table.json.record" / "record.json").read_text())["searches"]
    assert s["options"] == {"quiet": True, "flush_l2": False, "single_run_timeout_sec": 30}
    assert s["name"] == "vadd" and len(s["configs"]) == 6 and s["program_pick"] == 3
    assert "autotune.py:" in next(iter(s["sites"]))          # the call inside the decorator's module
    err = " ".join(proc.stderr.split())
    assert "tuned with flush_l2=False, single_run_timeout_sec=30 (as the program searched)" in err, err
    # the benchmark_fn search: seen, refused with the reason, not tuned
    assert "passes benchmark_fn=my_benchmark (a function) to its search" in err and "not tuned" in err, err


def test_flush_l2_false_and_the_launch_bound_are_honoured_when_tileprobe_tunes(tuned):
    tmp, _ = tuned
    lines = (tmp / "flush.log").read_text().splitlines()
    assert lines and {tuple(ln.split()[1:]) for ln in lines} == {("no-flush", "30.0")}    # every batch, no flush
    probe = (tmp / "table.json.record" / json.loads((tmp / "table.json.record" / "record.json").read_text())
             ["searches"][0]["file"]).read_text()
    assert "    flush_l2=False,\n" in probe and "    run_timeout_s=30.0,\n" in probe


def test_the_row_shows_the_searchs_arguments_and_use_answers_it(tuned):
    tmp, _ = tuned
    (row,) = json.loads((tmp / "table.json").read_text())["kernels"]["vadd"]
    assert row["search"]["options"] == {"quiet": True, "flush_l2": False, "single_run_timeout_sec": 30}
    assert row["search"]["config"] == {"TILE": 1024, "occupancy": 1}
    (tmp / "trials.log").unlink(missing_ok=True)
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(tmp / "table.json"), "--", sys.executable,
                          PROGRAM, "4096"], capture_output=True, text=True, env=_env(tmp), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "add_nf key=('nf', 4096) pick TILE=1024 occupancy=1" in out.stdout      # the table's pick, not C3
    assert "add_nf n=4096 check ok" in out.stdout and "add_bench n=4096 check ok" in out.stdout
    assert not (tmp / "trials.log").exists()                 # add_nf answered; add_bench's search fails at once
    assert out.stderr.count("tileprobe use: vadd: no row for this search") == 1, out.stderr   # add_bench: a miss


def test_search_options_refuse_what_is_not_reproduced():
    from tileprobe.record.search_options import SearchOptions
    assert SearchOptions.of({"flush_l2": False, "quiet": True}) == SearchOptions(False, None, ())
    assert SearchOptions.of({"single_run_timeout_sec": 2}).text() == "single_run_timeout_sec=2"
    bad = {"flush_l2": "no", "context_fn": {"callable": "ctx"}, "single_run_timeout_sec": -1}
    opts = SearchOptions.of(bad)
    assert opts.others == ("context_fn", "flush_l2", "single_run_timeout_sec") and opts.flush_l2
    why = opts.refusal(bad)
    assert "context_fn=ctx (a function), flush_l2='no', single_run_timeout_sec=-1" in why and "not tuned" in why
    assert SearchOptions.of(None).refusal() is None and SearchOptions.of({}).text() == ""


def test_the_worker_flushes_unless_the_probe_says_not_and_bounds_a_launch():
    from tileprobe import Probe
    from tileprobe.run.batch import l2_flush, run_timeout_error
    timer = _Timer()
    kernel = object()
    assert l2_flush(Probe(kernel=kernel, args=lambda c, a: ()), timer) == timer.flush
    assert l2_flush(Probe(kernel=kernel, args=lambda c, a: (), flush_l2=False), timer) is None
    bounded = Probe(kernel=kernel, args=lambda c, a: (), run_timeout_s=0.5)
    assert run_timeout_error(bounded, [100.0, 400_000.0]) is None
    assert "a launch took 0.7 s, over the 0.5 s" in run_timeout_error(bounded, [100.0, 700_000.0])
    from tileprobe.probe.define import ProbeError
    with pytest.raises(ProbeError, match="flush_l2='no'"):
        Probe(kernel=kernel, args=lambda c, a: (), flush_l2="no")
    with pytest.raises(ProbeError, match="run_timeout_s=0"):
        Probe(kernel=kernel, args=lambda c, a: (), run_timeout_s=0)

"""A program's own cuda.tile.tune searches recorded, tuned into a table, and answered from it at run time.

No GPU: the program (``tests/data/record/search_program.py``, TileGym's pattern) runs the real
``cuda.tile.tune.exhaustive_search`` under ``tests/data/record/fake_tune``, whose ``_benchmark`` "runs" the kernel on
torch CPU tensors and logs every trial to ``$FAKE_TUNE_LOG`` (so a test sees whether the program's search ran), and
whose ``device_facts`` answer as an H200 (``$FAKE_GPU`` another name). The tune runs the real pipeline (compiles
for sm_90 here) with fake GPU tasks planted in this file, through the CLI.
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

import pytest

HERE = os.path.abspath(__file__)
ROOT = Path(HERE).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "search_program.py")
FAKE = str(DATA / "fake_tune")
TASKS = (f"{HERE}:fake_time", f"{HERE}:fake_check")
INIT = f"{HERE}:init_fake_gpu"
#: Fake medians (µs) per configuration label of the tune. Occupancy changes nothing in vadd's code (the tune times
#: C1, C3, C5 as duplicates of C0, C2, C4), so C4 (TILE 1024, occupancy 1) wins, unlike the program's own fake
#: timer (C3: TILE 512, occupancy 2): an answer from the table is told apart from the program's pick.
FAKE_US = {"C0": 30.0, "C1": 30.0, "C2": 20.0, "C3": 20.0, "C4": 10.0, "C5": 10.0}
FAKE_US_ENV = "TP_FAKE_SEARCH_US"


# --- fakes that run in the worker process --------------------------------------------------------------------

def init_fake_gpu():
    return {"name": "NVIDIA H200", "sm": "sm_90", "num_sms": 132, "driver": "580.159.04", "pid": os.getpid()}


def fake_time(record, cubin, probe_path, seed=0, mode="sustained", **kw):
    us = json.loads(os.environ.get(FAKE_US_ENV) or json.dumps(FAKE_US))[record["case"]["config"]]
    rng = random.Random(hash((record["case"]["config"], seed)))
    clocks = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "reasons": []}
    return {"status": "ok", "samples_us": [rng.gauss(us, us * 0.002) for _ in range(10)], "clocks_before": clocks,
            "clocks_after": clocks, "grid": [4, 1, 1], "n": 10, "mode": mode, "warmup_launches": 3}


def fake_check(record, cubin, probe_path, seed=0, default=None, default_cubin=None):
    return {"status": "ok", "against": "default", "rel_err": 0.0, "tolerance": 1e-4}


# --- helpers ----------------------------------------------------------------------------------------------------

def _env(tmp_path, **extra):
    return dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)]), FAKE_TUNE_LOG=str(tmp_path / "trials.log"),
                **extra)


def _trials(tmp_path) -> int:
    p = tmp_path / "trials.log"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _cli(args, env, cwd, fake_us=None):
    """``python -m tileprobe.cli ARGS`` with the tune's GPU worker faked (this file's tasks)."""
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
    env = dict(env, **({FAKE_US_ENV: json.dumps(fake_us)} if fake_us else {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """``tileprobe tune --export table.json -- python search_program.py 4096`` (fake GPU)."""
    tmp = tmp_path_factory.mktemp("tune")
    env = _env(tmp, TILEPROBE_STORE=str(tmp / "store.db"))
    proc = _cli(["tune", "--export", "table.json", "--", sys.executable, PROGRAM, "4096"], env, str(tmp))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp, proc


def _use(tmp_path, table, *sizes, **env):
    (tmp_path / "trials.log").unlink(missing_ok=True)
    return subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--", sys.executable, PROGRAM,
                           *map(str, sizes)], capture_output=True, text=True, env=_env(tmp_path, **env), timeout=300)


# --- 1. capture ------------------------------------------------------------------------------------------------

def test_recorded_space_equals_the_programs_configurations(tuned):
    tmp, _ = tuned
    (s,) = json.loads((tmp / "table.json.record" / "record.json").read_text())["searches"]
    program = [{"TILE": t, "occupancy": o} for t in (256, 512, 1024) for o in (1, 2)]
    assert [c["config"] for c in s["configs"]] == program
    assert [c["hints"] for c in s["configs"]] == [{"occupancy": c["occupancy"]} for c in program]
    assert s["problem"] == [0, 1, 2] and s["outputs"] == [2]       # x, y, z; z written by the search
    assert s["program_pick"] == 3 and s["count"] == 1 and s["compiler_timeout_s"] == 5
    from tileprobe.tune.static import load_space
    (problem,), errors = load_space([str(tmp / "table.json.record" / s["file"])])
    assert not errors and problem.values == {"search": s["key"]}
    configs = [(dict(c.tunables)["config"], c.hints_dict) for c in problem.configs]
    assert configs == [(f"C{i}", {"occupancy": c["occupancy"]}) for i, c in enumerate(program)]
    assert dict(problem.default.tunables) == {"config": "C0"} and problem.default.hints_dict == {"occupancy": 1}
    text = (tmp / "table.json.record" / s["file"]).read_text()
    assert "arrays.empty((4096,), 'float32'" in text and text.count("arrays.empty(") == 6   # z in every config


# --- 2. tune -- COMMAND -----------------------------------------------------------------------------------------

def test_tune_of_a_program_writes_search_rows_with_provenance(tuned):
    tmp, proc = tuned
    doc = json.loads((tmp / "table.json").read_text())
    (row,) = doc["kernels"]["vadd"]
    assert row["case"] == {"config": "C4"} and row["hints"] == {"occupancy": 1}
    assert row["search"]["config"] == {"TILE": 1024, "occupancy": 1} and row["search"]["config_index"] == 4
    assert row["search"]["label"] == "TILE=1024 occupancy=1"                  # the program's own names
    assert "config=C" not in proc.stdout and "│ TILE=1024 occupancy=1 │ winner" in proc.stdout   # the table too
    assert "6 configurations (the program's)" in proc.stdout and "searched: 6 of 6 configurations" in proc.stdout
    assert row["search"]["program_pick"] == 3
    assert row["gpu"] == "NVIDIA H200" and row["num_sms"] == 132 and row["arch"] == "sm_90"
    assert re.search(r"V13\.4\.\d+", row["tileiras"]) and row["cuda_tile"] and len(row["source_sha256"]) == 64
    err = " ".join(proc.stderr.split())
    assert "search_program.py:37: 6 configurations; the program picked TILE=512 occupancy=2" in err
    m = re.search(r"the program's pick TILE=512 occupancy=2 (\S+) µs \(\w+\): keeping it costs \+(\S+) %", err)
    assert m and abs(float(m.group(1)) - 20.0) < 0.2 and 98.0 < float(m.group(2)) < 102.0, err


# --- 3. use ----------------------------------------------------------------------------------------------------

def test_use_answers_from_the_table_without_running_the_programs_search(tuned):
    tmp, _ = tuned
    out = _use(tmp, tmp / "table.json", 4096)
    assert out.returncode == 0, out.stderr
    assert "n=4096 pick TILE=1024 occupancy=1 own=True type=cuda.tile.tune._tune.TuningResult" in out.stdout
    assert "n=4096 check ok" in out.stdout
    assert _trials(tmp) == 0 and "tileprobe use" not in out.stderr


def test_a_miss_runs_the_programs_search_says_so_once_and_is_noted(tuned, tmp_path):
    tmp, _ = tuned
    table = tmp_path / "t.json"
    table.write_text((tmp / "table.json").read_text())
    out = _use(tmp_path, table, 4096, 1000, 1000)
    assert out.returncode == 0, out.stderr
    assert "n=4096 pick TILE=1024 occupancy=1" in out.stdout and "n=1000 pick TILE=512 occupancy=2 own=True" in out.stdout
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
    assert len(lines) == 1 and "vadd: no row for this search" in lines[0] and "misses.jsonl" in lines[0]
    assert _trials(tmp_path) == 48   # the program's own search of n=1000: 6 configs × (3 warm-up + 5 timed runs)
    (miss,) = [json.loads(x) for x in Path(str(table) + ".misses.jsonl").read_text().splitlines()]
    assert miss["t"] == "miss" and miss["configs"][0]["args"][0]["shape"] == [1000]
    from tileprobe.record.log import read_misses
    (s,) = read_misses(str(table) + ".misses.jsonl")
    assert s.key == miss["key"] and s.kernel.name == "vadd" and len(s.configs) == 6


@pytest.mark.parametrize("forge, env, reason", [
    ({"tileiras": "Cuda compilation tools, release 13.3, V13.3.36"}, {}, "tileiras build V13.4."),
    ({}, {"FAKE_GPU": "NVIDIA B200"}, "GPU NVIDIA B200 here, NVIDIA H200 in the table"),
    ({"source_sha256": "0" * 64}, {}, "kernel source "),
    # untrusted text from the table reaches stderr as text: no OSC title, no screen clear (a hostile tester)
    ({"gpu": "EVIL\x1b]0;PWNED\x07\x1b[2J[bold]x"}, {}, "GPU NVIDIA H200 here, EVIL[bold]x in the table"),
])
def test_a_stale_row_is_refused_with_the_reason_and_the_program_still_runs(tuned, tmp_path, forge, env, reason):
    tmp, _ = tuned
    doc = json.loads((tmp / "table.json").read_text())
    doc["kernels"]["vadd"][0].update(forge)
    table = tmp_path / "stale.json"
    table.write_text(json.dumps(doc))
    out = _use(tmp_path, table, 4096, **env)
    assert out.returncode == 0 and "n=4096 check ok" in out.stdout
    assert "n=4096 pick TILE=512 occupancy=2" in out.stdout and _trials(tmp_path) == 48
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
    assert "stale row: " in line and reason in line, line


def test_the_python_one_liner_answers_after_cuda_tile_tune_was_imported(tuned, tmp_path):
    tmp, _ = tuned
    code = textwrap.dedent(f"""
        import sys, runpy
        import cuda.tile.tune                      # taken before use(): rebound
        import tileprobe
        answerer = tileprobe.use({str(tmp / "table.json")!r})
        import sitecustomize                       # the test double's GPU facts
        sitecustomize.install_fake_facts(sys.modules["_tileprobe_record_capture"])
        sys.argv = [{PROGRAM!r}, "4096"]
        runpy.run_path({PROGRAM!r}, run_name="__main__")
        print("answered", answerer.answered)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "n=4096 pick TILE=1024 occupancy=1 own=True" in out.stdout and "answered 1" in out.stdout
    assert _trials(tmp_path) == 0


# --- 4. stale tables: the host reader, --refresh ------------------------------------------------------------------

def test_the_readme_reader_refuses_a_stale_row(tuned):
    tmp, _ = tuned
    text = (ROOT / "README.md").read_text()
    snippet = re.search(r"<!-- tune-reader -->\s*```python\n(.*?)```", text, re.S).group(1)
    (row,) = json.loads((tmp / "table.json").read_text())["kernels"]["vadd"]
    problem = row["problem"]
    driver = snippet + textwrap.dedent(f"""
        print(tuned_config({str(tmp / "table.json")!r}, "vadd", here={{"gpu": "NVIDIA H200", "num_sms": 132,
              "tileiras": "V13.4.92"}}, **{problem!r}))
        try:
            tuned_config({str(tmp / "table.json")!r}, "vadd", here={{"tileiras": "V13.3.36", "num_sms": 13}},
                         **{problem!r})
        except ValueError as e:
            print("refused:", e)
        """)
    out = subprocess.run([sys.executable, "-I", "-S", "-c", driver], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first == "({'config': 'C4'}, {'occupancy': 1})"
    assert second.startswith("refused: stale row for vadd: tileiras V13.3.36 here, Cuda compilation tools")
    assert "num_sms 13 here, 132 in" in second


def test_refresh_retunes_stale_rows_and_says_what_changed(tuned, tmp_path):
    tmp, _ = tuned
    import shutil
    shutil.copytree(tmp / "table.json.record", tmp_path / "t.json.record")
    doc = json.loads((tmp / "table.json").read_text())
    doc["kernels"]["vadd"][0]["tileiras"] = "Cuda compilation tools, release 13.3, V13.3.36"
    (tmp_path / "t.json").write_text(json.dumps(doc))
    slower = dict(FAKE_US, C2=9.0, C3=9.0)       # the new compiler makes TILE 512 the fastest
    out = _cli(["tune", "--refresh", "t.json"], _env(tmp_path, TILEPROBE_STORE=str(tmp_path / "s.db")),
               str(tmp_path), fake_us=slower)
    assert out.returncode == 0, out.stdout + out.stderr
    err = " ".join(out.stderr.split())
    assert "stale: " in err and "tileiras build V13.4." in err and "V13.3.36 in the table" in err
    m = re.search(r"winner changed from TILE=1024 occupancy=1: the old row's TILE=1024 occupancy=1 (\S+) µs \(\w+\): "
                  r"keeping it costs \+(\S+) %", err)
    assert m and abs(float(m.group(1)) - 10.0) < 0.1 and 10.0 < float(m.group(2)) < 12.5, err
    (row,) = json.loads((tmp_path / "t.json").read_text())["kernels"]["vadd"]
    assert row["case"] == {"config": "C2"} and "V13.4." in row["tileiras"] and row["search"]["config_index"] == 2
    again = _cli(["tune", "--refresh", "t.json"], _env(tmp_path), str(tmp_path))
    assert again.returncode == 0 and "nothing to refresh" in again.stderr


# --- the GPU benchmark's CPU side ---------------------------------------------------------------------------------

def test_gpu_benchmark_summary_from_a_cpu_run(tuned, tmp_path):
    """benchmarks/programs/bench_use.py composes (a)–(e) from its step results and the table, the recording and a
    do_bench space; here those of the fake tune, with do_bench figures made up per configuration."""
    import shutil
    tmp, _ = tuned
    shutil.copy(tmp / "table.json", tmp_path / "table.json")
    shutil.copytree(tmp / "table.json.record", tmp_path / "table.json.record")
    (s,) = json.loads((tmp_path / "table.json.record" / "record.json").read_text())["searches"]
    us = [30.0, 30.1, 20.0, 20.2, 10.1, 10.0]          # C5 is the best; the table's C4 within 1 %
    (tmp_path / "space.json").write_text(json.dumps([{"key": s["key"], "us": us}]))
    from support import load_script
    bench = load_script(ROOT / "benchmarks" / "programs" / "bench_use.py")
    steps = {"steps": [{"step": "a", "wall_s": 40.0, "rc": 0, "ops": {"vadd": "ok"}, "use_lines": []},
                       {"step": "b", "wall_s": 6.0, "rc": 0, "ops": {"vadd": "ok"}, "use_lines": []},
                       {"step": "e", "wall_s": 41.0, "rc": 0, "ops": {"vadd": "ok"},
                        "use_lines": ["tileprobe use: vadd: stale row: tileiras build V13.4.92 here, V13.3.36 in "
                                      "the table; running the program's own search"]}]}
    lines = bench.summarize(str(tmp_path), steps)
    text = "\n".join(lines)
    assert "(b) with the table: 6.0 s = 0.15x (met: required <= 0.4x)" in text
    (row,) = [ln for ln in lines if ln.strip().startswith("vadd")]
    assert "C4 10.1" in row and "C3 20.2" in row and "C5 10.0" in row and "0.5" in row and "1.01" in row
    assert "NOT met" not in row and "(e) forged tileiras build: 1 search(es) refused" in text and \
        text.rstrip().splitlines()[-2].endswith("met")
    forged = tmp_path / "forged.json"
    assert bench.forge(str(tmp_path / "table.json"), str(forged)) == 1
    assert json.loads(forged.read_text())["kernels"]["vadd"][0]["tileiras"] == bench.FORGED_TILEIRAS
    dry = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "programs" / "bench_use.py"), "--out",
                          str(tmp_path), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "step c: " in dry.stdout and "--bench-space" in dry.stdout
    assert subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "programs" / "run.sh")]).returncode == 0


def test_a_table_that_is_not_one_is_refused_before_the_program_runs(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "something else"}')
    for table, words in ((tmp_path / "nosuch.json", "cannot read the tune table"), (bad, "not a tileprobe tune table")):
        out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--", sys.executable, "-c",
                              "print('ran')"], capture_output=True, text=True, env=_env(tmp_path), timeout=120)
        assert out.returncode == 1 and "ran" not in out.stdout and words in out.stderr, out.stderr


def test_a_table_broken_under_a_running_program_is_said_once_and_every_search_runs(tmp_path):
    table = tmp_path / "t.json"
    table.write_text("{not json")
    env = _env(tmp_path, TILEPROBE_USE_TABLE=str(table))
    from tileprobe.record import hook
    env["PYTHONPATH"] = hook.write_hook(str(tmp_path / "h")) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, PROGRAM, "4096", "1000"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.count("check ok") == 2 and _trials(tmp_path) == 96
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
    assert "cannot read the table" in line and "every search runs as the program wrote it" in line


def test_tilegyms_own_searches_are_recorded_with_tilegyms_configurations(tmp_path):
    """TileGym 1.5.1's matmul, bmm, group GEMM, softmax and FMHA launchers (CPU tensors, an sm_90 answer from
    torch.cuda): one search each, its space TileGym's own generator's, in its order; a tuning probe each."""
    pytest.importorskip("tilegym")
    from tileprobe.record.session import record
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([FAKE, str(ROOT)]))
        res = record([sys.executable, str(DATA / "tilegym_searches.py")], str(tmp_path / "r"))
    assert res.exit_code == 0
    searches = json.loads((tmp_path / "r" / "record.json").read_text())["searches"]
    proc = subprocess.run([sys.executable, str(DATA / "tilegym_searches.py")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)])), timeout=300)
    spaces = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(s["name"] for s in searches) == sorted(spaces)
    for s in searches:
        assert [c["config"] for c in s["configs"]] == spaces[s["name"]], s["name"]
        assert s["program_pick"] is not None and s["sites"]
    gemm = next(s for s in searches if s["name"] == "_group_gemm_kernel")
    assert [c["hints"] for c in gemm["configs"]] == [{"num_ctas": c["num_ctas"], "occupancy": c["occupancy"]}
                                                   for c in spaces["_group_gemm_kernel"]]
    text = (tmp_path / "r" / gemm["file"]).read_text()
    assert "kernel='tilegym.ops.cutile.group_gemm:_group_gemm_kernel'" in text
    assert "[arrays.randn((256, 256), 'float16'" in text          # the lists of matrices, item by item
    assert len(res.searches) == 5


def test_use_env_prints_the_variables_a_shell_exports(tuned, tmp_path):
    tmp, _ = tuned
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(tmp / "table.json"), "--env"],
                         capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    script = out.stdout + f"{sys.executable} {PROGRAM} 4096\n"
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_env(tmp_path), timeout=300)
    assert "n=4096 pick TILE=1024 occupancy=1 own=True" in run.stdout and _trials(tmp_path) == 0, run.stderr
    first = out.stdout.split("PYTHONPATH=", 1)[1].split(os.pathsep, 1)[0].strip("'")
    assert first.startswith(str(tmp / "table.json") + ".hook") and os.path.exists(os.path.join(first, "sitecustomize.py"))


@pytest.mark.parametrize("forge, reason", [
    ({"median_us": float("nan")}, "invalid row: median_us is nan"),
    ({"samples": -3}, "invalid row: samples is -3"),
    ({"num_sms": "132"}, "invalid row: num_sms is a str ('132'), not an integer SM count"),
    ("other kernel", "the table's row for this search is under another kernel (other)"),
])
def test_an_invalid_or_misplaced_row_is_refused_with_the_reason(tuned, tmp_path, forge, reason):
    tmp, _ = tuned
    doc = json.loads((tmp / "table.json").read_text())
    if forge == "other kernel":
        doc["kernels"]["other"] = doc["kernels"].pop("vadd")
    else:
        doc["kernels"]["vadd"][0].update(forge)
    table = tmp_path / "bad.json"
    table.write_text(json.dumps(doc))
    out = _use(tmp_path, table, 4096)
    assert out.returncode == 0 and "n=4096 pick TILE=512 occupancy=2" in out.stdout and _trials(tmp_path) == 48
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
    assert reason in line and "stale row: SM count" not in line, line


def test_two_rows_for_one_search_warn_once_and_a_newer_schema_is_refused(tuned, tmp_path):
    tmp, _ = tuned
    doc = json.loads((tmp / "table.json").read_text())
    doc["kernels"]["vadd"].append(dict(doc["kernels"]["vadd"][0]))
    table = tmp_path / "dup.json"
    table.write_text(json.dumps(doc))
    out = _use(tmp_path, table, 4096, 4096)
    assert out.returncode == 0 and "pick TILE=1024 occupancy=1" in out.stdout and out.stdout.count("check ok") == 2 and _trials(tmp_path) == 0
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
    assert "2 rows for one search" in line, out.stderr
    doc["schema_version"] = 99
    table.write_text(json.dumps(doc))
    out = _use(tmp_path, table, 4096)
    assert out.returncode == 1 and "schema_version 99" in out.stderr and "pick" not in out.stdout, out.stderr


def test_the_command_after_dashes_keeps_its_own_dashes():
    """`use T -- printf '[%s]' x -- y` runs the command as typed: argparse's positional dropped the inner `--`
    (the program printed [x][y], and a nested `tileprobe use T2 -- …` was refused); `record` the same."""
    from tileprobe.cli import build_parser
    from tileprobe.cli._common import command_after_dashes
    for argv in (["use", "t.json", "--", "printf", "[%s]", "x", "--", "y"],
                 ["record", "-o", "out", "--", "printf", "[%s]", "x", "--", "y"]):
        args = build_parser().parse_args(argv)
        args.raw_argv = argv
        assert command_after_dashes(args) == ["printf", "[%s]", "x", "--", "y"]
    nested = ["use", "t.json", "--", "python", "-m", "tileprobe", "use", "t2.json", "--", "python", "-c", "print(1)"]
    args = build_parser().parse_args(nested)
    args.raw_argv = nested
    assert command_after_dashes(args) == nested[3:]

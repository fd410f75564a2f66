"""The start-up hook of ``tileprobe use / record / tune -- COMMAND`` inside users' programs
(tileprobe/record/capture/, loaded by path), and the files tileprobe reads that another file names: hooks chain
once in any nesting, a process that never searches reads no table, the hook never blocks on a FIFO, a large table is
said with the fix, ``tune -- CMD`` names the searches it saw but could not describe, several searches of one kernel
get a row each, and any JSON value of a configuration round-trips into the generated probe."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_use as tu

from tileprobe.record import hook

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
FAKE = str(DATA / "fake_tune")
SEARCH = str(DATA / "search_program.py")
TABLE = {"kind": "tileprobe.tune", "schema_version": 1, "kernels": {}}


def _env(tmp_path, *front, **extra):
    path = os.pathsep.join([*map(str, front), str(ROOT)])
    return dict(os.environ, PYTHONPATH=path, FAKE_TUNE_LOG=str(tmp_path / "trials.log"),
                XDG_CACHE_HOME=str(tmp_path / "xdg"), TILEPROBE_STORE=str(tmp_path / "store.db"), **extra)


def _own_sitecustomize(tmp_path) -> Path:
    """The program's own sitecustomize: counts its runs, then runs the fake GPU's (tests/data/record/fake_tune)."""
    own = tmp_path / "own"
    own.mkdir(exist_ok=True)
    (own / "sitecustomize.py").write_text(f"import os; open({str(tmp_path / 'own.count')!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                                          f"exec(open({FAKE + '/sitecustomize.py'!r}).read())\n")
    return own


@pytest.mark.parametrize("order", ["use,record,own", "record,use,own", "use,own,record", "own,use,record",
                                   "use,use2,record,own"])
def test_two_hooks_chain_once_in_any_order_and_the_programs_own_runs_once(tmp_path, order):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    dirs = {"use": hook.write_hook(str(tmp_path / "u")), "use2": hook.write_hook(str(tmp_path / "u2")),
            "record": hook.write_hook(str(tmp_path / "r")), "own": _own_sitecustomize(tmp_path)}
    env = _env(tmp_path, *(dirs[n] for n in order.split(",")), TILEPROBE_USE_TABLE=str(table),
               TILEPROBE_RECORD_DIR=str(tmp_path / "launches"))
    out = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and out.stdout == "ran\n" and out.stderr == "", out.stderr[-2000:]
    assert len((tmp_path / "own.count").read_text().split()) == 1


def test_record_inside_a_use_shell_records_and_runs_the_programs_sitecustomize_once(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    shell = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--env"], capture_output=True,
                           text=True, env=_env(tmp_path), timeout=60)
    assert shell.returncode == 0, shell.stderr
    exported = dict(line.split(" ", 1)[1].split("=", 1) for line in shell.stdout.splitlines())
    use_hook = exported["PYTHONPATH"].strip("'").split(os.pathsep)[0]
    env = _env(tmp_path, use_hook, _own_sitecustomize(tmp_path), TILEPROBE_USE_TABLE=str(table))
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "record", "-o", str(tmp_path / "rec"), "--",
                          sys.executable, SEARCH, "256"], capture_output=True, text=True, env=env, timeout=300,
                         cwd=str(tmp_path))
    assert out.returncode == 0 and "RecursionError" not in out.stderr, out.stderr[-3000:]
    assert "in 1 process" in out.stderr, out.stderr[-3000:]
    pids = (tmp_path / "own.count").read_text().split()      # each process ran it once (tileprobe's own included)
    assert len(pids) >= 2 and len(set(pids)) == len(pids), pids


def test_tune_inside_a_use_shell_runs_the_programs_search_and_writes_no_miss_into_the_use_table(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    use_hook = hook.write_hook(str(tmp_path / "t.json.hook"))
    env = tu._env(tmp_path, TILEPROBE_STORE=str(tmp_path / "store.db"), TILEPROBE_USE_TABLE=str(table))
    env["PYTHONPATH"] = os.pathsep.join([use_hook, env["PYTHONPATH"]])
    out = tu._cli(["tune", "--export", "t2.json", "--", sys.executable, SEARCH, "256"], env, str(tmp_path))
    assert out.returncode == 0 and "RecursionError" not in out.stderr, out.stderr[-3000:]
    assert "runs without it" in out.stderr and "1 search row(s) written" in out.stderr, out.stderr[-3000:]
    assert not (tmp_path / "t.json.misses.jsonl").exists()


def test_a_fifo_at_the_misses_file_does_not_block_the_program(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    os.mkfifo(tmp_path / "t.json.misses.jsonl")
    env = _env(tmp_path, hook.write_hook(str(tmp_path / "h")), FAKE, TILEPROBE_USE_TABLE=str(table))
    out = subprocess.run([sys.executable, SEARCH, "256"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and "check ok" in out.stdout, out.stderr
    noted = [ln for ln in out.stderr.splitlines() if "cannot note the miss" in ln]
    assert len(noted) == 1 and "not a regular file" in noted[0], out.stderr


def test_a_large_table_is_read_only_by_a_searching_process_and_said_with_the_fix(tmp_path):
    table = tmp_path / "big.json"
    rows = [{"problem": {"M": i}, "case": {"T": 1}, "pad": "x" * 400} for i in range(80_000)]
    table.write_text(json.dumps({**TABLE, "kernels": {"other": rows}}))
    assert table.stat().st_size > 32 << 20
    env = _env(tmp_path, hook.write_hook(str(tmp_path / "h")), FAKE, TILEPROBE_USE_TABLE=str(table))
    quiet = subprocess.run([sys.executable, "-c", "print('hello')"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert quiet.returncode == 0 and quiet.stdout == "hello\n" and quiet.stderr == "", quiet.stderr
    out = subprocess.run([sys.executable, SEARCH, "256"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and "check ok" in out.stdout, out.stderr
    (said,) = [ln for ln in out.stderr.splitlines() if " MB: " in ln]
    assert str(table) in said and "give this program a table of its own kernels" in said, said


def test_refresh_reads_no_device_or_fifo_that_record_json_or_the_misses_file_names(tmp_path):
    fifo = tmp_path / "k.fifo"
    os.mkfifo(fifo)
    for n, kernel_file in enumerate(("/dev/zero", str(fifo))):
        table = tmp_path / f"t{n}.json"
        row = {"problem": {"search": "abc"}, "case": {"config": "C0"}, "median_us": 1.0, "arch": "sm_90",
               "source_sha256": "0" * 64, "search": {"key": "abc", "config_index": 0}}
        table.write_text(json.dumps({**TABLE, "kernels": {"k": [row]}}))
        rec = tmp_path / f"t{n}.json.record"
        rec.mkdir()
        (rec / "record.json").write_text(json.dumps({"searches": [
            {"key": "abc", "file": "probes/none.py", "name": "k", "configs": [], "sites": {},
             "kernel_file": kernel_file}]}))
        os.mkfifo(tmp_path / f"t{n}.json.misses.jsonl")
        out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "tune", "--refresh", str(table)],
                             capture_output=True, text=True, env=_env(tmp_path), timeout=120, cwd=str(tmp_path))
        assert "MemoryError" not in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]
        assert f"t{n}.json.misses.jsonl: the misses file cannot be read" in out.stderr, out.stderr[-3000:]
        assert "not a regular file" in out.stderr, out.stderr[-3000:]
        # its probe file was never written: said, and no loader started for it
        assert out.returncode == 3 and "probes/none.py is gone from the recording" in out.stderr, out.stderr[-3000:]


def test_tune_names_the_searches_it_saw_but_could_not_describe_and_tunes_the_rest(tmp_path):
    env = tu._env(tmp_path, TILEPROBE_STORE=str(tmp_path / "store.db"))
    fake = {f"C{i}": 10.0 + i for i in range(5)}
    out = tu._cli(["tune", "--export", "t.json", "--", sys.executable, str(DATA / "undescribed_program.py")], env,
                  str(tmp_path), fake_us=fake)
    err = out.stderr
    assert out.returncode == 0 and "no cuda.tile.tune search was seen" not in err, err[-4000:]
    assert "tuned in part: 5 of the program's 6 configurations (left out: #1 args_fn raised ValueError: this tile " \
           "does not fit)" in err, err[-4000:]
    assert "(6 configurations) seen but not described: every one of its 6 configurations failed: grid_fn raised " \
           "ZeroDivisionError: no grid for this problem" in err, err[-4000:]
    assert "(3,000 configurations) seen but not described: 3,000 configurations, more than the 1,024" in err, err
    (row,) = json.loads((tmp_path / "t.json").read_text())["kernels"]["vadd"]
    assert row["search"]["config_index"] == 0 and row["search"]["config"]["TILE"] == 256
    # the table answers the program, NaN in its configuration and all
    use = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", "t.json", "--", sys.executable,
                          str(DATA / "undescribed_program.py")], capture_output=True, text=True, cwd=str(tmp_path),
                         env=tu._env(tmp_path), timeout=300)
    assert use.returncode == 0 and "in part: pick TILE=256 occupancy=1" in use.stdout, use.stdout + use.stderr
    assert "no row for this search" not in use.stderr and "not among" not in use.stderr, use.stderr


def test_every_json_value_of_a_configuration_round_trips_into_the_generated_probe():
    from tileprobe.record.searches import literal
    values = [float("nan"), float("inf"), -float("inf"), 10 ** 40, -7, 0.1, "nan", None, True,
              {"a": [1, (2, 3), {"b": float("nan")}], "c": ()}, [(1,)], {"deep": [[[[["x"]]]]]}]
    for v in values:
        back = eval(literal(v), {})          # the probe's text, evaluated as the probe module does
        assert json.dumps(back, sort_keys=True) == json.dumps(v, sort_keys=True), (v, literal(v))
        assert type(back) is type(v)
    assert math.isnan(eval(literal({"x": float("nan")}))["x"])


def test_several_searches_of_one_kernel_get_a_probe_and_a_row_each(tmp_path):
    env = tu._env(tmp_path, TILEPROBE_STORE=str(tmp_path / "store.db"))
    out = tu._cli(["tune", "--export", "T.json", "--", sys.executable, SEARCH, "4096", "8192"], env, str(tmp_path))
    assert out.returncode == 0 and "is also defined at" not in out.stderr, out.stderr[-4000:]
    assert "2 search row(s) written" in out.stderr, out.stderr[-3000:]
    rows = json.loads((tmp_path / "T.json").read_text())["kernels"]
    assert list(rows) == ["vadd"] and len({r["search"]["key"] for r in rows["vadd"]}) == 2, rows
    use = tu._use(tmp_path, tmp_path / "T.json", 4096, 8192)
    assert use.returncode == 0 and use.stdout.count("pick TILE=1024 occupancy=1") == 2, use.stdout + use.stderr
    assert "tileprobe use:" not in use.stderr and tu._trials(tmp_path) == 0, use.stderr

"""``tileprobe use``'s coverage, per-kernel control (--off, --pin) and never answering worse than the default.

No GPU: ``tests/data/record/two_searches_program.py`` (two searching kernels, vadd and scale_rows) runs the real
``cuda.tile.tune.exhaustive_search`` under ``tests/data/record/fake_tune`` (launches accepted on the CPU, trials
timed by a fake; its GPU answers as an H200). The table is made from the misses an empty table noted (the program's
own searches, as the capture describes them) with the rows' picks chosen here, so that an answer from the table is
told apart from the program's own pick (vadd: TILE 512 occupancy 2; scale_rows: TM 64).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "record"
PROGRAM = str(DATA / "two_searches_program.py")
FAKE = str(DATA / "fake_tune")
#: The table's picks (configuration index in the program's space) and their fake medians (µs).
PICKS = {"vadd": (4, 10.0), "scale_rows": (0, 20.0)}


def _env(tmp_path, **extra):
    return dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(ROOT)]), FAKE_TUNE_LOG=str(tmp_path / "trials.log"),
                **extra)


def _use(tmp_path, table, *options, sizes=(4096,), env=None):
    return subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), *options, "--", sys.executable,
                           PROGRAM, *map(str, sizes)], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(tmp_path, **(env or {})), timeout=300)


def _facts() -> dict:
    """The device facts the program's fake GPU answers with (tests/data/record/fake_tune), read here."""
    from tileprobe.record.hook import load_capture
    facts = load_capture().device_facts()
    facts.update(gpu="NVIDIA H200", num_sms=132, arch="sm_90")
    return facts


def _row(miss: dict, index: int, us: float, facts: dict) -> dict:
    c = miss["configs"][index]
    args = miss["configs"][0]["args"]
    return {"problem": {"search": miss["key"]}, "case": {"config": f"C{index}"}, "hints": c["hints"],
            "verdict": "winner", "median_us": us, "ci_us": [us * 0.99, us * 1.01], "samples": 10, "arch": "sm_90",
            "gpu": "NVIDIA H200", "num_sms": 132, "tileiras": facts.get("tileiras"),
            "cuda_tile": facts.get("cuda_tile"), "timing": "sustained", "source_sha256": miss["source_sha256"],
            "search": {"key": miss["key"], "config_index": index, "config": c["config"], "hints": c["hints"],
                       "problem_args": [[i, args[i]] for i in miss["problem"]]}}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """``t.json``: a row per search of ``two_searches_program.py 4096`` (picks :data:`PICKS`), and its recording
    ``t.json.record/record.json`` (the searches' spaces, which --pin is checked against)."""
    tmp = tmp_path_factory.mktemp("cov")
    empty = tmp / "empty.json"
    empty.write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "kernels": {}}))
    out = _use(tmp, empty)
    assert out.returncode == 0, out.stderr
    misses = [json.loads(x) for x in Path(str(empty) + ".misses.jsonl").read_text().splitlines()]
    assert sorted(m["kernel"]["name"] for m in misses) == ["scale_rows", "vadd"]
    facts = _facts()
    kernels = {m["kernel"]["name"]: [_row(m, *PICKS[m["kernel"]["name"]], facts)] for m in misses}
    (tmp / "t.json").write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "kernels": kernels}))
    (tmp / "t.json.record").mkdir()
    (tmp / "t.json.record" / "record.json").write_text(json.dumps({"searches": [
        {"key": m["key"], "name": m["kernel"]["name"], "configs": m["configs"], "problem": m["problem"]}
        for m in misses]}))
    return tmp / "t.json"


def _copy(table: Path, tmp_path: Path, edit=None) -> Path:
    doc = json.loads(table.read_text())
    if edit is not None:
        edit(doc)
    out = tmp_path / "t.json"
    out.write_text(json.dumps(doc))
    return out


def _picks(stdout: str) -> dict:
    return {ln.split(" pick ")[0].split()[0]: ln.split(" pick ")[1] for ln in stdout.splitlines() if " pick " in ln}


# --- coverage ---------------------------------------------------------------------------------------------------

def test_every_search_and_launch_answered_on_the_shapes_the_table_was_made_on(table, tmp_path):
    out = _use(tmp_path, table, "--min-coverage", "100", "--coverage-json", "cov.json")
    assert out.returncode == 0, out.stderr
    assert _picks(out.stdout) == {"vadd": "TILE=1024 occupancy=1", "scale_rows": "TM=16"}
    cov = json.loads((tmp_path / "cov.json").read_text())
    assert cov["searches"] == {"answered": 2, "total": 2, "share_pct": 100.0}
    assert cov["launches"]["table"] == 6 and cov["launches"]["searching_kernels"] == 6
    assert cov["launches"]["share_pct"] == 100.0 and cov["launches"]["none"] == 0
    by = {k["kernel"]: k for k in cov["kernels"]}
    assert by["vadd"]["searches"]["answered"] == 1 and by["vadd"]["launches_table"] == 3 and not by["vadd"]["misses"]
    assert "coverage: 2/2 searches answered (100.0 %), 6/6 launches" in " ".join(out.stderr.split())


def test_a_new_shape_is_a_miss_with_its_nearest_row_and_fails_min_coverage(table, tmp_path):
    t = _copy(table, tmp_path)
    (tmp_path / "t.json.record").symlink_to(Path(str(table) + ".record"))
    out = _use(tmp_path, t, "--min-coverage", "100", "--coverage-json", "cov.json", sizes=(4096, 1000))
    assert out.returncode == 1, out.stderr
    assert _picks(out.stdout)["vadd"] == "TILE=512 occupancy=2"       # n=1000: the program's own search ran
    cov = json.loads((tmp_path / "cov.json").read_text())
    assert cov["searches"]["answered"] == 2 and cov["searches"]["total"] == 3
    assert cov["launches"]["table"] == 6 and cov["launches"]["searching_kernels"] == 9
    (vadd,) = [k for k in cov["kernels"] if k["kernel"] == "vadd"]
    (miss,) = vadd["misses"]
    assert miss["outcome"] == "missed" and miss["problem"] == "float32[1000], float32[1000], float32[1000]"
    row = json.loads(t.read_text())["kernels"]["vadd"][0]
    assert miss["nearest"]["key"] == row["search"]["key"] and miss["nearest"]["config"] == {"TILE": 1024,
                                                                                             "occupancy": 1}
    assert miss["nearest"]["problem"] == "float32[4096], float32[4096], float32[4096]"
    err = " ".join(out.stderr.split())
    assert "coverage below --min-coverage 100 %: searches 66.7 % (2/3), launches 66.7 % (6/9); exit 1" in err
    assert f"nearest row {row['search']['key'][:8]}" in err
    # `tileprobe tune --refresh` reads the same miss from the misses file
    from tileprobe.record.log import read_misses
    assert miss["key"] in {s.key for s in read_misses(str(t) + ".misses.jsonl")}


def test_the_programs_own_failure_keeps_its_exit_code_under_min_coverage(table, tmp_path):
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--min-coverage", "100", "--",
                          sys.executable, "-c", "import sys; sys.exit(7)"], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(tmp_path), timeout=120)
    assert out.returncode == 7 and "coverage: 0/0 searches answered" in out.stderr, out.stderr


def test_a_stale_row_is_counted_stale_with_what_changed(table, tmp_path):
    t = _copy(table, tmp_path, lambda d: d["kernels"]["vadd"][0].update(num_sms=114))
    out = _use(tmp_path, t, "--coverage-json", "cov.json")
    assert out.returncode == 0, out.stderr
    (vadd,) = [k for k in json.loads((tmp_path / "cov.json").read_text())["kernels"] if k["kernel"] == "vadd"]
    assert vadd["searches"]["stale"] == 1 and vadd["launches_own"] == 3
    assert vadd["misses"][0]["reason"] == "stale row: SM count 132 here, 114 in the table"


# --- per-kernel control -----------------------------------------------------------------------------------------

def test_off_changes_only_that_kernels_configuration(table, tmp_path):
    out = _use(tmp_path, table, "--off", "vadd", "--coverage-json", "cov.json")
    assert out.returncode == 0, out.stderr
    assert _picks(out.stdout) == {"vadd": "TILE=512 occupancy=2", "scale_rows": "TM=16"}
    lines = [ln for ln in out.stderr.splitlines() if "per-kernel control" in ln]
    assert lines == ["tileprobe use: per-kernel control: table off for vadd"]
    by = {k["kernel"]: k for k in json.loads((tmp_path / "cov.json").read_text())["kernels"]}
    assert by["vadd"]["searches"]["off"] == 1 and by["scale_rows"]["searches"]["answered"] == 1


def test_pin_changes_only_that_kernels_configuration_by_config_or_row_key(table, tmp_path):
    out = _use(tmp_path, table, "--pin", 'scale_rows={"TM": 32}')
    assert out.returncode == 0, out.stderr
    assert _picks(out.stdout) == {"vadd": "TILE=1024 occupancy=1", "scale_rows": "TM=32"}
    key = json.loads(table.read_text())["kernels"]["vadd"][0]["search"]["key"]
    out = _use(tmp_path, table, "--pin", f"vadd={key[:8]}", "--off", "scale_rows", "--coverage-json", "cov.json")
    assert _picks(out.stdout)["vadd"] == "TILE=1024 occupancy=1", out.stderr
    by = {k["kernel"]: k["searches"] for k in json.loads((tmp_path / "cov.json").read_text())["kernels"]}
    assert by["vadd"]["pinned"] == 1 and by["scale_rows"]["off"] == 1 and by["scale_rows"]["answered"] == 0
    assert (tmp_path / "trials.log").exists()          # scale_rows' own search ran (its trials logged)


def test_control_by_environment_for_processes_use_did_not_start(table, tmp_path):
    from tileprobe.record import hook
    env = {"TILEPROBE_USE_TABLE": str(table), "TILEPROBE_USE_PIN": '{"vadd": {"TILE": 256, "occupancy": 2}}'}
    env = _env(tmp_path, **env)
    env["PYTHONPATH"] = hook.write_hook(str(tmp_path / "h")) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, PROGRAM, "4096"], capture_output=True, text=True, env=env, timeout=300)
    assert _picks(out.stdout) == {"vadd": "TILE=256 occupancy=2", "scale_rows": "TM=16"}, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "per-kernel control" in ln]
    assert said == ['tileprobe use: per-kernel control: pinned vadd={"TILE": 256, "occupancy": 2}']


@pytest.mark.parametrize("options, words", [
    (["--off", "nosuch"], "has no rows for a kernel of that name (its kernels: scale_rows, vadd); give one of them"),
    (["--pin", 'vadd={"TILE": 999, "occupancy": 1}'], "not one of the configurations the program searches for vadd"),
    (["--pin", "vadd"], "give KERNEL=CONFIG"),
    (["--pin", "vadd={TILE"], "not JSON"),
])
def test_bad_control_values_are_refused_before_the_program_runs(table, tmp_path, options, words):
    out = _use(tmp_path, table, *options)
    assert out.returncode == 1 and "pick" not in out.stdout and words in " ".join(out.stderr.split()), out.stderr


# --- never worse than the default -------------------------------------------------------------------------------

def test_a_row_slower_than_its_default_is_not_used(table, tmp_path):
    def slower(doc):
        row = doc["kernels"]["vadd"][0]
        row["default"] = {"config": {"TILE": 256, "occupancy": 1}, "hints": {"occupancy": 1}, "config_index": 0,
                          "median_us": 8.0}
    t = _copy(table, tmp_path, slower)
    out = _use(tmp_path, t, "--coverage-json", "cov.json")
    assert out.returncode == 0, out.stderr
    assert _picks(out.stdout) == {"vadd": "TILE=256 occupancy=1", "scale_rows": "TM=16"}
    (line,) = [ln for ln in out.stderr.splitlines() if "default configuration" in ln]
    assert "vadd: the table's pick 10.00 µs is slower than the program's default configuration 8.00 µs" in line
    by = {k["kernel"]: k for k in json.loads((tmp_path / "cov.json").read_text())["kernels"]}
    assert by["vadd"]["searches"]["default"] == 1 and by["vadd"]["launches_table"] == 3
    t.write_text(t.read_text().replace('"median_us": 8.0', '"median_us": 12.0'))
    out = _use(tmp_path, t)
    assert _picks(out.stdout)["vadd"] == "TILE=1024 occupancy=1" and "default configuration" not in out.stderr


def test_env_prints_the_control_variables_for_a_shell(table, tmp_path):
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--off", "vadd", "--pin",
                          'scale_rows={"TM": 32}', "--env"], capture_output=True, text=True, env=_env(tmp_path),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "export TILEPROBE_USE_OFF=vadd" in lines
    assert "export TILEPROBE_USE_PIN='{\"scale_rows\": {\"TM\": 32}}'" in lines


@pytest.mark.parametrize("where", ["missing_folder", "folder", "fifo", "dev_full"])
def test_an_unwritable_coverage_json_is_refused_before_the_program_runs(table, tmp_path, where):
    path = {"missing_folder": tmp_path / "no" / "such" / "c.json", "folder": tmp_path,
            "fifo": tmp_path / "c.fifo", "dev_full": Path("/dev/full")}[where]
    if where == "fifo":
        os.mkfifo(path)
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--coverage-json", str(path),
                          "--", sys.executable, "-c", "print('ran')"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert out.returncode != 0 and out.stdout == "" and "--coverage-json" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_fifo_put_at_the_coverage_json_while_the_program_ran_is_said_not_waited_on(table, tmp_path):
    path = tmp_path / "c.json"
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--coverage-json", str(path),
                          "--", sys.executable, "-c", f"import os; os.mkfifo({str(path)!r}); print('ran')"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert out.returncode == 1 and out.stdout == "ran\n" and "cannot write it" in out.stderr, out.stderr


def test_a_search_that_cannot_be_described_is_a_miss_with_the_reason(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "kernels": {}}))
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(empty), "--coverage-json", "cov.json",
                          "--", sys.executable, str(DATA / "undescribed_program.py")], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(tmp_path), timeout=300)
    assert out.returncode == 0 and "3,000 configurations: searched" in out.stdout, out.stderr
    (vadd,) = json.loads((tmp_path / "cov.json").read_text())["kernels"]
    reasons = sorted(m["reason"] for m in vadd["misses"])
    assert vadd["kernel"] == "vadd" and vadd["searches"]["missed"] == 3 and len(reasons) == 3
    assert reasons[0].startswith("no row for this search")
    assert "not described: 3,000 configurations, more than the 1,024" in reasons[1]
    assert reasons[2].startswith("not described: every one of its 6 configurations failed: grid_fn raised "
                                 "ZeroDivisionError"), reasons


def test_a_run_that_searched_nothing_is_below_any_minimum():
    """``--min-coverage``: 0 searches seen (the hook never loaded, the program never searched) fails a CI gate
    rather than passing it as 0/0; ``--min-coverage 0`` still passes it."""
    from tileprobe.record.coverage import Coverage
    empty = Coverage(kernels=[], processes=1)
    assert empty.below(100.0) == ["no search was seen (0 searches: did the program run its searches under this "
                                  "hook?)"]
    assert empty.below(0.0) == []

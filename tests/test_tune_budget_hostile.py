"""Hostile tests (session 8) of ``tune(budget_s=…)``'s continuous search end to end on CPU: the fixture of
tests/test_tune_budget.py (real compiles of its vec_add probe for sm_90, the real watchdog with the fake GPU tasks of
tests/test_tune_pipeline.py). Each tune runs in a child process (its own session), so that a hang is a failure and
the child and its workers are killed. Each failed before its fix (session 8)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    import test_tune_budget as tb
    from support import fake_tileiras
    from tileprobe.run.watchdog import Watchdog
    from tileprobe.store import Store
    from tileprobe.tune import tune
    d = {folder!r}
    path = d + "/vec_budget.py"
    open(path, "w").write(tb.PROBE)
    runs = json.loads({runs!r})
    out = []
    for kw in runs:
        body = kw.pop("fake_body", None)
        if body is not None:
            from pathlib import Path
            kw["toolchains"] = [{{"tileiras": fake_tileiras(Path(d), body, logged=True)}}]
        t = time.perf_counter()
        with Watchdog(timeout_s=5.0, init=tb.INIT, env={{tb.PLAN_ENV: json.dumps({{"times": tb.TIMES}})}},
                      grace_s=0.5) as wd:
            with Store.open(d + "/s.sqlite") as s:
                r = tune([path], arch="sm_90", watchdog=wd, tasks=tb.TASKS, store=s, timeout_s=5.0, jobs=2,
                         search_full_max=4, **kw)
        p = r.problems[0]
        out.append({{"wall_s": time.perf_counter() - t, "coverage": p.coverage, "dropped": p.dropped,
                     "notes": p.notes, "rows": {{row.label: row.status for row in p.candidates if row.config}}}})
    print("RESULT " + json.dumps(out), flush=True)
""")


def tune_in_child(tmp_path: Path, runs: list[dict], limit_s: float) -> list[dict]:
    """Run ``tune(**kw)`` for each of ``runs`` in order in one child process; its results, or a failure naming
    the time limit when it has not ended by then."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(HERE), folder=str(tmp_path), runs=json.dumps(runs)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        raise AssertionError(f"the budgeted tune(s) had not ended after {limit_s} s:\n{out[-2000:]}") from None
    assert p.returncode == 0, out[-3000:]
    (line,) = [x for x in out.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_a_budgeted_tune_after_a_knob_got_a_new_value_ends_within_its_budget(tmp_path):
    """A user tunes TILE 256-4096 (every configuration compiled and stored, pick TILE=1024 occupancy=1), then adds
    TILE=8192 to the probe and tunes again with --budget 20. Before: the second tune never ends (left running for
    290 s) — its compile thread spins in SearchOrder._choices' refill loop at the first wave's second pick
    (tests/test_hostile8_search.py has the unit form)."""
    first, second = tune_in_child(tmp_path, [
        {"budget_s": 600.0, "cases": {"TILE": [256, 512, 1024, 2048, 4096]}},
        {"budget_s": 20.0},
    ], limit_s=150.0)
    assert first["coverage"]["compiled"] == 10
    assert second["wall_s"] < 30.0   # a 20-s budget (it hung for ever before), margin for a loaded machine
    assert second["rows"]["TILE=8192 occupancy=1"] not in ("not_searched", "not_compiled")


def test_the_note_does_not_count_killed_compiles_as_compiled(tmp_path):
    """Compiles after the first wave hang (a fake tileiras: the real compile, then ``sleep 30``) and are killed at
    the cut. Before: coverage says 2 compiled and 2 rows are ``not_compiled``, but the note says "4 of 12
    configurations compiled (4 of a balanced sample …)" — it counts ``len(order.tried)``, what was started.
    budgeted.py Searched.note."""
    (run,) = tune_in_child(tmp_path, [{"budget_s": 12.0, "fake_body": 'if [ "$n" -ge 2 ]; then sleep 30; fi'}],
                           limit_s=120.0)
    statuses = list(run["rows"].values())
    (note,) = [n for n in run["notes"] if n.startswith("budgeted search:")]
    assert re.search(r"; \d+ cut at the budget's end", note), note   # the cut happened (the premise)
    said = int(re.match(r"budgeted search: (\d+) of 12 configurations compiled", note).group(1))
    reached = sum(1 for s in statuses if s not in ("not_searched", "not_compiled"))
    assert said == reached and "not_compiled" not in statuses, (note, run["rows"])   # cut rows: not_searched


def test_a_compile_another_process_holds_does_not_carry_the_tune_past_its_budget(tmp_path):
    """Another tileprobe process (an audit of the same probe, sharing the store) has claimed the first variants
    and compiles them slowly (45 s). The budgeted tune (--budget 10) chooses the default configuration first, finds
    it claimed, and after its own compiles waits in Claims.settle for the other process's result, whatever its
    budget says: its wall was 46.5 s. audit/pipeline.py _audit_with (claims.settle after the schedule's cut; also
    settle's compile_ of a taken-over variant spares the first ``schedule.spare`` again)."""
    import sqlite3

    import test_tune_budget as tb
    from support import fake_tileiras
    probe = tmp_path / "vec_budget.py"
    probe.write_text(tb.PROBE)
    slow = tmp_path / "slow"
    slow.mkdir()
    fake = fake_tileiras(slow, "sleep 45; exit 5")
    db = tmp_path / "s.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    other = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", str(probe), "--arch", "sm_90", "--tileiras",
                              fake, "--store", str(db), "--no-sass", "-j", "2", "--format", "none"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        t0 = time.time()
        while time.time() - t0 < 120:
            try:
                with sqlite3.connect(db) as c:
                    if c.execute("SELECT count(*) FROM claims").fetchone()[0] >= 2:
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.2)
        (run,) = tune_in_child(tmp_path, [{"budget_s": 10.0}], limit_s=150.0)
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert run["wall_s"] < 20.0, run   # a 10-s budget (46.5 s before), margin for a loaded machine


def test_the_compile_timeout_is_an_option_of_tune_and_reaches_the_compiles(monkeypatch, tmp_path):
    """``tune``'s compiler timeout had no CLI option (``--timeout`` there is the GPU task's; session 8's note):
    ``--compile-timeout`` now sets it, and a bad value is refused as the other seconds options are."""
    import tileprobe.tune.pipeline as pipeline
    from tileprobe.cli import main
    seen = {}

    class Stop(Exception):
        pass

    def fake_tune(paths, **kw):
        seen.update(kw)
        raise Stop
    monkeypatch.setattr(pipeline, "tune", fake_tune)
    probe = tmp_path / "p.py"
    probe.write_text("")
    with pytest.raises(Stop):
        main(["tune", str(probe), "--dry-run", "--arch", "sm_90", "--no-store", "--compile-timeout", "42.5"])
    assert seen["compile_timeout_s"] == 42.5 and seen["timeout_s"] != 42.5
    with pytest.raises(SystemExit) as e:
        main(["tune", str(probe), "--dry-run", "--arch", "sm_90", "--compile-timeout", "-1"])
    assert e.value.code == 2

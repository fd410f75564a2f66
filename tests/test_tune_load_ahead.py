"""The audit's load of a tune's probe files started beside the plan (tileprobe/probe/ahead.py): the audit takes that
report instead of loading the file after the plan, a load asked with another question is made again, and the
tune's static stage is the same with it as without it."""
from __future__ import annotations

import os
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VADD = os.path.join(ROOT, "tests", "data", "probe_vadd.py")


@pytest.fixture
def jobs(monkeypatch):
    """Every loader job as (seconds since the fixture, "task" or "check_file"), started in a new or a kept child."""
    from tileprobe.probe import contained
    seen: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    real_init, real_again = contained._Loader.__init__, contained._Loader.again

    def init(self, path, targets, max_variants, timeout_s, tmp_root, overrides=(None, None), task=None, *a, **kw):
        seen.append((time.perf_counter() - t0, "task" if task else "check_file"))
        real_init(self, path, targets, max_variants, timeout_s, tmp_root, overrides, task, *a, **kw)

    def again(self, job, *a, **kw):
        seen.append((time.perf_counter() - t0, "task" if job.task else "check_file"))
        return real_again(self, job, *a, **kw)
    monkeypatch.setattr(contained._Loader, "__init__", init)
    monkeypatch.setattr(contained._Loader, "again", again)
    return seen, t0


def test_a_load_started_ahead_is_taken_and_another_question_is_loaded_again(jobs, tmp_path, monkeypatch):
    from tileprobe.probe import ahead, contained
    monkeypatch.setenv(ahead.ENV, "1")
    seen, _ = jobs
    with contained.loader_sessions():
        assert contained.load_ahead([VADD], ["sm_90"], timeout_s=60.0, max_variants=5000) == 1
        assert contained.load_ahead([VADD], ["sm_90"], timeout_s=60.0, max_variants=5000) == 0   # one per question
        (rep,) = contained.load_probe_files([VADD], ["sm_90"], tmp_root=str(tmp_path), max_variants=5000)
        assert [kind for _, kind in seen] == ["check_file"]          # the ahead one, taken
        assert rep.plans and not rep.errors
        assert contained.load_ahead([VADD], ["sm_90"], timeout_s=60.0, max_variants=7) == 1   # another question
        (again,) = contained.load_probe_files([VADD], ["sm_90"], tmp_root=str(tmp_path), max_variants=5000)
        other = ahead.take(contained._plan_key(VADD, ["sm_90"], 7, None, None, None, None), 60.0)
        assert other is not None and not other.errors                 # the other question's own report …
        assert len(seen) >= 3                                         # … and the audit's, loaded again
    assert not again.errors and not again.no_probe, (again.errors, again.no_probe)
    assert [p.label for p in again.plans] == [p.label for p in rep.plans]
    assert [p.evaluated for p in again.plans] == [p.evaluated for p in rep.plans]
    assert contained.load_ahead([VADD], ["sm_90"], timeout_s=60.0, max_variants=5000) == 0      # no session: none


def test_the_switch_and_the_default_by_cpus(monkeypatch):
    from tileprobe.probe import ahead
    monkeypatch.setenv(ahead.ENV, "0")
    assert ahead.enabled() is False
    monkeypatch.setenv(ahead.ENV, "1")
    assert ahead.enabled() is True
    monkeypatch.delenv(ahead.ENV)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert ahead.enabled() is False
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert ahead.enabled() is True


def _static(res) -> list:
    return [(c.label, c.status, c.same_launch_as, tuple(c.grid or ())) for p in res.problems for c in p.candidates]


def test_a_tune_s_audit_load_runs_beside_its_plan_and_the_static_stage_is_the_same(jobs, tmp_path, monkeypatch):
    from tileprobe.probe import ahead
    from tileprobe.store import Store
    from tileprobe.tune import pipeline, tune
    seen, t0 = jobs
    planned: list[float] = []
    real = pipeline.load_space

    def load_space(*a, **kw):
        out = real(*a, **kw)
        planned.append(time.perf_counter() - t0)
        return out
    monkeypatch.setattr(pipeline, "load_space", load_space)
    results = {}
    for on in ("1", "0"):
        monkeypatch.setenv(ahead.ENV, on)
        seen.clear()
        planned.clear()
        with Store.open(str(tmp_path / f"store{on}.sqlite")) as s:
            results[on] = tune([VADD], arch="sm_90", num_sms=132, dry_run=True, store=s, jobs=2)
        loads = [t for t, kind in seen if kind == "check_file"]
        if on == "1":    # started before the plan was whole, and the audit took it: no load after the plan
            assert len(loads) == 1 and loads[0] < planned[0]
        else:
            assert len(loads) == 1 and loads[0] > planned[0]
    assert _static(results["1"]) == _static(results["0"]) and _static(results["0"])

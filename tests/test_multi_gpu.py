"""``--gpus``: one watchdog'd worker per listed GPU, a shared queue, shared GPUs flagged and never ranked.
Real worker processes with a fake init and task (tests/fake_gpu_tasks.py): no CUDA here."""
from __future__ import annotations

import hashlib

import pytest

from tileprobe.errors import UsageError
from tileprobe.run import multi, session
from tileprobe.schema import VariantRecord

CUBIN = b"fake cubin"
SHA = hashlib.sha256(CUBIN).hexdigest()


def _records(probe, kernels=("k", "k", "k"), occupancies=(1, 2, 4)):
    return [VariantRecord(kernel=k, probe=str(probe), case={"N": 1}, hints={"occupancy": o}, arch="sm_90",
                          tileiras="t", status="ok", cubin_sha256=SHA, symbol="s", threads=128)
            for k, o in zip(kernels, occupancies)]


@pytest.fixture
def fake_task(monkeypatch, tmp_path):
    monkeypatch.setattr(session, "TASK", "tests.fake_gpu_tasks:fake_run")
    probe = tmp_path / "p.py"
    probe.write_text("")
    return probe


def _slots(gpus, timeout_s=60.0):
    return multi.local_slots(gpus, timeout_s, init="tests.fake_gpu_tasks:fake_init")


def test_parse_gpus():
    assert multi.parse_gpus(None) == [0] and multi.parse_gpus("0,2") == [0, 2] and multi.parse_gpus("0,0") == [0, 0]
    assert multi.parse_gpus("all", lambda: 3) == [0, 1, 2]
    for bad in ("x", "-1", "0,,1"):
        with pytest.raises(UsageError, match="--gpus"):
            multi.parse_gpus(bad)
    with pytest.raises(UsageError, match="no GPU is visible"):
        multi.parse_gpus("all", lambda: 0)


def test_two_gpus_give_a_one_gpu_runs_results_and_record_their_gpu(fake_task):
    one = _records(fake_task)
    session.run_probes(one, {SHA: CUBIN}, slots=_slots([0]))
    two = _records(fake_task)
    res = session.run_probes(two, {SHA: CUBIN}, gpus=[0, 1], slots=_slots([0, 1]))
    assert [(r.run.status, r.run.median_us, r.run.seed) for r in two] == \
           [(r.run.status, r.run.median_us, r.run.seed) for r in one] == \
           [("ok", 11.0, 0), ("ok", 12.0, 1), ("ok", 14.0, 2)]
    for r in two:      # each run names its GPU, and ran where CUDA_VISIBLE_DEVICES said
        visible = r.run.extra["visible"]                  # the fake task's own key, kept as the worker sent it
        assert r.run.gpu["uuid"] == f"GPU-fake-{visible}" and r.run.gpu["index"] == int(visible)
        assert "shared_gpu" not in r.run.to_dict() and r.run.shared_gpu is None
    assert [g["index"] for g in res.environment["gpus"]] == [0, 1] and res.ran == 3
    assert sum(g["ran"] for g in res.environment["gpus"]) == 3
    assert [b["best_hints"] for b in session.best_hints(two)] == [{"occupancy": 1}]


def test_a_hang_on_one_gpu_does_not_stall_the_other(fake_task):
    recs = _records(fake_task, kernels=("hang", "k", "k", "k"), occupancies=(1, 1, 2, 4))
    res = session.run_probes(recs, {SHA: CUBIN}, slots=_slots([0, 1], timeout_s=4.0), timeout_s=4.0)
    assert recs[0].run.status == "hang" and [r.run.status for r in recs[1:]] == ["ok"] * 3
    hung = recs[0].run.gpu["index"]
    assert {r.run.gpu["index"] for r in recs[1:]} == {1 - hung}   # the other GPU ran all three meanwhile
    assert res.restarts == 1 and res.aborted is None


def test_workers_sharing_a_gpu_are_flagged_and_never_ranked(fake_task):
    recs = _records(fake_task)
    res = session.run_probes(recs, {SHA: CUBIN}, slots=_slots([0, 0]))
    assert all(r.run.status == "ok" and r.run.shared_gpu is True for r in recs)
    assert all(multi.SHARED_WARNING in r.run.warnings for r in recs)
    assert session.best_hints(recs) == []                      # shared timings are not ranked
    assert [g["shared_gpu"] for g in res.environment["gpus"]] == [True, True]
    assert any("never ranked" in s for s in res.skipped)


def test_no_slot_starts(fake_task):
    slots = multi.local_slots([0, 1], 5.0, init="tileprobe.no_such_module:init")
    with pytest.raises(session.WorkerStartError, match="no GPU worker could start"):
        session.run_probes(_records(fake_task), {SHA: CUBIN}, slots=slots)


def test_cli_takes_gpus_and_executor_options():
    from tileprobe.cli import build_parser
    from tileprobe.cli._common import gpus_of
    from tileprobe.exec import make_executor
    args = build_parser().parse_args(["run", "a.py", "--gpus", "0,0", "--executor", "ray", "--address", "auto"])
    assert gpus_of(args) == [0, 0] and args.executor == "ray" and args.address == "auto"
    args = build_parser().parse_args(["tune", "a.py", "--gpus", "1"])
    assert gpus_of(args) == [1] and args.executor == "local"
    assert gpus_of(build_parser().parse_args(["run", "a.py"])) is None          # today's one worker on GPU 0
    args = build_parser().parse_args(["audit", "a.py", "--executor", "ray"])
    assert args.executor == "ray" and not hasattr(args, "gpus")
    with pytest.raises(UsageError, match="--address is for --executor ray"):
        make_executor("local", address="auto")
    with pytest.raises(UsageError, match="use one of local, ray"):
        make_executor("dask")


def test_a_worker_started_from_a_thread_outlives_the_start():
    """PR_SET_PDEATHSIG follows the thread that started the worker: tune's starter thread stays until released, so
    the worker it started serves the first task (no silent second start-up)."""
    from tileprobe.run.watchdog import Watchdog
    from tileprobe.tune.pipeline import _WorkerStarter
    with Watchdog(init="tileprobe.run.worker:init_plain") as wd:
        starter = _WorkerStarter(wd)
        info, _, _ = starter.wait()
        import time
        time.sleep(0.5)
        out = wd.submit("os:getpid", {})
        assert out.status == "done" and out.value == info["pid"] and wd.pids == [info["pid"]]
        starter.release()

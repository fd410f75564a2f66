"""The watchdog and the worker protocol, on CPU, with fake tasks that hang, abort, get killed or exit.

The fake tasks below run inside real worker processes (``python -m tileprobe.run.worker``), loaded by file path;
the worker's init is ``init_plain`` (no GPU). Each fault must be reported for its own task only, the sweep must
finish within the timeout plus 10 s per fault, and no process may be left behind (cuda-core
``tests/helpers/child_processes.py`` checks the same).
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tileprobe.run import session as session_mod
from tileprobe.run.watchdog import Watchdog, WorkerStartError
from tileprobe.schema import VariantRecord, exit_text

HERE = os.path.abspath(__file__)
PLAIN = "tileprobe.run.worker:init_plain"


# --- fake tasks (run in the worker) ----------------------------------------------------------------------------

def task_echo(**kw):
    return {"status": "ok", "pid": os.getpid(), **kw}


def task_sleep(seconds=3600):
    time.sleep(seconds)
    return {"status": "ok"}


class _Hostile:
    """A probe-made object in a task's result: unpickled, it would run a command in the parent."""
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('TILEPROBE_TEST_MARKER', '/nonexistent/x')}",))

    def __repr__(self):
        return "<Hostile>"


def task_hostile_result():
    import numpy as np
    return {"status": "ok", "obj": _Hostile(), "median": np.float64(1.5), "n": np.int64(3), "pair": (1, 2)}


def task_garbage_on_the_pipe():
    """Probe code that finds the worker's pipe and writes a pickle (or anything) on it."""
    import pickle
    from multiprocessing.connection import Connection
    Connection(int(sys.argv[1]), readable=False).send_bytes(pickle.dumps(("result", 1, True, _Hostile())))
    time.sleep(60)


def task_wrong_shape_on_the_pipe():
    """Probe code that writes data on the worker's pipe, of another shape than a result."""
    from multiprocessing.connection import Connection

    from tileprobe.probe import wire
    wire.send(Connection(int(sys.argv[1]), readable=False), ("result", "all", "fine"))
    time.sleep(60)


def task_forged_result_for_another_task():
    """Probe code that writes a well-formed result, for a task id that is not its own, on the worker's pipe."""
    from multiprocessing.connection import Connection

    from tileprobe.probe import wire
    wire.send(Connection(int(sys.argv[1]), readable=False), ("result", 424242, True, "forged"))
    time.sleep(60)


def task_abort():
    os.abort()


def task_sigkill():
    os.kill(os.getpid(), signal.SIGKILL)


def task_exit(code=7):
    sys.stderr.write("about to exit\n")
    sys.stderr.flush()
    os._exit(code)


def task_raise():
    raise ValueError("the probe's own bug")


def task_fatal():
    return {"status": "crash", "fatal": True, "error": "CUDA_ERROR_ILLEGAL_ADDRESS"}


def task_spawn_and_hang():
    """Leave a grandchild behind and hang: the watchdog must kill the whole process group."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.environ["TP_GRANDCHILD_FILE"], "w") as f:
        f.write(str(child.pid))
    time.sleep(3600)


def init_fail():
    raise RuntimeError("no GPU here, on purpose")


def init_slow():
    time.sleep(3600)


def init_one_second():
    time.sleep(1.0)


def fake_variant(record, cubin, probe_path, seed=0, **kw):
    """Stands in for worker.run_variant: behaves as the record's case says."""
    mode = record["case"]["mode"]
    if mode == "hang":
        time.sleep(3600)
    if mode == "abort":
        os.abort()
    if mode == "sticky":
        return {"status": "crash", "fatal": True, "error": "CUDA_ERROR_ILLEGAL_ADDRESS", "cuda_error": 700}
    return {"status": "ok", "median_us": 10.0 + seed, "seed": seed, "cubin_sha256": record["cubin_sha256"],
            "pid": os.getpid()}


def init_gpu_like():
    return {"sm": "sm_90", "name": "Fake H200", "pid": os.getpid()}


# --- helpers ---------------------------------------------------------------------------------------------------

def task(name):
    return f"{HERE}:{name}"


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before():
    """Children this process already had (e.g. multiprocessing's resource tracker, started by an earlier test's
    compile pool) are not this test's leftovers."""
    _BEFORE.clear()
    _BEFORE.update(children_of(os.getpid()))
    yield


def new_children() -> list[int]:
    """Children of this process started during the current test and still there (zombies included)."""
    return sorted(set(children_of(os.getpid())) - _BEFORE)


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc; zombies count: they are what we must not leave)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


@pytest.fixture
def wd():
    w = Watchdog(timeout_s=1.0, init=PLAIN, grace_s=0.5, startup_timeout_s=60)
    yield w
    w.close()


# --- tests -----------------------------------------------------------------------------------------------------

def test_one_worker_serves_many_tasks(wd):
    info = wd.start()
    pids = {wd.submit(task("task_echo"), {"i": i}).value["pid"] for i in range(5)}
    assert pids == {info["pid"]}
    out = wd.submit(task("task_echo"), {"x": [1, 2]})
    assert out.status == "done" and out.value["x"] == [1, 2] and out.worker_pid == info["pid"]
    assert wd.restarts == 0 and len(wd.pids) == 1


def test_hang_is_killed_within_timeout_and_next_task_runs_fresh(wd):
    first = wd.start()["pid"]
    t0 = time.perf_counter()
    out = wd.submit(task("task_sleep"), timeout_s=1.0)
    took = time.perf_counter() - t0
    assert out.status == "hang"
    assert "no result within 1 s" in out.error
    assert 1.0 <= took < 1.0 + 10
    assert not alive(first)
    nxt = wd.submit(task("task_echo"))
    assert nxt.status == "done" and nxt.value["pid"] != first
    assert wd.restarts == 1


@pytest.mark.parametrize("name,expect", [("task_abort", "SIGABRT"), ("task_sigkill", "SIGKILL"),
                                         ("task_exit", "exit code 7")])
def test_worker_death_is_a_crash_of_that_task_only(wd, name, expect):
    before = wd.start()["pid"]
    out = wd.submit(task(name))
    assert out.status == "crash"
    assert expect in out.error and out.exit_status == exit_text(
        -signal.SIGABRT if expect == "SIGABRT" else -signal.SIGKILL if expect == "SIGKILL" else 7)
    if name == "task_exit":
        assert "about to exit" in out.error   # the worker's log tail comes with the report
    nxt = wd.submit(task("task_echo"))
    assert nxt.status == "done" and nxt.value["pid"] != before
    assert not alive(before)


def test_task_exception_is_reported_and_worker_survives(wd):
    pid = wd.start()["pid"]
    out = wd.submit(task("task_raise"))
    assert out.status == "raised" and "ValueError: the probe's own bug" in out.error
    assert wd.submit(task("task_echo")).value["pid"] == pid


def test_sticky_error_result_replaces_the_worker(wd):
    pid = wd.start()["pid"]
    out = wd.submit(task("task_fatal"))
    assert out.status == "done" and out.value["fatal"]
    nxt = wd.submit(task("task_echo"))
    assert nxt.value["pid"] != pid and wd.restarts == 1
    assert not alive(pid)


def test_sweep_with_faults_finishes_within_budget_and_leaves_no_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_GRANDCHILD_FILE", str(tmp_path / "grandchild"))
    plan = ["task_echo", "task_sleep", "task_echo", "task_abort", "task_echo", "task_sigkill",
            "task_spawn_and_hang", "task_exit", "task_echo"]
    faults = sum(p != "task_echo" for p in plan)
    timeout = 1.0
    t0 = time.perf_counter()
    with Watchdog(timeout_s=timeout, init=PLAIN, grace_s=0.5) as w:
        statuses = [w.submit(task(p)).status for p in plan]
        pids = list(w.pids)
    took = time.perf_counter() - t0
    assert statuses == ["done", "hang", "done", "crash", "done", "crash", "hang", "crash", "done"]
    assert took < faults * (timeout + 10)
    assert new_children() == []
    assert not any(alive(p) for p in pids)
    grandchild = int((tmp_path / "grandchild").read_text())
    deadline = time.time() + 5
    while alive(grandchild) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_close_stops_the_worker_and_is_idempotent():
    w = Watchdog(init=PLAIN)
    pid = w.start()["pid"]
    w.close()
    w.close()
    assert not alive(pid) and new_children() == []


def test_close_while_another_thread_starts_the_worker_stops_it_as_it_comes_up():
    """A tune whose plan fails closes its watchdog while the worker it started beside the plan is still starting:
    the start gives the worker up and says why; no process is left."""
    import threading
    w = Watchdog(init=task("init_one_second"), grace_s=0.5)
    seen = {}

    def start():
        try:
            seen["info"] = w.start()
        except (WorkerStartError, OSError) as e:
            seen["error"] = e
    t = threading.Thread(target=start)
    t.start()
    time.sleep(0.3)              # the worker is up, sleeping in its init
    w.close()
    t.join(30)
    assert "info" not in seen and "closed while its worker started" in str(seen["error"])
    assert w.pids and not alive(w.pids[-1]) and new_children() == []


def test_worker_that_cannot_start_raises_with_its_reason():
    with Watchdog(init=task("init_fail")) as w:
        with pytest.raises(WorkerStartError, match=r"(?s)could not start.*no GPU here, on purpose"):
            w.start()
    assert new_children() == []


def test_worker_start_timeout():
    t0 = time.perf_counter()
    with Watchdog(init=task("init_slow"), startup_timeout_s=1.0, grace_s=0.5) as w:
        with pytest.raises(WorkerStartError, match=r"no hello within 1 s"):
            w.start()
    assert time.perf_counter() - t0 < 10
    assert new_children() == []


def test_describe_exit():
    assert exit_text(None) == "still running"
    assert exit_text(-signal.SIGKILL) == "killed by SIGKILL (signal 9)"
    assert exit_text(3) == "exit code 3"


# --- the session over real worker processes, with a fake variant task ----------------------------------------

def _record(mode: str, cubin: bytes) -> VariantRecord:
    return VariantRecord(kernel="fake", probe=HERE, case={"mode": mode}, hints={"occupancy": 1}, arch="sm_90",
                         tileiras="t", status="ok", symbol="k", signature=[], threads=128, ctas_per_sm=4,
                         cubin_sha256=hashlib.sha256(cubin).hexdigest())


def test_run_probes_reports_each_fault_and_goes_on(monkeypatch):
    monkeypatch.setattr(session_mod, "TASK", task("fake_variant"))
    cubin = b"not really a cubin"
    modes = ["ok", "hang", "ok", "abort", "ok", "sticky", "ok"]
    records = [_record(m, cubin) for m in modes]
    records.append(VariantRecord(kernel="fake", probe=HERE, case={"mode": "ok"}, hints={}, arch="sm_120",
                                 tileiras="t", status="ok", cubin_sha256=records[0].cubin_sha256))
    records.append(VariantRecord(kernel="fake", probe=HERE, case={"mode": "ok"}, hints={}, arch="sm_90",
                                 tileiras="t", status="compile_error"))
    t0 = time.perf_counter()
    with Watchdog(timeout_s=1.0, init=task("init_gpu_like"), grace_s=0.5) as w:
        res = session_mod.run_probes(records, {records[0].cubin_sha256: cubin}, watchdog=w, timeout_s=1.0, seed=5)
    assert time.perf_counter() - t0 < 3 * (1.0 + 10)
    got = [r.run.status if r.run else None for r in records]
    assert got == ["ok", "hang", "ok", "crash", "ok", "crash", "ok", None, None]
    assert res.ran == 7 and res.restarts == 3 and len(res.skipped) == 1
    assert records[0].run.seed == 5 and records[2].run.seed == 7
    assert records[1].run.static_ctas_per_sm == 4 and records[1].run.threads == 128
    assert "SIGABRT" in records[3].run.error
    assert records[5].run.cuda_error == 700
    assert res.environment["gpu"]["name"] == "Fake H200"
    assert new_children() == []


def test_cli_runs_a_bundle_end_to_end(tmp_path, monkeypatch):
    """``tileprobe run --bundle DIR`` on records and cubins written elsewhere (fake worker: no GPU needed)."""
    import json

    from tileprobe.cli import main
    from tileprobe.run import watchdog as wd_mod
    from tileprobe.schema import dump

    class CpuWatchdog(wd_mod.Watchdog):
        def __init__(self, **kw):
            super().__init__(init=task("init_gpu_like"), grace_s=0.5, **kw)

    monkeypatch.setattr(wd_mod, "Watchdog", CpuWatchdog)
    monkeypatch.setattr(session_mod, "TASK", task("fake_variant"))
    cubin = b"cubin from the audit machine"
    records = [_record(m, cubin) for m in ("ok", "hang", "ok")]
    for r in records:
        r.probe = "/audit/machine/path/" + os.path.basename(HERE)   # as written on another machine
    bundle = tmp_path / "bundle"
    (bundle / "cubins").mkdir(parents=True)
    (bundle / "audit.json").write_text(json.dumps(dump(records, {"tileiras": ["t"]})))
    (bundle / "cubins" / f"{records[0].cubin_sha256}.cubin").write_bytes(cubin)
    out = tmp_path / "run.json"
    rc = main(["run", "--bundle", str(bundle), HERE, "--timeout", "1", "--json", str(out), "--format", "none"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert [v["run"]["status"] for v in doc["variants"]] == ["ok", "hang", "ok"]
    assert doc["environment"]["gpu"]["name"] == "Fake H200" and doc["environment"]["bundle"] == str(bundle)
    assert new_children() == []


def test_a_result_crosses_as_data_only(wd, tmp_path, monkeypatch):
    """What the worker (which runs probe code) sends is JSON data, never unpickled in the parent: a
    probe-made object arrives as its repr text and its __reduce__ never runs; numpy scalars arrive as numbers."""
    marker = tmp_path / "ran"
    monkeypatch.setenv("TILEPROBE_TEST_MARKER", str(marker))
    out = wd.submit(task("task_hostile_result"))
    assert out.status == "done"
    assert out.value == {"status": "ok", "obj": "<Hostile>", "median": 1.5, "n": 3, "pair": (1, 2)}
    assert type(out.value["median"]) is float and type(out.value["n"]) is int
    assert not marker.exists()


def test_a_pickle_written_on_the_pipe_is_a_crash_not_run(wd, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("TILEPROBE_TEST_MARKER", str(marker))
    out = wd.submit(task("task_garbage_on_the_pipe"), timeout_s=30)
    assert out.status == "crash" and "not tileprobe's data" in out.error, out
    assert not marker.exists()
    assert wd.submit(task("task_echo"), {"i": 1}).status == "done"   # a fresh worker serves the next task


def test_data_of_another_shape_written_on_the_pipe_is_a_crash(wd):
    out = wd.submit(task("task_wrong_shape_on_the_pipe"), timeout_s=30)
    assert out.status == "crash" and "not tileprobe's data" in out.error and "not (\"result\", id" in out.error, out
    assert wd.restarts == 1 and wd.submit(task("task_echo"), {"i": 2}).status == "done"


def test_a_result_for_another_task_is_a_crash_and_the_next_task_runs(wd):
    out = wd.submit(task("task_forged_result_for_another_task"), timeout_s=30)
    assert out.status == "crash" and out.value is None, out
    assert "not tileprobe's data" in out.error and "task 424242, not for this task" in out.error, out
    assert wd.restarts == 1
    nxt = wd.submit(task("task_echo"), {"i": 3})
    assert nxt.status == "done" and nxt.worker_pid != out.worker_pid

"""The Ray executor on this CPU machine: logical CPUs and GPUs, and a 2-node local
cluster. Ray is in the ``test`` extra, so these run in CI (they skip only where Ray is not installed).

Few and module-scoped: one Ray instance (``num_cpus=2, num_gpus=2``) for the first tests, a 2-node
``ray.cluster_utils.Cluster`` for the last."""
from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from support import fake_tileiras  # noqa: E402

from tileprobe.audit import audit  # noqa: E402
from tileprobe.exec.ray_exec import RayExecutor  # noqa: E402
from tileprobe.store import Store  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants
RUNTIME_ENV = {"env_vars": {"PYTHONPATH": ROOT}}

pytestmark = pytest.mark.slow      # minutes: local Ray instances and a 2-node cluster start and stop


@pytest.fixture(scope="module")
def ray_session():
    if ray.is_initialized():
        ray.shutdown()
    # address="local": a Ray of this test's own, never one another test run (or a developer) started on this machine
    # (with no address Ray joins the latest cluster it finds: RAY_ADDRESS, then /tmp/ray/ray_current_cluster)
    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env=RUNTIME_ENV)
    yield
    ray.shutdown()


def _compiles(folder) -> int:
    log = folder / "compiles.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _facts(records) -> dict:
    return {(r.case["TILE"], r.hints["occupancy"]): (r.status, r.code_sha256, r.registers, r.shared_bytes,
                                                     r.ctas_per_sm) for r in records}


def test_ray_and_local_pool_give_the_same_records(ray_session):
    ex = RayExecutor()
    assert not ex.owned and ex.jobs == 2
    by_ray = audit([PROBE], ["sm_90"], executor=ex)
    local = audit([PROBE], ["sm_90"], jobs=2)
    assert len(by_ray.records) == 4 and all(r.status == "ok" for r in by_ray.records)
    assert _facts(by_ray.records) == _facts(local.records)
    assert set(by_ray.cubins) == set(local.cubins) or all(r.code_sha256 for r in by_ray.records)


def test_a_hung_compile_task_is_cancelled_and_the_sweep_goes_on(ray_session, tmp_path):
    fake = fake_tileiras(tmp_path, 'if [ "$n" -eq 0 ]; then sleep 291; fi', logged=True)   # the first compile hangs
    ex = RayExecutor(deadline_s=30.0)
    res = audit([PROBE], ["sm_90"], executor=ex, toolchains=[{"tileiras": fake}], timeout_s=600)
    statuses = sorted(r.status for r in res.records)
    assert statuses == ["ok", "ok", "ok", "timeout"], [(r.status, r.error) for r in res.records]
    assert ex.cancelled == 1
    assert "Ray task was cancelled" in next(r.error for r in res.records if r.status == "timeout")


def test_gpu_runs_through_ray_actors_on_logical_gpus(ray_session, tmp_path, monkeypatch):
    from tileprobe.run import multi, session
    from tileprobe.schema import VariantRecord
    monkeypatch.setattr(session, "TASK", "tests.fake_gpu_tasks:fake_run")
    cubin = b"fake cubin"
    sha = hashlib.sha256(cubin).hexdigest()
    probe = tmp_path / "p.py"
    probe.write_text("")
    recs = [VariantRecord(kernel=k, probe=str(probe), case={"N": 1}, hints={"occupancy": o}, arch="sm_90",
                          tileiras="t", status="ok", cubin_sha256=sha, symbol="s", threads=128)
            for k, o in (("hang", 1), ("k", 1), ("k", 2), ("k", 4))]
    ex = RayExecutor()
    slots = [multi.Slot(i, w) for i, w in enumerate(ex.gpu_slots([0, 1], timeout_s=8.0,
                                                                   init="tests.fake_gpu_tasks:fake_init"))]
    res = session.run_probes(recs, {sha: cubin}, slots=slots, timeout_s=8.0)
    assert [r.run.status for r in recs] == ["hang", "ok", "ok", "ok"]
    assert [r.run.median_us for r in recs[1:]] == [11.0, 12.0, 14.0]
    ids = {tuple(g) for g in (s.info["ray_gpu_ids"] for s in slots)}
    assert len(ids) == 2                                   # one logical GPU each
    assert res.restarts == 1 and not any(r.run.shared_gpu for r in recs)


def test_a_node_killed_mid_sweep_loses_nothing_finished(tmp_path):
    from ray.cluster_utils import Cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    node = cluster.add_node(num_cpus=1)
    fake = fake_tileiras(tmp_path, "sleep 3", logged=True)
    db = str(tmp_path / "s.sqlite")
    try:
        ray.init(address=cluster.address, log_to_driver=False, runtime_env=RUNTIME_ENV)
        cluster.wait_for_nodes()

        def kill_when_one_stored():
            t = time.monotonic()
            while time.monotonic() - t < 300:
                with Store.open(db) as s:
                    if s._query("SELECT count(*) FROM compiles")[0][0] >= 1:
                        break
                time.sleep(0.5)
            cluster.remove_node(node)
        killer = threading.Thread(target=kill_when_one_stored, daemon=True)
        with Store.open(db) as store:
            killer.start()
            res = audit([PROBE], ["sm_90"], executor=RayExecutor(), toolchains=[{"tileiras": fake}], store=store,
                        timeout_s=600)
        killer.join()
        assert len(res.records) == 4
        with Store.open(db) as store:
            stored = {k: s for k, s in store._query("SELECT key, status FROM compiles")}
            finished = [r for r in res.records if r.status == "ok"]
            assert len(stored) == 4 and len(finished) >= 1      # every finished variant is in the store
            before = _compiles(tmp_path)
            again = audit([PROBE], ["sm_90"], executor=RayExecutor(), toolchains=[{"tileiras": fake}], store=store)
        assert _compiles(tmp_path) == before                    # nothing stored is compiled again
        assert _facts(again.records) == _facts(res.records)
    finally:
        ray.shutdown()
        cluster.shutdown()


# --- an unreachable --address, SIGTERM under Ray, actor results as data only ---------------------------------------

def test_an_address_where_nothing_listens_is_refused_at_once():
    """Ray waited more than 200 s without a word for an address where nothing listens (a tester, 2026-12-01)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", PROBE, "--arch", "sm_90", "--no-store",
                           "--executor", "ray", "--address", "127.0.0.1:9"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2, proc.stderr
    assert "--address 127.0.0.1:9: nothing answers at 127.0.0.1:9 within 10 s" in proc.stderr


def test_sigterm_under_ray_exits_as_the_local_executor(tmp_path):
    """143 and the kept-compiles line (was: exit -6 and Ray's stack dump)."""
    import signal
    import sqlite3
    import subprocess
    import sys
    hang = f"293.{os.getpid()}"      # this process's own: a parallel test run never matches it
    fake = fake_tileiras(tmp_path, f'if [ "$n" -ge 1 ]; then sleep {hang}; fi', logged=True)
    db = str(tmp_path / "s.sqlite")
    p = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", PROBE, "--arch", "sm_90", "--tileiras", fake,
                          "--store", db, "--no-sass", "--executor", "ray", "--format", "none"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    deadline = time.time() + 240

    def stored() -> int:
        try:
            with sqlite3.connect(db) as c:
                return c.execute("SELECT COUNT(*) FROM compiles").fetchone()[0]
        except sqlite3.Error:
            return 0
    try:
        while time.time() < deadline and p.poll() is None and not (stored() >= 1 and _compiles(tmp_path) >= 2):
            time.sleep(0.3)
        assert p.poll() is None, p.communicate()[0]
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        subprocess.run(["pkill", "-f", f"^sleep {hang}$"])
    assert p.returncode == 143, out
    assert "terminated by SIGTERM; 1 compile finished before it is kept in the results store" in out, out


def test_a_gpu_actor_result_crosses_ray_as_data_only(tmp_path, monkeypatch):
    """What a Ray GPU actor returns (its task ran probe code) is a wire message (bytes), so
    Ray's pickle carries only bytes and the driver parses JSON: a probe-made object arrives as its repr text, its
    __reduce__ never runs. Ray is simulated: each call pickles the actor's return value and unpickles it here, as
    Ray's object store does."""
    import pickle

    from tileprobe.exec import ray_exec
    marker = tmp_path / "ran"
    monkeypatch.setenv("TILEPROBE_TEST_MARKER", str(marker))

    class Ctx:
        def get_node_id(self):
            return "node-1"

    class FakeRay:
        def get_gpu_ids(self):
            return [0]

        def get_runtime_context(self):
            return Ctx()

        def remote(self, **_):
            def wrap(cls):
                class Remote:
                    @staticmethod
                    def remote(*a):
                        actor = cls(*a)
                        return type("Handle", (), {name: type("M", (), {"remote": staticmethod(
                            lambda *x, m=getattr(actor, name): pickle.dumps(m(*x)))})  # noqa: B008 (binds each name)
                            for name in ("hello", "task")})()
                return Remote
            return wrap

        def get(self, ref, timeout=None):
            return pickle.loads(ref)

        def wait(self, refs, num_returns=1, timeout=None):
            return refs, []

        def kill(self, actor):
            pass
    monkeypatch.setattr(ray_exec, "_ray", lambda: FakeRay())
    monkeypatch.setattr(ray_exec, "_wait", lambda ray, refs, t: refs)
    slot = ray_exec.RayGpuSlot(FakeRay(), "tileprobe.run.worker:init_plain", timeout_s=30)
    assert slot.start()["ray_node"] == "node-1"
    out = slot.submit(f"{os.path.join(ROOT, 'tests', 'test_run_watchdog.py')}:task_hostile_result")
    assert out.status == "done", out
    assert out.value == {"status": "ok", "obj": "<Hostile>", "median": 1.5, "n": 3, "pair": (1, 2)}
    assert not marker.exists()
    failed = slot.submit("tileprobe.run.worker:no_such_task")
    assert failed.status == "raised" and "no_such_task" in failed.error

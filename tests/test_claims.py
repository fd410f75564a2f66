"""Claims in the store: processes sharing a store never compile one variant twice at once."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from support import fake_tileiras

from tileprobe.store import Store, now

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_claim_is_mine_theirs_stale_or_stored(tmp_path):
    with Store.open(tmp_path / "s.sqlite") as store:
        since = now()
        assert store.claim("k1", 60) == "mine"
        assert store.claim("k1", 60) == "mine"                          # already ours
        assert store.claim("k1", 60, pid=os.getppid()) == "theirs"      # a live process of this host holds it
        assert store.claim_state("k1") == "claimed"
        dead = _dead_pid()
        assert store.claim("k2", 60, pid=dead) == "mine"
        assert store.claim_state("k2") == "free"                        # its owner is gone
        assert store.claim("k2", 60) == "mine"                          # taken over
        store._conn.execute("INSERT INTO claims VALUES ('k3', 'other-host', 1, 0, ?)", (time.time() - 1,))
        assert store.claim("k3", 60) == "mine"                          # lease past: taken over
        store._conn.execute("INSERT INTO claims VALUES ('k4', 'other-host', 1, 0, ?)", (time.time() + 60,))
        assert store.claim("k4", 60) == "theirs"                        # another host's live lease
        store._conn.execute("INSERT INTO compiles (key, created, kernel, arch, status, record) "
                            "VALUES ('k5', ?, 'k', 'sm_90', 'ok', '{}')", (now(),))
        assert store.claim("k5", 60, since=since) == "stored" and store.claim_state("k5", since) == "stored"
        assert store.release_claims() == 3                               # k1, k2, k3 (k4 is the other host's)
        assert store._query("SELECT key FROM claims") == [("k4",)]


def test_two_concurrent_audits_on_one_store_compile_each_variant_once(tmp_path):
    fake = fake_tileiras(tmp_path, "sleep 1.5", logged=True)   # two audits overlap
    env = {**os.environ, "PYTHONPATH": ROOT}
    argv = [sys.executable, "-m", "tileprobe", "audit", PROBE, "--arch", "sm_90", "--tileiras", fake,
            "--store", str(tmp_path / "s.sqlite"), "--no-sass", "-j", "2", "--format", "none", "--json"]
    procs = [subprocess.Popen(argv + [str(tmp_path / f"a{i}.json")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    compiles = (tmp_path / "compiles.log").read_text().splitlines()
    assert len(compiles) == 4, compiles                 # four variants, each compiled once between the two
    from tileprobe.schema import load
    a, b = (load(str(tmp_path / f"a{i}.json"))[0] for i in range(2))
    assert len(a) == len(b) == 4
    key = lambda r: (r.case.get("TILE"), r.hints.get("occupancy"))
    assert {key(r): (r.status, r.code_sha256) for r in a} == {key(r): (r.status, r.code_sha256) for r in b}
    assert all(r.status == "ok" for r in a)
    with Store.open(tmp_path / "s.sqlite") as store:
        assert store._query("SELECT count(*) FROM claims")[0][0] == 0   # every claim released

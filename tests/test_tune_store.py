"""Store schema 3 (``tunes``, ``tune_candidates``): a schema-2 store written by the previous tileprobe is migrated
in place, keeps its compiles and runs, and takes tunes; the previous compiler's tune is found."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tileprobe.store import SCHEMA_VERSION, Store

DATA = Path(__file__).resolve().parent / "data" / "stores"
B134 = "Cuda compilation tools, release 13.4, V13.4.92"
B133 = "Cuda compilation tools, release 13.3, V13.3.36"


def _problem(build: str, pick_case: int, median: float) -> dict:
    row = {"config": {"case": {"TILE": pick_case}, "hints": {"occupancy": 1}}, "label": f"TILE={pick_case}",
           "status": "winner", "n": 40, "median_us": median, "ci_lo_us": median - 1, "ci_hi_us": median + 1,
           "clocks_moved": False, "compile_key": "k1"}
    other = {"config": {"case": {"TILE": 7}, "hints": {"occupancy": 2}}, "label": "TILE=7", "status": "hang",
             "reason": "no result within 60 s"}
    return {"kernel": "fake", "probe": "/tmp/fake_probe.py", "problem": {"M": 4096}, "arch": "sm_90",
            "verdict": "winner", "pick": row, "tie": [], "tileiras": build, "cuda_tile": "1.7.0",
            "candidates": [row, other]}


ENV = {"gpu": {"name": "NVIDIA H200", "uuid": "GPU-1", "driver": "580.159.04"}, "timing": "sustained",
       "strategy": "race"}


def test_schema_2_store_from_the_previous_tileprobe_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(DATA / "schema2.sqlite", path)     # written by tileprobe at commit 26b4e22 (store schema 2)
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 2
    with Store.open(str(path)) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        meta = store.meta()
        assert meta["migrated_from"] == "2" and meta["created"].startswith("2026-12-01")
        old = store.records()
        assert [(r.kernel, r.case, r.registers) for r in old] == [("fake", {"I": 0}, 32), ("fake", {"I": 1}, 33)]
        assert old[0].run.median_us == 12.5 and old[0].run.gpu == "NVIDIA H200"
        tid = store.save_tune(_problem(B134, 3, 100.0), ENV)
        rows = store._query("SELECT position, status, config_json, median_us FROM tune_candidates WHERE tune_id = ?",
                            (tid,))
        assert rows == [(0, "winner", '{"case": {"TILE": 3}, "hints": {"occupancy": 1}}', 100.0),
                        (1, "hang", '{"case": {"TILE": 7}, "hints": {"occupancy": 2}}', None)]
    with Store.open(str(path)) as store:   # opening again migrates nothing
        assert store.meta()["migrated_from"] == "2" and len(store.tunes()) == 1


def test_previous_tune_is_the_newest_with_another_compiler(tmp_path):
    with Store.open(str(tmp_path / "s.sqlite")) as store:
        store.save_tune(_problem(B133, 3, 90.0), ENV)
        store.save_tune(_problem(B133, 5, 95.0), ENV)
        store.save_tune(_problem(B134, 3, 100.0), ENV)
        store.save_tune(_problem(B133, 9, 1.0), {**ENV, "timing": "burst"})           # another timing mode
        store.save_tune(_problem(B133, 9, 1.0), {**ENV, "gpu": {"name": "NVIDIA B200"}})  # another GPU
        prev = store.previous_tune("fake", {"M": 4096}, "NVIDIA H200", "sustained", B134)
        assert prev["tileiras"] == B133 and prev["pick"]["config"]["case"] == {"TILE": 5}
        assert prev["timing"] == "sustained" and prev["gpu_name"] == "NVIDIA H200"
        assert store.previous_tune("fake", {"M": 8192}, "NVIDIA H200", "sustained", B134) is None
        assert [t["pick"]["median_us"] for t in store.tunes(kernel="fake", gpu_name="NVIDIA H200")] == [1.0, 100.0,
                                                                                                        95.0, 90.0]

"""Typed records inside, dicts only at the JSON/SQLite edge: a record's verdicts are :class:`Verdict`
objects and its GPU run a :class:`VariantRun`, and a stored record reads and writes back the same text."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest

from tileprobe.analyses.gate import check
from tileprobe.analyses.noise import TimeStats
from tileprobe.report.common import run_cell, verdict_cells, verdict_text
from tileprobe.schema import VariantRecord, VariantRun, Verdict, load, verdicts_from_dict, verdicts_to_dict

DATA = os.path.join(os.path.dirname(__file__), "data")
RUN_JSON = os.path.join(DATA, "golden", "cli", "inputs", "two_release_run.json")   # a `run --json` file with verdicts
OLD_STORE = os.path.join(DATA, "schema1_store.sqlite")
STORE_2 = os.path.join(DATA, "stores", "schema2.sqlite")


def _variants(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)["variants"]


def test_a_stored_record_reads_and_writes_back_the_same_json():
    variants = _variants(RUN_JSON)
    assert len(variants) == 6 and all(v["verdicts"] and v["run"] for v in variants)
    for v in variants:
        rec = VariantRecord.from_dict(v)
        assert all(isinstance(x, Verdict) for x in rec.verdicts.values()), rec.verdicts
        assert isinstance(rec.run, VariantRun) and rec.run.median_us == v["run"]["median_us"]
        assert json.dumps(rec.to_dict()) == json.dumps(v)          # same keys, same order, same values


def test_verdicts_are_typed_after_load_and_read_as_attributes():
    records, _ = load(RUN_JSON)
    r = records[0]
    raw = _variants(RUN_JSON)[0]["verdicts"]
    hint = next(iter(raw))
    assert r.verdicts[hint] == Verdict(raw[hint]["status"], raw[hint]["reason"])
    assert r.verdict_status(hint) == raw[hint]["status"] and r.verdict_status("num_ctas", "-") == "-"
    assert verdict_cells(r, [hint, "num_ctas"]) == [raw[hint]["status"], "-"]


def _column(path: str, sql: str) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)   # immutable: no -wal/-shm beside it
    try:
        return [row[0] for row in con.execute(sql)]
    finally:
        con.close()


def test_the_store_verdict_rows_read_and_write_back_the_same_text():
    rows = _column(OLD_STORE, "SELECT verdicts FROM audit_compiles")
    assert rows and all(json.loads(t) for t in rows)
    for text in rows:
        typed = verdicts_from_dict(json.loads(text))
        assert {type(v) for v in typed.values()} == {Verdict}
        assert json.dumps(verdicts_to_dict(typed), default=str) == text


def test_readers_use_the_typed_verdict():
    r = VariantRecord(kernel="k", probe="p.py", case={}, hints={"occupancy": 4}, arch="sm_90", tileiras="t",
                      status="ok", verdicts={"occupancy": Verdict("ignored", "1 CTA/SM < 4; limiter: registers")})
    assert verdict_text(r) == "occupancy IGNORED"
    assert verdict_text(r, long=True) == "occupancy IGNORED: 1 CTA/SM < 4; limiter: registers"
    (failure,) = check([r], ["occupancy honoured"])
    assert (failure.got, failure.reason) == ("ignored", "1 CTA/SM < 4; limiter: registers")
    assert r.to_dict()["verdicts"] == {"occupancy": {"status": "ignored", "reason": "1 CTA/SM < 4; limiter: registers"}}


def test_a_verdict_grows_its_reason_without_changing_the_original():
    v = Verdict("partial", "2 CTAs/SM")
    assert v.extended("; 4 CTAs/SM would need ≤ 64 registers") == Verdict(
        "partial", "2 CTAs/SM; 4 CTAs/SM would need ≤ 64 registers")
    assert v.reason == "2 CTAs/SM"
    assert Verdict.from_dict({"status": "met", "reason": None}) == Verdict("met", "")   # a damaged file


def test_the_store_run_rows_read_and_write_back_the_same_text():
    rows = _column(STORE_2, "SELECT run FROM runs")
    assert rows == ['{"status": "ok", "median_us": 12.5}']
    for text in rows:
        assert json.dumps(VariantRun.from_dict(json.loads(text)).to_dict(), default=str) == text


def test_a_run_keeps_its_keys_their_order_and_keys_it_does_not_know():
    old = {"status": "ok", "median_us": 13.4, "reps": 100, "gpu": "NVIDIA H200", "noise_us": 0.5}   # no p25_us
    run = VariantRun.from_dict(old)
    assert (run.status, run.median_us, run.p25_us, run.gpu_name, run.extra) == (
        "ok", 13.4, None, "NVIDIA H200", {"noise_us": 0.5})
    run.shared_gpu = True                                    # a key set later goes last, as the dict had it
    assert list(run.to_dict()) == [*old, "shared_gpu"] and old == VariantRun.from_dict(old).to_dict()
    assert VariantRun(gpu={"name": "NVIDIA B200", "index": 1}).gpu_name == "NVIDIA B200"
    with pytest.raises(TypeError, match="no field median"):
        VariantRun(median=1.0)                               # a typo is an error inside the program
    assert not VariantRun.from_dict({}) and VariantRun.from_dict({}).to_dict() == {}
    with pytest.raises(AttributeError):
        run.median = 1.0


def test_readers_use_the_typed_run():
    run = VariantRun(status="ok", median_us=26.0, spread_pct=1.2, reps=100, stdev_us=0.5, mean_us=26.1)
    r = VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_90", tileiras="t", status="ok", run=run)
    assert run_cell(r) == "ok 26.0 µs ±1.2%"
    st = TimeStats.of(r.run)
    assert (st.n, st.mean_us, st.stdev_us, st.source) == (100, 26.1, 0.5, "summary")
    assert r.to_dict()["run"] == {"status": "ok", "median_us": 26.0, "spread_pct": 1.2, "reps": 100,
                                  "stdev_us": 0.5, "mean_us": 26.1}


def test_the_sass_facts_are_a_record_and_write_back_the_same_json():
    from tileprobe.errors import TileprobeError
    from tileprobe.model.sass import split_register_pool, tma_data_ops
    from tileprobe.records import SassFacts
    from tileprobe.schema import check_fields
    variants = _variants(os.path.join(DATA, "schema1_audit.json"))     # SASS traits of a schema-1 audit
    assert sum(1 for v in variants if v.get("sass")) >= 3
    for v in variants:
        rec = VariantRecord.from_dict(v)
        if v.get("sass"):
            assert isinstance(rec.sass, SassFacts) and rec.sass.spill_loads == v["sass"]["spill_loads"]
            assert rec.sass.target == v["sass"]["target"] and list(rec.sass.to_dict()) == list(v["sass"])
        assert json.dumps(rec.to_dict()["sass"]) == json.dumps(v.get("sass"))
    old = SassFacts.from_dict({"tma": {"UTMALDG": 3, "UTMACMDFLUSH": 1}, "spill_loads": 0, "spill_stores": 2})
    assert (old.target, old.matrix_families, old.spills()) == (None, None, {"spill_loads": 0, "spill_stores": 2})
    r = VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_90", tileiras="t", status="ok", sass=old)
    assert tma_data_ops(r) == 3 and "matrix" not in old and not SassFacts() and SassFacts(error="x").spills() is None
    sass, pool = split_register_pool({"error": "nvdisasm missing"})      # the worker's pipe form
    assert (sass, pool) == (SassFacts(error="nvdisasm missing"), None) and split_register_pool(None) == (None, None)
    sass, pool = split_register_pool({"spill_loads": 1, "register_pool": {"verdict": "none", "reason": "r"}})
    assert sass.to_dict() == {"spill_loads": 1} and pool.verdict == "none"
    with pytest.raises(TileprobeError, match=r"variants\[0\]\.sass is \[1\], not an object or null"):
        check_fields(0, {**variants[0], "sass": [1]}, "a.json")

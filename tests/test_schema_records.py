"""Typed records inside, dicts only at the JSON/SQLite edge (issue 24): a record's verdicts are :class:`Verdict`
objects, and a stored record reads and writes back the same text."""
from __future__ import annotations

import json
import os
import sqlite3

from tileprobe.analyses.gate import check
from tileprobe.report.common import verdict_cells, verdict_text
from tileprobe.schema import VariantRecord, Verdict, load, verdicts_from_dict, verdicts_to_dict

DATA = os.path.join(os.path.dirname(__file__), "data")
RUN_JSON = os.path.join(DATA, "golden", "cli", "inputs", "issue17_run.json")   # a `run --json` file with verdicts
OLD_STORE = os.path.join(DATA, "schema1_store.sqlite")


def _variants(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)["variants"]


def test_a_stored_record_reads_and_writes_back_the_same_json():
    variants = _variants(RUN_JSON)
    assert len(variants) == 6 and all(v["verdicts"] and v["run"] for v in variants)
    for v in variants:
        rec = VariantRecord.from_dict(v)
        assert all(isinstance(x, Verdict) for x in rec.verdicts.values()), rec.verdicts
        assert json.dumps(rec.to_dict()) == json.dumps(v)          # same keys, same order, same values


def test_verdicts_are_typed_after_load_and_read_as_attributes():
    records, _ = load(RUN_JSON)
    r = records[0]
    raw = _variants(RUN_JSON)[0]["verdicts"]
    hint = next(iter(raw))
    assert r.verdicts[hint] == Verdict(raw[hint]["status"], raw[hint]["reason"])
    assert r.verdict_status(hint) == raw[hint]["status"] and r.verdict_status("num_ctas", "-") == "-"
    assert verdict_cells(r, [hint, "num_ctas"]) == [raw[hint]["status"], "-"]


def test_the_store_verdict_rows_read_and_write_back_the_same_text():
    con = sqlite3.connect(f"file:{OLD_STORE}?mode=ro", uri=True)
    try:
        rows = [row[0] for row in con.execute("SELECT verdicts FROM audit_compiles")]
    finally:
        con.close()
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

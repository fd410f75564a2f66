"""Result schema 2: files and stores written by schema-1 tileprobe still load, migrated, and say so.

The fixtures were written at commit 26b4e22 (schema 1) by the audit command in ``tests/data/probe_schema1.py``:
vadd, 128 threads, 28 registers, one machine code for occupancy 1/2 × opt_level 2/3 on sm_90. Schema 1 called
every occupancy verdict ``honoured`` and opt_level ``ignored``; schema 2 says the goal was met without the hint.
"""
import json
import os
import shutil
import warnings

import pytest

from tileprobe.errors import TileprobeError
from tileprobe.judge.verdict import judge_records
from tileprobe.schema import SCHEMA_VERSION, SchemaMigrationWarning, load, write_json
from tileprobe.store import Store

DATA = os.path.join(os.path.dirname(__file__), "data")
OLD_JSON = os.path.join(DATA, "schema1_audit.json")
OLD_STORE = os.path.join(DATA, "schema1_store.sqlite")
EXPECTED = {(1, 2): ("met", "baseline"), (1, 3): ("met", "unchanged"),
            (2, 2): ("met", "baseline"), (2, 3): ("met", "unchanged")}


def _statuses(records):
    return {(r.hints["occupancy"], r.hints["opt_level"]): (r.verdicts["occupancy"].status,
                                                            r.verdicts["opt_level"].status) for r in records}


def test_the_fixture_is_schema_1_with_schema_1_words():
    with open(OLD_JSON, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["schema_version"] == 1 and SCHEMA_VERSION == 2
    assert {v["verdicts"]["occupancy"]["status"] for v in doc["variants"]} == {"honoured"}
    assert {v["verdicts"]["opt_level"]["status"] for v in doc["variants"]} == {"ignored"}


def test_schema_1_json_is_migrated_in_memory_and_says_so():
    with pytest.warns(SchemaMigrationWarning, match=r"schema1_audit.json: result schema 1 read and migrated to 2"):
        records, env = load(OLD_JSON, judge=judge_records)
    assert env["migrated_from_schema"] == 1
    assert _statuses(records) == EXPECTED
    reason = next(r for r in records if r.hints == {"occupancy": 2, "opt_level": 2}).verdicts["occupancy"].reason
    assert "same machine code and resources as occupancy=1: met without the hint" in reason
    with open(OLD_JSON, encoding="utf-8") as f:
        assert json.load(f)["schema_version"] == 1           # the user's file is left as it was


def test_schema_2_round_trip_has_no_migration(tmp_path):
    with pytest.warns(SchemaMigrationWarning):
        records, env = load(OLD_JSON, judge=judge_records)
    out = tmp_path / "v2.json"
    write_json(records, env, str(out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again, env2 = load(str(out))
    assert json.loads(out.read_text())["schema_version"] == 2 and _statuses(again) == EXPECTED
    assert env2["migrated_from_schema"] == 1                  # provenance kept from the first reading


def test_newer_and_unknown_schemas_are_refused(tmp_path):
    doc = json.loads(open(OLD_JSON, encoding="utf-8").read())
    with pytest.raises(TileprobeError, match=r"result schema 3, this tileprobe reads up to 2: upgrade"):
        load({**doc, "schema_version": 3})
    with pytest.raises(TileprobeError, match=r"result schema 0 cannot be read \(no migration from 0\)"):
        load({**doc, "schema_version": 0})


def test_schema_1_store_loads_with_schema_2_verdicts(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(OLD_STORE, path)
    with Store.open(path, must_exist=True) as store:
        latest = store.records(judge=judge_records)
        (audit,) = store.audits()
        by_audit = store.records(audit_id=audit["id"], judge=judge_records)
        raw = store._query("SELECT verdicts FROM audit_compiles", [])
    assert _statuses(latest) == EXPECTED and _statuses(by_audit) == EXPECTED
    assert {json.loads(v)["occupancy"]["status"] for (v,) in raw} == {"honoured"}   # history kept as written

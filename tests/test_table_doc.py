"""The tune table's records (tileprobe/tune/table_doc.py): a table read into them and written back is the same JSON,
byte for byte (key order, unknown keys, odd values kept); the rows' provenance follows the merge's IDENTITY."""
from __future__ import annotations

import json

from tileprobe.records import Key, KeyedRecord
from tileprobe.tune.table_doc import DefaultBlock, Provenance, RowSearch, TieEntry, TuneRow, TuneTable
from tileprobe.tune.table_store import IDENTITY

TABLE = {
    "schema_version": 1, "kind": "tileprobe.tune", "tool": "tileprobe 0.1.0", "created": "2026-12-05T16:00:00Z",
    "future_key": {"kept": True},
    "provenance": {"gpu": "NVIDIA H200", "arch": "sm_90", "a_newer_field": 3},
    "kernels": {
        "vadd": [
            {"problem": {"search": "0123456789abcdef"}, "case": {"config": "C2"}, "hints": None, "verdict": "tie",
             "median_us": 12.5, "ci_us": [12.0, 13.0], "samples": 40, "checks": ["tolerance"],
             "default": {"case": {"config": "C0"}, "hints": None, "median_us": 14.0, "status": "eliminated"},
             "tie": [{"case": {"config": "C1"}, "hints": None, "median_us": 12.6, "extra": 1}, "not an object"],
             "arch": "sm_90", "gpu": "NVIDIA H200", "num_sms": 132,
             "search": {"key": "0123456789abcdef", "config_index": 2, "dims": [4096]}, "zz_unknown": [1, 2]},
            "a row that is no object",
        ],
        "odd": "not a list",
    },
}


def test_a_table_read_into_records_writes_back_byte_for_byte():
    doc = TuneTable.from_dict(json.loads(json.dumps(TABLE)))
    row, stray = doc.kernels["vadd"]
    assert isinstance(row, TuneRow) and stray == "a row that is no object"
    assert isinstance(row.default, DefaultBlock) and row.default.median_us == 14.0
    assert isinstance(row.search, RowSearch) and row.search_block().dims == [4096]
    assert isinstance(row.tie[0], TieEntry) and row.tie[0].median_us == 12.6 and row.tie[1] == "not an object"
    assert isinstance(doc.provenance, Provenance) and doc.provenance.gpu == "NVIDIA H200"
    assert row.search_key() == "0123456789abcdef" and row.identity() == ({"search": "0123456789abcdef"}, "sm_90",
                                                                         "NVIDIA H200")
    assert json.dumps(doc.to_dict()) == json.dumps(TABLE)


def test_a_key_set_on_a_read_row_keeps_its_place_and_a_new_one_goes_last():
    row = TuneRow.from_dict({"problem": {}, "search": {"key": "a"}, "arch": "sm_90"})
    row.search = RowSearch(key="b", config_index=0)
    row.source_sha256 = "f" * 64
    assert list(row.to_dict()) == ["problem", "search", "arch", "source_sha256"]
    assert row.to_dict()["search"] == {"key": "b", "config_index": 0}


def test_a_row_without_a_search_block_or_problem_object_answers_none():
    row = TuneRow.from_dict({"problem": [1, 2], "search": "not an object"})
    assert row.search_key() is None and row.search_block() is None


def test_provenance_values_follow_the_merge_identity():
    row = TuneRow.from_dict({f: f"value of {f}" for f in IDENTITY})
    assert row.provenance_values() == tuple(f"value of {f}" for f in IDENTITY)


def test_a_one_object_key_of_another_json_type_stays_as_it_is():
    class Outer(KeyedRecord):
        __slots__ = ()
        _objects = {"inner": Provenance}
        inner = Key[object]()

    for value in (None, 3, "text", [1]):
        assert Outer.from_dict({"inner": value}).inner == value
        assert Outer.from_dict({"inner": value}).to_dict() == {"inner": value}

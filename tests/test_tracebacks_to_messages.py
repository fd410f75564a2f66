"""Tracebacks left by a hostile tester (2026-12-04), each now a message that names the file, the field and the fix."""
from __future__ import annotations

import json

import pytest

from tileprobe.cli import main
from tileprobe.schema import VariantRecord, dump


def _record(**kw) -> VariantRecord:
    fields = dict(kernel="k", probe="/p/probe_k.py", case={"T": 1}, hints={"occupancy": 1}, arch="sm_90",
                  tileiras="Cuda compilation tools, release 13.4, V13.4.92", status="ok", symbol="k", threads=128,
                  registers=32, ctas_per_sm=4)
    fields.update(kw)
    return VariantRecord(**fields)


@pytest.mark.parametrize("tileiras", [5, {"a": 1}, [1, "x"]], ids=["number", "object", "list-with-a-number"])
def test_compare_of_a_result_whose_compiler_list_is_not_one_is_a_message(tmp_path, capsys, tileiras):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(dump([_record()], {"tileiras": tileiras})))
    b.write_text(json.dumps(dump([_record(registers=40)], {"tileiras": ["Cuda compilation tools, release 13.4, "
                                                                          "V13.4.92"]})))
    assert main(["compare", str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert f"{a}: environment.tileiras is {json.dumps(tileiras)}, not a list of compiler builds" in err, err
    assert "Traceback" not in err


def test_compare_of_a_result_with_one_compiler_string_still_works(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(dump([_record()], {"tileiras": "Cuda compilation tools, release 13.4, V13.4.92"})))
    b.write_text(json.dumps(dump([_record(registers=40)], {"tileiras": []})))
    assert main(["compare", str(a), str(b)]) == 0, capsys.readouterr().err
    assert "13.4" in capsys.readouterr().out

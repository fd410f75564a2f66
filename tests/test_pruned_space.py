"""The pruned occupancy space as data: per case, which occupancy values build distinct kernels, in ``audit --json``
(``pruned_space``) and as a Python list a user pastes into a configuration list (the advice's last line)."""
from __future__ import annotations

import ast
import json
from types import SimpleNamespace

from tileprobe.judge.advice import advice
from tileprobe.judge.pruned import paste_lines, pruned_space
from tileprobe.judge.verdict import judge_records
from tileprobe.schema import VariantRecord


def _rec(tile, occ, code, ctas, regs=40):
    return VariantRecord(kernel="rms_norm", probe="p.py", case={"TILE": tile}, hints={"occupancy": occ},
                         arch="sm_90", tileiras="Cuda compilation tools, release 13.4, V13.4.92", status="ok",
                         effective_hints={"occupancy": None}, threads=128, registers=regs, shared_bytes=1040,
                         driver_shared_bytes=0, stack_bytes=0, ctas_per_sm=ctas, limiter="registers",
                         code_sha256=code)


def _rows():
    # TILE=256: hint-less = 1 = 2 (one build), 4 another; TILE=1024: every value another build
    rows = [_rec(256, None, "a", 8), _rec(256, 1, "a", 8), _rec(256, 2, "a", 8), _rec(256, 4, "b", 8, 32),
            _rec(1024, None, "c", 4, 64), _rec(1024, 2, "d", 4, 60), _rec(1024, 4, "e", 4, 56)]
    judge_records(rows)
    return rows


def test_each_case_keeps_one_value_per_distinct_build():
    space = pruned_space(_rows())
    assert [(c.case, c.distinct, c.same_as) for c in space] == [
        ({"TILE": 256}, [None, 4], {"1": None, "2": None}),
        ({"TILE": 1024}, [None, 2, 4], {})]
    assert space[0].to_dict()["distinct"] == {"occupancy": [None, 4]}


def test_the_paste_list_is_a_python_list_of_the_distinct_configurations():
    (line,) = paste_lines(pruned_space(_rows()))
    head, _, literal = line.partition(": distinct builds (paste into a configuration list): ")
    assert head == "rms_norm sm_90 tileiras 13.4.92"
    assert ast.literal_eval(literal) == [{"TILE": 256}, {"TILE": 256, "occupancy": 4}, {"TILE": 1024},
                                         {"TILE": 1024, "occupancy": 2}, {"TILE": 1024, "occupancy": 4}]
    assert line in advice(_rows())


def test_nothing_pruned_prints_no_paste_line():
    rows = [r for r in _rows() if r.case["TILE"] == 1024]
    assert not any("paste" in line for line in advice(rows))


def test_audit_json_carries_the_pruned_space(tmp_path):
    from tileprobe.cli.audit import emit
    rows = _rows()
    out = tmp_path / "a.json"
    emit(SimpleNamespace(environment={}, advice=lambda recs: []), rows, SimpleNamespace(json=str(out), format="none"))
    doc = json.loads(out.read_text())
    assert [(c["case"], c["distinct"]["occupancy"]) for c in doc["pruned_space"]] == [
        ({"TILE": 256}, [None, 4]), ({"TILE": 1024}, [None, 2, 4])]
    assert len(doc["variants"]) == 7


def test_a_tuple_tile_pastes_back_as_a_tuple():
    """A new user (session 16): ``TILE=(256, 256, 64)`` (TileGym's matmul example) came back from the store as a JSON
    list and the paste line wrote ``[256, 256, 64]``; a kernel that takes a tuple constant needs the tuple."""
    rows = [_rec([256, 256, 64], None, "a", 1), _rec([256, 256, 64], 2, "a", 1),
            _rec([256, 256, 64], 4, "b", 1, 32)]
    judge_records(rows)
    (line,) = paste_lines(pruned_space(rows))
    literal = line.partition(": distinct builds (paste into a configuration list): ")[2]
    assert ast.literal_eval(literal) == [{"TILE": (256, 256, 64)}, {"TILE": (256, 256, 64), "occupancy": 4}]
    assert pruned_space(rows)[0].to_dict()["case"] == {"TILE": [256, 256, 64]}    # JSON keeps its list


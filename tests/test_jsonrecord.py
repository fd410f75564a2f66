"""tileprobe.jsonrecord: dataclasses from and to JSON objects by their fields, a mismatch named by field and place."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tileprobe.jsonrecord import FieldError, from_dict, to_dict


@dataclass
class Site:
    file: str
    line: int


@dataclass
class Line:
    t: str
    id: int
    grid: list[int] = field(default_factory=list)
    wall_s: float | None = None
    site: Site | None = None
    sites: list[Site] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    shape: tuple[int, ...] = ()
    ok: bool = True
    extra: Any = None


def test_an_object_becomes_its_record_with_nested_records_and_defaults():
    d = json.loads('{"t": "launch", "id": 3, "grid": [8, 1, 1], "wall_s": 2, "site": {"file": "a.py", "line": 7},'
                   '"sites": [{"file": "b.py", "line": 1}], "counts": {"3": 5}, "shape": [4, 4], "newer": 1}')
    rec = from_dict(Line, d, where="launches.jsonl:2")
    assert rec == Line("launch", 3, [8, 1, 1], 2.0, Site("a.py", 7), [Site("b.py", 1)], {"3": 5}, (4, 4))
    assert isinstance(rec.wall_s, float) and rec.ok is True and rec.extra is None
    back = to_dict(rec)
    assert back["site"] == {"file": "a.py", "line": 7} and back["shape"] == [4, 4] and "newer" not in back
    assert from_dict(Line, back) == rec


@pytest.mark.parametrize("d, field_path, words", [
    ({"t": "launch", "id": "3"}, "id", "'3' (str), not an integer"),
    ({"t": "launch", "id": True}, "id", "not an integer"),                      # a bool is no int
    ({"t": "launch", "id": 1, "grid": [8, "x"]}, "grid[1]", "'x' (str), not an integer"),
    ({"t": "launch", "id": 1, "wall_s": "fast"}, "wall_s", "'fast' (str), not a number"),
    ({"t": "launch", "id": 1, "site": {"file": "a.py"}}, "site.line", "Line.site lacks its field 'line' (it has: file)"),
    ({"t": "launch", "id": 1, "sites": [{"file": 2, "line": 1}]}, "sites[0].file", "2 (int), not a string"),
    ({"t": "launch", "id": 1, "counts": {"3": 1.5}}, "counts.3", "not an integer"),
    ({"t": "launch", "id": 1, "ok": 1}, "ok", "not true/false"),
    ({"id": 1}, "t", "Line lacks its field 't' (it has: id)"),
])
def test_a_value_that_does_not_fit_names_the_place_the_record_and_the_field(d, field_path, words):
    with pytest.raises(FieldError) as e:
        from_dict(Line, d, where="run.jsonl:12")
    assert e.value.field == field_path
    assert str(e.value).startswith("run.jsonl:12: Line") and words in str(e.value)


def test_something_that_is_no_object_is_refused():
    with pytest.raises(FieldError, match=r"^row 4: Site must be a JSON object, not \[1, 2\] \(list\)$"):
        from_dict(Site, [1, 2], where="row 4")
    with pytest.raises(TypeError, match="dataclass instance"):
        to_dict({"file": "a.py"})

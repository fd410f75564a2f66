"""The index ``tileprobe tune --export`` writes beside a tune table (``TABLE.index``: tileprobe/tune/export.py
writes it, the start-up hook reads it: tileprobe/record/capture/tables.py ``index_rows``): a searching process reads one
bucket of rows instead of the whole table (a 154 MB table took 18 s and 0.9 GB, benchmarks/programs/bench_hook.py).
The writer and the reader agree; an index older than its table, damaged or not a regular file is passed over and
the table is read whole, as before."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from test_use import PROGRAM, _env, _trials, tuned  # noqa: F401  (tuned: the module's fake-GPU tune)

from tileprobe.record.hook import load_capture
from tileprobe.tune.table_store import write_index


def _doc() -> dict:
    def row(key: str, tile: int) -> dict:
        return {"case": {"config": "C0"}, "search": {"key": key, "config": {"TILE": tile}}, "x": float("nan")}
    return {"schema_version": 1, "kind": "tileprobe.tune",
            "kernels": {"a": [row("00aa" * 4, 1), row("ffbb" * 4, 2)], "b": [row("00aa" * 4, 3), {"no": "search"}]}}


def _write(tmp_path, doc):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(doc))
    write_index(str(table), doc)
    return table


def test_the_index_gives_each_search_keys_rows_as_the_table_does(tmp_path):
    cap = load_capture()
    table = _write(tmp_path, _doc())
    whole = cap.Answerer(str(table))
    whole.load()
    for key in ("00aa" * 4, "ffbb" * 4):
        got = cap.index_rows(str(table), key)
        assert [(k, r["search"]["config"]) for k, r in got] == [(k, r["search"]["config"]) for k, r in whole.rows[key]]
    assert [k for k, _ in cap.index_rows(str(table), "00aa" * 4)] == ["a", "b"]
    assert cap.index_rows(str(table), "1234" * 4) == []               # current index, no row: a miss at once
    buckets = sorted(f"{cap.index_bucket(k)}.json" for k in ("00aa" * 4, "ffbb" * 4))
    assert sorted(os.listdir(str(table) + ".index")) == [*buckets, "meta.json"]
    assert cap.index_mismatch(str(table)) is None      # the writer's hashes of table and buckets are the reader's


def test_an_index_older_than_its_table_damaged_or_not_a_file_is_passed_over(tmp_path):
    cap = load_capture()
    table = _write(tmp_path, _doc())
    key = "00aa" * 4
    assert cap.index_rows(str(table), key)
    table.write_text(json.dumps(_doc()) + " ")                          # rewritten by hand: the index is stale
    assert cap.index_rows(str(table), key) is None
    write_index(str(table), _doc())                                    # made again, in place of the old one
    assert len(cap.index_rows(str(table), key)) == 2 and not list(tmp_path.glob("t.json.index.*"))
    (table.parent / "t.json.index" / f"{cap.index_bucket(key)}.json").write_text("[[")      # damaged bucket
    assert cap.index_rows(str(table), key) is None
    shutil.rmtree(str(table) + ".index")
    os.mkfifo(str(table) + ".index")                                    # not a folder: passed over, no hang
    assert cap.index_rows(str(table), key) is None
    os.remove(str(table) + ".index")
    os.makedirs(str(table) + ".index")
    os.mkfifo(str(table) + ".index/meta.json")
    assert cap.index_rows(str(table), key) is None


def test_a_bucket_of_the_wrong_shape_counts_as_no_index_and_the_table_is_read(tmp_path):
    cap = load_capture()
    table = _write(tmp_path, _doc())
    key = "00aa" * 4
    bucket = table.parent / "t.json.index" / f"{cap.index_bucket(key)}.json"
    for forged in ([["vadd", {"search": {"key": "x"}}], "ab", [[], {}]],   # parses, entries of other shapes
                   {"a": 1}, [["a", {"search": "x"}]], [["a", {"search": {"key": key}}, 3]], [[1, {"search": {}}]]):
        bucket.write_text(json.dumps(forged))
        assert cap.index_rows(str(table), key) is None, forged          # not [] ("no rows"): the table is read
        whole = cap.Answerer(str(table))
        assert whole.loaded is False and cap.index_rows(whole.path, key) is None
        whole.load()
        assert [k for k, _ in whole.rows[key]] == ["a", "b"]              # the table's rows, which [] would hide
    bucket.write_text(json.dumps([["a", {"search": {"key": "ffbb" * 4}}]]))   # right shape, another key: no rows
    assert cap.index_rows(str(table), key) == []


def test_use_answers_from_the_index_without_reading_the_table(tuned, tmp_path):  # noqa: F811
    tmp, _ = tuned
    assert os.path.isfile(tmp / "table.json.index" / "meta.json")
    code = textwrap.dedent(f"""
        import sys, runpy
        import tileprobe
        answerer = tileprobe.use({str(tmp / "table.json")!r})
        import sitecustomize                       # the test double's GPU facts
        sitecustomize.install_fake_facts(sys.modules["_tileprobe_record_capture"])
        sys.argv = [{PROGRAM!r}, "4096", "1000"]
        runpy.run_path({PROGRAM!r}, run_name="__main__")
        print("answered", answerer.answered, "table read", answerer.loaded)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "n=4096 pick TILE=1024 occupancy=1 own=True" in out.stdout and "answered 1 table read False" in out.stdout
    assert "n=1000 pick TILE=512 occupancy=2 own=True" in out.stdout        # a miss: the program's own search
    assert _trials(tmp_path) == 48 and "vadd: no row for this search" in out.stderr, out.stderr

"""Hostile files and values where tileprobe reads a table, a rank's pick, coverage or a pin (the hostile tester's
escapes of 2026-12-05): each is refused, skipped or said, never a hang, a traceback or a changed program outcome.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ranks_module():
    spec = importlib.util.spec_from_file_location("_tp_test_capture_ranks",
                                                  ROOT / "tileprobe" / "record" / "capture_ranks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _in_thread(fn, timeout_s=10.0):
    """``fn()``'s result, failing the test if it does not return within ``timeout_s`` (a FIFO would block)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout_s)
    assert not t.is_alive(), "blocked"
    return out[0]


KEY = "0123456789abcdef"
GOOD = {"key": KEY, "config_index": 1, "mean_us": 3.5, "num_samples": 5, "error_margin_us": 0.1}


@pytest.mark.parametrize("what", ["fifo", "dev_zero", "dir", "mean_str", "index_str", "index_bool", "samples_str",
                                  "margin_list", "deep", "not_dict", "big", "not_utf8", "huge_int"])
def test_an_unusable_rank_pick_is_said_once_and_the_rank_searches(tmp_path, capsys, what):
    mod = _ranks_module()
    shared = mod.Shared(str(tmp_path))
    path = tmp_path / (KEY + ".json")
    if what == "fifo":
        os.mkfifo(path)
    elif what == "dev_zero":
        path.symlink_to("/dev/zero")
    elif what == "dir":
        path.mkdir()
    elif what == "deep":
        path.write_text("[" * 50_000 + "]" * 50_000)
    elif what == "not_dict":
        path.write_text("[1, 2]")
    elif what == "big":
        path.write_text(json.dumps(dict(GOOD, pad="x" * (mod.ENTRY_LIMIT_BYTES + 10))))
    elif what == "not_utf8":
        path.write_bytes(b'{"key": "\xff"}')
    elif what == "huge_int":
        path.write_text('{"key": "%s", "config_index": %s}' % (KEY, "9" * 5000))
    else:
        field, value = {"mean_str": ("mean_us", "x"), "index_str": ("config_index", "1"),
                        "index_bool": ("config_index", True), "samples_str": ("num_samples", "5"),
                        "margin_list": ("error_margin_us", [1])}[what]
        path.write_text(json.dumps(dict(GOOD, **{field: value})))
    assert _in_thread(lambda: shared.read_entry(KEY)) is None
    assert _in_thread(lambda: shared.read_entry(KEY)) is None
    err = capsys.readouterr().err
    assert err.count("is unusable") == 1 and "own search" in err and "Traceback" not in err


def test_a_good_rank_pick_is_read(tmp_path):
    mod = _ranks_module()
    (tmp_path / (KEY + ".json")).write_text(json.dumps(GOOD))
    assert mod.Shared(str(tmp_path)).read_entry(KEY) == GOOD


def test_a_garbage_pick_runs_the_programs_own_search_under_search_once(tmp_path, monkeypatch):
    mod = _ranks_module()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv(mod.ENV_RUN, "r1")
    table = str(tmp_path / "t.json")
    folder = mod.shared_folder(table)
    os.makedirs(folder)
    with open(os.path.join(folder, KEY + ".json"), "w") as f:
        json.dump(dict(GOOD, mean_us="x"), f)

    class Search:
        key = KEY
        configs = ["a", "b"]

        @staticmethod
        def index_of(config):
            return None

    ran = []
    got = mod.search_once(table, Search, lambda: ran.append(1) or "own", lambda c, r: ("answer", c, r))
    assert got == "own" and ran == [1]


class _Use:
    path = "/nonexistent/table.json"

    def __init__(self):
        self.said = []

    def say_once(self, what, text):
        self.said.append(text)


def _with_ranks_module(monkeypatch, search_once):
    from tileprobe.record.capture import search as capture_search
    from tileprobe.record.capture.names import MODULE_NAME

    class Mod:
        pass
    fake = Mod()
    fake.search_once = search_once
    monkeypatch.setitem(sys.modules, MODULE_NAME + "_ranks", fake)
    return capture_search._search_once


def test_an_error_of_tileprobes_sharing_runs_the_programs_search(monkeypatch):
    def broken(path, search, run, tuning_result):
        raise TypeError("tileprobe's own bug")
    _search_once = _with_ranks_module(monkeypatch, broken)
    use = _Use()
    assert _search_once(use, object(), lambda: "own") == "own"
    assert len(use.said) == 1 and "TypeError" in use.said[0]


def test_an_error_after_the_programs_search_ran_keeps_its_result(monkeypatch):
    calls = []

    def publish_fails(path, search, run, tuning_result):
        run()
        raise KeyError("publish")
    _search_once = _with_ranks_module(monkeypatch, publish_fails)
    use = _Use()
    assert _search_once(use, object(), lambda: calls.append(1) or "own") == "own"
    assert calls == [1]                 # not searched twice


def test_the_programs_own_search_error_propagates_unchanged(monkeypatch):
    def passes_through(path, search, run, tuning_result):
        return run()
    _search_once = _with_ranks_module(monkeypatch, passes_through)
    mine = ValueError("the program's own failure")

    def run():
        raise mine
    use = _Use()
    with pytest.raises(ValueError) as info:
        _search_once(use, object(), run)
    assert info.value is mine and use.said == []


EMPTY_TABLE = {"schema_version": 1, "kind": "tileprobe.tune", "provenance": {}, "kernels": {}}


@pytest.mark.parametrize("line", [
    '{"t":"launches","counts":[["vadd","table","x"]]}',
    '{"t":"launches","counts":[1]}',
    '{"t":"launches","counts":"abc"}',
    '{"t":"search","outcome":"missed","kernel":"vadd","key":"k","problem":[[1,2,3]]}',
    '{"t":"search","outcome":"missed","kernel":"vadd","key":"k","problem":5}',
    '{"t":"search","outcome":"missed","kernel":"vadd","key":["k"],"problem":[[1]]}',
    '{"t":"search","outcome":"missed","kernel":"vadd","key":"k","problem":[[1, %s]]}' % ("[" * 5000 + "]" * 5000),
    "[" * 50_000 + "]" * 50_000,
    "not json",
])
def test_a_malformed_coverage_line_is_skipped_and_counted(tmp_path, line):
    from tileprobe.record.coverage import read_coverage
    good = '{"t":"launches","counts":[["vadd","table",3]]}'
    (tmp_path / "cov-1-1.jsonl").write_text(good + "\n" + line + "\n")
    cov = read_coverage(str(tmp_path), EMPTY_TABLE)
    assert cov.unreadable == 1
    assert cov.processes == 1


@pytest.mark.parametrize("what", ["fifo", "dev_zero", "dir"])
def test_a_coverage_entry_that_is_no_regular_file_is_unreadable_not_a_hang(tmp_path, what):
    from tileprobe.record.coverage import read_coverage
    path = tmp_path / "cov-1-1.jsonl"
    {"fifo": lambda: os.mkfifo(path), "dev_zero": lambda: path.symlink_to("/dev/zero"),
     "dir": lambda: path.mkdir()}[what]()
    (tmp_path / "cov-2-2.jsonl").write_text('{"t":"launches","counts":[["vadd","table",3]]}\n')
    cov = _in_thread(lambda: read_coverage(str(tmp_path), EMPTY_TABLE))
    assert cov.unreadable == 1 and [k.launches_table for k in cov.kernels] == [3]


def _merge_row(**extra) -> dict:
    return {"problem": [[0, {"kind": "scalar", "value": 4096}]], "arch": "sm_90", "gpu": "NVIDIA H200",
            "case": {"TILE": 512}, "hints": {}, **extra}


@pytest.mark.parametrize("field, value", [("arch", ["sm_90"]), ("gpu", {"name": "H200"}), ("num_sms", [132])])
def test_a_merge_refuses_a_non_scalar_identity_field_naming_the_row(tmp_path, field, value):
    from tileprobe.errors import TileprobeError
    from tileprobe.tune.table_store import merge_tables
    docs = [("a.json", {"kernels": {"vadd": [_merge_row()]}}),
            ("b.json", {"kernels": {"vadd": [_merge_row(), _merge_row(**{field: value})]}})]
    with pytest.raises(TileprobeError) as info:
        merge_tables(docs, lambda kernels, provenances: {"kernels": kernels})
    assert f"b.json: kernels.vadd[1].{field} is a JSON" in str(info.value)


@pytest.mark.parametrize("what", ["dir", "symlink", "dangling", "fifo"])
def test_a_table_lock_that_is_no_regular_file_is_an_error_naming_it(tmp_path, what):
    from tileprobe.errors import TileprobeError
    from tileprobe.tune.table_store import locked
    table = tmp_path / "t.json"
    lock = tmp_path / "t.json.lock"
    {"dir": lambda: lock.mkdir(), "symlink": lambda: lock.symlink_to(tmp_path / "elsewhere"),
     "dangling": lambda: lock.symlink_to(tmp_path / "nowhere"), "fifo": lambda: os.mkfifo(lock)}[what]()
    if what == "symlink":
        (tmp_path / "elsewhere").write_text("")

    def take():
        with pytest.raises(TileprobeError) as info:
            with locked(str(table)):
                pass
        return str(info.value)
    msg = _in_thread(take)
    assert "t.json.lock" in msg and "remove it" in msg


def _pin_table(tmp_path) -> str:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "provenance": {}, "kernels": {
        "vadd": [{"search": {"key": "abcdef0123456789", "config": {"TILE": 1}}}]}}))
    return str(path)


@pytest.mark.parametrize("off, pin", [
    (["vadd\nFORGED LINE"], []),
    (["9" * 5000], []),
    ([], ["vadd\nFORGED LINE={}"]),
    ([], ["vadd=" + "9" * 5000]),
    ([], ["vadd=" + "[" * 10_000 + "]" * 10_000]),
    ([], ["vadd={\"TILE\": 1}\nFORGED LINE"]),
    ([], ["vadd=abcdef99\nFORGED"]),
    ([], ["novadd\nFORGED"]),
])
def test_off_and_pin_values_are_refused_escaped_and_cut(tmp_path, off, pin):
    from tileprobe.errors import TileprobeError
    from tileprobe.record.use import control_env
    with pytest.raises(TileprobeError) as info:
        control_env(_pin_table(tmp_path), off, pin)
    msg = str(info.value)
    assert "\n" not in msg and "9" * 1000 not in msg and "[" * 1000 not in msg, msg[:300]


@pytest.mark.parametrize("text", ["[" * 10_000 + "]" * 10_000, '{"vadd": ' + "[" * 10_000 + "]" * 10_000 + "}",
                                  '{"vadd": ' + "9" * 5000 + "}"])
def test_a_deep_or_huge_env_pin_is_a_bad_pin_ignored(text):
    from tileprobe.record.usehook import ENV_PIN, UseHook
    h = UseHook({ENV_PIN: text})
    assert h.pin == {} and h.pin_error


def test_an_index_bucket_larger_than_its_table_is_refused_and_the_table_read(tmp_path):
    from tileprobe.record.capture.tables import index_bucket, index_rows
    from tileprobe.tune.table_store import write_index
    row = {"case": {"config": "C0"}, "search": {"key": "00aa" * 4, "config": {"TILE": 1}}}
    doc = {"schema_version": 1, "kind": "tileprobe.tune", "kernels": {"a": [row]}}
    table = tmp_path / "t.json"
    table.write_text(json.dumps(doc))
    write_index(str(table), doc)
    assert index_rows(str(table), "00aa" * 4)
    bucket = tmp_path / "t.json.index" / (index_bucket("00aa" * 4) + ".json")
    forged = json.dumps([["a", dict(row, search={"key": "00aa" * 4, "config": {"TILE": 999}})]])
    bucket.write_text(forged + " " * (table.stat().st_size + 1))         # more than the whole table: not genuine
    assert index_rows(str(table), "00aa" * 4) is None


def test_read_regular_refuses_a_file_from_its_size_before_reading(tmp_path):
    from tileprobe.record.capture.tables import TableReadError, read_regular
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(8 << 30)                                           # sparse: 8 GiB, nothing on disk
    with pytest.raises(TableReadError, match="8,589,934,592 bytes"):
        read_regular(str(big), 1 << 20)


def test_unreadable_coverage_lines_are_said_even_when_no_kernel_was_counted(tmp_path):
    import io

    from rich.console import Console

    from tileprobe.record.coverage import read_coverage
    from tileprobe.report.coverage import render_coverage
    os.mkfifo(tmp_path / "cov-1-1.jsonl")
    cov = _in_thread(lambda: read_coverage(str(tmp_path), EMPTY_TABLE))
    buf = io.StringIO()
    render_coverage(cov, Console(file=buf, width=200))
    assert "1 unreadable coverage line(s) skipped" in buf.getvalue()

"""Readers of malformed input give an exit-code message
naming the file and the place, within stated limits — never a traceback, never a wait without end."""
from __future__ import annotations

import errno
import json
import os
import sqlite3

import pytest

from tileprobe.cli import main


@pytest.mark.parametrize("content, says", [
    (b"[" * 200_000 + b"]" * 200_000, "nested deeper than the JSON reader goes (about"),
    (b'{"schema_version": ' + b"9" * 5000 + b"}", "holds a number of more than 4,300 digits"),
    (b'{"schema_version": 2, "variants": [], "x": "\xe9"}', "not UTF-8 text (byte 44)"),
    (b'{"schema_version": 2,\n "variants": [}', "not JSON (line 2, column 15"),
])
def test_a_result_file_that_is_not_one_is_named_with_its_place(tmp_path, capsys, content, says):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert main(["compare", str(bad), str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: {says}" in err.replace("\n", " ") and "Traceback" not in err


def _log_dir(tmp_path):
    d = tmp_path / "launches"
    d.mkdir()
    lines = [{"t": "process", "cwd": "/w"}, {"t": "kernel", "id": 1, "name": "k", "module": "m", "file": "/w/k.py"},
             {"t": "launch", "id": 7, "kernel": 1, "grid": [4], "args": []}, {"t": "counts", "n": {"7": 3}}]
    good = "\n".join(json.dumps(x) for x in lines) + "\n"
    (d / "a.jsonl").write_text(good)
    (d / "b.jsonl").write_text(good.replace('"grid"', '"grod"').replace('"n": {"7": 3}', '"n": {"7": "three"}')
                               + '{"t": "launch", "id": 8, "kernel": [1], "grid": 5}\n' + "[" * 100_000 + "\n")
    os.mkfifo(d / "fifo.jsonl")
    os.symlink("/dev/zero", d / "zero.jsonl")
    return d


def test_one_bad_line_of_a_launch_log_loses_only_that_line_and_fifos_are_skipped(tmp_path):
    from tileprobe.record.log import read_log
    rec = read_log(str(_log_dir(tmp_path)))
    assert any(la.count == 3 for la in rec.launches)               # a.jsonl's launch, counted
    bad = [u for u in rec.unreadable if "b.jsonl" in u]
    assert [u.rsplit(":", 1)[1] for u in bad] == ["4", "5", "6"], rec.unreadable   # counts, launch, the deep line
    assert any("fifo.jsonl (not a regular file" in u for u in rec.unreadable)
    assert any("zero.jsonl (not a regular file" in u for u in rec.unreadable)


def test_a_cache_whose_metadata_has_the_wrong_types_is_read_as_no_metadata(tmp_path):
    from tileprobe.record.cache import read_cache
    db = tmp_path / "cache.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE cache (key TEXT, blob BLOB, metadata TEXT, atime REAL)")
        for i, meta in enumerate(['[1, 2]', '{"kernel_names": 5, "compiler_version": 7}', '"x"', "[" * 100_000,
                                  '{"kernel_names": ["vadd"], "compiler_version": "V13.4.92"}']):
            c.execute("INSERT INTO cache VALUES (?, ?, ?, ?)", (f"k{i}", b"not a cubin", meta, float(i)))
    entries = read_cache(str(db))
    assert len(entries) == 5 and all(e.notes and "unreadable" in e.notes[0] for e in entries)
    assert [e.symbols for e in entries] == [["vadd"], [], [], [], []]
    assert "V13.4.92" in entries[0].compiler and entries[1].compiler == "unknown"


def test_a_full_disk_under_json_says_what_was_kept(tmp_path, capsys, monkeypatch):
    import builtins

    from tileprobe.store import Store
    store, out = str(tmp_path / "s.sqlite"), str(tmp_path / "out.json")
    Store.open(store).close()
    real_open = builtins.open

    def full(path, *a, **k):
        if str(path) == out:
            raise OSError(errno.ENOSPC, "No space left on device", out)
        return real_open(path, *a, **k)
    monkeypatch.setattr(builtins, "open", full)
    assert main(["history", "--store", store, "--json", out]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"tileprobe: No space left on device writing {out} (errno ENOSPC); free space" in err
    assert "nothing had been saved to the results store yet" in err and "Traceback" not in err


# --- class 6: run --bundle that ran nothing, tune --bundle checked before the GPU ---------------------------------------

@pytest.mark.parametrize("runs, says", [([], "nothing was run"),
                                        ([{"status": "error", "error": "x"}] * 2, "every one of the 2 runs failed")])
def test_run_bundle_that_ran_nothing_or_only_failed_exits_1(tmp_path, capsys, monkeypatch, runs, says):
    from types import SimpleNamespace

    import tileprobe.run.session as session
    from tileprobe.schema import VariantRecord, VariantRun
    recs = [VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_90", tileiras="t", status="ok",
                          run=VariantRun(**r)) for r in runs]
    fake = SimpleNamespace(records=recs, environment={}, skipped=[], ran=len(runs), restarts=0, wall_s=0.0,
                           aborted=None, store_error=None)
    monkeypatch.setattr(session, "run_sweep", lambda *a, **k: fake)
    (tmp_path / "p.py").write_text("")
    assert main(["run", "--bundle", str(tmp_path), str(tmp_path / "p.py"), "--no-store", "--format", "none"]) == 1
    assert f"--bundle {tmp_path}: {says}" in " ".join(capsys.readouterr().err.split())


def test_tune_bundle_is_checked_before_any_gpu(tmp_path, capsys, monkeypatch):
    import tileprobe.cli.tune as cli_tune

    def no_gpu(*a, **k):
        raise AssertionError("the GPU worker was started before the bundle was read")
    monkeypatch.setattr(cli_tune, "_gpu_worker", no_gpu)
    (tmp_path / "p.py").write_text("")
    assert main(["tune", str(tmp_path / "p.py"), "--bundle", str(tmp_path / "nope"), "--no-store"]) == 1
    assert "nope" in capsys.readouterr().err


def test_a_report_of_thousands_of_series_notes_the_plot_instead_of_drawing_it():
    """A 20,000-variant audit: `report` drew 16,785 lines for minutes (no output after 240 s)."""
    from tileprobe.report.html import MAX_PLOT_SERIES, kernel_plots
    from tileprobe.schema import VariantRecord
    rows = [VariantRecord(kernel="k", probe="p.py", case={"I": i}, hints={"occupancy": o}, arch="sm_90",
                          tileiras="Cuda compilation tools, release 13.4, V13.4.92", status="ok", threads=128,
                          registers=32, shared_bytes=0, stack_bytes=0, ctas_per_sm=8)
            for i in range(MAX_PLOT_SERIES + 6) for o in (1, 2)]
    html = kernel_plots(rows, 0)
    assert f"no plot, {MAX_PLOT_SERIES + 6:,} lines (one per case and compiler)" in html and "<svg" not in html
    assert "<svg" in kernel_plots(rows[:4], 0)

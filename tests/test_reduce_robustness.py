"""tileprobe reduce on input that once made it fail with a traceback: a damaged journal, an expression nested past
Python's recursion limit; and what a resumed run's report says it cost. Nothing here compiles a candidate."""
import ast
import dataclasses
import json
import os

import pytest

from tests.test_reduce_cli import write_tiny
from tests.test_reduce_report import reduction
from tileprobe.cli import main
from tileprobe.errors import UsageError
from tileprobe.reduce import journal, passes, source
from tileprobe.reduce.report import markdown


def write(tmp_path, obj):
    p = tmp_path / "reduce-state.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_a_journal_round_trips_with_the_earlier_runs_cost(tmp_path):
    j = journal.Journal("k", "src", ["folded"], ["delete:x = 1"], "", {"d" * 64: (("13.4.92", True, "ok"),)}, 57,
                        612.5)
    path = write(tmp_path, j.to_json())
    assert journal.load(path, "k") == j
    assert journal.load(path, "other arguments") is None          # another reduction's journal: start afresh
    assert journal.load(str(tmp_path / "none.json"), "k") is None


@pytest.mark.parametrize("content, field", [
    ("{not json", "not JSON"),
    ([1, 2], "string 'key'"),
    ({"key": "k", "memo": []}, "'memo' is not an object"),
    ({"key": "k", "memo": {"abc": [["13.4.92", "yes", "line"]]}}, "'memo' entry 'abc'"),
    ({"key": "k", "kept": "folded"}, "'kept' is not a list of strings"),
    ({"key": "k", "failed": [1]}, "'failed' is not a list of strings"),
    ({"key": "k", "current": 3}, "'current' is not a string"),
    ({"key": "k", "compiled": -1}, "'compiled' is not a whole count"),
    ({"key": "k", "compiled": 10**30}, "'compiled' is not a whole count"),
    ({"key": "k", "compiled": 2.5}, "'compiled' is not a whole count"),
    ({"key": "k", "wall_s": float("nan")}, "'wall_s' is not a finite number of seconds"),
    ({"key": "k", "wall_s": float("inf")}, "'wall_s' is not a finite number of seconds"),
    ({"key": "k", "wall_s": 1e300}, "'wall_s' is not a finite number of seconds"),
    ({"key": "k", "wall_s": -1.0}, "'wall_s' is not a finite number of seconds"),
    ({"key": "k", "wall_s": True}, "'wall_s' is not a finite number of seconds"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
])
def test_a_damaged_journal_is_an_error_naming_the_file_the_field_and_the_fix(tmp_path, content, field):
    path = write(tmp_path, content)
    with pytest.raises(journal.JournalError) as e:
        journal.load(path, "k")
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and field in msg and "Delete it to start the reduction afresh" in msg


def test_the_older_memo_form_is_read(tmp_path):
    path = write(tmp_path, {"key": "k", "memo": {"d": [True, [["13.4.92", True, "ok"]]]}})
    assert journal.load(path, "k").memo == {"d": (("13.4.92", True, "ok"),)}


def test_the_command_stops_on_a_damaged_journal_before_compiling_without_a_traceback(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "reduce-state.json").write_text('{"key": 7}')
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "compiles", "-o", str(out),
               "--no-store"])
    err = capsys.readouterr().err
    assert rc != 0 and "reduce-state.json" in err and "Delete it" in err and "Traceback" not in err
    assert (out / "reduce-state.json").read_text() == '{"key": 7}'      # kept as it was: nothing lost
    assert not (out / "reduced_kernel.py").exists()


DEEP = "x = " + " + ".join(["a"] * 600)


def test_an_expression_too_deep_to_copy_is_a_clear_error_with_its_line():
    text = f"import cuda.tile as ct\n\n\ndef k(a):\n    {DEEP}\n"
    with pytest.raises(UsageError) as e:
        source.parse(text, "deep.py")
    msg = str(e.value)
    assert msg.startswith("deep.py:5: an expression nested ") and "Split it into assignments" in msg


def test_an_expression_too_deep_for_the_parser_is_a_clear_error():
    with pytest.raises(UsageError) as e:
        source.parse("x = " + " + ".join(["a"] * 20000), "deep.py")
    assert "deep.py: an expression is nested too deeply for Python's parser" in str(e.value)


def test_deepest_finds_the_line_without_recursion():
    tree = ast.parse("y = 1\nz = " + " + ".join(["a"] * 50) + "\n")
    line, depth = source.deepest(tree)
    assert line == 2 and depth > 30


def test_a_candidate_too_deep_to_copy_is_no_candidate():
    tree = ast.parse("x = 1")

    def edit(t):
        raise RecursionError("maximum recursion depth exceeded")
    assert passes._make(tree, edit) is None


def test_a_resumed_report_says_what_the_runs_before_it_did(tmp_path):
    red = dataclasses.replace(reduction(), resumed=True, earlier_candidates=40, earlier_wall_s=300.0)
    md = markdown(red, probe="p.py", arch="sm_120", where="", prop="occupancy honoured",
                  versions=["13.3.36", "13.4.92"], regression=True, kernel_source="")
    assert ("57 candidates compiled, 612 s in this run, resumed from the journal after 40 candidates and 300 s in "
            "the runs before it (97 candidates, 912 s in all)") in md
    fresh = markdown(reduction(), probe="p.py", arch="sm_120", where="", prop="occupancy honoured",
                     versions=["13.3.36", "13.4.92"], regression=True, kernel_source="")
    assert "57 candidates compiled, 612 s." in fresh and "resumed" not in fresh


def test_the_report_names_no_absolute_folder(tmp_path, monkeypatch):
    home = tmp_path / "home" / "user"
    work = home / "kernels"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    final = dataclasses.replace(reduction().final, judgements=(
        ("13.3.36", True, f"error in {work}/reduced/.reduce-work/cand_1.py:3"),
        ("13.4.92", False, f"see {home}/notes.txt")))
    red = dataclasses.replace(reduction(), final=final)
    for probe, shown in ((str(work / "sub" / "p.py"), "`sub/p.py`"), (str(home / "p.py"), "`~/p.py`"),
                         ("/opt/elsewhere/p.py", "`p.py`")):
        md = markdown(red, probe=probe, arch="sm_120", where="", prop="occupancy honoured",
                      versions=["13.3.36", "13.4.92"], regression=True, kernel_source="")
        assert f"Reduced from {shown}" in md
        assert str(tmp_path) not in md and "/opt/elsewhere" not in md
        assert "reduced/.reduce-work/cand_1.py:3" in md and "~/notes.txt" in md
    assert os.getcwd() == str(work)


def test_written_files_get_the_mode_open_would_give_not_mkstemps_private_one(tmp_path):
    """REPORT.md is the text to paste upstream: written through a temp file, it still gets 0666 & ~umask (0644
    under umask 022), not mkstemp's 0600."""
    from tileprobe.reduce.output import write_file
    old = os.umask(0o022)
    try:
        write_file(str(tmp_path / "REPORT.md"), "# report\n")
    finally:
        os.umask(old)
    assert (tmp_path / "REPORT.md").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "REPORT.md").read_text() == "# report\n"

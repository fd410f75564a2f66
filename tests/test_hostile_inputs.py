"""Hostile inputs found by a tester on 2026-12-01 (docs/FAILURES.md, "Outputs, stores and probe values"): outputs
that are inputs, empty files taken for stores, folders as outputs, duplicate probe names, int64-overflowing shapes,
a probe that changes the working folder at import, out-of-range counts. None of these compiles anything."""
from __future__ import annotations

import os
import re
import shutil

import pytest

from tileprobe.cli import main
from tileprobe.errors import ProbeError

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "data", "simple_kernels.py")


def _store(tmp_path) -> str:
    """A real (empty) tileprobe store file."""
    from tileprobe.store import Store
    path = str(tmp_path / "s.sqlite")
    with Store.open(path):
        pass
    return path


@pytest.mark.parametrize("argv", [
    ["history", "--store", "{s}", "--json", "{s}"],
    ["report", "--store", "{s}", "-o", "{s}"],
    ["history", "--store", "{s}", "--csv", "{s}"],
])
def test_an_output_that_is_the_store_is_refused_and_the_store_kept(tmp_path, capsys, argv):
    s = _store(tmp_path)
    before = open(s, "rb").read()
    assert main([a.format(s=s) for a in argv]) == 1
    assert "is also --store: writing it would destroy it" in capsys.readouterr().err
    assert open(s, "rb").read() == before


def test_an_empty_file_is_not_made_into_a_store(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert main(["history", "--store", str(empty)]) == 1
    assert "is empty (0 bytes): not a tileprobe results store" in capsys.readouterr().err
    assert empty.read_bytes() == b""
    assert main(["store", "--store", str(empty), "size"]) == 1 and empty.read_bytes() == b""


@pytest.mark.parametrize("option", ["--json", "--csv"])
def test_a_folder_or_a_missing_folder_as_output_is_a_clear_error(tmp_path, capsys, option):
    s = _store(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["history", "--store", s, option, str(folder)]) == 1
    assert f"{option} {folder}: is a folder" in capsys.readouterr().err
    assert main(["history", "--store", s, option, str(tmp_path / "nope" / "x")]) == 1
    assert "does not exist; create it or give another path" in capsys.readouterr().err


def test_out_of_range_counts_are_usage_errors(tmp_path, capsys):
    s = _store(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["history", "--store", s, "--limit", str(10 ** 23)])
    assert e.value.code == 2 and "at most 2^62" in capsys.readouterr().err
    assert main(["history", "--store", s, "--limit", "0"]) == 0


def _probe_file(tmp_path, body: str) -> str:
    shutil.copy(KERNELS, tmp_path / "k.py")
    path = tmp_path / "p.py"
    path.write_text("import os\nfrom tileprobe import Probe\nK = os.path.join(os.path.dirname(os.path.abspath(__file__)),"
                    " 'k.py') + ':vadd'\n" + body)
    return str(path)


def test_two_probes_with_one_name_are_refused(tmp_path):
    from tileprobe.probe.define import load_probes
    path = _probe_file(tmp_path, "probes = [Probe(kernel=K, args=lambda c, a: (), name='dup'),\n"
                                 "          Probe(kernel=K, args=lambda c, a: (), name='dup')]\n")
    with pytest.raises(ProbeError, match=r"probes\[0\] and probes\[1\] are both named 'dup'"):
        load_probes(path)


def test_one_name_is_refused_only_for_archs_both_probes_audit(tmp_path):
    """Per-arch probes of one kernel may share a name when their ``archs`` are disjoint."""
    from tileprobe.probe.define import load_probes
    path = _probe_file(tmp_path, "probes = [Probe(kernel=K, args=lambda c, a: (), name='dup', archs=['sm_90']),\n"
                                 "          Probe(kernel=K, args=lambda c, a: (), name='dup', archs=['sm_120'])]\n")
    assert [p.archs for p in load_probes(path)] == [["sm_90"], ["sm_120"]]
    (tmp_path / "b").mkdir()
    path = _probe_file(tmp_path / "b", "probes = [Probe(kernel=K, args=lambda c, a: (), name='dup', archs=['sm_90']),\n"
                                       "          Probe(kernel=K, args=lambda c, a: (), name='dup', "
                                       "archs=['sm_90', 'sm_120'])]\n")
    with pytest.raises(ProbeError, match=r"probes\[0\] and probes\[1\] are both named 'dup' for sm_90 \(lines 4 and "
                                         r"5\): give each a distinct name= or disjoint archs="):
        load_probes(path)


def test_a_probe_that_changes_folder_at_import_is_still_found(tmp_path, monkeypatch):
    from tileprobe.probe.define import load_probes
    path = _probe_file(tmp_path, "os.chdir('/')\nprobe = Probe(kernel=K, args=lambda c, a: (), name='v')\n")
    monkeypatch.chdir(tmp_path)
    (p,) = load_probes("p.py")              # relative, as typed on the command line
    assert p.source == path and p.resolve_kernel() is not None


@pytest.mark.parametrize("shape", [(1 << 64,), ((1 << 64) + 5,), (1 << 63,)])
def test_shapes_past_int64_are_refused_not_wrapped(shape):
    from tileprobe.probe.signature import ArraySpec
    with pytest.raises(ProbeError, match="2\\^63 or more"):
        ArraySpec(shape, "float32")


@pytest.mark.parametrize("field,value,message", [
    ("case", [1], "variants[0].case is [1], not an object"),
    ("registers", "many", 'variants[0].registers is "many", not an integer or null'),
    ("arch", None, "variants[0].arch is null, not a string"),
    ("verdicts", {"occupancy": "met"}, 'variants[0].verdicts.occupancy is "met", not an object')])
def test_result_files_with_fields_of_the_wrong_type_name_the_field(tmp_path, capsys, field, value, message):
    import json
    doc = {"schema_version": 2, "environment": {}, "variants": [
        {"kernel": "k", "probe": "p.py", "case": {}, "hints": {}, "arch": "sm_90", "status": "ok",
         "tileiras": "V13.4.92", field: value}]}
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps(doc))
    doc["variants"][0][field] = {"case": {}, "registers": 32, "arch": "sm_90", "verdicts": {}}[field]
    good.write_text(json.dumps(doc))
    assert main(["compare", str(bad), str(good)]) == 1
    assert message in capsys.readouterr().err


def test_json_outputs_are_strict_json_nan_and_infinity_become_null(tmp_path):
    """A NaN or infinite case value (or timing) used to reach ``--json`` as bare ``NaN``, which jq, JavaScript and Go
    refuse. Written as null, the file parses with a reader that rejects the non-standard constants."""
    import json

    from tileprobe.schema import VariantRecord, json_text, write_json

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert strict(json_text({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": object})) == {
        "a": None, "b": [None, None, 1.5], "c": "<class 'object'>"}
    rec = VariantRecord(kernel="k", probe="p.py", case={"EPS": float("nan"), "SCALE": float("inf")}, hints={},
                        arch="sm_90", tileiras="V13.4.92", status="ok")
    write_json([rec], {"clock_mhz": float("nan")}, str(tmp_path / "r.json"))
    doc = strict((tmp_path / "r.json").read_text())
    assert doc["variants"][0]["case"] == {"EPS": None, "SCALE": None} and doc["environment"] == {"clock_mhz": None}


def test_a_fifo_as_an_input_is_refused_not_waited_on(tmp_path, capsys):
    """``compare F`` and ``gate --baseline F`` with F a FIFO used to block forever reading it."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    assert main(["compare", fifo, fifo]) == 1
    assert f"cannot read results {fifo}: not a regular file" in capsys.readouterr().err
    assert main(["gate", KERNELS, "--arch", "sm_90", "--baseline", fifo, "--expect", "registers <= baseline",
                 "--no-store"]) == 1
    assert f"--baseline {fifo}: not a regular file" in capsys.readouterr().err
    assert main(["gate", KERNELS, "--arch", "sm_90", "--runs", fifo, "--expect", "registers <= 64",
                 "--no-store"]) == 1
    err = capsys.readouterr().err
    assert f"--runs {fifo}: not a regular file" in err and "--baseline" not in err     # it named --baseline


@pytest.mark.parametrize("option,text,message", [
    ("--where", "TILE", "'TILE' is not NAME=VALUE"),
    ("--hint", "occupancy", "write NAME=V1,V2"),
    ("--case", "TILE", "write NAME=V1,V2")])
def test_unreadable_selections_are_usage_errors(capsys, option, text, message):
    """A ``--where``/``--case``/``--hint`` that cannot be read is a command-line error: exit 2, as argparse's."""
    assert main(["audit", KERNELS, "--arch", "sm_90", "--no-store", option, text]) == 2
    assert message in capsys.readouterr().err


def test_ctrl_c_while_the_cli_loads_is_exit_130_without_a_traceback(monkeypatch, capsys):
    """The console script imports the CLI inside :func:`tileprobe._entry.main`: a KeyboardInterrupt during that
    import (here raised by a stand-in module) is one line and exit 130, not a traceback."""
    import sys
    import types

    import tileprobe
    from tileprobe._entry import main as entry

    class Loading(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt
    monkeypatch.setitem(sys.modules, "tileprobe.cli", Loading("tileprobe.cli"))
    monkeypatch.delattr(tileprobe, "cli", raising=False)
    assert entry() == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_the_same_output_from_several_probe_files_is_shown_once(tmp_path):
    """A banner every probe file prints (a shared helper's, a library's warning) is one note, not one per file."""
    from tileprobe.audit.pipeline import AuditResult, _load, _targets
    shutil.copy(KERNELS, tmp_path / "k.py")
    head = ("import os\nfrom tileprobe import Probe\nK = os.path.join(os.path.dirname(os.path.abspath(__file__)),"
            " 'k.py') + ':vadd'\n")
    paths = []
    for name, banner in (("a", "helper loaded\nsecond line"), ("b", "helper loaded\nsecond line"), ("c", "other")):
        path = tmp_path / f"{name}.py"
        path.write_text(head + f"print({banner!r})\nprobe = Probe(kernel=K, args=lambda c, a: (), name={name!r})\n")
        paths.append(str(path))
    result = AuditResult()
    plans, _ = _load(paths, _targets(["sm_90"], result), result, str(tmp_path), 1, 60.0, 1000, False)
    assert len(plans) == 3
    assert result.notes == [f"{paths[0]} printed while loading:\n  helper loaded\n  second line",
                            f"{paths[1]} printed the same while loading as {paths[0]}",
                            f"{paths[2]} printed while loading:\n  other"]


def test_a_case_value_the_probe_rejects_is_its_error_even_with_where(capsys):
    """--case ALLOW_TMA=maybe breaks args() before anything is planned; with --where occupancy=1 this printed
    "--where  matches none of the planned variants; " (empty names, empty values) and hid the cause. Since session
    17 the cause is named before args() runs: ALLOW_TMA, a boolean constant, does not take the text 'maybe'; the
    command line's error, exit 2 as the README's table says (it was exit 3 under "no probe could be loaded"), in an
    audit and in a tune's plan alike."""
    probe = os.path.join(os.path.dirname(HERE), "examples", "rms_norm.py")
    for argv in (["audit", probe, "--arch", "sm_90", "--no-store", "--case", "ALLOW_TMA=maybe", "--where",
                  "occupancy=1"],
                 ["tune", "--dry-run", probe, "--arch", "sm_90", "--no-store", "--case", "ALLOW_TMA=maybe"]):
        code = main(argv)
        out = capsys.readouterr()
        assert code == 2, argv
        assert out.err.startswith("tileprobe: --case ALLOW_TMA=maybe: ALLOW_TMA takes True or False"), out.err
        assert "matches none" not in out.out + out.err and "no probe could be loaded" not in out.err


def test_no_case_match_without_case_names_still_names_the_selection():
    from tileprobe.select import no_case_match
    err = no_case_match({"occupancy": 1}, [])
    assert str(err) == "--where occupancy=1 matches none of the planned variants; no variant was planned to select from"


def test_a_hint_value_no_probe_plans_is_refused_before_compiling(capsys):
    """--where occupancy=3 compiled all 10 rms_norm variants (20 s) before saying it matched none."""
    from types import SimpleNamespace

    from tileprobe.select import WhereError, case_selector
    plan = SimpleNamespace(cases={"ALLOW_TMA": [True, False]}, hints={"occupancy": [1, 2, 4, 8, 16]})
    with pytest.raises(WhereError, match=r"^--where occupancy=3 matches none of the planned variants; occupancy takes "
                                         r"1, 2, 4, 8, 16$"):
        case_selector({"occupancy": 3}, [plan])
    assert case_selector({"occupancy": 4}, [plan]) is None          # a planned value: left to the records
    assert case_selector({"num_ctas": 2}, [plan]) is None           # a hint the probe gives no values for


def test_a_per_load_knob_given_as_a_hint_says_what_to_do(capsys):
    code = main(["audit", os.path.join(os.path.dirname(HERE), "examples", "rms_norm.py"), "--arch", "sm_90",
                 "--no-store", "--hint", "allow_tma=True"])
    err = capsys.readouterr().err
    assert code == 2 and "'allow_tma' is a per-load knob (ct.load(…, allow_tma=…)), not a kernel hint" in err
    assert "did you mean 'allow_tma'" not in err


@pytest.mark.parametrize("kind, message", [
    ("text", "is not a Python file: a probe file is a .py that defines `probe = Probe(…)`"),
    ("fifo", "is not a regular file (a FIFO, a device?)"), ("loop", "is a symbolic link to nothing"),
    ("missing", "no such file: ")])
def test_paths_that_are_not_probe_files_say_what_they_are(tmp_path, kind, message):
    """README.md was 'AttributeError: 'NoneType' object has no attribute 'loader''; a FIFO or a link loop was
    'no such file' (a tester, 2026-12-01)."""
    from tileprobe.probe.define import load_probes
    path = tmp_path / "p.txt"
    if kind == "text":
        path.write_text("# notes\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        os.symlink(path, path)
    with pytest.raises(ProbeError, match=re.escape(message)):
        load_probes(str(path))


@pytest.mark.parametrize("name", ["a\nFAKE: 0 variants", "cr\r", "ls\u2028x", "\n"])
def test_a_probe_name_must_be_one_line(name):
    """A name with a line break printed a forged standalone line under the table title (a tester, 2026-12-01);
    escapes and markup are cleaned where printed (test_failures.py), line breaks are refused here."""
    from tileprobe import Probe
    with pytest.raises(ProbeError, match=r"name=.*: give one line of text"):
        Probe(kernel="a:b", args=lambda c, a: (), name=name)
    assert Probe(kernel="a:b", args=lambda c, a: (), name="tab\there [b]x[/b]").name == "tab\there [b]x[/b]"


def test_a_huge_import_output_is_counted_in_bytes_not_by_the_kept_lines(tmp_path):
    """50,000 lines printed at import were noted as '… (1037 more lines)': the count of the 4 KiB kept."""
    from tileprobe.audit.pipeline import AuditResult, _load, _targets
    shutil.copy(KERNELS, tmp_path / "k.py")
    path = tmp_path / "loud.py"
    path.write_text("import os\nfrom tileprobe import Probe\nfor i in range(50000):\n    print(i)\n"
                    "K = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'k.py') + ':vadd'\n"
                    "probe = Probe(kernel=K, args=lambda c, a: (), name='loud')\n")
    result = AuditResult()
    _load([str(path)], _targets(["sm_90"], result), result, str(tmp_path), 1, 60.0, 1000, False)
    total = sum(len(f"{i}\n") for i in range(50000))
    assert result.notes == [f"{path} printed while loading:\n  0\n  1\n  2\n  3\n  4\n  … (it printed {total:,} bytes "
                            "in all)"]


def test_history_csv_and_the_html_report_hold_no_escape_from_stored_names(tmp_path, capsys):
    """A hostile tester (2026-12-02): `history --csv -` wrote 19 ESC and 6 BEL bytes of stored case values to stdout,
    and the HTML report held them too (`cat report.html` obeyed them)."""
    from tileprobe.cli import main
    from tileprobe.report.html import render_html
    from tileprobe.schema import VariantRecord
    from tileprobe.store import Store
    db = str(tmp_path / "s.sqlite")
    rec = VariantRecord(kernel="k\x1b]0;PWNED\x07", probe="p.py", case={"MODE": "a\x1b[2Jb"}, hints={"occupancy": 1},
                        arch="sm_90", tileiras="V13.4.92", status="ok", threads=128, registers=32, shared_bytes=0,
                        ctas_per_sm=8, limiter="threads", code_sha256="c")
    with Store.open(db) as store:
        store.import_records([rec], lambda sha: None, "1.7.0")
    assert main(["history", "--store", db, "--csv", "-"]) == 0
    out = capsys.readouterr().out
    assert "ab" in out and not any(c in out for c in "\x1b\x07")
    page = render_html([rec], plots=False)
    assert not any(c in page for c in "\x1b\x07")


@pytest.mark.parametrize("value", ["nan", "1e400", "-5", "inf", "x"])
def test_tune_tie_pct_takes_a_percentage_only(value, capsys):
    """A hostile tester (2026-12-02): nan and 1e400 were accepted (every candidate a tie), -5 exited 1."""
    from tileprobe.cli import main
    with pytest.raises(SystemExit) as e:
        main(["tune", "examples/rms_norm.py", "--dry-run", "--arch", "sm_90", "--tie-pct", value])
    assert e.value.code == 2 and "give a percentage" in capsys.readouterr().err


def test_audit_json_to_stdout_with_markdown_prints_the_json_alone(tmp_path, capsys):
    """`audit --json - --format markdown` printed the JSON and then the Markdown: not JSON (a hostile tester)."""
    import json as _json

    from support import write_vec_probe

    from tileprobe.cli import main
    probe = write_vec_probe(tmp_path / "p.py")
    assert main(["audit", probe, "--arch", "sm_90", "--no-store", "--json", "-", "--format", "markdown"]) == 0
    doc = _json.loads(capsys.readouterr().out)
    assert doc["variants"]


def test_a_where_on_a_knob_case_keeps_the_knob_verdicts_of_the_whole_audit(tmp_path):
    """A new user (2026-12-02): `audit examples/rms_norm.py --where ALLOW_TMA=False` said "allow_tma ignored" for
    cubins the whole audit called "honoured": the other knob value was not compiled. Now it is, as a hint's are."""
    from tileprobe.audit import audit
    from tileprobe.select import select
    probe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "rms_norm.py")
    hints = {"occupancy": [2]}
    whole = audit([probe], ["sm_90"], hints=hints, jobs=2, with_sass=True)   # the TMA count is in the SASS
    narrow = audit([probe], ["sm_90"], hints=hints, jobs=2, where={"ALLOW_TMA": False}, with_sass=True)
    assert len(narrow.records) == 2            # both knob values compiled for the verdicts
    pick = lambda res: [(str(r.case), r.verdicts.get("allow_tma")) for r in select(res.records, {"ALLOW_TMA": False})]
    assert pick(narrow) == pick(whole) and pick(whole)[0][1] is not None


@pytest.mark.parametrize("spec", [",", "", " , "])
@pytest.mark.parametrize("command", [["audit", "examples/rms_norm.py", "--format", "none"],
                                     ["sass", "examples/rms_norm.py", "--arch", "sm_90", "--where", "occupancy=1"]])
def test_a_tileiras_list_that_names_nothing_is_a_usage_error(spec, command, capsys):
    """``--tileiras ,`` printed "no requested compiler can be used:" and an empty line (exit 3); ``--tileiras ""``
    audited with the default compiler as if nothing was given. Both are exit 2, naming the option and the fix."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    argv = [os.path.join(root, a) if a.endswith(".py") else a for a in command] + ["--tileiras", spec]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--tileiras {spec!r} names no compiler" in err and "--tileiras 13.4.92,13.3.36" in err

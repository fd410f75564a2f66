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


H200_LOG = __import__("os").path.join(__import__("os").path.dirname(__file__), "data", "record", "h200",
                                      "launches-tilegym-2026-12-01.jsonl")


@pytest.mark.parametrize("strides", [[4096, "1", None], [4096.5, 1], [True, 1], "4096,1"])
def test_record_from_log_with_one_launch_of_mixed_strides_keeps_every_other_launch(tmp_path, capsys, strides):
    """One launch whose strides mix ints, strings and null raised a TypeError and lost every other launch."""
    good = [json.loads(line) for line in open(H200_LOG)]
    kernels = {d["id"] for d in good if d.get("t") == "kernel"}
    bad = [dict(d) for d in good]
    first = next(i for i, d in enumerate(bad) if d.get("t") == "launch")
    bad[first] = dict(bad[first], args=[dict(bad[first]["args"][0], strides=strides)] + bad[first]["args"][1:])
    (tmp_path / "launches").mkdir()
    (tmp_path / "launches" / "p1.jsonl").write_text("\n".join(json.dumps(d) for d in bad) + "\n")
    assert main(["record", "--from-log", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert f"{tmp_path / 'launches' / 'p1.jsonl'}:{first + 1}" in captured.err + captured.out
    assert "Traceback" not in captured.err
    written = sorted(p.name for p in (tmp_path / "probes").glob("*.py"))
    assert len(written) == len(kernels) - 1, written      # the kernel of the bad launch had no other launch


PROBE = __import__("os").path.join(__import__("os").path.dirname(__file__), "data", "probe_vadd.py")


def test_a_newline_in_arch_is_escaped_not_a_forged_line(capsys):
    assert main(["audit", PROBE, "--arch", "sm_90\nFORGED line", "--no-store"]) == 3
    err = capsys.readouterr().err
    assert "--arch sm_90\\nFORGED line: 'sm_90\\nFORGED line' is not a target" in err, err
    assert not any(line.startswith("FORGED") for line in err.splitlines())


def test_a_long_where_is_cut_with_its_length(capsys):
    where = "TILE=" + "x" * 120_000
    assert main(["audit", PROBE, "--arch", "sm_90", "--where", where, "--no-store"]) != 0
    err = capsys.readouterr().err
    assert "… (120,005 characters) matches none of the planned variants" in err, err[:500]
    assert len(err) < 2000


def test_shown_escapes_controls_and_cuts():
    from tileprobe.errors import shown
    assert shown("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert shown("sm_90") == "sm_90" and shown("sm_90", quote=True) == "'sm_90'"
    assert shown("y" * 500, limit=10) == "yyyyyyyyyy… (500 characters)"


def test_a_probe_named_twice_is_audited_once(tmp_path, monkeypatch):
    from tileprobe.audit import audit, pipeline
    loaded = []
    real = pipeline._load

    def counting(paths, *a, **kw):
        loaded.append(list(paths))
        return real(paths, *a, **kw)
    monkeypatch.setattr(pipeline, "_load", counting)
    monkeypatch.chdir(__import__("os").path.dirname(PROBE))
    res = audit([PROBE, "probe_vadd.py", "./probe_vadd.py", PROBE], ["sm_90"], jobs=2)
    assert loaded == [[PROBE]]
    assert sorted(r.status for r in res.records) == ["ok"] * 4


def test_compare_of_a_result_whose_environment_is_not_an_object_is_a_message(tmp_path, capsys):
    """A result file with ``"environment": null`` made compare raise a TypeError in the schema reader."""
    from tileprobe.cli import main
    doc = {"schema_version": 2, "variants": [], "environment": None}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "a.json: environment is NoneType, not an object" in err and "Traceback" not in err, err

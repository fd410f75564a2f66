"""A user's value echoed in a message is one line and of bounded length (tileprobe/report/text.py, ``shown``): a
newline or carriage return in it is written escaped (``\\n``), so it cannot forge a line of tileprobe's output, and
a long one is cut with its length. One test per command that echoed raw values on 6b30489: compare (``--tileiras``),
run (``--bundle``), doctor (``CUDA_HOME``, ``--json``), reduce (a 5,000-character ``--property``)."""
from __future__ import annotations

import os

from tileprobe.cli import main

PROBE = os.path.join(os.path.dirname(__file__), "data", "probe_vadd.py")
FORGED = "FORGED line"


def _no_forged_line(text: str) -> None:
    bad = [line for line in text.splitlines() if line.lstrip("\r").startswith(FORGED)]
    assert not bad, text


def test_compare_echoes_a_tileiras_value_escaped(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "s.sqlite"))
    rc = main(["compare", "--probe", PROBE, "--arch", "sm_90", "--tileiras", f"13.4.92\n{FORGED},13.4.92\r{FORGED}"])
    err = capsys.readouterr().err
    assert rc != 0 and f"--tileiras 13.4.92\\n{FORGED}:" in err and f"--tileiras 13.4.92\\r{FORGED}:" in err, err
    _no_forged_line(err)
    assert "\r" not in err


def test_run_echoes_a_bundle_path_escaped(capsys, tmp_path):
    rc = main(["run", "--bundle", str(tmp_path / f"b\n{FORGED}")])
    err = capsys.readouterr().err
    assert rc != 0 and f"b\\n{FORGED}: not a tileprobe bundle (no such folder)" in err, err
    _no_forged_line(err)


def test_doctor_echoes_cuda_home_and_its_json_path_escaped(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", f"/no/cuda\n{FORGED}")
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "s.sqlite"))
    main(["doctor", "--format", "markdown"])
    out = capsys.readouterr()
    assert f"CUDA_HOME=/no/cuda\\n{FORGED} is not a folder" in out.out, out.out
    _no_forged_line(out.out + out.err)
    rc = main(["doctor", "--format", "none", "--json", str(tmp_path / f"d\n{FORGED}" / "x.json")])
    err = capsys.readouterr().err
    assert rc != 0 and f"d\\n{FORGED} does not exist" in err, err
    _no_forged_line(err)


def test_reduce_cuts_a_long_property_with_its_length_and_escapes_a_newline(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "s.sqlite"))
    base = ["reduce", PROBE, "--arch", "sm_90", "--where", "I=1", "--tileiras", "13.4.92", "-o", str(tmp_path / "r")]
    rc = main([*base, "--property", "x" * 5000])
    err = capsys.readouterr().err
    assert rc != 0 and "… (5,000 characters)" in err and "x" * 200 not in err, err[:400]
    rc = main([*base, "--property", f"zz\n{FORGED}\r{FORGED}"])
    err = capsys.readouterr().err
    assert rc != 0 and "--property" in err, err[:400]
    _no_forged_line(err)
    assert "\r" not in err

"""cuda-tile as a dimension: environments of tileprobe's own with another cuda-tile (``tileprobe frontend install``),
an audit run with one (``--cuda-tile``), and the adapter's expectation of each tested release's private API checked
in that release's own environment (so the check runs for every release on any machine, not only the one installed).
The environments go under a temp toolchains folder; cuda-tile comes from pip's index (one small wheel each)."""
from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from support import write_vec_probe

from tileprobe import _cutile, frontend
from tileprobe.cli import main
from tileprobe.errors import ToolchainError
from tileprobe.procs import importable_env


@pytest.fixture(scope="module")
def toolchains(tmp_path_factory):
    """A toolchains folder holding the environment of each tested cuda-tile release."""
    root = tmp_path_factory.mktemp("toolchains")
    env = {"TILEPROBE_TOOLCHAINS": str(root)}
    for release in _cutile.TESTED_RELEASES:
        frontend.install(release, env)
    return env


def test_a_frontend_is_named_by_its_release():
    with pytest.raises(ToolchainError, match=r"'1\.6' is not a cuda-tile release: give MAJOR.MINOR.PATCH"):
        frontend.frontend_dir("1.6", {})
    assert frontend.frontend_dir("1.6.0rc5", {"TILEPROBE_TOOLCHAINS": "/x"}).as_posix() == "/x/cuda-tile-1.6.0rc5"


def test_the_option_is_taken_out_of_the_command_line():
    argv = ["audit", "p.py", "--cuda-tile", "1.6.0", "--arch", "sm_90"]
    assert frontend.strip_option(argv, "--cuda-tile") == ["audit", "p.py", "--arch", "sm_90"]
    assert frontend.strip_option(["audit", "--cuda-tile=1.5.0", "p.py"], "--cuda-tile") == ["audit", "p.py"]


def test_a_missing_environment_names_the_command_that_makes_it(tmp_path):
    with pytest.raises(ToolchainError, match=r"cuda-tile 1\.5\.0 has no environment of tileprobe's .*; make it with "
                                             r"`tileprobe frontend install 1\.5\.0`"):
        frontend.find("1.5.0", {"TILEPROBE_TOOLCHAINS": str(tmp_path)})


def test_the_expected_apis_cover_every_tested_release():
    assert {_cutile.series(r) for r in _cutile.TESTED_RELEASES} == set(_cutile.EXPECTED_APIS)


_READ_API = """
import dataclasses, json
from tileprobe import _cutile
from tileprobe.schema import cutile_version
print(json.dumps([cutile_version(), dataclasses.asdict(_cutile.installed_api()), _cutile.feature_notes()]))
"""


@pytest.mark.parametrize("release", _cutile.TESTED_RELEASES)
def test_each_release_in_its_environment_has_the_private_api_the_adapter_expects(toolchains, release):
    """The release's own compile_cubin and TileCompilerExecutionError, read in its environment (check_cutile passes
    there: every name of NEEDED_NAMES exists), are what EXPECTED_APIS says of its series."""
    fe = frontend.find(release, toolchains)
    assert [f.version for f in frontend.installed(toolchains)] == list(_cutile.TESTED_RELEASES)
    proc = subprocess.run([fe.python, "-c", _READ_API], env=importable_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    version, api, notes = json.loads(proc.stdout.splitlines()[-1])
    expected = _cutile.EXPECTED_APIS[_cutile.series(release)]
    assert version == release
    assert api == {**dataclasses.asdict(expected), "compile_cubin": list(expected.compile_cubin)}
    assert bool(notes) == (not expected.remarks)


def test_an_audit_with_another_cuda_tile_compiles_with_it(toolchains, tmp_path, monkeypatch):
    """`audit --cuda-tile 1.6.0` runs with that environment: every record and the environment block name 1.6.0
    (tileprobe itself is installed with another cuda-tile here)."""
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", toolchains["TILEPROBE_TOOLCHAINS"])
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    out = tmp_path / "a.json"
    assert main(["audit", probe, "--arch", "sm_90", "--cuda-tile", "1.6.0", "--store", str(tmp_path / "s.db"),
                 "--json", str(out), "--summary"]) == 0
    doc = json.loads(out.read_text())
    assert doc["environment"]["cuda_tile"] == "1.6.0"
    assert [(v["cuda_tile"], v["status"], v["bytecode"]) for v in doc["variants"]] == [("1.6.0", "ok", "13.4")]


def test_compare_two_frontends_with_one_compiler(toolchains, tmp_path, monkeypatch, capsys):
    """`compare --probe P --cuda-tile 1.6.0,1.7.0` audits with each frontend and one tileiras (13.4.92, pip) and
    names the side: the same bytecode from both here (the vec_add kernel), so nothing can be the frontend's."""
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", toolchains["TILEPROBE_TOOLCHAINS"])
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    assert main(["compare", "--probe", probe, "--arch", "sm_90", "--cuda-tile", "1.6.0,1.7.0", "--tileiras",
                 "13.4.92", "--store", str(tmp_path / "s.db")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("A: ") and lines[0].endswith("0-cuda-tile-1.6.0.json (cuda-tile 1.6.0, tileiras 13.4.92)")
    assert lines[1].endswith("1-cuda-tile-1.7.0.json (cuda-tile 1.7.0, tileiras 13.4.92); same bytecode, same compiler "
                             "(cuda-tile 1.6.0 → 1.7.0; bytecode 13.4; tileiras 13.4.92 on both): the 1 variant(s) were "
                             "given the same bytes")


def test_compare_frontends_needs_two_and_a_probe(capsys):
    assert main(["compare", "--cuda-tile", "1.6.0", "--probe", "p.py"]) == 2
    assert "--cuda-tile A,B compares two frontends with one compiler: give --probe, two versions" in \
        capsys.readouterr().err


def test_frontend_list_says_where_none_is(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path))
    assert main(["frontend", "list"]) == 0
    assert capsys.readouterr().out.split() == (f"no cuda-tile environments in {tmp_path}; `tileprobe frontend install "
                                               "1.6.0` makes one").split()


@pytest.mark.parametrize("command", [["audit", "p.py", "--arch", "sm_90"], ["bisect", "p.py", "--arch", "sm_90",
                                     "--property", "compiles", "--good", "13.3", "--bad", "13.4"]])
def test_a_frontend_not_made_stops_before_any_work(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path))
    assert main([*command, "--cuda-tile", "1.4.9"]) == ToolchainError.exit_code
    assert "cuda-tile 1.4.9 has no environment of tileprobe's" in capsys.readouterr().err

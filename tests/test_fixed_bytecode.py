"""One frontend's bytecode for several tileiras releases (``audit --fixed-bytecode``), and what ``compare`` says of
each side: "same bytecode, compiler changed" when every variant was given the same bytes, "bytecode changed" and
why when not (the frontend, the bytecode version). The real compiles use tileiras 13.4.92 (pip) and the managed
13.3.36 (skipped when it is not installed: `tileprobe toolchain install 13.3.36`)."""
from __future__ import annotations

import json

import pytest
from support import write_vec_probe

from tileprobe import _cutile
from tileprobe.analyses.compare import changed_side
from tileprobe.cli import main
from tileprobe.errors import ToolchainError, UsageError
from tileprobe.schema import VariantRecord, cutile_version, dump

OLD, NEW = "Cuda compilation tools, release 13.3, V13.3.36", "Cuda compilation tools, release 13.4, V13.4.92"


def _managed(version: str):
    from tileprobe.toolchain import installed
    if not any(t.version == version for t in installed()):
        pytest.skip(f"tileiras {version} is not installed as a toolchain (`tileprobe toolchain install {version}`)")


def test_the_bytecode_every_release_reads_is_the_oldest_releases():
    assert _cutile.fixed_bytecode_for(["13.4.92", "13.3.36", "13.5.37"]) == "13.3"
    assert _cutile.fixed_bytecode_for(["13.5.37", "13.4"]) == "13.4"
    with pytest.raises(ToolchainError, match="each must be MAJOR.MINOR.PATCH"):
        _cutile.fixed_bytecode_for(["13.4.92", ""])
    assert _cutile.newest_bytecode_written() == {"1.5.0": "13.3"}.get(cutile_version(), "13.4")
    assert _cutile.bytecode_text(130300) == "13.3" and _cutile.bytecode_text(None) == ""


def test_fixed_bytecode_sets_the_variable_only_inside(monkeypatch):
    monkeypatch.delenv(_cutile.BYTECODE_ENV, raising=False)
    import os
    with _cutile.fixed_bytecode(["13.3.36", "13.4.92"]) as fixed:
        assert fixed == "13.3" and os.environ[_cutile.BYTECODE_ENV] == "13.3"
    assert _cutile.BYTECODE_ENV not in os.environ


def test_fixed_bytecode_needs_two_releases(tmp_path, capsys):
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    assert main(["audit", probe, "--arch", "sm_90", "--fixed-bytecode", "--no-store"]) == UsageError.exit_code
    assert "--fixed-bytecode holds the bytecode fixed across compilers: give two or more" in capsys.readouterr().err


def _split(path, tmp_path):
    """The audit's result file as one file per compiler, in release order."""
    doc = json.loads(path.read_text())
    out = []
    for build in (OLD, NEW):
        part = dict(doc, variants=[v for v in doc["variants"] if v["tileiras"] == build],
                    environment=dict(doc["environment"], tileiras=[build]))
        out.append(tmp_path / f"{build[-8:]}.json")
        out[-1].write_text(json.dumps(part))
    return [str(p) for p in out]


def test_one_frontends_bytecode_compiled_by_two_releases(tmp_path, capsys):
    """With --fixed-bytecode both releases get bytecode 13.3, the same bytes (equal hashes), and compare puts the
    change on the compiler's side; without it each gets the newest it reads (13.3, 13.4) and compare says the
    bytecode changed."""
    _managed("13.3.36")
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    fixed, free = tmp_path / "fixed.json", tmp_path / "free.json"
    common = ["audit", probe, "--arch", "sm_90", "--tileiras", "13.3.36,13.4.92", "--store", str(tmp_path / "s.db")]
    assert main([*common, "--fixed-bytecode", "--json", str(fixed)]) == 0
    assert main([*common, "--json", str(free)]) == 0
    capsys.readouterr()
    recs = {v["tileiras"]: v for v in json.loads(fixed.read_text())["variants"]}
    assert [recs[b]["bytecode"] for b in (OLD, NEW)] == ["13.3", "13.3"]
    assert recs[OLD]["bytecode_sha256"] == recs[NEW]["bytecode_sha256"] and len(recs[OLD]["bytecode_sha256"]) == 64
    free_recs = {v["tileiras"]: v for v in json.loads(free.read_text())["variants"]}
    assert free_recs[OLD]["bytecode_sha256"] == recs[OLD]["bytecode_sha256"]   # the same bytes at 13.3
    if _cutile.newest_bytecode_written() == "13.3":
        # cuda-tile 1.5.0 writes nothing newer than 13.3: without the flag 13.4.92 gets 13.3 too, the same bytes.
        assert [free_recs[b]["bytecode"] for b in (OLD, NEW)] == ["13.3", "13.3"]
        assert free_recs[NEW]["bytecode_sha256"] == recs[NEW]["bytecode_sha256"]
        return
    assert [free_recs[b]["bytecode"] for b in (OLD, NEW)] == ["13.3", "13.4"]
    assert free_recs[NEW]["bytecode_sha256"] != recs[NEW]["bytecode_sha256"]

    a, b = _split(fixed, tmp_path)
    assert main(["compare", a, b]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.endswith("same bytecode, compiler changed (tileiras 13.3.36 → tileiras 13.4.92; bytecode 13.3 from "
                         f"cuda-tile {cutile_version()} on both, the same bytes in all 1 variant(s)): a change here is "
                         "tileiras'")
    a, b = _split(free, tmp_path)
    assert main(["compare", a, b]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.endswith(f"bytecode changed (bytecode version 13.3 → 13.4, cuda-tile {cutile_version()} on both "
                         "writing the newest each tileiras reads; the bytes differ in 1 of 1 variant(s)) and the "
                         "compiler changed (tileiras 13.3.36 → tileiras 13.4.92): a change here is tileiras' or the "
                         "bytecode version's; --fixed-bytecode gives both the same bytes")


def rec(front, build, sha, bytecode="13.4", occ=2):
    return VariantRecord(kernel="rms_norm", probe="p.py", case={"T": 4}, hints={"occupancy": occ}, arch="sm_120",
                         tileiras=build, cuda_tile=front, status="ok", bytecode=bytecode, bytecode_sha256=sha)


def test_two_frontends_with_one_compiler_say_the_bytecode_changed():
    """Records of cuda-tile 1.6.0 and 1.7.0 (two environments) under one tileiras: their bytecode differs, and the
    side is the frontend's; had the bytes been the same, nothing of a change could be the frontend's."""
    a = [rec("1.6.0", NEW, "a" * 64), rec("1.6.0", NEW, "b" * 64, occ=4)]
    b = [rec("1.7.0", NEW, "c" * 64), rec("1.7.0", NEW, "b" * 64, occ=4)]
    assert changed_side(a, b) == ("bytecode changed (frontend 1.6.0→1.7.0; the bytes differ in 1 of 2 variant(s)); "
                                  "tileiras 13.4.92 on both: a change here is in what cuTile wrote")
    b = [rec("1.7.0", NEW, "a" * 64), rec("1.7.0", NEW, "b" * 64, occ=4)]
    assert changed_side(a, b) == ("same bytecode, same compiler (cuda-tile 1.6.0 → 1.7.0; bytecode 13.4; tileiras "
                                  "13.4.92 on both): the 2 variant(s) were given the same bytes")


def test_records_without_a_bytecode_hash_keep_the_words_of_versions():
    """A side whose records carry no bytecode hash (older files) is judged from the versions alone, as before."""
    a, b = [rec("1.6.0", NEW, "")], [rec("1.7.0", NEW, "c" * 64)]
    assert changed_side(a, b).startswith("only the frontend differs (cuda-tile 1.6.0 → 1.7.0; ")


def test_the_bytecode_fields_round_trip_through_the_result_file():
    r = rec("1.7.0", OLD, "d" * 64, bytecode="13.3")
    back = VariantRecord.from_dict(json.loads(json.dumps(dump([r], {})))["variants"][0])
    assert (back.bytecode, back.bytecode_sha256) == ("13.3", "d" * 64)


def test_compare_a_probe_across_two_releases_with_the_bytecode_fixed(tmp_path, capsys):
    """`compare --probe P --tileiras 13.3.36,13.4.92 --fixed-bytecode`: one audit, both releases given bytecode 13.3,
    and the comparison's heading puts the change on the compiler's side."""
    _managed("13.3.36")
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    assert main(["compare", "--probe", probe, "--arch", "sm_90", "--tileiras", "13.3.36,13.4.92", "--fixed-bytecode",
                 "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert ("same bytecode, compiler changed (tileiras 13.3.36 → tileiras 13.4.92; bytecode 13.3 from cuda-tile "
            f"{cutile_version()} on both, the same bytes in all 1 variant(s)): a change here is tileiras'") in out


def test_compare_fixes_the_bytecode_only_for_a_probe_and_two_releases(capsys):
    assert main(["compare", "a.json", "b.json", "--fixed-bytecode"]) == UsageError.exit_code
    assert "--fixed-bytecode needs --probe and two --tileiras releases" in capsys.readouterr().err

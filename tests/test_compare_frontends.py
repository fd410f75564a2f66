"""compare tells which side of the toolchain changed: the frontend (cuda-tile, which writes the bytecode) or the
compiler (tileiras). Records name both (``cuda_tile``, ``tileiras``), so two result files say it."""
import json

from tileprobe.cli import main
from tileprobe.schema import VariantRecord, Verdict, dump

OLD, NEW = "Cuda compilation tools, release 13.3, V13.3.36", "Cuda compilation tools, release 13.4, V13.4.92"


def rec(front, build, occ, regs, ctas, code, status="honoured"):
    return VariantRecord(kernel="rms_norm", probe="p.py", case={"ALLOW_TMA": True}, hints={"occupancy": occ},
                         arch="sm_120", tileiras=build, cuda_tile=front, status="ok", threads=256, registers=regs,
                         shared_bytes=2084, ctas_per_sm=ctas, code_sha256=code,
                         verdicts={"occupancy": Verdict(status, "")})


def _files(tmp_path, a, b):
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    for path, recs in ((pa, a), (pb, b)):
        path.write_text(json.dumps(dump(recs, {"tileiras": sorted({r.tileiras for r in recs}),
                                               "cuda_tile": recs[0].cuda_tile})))
    return str(pa), str(pb)


def _compare(capsys, pa, pb):
    assert main(["compare", pa, pb]) == 0
    return [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]


def test_two_frontends_with_one_compiler_say_the_change_is_cutiles(tmp_path, capsys):
    """cuda-tile 1.5.0 and 1.7.0 under tileiras 13.3.36: what changed (registers) is put on the frontend's side."""
    pa, pb = _files(tmp_path, [rec("1.5.0", OLD, 2, 128, 2, "x"), rec("1.5.0", OLD, 4, 64, 4, "y")],
                    [rec("1.7.0", OLD, 2, 168, 1, "z", status="ignored"), rec("1.7.0", OLD, 4, 64, 4, "y")])
    lines = _compare(capsys, pa, pb)
    assert lines[0] == f"A: {pa} (cuda-tile 1.5.0, tileiras 13.3.36)"
    assert lines[1] == (f"B: {pb} (cuda-tile 1.7.0, tileiras 13.3.36); only the frontend differs (cuda-tile 1.5.0 → "
                        "1.7.0; tileiras 13.3.36 on both): a change here is cuTile's, in the bytecode it wrote")
    assert lines[2] == "1 regression(s), 0 improvement(s), 0 changed, 1 same"
    assert "occupancy honoured → ignored; CTAs/SM 2 → 1" in "\n".join(lines[3:])


def test_two_compilers_with_one_frontend_say_the_change_is_tileiras(tmp_path, capsys):
    """cuda-tile 1.7.0's bytecode compiled by tileiras 13.3.36 and 13.4.92: the change is put on the compiler's side;
    with both differing, compare says it cannot tell."""
    pa, pb = _files(tmp_path, [rec("1.7.0", OLD, 2, 128, 2, "x")], [rec("1.7.0", NEW, 2, 168, 1, "z", "ignored")])
    lines = _compare(capsys, pa, pb)
    assert lines[:2] == [f"A: {pa} (cuda-tile 1.7.0, tileiras 13.3.36)",
                         f"B: {pb} (cuda-tile 1.7.0, tileiras 13.4.92); only the compiler differs (cuda-tile 1.7.0 "
                         "on both, writing the newest bytecode each tileiras reads): a change here is tileiras' or the "
                         "bytecode version's"]
    assert lines[2] == "1 regression(s), 0 improvement(s), 0 changed, 0 same"
    pa, pb = _files(tmp_path, [rec("1.6.0", NEW, 2, 128, 2, "x")], [rec("1.5.0", OLD, 2, 128, 2, "x")])
    lines = _compare(capsys, pa, pb)
    assert lines[1].endswith("; the frontend (cuda-tile) and the compiler (tileiras) both differ: a change here may be "
                             "either's; compare with one of them the same to tell")
    assert lines[2] == "0 regression(s), 0 improvement(s), 0 changed, 1 same"

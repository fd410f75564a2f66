"""Machine code on demand: the listing parser, instruction classes, the aligned diff with registers
normalised (a renaming is not a change), and ``tileprobe sass`` (SASS, PTX, --diff) through the store."""
from __future__ import annotations

from pathlib import Path

import pytest
from support import write_vec_probe

from tileprobe.cli import main
from tileprobe.model.sass import disassemble, find_nvdisasm, parse_nvdisasm
from tileprobe.model.sass_diff import diff_instructions, instruction_class, kernel_instructions, parse_listing

ROOT = Path(__file__).resolve().parents[1]
CUBINS = ROOT / "tests" / "data" / "cubins"

LISTING = """
\t.target\tsm_90a
\t.section\t.text.k,"ax",@progbits
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R5, SR_TID.X ;
        /*0020*/               @P0 BRA `(.L_x_1) ;
        /*0030*/                   LDL.64 R6, [R1+0x10] ;
        /*0040*/                   FFMA R7, R5, R6, R7 ;
        /*0050*/                   NOP ;
        /*0060*/                   EXIT ;
"""


def _renamed(text: str) -> str:
    return text.replace("R5", "R9").replace("R6", "R12").replace("R7", "R2").replace("P0", "P3").replace(
        "L_x_1", "L_x_7")


def test_listing_parse_and_classes():
    ins = parse_listing(LISTING)["k"]
    assert [i.opcode for i in ins] == ["LDC", "S2R", "BRA", "LDL.64", "FFMA", "EXIT"]       # NOP left out
    assert ins[2].predicate == "@P0" and ins[3].operands == "R6, [R1+0x10]" and ins[3].address == 0x30
    assert [instruction_class(i.base) for i in ins] == ["move / constant", "move / constant", "control / sync",
                                                       "local memory (spills)", "float", "control / sync"]
    assert instruction_class("UTMALDG") == "TMA / bulk copy" and instruction_class("HGMMA") == "matrix (MMA)"
    assert instruction_class("IMAD") == "integer / logic" and instruction_class("UIADD3") == "uniform datapath"


def test_a_register_renaming_is_not_a_change_but_an_edit_is():
    a = kernel_instructions(LISTING)
    d = diff_instructions(a, kernel_instructions(_renamed(LISTING)))
    assert d.identical and not d.same_bytes and d.changed == 0
    edited = _renamed(LISTING).replace("FFMA R2, R9, R12, R2", "FMUL R2, R9, R12")
    d = diff_instructions(a, kernel_instructions(edited))
    assert not d.identical and d.changed == 1
    assert [ln.split(None, 3)[-1] for ln in d.lines() if ln.lstrip()[:1] in "-+"] == [
        "FFMA R7, R5, R6, R7", "FMUL R2, R9, R12"]
    assert ("float", 1, 1) in d.classes


@pytest.fixture(scope="module")
def nvdisasm():
    return find_nvdisasm()


def test_real_cubins_hint_values(nvdisasm):
    """vec_add occupancy 1 and 4 compile to one machine code (FIELD_NOTES: small kernels); the matmul's do not."""
    same = diff_instructions(*(kernel_instructions(disassemble((CUBINS / f"vec_add_occ{n}_sm_90.cubin").read_bytes()))
                               for n in (1, 4)))
    assert same.same_bytes and len(same.a) > 50
    mm = [(CUBINS / f).read_bytes() for f in ("matmul_sm_90.cubin", "matmul_occ4_sm_90.cubin")]
    d = diff_instructions(*(kernel_instructions(disassemble(c)) for c in mm))
    counts = {name: (x, y) for name, x, y in d.classes}
    traits = [parse_nvdisasm(disassemble(c)).kernels[0] for c in mm]
    assert counts["matrix (MMA)"] == tuple(sum(t.matrix_counts.values()) for t in traits)   # the traits agree
    assert not d.identical and 0 < d.changed < len(d.a) + len(d.b)


def test_sass_command_prints_listing_ptx_and_diff_from_the_store(tmp_path, capsys, monkeypatch):
    probe = write_vec_probe(tmp_path / "probe_vec.py", tiles=(1024, 2048))
    store = str(tmp_path / "s.sqlite")
    base = ["sass", str(probe), "--arch", "sm_90", "--store", store]
    assert main(base + ["--where", "TILE=1024,occupancy=2"]) == 0
    out = capsys.readouterr().out
    assert ".text.vec_add" in out and "EXIT" in out
    import tileprobe.audit.pipeline as pipeline
    import tileprobe.compile.pool as compile_mod
    calls = []
    monkeypatch.setattr(pipeline, "compile_variants", lambda variants, **kw: (x for x in calls.extend(variants) or ()))
    monkeypatch.setattr(compile_mod, "compile_variants", pipeline.compile_variants)
    assert main(base + ["--where", "TILE=1024,occupancy=2", "--ptx"]) == 0
    ptx = capsys.readouterr().out
    assert ".entry vec_add" in ptx and calls == []             # from the store
    assert ptx.split("\n", 1)[0].strip() and ptx.endswith("}\n")     # no blank lines before, one newline after
    assert main(base + ["--where", "TILE=1024,occupancy=2", "--diff", "TILE=2048"]) == 1   # TILE=2048 not stored
    monkeypatch.undo()
    assert main(base + ["--where", "TILE=1024,occupancy=2", "--diff", "occupancy=1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "A: vec_add sm_90 TILE=1024 occupancy=2 · tileiras 13.4.92" in out
    assert "B: vec_add sm_90 TILE=1024 occupancy=1 · tileiras 13.4.92" in out
    assert "machine code: the same instructions, register for register" in out
    from tileprobe.store import Store
    with Store.open(store) as s:                                 # history's command column: the whole command
        commands = [a["command_line"] for a in s.audits()]
    assert commands[:2] == [f"sass {probe} --arch sm_90 --store {store} --where TILE=1024,occupancy=2 --diff "
                            "occupancy=1"] * 2
    assert f"sass {probe} --arch sm_90 --store {store} --where TILE=1024,occupancy=2 --ptx" in commands
    assert main(base + ["--where", "TILE=1024"]) == 2                 # a usage error, as every --where problem
    assert "--where selects 2 variants; name one, adding occupancy to --where" in capsys.readouterr().err
    assert main(base + ["--where", "TILE=4096"]) == 2
    assert "TILE takes 1024, 2048" in capsys.readouterr().err


def test_sass_takes_one_target_and_needs_where_as_usage_errors(tmp_path, capsys):
    """Two targets, or no --where, are usage errors (exit 2) naming the option and the fix, before any compile."""
    probe = str(tmp_path / "probe_vec.py")
    with pytest.raises(SystemExit) as e:
        main(["sass", probe, "--arch", "sm_90,sm_120", "--where", "TILE=1024"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: tileprobe sass [")
    assert ("argument --arch: 'sm_90,sm_120' names 2 targets; sass reads one variant on one target: give one, "
            "e.g. --arch sm_90") in " ".join(err.split())
    assert main(["sass", probe, "--arch", "sm_90", "--no-store"]) == 2
    assert "tileprobe: --where is missing: sass prints one variant; name it with --where" in capsys.readouterr().err

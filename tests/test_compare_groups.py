"""``compare`` groups the variants that only changed by kind of change, with what changed in the machine code
from the SASS (instruction count), one line per group with counts; Markdown and HTML use the same lines.

Records modelled on SwiGLU (TileGym) on sm_90 under tileiras 13.3.36 and 13.4.92: same resources, 203 → 219
SASS instructions in every variant (the only change ``sass`` showed), and a few with registers moved too."""
from __future__ import annotations

from tileprobe.analyses.compare import compare_records, compiler_steps, group_changes
from tileprobe.analyses.results import Comparison
from tileprobe.records import SassFacts
from tileprobe.report.common import change_group_line
from tileprobe.report.html import compiler_changes_section
from tileprobe.report.markdown import compare_markdown
from tileprobe.schema import VariantRecord


def _rec(build: str, tile: int, occ: int, instructions: int, regs: int = 61) -> VariantRecord:
    return VariantRecord(kernel="swiglu", probe="swiglu_probe.py", case={"TILE": tile}, hints={"occupancy": occ},
                         arch="sm_90", tileiras=f"Cuda compilation tools, release 13.x, V{build}", status="ok",
                         threads=128, registers=regs, shared_bytes=1024, driver_shared_bytes=0, stack_bytes=0,
                         ctas_per_sm=8, limiter="threads", code_sha256=f"{build}-{tile}-{occ}-{regs}",
                         sass=SassFacts(instructions=instructions, spill_loads=0, spill_stores=0))


def _sides():
    keys = [(t, o) for t in (64, 128, 256) for o in (1, 2)]
    a = [_rec("13.3.36", t, o, 203) for t, o in keys]
    b = [_rec("13.4.92", t, o, 219, regs=63 if t == 256 else 61) for t, o in keys]
    return a, b


def test_a_changed_variant_says_its_instruction_count_not_only_that_the_code_differs():
    a, b = _sides()
    changes = compare_records(a, b)
    assert {c.kind for c in changes} == {"changed"}
    assert changes[0].details[-1] == "instructions 203 → 219 (+16)"
    assert not any("machine code differs" in d for c in changes for d in c.details)


def test_changes_are_grouped_by_kind_with_counts():
    a, b = _sides()
    groups = group_changes(compare_records(a, b))
    assert [change_group_line(g) for g in groups] == [
        "instructions: 6 variants, +16 (203 → 219)",
        "registers: 2 variants, +2 (61 → 63)"]


def test_markdown_and_html_print_the_same_group_lines():
    a, b = _sides()
    comparison = Comparison(compare_records(a, b), "13.3.36", "13.4.92")
    md = compare_markdown(comparison)
    assert "Changed (6 variants), by kind of change:\n\n- instructions: 6 variants, +16 (203 → 219)\n" in md
    assert "TILE=64" not in md                                  # no line per variant without details
    assert "TILE=64" in compare_markdown(comparison, details=True)
    html = compiler_changes_section(compiler_steps(a + b))
    assert "<li>instructions: 6 variants, +16 (203 → 219)</li>" in html
    assert "<details><summary>each changed variant (6)</summary>" in html


def _with_opcodes(recs: list[VariantRecord], opcodes: dict[str, int]) -> list[VariantRecord]:
    for r in recs:
        r.sass = r.sass.replace(opcodes=dict(opcodes))
    return recs


#: SwiGLU's prologue under 13.4.92 gained a division sequence (MUFU.RCP, I2FP, F2I) that 13.3.36 did not have.
_OLD_OPS = {"FFMA": 40, "LDG": 8, "STG": 4, "IMAD": 30, "SHFL": 2, "EXIT": 1}
_NEW_OPS = {"FFMA": 40, "LDG": 8, "STG": 4, "IMAD": 33, "MUFU": 3, "I2FP": 1, "F2I": 1, "EXIT": 1}


def test_instruction_families_added_or_dropped_are_one_line_per_group_with_counts():
    a, b = _sides()
    _with_opcodes(a, _OLD_OPS), _with_opcodes(b, _NEW_OPS)
    b[0].sass = b[0].sass.replace(opcodes={**_NEW_OPS, "SHFL": 2})      # one variant kept its shuffles
    changes = compare_records(a, b)
    assert "instruction families +F2I (1), +I2FP (1), +MUFU (3), −SHFL (2)" in changes[-1].details
    assert changes[-1].families == (("F2I", 0, 1), ("I2FP", 0, 1), ("MUFU", 0, 3), ("SHFL", 2, 0))
    lines = [change_group_line(g) for g in group_changes(changes)]
    assert lines == ["instructions: 6 variants, +16 (203 → 219)",
                     "instruction families added: F2I, I2FP, MUFU: 6 variants",
                     "instruction families dropped: SHFL: 5 variants",
                     "registers: 2 variants, +2 (61 → 63)"]
    md = compare_markdown(Comparison(changes, "13.3.36", "13.4.92"))
    assert "- instruction families added: F2I, I2FP, MUFU: 6 variants\n" in md
    html = compiler_changes_section(compiler_steps(a + b))
    assert "<li>instruction families dropped: SHFL: 5 variants</li>" in html


def test_records_without_opcodes_compare_without_families():
    a, b = _sides()
    _with_opcodes(b, _NEW_OPS)                     # A is older than the opcodes key
    changes = compare_records(a, b)
    assert all(c.families == () for c in changes)
    assert not any(d.startswith("instruction families") for c in changes for d in c.details)


def test_the_hint_less_variant_has_the_tables_name_in_compare():
    a, b = _sides()
    for r in (a[0], b[0]):
        r.hints, r.effective_hints = {"occupancy": None}, {"occupancy": None}
    for r in (a[2], b[2]):
        r.hints, r.effective_hints = {"occupancy": None}, {"occupancy": 16}
    changes = {c.label() for c in compare_records(a, b)}
    assert "swiglu sm_90 TILE=64 occupancy=hint-less" in changes            # it read occupancy=None
    assert "swiglu sm_90 TILE=128 occupancy=16 (declared)" in changes
    assert not any("None" in label for label in changes)

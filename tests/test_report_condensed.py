"""The terminal report, condensed: remarks de-duplicated as sets (tileiras varies their order), the spill line under a
table, and one-value hints silent."""
from __future__ import annotations

from rich.console import Console

from tileprobe.records import SassFacts
from tileprobe.report.terminal import render_audit
from tileprobe.schema import VariantRecord, Verdict


def _rem(line):
    return {"kind": "Missed", "name": "tma", "line": line, "message": "Failed to select TMA load instruction",
            "details": ["x): base pointer not 16-byte aligned"]}


def _rec(occ, lines, spills=(0, 0), verdicts=None):
    return VariantRecord(kernel="gg", probe="p.py", case={"TILE": 128}, hints={"occupancy": occ}, arch="sm_90",
                         tileiras="release 13.4, V13.4.92", status="ok", threads=256, registers=128,
                         shared_bytes=1000, driver_shared_bytes=1000, ctas_per_sm=1, code_sha256=f"c{occ}",
                         remarks=[_rem(n) for n in lines],
                         sass=SassFacts(spill_loads=spills[0], spill_stores=spills[1]),
                         verdicts=verdicts or {"occupancy": Verdict("met", "1 CTA/SM ≥ 1")})


def _render(rows) -> str:
    con = Console(width=120, record=True, color_system=None)
    render_audit(rows, con)
    return con.export_text()


def test_a_remark_every_variant_carries_is_shown_once_whatever_its_order():
    rows = [_rec(1, [55, 56, 57]), _rec(2, [57, 55, 56]), _rec(4, [56, 57, 55, 90])]
    out = _render(rows)
    assert "remarks of all 3 variants:" in out
    assert out.count("remark: line 55: Failed to select TMA load instruction (base pointer not 16-byte aligned)") == 1
    assert out.count("remark: line 90:") == 1                      # the one variant's own remark, under it
    assert out.index("remark: line 55") < out.index("remark: line 56") < out.index("remark: line 57")


def test_spills_get_a_line_under_the_table():
    out = _render([_rec(1, [], (146, 188)), _rec(2, [], (6640, 6600)), _rec(4, [])])
    assert "spills: 2 of 3 variants (146–6,640 LDL, 188–6,600 STL)" in out
    assert "spills:" not in _render([_rec(1, []), _rec(2, [])])


def test_a_hint_audited_at_one_value_is_summarized_once():
    nothing = Verdict("met", "cluster none (1 CTA) = 1 CTA(s); the lowest num_ctas value audited: "
                             "nothing shows the hint changed the code")
    rows = [_rec(o, [], verdicts={"num_ctas": nothing, "occupancy": Verdict("met", f"occ {o}")})
            for o in (1, 2, 4)]
    for r in rows:
        r.hints["num_ctas"] = 1
    out = _render(rows)
    assert out.count("num_ctas met:") == 0
    assert "num_ctas: one value audited (1): met for all 3 variants; nothing shows the hint changed the code" in out
    assert out.count("occupancy met: occ") == 3                  # the hint with three values keeps its lines


def _build(v):
    return f"Cuda compilation tools, release {v.rsplit('.', 1)[0]}, V{v}"


def _hrec(build, tile, occ, ok=True):
    r = _rec(occ, [])
    r.tileiras, r.case, r.code_sha256 = _build(build), {"TILE": tile}, f"{build}-{tile}-{occ}"
    if not ok:
        r.status, r.failure = "compile_error", "compile_error"
    return r


def test_html_what_changed_leaves_out_only_a_build_without_a_partner():
    """A build is "Not compared" only when none of its variants was audited with another build; one with fewer
    variants than the others (13.3.36: 3 against 8, all partnered) is compared."""
    from tileprobe.analyses.compare import compiler_steps
    from tileprobe.report.html import compiler_changes_section
    rows = [_hrec("13.4.92", t, o) for t in (64, 128, 256, 512) for o in (1, 2)]
    rows += [_hrec("13.3.36", t, o) for t, o in ((64, 1), (64, 2), (128, 1))]
    rows.append(_hrec("13.2.86", 32, 1))             # one variant no other release audited
    steps = compiler_steps(rows)
    assert steps.left_out == [(_build("13.2.86"), 1)] and [s[:2] for s in steps.steps] == [
        (_build("13.3.36"), _build("13.4.92"))]
    html = compiler_changes_section(steps)
    assert "Not compared (no variant also audited with another compiler): tileiras 13.2.86 (1 variant)" in html
    assert "tileiras 13.3.36 (3 variants)" not in html
    assert "What changed from tileiras 13.2.86" not in html and "What changed from tileiras 13.3.36 to tileiras " \
        "13.4.92" in html


def test_html_plots_only_series_with_data_and_split_per_compiler():
    from tileprobe.report.html import MAX_SERIES, have_matplotlib, hint_figure_svg, legend_columns, plot_groups
    rows = [_hrec(b, t, o) for b in ("13.3.36", "13.4.92") for t in range(8) for o in (1, 2)]
    rows += [_hrec("13.5.1", t, o, ok=False) for t in range(8) for o in (1, 2)]     # a compiler with no data
    groups = plot_groups(rows, "occupancy")
    assert 16 > MAX_SERIES and [b for b, _ in groups] == [_build("13.4.92"), _build("13.3.36")]
    assert plot_groups(rows[:8], "occupancy")[0][0] == ""                    # few series: one plot
    assert legend_columns(["x" * 60] * 9, 3.4 * 3) == 2 and legend_columns(["x" * 120] * 9, 10.2) == 1 and legend_columns(["13.4.92 · TILE=1"] * 9, 10.2) == 4
    if have_matplotlib():
        svg = hint_figure_svg(rows[:4] + rows[-4:], "occupancy", "t", salt="s")
        assert "13.5.1" not in svg and "TILE=0" in svg


def test_a_long_parenthetical_repeated_in_reasons_is_a_numbered_note():
    layout = "(layout measured on one H200, 2026-12-01; other H100/H200 dies may group their SMs differently)"
    rows = [_rec(o, [], verdicts={"occupancy": Verdict("met", f"clusters of 2: {66 * o} active on "
                                                                     f"H200 {layout}; occ {o}")})
            for o in (1, 2)]
    out = _render(rows)
    assert out.count(layout[1:-1]) == 1 and "  [1] layout measured on one H200" in out
    assert "occupancy met: clusters of 2: 66 active on H200 [1]; occ 1" in out

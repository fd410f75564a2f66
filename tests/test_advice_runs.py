"""Advice from measurements, on recorded run data: the H200 run of the bundled large RMSNorm
(``docs/gpu/run-rms-norm-large-2026-11-29.txt``: NVIDIA H200, driver 580.159.04, tileiras 13.4.92, sm_90).

Each row below is that file's table: ALLOW_TMA, occupancy → threads, registers, shared B, stack B, CTAs/SM,
median µs, IQR % (the file's "±" and "IQR %" column: (p75 − p25) / median × 100). Occupancy 16 has the
occupancy-8 cubin (FIELD_NOTES: "gives the occupancy-8 cubin").
"""
from tileprobe.judge.advice import advice, measured_advice
from tileprobe.judge.verdict import judge_records
from tileprobe.schema import VariantRecord, VariantRun

H200 = "NVIDIA H200"
RUN = {  # (ALLOW_TMA, occupancy): (threads, regs, smem, stack, ctas, median_us, iqr_pct)
    (True, 1): (256, 255, 191_256, 256, 1, 1551.9, 1.1), (True, 2): (256, 128, 113_176, 0, 2, 288.5, 0.8),
    (True, 4): (256, 64, 55_576, 0, 4, 289.5, 1.7), (True, 8): (256, 32, 26_744, 24, 8, 296.1, 1.1),
    (True, 16): (256, 32, 26_744, 24, 8, 294.7, 1.0),
    (False, 1): (256, 255, 2_072, 0, 1, 1502.8, 0.2), (False, 2): (256, 128, 2_072, 0, 2, 805.0, 0.3),
    (False, 4): (256, 64, 2_072, 0, 4, 473.9, 0.3), (False, 8): (256, 32, 2_072, 40, 8, 370.6, 0.8),
    (False, 16): (256, 32, 2_072, 40, 8, 365.8, 0.9),
}


def _record(tma, occ, run=True):
    threads, regs, smem, stack, ctas, median, iqr_pct = RUN[(tma, occ)]
    half = median * iqr_pct / 200
    code = f"{tma}-{min(occ, 8)}"
    return VariantRecord(
        kernel="rms_norm_large", probe="examples/rms_norm_large.py", case={"ALLOW_TMA": tma},
        hints={"occupancy": occ}, arch="sm_90", tileiras="Cuda compilation tools, release 13.4, V13.4.92",
        status="ok", threads=threads, registers=regs, shared_bytes=smem, driver_shared_bytes=smem - 1024,
        stack_bytes=stack, ctas_per_sm=ctas, limiter="registers" if ctas < 8 else "threads", code_sha256=code,
        run=VariantRun(status="ok", median_us=median, p25_us=median - half, p75_us=median + half,
                       gpu={"name": H200}) if run else None)


def _records(run=True):
    recs = [_record(tma, occ, run) for tma in (True, False) for occ in (1, 2, 4, 8, 16)]
    judge_records(recs)
    return recs


def test_static_advice_says_what_each_value_builds_and_names_no_pick_it_cannot_justify():
    """The static pick was occupancy 4 ("the most CTAs/SM met without spills"), a guess at speed the
    measurement below contradicts (occupancy 16 is 1.30× faster). The static line now lists each build and asks
    for the measurement, with the command."""
    lines = advice(_records())
    label = "rms_norm_large sm_90 tileiras 13.4.92 ALLOW_TMA=False"
    static, measured = [line for line in lines if line.startswith(label + ":")]
    assert static == (f"{label}: occupancy 1: 1 CTA/SM, 255 registers, 2,072 B shared, no spills; "
                      "occupancy 2: 2 CTAs/SM, 128 registers, 2,072 B shared, no spills; "
                      "occupancy 4: 4 CTAs/SM, 64 registers, 2,072 B shared, no spills; "
                      "occupancy 8 = 16 (identical machine code): 8 CTAs/SM, 32 registers, 2,072 B shared, "
                      "spills (40 B stack) — 4 different builds: which is fastest must be measured, static facts do "
                      "not rank them: `tileprobe run examples/rms_norm_large.py --arch sm_90 --where ALLOW_TMA=False`")
    assert "pick" not in static
    assert measured.startswith(f"{label}: measured on NVIDIA H200: best occupancy 16, 365.8 µs (IQR 364.2–367.4); ")
    assert "the static facts named no pick (different builds: this measurement decides)" in measured
    assert measured.endswith("ranking: 16 365.8, 8 370.6, 4 473.9, 2 805.0, 1 1,502.8 µs")


def test_measured_advice_names_the_disagreement_with_a_static_pick():
    rows = [r for r in _records() if r.case["ALLOW_TMA"] is False]
    measured = measured_advice(rows, next(r for r in rows if r.hints["occupancy"] == 4))
    assert ("static advice: occupancy 4; measured best: occupancy 16, 1.30× faster than 4 (473.9 µs (IQR 473.2–474.6)):"
            " the static advice and the measurement disagree") in measured


def test_measured_advice_says_when_a_static_pick_is_within_the_noise_of_the_measured_best():
    rows = [r for r in _records() if r.case["ALLOW_TMA"] is True]
    measured = measured_advice(rows, next(r for r in rows if r.hints["occupancy"] == 4))
    # 288.5 vs 289.5 µs: 1.0 µs apart, less than occupancy 4's IQR (1.7 % of 289.5 = 4.9 µs)
    assert "best occupancy 2, 288.5 µs (IQR 287.3–289.7) (within noise: occupancy 4);" in measured
    assert "the static advice (occupancy 4, 289.5 µs (IQR 287.0–292.0)) is within noise of it" in measured
    assert "disagree" not in measured


def test_static_advice_picks_only_where_every_value_builds_the_same_code():
    """Identical machine code for every value: the lowest is the pick, the others change nothing."""
    recs = [_record(True, occ, run=False) for occ in (8, 16)]
    judge_records(recs)
    assert advice(recs) == ["rms_norm_large sm_90 tileiras 13.4.92 ALLOW_TMA=True: occupancy 8 = 16 (identical "
                            "machine code): 8 CTAs/SM, 32 registers, 26,744 B shared, spills (24 B stack) — one build "
                            "for every value that launches: take the lowest, occupancy 8; the others change nothing"]


def test_static_advice_weighs_the_hint_less_build():
    """With a hint-less build in the group it is listed first, and when it has every value's code the pick is to
    leave the hint out."""
    recs = [_record(True, occ, run=False) for occ in (8, 16)]
    free = _record(True, 8, run=False)
    free.hints = {"occupancy": None}
    recs.append(free)
    judge_records(recs)
    line = advice(recs)[0]
    assert line.endswith(": hint-less = occupancy 8 = 16 (identical machine code): 8 CTAs/SM, 32 registers, 26,744 B "
                         "shared, spills (24 B stack) — one build for every value that launches: leave the hint out; "
                         "the others change nothing")


def test_no_runs_no_measured_line_and_failed_runs_are_not_ranked():
    assert all("measured on" not in line for line in advice(_records(run=False)))
    recs = [r for r in _records() if r.case["ALLOW_TMA"] is False]
    recs[-1].run = VariantRun(status="crash", median_us=None)
    static = next(r for r in recs if r.hints["occupancy"] == 4)
    text = measured_advice(recs, static)
    assert "best occupancy 8, 370.6 µs" in text and text.endswith("not ranked: occupancy 16 (crash)")


def test_stored_runs_name_the_gpu_as_text():
    recs = _records()
    for r in recs:
        r.run.gpu = H200                      # Store.records attaches the GPU's name, not a dict
    assert any("measured on NVIDIA H200: best occupancy 16" in line for line in advice(recs))


def test_advice_labels_spell_tuple_values_as_the_tables_do():
    recs = [_record(True, occ, run=False) for occ in (1, 2)]
    for r in recs:
        r.case = {"TILE": [128, 64]}
        r.hints["num_ctas"] = 2
    judge_records(recs)
    assert [line.split(":")[0] for line in advice(recs)] == [
        "rms_norm_large sm_90 tileiras 13.4.92 TILE=128×64 num_ctas=2"]


def test_advice_gives_cluster_residency_and_picks_between_identical_builds():
    """Clusters of 4 on the H200 (the bundled TileGym persistent matmul, audited 2026-12-01): occupancy 1 is
    ignored and 2 partial by cluster residency; the advice gives the resident clusters against those the grid
    needs, and asks for a measurement. A TileGym matmul whose two values build the same code: take the lowest."""
    from pathlib import Path

    from tileprobe.schema import load
    recs, _ = load(str(Path(__file__).parent / "data" / "examples_records_2026-12-01.json"), judge=judge_records)
    judge_records(recs)
    lines = [line for line in advice(recs) if line.startswith("tilegym_persistent_matmul_clusters sm_90 ")]
    assert ("tilegym_persistent_matmul_clusters sm_90 tileiras 13.4.92 num_ctas=4: occupancy 1: 1 CTA/SM, 255 "
            "registers, 140,624 B shared, no spills, 30 clusters of 4 resident on H200 (occupancy 1 needs 33); "
            "occupancy 2: 2 CTAs/SM, 128 registers, 116,000 B shared, no spills, 62 clusters of 4 resident on H200 "
            "(occupancy 2 needs 66) — 2 different builds: which is fastest must be measured, static facts do not "
            "rank them: `tileprobe run examples/tilegym_persistent_matmul.py --arch sm_90 --where num_ctas=4`") in lines
    same = [line for line in advice(recs) if line.startswith("tilegym_matmul sm_90 tileiras 13.4.92 TILE=256×256×64 "
                                                             "num_ctas=1:")]
    assert same == ["tilegym_matmul sm_90 tileiras 13.4.92 TILE=256×256×64 num_ctas=1: occupancy 1 = 2 (identical "
                    "machine code): 1 CTA/SM, 255 registers, 165,048 B shared, spills (1791 LDL/1591 STL, 6392 B "
                    "stack) — one build for every value that launches: take the lowest, occupancy 1; the others "
                    "change nothing"]


def test_advice_for_a_selection_weighs_every_value_of_its_group():
    """`audit --where occupancy=2` advised 'static pick: occupancy 2' (and with occupancy=1 'no value is met'):
    the advice was worked out from the shown rows alone (a tester, 2026-12-01)."""
    recs = _records(run=False)
    label = "rms_norm_large sm_90 tileiras 13.4.92 ALLOW_TMA=True"
    whole = [line for line in advice(recs) if line.startswith(label + ":")]
    shown = [r for r in recs if r.case["ALLOW_TMA"] and r.hints["occupancy"] == 2]
    paste = [line for line in advice(recs, shown) if "(paste into a configuration list)" in line]
    assert [line for line in advice(recs, shown) if line not in paste] == whole
    assert whole[0].startswith(f"{label}: occupancy 1: 1 CTA/SM, ")
    assert paste and "'ALLOW_TMA': False" not in paste[0]          # the selected group's builds only
    assert whole[0].endswith("4 different builds: which is fastest must be measured, static facts do not rank them: "
                             "`tileprobe run examples/rms_norm_large.py --arch sm_90 --where ALLOW_TMA=True`")
    assert advice(shown)[0].startswith(f"{label}: occupancy 2: 2 CTAs/SM, ")     # what the selection alone said
    shown = [r for r in recs if r.case["ALLOW_TMA"] and r.hints["occupancy"] == 1]
    assert advice(recs, shown)[:len(whole)] == whole            # not "no occupancy value is met"
    assert advice(recs, []) == []

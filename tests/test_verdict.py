"""Verdict rules on hand-made records (numbers worked out from cuda_occupancy.h rules)."""
from tileprobe.judge.advice import max_regs_for, max_smem_for, what_it_takes
from tileprobe.judge.verdict import assign_verdicts
from tileprobe.model.arch import get_arch
from tileprobe.schema import VariantRecord, Verdict


def rec(occ, threads, regs, smem, ctas, code, arch="sm_120", case=None, limiter="registers", **kw):
    return VariantRecord(kernel="k", probe="p.py", case=case or {"C": 1}, hints={"occupancy": occ}, arch=arch,
                         tileiras="V13.4.92", status="ok", threads=threads, registers=regs, shared_bytes=smem,
                         driver_shared_bytes=smem, stack_bytes=0, ctas_per_sm=ctas, limiter=limiter,
                         code_sha256=code, **kw)


def test_ignored_when_same_code_as_another_value():
    rows = [rec(1, 384, 168, 100484, 1, "A"), rec(2, 384, 168, 100484, 1, "A"), rec(4, 384, 168, 100484, 1, "A")]
    assign_verdicts(rows, ["occupancy"])
    assert [r.verdicts["occupancy"].status for r in rows] == ["met", "ignored", "ignored"]
    reason = rows[1].verdicts["occupancy"].reason
    assert "same machine code and resources as occupancy=1" in reason
    assert "2 CTAs/SM would need ≤ 80 registers per thread (has 168)" in reason


def test_honoured_partial_and_code_changed_without_residency():
    rows = [rec(1, 256, 255, 1000, 1, "A", arch="sm_90"), rec(2, 256, 128, 1000, 2, "B", arch="sm_90"),
            rec(4, 256, 96, 1000, 2, "C", arch="sm_90"), rec(8, 256, 255, 90000, 1, "D", arch="sm_90")]
    assign_verdicts(rows, ["occupancy"])
    st = [r.verdicts["occupancy"].status for r in rows]
    assert st == ["met", "honoured", "partial", "ignored"]
    assert "up from 1 at occupancy=1" in rows[2].verdicts["occupancy"].reason
    assert "8 CTAs/SM would need ≤ 32 registers per thread" in rows[3].verdicts["occupancy"].reason


def test_infeasible_by_threads_and_slots():
    rows = [rec(16, 256, 32, 2072, 8, "A", arch="sm_90", limiter="threads"),
            rec(32, 32, 32, 0, 32, "B", arch="sm_86")]
    assign_verdicts(rows, ["occupancy"])
    assert rows[0].verdicts["occupancy"].status == "infeasible"
    assert "16 × 256 threads = 4,096 > 2,048 threads per SM on sm_90" in rows[0].verdicts["occupancy"].reason
    assert rows[1].verdicts["occupancy"] == Verdict("infeasible", "32 CTAs/SM exceeds the 16 CTA slots per SM on sm_86")


def test_verdicts_are_per_case_and_compiler():
    a = rec(1, 256, 255, 0, 1, "A", case={"C": 1})
    b = rec(2, 256, 255, 0, 1, "A", case={"C": 2})   # different case: no twin for it
    assign_verdicts([a, b], ["occupancy"])
    assert "same machine code" not in b.verdicts["occupancy"].reason


def test_num_ctas_against_cluster_dims():
    def r(n, dims, arch="sm_90"):
        x = rec(1, 128, 64, 0, 4, "A", arch=arch)
        x.hints = {"num_ctas": n}
        x.cluster_dims = dims
        return x
    rows = [r(1, None), r(2, [2, 1, 1]), r(4, None), r(2, None, arch="sm_80")]
    assign_verdicts(rows, ["num_ctas"])
    assert [x.verdicts["num_ctas"].status for x in rows] == ["met", "honoured", "ignored", "infeasible"]


def test_explain_inverts_occupancy():
    sm120 = get_arch("sm_120")
    assert max_regs_for(sm120, 384, 1) == 168      # the one-CTA budget FIELD_NOTES saw in .maxnreg
    assert max_regs_for(sm120, 256, 2) == 128
    assert max_regs_for(get_arch("sm_90"), 256, 8) == 32
    assert max_smem_for(sm120, 2) == 50176             # (102400 // 2 - 1024) rounded down to 128 B
    r = rec(2, 384, 168, 100484, 1, "A")
    assert what_it_takes(r, 2) == ("2 CTAs/SM would need ≤ 80 registers per thread (has 168) and "
                                   "≤ 50,176 B shared per CTA (has 100,484)")


def test_tuple_and_list_case_values_are_one_group():
    """A fresh record holds a tuple case value, the same record read back from the store a list."""
    fresh = rec(2, 384, 168, 100484, 1, "A", case={"TILE": (64, 128)})
    stored = rec(1, 384, 168, 100484, 1, "A", case={"TILE": [64, 128]})
    assign_verdicts([fresh, stored], ["occupancy"])
    assert "same machine code and resources as occupancy=1" in fresh.verdicts["occupancy"].reason


def test_what_it_takes_quotes_shared_memory_as_the_table_does():
    """The table showed 165,048 B (the cubin's size) and the reason 164,024 B (the driver's); the
    reason now quotes the cubin's figure, and the limit in the same terms (the driver's limit + the 1 KB the
    sm_90 cubin includes)."""
    r = rec(2, 256, 128, 165_048, 1, "A")
    r.arch, r.driver_shared_bytes = "sm_90", 164_024
    text = what_it_takes(r, 2)
    assert "(has 165,048)" in text and "164,024" not in text
    assert f"≤ {max_smem_for(get_arch('sm_90'), 2) + 1024:,} B shared per CTA" in text


def test_the_hint_less_build_is_the_reference_and_reasons_name_it():
    """The TornadoVM report's probe, occupancy=[None, 2, 4, 8] on sm_89): occupancy 2 was "met … the
    lowest occupancy value audited: nothing shows the hint changed the code" beside a hint-less build with 118
    registers, 98,304 B and 1 CTA/SM; occupancy 2 had 255 registers, 38,912 B and new spills."""
    free = rec(None, 128, 118, 98_304, 1, "A", arch="sm_89", limiter="shared_memory")
    two = rec(2, 128, 255, 38_912, 2, "B", arch="sm_89")
    two.stack_bytes = 96
    four = rec(4, 128, 200, 38_912, 2, "C", arch="sm_89")
    eight = rec(8, 128, 118, 98_304, 1, "A", arch="sm_89", limiter="shared_memory")
    rows = [free, two, four, eight]
    assign_verdicts(rows, ["occupancy"])
    assert "occupancy" not in free.verdicts                      # nothing declared: no value to judge
    assert two.verdicts["occupancy"] == Verdict("honoured", (
        "2 CTAs/SM ≥ 2 (128 threads × 255 registers, 38,912 B shared; limiter: registers); vs the hint-less build: "
        "registers 118→255, shared B 98,304→38,912, stack B 0→96, CTAs/SM 1→2, new spills"))
    assert four.verdicts["occupancy"].status == "partial"      # up from the hint-less build's 1 CTA/SM
    assert "(up from 1 at the hint-less build)" in four.verdicts["occupancy"].reason
    assert eight.verdicts["occupancy"].reason.startswith("same machine code and resources as the hint-less build")
    assert all("nothing shows" not in r.verdicts["occupancy"].reason for r in rows if "occupancy" in r.verdicts)


def test_a_declared_value_is_the_hint_less_reference():
    """A kernel declaring occupancy 16 (ByTarget resolved for the arch): its hint-less build is judged with the
    declared value and is the others' reference; labels show ``16 (declared)``, not ``None``."""
    from tileprobe.report.common import variant_label
    free = rec(None, 256, 32, 2072, 8, "A", arch="sm_90", limiter="threads")
    free.effective_hints = {"occupancy": 16}
    one = rec(1, 256, 255, 2072, 1, "B", arch="sm_90")
    rows = [one, free]
    assign_verdicts(rows, ["occupancy"])
    assert free.verdicts["occupancy"].status == "infeasible"     # 16 × 256 threads > 2,048
    assert one.verdicts["occupancy"].status == "met"      # the hint-less build already has 8 CTAs/SM ≥ 1
    assert one.verdicts["occupancy"].reason.endswith(
        "already met by the hint-less build (declared occupancy=16) at 8 CTAs/SM; the hint changed "
        "registers 32→255, CTAs/SM 8→1")
    assert variant_label(free) == "C=1 occupancy=16 (declared)"


def test_without_a_hint_less_build_the_lowest_value_says_what_is_not_known():
    rows = [rec(1, 256, 255, 1000, 1, "A", arch="sm_90"), rec(2, 256, 128, 1000, 2, "B", arch="sm_90")]
    assign_verdicts(rows, ["occupancy"])
    assert rows[0].verdicts["occupancy"].reason.endswith(
        "the lowest occupancy value audited, the reference of the others; no hint-less build audited (add None to "
        "the probe's occupancy values to compare with it)")
    same = [rec(1, 256, 255, 1000, 1, "A", arch="sm_90"), rec(2, 256, 255, 1000, 1, "A", arch="sm_90")]
    assign_verdicts(same, ["occupancy"])
    assert same[0].verdicts["occupancy"].reason.endswith("nothing shows the hint changed the code")


def test_hints_without_a_goal_take_the_hint_less_build_as_baseline():
    def opt(level, code, regs):
        r = rec(1, 256, regs, 0, 1, code, arch="sm_90")
        r.hints = {"opt_level": level}
        r.effective_hints = {"opt_level": 3 if level is None else level}
        return r
    rows = [opt(None, "A", 128), opt(1, "B", 96), opt(3, "A", 128)]
    assign_verdicts(rows, ["opt_level"])
    assert [r.verdicts["opt_level"].status for r in rows] == ["baseline", "changed", "unchanged"]
    assert rows[1].verdicts["opt_level"].reason == "vs the hint-less build (declared opt_level=3): registers 128→96"
    assert rows[2].verdicts["opt_level"].reason == ("same machine code and resources as the hint-less build "
                                                       "(declared opt_level=3)")


# --- what the hint did: met by the hint-less build, partial before ignored, a declared value --------------------
# RMSNorm (unsloth's, TileGym 1.5.1) N_COLS=5120 on sm_120 under 13.4.92: the hint-less build already has 126
# registers and 4 CTAs/SM; occupancy=4 only moves registers to 128, still 4 CTAs/SM.
def test_a_goal_the_hint_less_build_already_met_is_met_not_honoured():
    from tileprobe.analyses.gate import check
    free, four = rec(None, 128, 126, 0, 4, "A"), rec(4, 128, 128, 0, 4, "B")
    assign_verdicts([free, four], ["occupancy"])
    v = four.verdicts["occupancy"]
    assert v.status == "met"
    assert v.reason.endswith("already met by the hint-less build at 4 CTAs/SM; the hint changed registers 126→128")
    (f,) = check([four], ["occupancy took effect"])          # the hint bought nothing toward its goal
    assert f.got == "met"
    assert check([four], ["occupancy honoured"]) == []       # the goal itself is met


def test_a_hint_that_reaches_the_goal_the_reference_missed_is_honoured():
    free, four = rec(None, 128, 160, 0, 3, "A"), rec(4, 128, 128, 0, 4, "B")
    assign_verdicts([free, four], ["occupancy"])
    assert four.verdicts["occupancy"].status == "honoured"
    assert four.verdicts["occupancy"].reason.endswith("vs the hint-less build: registers 160→128, CTAs/SM 3→4")


def test_same_code_as_another_value_but_up_from_the_reference_is_partial():
    """moe / tiled matmul on sm_90: occupancy 4 builds occupancy 2's code (2 CTAs/SM) against a 1-CTA/SM reference."""
    rows = [rec(None, 256, 255, 1000, 1, "A", arch="sm_90"), rec(2, 256, 128, 1000, 2, "B", arch="sm_90"),
            rec(4, 256, 128, 1000, 2, "B", arch="sm_90")]
    assign_verdicts(rows, ["occupancy"])
    v = rows[2].verdicts["occupancy"]
    assert v.status == "partial"
    assert v.reason.startswith("2 CTAs/SM (up from 1 at the hint-less build) but < 4")
    assert "same machine code and resources as occupancy=2" in v.reason


def test_a_declared_hint_on_the_hint_less_build_is_compared_with_the_explicit_builds():
    """A kernel declaring occupancy=16 on sm_100: the hint-less build gets 46 registers and 10 CTAs/SM, the
    explicit builds 90 registers and 5 CTAs/SM."""
    free = rec(None, 128, 46, 0, 10, "A", arch="sm_100")
    free.effective_hints = {"occupancy": 16}
    rows = [free, rec(8, 128, 90, 0, 5, "B", arch="sm_100"), rec(16, 128, 90, 0, 5, "B", arch="sm_100")]
    assign_verdicts(rows, ["occupancy"])
    reason = free.verdicts["occupancy"].reason
    assert free.verdicts["occupancy"].status == "ignored"
    assert reason.endswith("the explicit builds: occupancy=16: 5 CTAs/SM, 90 registers (other machine code); "
                           "occupancy=8: 5 CTAs/SM, 90 registers (other machine code)")

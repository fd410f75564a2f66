"""The cluster model (tileprobe/model/cluster.py): the distinct-SM rule on known layouts, the H200's 74 driver answers
as golden data, its bounds against brute force where the layout is unknown, and cluster-aware verdicts for a
FlashInfer-like persistent GEMM (num_ctas 1, 2 × occupancy 1, 2, 4, 8 on sm_90 and sm_100)."""
import itertools
import json
import os

import pytest

from tileprobe.errors import TileprobeError
from tileprobe.judge.verdict import judge_records
from tileprobe.model.arch import get_arch
from tileprobe.model.cluster import (
    H200_MEASURED,
    H200_MEASURED_SMS_PER_GPC,
    HOPPER_WHITEPAPER,
    REFERENCE_GPUS,
    GpuLayout,
    active_clusters,
    cluster_note,
    cluster_size,
    ctas_per_sm_for_goal,
    max_active_clusters,
    max_cluster_size,
)
from tileprobe.model.occupancy import theoretical_occupancy
from tileprobe.schema import VariantRecord

H100_LIKE = (18, 18, 18, 16, 16, 16, 16, 14)      # 132 SMs: one possible die
CHECK = os.path.join(os.path.dirname(__file__), "..", "docs", "gpu", "2026-12-01", "cluster_check.json")


def _check():
    with open(CHECK, encoding="utf-8") as f:
        return json.load(f)


ROWS = _check()["rows"]


def test_known_layouts_and_where_the_naive_count_is_wrong():
    assert max_active_clusters(H100_LIKE, 1, 16) == 7           # the 14-SM GPC holds none; naive 132 // 16 = 8
    assert max_active_clusters(H100_LIKE, 3, 8) == 47           # 6+6+6 + 6×4 + floor(42/8)=5; naive 49
    assert max_active_clusters(H100_LIKE, 2, 2) == 132          # 2 CTAs/SM in pairs: every layout, every SM
    assert max_active_clusters((17, 15), 1, 2) == 8 + 7         # odd GPCs lose an SM each; naive 16
    # distinct SMs: 8 SMs never hold a cluster of 16, even with room for 16 CTAs; 2 SMs never one of 4
    assert max_active_clusters((8,), 1, 16) == 0 and max_active_clusters((8,), 2, 16) == 0
    assert max_active_clusters((2,), 3, 4) == 0 and max_active_clusters((4,), 3, 4) == 3
    assert cluster_size([2, 1, 1]) == 2 and cluster_size((2, 2, 2)) == 8 and cluster_size(None) == 1
    with pytest.raises(TileprobeError):
        max_active_clusters(H100_LIKE, 1, 0)


# --- golden data: cuOccupancyMaxActiveClusters on the H200, 2026-12-01 (docs/gpu/2026-12-01/cluster_check.json) ---

def test_the_measured_layout_is_the_one_in_the_check():
    check = _check()
    assert tuple(check["layout"]["sms_per_gpc"]) == H200_MEASURED_SMS_PER_GPC == H200_MEASURED.sms_per_gpc
    assert check["gpu"]["name"] == "NVIDIA H200" and check["gpu"]["sms"] == 132 == sum(H200_MEASURED_SMS_PER_GPC)
    assert REFERENCE_GPUS["sm_90"] is H200_MEASURED
    assert len(ROWS) == 74 and sum(r["kind"] == "divergent" for r in ROWS) == 12


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['kind']}-{i}-k{r['size']}" for i, r in enumerate(ROWS)])
def test_model_reproduces_the_driver_on_the_h200(row):
    """Every row: per-CTA residency from the driver's registers and shared bytes, then the resident clusters of
    the distinct-SM rule on the measured layout, equal to what cuOccupancyMaxActiveClusters said."""
    occ = theoretical_occupancy(get_arch("sm_90"), row["threads"], row["regs"],
                                row["static_smem"] + row["dyn_smem_bytes"])
    assert occ.ctas_per_sm == row["ctas_per_sm"]
    assert max_active_clusters(H200_MEASURED_SMS_PER_GPC, occ.ctas_per_sm, row["size"]) == row["clusters"]
    assert active_clusters(H200_MEASURED, occ.ctas_per_sm, row["size"]).low == row["clusters"]


def test_the_earlier_rule_missed_22_of_the_74_rows():
    """Σ ⌊s × c ÷ k⌋ over every group (no distinct-SM condition) matched 52 of 74: it lets groups smaller than the
    cluster hold clusters with two CTAs of one cluster on one SM."""
    pooled = [sum(s * r["ctas_per_sm"] // r["size"] for s in H200_MEASURED_SMS_PER_GPC) for r in ROWS]
    assert sum(p == r["clusters"] for p, r in zip(pooled, ROWS)) == 52
    assert all(p > r["clusters"] for p, r in zip(pooled, ROWS) if p != r["clusters"])
    # joined into one 16-SM GPC, the group of 8 and the four pairs would give 98 clusters of 4 at 3 CTAs/SM
    joined = (18, 18, 16, 16, 16, 16, 16, 16)
    row = next(r for r in ROWS if r["kind"] == "divergent" and r["size"] == 4 and r["ctas_per_sm"] == 3)
    assert max_active_clusters(joined, 3, 4) == 98 and row["clusters"] == 92


# --- unknown layouts: ranges --------------------------------------------------------------------------------------

def _brute_force(num_sms, num_gpcs, max_per_gpc, step, ctas, size):
    counts = [max_active_clusters(layout, ctas, size)
              for layout in itertools.combinations_with_replacement(range(0, max_per_gpc + 1, step), num_gpcs)
              if sum(layout) == num_sms]
    return min(counts), max(counts)


@pytest.mark.parametrize("ctas, size", [(1, 16), (1, 8), (1, 4), (3, 8), (3, 16), (5, 16), (7, 16), (1, 2), (3, 2),
                                        (2, 16), (3, 4)])
def test_whitepaper_bounds_equal_brute_force_over_every_allowed_layout(ctas, size):
    count = active_clusters(HOPPER_WHITEPAPER, ctas, size)
    assert (count.low, count.high) == _brute_force(132, 8, 18, 2, ctas, size)
    assert count.naive == 132 * ctas // size


def test_range_texts_say_what_they_rest_on():
    h = HOPPER_WHITEPAPER
    assert active_clusters(h, 1, 16).text() == (
        "clusters of 16: 5–8 active on H100 SXM5/H200 (132 SMs in 8 GPCs of ≤ 18 SMs) (range over the GPC "
        "layouts its SM and TPC counts allow; its own layout is not published); at most 128 CTAs resident in "
        "clusters (0.97 per SM), fewer than the 132 of 1 CTA/SM on all 132 SMs")
    assert active_clusters(h, 1, 2).text() == ("clusters of 2: 66 active on H100 SXM5/H200 (132 SMs in 8 GPCs of "
                                               "≤ 18 SMs) (the same on every GPC layout its SM and TPC counts allow)")
    # the measured die is outside the whitepaper's family (12 groups, not 8 GPCs): 92 is below its 95–98
    assert (active_clusters(h, 3, 4).low, active_clusters(h, 3, 4).high) == (95, 98)
    b200 = REFERENCE_GPUS["sm_100"]
    # B200: 8 GPCs of ≤ 20 SMs or 10 of ≤ 16, SMs in TPCs of 2 ([b200]): every GPC has an even SM count, so
    # clusters of 2 fill all 148 SMs (it was 0–74, from GPCs of one SM no real part has)
    assert (active_clusters(b200, 1, 2).low, active_clusters(b200, 1, 2).high) == (74, 74)
    assert active_clusters(b200, 1, 2).text() == (
        "clusters of 2: 74 active on B200 (148 SMs in 8 GPCs of ≤ 20 or 10 GPCs of ≤ 16 SMs, TPCs of 2) (the same "
        "on every GPC layout its SM and TPC counts allow; figures: [b200] in tileprobe/model/cluster.py)")
    assert (active_clusters(b200, 2, 2).low, active_clusters(b200, 2, 2).high) == (148, 148)
    # clusters of 4 depend on GPC sizes mod 4: 10 GPCs of 14–16 SMs, or 8 of 18–20
    assert (active_clusters(b200, 1, 4).low, active_clusters(b200, 1, 4).high) == (34, 37)
    c = active_clusters(H200_MEASURED, 1, 16)
    assert (c.low, c.high, c.naive) == (7, 7, 8)
    assert c.text() == (
        "clusters of 16: 7 active on H200 (132 SMs in groups of 18/18/16/16/16/16/16/8/2/2/2/2 SMs) (layout "
        "measured on one H200, 2026-12-01; other H100/H200 dies may group their SMs differently); the naive "
        "132 × 1 ÷ 16 = 8 overcounts; at most 112 CTAs resident in clusters (0.85 per SM), fewer than the 132 of "
        "1 CTA/SM on all 132 SMs")
    with pytest.raises(TileprobeError, match="sums to 130, not num_sms 132"):
        GpuLayout("x", "sm_90", 132, 8, 18, 2, "typo", (18, 18, 18, 16, 16, 16, 14, 14))


def test_goal_in_clusters_and_the_residency_it_takes():
    """occupancy N in clusters of k: N × ⌊SMs ÷ k⌋ clusters resident (a persistent grid in one wave)."""
    four = active_clusters(H200_MEASURED, 1, 4)
    assert four.clusters_for(1) == 33 and four.low == 30 and four.goal_met(1) is False
    assert active_clusters(H200_MEASURED, 2, 2).goal_met(2) is True            # pairs fill every group
    assert ctas_per_sm_for_goal(H200_MEASURED, 4, 1, 8) == 2                   # 62 ≥ 33
    assert ctas_per_sm_for_goal(H200_MEASURED, 4, 2, 8) == 3                   # 62 < 66 ≤ 92
    assert ctas_per_sm_for_goal(H200_MEASURED, 16, 2, 2) is None               # 14 < 16 at the most 2 CTAs/SM
    b200 = active_clusters(REFERENCE_GPUS["sm_100"], 1, 8)
    assert b200.clusters_for(1) == 18 and b200.goal_met(1) is None             # 0–18: depends on the layout
    assert active_clusters(REFERENCE_GPUS["sm_100"], 1, 16).goal_met(2) is False   # at most 9 of 18


def test_cluster_size_limits_per_arch():
    assert max_cluster_size("sm_80")[0] == 1
    assert max_cluster_size("sm_90") == (16, "[hopper-tg] H100: up to 16 with "
                                               "cudaFuncAttributeNonPortableClusterSizeAllowed")
    assert max_cluster_size("sm_100")[0] == 16
    assert max_cluster_size("sm_120") == (8, "portable maximum ([guide]); a larger non-portable size is not "
                                             "sourced for sm_120")
    assert "the launch needs cudaFuncAttributeNonPortableClusterSizeAllowed" in cluster_note("sm_90", 1, 16)
    assert cluster_note("sm_120", 1, 16).startswith("clusters of 16 are above the portable 8; whether sm_120 runs "
                                                    "them is not sourced")
    assert cluster_note("sm_90", 4, 1) == ""


# --- a FlashInfer-like persistent GEMM --------------------------------------------------------------------------
# Numbers from `tileprobe audit examples/tilegym_persistent_matmul.py --arch sm_90,sm_100` (tileiras 13.4.92,
# 2026-12-01; TileGym's static persistent matmul, tile 128×128×64): (arch, num_ctas, occupancy) → threads,
# registers, cubin shared bytes, stack bytes, CTAs/SM, machine-code id (equal ids: the same machine code).
PM = {
    ("sm_90", 1, 1): (255, 197_784, 0, 1, "a"), ("sm_90", 1, 2): (128, 115_816, 152, 2, "b"),
    ("sm_90", 1, 4): (128, 115_816, 152, 2, "b"), ("sm_90", 1, 8): (255, 197_784, 0, 1, "a"),
    ("sm_90", 2, 1): (255, 148_704, 0, 1, "c"), ("sm_90", 2, 2): (128, 115_912, 24, 2, "d"),
    ("sm_90", 2, 4): (128, 115_912, 24, 2, "d"), ("sm_90", 2, 8): (255, 148_704, 0, 1, "c"),
    ("sm_100", 1, 1): (255, 230_628, 0, 1, "e"), ("sm_100", 1, 2): (128, 115_860, 0, 2, "f"),
    ("sm_100", 1, 4): (64, 50_260, 0, 4, "g"), ("sm_100", 1, 8): (255, 230_628, 0, 1, "e"),
    ("sm_100", 2, 1): (255, 107_788, 0, 1, "h"), ("sm_100", 2, 2): (128, 107_788, 0, 2, "i"),
    ("sm_100", 2, 4): (64, 50_348, 0, 4, "j"), ("sm_100", 2, 8): (64, 50_348, 0, 4, "j"),
}


def _pm(arch, n, occ, smem=None, ctas=None):
    regs, shared, stack, c, code = PM[(arch, n, occ)]
    shared = smem or shared
    return VariantRecord(kernel="persistent_gemm", probe="pm.py", case={}, hints={"num_ctas": n, "occupancy": occ},
                         arch=arch, tileiras="V13.4.92", status="ok", threads=256, registers=regs,
                         shared_bytes=shared, driver_shared_bytes=shared - 1024, stack_bytes=stack,
                         ctas_per_sm=ctas or c, limiter="registers", code_sha256=code,
                         cluster_dims=[n, 1, 1] if n > 1 else None)


@pytest.fixture(scope="module")
def pm():
    recs = [_pm(a, n, o) for a, n, o in PM]
    judge_records(recs)
    return {(r.arch, r.hints["num_ctas"], r.hints["occupancy"]): r.verdicts for r in recs}


def test_persistent_gemm_statuses_say_what_happened(pm):
    got = {k: (v["num_ctas"].status, v["occupancy"].status) for k, v in pm.items()}
    for arch in ("sm_90", "sm_100"):
        assert got[(arch, 1, 1)] == ("met", "met")            # the reference values
        assert got[(arch, 1, 8)] == ("met", "ignored")        # occupancy 8 gives occupancy 1's machine code
    assert got[("sm_90", 2, 1)] == ("honoured", "met") and got[("sm_90", 1, 2)] == ("met", "honoured")
    # occupancy 4 builds occupancy 2's code (2 CTAs/SM < 4), up from 1 CTA/SM at the reference: partial, and the
    # reason still says which value's code it is (the moe / tiled matmul case on sm_90)
    assert got[("sm_90", 2, 4)] == ("honoured", "partial") and got[("sm_90", 1, 4)] == ("met", "partial")
    four = pm[("sm_90", 1, 4)]["occupancy"].reason
    assert four.startswith("2 CTAs/SM (up from 1 at occupancy=1) but < 4")
    assert "same machine code and resources as occupancy=2" in four
    # on sm_100 the B200's GPC layout (clusters) and the reserve reading (115,860 B) decide these
    # clusters of 2 on the B200 are 74 × CTAs/SM on every layout [b200] allows: occupancy 1 is met, no longer
    # unverified on a GPC layout; occupancy 2 still rests on the reserve reading (115,860 B)
    assert got[("sm_100", 2, 1)] == ("honoured", "met") and got[("sm_100", 1, 2)] == ("met", "unverified")
    assert got[("sm_100", 2, 4)] == ("honoured", "honoured")       # 296 clusters of 2 on every B200 layout
    assert "same machine code and resources as occupancy=1" in pm[("sm_90", 1, 8)]["occupancy"].reason


def test_persistent_gemm_cluster_reasons(pm):
    one_per_sm = pm[("sm_90", 2, 1)]["num_ctas"].reason
    assert one_per_sm.startswith("cluster 2×1×1 = 2 CTA(s); 1 CTA/SM per CTA residency, clusters of 2: 66 active "
                                 "on H200 (132 SMs in groups of 18/18/16/16/16/16/16/8/2/2/2/2 SMs) (layout measured "
                                 "on one H200, 2026-12-01")
    sm100 = pm[("sm_100", 2, 1)]["occupancy"].reason
    assert sm100.startswith("1 CTA/SM ≥ 1")
    assert "clusters of 2: 74 active on B200 (148 SMs in 8 GPCs of ≤ 20 or 10 GPCs of ≤ 16 SMs, TPCs of 2)" in sm100
    assert "clusters of 2: 296 active on B200" in pm[("sm_100", 2, 4)]["occupancy"].reason


# clusters of 4 on sm_90 (examples/tilegym_persistent_matmul.py, probe tilegym_persistent_matmul_clusters, audited
# 2026-12-01): occupancy 1 → 255 registers, 140,624 B shared, 1 CTA/SM; occupancy 2 → 128 registers, 116,000 B, 2.
def _clusters4(occ):
    regs, shared, ctas, code = {1: (255, 140_624, 1, "k1"), 2: (128, 116_000, 2, "k2")}[occ]
    return VariantRecord(kernel="pm4", probe="pm.py", case={}, hints={"num_ctas": 4, "occupancy": occ}, arch="sm_90",
                         tileiras="V13.4.92", status="ok", threads=256, registers=regs, shared_bytes=shared,
                         driver_shared_bytes=shared - 1024, stack_bytes=0, ctas_per_sm=ctas, limiter="registers",
                         code_sha256=code, cluster_dims=[4, 1, 1])


def test_clusters_of_4_on_the_h200_fall_short_of_the_grid_occupancy_sizes():
    """TileGym launches min(132 // 4, tiles) × occupancy = 33 × N clusters; 30 (N=1) and 62 (N=2) are resident."""
    recs = [_clusters4(1), _clusters4(2)]
    judge_records(recs)
    one, two = (r.verdicts["occupancy"] for r in recs)
    assert one.status == "ignored" and two.status == "partial"
    assert one.reason.startswith("1 CTA/SM per CTA, but 30 clusters are resident, fewer than the 33 clusters of 4 "
                                    "needed for 1 CTA per SM (1 × ⌊132 ÷ 4⌋) (0.91 CTAs per SM on average); 33 "
                                    "clusters of 4 are resident on H200 from 2 CTAs/SM per CTA: 2 CTAs/SM would need "
                                    "≤ 128 registers per thread (has 255)")
    assert "62 clusters are resident, fewer than the 66 clusters of 4 needed for 2 CTAs per SM" in two.reason
    assert "up from 30 clusters at occupancy=1" in two.reason
    assert "66 clusters of 4 are resident on H200 from 3 CTAs/SM per CTA: 3 CTAs/SM would need ≤ 80 registers" \
        in two.reason
    assert {r.verdicts["num_ctas"].status for r in recs} == {"met"}   # the cluster shape asked (the only value)


def test_clusters_that_no_cta_of_this_size_can_fill_are_infeasible():
    r = _clusters4(2)
    r.hints, r.cluster_dims, r.threads = {"num_ctas": 16, "occupancy": 2}, [16, 1, 1], 1024
    judge_records([r])
    v = r.verdicts["occupancy"]
    assert v.status == "infeasible"
    assert v.reason.startswith("2 CTAs/SM per CTA, but 14 clusters are resident, fewer than the 16 clusters of 16 "
                                  "needed for 2 CTAs per SM (2 × ⌊132 ÷ 16⌋)")
    assert v.reason.endswith("not even at 2 CTAs/SM, the most of 1024 threads an SM holds")


def test_persistent_gemm_reserve_dependence(pm):
    sm100 = pm[("sm_100", 1, 2)]["occupancy"].reason
    assert ("the verdict rests on the reserve reading (within 1 KB per CTA of a boundary): 2 CTAs/SM reads the "
            "cubin's 115,860 B as including the 1 KB reserve; counted on top, 2 × (115,860 + 1,024) = 233,768 B "
            "(233,984 B in 128-B units) > 233,472 B per SM → 1 CTA/SM") in sm100
    assert "shared-memory reserve on sm_100: cubin layout only, not driver-checked" in sm100
    sm90 = pm[("sm_90", 2, 2)]["occupancy"].reason
    assert "shared-memory reserve on sm_90: driver-checked on H200 2026-11-29" in sm90
    assert "reserve" not in pm[("sm_100", 2, 2)]["occupancy"].reason     # 107,788 B: far from the boundary


def test_flashinfer_4465_numbers_name_the_explanation_the_verdict_rests_on():
    """FlashInfer #4465: num_ctas=2, occupancy=2 on sm_100, 115,852 B shared per CTA. tileprobe reads 2 CTAs/SM;
    the verdict rests on the reserve reading, and on the B200's GPC layout, which is not sourced (a group of fewer SMs
    than the cluster holds none of its clusters: the distinct-SM rule measured on the H200); both are named."""
    recs = [_pm("sm_100", 2, 1), _pm("sm_100", 2, 2, smem=115_852)]
    judge_records(recs)
    v = recs[1].verdicts["occupancy"]
    assert v.status == "unverified"        # was honoured, on two readings no driver has checked
    # the reserve reading alone decides it now: clusters of 2 fill every GPC a real B200 can have (148 at 2 CTAs/SM)
    assert v.reason.startswith("honoured by readings no driver has checked — the cubin's shared size read as "
                                  "including the 1 KB per-CTA reserve (from the cubin's layout; no driver has checked "
                                  "it on sm_100): the other reading gives 1 CTA/SM, short of 2 — 2 CTAs/SM ≥ 2")
    assert "clusters of 2: 148 active on B200 (148 SMs in 8 GPCs of ≤ 20 or 10 GPCs of ≤ 16 SMs" in v.reason
    assert "per-CTA residency counted" not in v.reason
    assert "2 × (115,852 + 1,024) = 233,752 B (233,984 B in 128-B units) > 233,472 B per SM → 1 CTA/SM" in v.reason
    assert "(then clusters of 2: 74 active on B200" in v.reason
    assert "cubin layout only, not driver-checked" in v.reason

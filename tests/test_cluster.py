"""The cluster model (tileprobe/cluster.py) on known layouts, its bounds against brute force, and cluster-aware
verdicts for a FlashInfer-like persistent GEMM (num_ctas 1, 2 × occupancy 1, 2, 4, 8 on sm_90 and sm_100)."""
import itertools

import pytest

from tileprobe.model.cluster import (REFERENCE_GPUS, GpuLayout, active_clusters, cluster_note, cluster_size,
                               max_active_clusters, max_cluster_size)
from tileprobe.errors import TileprobeError
from tileprobe.schema import VariantRecord
from tileprobe.audit.verdict import judge_records

H100_LIKE = (18, 18, 18, 16, 16, 16, 16, 14)      # 132 SMs: one possible die


def test_known_layouts_and_where_the_naive_count_is_wrong():
    assert max_active_clusters(H100_LIKE, 1, 16) == 7           # the 14-SM GPC holds none; naive 132 // 16 = 8
    assert max_active_clusters(H100_LIKE, 3, 8) == 47           # 6+6+6 + 6×4 + floor(42/8)=5; naive 49
    assert max_active_clusters(H100_LIKE, 2, 2) == 132          # 2 CTAs/SM in pairs: every layout, every SM
    assert max_active_clusters((17, 15), 1, 2) == 8 + 7         # odd GPCs lose an SM each; naive 16
    assert max_active_clusters((8,), 1, 16) == 0 and max_active_clusters((8,), 2, 16) == 1
    assert cluster_size([2, 1, 1]) == 2 and cluster_size((2, 2, 2)) == 8 and cluster_size(None) == 1
    with pytest.raises(TileprobeError):
        max_active_clusters(H100_LIKE, 1, 0)


def _brute_force(num_sms, num_gpcs, max_per_gpc, step, ctas, size):
    counts = [sum(s * ctas // size for s in layout)
              for layout in itertools.combinations_with_replacement(range(0, max_per_gpc + 1, step), num_gpcs)
              if sum(layout) == num_sms]
    return min(counts), max(counts)


@pytest.mark.parametrize("ctas, size", [(1, 16), (1, 8), (1, 4), (3, 8), (3, 16), (5, 16), (7, 16), (1, 2), (3, 2)])
def test_h100_h200_bounds_equal_brute_force_over_every_allowed_layout(ctas, size):
    gpu = REFERENCE_GPUS["sm_90"]
    count = active_clusters(gpu, ctas, size)
    assert (count.low, count.high) == _brute_force(132, 8, 18, 2, ctas, size)
    assert count.naive == 132 * ctas // size


def test_range_texts_say_what_they_rest_on():
    h = REFERENCE_GPUS["sm_90"]
    assert active_clusters(h, 1, 16).text() == (
        "clusters of 16: 5–8 active on H100 SXM5/H200 (132 SMs in 8 GPCs of ≤ 18 SMs) (range over the GPC "
        "layouts its SM and TPC counts allow; its own layout is not published); at most 128 CTAs resident in "
        "clusters, fewer than the 132 of 1 CTA/SM on all 132 SMs")
    assert active_clusters(h, 1, 2).text() == ("clusters of 2: 66 active on H100 SXM5/H200 (132 SMs in 8 GPCs of "
                                               "≤ 18 SMs) (the same on every GPC layout its SM and TPC counts allow)")
    b200 = REFERENCE_GPUS["sm_100"]
    assert (active_clusters(b200, 1, 2).low, active_clusters(b200, 1, 2).high) == (0, 74)
    assert "GPC layout not sourced" in active_clusters(b200, 1, 2).text()
    assert active_clusters(b200, 2, 2).exact and active_clusters(b200, 2, 2).low == 148
    measured = GpuLayout("H200 #0", "sm_90", 132, 8, 18, 2, "measured", H100_LIKE)
    c = active_clusters(measured, 1, 16)
    assert (c.low, c.high, c.naive) == (7, 7, 8)
    assert c.text().endswith("the naive 132 × 1 ÷ 16 = 8 overcounts; at most 112 CTAs resident in clusters, fewer "
                             "than the 132 of 1 CTA/SM on all 132 SMs")
    with pytest.raises(TileprobeError, match="sums to 130, not num_sms 132"):
        GpuLayout("x", "sm_90", 132, 8, 18, 2, "typo", (18, 18, 18, 16, 16, 16, 14, 14))


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
    got = {k: (v["num_ctas"]["status"], v["occupancy"]["status"]) for k, v in pm.items()}
    for arch in ("sm_90", "sm_100"):
        assert got[(arch, 1, 1)] == ("met", "met")            # the reference values
        assert got[(arch, 2, 1)] == ("honoured", "met")
        assert got[(arch, 1, 2)] == ("met", "honoured")
        assert got[(arch, 1, 8)] == ("met", "ignored")        # occupancy 8 gives occupancy 1's machine code
    assert got[("sm_90", 2, 4)] == ("honoured", "ignored") and got[("sm_100", 2, 4)] == ("honoured", "honoured")
    assert "same machine code and resources as occupancy=1" in pm[("sm_90", 1, 8)]["occupancy"]["reason"]


def test_persistent_gemm_cluster_reasons(pm):
    one_per_sm = pm[("sm_90", 2, 1)]["num_ctas"]["reason"]
    assert one_per_sm.startswith("cluster 2×1×1 = 2 CTA(s); 1 CTA/SM per CTA residency, clusters of 2: 66 active "
                                 "on H100 SXM5/H200 (132 SMs in 8 GPCs of ≤ 18 SMs)")
    assert "clusters of 2: 0–74 active on B200 (148 SMs) (GPC layout not sourced)" in pm[("sm_100", 2, 1)][
        "occupancy"]["reason"]
    assert "clusters of 2: 296 active on B200" in pm[("sm_100", 2, 4)]["occupancy"]["reason"]


def test_persistent_gemm_reserve_dependence(pm):
    sm100 = pm[("sm_100", 1, 2)]["occupancy"]["reason"]
    assert ("the verdict rests on the reserve reading (within 1 KB per CTA of a boundary): 2 CTAs/SM reads the "
            "cubin's 115,860 B as including the 1 KB reserve; counted on top, 2 × (115,860 + 1,024) = 233,768 B "
            "(233,984 B in 128-B units) > 233,472 B per SM → 1 CTA/SM") in sm100
    assert "shared-memory reserve on sm_100: cubin layout only, not driver-checked" in sm100
    sm90 = pm[("sm_90", 2, 2)]["occupancy"]["reason"]
    assert "shared-memory reserve on sm_90: driver-checked on H200 2026-11-29" in sm90
    assert "reserve" not in pm[("sm_100", 2, 2)]["occupancy"]["reason"]     # 107,788 B: far from the boundary


def test_flashinfer_4465_numbers_name_the_explanation_the_verdict_rests_on():
    """FlashInfer #4465: num_ctas=2, occupancy=2 on sm_100, 115,852 B shared per CTA. tileprobe reads 2 CTAs/SM;
    at 2 CTAs/SM clusters of 2 fill every SM on any GPC layout, so the verdict does not rest on per-GPC placement,
    only on the reserve reading; under the other reading (1 CTA/SM) the cluster count would rest on the GPC layout."""
    recs = [_pm("sm_100", 2, 1), _pm("sm_100", 2, 2, smem=115_852)]
    judge_records(recs)
    v = recs[1].verdicts["occupancy"]
    assert v["status"] == "honoured"
    assert "clusters of 2: 148 active on B200 (148 SMs) (2 CTAs/SM is a multiple of 2: the same on any GPC layout)" \
        in v["reason"]
    assert "2 × (115,852 + 1,024) = 233,752 B (233,984 B in 128-B units) > 233,472 B per SM → 1 CTA/SM" in v["reason"]
    assert "(then clusters of 2: 0–74 active on B200 (148 SMs) (GPC layout not sourced))" in v["reason"]
    assert "cubin layout only, not driver-checked" in v["reason"]

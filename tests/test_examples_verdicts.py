"""Verdicts that say what happened, on the bundled and TileGym probes (examples/*.py) as audited for sm_90, sm_100
and sm_120 on 2026-12-01 (tileiras 13.4.92; 189 variants, 12 compile errors: w4a16_gemm's FP4 on sm_90). The
records are ``tests/data/examples_records_2026-12-01.json`` (how it was made: its ``environment.note``); the
verdicts are judged here, with today's rules.

- No variant whose machine code and resources equal the reference value's (the lowest value of occupancy /
  num_ctas; the other value of allow_tma) is called ``honoured``.
- No hint is ``honoured`` without a goal it met (occupancy: CTAs/SM ≥ N and, for clusters on sm_90, N × ⌊132 ÷ size⌋
  clusters resident on the measured H200 layout; num_ctas: a cluster of N CTAs;
  allow_tma: TMA instructions present / absent).
- Hints without a goal are never honoured or ignored.
- A goal met or not by a rule no driver has checked (the 1 KB reserve on sm_100/sm_120; clusters on a GPC layout
  not sourced) is ``unverified``, never honoured or met.
"""
import os
from collections import Counter

import pytest

from tileprobe.judge.verdict import judge_records, tma_data_ops
from tileprobe.model.cluster import H200_MEASURED_SMS_PER_GPC, cluster_size
from tileprobe.schema import EFFECT_STATUSES, GOAL_STATUSES, load

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "examples_records_2026-12-01.json")
GOAL_HINTS = ("occupancy", "num_ctas", "allow_tma")


@pytest.fixture(scope="module")
def records():
    recs, _ = load(FIXTURE)
    judge_records(recs)
    return recs


def _group(records, r, hint):
    return [o for o in records if o.ok and o.group_key(hint) == r.group_key(hint)]


def _reference(records, r, hint):
    group = _group(records, r, hint)
    if hint == "allow_tma":
        return next((o for o in group if bool(o.hint(hint)) != bool(r.hint(hint))), None)
    return min(group, key=lambda o: o.hint(hint))


def _same(a, b):
    res = lambda x: (x.threads, x.registers, x.shared_bytes, x.stack_bytes, tuple(x.cluster_dims or ()))
    return a.same_code(b) and res(a) == res(b)


def _goal_met(records, r, hint):
    value = r.hint(hint)
    if hint == "occupancy":
        size, n = cluster_size(r.cluster_dims), int(value)
        if r.arch == "sm_90" and size > 1 and r.ctas_per_sm:   # recount: distinct SMs of the H200's groups
            clusters = sum(s * r.ctas_per_sm // size for s in H200_MEASURED_SMS_PER_GPC if s >= size)
            if clusters < n * (132 // size):
                return False
        return (r.ctas_per_sm or 0) >= n
    if hint == "num_ctas":
        return cluster_size(r.cluster_dims) == int(value)
    if value:                                    # allow_tma=True: TMA instructions; False: fewer than with True
        return tma_data_ops(r) > 0
    other = _reference(records, r, hint)
    return tma_data_ops(r) == 0 or (other is not None and tma_data_ops(r) < tma_data_ops(other))


def test_the_fixture_is_the_whole_audit(records):
    assert len(records) == 189 and sum(not r.ok for r in records) == 12
    assert {r.arch for r in records} == {"sm_90", "sm_100", "sm_120"}
    judged = Counter(h for r in records for h in r.verdicts)
    assert judged == {"occupancy": 177, "num_ctas": 66, "allow_tma": 30}


def test_no_variant_with_the_reference_code_is_honoured(records):
    checked = 0
    for r in records:
        for hint, v in r.verdicts.items():
            if v.status != "honoured":
                continue
            ref = _reference(records, r, hint)
            assert ref is not None and ref is not r and not _same(r, ref), (r.kernel, r.arch, r.case, r.hints, hint)
            checked += 1
    assert checked == 128     # 144 before `unverified`: 20 then `unverified`, 4 of them honoured again now that the
    #                           B200's clusters of 2 are counted on the GPC sizes a real part allows


def test_nothing_is_honoured_or_met_without_a_goal_it_met(records):
    for r in records:
        for hint, v in r.verdicts.items():
            assert hint in GOAL_HINTS and v.status in GOAL_STATUSES, (hint, v)
            if v.status in ("honoured", "met"):
                assert _goal_met(records, r, hint), (r.kernel, r.arch, r.hints, hint, v)


def test_met_marks_the_reference_or_its_twin(records):
    met = [(r, h) for r in records for h, v in r.verdicts.items() if v.status == "met"]
    assert len(met) == 72     # 81 before `unverified`: 12 then `unverified`, 3 met again (B200 clusters of 2)
    for r, hint in met:
        ref = _reference(records, r, hint)
        assert ref is r or _same(r, ref), (r.kernel, r.arch, r.hints, hint)


def test_no_goal_hints_get_effect_statuses(records):
    """The examples vary no opt_level / num_worker_warps / latency; judged as such, occupancy gets effect words."""
    group = [r for r in records if r.kernel == "w4a16_gemm" and r.arch == "sm_120" and r.ok]
    from tileprobe.judge.verdict import _judge_generic
    statuses = Counter(_judge_generic("occupancy", r, [o for o in group if o.case == r.case]).status
                       for r in group)
    assert set(statuses) <= set(EFFECT_STATUSES) and statuses["baseline"] == 4 and statuses["unchanged"] == 5


def test_cluster_variants_on_the_h200_follow_cluster_residency(records):
    """Clusters of 4, 8, 16 on sm_90: per-CTA residency meets occupancy 1 and 2, the clusters do not (30 of 33,
    62 of 66 …); clusters of 2 fill the H200's even groups and keep their per-CTA status."""
    got = {(r.hints["num_ctas"], r.hints["occupancy"]): r.verdicts["occupancy"].status for r in records
           if r.kernel == "tilegym_persistent_matmul_clusters" and r.arch == "sm_90"}
    assert got == {(4, 1): "ignored", (4, 2): "partial", (8, 1): "ignored", (8, 2): "partial",
                   (16, 1): "ignored", (16, 2): "partial"}
    pairs = {r.hints["occupancy"]: r.verdicts["occupancy"].status for r in records
             if r.kernel == "tilegym_persistent_matmul" and r.arch == "sm_90" and r.hints["num_ctas"] == 2}
    assert pairs == {1: "met", 2: "honoured", 4: "partial", 8: "ignored"}   # 4: occupancy 2's code, up from 1


def test_verdicts_an_unchecked_rule_decides_are_unverified(records):
    """The reserve of sm_90 is driver-checked and its H200 layout measured, so nothing there is unverified; on
    sm_100 and sm_120 the reserve reading and the GPC layout are not checked. The FlashInfer #4465 candidate
    (num_ctas=2, occupancy=2 on sm_100, which failed to launch on a B200) was `honoured`."""
    unverified = [(r, v) for r in records for h, v in r.verdicts.items() if v.status == "unverified"]
    # sm_100: 7 fewer since clusters of 2 on the B200 are counted on the GPC sizes a real part allows
    assert Counter(r.arch for r, _ in unverified) == {"sm_100": 9, "sm_120": 16}
    assert Counter(v.reason.split(" by readings")[0] for _, v in unverified) == {"honoured": 16, "met": 9}
    for r, v in unverified:
        reserve = "no driver has checked it on " + r.arch in v.reason
        layout = "per-CTA residency counted: whether the" in v.reason
        assert reserve or (layout and cluster_size(r.cluster_dims) > 1), v.reason
    flashinfer = next(r for r in records if r.kernel == "tilegym_persistent_matmul" and r.arch == "sm_100"
                      and r.hints == {"num_ctas": 2, "occupancy": 2})
    reason = flashinfer.verdicts["occupancy"].reason
    # its shape (107,788 B shared here, not FlashInfer's 115,852 B) fits 2 CTAs/SM on either reserve reading, and
    # clusters of 2 fill every GPC a real B200 can have (GPCs of even SM counts): 148 clusters, exact
    assert flashinfer.verdicts["occupancy"].status == "honoured"
    assert "clusters of 2: 148 active on B200 (148 SMs in 8 GPCs of ≤ 20 or 10 GPCs of ≤ 16 SMs" in reason

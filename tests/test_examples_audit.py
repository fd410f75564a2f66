"""The audit reproduces the two user reports with no GPU (issue: audit, "Done when")."""
import os

import pytest

from tileprobe.audit.pipeline import audit
from tileprobe.store import Store

ROOT = os.path.dirname(os.path.dirname(__file__))

# The occupancy report's "nvidia-cuda-tileiras 13.4.92" table (seeds/occupancy-hint-ignored-report.txt):
# (GATHER, LOOP, occupancy) -> (threads, registers, shared bytes)
REPORT_13_4_92 = {
    (False, False, 1): (256, 255, 43092), (False, False, 2): (256, 128, 43084), (False, False, 4): (256, 255, 43092),
    (False, True, 1): (256, 255, 43092), (False, True, 2): (256, 128, 43084), (False, True, 4): (256, 255, 43092),
    (True, False, 1): (384, 168, 43092), (True, False, 2): (256, 128, 43076), (True, False, 4): (384, 168, 43092),
    (True, True, 1): (384, 168, 100484), (True, True, 2): (384, 168, 100484), (True, True, 4): (384, 168, 100484),
}


def _require_13_4_92(records):
    builds = {r.tileiras for r in records}
    if not any("V13.4.92" in b for b in builds):
        pytest.fail(f"these numbers are tileiras 13.4.92's; found {builds}. "
                    "Install the test extra: pip install -e '.[tileiras,test]'")


@pytest.fixture(scope="module")
def w4a16(shared_store_path):
    """Its 12 variants for sm_120 (tileiras 13.4.92 compiles them in tests/test_versions.py too: the run's shared
    store compiles them once)."""
    with Store.open(shared_store_path) as store:
        return audit([os.path.join(ROOT, "examples", "w4a16_gemm.py")], ["sm_120"], store=store).records


def test_w4a16_sm120_matches_report_table(w4a16):
    _require_13_4_92(w4a16)
    got = {(r.case["GATHER"], r.case["LOOP"], r.hints["occupancy"]): (r.threads, r.registers, r.shared_bytes)
           for r in w4a16}
    assert got == REPORT_13_4_92


def test_w4a16_gather_loop_occupancy_ignored_and_others_honoured(w4a16):
    for r in w4a16:
        key = (r.case["GATHER"], r.case["LOOP"], r.hints["occupancy"])
        status = r.verdicts["occupancy"].status
        if key[:2] == (True, True) and key[2] > 1:
            assert status == "ignored", (key, r.verdicts)
            assert "same machine code and resources as occupancy=1" in r.verdicts["occupancy"].reason
        elif key[2] == 1:
            assert status == "met", (key, r.verdicts)                              # the reference value
        elif key[2] == 2:
            assert (r.threads, r.registers) == (256, 128) and status == "honoured", (key, r.verdicts)
            assert r.ctas_per_sm == 2


@pytest.fixture(scope="module")
def rms(shared_store_path):
    """Its 10 variants for sm_90 (tests/test_html_report.py's bundled-examples report audits them too: the run's
    shared store compiles them once)."""
    with Store.open(shared_store_path) as store:
        return audit([os.path.join(ROOT, "examples", "rms_norm.py")], ["sm_90"], store=store).records


def test_rms_norm_sm90_registers_follow_occupancy(rms):
    _require_13_4_92(rms)
    for tma in (True, False):
        regs = [r.registers for r in sorted((r for r in rms if r.case["ALLOW_TMA"] is tma),
                                            key=lambda r: r.hints["occupancy"])]
        assert regs == [255, 128, 64, 32, 32], (tma, regs)
    assert all(r.threads == 256 for r in rms)


def test_rms_norm_sm90_occupancy_16_infeasible(rms):
    for r in rms:
        if r.hints["occupancy"] == 16:
            assert r.verdicts["occupancy"].status == "infeasible"
            assert "16 × 256 threads = 4,096 > 2,048 threads per SM on sm_90" in r.verdicts["occupancy"].reason
        elif r.hints["occupancy"] == 1:
            assert r.verdicts["occupancy"].status == "met", r.verdicts       # the reference value
        elif r.hints["occupancy"] <= 4:
            assert r.verdicts["occupancy"].status == "honoured", r.verdicts

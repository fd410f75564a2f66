"""Several compiler versions: isolation between versions, the occupancy report's regression, bisect.

These install managed toolchains from the package registry (about 200 MB per release, a few seconds each here)
into a temporary TILEPROBE_TOOLCHAINS, then compile for real.
"""
import os

import pytest

from tileprobe.audit.pipeline import audit
from tileprobe.analyses.bisect import bisect_versions, candidates, make_evaluator
from tileprobe.analyses.compare import compare_records, split_by_compiler, match_key
from tileprobe.toolchain import published_versions, resolve_toolchains

ROOT = os.path.dirname(os.path.dirname(__file__))
VADD = os.path.join(ROOT, "tests", "data", "probe_vadd.py")
W4A16 = os.path.join(ROOT, "examples", "w4a16_gemm.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def toolchains_dir(tmp_path_factory):
    old = os.environ.get("TILEPROBE_TOOLCHAINS")
    os.environ["TILEPROBE_TOOLCHAINS"] = os.environ.get("TILEPROBE_TEST_TOOLCHAINS") or str(
        tmp_path_factory.mktemp("toolchains"))
    yield
    if old is None:
        os.environ.pop("TILEPROBE_TOOLCHAINS", None)
    else:
        os.environ["TILEPROBE_TOOLCHAINS"] = old


def _resources(records):
    return {match_key(r): (r.status, r.threads, r.registers, r.shared_bytes, r.stack_bytes, r.code_sha256,
                           r.tileiras, r.verdicts) for r in records}


def test_two_versions_in_one_run_equal_two_separate_runs():
    tcs = resolve_toolchains(["13.3.36", "13.4.92"])
    both = audit([VADD], ["sm_90"], toolchains=tcs, jobs=2).records
    a = audit([VADD], ["sm_90"], toolchains=tcs[:1], jobs=2).records
    b = audit([VADD], ["sm_90"], toolchains=tcs[1:], jobs=2).records
    ra, rb, build_a, build_b = split_by_compiler(both)
    assert "V13.3.36" in build_a and "V13.4.92" in build_b
    assert _resources(ra) == _resources(a)
    assert _resources(rb) == _resources(b)


def test_compare_names_the_report_regression():
    tcs = resolve_toolchains(["13.3.36", "13.4.92"])
    recs = audit([W4A16], ["sm_120"], toolchains=tcs, jobs=2).records
    a, b, build_a, build_b = split_by_compiler(recs)
    got_a = {(r.case["GATHER"], r.case["LOOP"], r.hints["occupancy"]): (r.threads, r.registers, r.shared_bytes)
             for r in a}
    # The report's "nvidia-cuda-tileiras 13.3.36" table.
    assert got_a == {
        (False, False, 1): (384, 168, 44124), (False, False, 2): (256, 128, 44100), (False, False, 4): (384, 168, 44124),
        (False, True, 1): (384, 168, 44108), (False, True, 2): (256, 128, 44068), (False, True, 4): (384, 168, 44108),
        (True, False, 1): (256, 255, 44100), (True, False, 2): (256, 128, 44100), (True, False, 4): (256, 255, 44100),
        (True, True, 1): (384, 168, 44092), (True, True, 2): (256, 128, 44068), (True, True, 4): (384, 168, 44092)}
    changes = compare_records(a, b)
    top = changes[0]
    assert top.kind == "regression"
    assert (top.a.case, top.a.hints) == ({"GATHER": True, "LOOP": True}, {"occupancy": 2})
    assert top.details[0] == "occupancy honoured → ignored"
    verdict_regressions = [c for c in changes if any(d.startswith("occupancy ") for d in c.details)
                           and c.kind == "regression"]
    assert len(verdict_regressions) == 1


def test_bisect_names_first_release_that_ignores_the_hint():
    versions = candidates(published_versions(), "13.3.36", "13.4.92")
    assert versions[0] == "13.3.36" and versions[-1] == "13.4.92"
    evaluate = make_evaluator(W4A16, "sm_120", {"GATHER": True, "LOOP": True, "occupancy": 2},
                              "occupancy honoured", jobs=2)
    res = bisect_versions(versions, evaluate)
    assert res.last_good == "13.3.36"
    assert res.first_bad == "13.4.59"
    assert [s.holds for s in res.steps][:2] == [True, False]

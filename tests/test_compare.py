"""compare and bisect on hand-made records; the report's regression found between two real compilers."""

import pytest

from tileprobe.bisect import Step, bisect_versions, candidates
from tileprobe.compare import compare_records, render_markdown, split_by_compiler
from tileprobe.errors import TileprobeError
from tileprobe.schema import VariantRecord


def rec(build, occ, threads, regs, smem, ctas, code, status="honoured", stack=0, run=None, case=None):
    return VariantRecord(kernel="w4a16", probe="p.py", case=case or {"GATHER": True, "LOOP": True},
                         hints={"occupancy": occ}, arch="sm_120", tileiras=build, status="ok", threads=threads,
                         registers=regs, shared_bytes=smem, stack_bytes=stack, ctas_per_sm=ctas, code_sha256=code,
                         verdicts={"occupancy": {"status": status, "reason": ""}}, run=run)


A, B = "release 13.3, V13.3.36", "release 13.4, V13.4.92"


def test_regression_first_with_what_changed():
    a = [rec(A, 1, 384, 168, 44092, 1, "a1"), rec(A, 2, 256, 128, 44068, 2, "a2")]
    b = [rec(B, 1, 384, 168, 100484, 1, "b1"), rec(B, 2, 384, 168, 100484, 1, "b1", status="ignored")]
    changes = compare_records(a, b)
    assert [c.kind for c in changes] == ["regression", "changed"]
    reg = changes[0]
    assert reg.mark == "!" and reg.a.hints == {"occupancy": 2}
    assert reg.details[:2] == ["occupancy honoured → ignored", "CTAs/SM 2 → 1"]
    assert "threads 256 → 384" in reg.details
    assert changes[1].details == ["shared B 44092 → 100484"]
    md = render_markdown(changes, A, B)
    assert "| ! | w4a16 sm_120 GATHER=True LOOP=True occupancy=2 |" in md


def test_honoured_and_met_rank_alike_and_no_goal_statuses_are_changes():
    """Schema 2: honoured → met (the hint no longer makes the difference, the goal still holds) is a change, not a
    regression; met → ignored is one; changed/unchanged of a no-goal hint are changes."""
    a = [rec(A, 2, 256, 128, 1000, 2, "x"), rec(A, 4, 256, 128, 1000, 2, "y", status="met")]
    b = [rec(B, 2, 256, 128, 1000, 2, "x", status="met"), rec(B, 4, 256, 128, 1000, 1, "y", status="ignored")]
    by_occ = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert (by_occ[2].kind, by_occ[2].details) == ("changed", ["occupancy honoured → met"])
    assert by_occ[4].kind == "regression" and by_occ[4].details[:2] == ["occupancy met → ignored", "CTAs/SM 2 → 1"]
    c, u = rec(A, 2, 256, 128, 1000, 2, "x"), rec(B, 2, 256, 128, 1000, 2, "x")
    c.verdicts, u.verdicts = {"opt_level": {"status": "changed"}}, {"opt_level": {"status": "unchanged"}}
    (only,) = compare_records([c], [u])
    assert (only.kind, only.details) == ("changed", ["opt_level changed → unchanged"])


def test_same_code_is_same_and_unmatched_reported():
    a = [rec(A, 1, 256, 128, 1000, 2, "x"), rec(A, 4, 256, 128, 1000, 2, "y")]
    b = [rec(B, 1, 256, 128, 1000, 2, "x")]
    kinds = {c.a.hints["occupancy"] if c.a else None: c.kind for c in compare_records(a, b)}
    assert kinds == {1: "same", 4: "unmatched"}


def test_new_spills_and_failures_are_regressions():
    a = [rec(A, 1, 256, 128, 0, 2, "x"), rec(A, 2, 256, 128, 0, 2, "y")]
    b = [rec(B, 1, 256, 128, 0, 2, "z", stack=40), rec(B, 2, 256, 128, 0, 2, "y")]
    b[1].status = "compile_error"
    ch = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert ch[1].kind == "regression" and "stack 0 → 40 B (new stack use: spills?)" in ch[1].details
    assert ch[2].kind == "regression" and ch[2].details == ["status ok → compile_error"]


def test_time_beyond_noise_only():
    gpu = {"name": "NVIDIA H200"}
    run = lambda m, q: {"status": "ok", "median_us": m, "p25_us": m - q, "p75_us": m + q, "gpu": gpu}  # noqa: E731
    a = [rec(A, 1, 256, 128, 0, 2, "x", run=run(100.0, 0.5)), rec(A, 2, 256, 128, 0, 2, "y", run=run(100.0, 0.5))]
    b = [rec(B, 1, 256, 128, 0, 2, "x", run=run(100.8, 0.5)), rec(B, 2, 256, 128, 0, 2, "y", run=run(130.0, 0.5))]
    ch = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert ch[1].kind == "same"
    assert ch[2].kind == "regression" and ch[2].details[0].startswith("time 100.0 → 130.0 µs (1.30x")


def test_split_by_compiler_needs_two_builds():
    with pytest.raises(TileprobeError, match="need exactly two compiler builds"):
        split_by_compiler([rec(A, 1, 1, 1, 1, 1, "x")])


def test_bisect_finds_first_change_and_logs_steps():
    versions = ["13.3.36", "13.4.59", "13.4.92"]
    seen = []
    res = bisect_versions(versions, lambda v: Step(v, v == "13.3.36", v), seen.append)
    assert (res.last_good, res.first_bad) == ("13.3.36", "13.4.59")
    assert [s.version for s in seen] == ["13.3.36", "13.4.92", "13.4.59"]
    with pytest.raises(TileprobeError, match="nothing to bisect"):
        bisect_versions(versions, lambda v: Step(v, True, ""))


def test_candidates_between_good_and_bad():
    pub = ["13.1.80", "13.2.51", "13.2.78", "13.2.86", "13.3.36", "13.4.59", "13.4.92", "13.5.37"]
    assert candidates(pub, "13.3.36", "13.4.92") == ["13.3.36", "13.4.59", "13.4.92"]
    assert candidates(pub, "13.4", "13.2.78") == ["13.4.92", "13.4.59", "13.3.36", "13.2.86", "13.2.78"]

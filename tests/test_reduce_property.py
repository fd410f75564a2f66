"""tileprobe reduce's properties: parsing and checking on records (no compile: records built here)."""
import pytest

from tileprobe.errors import UsageError
from tileprobe.records import RegisterPool, SassFacts
from tileprobe.reduce.engine import ReduceInputError, _want
from tileprobe.reduce.oracle import Outcome
from tileprobe.reduce.prop import judge, parse_property
from tileprobe.schema import VariantRecord, Verdict


def rec(occ=2, status="honoured", ok=True, failure=None, message="", stack=0, pool=None, spills=(0, 0)):
    r = VariantRecord(kernel="k", probe="p.py", case={}, hints={"occupancy": occ}, arch="sm_120",
                      tileiras="Cuda compilation tools, release 13.4, V13.4.92",
                      status="ok" if ok else ("compiler_crash" if failure == "compiler_crash" else "compile_error"),
                      threads=256, registers=128, shared_bytes=1024, ctas_per_sm=2, stack_bytes=stack)
    if ok:
        r.verdicts = {"occupancy": Verdict(status, "why")}
        r.sass = SassFacts(spill_loads=spills[0], spill_stores=spills[1])
        r.register_pool = pool
    else:
        r.failure, r.message, r.error = failure, message, message
    return r


@pytest.mark.parametrize("text,holds_on_honoured", [
    ("occupancy honoured", True), ("occupancy ignored", False), ("not occupancy honoured", False),
    ("occupancy not ignored", True)])
def test_verdict_properties_and_their_negations(text, holds_on_honoured):
    p = parse_property(text)
    assert judge(p, [rec(status="honoured")]).holds is holds_on_honoured
    assert judge(p, [rec(status="ignored")]).holds is (not holds_on_honoured)


def test_the_audit_line_says_what_was_measured():
    j = judge(parse_property("occupancy honoured"), [rec(status="ignored")])
    assert not j.holds and "occupancy ignored" in j.line and "256 threads × 128 regs" in j.line


def test_spills_and_no_spills():
    assert judge(parse_property("no spills"), [rec(stack=0)]).holds
    assert not judge(parse_property("no spills"), [rec(stack=480, spills=(273, 235))]).holds
    assert judge(parse_property("spills"), [rec(stack=480, spills=(273, 235))]).holds


def test_hang_risk_needs_the_register_pool_verdict():
    p = parse_property("hang risk")
    assert p.needs_sass
    assert judge(p, [rec(pool=RegisterPool(verdict="hang_risk", reason="TRY_ALLOC"))]).holds
    assert not judge(p, [rec(pool=RegisterPool(verdict="pool_ok", reason="fits"))]).holds
    assert judge(parse_property("no hang risk"), [rec(pool=RegisterPool(verdict="pool_ok", reason="f"))]).holds


def test_resource_bounds():
    assert judge(parse_property("registers<=128"), [rec()]).holds
    assert not judge(parse_property("registers<128"), [rec()]).holds


def test_a_failure_is_kept_by_its_signature_and_other_failures_are_not_interesting():
    crash = rec(ok=False, failure="compiler_crash", message="tileiras killed by SIGSEGV (signal 11)")
    err = rec(ok=False, failure="compile_error", message="error: failed to compile Tile IR program")
    front = rec(ok=False, failure="compile_error", message="TileTypeError: shape mismatch")
    assert judge(parse_property("compiler crash"), [crash]).holds
    assert not judge(parse_property("compiler crash"), [err]).holds
    p = parse_property('compile error "failed to compile Tile IR"')
    assert p.needle == "failed to compile Tile IR"
    assert judge(p, [err]).holds and not judge(p, [front]).holds and not judge(p, [rec()]).holds


def test_a_candidate_without_records_or_that_fails_to_compile_does_not_hold():
    assert not judge(parse_property("occupancy honoured"), []).holds
    assert not judge(parse_property("occupancy ignored"),
                     [rec(ok=False, failure="compile_error", message="TileTypeError")]).holds


def test_unknown_property_is_a_usage_error_listing_the_forms():
    with pytest.raises(UsageError, match="compiler crash") as e:
        parse_property("occupancy sometimes")
    assert "no spills" in str(e.value)


def test_bad_input_property_not_held_or_held_under_both():
    p = parse_property("occupancy honoured")
    both = Outcome(False, (("13.3.36", True, "honoured line"), ("13.4.92", True, "also honoured")))
    with pytest.raises(ReduceInputError, match="holds under both .*13.3.36.*honoured line"):
        _want(both, p, True, ["13.3.36", "13.4.92"], "probe.py")
    none = Outcome(False, (("13.4.92", False, "occupancy ignored (384 threads)"),))
    with pytest.raises(ReduceInputError, match="does not hold to begin with .*384 threads"):
        _want(none, p, False, ["13.4.92"], "probe.py")
    regression = Outcome(False, (("13.3.36", True, "a"), ("13.4.92", False, "b")))
    assert _want(regression, p, True, ["13.3.36", "13.4.92"], "probe.py") == (True, False)


def test_an_unchecked_answer_is_never_interesting_even_where_the_property_must_not_hold():
    from tileprobe.reduce.oracle import Oracle
    o = Oracle("sm_120", [], parse_property("occupancy honoured"), (True, False), {}, "/nonexistent")
    unverified = judge(parse_property("occupancy honoured"), [rec(status="unverified")])
    assert not unverified.holds and not unverified.checked
    assert not o._interesting((("13.3.36", True, "honoured"), ("13.4.92", False, unverified.line)))
    assert o._interesting((("13.3.36", True, "honoured"), ("13.4.92", False, "occupancy ignored")))
    with pytest.raises(ReduceInputError, match="cannot be checked under tileiras 13.4.92"):
        _want(Outcome(False, (("13.3.36", True, "a"), ("13.4.92", False, unverified.line))),
              parse_property("occupancy honoured"), True, ["13.3.36", "13.4.92"], "probe.py")


def test_a_removal_answers_the_property_only_when_the_candidate_compiled_or_failed_as_the_property_says():
    from tileprobe.reduce.engine import _told
    assert _told("occupancy ignored (384 threads × 168 regs, 100,484 B, 1 CTA/SM, occupancy ignored)")
    assert _told("compiler_crash: tileiras was killed by SIGSEGV (signal 11)")
    assert not _told("compile_error: TileTypeError: shapes (64, 128) and (128,) do not broadcast")
    assert not _told("no variant (the candidate did not load or compile)")
    assert not _told("timeout: tileiras did not finish within 300 s")
    assert not _told("cannot check: k sm_120 occupancy=2: unverified")

"""REPORT.md of a reduction: the seed report's sections, the budget said, compiler words kept as text."""
from tileprobe.reduce.engine import Need, Reduction
from tileprobe.reduce.oracle import Outcome
from tileprobe.reduce.report import markdown
from tileprobe.reduce.source import Size


def reduction(stopped=False):
    start = Outcome(True, (("13.3.36", True, "occupancy honoured"), ("13.4.92", False, "occupancy ignored")))
    final = Outcome(True, (("13.3.36", True, "honoured (256 threads)"), ("13.4.92", False, "ignored `x` *y*")))
    needs = [Need("ct.gather(X, …) inside a loop with a runtime trip count", "ct.gather → ct.load", "needed", "l"),
             Need("`latency=3` of ct.load", "drop `latency=`", "not_needed", "l"),
             Need("ct.mma in `acc = ct.mma(a, b, acc)`", "`acc = a`", "rejected", "l")]
    return Reduction("src", Size(66, 840, 22, 43), Size(9, 120, 4, 8), 57, ["folded"], needs,
                     ["ct.unpack_from_bytes", "ct.expand_dims"], stopped, False, 612.0, start, final,
                     ["13.3.36", "13.4.92"])


def test_the_report_has_the_seed_reports_sections():
    md = markdown(reduction(), probe="p.py", arch="sm_120", where="GATHER=True,occupancy=2",
                  prop="occupancy honoured", versions=["13.3.36", "13.4.92"], regression=True,
                  kernel_source="import cuda.tile as ct\n")
    assert md.startswith("# sm_120: occupancy honoured under tileiras 13.3.36 and not under 13.4.92")
    for head in ("## What happens", "## What matters", "## Environment", "## Repeat", "## Reduced kernel"):
        assert head in md
    assert "needs: `ct.gather(X, …) inside a loop with a runtime trip count`" in md
    assert "not needed: `ct.unpack_from_bytes`; `ct.expand_dims`; `'latency=3' of ct.load`" in md
    assert "cannot tell" in md and "ct.mma" in md
    assert "66 lines, 840 tokens, 22 kernel parameters, 43 ct.* calls → 9 lines" in md and "57 candidates" in md
    assert "tileprobe audit reduced_probe.py --arch sm_120 --tileiras 13.3.36,13.4.92" in md
    assert "`ignored 'x' *y*`" in md           # the compiler's words stay code: no Markdown from them
    assert "budget ran out" not in md


def test_a_budget_stop_is_said_first():
    md = markdown(reduction(stopped=True), probe="p.py", arch="sm_120", where="", prop="occupancy honoured",
                  versions=["13.3.36", "13.4.92"], regression=True, kernel_source="")
    assert "**The budget ran out: this is the smallest kernel found so far" in md.split("## What happens")[0]


def test_a_budget_stop_before_what_matters_says_not_checked():
    """A budget stop skips "what matters": the report said "needs: (none found)" and "not needed: (nothing was
    removed)" though things had been removed (a new user, 2026-12-05); it now says it was not checked."""
    import dataclasses
    red = dataclasses.replace(reduction(stopped=True), needs=[])
    md = markdown(red, probe="p.py", arch="sm_120", where="", prop="occupancy honoured",
                  versions=["13.3.36", "13.4.92"], regression=True, kernel_source="")
    matters = md.split("## What matters")[1].split("##")[0]
    assert "not checked: the budget ran out" in matters and "(none found)" not in matters
    assert "(nothing was removed)" not in matters

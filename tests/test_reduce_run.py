"""tileprobe reduce end to end on a tiny kernel (real compiles with this environment's tileiras, small and few):
the budget, resume from the journal, a hanging compiler contained, bad input stopped before any reduction, the
written probe audited again."""
import ast
import os
import textwrap
import time

import pytest

from tests.support import fake_tileiras, live_processes_with
from tileprobe.reduce.engine import ReduceInputError, reduce
from tileprobe.reduce.output import write_standalone

TINY = textwrap.dedent('''
    import os
    import cuda.tile as ct
    from tileprobe import Probe
    N = 1024
    T = 256

    @ct.function
    def twice(x):
        return x + x

    @ct.kernel
    def tiny(A, B, C, unused, TILE: ct.Constant[int], SCALE: ct.Constant[bool]):
        i = ct.bid(0)
        a = ct.load(A, index=(i,), shape=(TILE,))
        b = ct.load(B, index=(i,), shape=(TILE,))
        if SCALE:
            a = twice(a)
        extra = ct.load(B, index=(i,), shape=(TILE,))
        c = a + b
        ct.store(C, index=(i,), tile=c)

    probe = Probe(kernel=tiny, args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                  arrays.empty((N,), "float32"), 0, T, case["SCALE"]), cases={"SCALE": [True, False]},
                  hints={"occupancy": [1, 2]}, grid=lambda case, hints, num_sms: (N // T,), name="tiny")
''')


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.py"
    p.write_text(TINY)
    return str(p)


def pip_tc():
    from tileprobe.toolchain import pip_toolchain
    tc = pip_toolchain()
    if tc is None:
        pytest.skip("no pip tileiras here")
    return tc


def test_budget_returns_the_smallest_so_far_and_a_second_run_resumes(tiny, tmp_path):
    out = str(tmp_path / "out")
    kw = dict(arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="compiles", toolchains=[pip_tc()],
              regression=False, out_dir=out, jobs=2)
    first = reduce(tiny, budget_s=0.01, **kw)
    assert first.stopped_by_budget and not first.resumed
    assert first.final.interesting                     # what it returns still has the property
    assert "unused" not in ast.unparse(ast.parse(first.source))   # the folding step ran (it is not budgeted)
    assert os.path.exists(os.path.join(out, "reduce-state.json"))
    second = reduce(tiny, budget_s=0.01, **kw)
    assert second.resumed and second.candidates == 0   # everything it needed was in the journal
    assert second.earlier_candidates == first.candidates > 0 and second.earlier_wall_s > 0   # REPORT.md says it
    assert second.source == first.source


def test_a_full_reduction_writes_a_probe_that_keeps_the_property(tiny, tmp_path):
    out = str(tmp_path / "out")
    red = reduce(tiny, arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="compiles",
                 toolchains=[pip_tc()], regression=False, out_dir=out, jobs=2)
    assert not red.stopped_by_budget and red.final.interesting
    assert red.final_size.lines < red.original_size.lines
    assert red.final_size.ct_calls <= 1                # "compiles" needs nothing: at most one call is left
    w = write_standalone(red.source, out)
    from tileprobe.audit.pipeline import audit
    recs = audit([w.probe], ["sm_90"], toolchains=[pip_tc()], jobs=2).records
    assert recs and all(r.ok for r in recs)


def test_a_property_the_probe_does_not_have_stops_before_reducing(tiny, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ReduceInputError, match="does not hold to begin with.*tiny|does not hold to begin with"):
        reduce(tiny, arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="registers>=255",
               toolchains=[pip_tc()], regression=False, out_dir=out, jobs=2)
    assert not os.path.exists(os.path.join(out, "reduce-state.json"))   # nothing reduced, nothing journalled


def test_a_candidate_that_hangs_the_compiler_is_one_uninteresting_candidate(tiny, tmp_path):
    from tileprobe.toolchain import Toolchain
    # the first two compiles (the probe as given: occupancy 1 and 2) are real; every later one hangs, before any real
    # compile (real_after), and four candidates at a time hang side by side (sleeping compiles cost no CPU)
    script = fake_tileiras(tmp_path, 'if [ "$n" -ge 2 ]; then exec sleep 617.25; fi', logged=True, real_after=True)
    tc = Toolchain.from_binary(script)
    t0 = time.monotonic()
    red = reduce(tiny, arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="compiles", toolchains=[tc],
                 regression=False, out_dir=str(tmp_path / "out"), jobs=4, compile_timeout_s=3, batch=4)
    assert time.monotonic() - t0 < 300
    assert red.final.interesting and red.kept == []     # every other candidate timed out: none kept
    assert red.candidates >= 2
    assert red.final.judgements[0][2].startswith("compiled")          # the probe as given: its real compile
    assert not live_processes_with("sleep 617.25")                     # no hung compiler outlives the reduction

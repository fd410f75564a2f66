"""The "unchecked: … this is the default configuration" line names the default configuration only: the timed
candidate of the default's duplicate group (another configuration, same launch) says that it builds the same
launch as the default, naming it. No GPU: the check task is a stand-in that answers ``unchecked``."""
from __future__ import annotations

from types import SimpleNamespace

from tileprobe.tune.gpu import WorkerBench
from tileprobe.tune.space import Config, Problem
from tileprobe.tune.static import Candidate


class _Unchecked:
    """A watchdog whose check task finds nothing to compare with."""
    def submit(self, task, kw, timeout_s):
        return SimpleNamespace(status="done", value={"status": "unchecked"}, error="")


def _bench(default_hint: int, timed_hint: int):
    problem = Problem(probe=SimpleNamespace(name="k"), values={}, configs=[
        Config((("TILE", 128),), (("occupancy", o),)) for o in (1, 2)])
    problem.default = problem.configs[default_hint - 1]
    timed = Candidate(problem, problem.configs[timed_hint - 1])
    bench = WorkerBench(_Unchecked(), {timed.id: timed}, lambda sha: None, default=timed)
    bench.payload = lambda c: {}
    return bench, timed.id


def test_the_default_configuration_says_it_is_the_default():
    bench, cid = _bench(1, 1)
    out = bench.check(cid)
    assert (out.status, out.detail["message"]) == (
        "unchecked", "this is the default configuration: without reference= there is nothing to compare with")


def test_the_timed_one_of_the_defaults_duplicate_group_does_not_claim_to_be_the_default():
    bench, cid = _bench(1, 2)        # occupancy=1 is the default, timed as occupancy=2 (same launch)
    out = bench.check(cid)
    assert out.detail["message"] == ("this builds the same launch as the default configuration (TILE=128 "
                                     "occupancy=1): without reference= there is nothing to compare with")

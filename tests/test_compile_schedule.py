"""The compile schedule of a budgeted tune's round (issue 22): compiles start in the round's order and none after
its cut-off but the first ``at_least``; stored variants are not compiles and always land."""
from __future__ import annotations

import os

from tileprobe.compile.schedule import CompileSchedule

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_the_order_is_the_rank_and_equal_ranks_keep_theirs():
    got = list(CompileSchedule(rank=lambda v: {"c": 0, "a": 1}.get(v, 2)).apply(["a", "b", "c", "d"]))
    assert got == ["c", "a", "b", "d"]


def test_nothing_starts_after_the_cut_off_but_the_first_at_least():
    now = [0.0]

    def pulled():      # the pool pulls a variant, compiles it for 1 s of the fake clock, pulls the next
        for v in CompileSchedule(rank=lambda v: v, stop_at=2.5, at_least=1, clock=lambda: now[0]).apply(range(6)):
            yield v
            now[0] += 1.0
    assert list(pulled()) == [0, 1, 2]            # started at 0, 1 and 2 s; the 4th would start at 3 s
    now[0] = 100.0
    assert list(CompileSchedule(rank=lambda v: v, stop_at=2.5, at_least=2, clock=lambda: now[0]).apply(range(6))) \
        == [0, 1]                                  # a spent budget still starts the first wave


def test_the_audit_compiles_in_the_schedules_order_and_stops_at_its_cut_off(tmp_path):
    from tileprobe.audit import audit
    from tileprobe.store import Store
    probe = os.path.join(DATA, "probe_vadd.py")
    order = []
    sched = CompileSchedule(rank=lambda v: -dict(v.case_dict).get("TILE", 0), stop_at=0.0, at_least=2)
    with Store.open(str(tmp_path / "s.sqlite")) as store:
        res = audit([probe], ["sm_90"], jobs=1, store=store, schedule=sched,
                    on_record=lambda r, cubin: order.append(r.case["TILE"]))
        assert len(res.records) == 2 and all(r.ok for r in res.records)
        assert order == [1024, 1024]                # TILE 256 and 1024 x occupancy 1, 2: the schedule's first two
        assert sorted(r.hints["occupancy"] for r in res.records) == [1, 2]
        again = audit([probe], ["sm_90"], jobs=1, store=store,
                      schedule=CompileSchedule(rank=lambda v: 0, stop_at=0.0, at_least=0))
    # nothing may start now, but the two stored records land
    assert [r.case["TILE"] for r in again.records] == [1024, 1024]


def test_a_limit_compiles_only_the_ranked_ones():
    got = list(CompileSchedule(rank=lambda v: {"a": 0, "b": 1}.get(v, 2), limit=2).apply(["x", "b", "y", "a"]))
    assert got == ["a", "b"]

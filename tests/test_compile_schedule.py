"""The compile schedule of a budgeted tune: each compile is the one its chooser names when the pool asks,
none after the chooser stops; stored variants are not compiles and always land."""
from __future__ import annotations

import os

from tileprobe.compile.schedule import ChosenSchedule

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_each_variant_is_the_one_chosen_when_asked_and_a_key_not_among_them_starts_nothing():
    asked = []
    wants = iter(["c", "zz", "a", "c", "d", None, "b"])

    def choose(now):
        asked.append(now)
        return next(wants)
    clock = iter(range(100))
    got = list(ChosenSchedule(choose, key=str.lower, clock=lambda: next(clock)).apply(["a", "B", "C", "d"]))
    assert got == ["C", "a", "d"]             # "zz" is none of them; "c" a second time: already started; None: stop
    assert asked == [0, 1, 2, 3, 4, 5]        # asked once per start, with the clock of that moment


def test_variants_of_one_key_start_together_and_the_chooser_is_not_asked_when_none_are_left():
    calls = []

    def choose(now):
        calls.append(now)
        return "x"
    assert list(ChosenSchedule(choose, key=lambda v: v[0], clock=lambda: 0.0).apply(["x1", "x2"])) == ["x1", "x2"]
    assert len(calls) == 1


def test_the_audit_compiles_what_is_chosen_as_workers_free_up_and_stored_records_always_land(tmp_path):
    from tileprobe.audit import audit
    from tileprobe.store import Store
    probe = os.path.join(DATA, "probe_vadd.py")
    order = []
    keys = iter([(1024, 2), (1024, 1), None])
    sched = ChosenSchedule(lambda now: next(keys), key=lambda v: (dict(v.case_dict)["TILE"],
                                                                  dict(v.hints_dict)["occupancy"]))
    with Store.open(str(tmp_path / "s.sqlite")) as store:
        res = audit([probe], ["sm_90"], jobs=1, store=store, schedule=sched,
                    on_record=lambda r, cubin: order.append((r.case["TILE"], r.hints["occupancy"])))
        assert len(res.records) == 2 and all(r.ok for r in res.records)
        assert order == [(1024, 2), (1024, 1)]          # one job: in the order chosen
        again = audit([probe], ["sm_90"], jobs=1, store=store, schedule=ChosenSchedule(lambda now: None, key=id))
    # nothing may start now, but the two stored records land
    assert sorted((r.case["TILE"], r.hints["occupancy"]) for r in again.records) == [(1024, 1), (1024, 2)]

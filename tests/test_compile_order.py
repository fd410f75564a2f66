"""The compile stage starts the likely slowest compiles first (tileprobe/compile/order.py) and still reports the
records in the plan's order."""
import os

from tileprobe.audit import audit
from tileprobe.compile.job import Variant
from tileprobe.compile.order import longest_first, predicted_cost
from tileprobe.exec.local import LocalExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VADD = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # TILE 256, 1024 × occupancy 1, 2


def _v(case: dict, hints: dict) -> Variant:
    return Variant("p.py", 0, "k", tuple(case.items()), tuple(hints.items()), "sm_90")


def test_the_largest_tiles_go_first_then_fewer_ctas_per_sm_then_higher_opt_level():
    plan = [_v({"TILE_M": m, "TILE_N": n}, {"occupancy": o, "opt_level": lvl})
            for m in (64, 256) for n in (64, 128) for o in (1, 2) for lvl in (2, 3)]
    got = [(v.case_dict["TILE_M"], v.case_dict["TILE_N"], v.hints_dict["occupancy"], v.hints_dict["opt_level"])
           for v in longest_first(plan)]
    assert got[:4] == [(256, 128, 1, 3), (256, 128, 1, 2), (256, 128, 2, 3), (256, 128, 2, 2)]
    assert got[-1] == (64, 64, 2, 2)
    assert sorted(got) == sorted((m, n, o, lvl) for m in (64, 256) for n in (64, 128) for o in (1, 2) for lvl in (2, 3))


def test_booleans_and_ones_do_not_count_as_tile_sizes_and_ties_keep_the_plan_order():
    plan = [_v({"ALLOW_TMA": t, "STAGES": 1}, {"occupancy": o}) for t in (True, False) for o in (4, 1)]
    got = [(v.case_dict["ALLOW_TMA"], v.hints_dict["occupancy"]) for v in longest_first(plan)]
    assert got == [(True, 1), (False, 1), (True, 4), (False, 4)]
    assert predicted_cost(_v({"ALLOW_TMA": True}, {})) == (-0.0, 1.0, -3.0)   # unset hints: cuTile's defaults
    assert predicted_cost(_v({"TILE": 1024, "FLAG": True}, {"occupancy": 8}))[0] == -10.0


def test_an_audit_compiles_largest_first_and_lists_its_records_in_the_plan_order():
    seen: list[tuple] = []

    class Recording(LocalExecutor):
        def compile(self, variants, **kw):
            def watched():
                for v in variants:
                    seen.append((v.case_dict["TILE"], v.hints_dict["occupancy"]))
                    yield v
            return super().compile(watched(), **kw)

    res = audit([VADD], ["sm_90"], executor=Recording(jobs=1))
    assert seen == [(1024, 1), (1024, 2), (256, 1), (256, 2)]
    assert [(r.case["TILE"], r.hints["occupancy"]) for r in res.records] == [(256, 1), (256, 2), (1024, 1), (1024, 2)]
    assert all(r.ok for r in res.records)


def test_a_tile_written_as_a_tuple_counts_by_its_whole_numbers():
    plan = [_v({"TILE": t}, {"occupancy": o}) for t in ((128, 128, 32), (256, 256, 64)) for o in (1, 2)]
    got = [(v.case_dict["TILE"], v.hints_dict["occupancy"]) for v in longest_first(plan)]
    assert got == [((256, 256, 64), 1), ((256, 256, 64), 2), ((128, 128, 32), 1), ((128, 128, 32), 2)]
    assert predicted_cost(_v({"TILE": [256, 4, True, (8, 8)]}, {}))[0] == -10.0   # 256 × 4; bools, nesting left out

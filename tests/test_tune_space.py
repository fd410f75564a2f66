"""The tune's search space (``tileprobe/tune/space.py``) and the opt-in probe fields: tunable names, constraints
counted by name, the default configuration, and errors that name the probe file, line and fix."""
from __future__ import annotations

import textwrap

import pytest

from tileprobe.errors import ProbeError
from tileprobe.probe.define import Probe, load_probes
from tileprobe.tune.space import constraint_name, default_values, problems


def _probe(**kw):
    base = dict(kernel="k.py:f", args=lambda c, a: (), grid=lambda c, h, n: (1,))
    return Probe(**{**base, **kw})


def _write(tmp_path, text, name="p.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_problems_split_tunable_from_problem_names_and_count_rejections():
    def divides(case, hints):
        return case["M"] % case["TILE_M"] == 0

    def no_big_clusters(case, hints):
        return not (hints["num_ctas"] == 2 and case["TILE_M"] == 256)
    p = _probe(cases={"M": [4096, 4000], "TILE_M": [64, 128, 256], "DTYPE": ["f16"]}, tunable=("TILE_M",),
               hints={"occupancy": [1, 2], "num_ctas": [1, 2]}, constraints=[divides], constraint=no_big_clusters)
    probs = problems(p)
    assert [x.values for x in probs] == [{"M": 4096, "DTYPE": "f16"}, {"M": 4000, "DTYPE": "f16"}]
    a, b = probs
    assert a.total == b.total == 12
    assert a.rejected == {"no_big_clusters": 2} and len(a.configs) == 10
    # 4000 % 64 = 32, 4000 % 128 = 32, 4000 % 256 = 160: everything fails `divides` first
    assert b.rejected == {"divides": 12} and b.configs == []
    c = a.configs[0]
    assert c.case(a.values) == {"M": 4096, "DTYPE": "f16", "TILE_M": 64} and c.hints_dict == {"occupancy": 1,
                                                                                                 "num_ctas": 1}
    assert c.label == "TILE_M=64 occupancy=1 num_ctas=1" and a.label == "M=4096 DTYPE=f16"
    assert a.default == c and b.default is None and "a constraint rejected it" in b.default_note


def test_probe_without_tunable_tunes_hints_per_case():
    p = _probe(cases={"ALLOW_TMA": [True, False]}, hints={"occupancy": [2, 1, 4]})
    probs = problems(p)
    assert [x.values for x in probs] == [{"ALLOW_TMA": True}, {"ALLOW_TMA": False}]
    assert [c.label for c in probs[0].configs] == ["occupancy=2", "occupancy=1", "occupancy=4"]
    assert probs[0].default.hints_dict == {"occupancy": 1}     # cuTile's default, not the first listed


def test_default_values_rules():
    p = _probe(cases={"T": [(128, 64), (64, 64)]}, tunable=("T",), hints={"occupancy": [None, 2], "opt_level": [2, 3],
                                                                          "num_worker_warps": [8, 4]})
    assert default_values(p) == {"T": (128, 64), "occupancy": None, "opt_level": 3, "num_worker_warps": 8}
    q = _probe(cases={"T": [1, 2]}, tunable=("T",), hints={"occupancy": [1, 2]}, default={"T": 2, "occupancy": 2})
    assert problems(q)[0].default.label == "T=2 occupancy=2"


def test_constraint_names():
    def fits(case, hints):
        return True
    assert constraint_name(fits) == "fits"
    assert constraint_name(lambda c, h: True).startswith("<lambda> (test_tune_space.py:")


@pytest.mark.parametrize("kw,message", [
    (dict(cases={"TILE_M": [1]}, tunable=("TILE_N",)),
     r"tunable names 'TILE_N', which is not in cases=\{\.\.\.\} \(did you mean 'TILE_M'\?\)"),
    (dict(cases={"TILE": [1]}, tunable="TILE"), r"tunable='TILE' must be a list of case names, e\.g\. tunable=\('TILE',\)"),
    (dict(constraints=lambda c, h: True), r"constraints= takes a list of functions; for one function write constraint=f"),
    (dict(constraint=3), r"constraint 3 is not callable"),
    (dict(cases={"T": [1, 2]}, tunable=("T",), default={"T": 3}), r"default T=3 is not among the declared values \[1, 2\]"),
    (dict(cases={"T": [1]}, default={"U": 1}), r"default names 'U', which is neither a tunable case name nor a hint"),
])
def test_bad_tuning_fields(kw, message):
    with pytest.raises(ProbeError, match=message):
        _probe(**kw)


def test_errors_name_the_probe_file_and_line(tmp_path):
    path = _write(tmp_path, """
        from tileprobe import Probe
        probe = Probe(kernel="k.py:f", args=lambda c, a: (),
                      cases={"TILE_M": [64]}, tunable=("TILE_MM",))
    """)
    with pytest.raises(ProbeError, match=r"p\.py:3: invalid probe: .*did you mean 'TILE_M'"):
        load_probes(path)
    path = _write(tmp_path, """
        from tileprobe import Probe
        def too_big(case, hints):
            return case["TILE"] * hints["nope"] < 4096
        probe = Probe(kernel="k.py:f", args=lambda c, a: (), cases={"TILE": [64]}, tunable=("TILE",),
                      hints={"occupancy": [1]}, constraint=too_big)
    """, name="q.py")
    [p] = load_probes(path)
    with pytest.raises(ProbeError, match=r"q\.py:4: constraint too_big failed on case \{'TILE': 64\} hints "
                                         r"\{'occupancy': 1\}: KeyError: 'nope'"):
        problems(p)
    path = _write(tmp_path, """
        from tileprobe import Probe
        def forgot(case, hints):
            case["TILE"] < 4096
        probe = Probe(kernel="k.py:f", args=lambda c, a: (), cases={"TILE": [64]}, constraint=forgot)
    """, name="r.py")
    [p] = load_probes(path)
    with pytest.raises(ProbeError, match=r"r\.py: constraint forgot returned None .*return True to keep"):
        problems(p)


def test_existing_probes_are_unchanged(tmp_path):
    p = _probe(cases={"TILE": [1, 2]}, hints={"occupancy": [1, 2]})
    assert p.tunable == () and p.constraints == () and p.constraint is None and p.default is None
    assert len(p.case_grid()) == 2 and len(p.hint_grid()) == 2

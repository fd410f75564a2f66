"""Probe files: loading, grids, and errors that name the file and line."""
import os
import re
import textwrap

import pytest

from tileprobe.errors import ProbeError
from tileprobe.probe.define import Probe, SpecArrays, load_probes

DATA = os.path.join(os.path.dirname(__file__), "data")


def _write(tmp_path, text, name="p.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_bundled_test_probe_grid():
    [p] = load_probes(os.path.join(DATA, "probe_vadd.py"))
    assert p.label == "vadd"
    assert p.case_grid() == [{"TILE": 256}, {"TILE": 1024}]
    assert p.hint_grid() == [{"occupancy": 1}, {"occupancy": 2}]
    args = p.launch_args({"TILE": 256})
    assert [a.shape for a in args[:3]] == [(65536,)] * 3
    assert args[0].init == {"kind": "randn", "scale": 1.0} and args[2].init == {"kind": "empty"}
    assert args[3] == 256


def test_syntax_error_names_file_and_line(tmp_path):
    path = _write(tmp_path, """
        from tileprobe import Probe
        probe = Probe(kernel="x:y", args=lambda c, a: (
    """)
    with pytest.raises(ProbeError, match=r"p\.py:3: syntax error"):
        load_probes(path)


def test_runtime_error_names_line(tmp_path):
    path = _write(tmp_path, """
        from tileprobe import Probe
        x = 1
        y = x / 0
    """)
    with pytest.raises(ProbeError, match=r"p\.py:4: loading the probe failed: ZeroDivisionError"):
        load_probes(path)


def test_missing_probe_says_what_to_define(tmp_path):
    path = _write(tmp_path, "A = 1\n")
    with pytest.raises(ProbeError, match=r"defines no probe: add `probe = tileprobe.Probe"):
        load_probes(path)


def test_error_in_args_points_at_its_line(tmp_path):
    path = _write(tmp_path, """
        from tileprobe import Probe
        def args(case, arrays):
            return (arrays.empty((4,), "float32"), case["MISSING"])
        probe = Probe(kernel="k.py:f", args=args, cases={"TILE": [1]})
    """)
    [p] = load_probes(path)
    with pytest.raises(ProbeError, match=r"p\.py:4: args\(\{'TILE': 1\}\) failed: KeyError: 'MISSING'"):
        p.launch_args({"TILE": 1})


def test_unknown_hint_and_empty_values_rejected():
    with pytest.raises(ProbeError, match=r"'allow_tma' is a per-load knob .*ct.Constant"):
        Probe(kernel="a:b", args=lambda c, a: (), hints={"allow_tma": [True]})
    with pytest.raises(ProbeError, match=r"hints\['occupancy'\] must be a non-empty list"):
        Probe(kernel="a:b", args=lambda c, a: (), hints={"occupancy": []})


def test_case_and_hint_names_are_strings():
    """A tuple as a case name ended the whole audit with a TypeError from sorting keys (a hostile test, 2026-12-02)."""
    with pytest.raises(ProbeError, match=r"cases key \('a', 1\): a case is named by a non-empty string"):
        Probe(kernel="a:b", args=lambda c, a: (), cases={("a", 1): [1], "TILE": [256]})
    with pytest.raises(ProbeError, match=r"cases key '': a case is named by a non-empty string"):
        Probe(kernel="a:b", args=lambda c, a: (), cases={"": [1]})
    with pytest.raises(ProbeError, match=r"hints key \('occupancy',\): a hint is named by a string"):
        Probe(kernel="a:b", args=lambda c, a: (), hints={("occupancy",): [1]})


def test_kernel_that_is_not_a_kernel(tmp_path):
    kfile = _write(tmp_path, "def f():\n    pass\n", name="k.py")
    p = Probe(kernel=f"{kfile}:f", args=lambda c, a: ())
    with pytest.raises(ProbeError, match="is a function, not a @ct.kernel function"):
        p.resolve_kernel()
    with pytest.raises(ProbeError, match="has no attribute 'nope'"):
        Probe(kernel=f"{kfile}:nope", args=lambda c, a: ()).resolve_kernel()


def test_spec_arrays_records_fill_recipes():
    arr = SpecArrays()
    assert arr.randint((2, 3), "uint8", 0, 256).init == {"kind": "randint", "low": 0, "high": 256}
    assert arr.randperm(8).dtype == "int32"
    assert arr.full(4, "float16", 1.5).shape == (4,)


@pytest.mark.parametrize("hint, value, allowed", [
    ("occupancy", "two", r"an int in 1 … 32"), ("occupancy", 0, r"an int in 1 … 32"),
    ("occupancy", -1, r"an int in 1 … 32"), ("occupancy", 1000, r"an int in 1 … 32"),
    ("occupancy", 2.0, r"an int in 1 … 32"), ("occupancy", True, r"an int in 1 … 32"),
    ("num_ctas", 3, r"a power of two in 1 … 16 \(1, 2, 4, 8, 16\)"), ("num_ctas", 32, r"a power of two in 1 … 16 \(1, 2, 4, 8, 16\)"),
    ("opt_level", 4, r"an int in 0 … 3"), ("num_worker_warps", 3, r"a power of two in 1 … 32 \(1, 2, 4, 8, 16, 32\)"),
])
def test_bad_hint_values_name_the_probe_line_and_the_allowed_values(tmp_path, hint, value, allowed):
    """An occupancy='two' used to end in a TypeError about comparing str and int, deep in cuTile."""
    path = _write(tmp_path, f"""\
        from tileprobe import Probe

        probe = Probe(kernel="k.py:f", args=lambda c, a: (),
                      hints={{{hint!r}: [1, {value!r}]}})
    """)
    with pytest.raises(ProbeError, match=rf"p\.py:3: invalid probe: hints\['{hint}'\] holds {re.escape(repr(value))}: "
                                         rf"{hint} takes {allowed}, or None for the kernel's declared value"):
        load_probes(path)


def test_good_hint_values_and_none_pass():
    p = Probe(kernel="a:b", args=lambda c, a: (), hints={"occupancy": [None, 1, 32], "num_ctas": [1, 2, 16],
                                                         "opt_level": [0, 3], "num_worker_warps": [4, 8]})
    assert len(p.hint_grid()) == 3 * 3 * 2 * 2


def test_unknown_hint_says_did_you_mean_with_file_and_line(tmp_path):
    path = _write(tmp_path, """\
        from tileprobe import Probe
        probe = Probe(kernel="k.py:f", args=lambda c, a: (), hints={"ocupancy": [1]})
    """)
    with pytest.raises(ProbeError, match=r"p\.py:2: invalid probe: unknown hint 'ocupancy' \(did you mean "
                                         r"'occupancy'\?\); kernel hints are occupancy, num_ctas"):
        load_probes(path)

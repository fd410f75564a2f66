"""Probes that fit real launch code: one test per friction met writing probes for 23 real kernels."""
import os
import sys
import textwrap

import pytest

from tileprobe.errors import ProbeError
from tileprobe.probe.define import Probe, context_kwargs, load_probes

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


def _write(folder, name, text):
    path = os.path.join(str(folder), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def test_args_and_grid_see_the_arch_and_the_hints(tmp_path):
    """Host code that picks tiles per arch, and a persistent kernel whose constant depends on occupancy: one probe."""
    from tileprobe.audit import audit
    kernels = os.path.join(DATA, "simple_kernels.py")
    probe = _write(tmp_path, "probe.py", f"""
        from tileprobe import Probe

        N = 1 << 14

        def args(case, arrays, *, arch, hints):
            tile = 256 if arch == "sm_90" else 128            # the host code's per-arch choice
            programs = 4 * hints["occupancy"]                   # a grid constant derived from the hints
            return (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"), arrays.empty((N,), "float32"),
                    tile * programs // 4)

        probe = Probe(kernel={kernels + ":vadd"!r}, args=args, hints={{"occupancy": [1, 2]}},
                      grid=lambda case, hints, num_sms, arch=None: (N // 256,))
    """)
    res = audit([probe], ["sm_90", "sm_120"], jobs=2)
    consts = {(r.arch, r.hints["occupancy"]): r.signature[3]["value"] for r in res.records}
    assert consts == {("sm_90", 1): 256, ("sm_90", 2): 512, ("sm_120", 1): 128, ("sm_120", 2): 256}
    assert all(r.ok for r in res.records)


def test_context_is_passed_only_to_functions_that_take_it():
    assert context_kwargs(lambda case, arrays: 0, arch="sm_90", hints={}) == {}
    assert context_kwargs(lambda case, arrays, *, arch=None: 0, arch="sm_90", hints={}) == {"arch": "sm_90"}
    assert context_kwargs(lambda case, arrays, **kw: 0, arch="sm_90", hints={"occupancy": 2}) == {
        "arch": "sm_90", "hints": {"occupancy": 2}}
    old = Probe(kernel="m:k", args=lambda case, arrays: (case["N"],), cases={"N": [1]})
    assert old.launch_args({"N": 3}, arch="sm_90", hints={"occupancy": 1}) == (3,) and not old.args_take_context


def test_kernel_file_finds_its_sibling_modules(tmp_path):
    """NVIDIA's samples/AttentionFMHA.py imports `utils` from its folder."""
    _write(tmp_path, "samples/utils.py", "TILE = 128\n")
    _write(tmp_path, "samples/fmha.py", """
        import cuda.tile as ct
        from utils import TILE

        @ct.kernel
        def k(X, Y):
            b = ct.bid(0)
            ct.store(Y, index=(b,), tile=ct.load(X, index=(b,), shape=(TILE,)))
    """)
    probe = _write(tmp_path, "probes/fmha_probe.py", """
        from tileprobe import Probe
        probe = Probe(kernel="../samples/fmha.py:k", args=lambda case, arrays: ())
    """)
    folder = os.path.join(str(tmp_path), "samples")
    kernel = load_probes(probe)[0].resolve_kernel()
    assert kernel._pyfunc.__name__ == "k"
    assert folder not in sys.path          # on sys.path only while the file was imported


def test_host_only_imports_are_stubbed(tmp_path, monkeypatch):
    """A package whose import pulls a host-only JIT builder (FlashInfer's flashinfer.jit) imports with stubs."""
    _write(tmp_path, "hostpkg/__init__.py", "from .jit import build_extension\n")
    _write(tmp_path, "hostpkg/jit/__init__.py", "import a_native_library_not_installed_here\n"
                                                "def build_extension(name): ...\n")
    _write(tmp_path, "hostpkg/kernels.py", """
        import cuda.tile as ct
        from hostpkg.jit import build_extension, register
        from hostpkg.jit.core import Base

        class Config(Base):
            pass

        @register("gemm")
        @ct.kernel
        def k(X, Y):
            b = ct.bid(0)
            ct.store(Y, index=(b,), tile=ct.load(X, index=(b,), shape=(64,)))
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    bare = Probe(kernel="hostpkg.kernels:k", args=lambda case, arrays: ())
    with pytest.raises(ProbeError, match="a_native_library_not_installed_here"):
        bare.resolve_kernel()
    stubbed = Probe(kernel="hostpkg.kernels:k", args=lambda case, arrays: (), stub_modules=["hostpkg.jit"])
    assert stubbed.resolve_kernel()._pyfunc.__name__ == "k"
    assert "hostpkg.jit" not in sys.modules and "hostpkg.jit.core" not in sys.modules   # stubs gone afterwards
    from tileprobe import stub_modules
    with stub_modules("hostpkg.jit"):
        import hostpkg.jit as stub
        assert repr(stub.anything.deeper()) == "<tileprobe stub hostpkg.jit.anything.deeper()>"


def test_helper_files_beside_probes_are_skipped_not_broken(tmp_path):
    from tileprobe.audit import audit
    kernels = os.path.join(DATA, "simple_kernels.py")
    helper = _write(tmp_path, "_shapes.py", "N = 4096\n")
    probe = _write(tmp_path, "vadd_probe.py", f"""
        from tileprobe import Probe
        from _shapes import N                       # a helper module beside the probe
        probe = Probe(kernel={kernels + ":vadd"!r}, args=lambda case, arrays: (
            arrays.randn((N,), "float32"), arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), 256))
    """)
    res = audit([helper, probe], ["sm_90"], select=lambda v: False)     # load only: compile nothing
    assert res.probe_errors == [] and res.notes == [f"{helper}: skipped, it defines no probe (a helper module?)"]
    from tileprobe.errors import TileprobeError
    with pytest.raises(TileprobeError, match="defines no probe"):
        audit([helper], ["sm_90"])               # named alone, it is an error


def test_per_probe_compile_timeout_and_the_default(tmp_path):
    from tileprobe.audit import audit
    from tileprobe.cli import build_parser
    from tileprobe.compile.job import DEFAULT_TIMEOUT_S
    assert DEFAULT_TIMEOUT_S == 900.0 > 372      # FIELD_NOTES: 167-372 s per FP4 GEMM variant on sm_100
    assert build_parser().parse_args(["audit", "p.py"]).timeout is None     # the default, scaled by the load
    kernels = os.path.join(DATA, "simple_kernels.py")
    probe = _write(tmp_path, "slow.py", f"""
        from tileprobe import Probe
        probe = Probe(kernel={kernels + ":vadd"!r}, timeout_s=0.001, args=lambda case, arrays: (
            arrays.randn((4096,), "float32"), arrays.randn((4096,), "float32"), arrays.empty((4096,), "float32"), 256))
    """)
    res = audit([probe], ["sm_90"], timeout_s=600)
    assert [r.status for r in res.records] == ["timeout"]          # the probe's 1 ms wins over 600 s
    with pytest.raises(ProbeError, match="timeout_s"):
        Probe(kernel="m:k", args=lambda c, a: (), timeout_s=0)


def test_declared_hints_show_their_values_per_arch():
    """A kernel declaring occupancy=ByTarget(sm_100=16): tables say 16 on sm_100 and hint-less on sm_90, not None."""
    sys.path.insert(0, os.path.join(DATA, "record"))
    try:
        import kernels as k
    finally:
        sys.path.remove(os.path.join(DATA, "record"))
    from tileprobe._cutile import effective_hints
    from tileprobe.report.common import hint_cell, row_cells
    from tileprobe.schema import VariantRecord
    cells = {}
    for arch in ("sm_100", "sm_90"):
        rec = VariantRecord(kernel="scale_rows", probe="p.py", case={}, hints={"occupancy": None}, arch=arch,
                            tileiras="", status="compile_error", effective_hints=effective_hints(k.scale_rows, arch))
        cells[arch] = row_cells(rec, ["occupancy"])[0]
    assert cells == {"sm_100": "16 (declared)", "sm_90": "hint-less"}
    launched = VariantRecord(kernel="k", probe="p.py", case={}, hints={"occupancy": 9}, arch="sm_90", tileiras="",
                             status="ok", effective_hints={"occupancy": 9})
    assert hint_cell(launched, "occupancy") == "9"


def test_the_default_compile_timeout_scales_with_the_load_per_cpu():
    """A FlashInfer W4A4 compile took 1,055 s on a loaded 2-core machine, past the 900 s default."""
    from tileprobe.compile.job import load_scaled_timeout_s
    assert load_scaled_timeout_s(load=0.3, cpus=2) == 900.0            # an idle machine: the default
    assert load_scaled_timeout_s(load=5.0, cpus=2) == 2250.0           # 2.5 runnable tasks per CPU
    assert load_scaled_timeout_s(load=40.0, cpus=2) == 3600.0          # at most 4×
    assert load_scaled_timeout_s(60.0, load=4.0, cpus=2) == 120.0
    measured = load_scaled_timeout_s()
    assert 900.0 <= measured <= 3600.0

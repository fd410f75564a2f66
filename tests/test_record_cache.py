"""Probes from cuTile's compile cache: a cache made the way cuTile makes it, read back into probes whose
audit reproduces the cached cubins' symbols and machine code."""
import json
import os
import subprocess
import sys

import pytest

from tileprobe.record.cache import embedded_hints, probes_from_cache, read_cache

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "record")
KERNELS = os.path.join(DATA, "kernels.py")
CUBINS = os.path.join(HERE, "data", "cubins")

MAKE_CACHE = f"""
import json, sys
sys.path.insert(0, {DATA!r})
from tileprobe import _cutile
_cutile.install_fake_driver()
from cuda.tile.compilation import export_kernel
from tileprobe.probe.signature import jit_signature
from tileprobe.model.cubin import CubinInfo
import kernels as k
out = {{}}
for name, kernel, args, arch in (("vadd", k.vadd.replace_hints(occupancy=2), k.vadd_args(4096), "sm_90"),
                                 ("scale_rows", k.scale_rows, k.scale_args(), "sm_100")):
    sig = jit_signature(kernel, args)
    path = sys.argv[1] + "/" + name + ".cubin"
    export_kernel(kernel, [sig], path, gpu_code=arch, output_format="cubin")   # cuTile stores it in its cache
    out[name] = [sig.symbol, CubinInfo.from_path(path).code_sha256]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cuTile compile cache filled by cuTile itself (export_kernel with CUDA_TILE_CACHE_DIR set)."""
    folder = tmp_path_factory.mktemp("cutile-cache")
    env = dict(os.environ, PYTHONPATH=ROOT, CUDA_TILE_CACHE_DIR=str(folder))
    proc = subprocess.run([sys.executable, "-c", MAKE_CACHE, str(folder)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return str(folder), json.loads(proc.stdout)


def test_hints_are_read_from_the_cubins_tile_ir():
    def hints(name, arch):
        with open(os.path.join(CUBINS, name), "rb") as f:
            return embedded_hints(f.read(), arch)
    assert hints("vec_add_occ2_sm_90.cubin", "sm_90") == {"occupancy": 2}
    assert hints("matmul_cluster2_sm_90.cubin", "sm_90") == {"num_ctas": 2}
    assert hints("matmul_sm_90.cubin", "sm_90") == {}


def test_cache_entries_give_symbols_arch_and_hints(cache):
    folder, made = cache
    entries = {e.symbols[0]: e for e in read_cache(folder)}
    assert set(entries) == {made["vadd"][0], made["scale_rows"][0]}
    vadd = entries[made["vadd"][0]]
    assert (vadd.arch, vadd.hints) == ("sm_90", {"occupancy": 2})
    assert "V13." in vadd.compiler
    assert entries[made["scale_rows"][0]].hints == {"occupancy": 16}   # ByTarget(sm_100=16) resolved by cuTile


def test_probes_from_cache_audit_to_the_cached_cubins(cache, tmp_path):
    from tileprobe.audit import audit
    folder, made = cache
    result = probes_from_cache(folder, str(tmp_path / "out"), kernels=[KERNELS])
    plans = {plan.kernel.name: (path, plan) for path, plan in result.written}
    assert set(plans) == {"vadd", "scale_rows"}
    vadd_path, vadd = plans["vadd"]
    assert vadd.cases[0].hint_sets() == [({"occupancy": 2}, None)] and vadd.archs == ["sm_90"]
    scale_path, scale = plans["scale_rows"]
    assert scale.cases[0].hint_sets() == [({}, None)]    # 16 on sm_100 is what the kernel declares
    with open(vadd_path) as f:
        text = f.read()
    assert "TODO: the grid is unknown" in text and "placeholders with the cached divisibility" in text
    wanted = {("vadd", "sm_90", 2), ("scale_rows", "sm_100", None)}
    res = audit([vadd_path, scale_path], ["sm_90", "sm_100"], jobs=2,
                select=lambda v: (v.probe_name, v.arch, v.hints_dict.get("occupancy")) in wanted)
    got = {r.kernel: (r.symbol, r.code_sha256) for r in res.records}
    assert not res.probe_errors and len(res.records) == 2
    assert got == {"vadd": tuple(made["vadd"]), "scale_rows": tuple(made["scale_rows"])}


def test_a_kernel_the_cache_cannot_place_is_a_todo_not_a_crash(cache, tmp_path):
    from tileprobe.audit import audit
    folder, _ = cache
    result = probes_from_cache(folder, str(tmp_path / "out"))
    path = next(p for p, plan in result.written if plan.kernel.name == "vadd")
    with open(path) as f:
        assert "rerun with --kernels MODULE" in f.read()
    from tileprobe.errors import IncompleteError
    with pytest.raises(IncompleteError, match=r"vadd\.py:\d+: probe 'vadd': kernel None is a NoneType, not a @ct\.kernel"):
        audit([path], ["sm_90"], select=lambda v: v.hints_dict.get("occupancy") == 2)   # one error, not a row per variant


def test_jit_cubins_exported_with_hashes_check_without_the_cubins(cache, tmp_path):
    """benchmarks/programs/gpu_record_tilegym.py keeps each JIT cubin's arch, code hash and hints in jit/index.json,
    so the machine-code check runs from the index when the GPU session's results come back without cubins."""
    from support import load_script
    script = load_script(os.path.join(ROOT, "benchmarks", "programs", "gpu_record_tilegym.py"))
    folder, made = cache
    index = script.export_jit_cubins(folder, str(tmp_path / "jit"))
    by_symbol = {e["symbols"][0]: e for e in index}
    assert {s: (e["arch"], e["code_sha256"], e["hints"]) for s, e in by_symbol.items()} == {
        made["vadd"][0]: ("sm_90", made["vadd"][1], {"occupancy": 2}),
        made["scale_rows"][0]: ("sm_100", made["scale_rows"][1], {"occupancy": 16})}
    with_cubins = script._jit_entries(str(tmp_path))
    for e in index:
        os.remove(tmp_path / "jit" / e["file"])
    assert script._jit_entries(str(tmp_path)) == with_cubins

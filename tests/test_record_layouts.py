"""Recorded layouts reproduce JIT's signature (the H200 run of 2026-12-01 found TileGym's RoPE audited under
another signature than JIT's).

The programs run under ``tileprobe record`` with ``tests/data/record/fake_launch`` (no GPU) and launch torch CPU
tensors (and ``__cuda_array_interface__`` objects) of the layouts real programs pass. Each program writes the truth:
cuTile's ``KernelSignature.from_kernel_args`` on the very tensors it launched, under the calling convention JIT
picks (see ``tests/data/record/program.py``). The recorded probes must audit to exactly that symbol.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tileprobe.record.session import probes_from_log, record

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "record")
PROGRAM = os.path.join(DATA, "program.py")
FAKE = os.path.join(DATA, "fake_launch")
H200 = os.path.join(DATA, "h200")

#: The symbol JIT compiled for TileGym's RoPE on the H200 (docs/gpu/2026-12-01/record-tilegym.txt): cos/sin of
#: shape (1, 1024, 128) make ``1s1`` (a static extent 1), which needs calling convention v2 (``Kt2``).
H200_ROPE_JIT = ("_rope_kernel_Kt2_A4bf16_7v8l0_8t1_ei16_p16_A4bf16_7v8l0_8t1_ci16_p16_A3bf16_1s1_3v8l0_4t1_6i16_p16"
                 "_A3bf16_1s1_3v8l0_4t1_6i16_p16_I1_I1024_I32_I8_I64")


def _record(tmp_path, mode):
    out = str(tmp_path / mode)
    truth_path = str(tmp_path / f"{mode}-truth.json")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([FAKE, ROOT]))
        result = record([sys.executable, PROGRAM, mode, truth_path], out, hints="launched", top=100)
    assert result.exit_code == 0 and not result.notes, result.notes
    with open(truth_path) as f:
        return result, json.load(f)


def _audit_symbols(probe_path):
    """Per case of the probe file: the symbol the audit compiles for (what `tileprobe audit` computes before it
    calls tileiras), and the case's last argument. In a child process: the fake driver stays out of pytest."""
    code = f"""
import json
from tileprobe.probe.define import load_probes
from tileprobe.probe.signature import jit_signature
probe = load_probes({probe_path!r})[0]
kernel = probe.resolve_kernel()
out = []
for case in probe.case_grid():
    args = probe.launch_args(case)
    out.append([case["launch"], args[-1], jit_signature(kernel, args).symbol])
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([DATA, ROOT])))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_rope_launch_with_a_size_one_table_audits_to_the_jit_signature(tmp_path):
    from tileprobe.audit import audit
    result, truth = _record(tmp_path, "rope")
    (path, plan), = result.written
    by_count = {c.count: c for c in plan.cases}
    table, expanded = by_count[3], by_count[1]
    # cos/sin (1, 64, 16): extent 1 is static under JIT -> "1s1" and calling convention v2
    assert table.symbol == truth["1"]
    assert table.symbol.startswith("rope_like_Kt2_") and table.symbol.count("A3bf16_1s1_") == 2
    # the same tables expanded over the batch: stride 0, no size-1 extent -> v1, "may alias internally" (i)
    assert expanded.symbol == truth["2"]
    assert expanded.symbol.startswith("rope_like_Kt1_") and expanded.symbol.count("p16i_") == 2
    with open(path) as f:
        text = f.read()
    assert "arrays.randn((1, 64, 16), 'bfloat16'" in text and "strides=(0, 16, 1)" in text
    assert "'hints': [{'occupancy': 9}]" in text
    res = audit([path], ["sm_90"], jobs=2, select=lambda v: v.hints_dict.get("occupancy") == 9)
    assert not res.probe_errors and len(res.records) == 2 and all(r.ok for r in res.records), \
        [r.error for r in res.records]
    assert sorted(r.symbol for r in res.records) == sorted(truth.values())


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """One recording of ``program.py layouts``: (probe path, plan, truth by the launch's constant N)."""
    result, truth = _record(tmp_path_factory.mktemp("layouts"), "layouts")
    (path, plan), = result.written
    return path, plan, {int(n): t for n, t in truth.items()}


def test_every_layout_records_to_its_jit_signature(layouts):
    """Views, broadcasts (stride 0), size-1 extents, negative strides, offsets into a buffer, 0-d tensors, int64
    and bool arrays, zero-size extents, tuples and lists: the written probe's arguments give cuTile the same
    signature as the launched objects did."""
    path, plan, truth = layouts
    assert plan.total == len(truth) == 25
    planned = {int(c.symbol.rsplit("_I", 1)[1]): c.symbol for c in plan.cases}
    audited = {n: sym for _, n, sym in _audit_symbols(path)}
    want = {n: t["symbol"] for n, t in truth.items()}
    wrong = {truth[n]["label"]: (audited.get(n), s) for n, s in want.items() if audited.get(n) != s}
    assert not wrong
    assert planned == want
    v2 = sorted(t["label"] for t in truth.values() if "_Kt2_" in t["symbol"])
    assert v2 == sorted(["size-1 leading extent (RoPE cos)", "unsqueeze(0) of a 2-D table", "unsqueeze(1) of a vector",
                         "size-1 extent, odd stride (x[:, 5:6])", "size-1 extent, any stride (as_strided)",
                         "all extents 1", "size-1 extent (__cuda_array_interface__)", "tuple of arrays"])
    with open(path) as f:
        text = f.read()
    assert "arrays.randn((1024,), 'float32', strides=(-1,), offset=4)," in text
    assert "arrays.randn((), 'float32'" in text and "arrays.zeros((4096,), 'int64'" in text
    assert "tileprobe run cannot make" in text     # negative strides: audited as launched, not runnable


def test_every_layout_comes_back_from_its_cached_symbol(layouts):
    """``record --from-cache`` has only the mangled symbol: its placeholder arguments give the same signature back
    for every layout (transposed, overlapping, negative strides, tuples and lists included)."""
    _, _, truth = layouts
    code = f"""
import json
from tileprobe import _cutile
_cutile.install_fake_driver()
from cuda.tile.compilation import demangle_kernel_name
from tileprobe.probe.define import SpecArrays
from tileprobe.probe.signature import jit_signature
from tileprobe.record.args import args_text
from tileprobe.record.cache import args_from_signature
import kernels
out = {{}}
for symbol in {sorted(t["symbol"] for t in truth.values())!r}:
    args, _ = args_from_signature(demangle_kernel_name(symbol)[1])
    exprs = args_text(args).exprs
    out[symbol] = jit_signature(kernels.any_array, eval("(" + ", ".join(exprs) + ",)", {{"arrays": SpecArrays()}})).symbol
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([DATA, ROOT])))
    assert proc.returncode == 0, proc.stderr
    back = json.loads(proc.stdout)
    assert {truth[n]["label"]: back[t["symbol"]] == t["symbol"] for n, t in truth.items()} == \
        {t["label"]: True for t in truth.values()}


def test_h200_tilegym_recording_gives_every_jit_symbol(tmp_path):
    """The launches recorded on the H200 (2026-12-01) grouped again here: every case's signature is one JIT built
    there, RoPE's included (it was ``…_Kt1_…`` without ``1s1`` before calling conventions were chosen as JIT does)."""
    pytest.importorskip("tilegym")
    os.makedirs(tmp_path / "launches")
    shutil.copy(os.path.join(H200, "launches-tilegym-2026-12-01.jsonl"), tmp_path / "launches")
    with open(os.path.join(H200, "jit-symbols-tilegym-2026-12-01.json")) as f:
        jit = set(json.load(f)["symbols"])
    result = probes_from_log(str(tmp_path))
    symbols = {plan.kernel.name: [c.symbol for c in plan.cases] for _, plan in result.written}
    assert len(symbols) == 7 and all(len(s) == 1 for s in symbols.values())
    assert {name: s[0] in jit for name, s in symbols.items()} == {name: True for name in symbols}
    assert symbols["_rope_kernel"] == [H200_ROPE_JIT]


def test_a_recorded_broadcast_input_can_be_made_for_a_gpu_run():
    """`tileprobe run` fills inputs through torch; an expanded (stride-0) input overlaps itself, which copy_ refuses:
    it is filled through one slice, as the program's own expanded tensor was."""
    import torch

    from tileprobe.run.arrays import TorchArrays
    arrays = TorchArrays("cpu", seed=1)
    t = arrays.randn((2, 16, 8), "bfloat16", strides=(0, 8, 1))
    assert t.stride() == (0, 8, 1) and torch.equal(t[0], t[1]) and t.float().std() > 0.5
    col = arrays.randint((16, 4), "int32", 0, 100, strides=(1, 0))
    assert torch.equal(col[:, 0], col[:, 3]) and len(set(col[:, 0].tolist())) > 4
    assert arrays.rand((3, 5), "float8_e4m3fn", strides=(0, 1)).shape == (3, 5)

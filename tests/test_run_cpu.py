"""``tileprobe run`` pieces that need no GPU: argument packing against cuTile's calling convention and the
cubin's own parameter table, TorchArrays ↔ SpecArrays, the output check, timing statistics with a fake clock,
error classification, the session's bookkeeping and the CLI's output."""
from __future__ import annotations

import ctypes
import hashlib
import inspect
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from types import SimpleNamespace

import cuda.tile as ct
import pytest
import torch

from tileprobe.errors import ProbeError
from tileprobe.jsonrecord import FieldError
from tileprobe.probe.define import SpecArrays, load_probes
from tileprobe.probe.signature import ArraySpec, assign_addresses
from tileprobe.run import check as chk
from tileprobe.run import launch, session, timing, worker
from tileprobe.run.arrays import TorchArrays, is_poisoned, poison_value
from tileprobe.schema import VariantRecord

HERE = os.path.abspath(__file__)
DATA = os.path.join(os.path.dirname(HERE), "data")
FAULTY = os.path.join(DATA, "faulty_kernels.py")
CUBINS = os.path.join(DATA, "cubins")


# --- a kernel with every kind of parameter (compiled once, in a subprocess, for the packing test) -------------

@ct.kernel
def mixed(X, n, m, scale, flag, Y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(X, index=(bid, 0), shape=(TILE, TILE))
    s = ct.sum(ct.astype(x, ct.float32), axis=1) * scale + n + m
    if flag:
        s = s * 2.0
    ct.store(Y, index=(bid,), tile=s)


def mixed_args():
    return (ArraySpec((64, 64), "bfloat16"), 3, -4, 0.5, True, ArraySpec((1024,), "float32", strides=(2,)), 16)


_COMPILE = r"""
import json, sys
from tileprobe import _cutile
_cutile.install_fake_driver()
from cuda.tile.compilation import export_kernel
from tileprobe.probe.define import import_object
from tileprobe.probe.signature import describe_signature, jit_signature
kernel, args = import_object(sys.argv[1] + ":mixed"), import_object(sys.argv[1] + ":mixed_args")()
sig = jit_signature(kernel, args)
export_kernel(kernel, [sig], sys.argv[2], gpu_code="sm_90", output_format="cubin")
print(json.dumps({"symbol": sig.symbol, "signature": describe_signature(sig)}, default=str))
"""


@pytest.fixture(scope="module")
def mixed_cubin(tmp_path_factory):
    """The ``mixed`` kernel exported for sm_90 with the signature JIT infers for :func:`mixed_args`."""
    out = tmp_path_factory.mktemp("mixed") / "mixed.cubin"
    root = os.path.dirname(os.path.dirname(HERE))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x))
    proc = subprocess.run([sys.executable, "-c", _COMPILE, HERE, str(out)], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"compiling the packing fixture failed:\n{proc.stderr[-3000:]}")
    meta = json.loads(proc.stdout.strip().splitlines()[-1])
    return out.read_bytes(), meta["symbol"], meta["signature"]


# --- calling convention -----------------------------------------------------------------------------------

def _values(packed):
    return [(type(v).__name__, v.value) for v in packed]


def test_pack_matches_cubin_parameter_table(mixed_cubin):
    cubin, symbol, signature = mixed_cubin
    args = mixed_args()
    assign_addresses(args)
    params = launch.cubin_params(cubin, symbol)
    packed = launch.pack_arguments(signature, args, [p.size_bytes for p in params])
    launch.check_packing(packed, params)
    x, y = args[0], args[5]
    # pointer, shape, strides (elements) per array; scalars as their C types; the constant TILE omitted
    assert _values(packed) == [
        ("c_ulong", x.address), ("c_int", 64), ("c_int", 64), ("c_int", 64), ("c_int", 1),
        ("c_int", 3), ("c_int", -4), ("c_float", 0.5), ("c_bool", True),
        ("c_ulong", y.address), ("c_int", 1024), ("c_int", 2)]
    assert [p.size_bytes for p in params] == [8, 4, 4, 4, 4, 4, 4, 4, 1, 8, 4, 4]
    assert [p.offset_bytes for p in params][:3] == [0, 8, 12]


def test_cubin_params_agree_with_cuobjdump(mixed_cubin, tmp_path):
    exe = shutil.which("cuobjdump") or next(
        (os.path.join(d, "cuobjdump") for d in _nvidia_bins() if os.path.exists(os.path.join(d, "cuobjdump"))), None)
    cubin, symbol, _ = mixed_cubin
    params = launch.cubin_params(cubin, symbol)
    if exe is None:
        pytest.skip("cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    text = subprocess.run([exe, "-elf", str(path)], capture_output=True, text=True, check=True).stdout
    import re
    found = sorted((int(o, 16), int(off, 16), int(sz, 16)) for o, off, sz in re.findall(
        r"Ordinal : (0x[0-9a-f]+)\s+Offset\s*: (0x[0-9a-f]+)\s+Size\s*: (0x[0-9a-f]+)", text))
    assert found == [(p.ordinal, p.offset_bytes, p.size_bytes) for p in params]


def _nvidia_bins():
    import site
    for d in site.getsitepackages():
        yield os.path.join(d, "nvidia", "cu13", "bin")


def _array_param(dtype, ndim, **kw):
    p = {"kind": "array", "dtype": dtype, "ndim": ndim, "index_dtype": "int32", "shape_divisible_by": [16] * ndim,
         "stride_divisible_by": [16] * (ndim - 1) + [1], "stride_constant": [None] * (ndim - 1) + [1],
         "shape_constant": [None] * ndim, "base_addr_divisible_by": 16}
    p.update(kw)
    return p


MATMUL_SYMBOL = ("matmul_Kt1_A2f16_1v16l0_2t1_3i16_p16_A2f16_1v16l0_2t1_3i16_p16_A2f16_1v16l0_2t1_3i16_p16_"
                 "I128_I128_I64")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_pack_matches_fixture_cubins(arch):
    with open(os.path.join(CUBINS, f"matmul_{arch}.cubin"), "rb") as f:
        params = launch.cubin_params(f.read(), MATMUL_SYMBOL)
    sig = [_array_param("float16", 2)] * 3 + [{"kind": "constant", "value": v} for v in (128, 128, 64)]
    args = [ArraySpec((512, 256), "float16") for _ in range(3)] + [128, 128, 64]
    assign_addresses(args)
    packed = launch.pack_arguments(sig, args)
    launch.check_packing(packed, params)
    assert len(packed) == 15 and [ctypes.sizeof(v) for v in packed[:5]] == [8, 4, 4, 4, 4]
    with pytest.raises(ProbeError, match=r"packed 14 kernel arguments but the cubin's kernel takes 15"):
        launch.check_packing(packed[:-1], params)
    with pytest.raises(ProbeError, match=r"kernel parameter 1: packed 8 B \(c_long\), the cubin expects 4 B"):
        launch.check_packing([packed[0], ctypes.c_int64(1), *packed[2:]], params)


def test_a_signature_item_is_read_once_into_a_record():
    item = _array_param("bfloat16", 2, stride_divisible_by=[8, 1])
    param = launch.SignatureParam.from_wire(item)
    assert (param.kind, param.dtype, param.ndim, param.stride_divisible_by) == ("array", "bfloat16", 2, [8, 1])
    assert launch.SignatureParam.from_wire(param) is param
    x = torch.zeros((32, 64), dtype=torch.bfloat16)
    assert _values(launch.pack_arguments([param], [x])) == _values(launch.pack_arguments([item], [x]))
    with pytest.raises(FieldError, match=r"the variant's signature: SignatureParam.ndim holds '2' \(str\), not an "
                                         r"integer"):
        launch.pack_arguments([dict(item, ndim="2")], [x])


def test_cubin_params_unknown_symbol():
    with open(os.path.join(CUBINS, "matmul_sm_90.cubin"), "rb") as f:
        data = f.read()
    with pytest.raises(ProbeError, match=r"the cubin has no kernel 'nope' \(it has matmul_Kt1"):
        launch.cubin_params(data, "nope")


def test_pack_torch_tensors_strides_in_elements():
    base = torch.zeros(64 * 64 + 64, dtype=torch.bfloat16)
    x = torch.as_strided(base, (32, 64), (128, 2), 0)     # non-contiguous view
    sig = [_array_param("bfloat16", 2, stride_constant=[None, None], stride_divisible_by=[8, 2])]
    packed = launch.pack_arguments(sig, [x])
    assert _values(packed) == [("c_ulong", x.data_ptr()), ("c_int", 32), ("c_int", 64), ("c_int", 128),
                               ("c_int", 2)]


@pytest.mark.parametrize("sig,arg,message", [
    (_array_param("float32", 1), ArraySpec((1000,), "float32"), r"argument 0: extent\[0\] = 1000 is not divisible by 16"),
    (_array_param("float32", 1), ArraySpec((1024,), "float16"), r"dtype is float16, the signature says float32"),
    (_array_param("float32", 2), ArraySpec((1024,), "float32"), r"ndim is 1, the signature says 2"),
    (_array_param("float32", 1), ArraySpec((1024,), "float32", align=4, offset=4), r"base address 0x[0-9a-f]+ is "
                                                                                   r"not divisible by 16 B"),
    (_array_param("float32", 1), ArraySpec((1024,), "float32", strides=(2,)), r"stride\[0\] = 2, the signature "
                                                                              r"fixes it to 1"),
    (_array_param("float32", 1), 3, r"argument 0 is a int; the cubin expects an array"),
    ({"kind": "scalar", "dtype": "int32"}, 2**31, r"argument 0 = 2147483648 does not fit the cubin's int32"),
    ({"kind": "scalar", "dtype": "int32"}, 1.5, r"the cubin expects an integer scalar"),
    ({"kind": "constant", "value": 64}, 128, r"argument 0 is 128 but the cubin was compiled for the constant 64"),
    ({"kind": "constant", "value": True}, 1, r"compiled for the constant True"),
    ({"kind": "tuple", "repr": "T"}, (1, 2), r"parameter kind 'tuple'.*not supported"),
])
def test_pack_refuses_what_the_cubin_does_not_assume(sig, arg, message):
    assign_addresses([arg])
    with pytest.raises(ProbeError, match=message):
        launch.pack_arguments([sig], [arg])


def test_pack_argument_count():
    with pytest.raises(ProbeError, match=r"2 launch arguments but the audited signature has 1 parameters"):
        launch.pack_arguments([{"kind": "constant", "value": 1}], [1, 2])


def test_pack_scalar_types():
    sig = [{"kind": "scalar", "dtype": d} for d in ("int64", "uint8", "float64", "float16", "bfloat16", "bool_")]
    packed = launch.pack_arguments(sig, [2**40, 255, 0.25, 1.5, 1.0, False], [8, 1, 8, 2, 2, 4])
    assert _values(packed) == [("c_long", 2**40), ("c_ubyte", 255), ("c_double", 0.25), ("c_ushort", 0x3E00),
                               ("c_ushort", 0x3F80), ("c_int", 0)]


def test_grid3():
    assert launch.grid3(7) == (7, 1, 1)
    assert launch.grid3((2, 3)) == (2, 3, 1)
    import numpy as np
    assert launch.grid3([np.int64(4), 2]) == (4, 2, 1)
    # not whole numbers: refused, never truncated or taken apart (a hostile tester, 2026-12-02)
    for bad, msg in (((0,), "positive"), ((1, 2, 3, 4), "1 to 3"), (("a",), "tuple of 1 to 3 integers"),
                     ((1, 70000), "exceeds CUDA's limits"), ((1.5,), "integers"), ((True,), "integers"),
                     ((float("nan"),), "integers"), ((float("inf"),), "integers"), ((x for x in (4,)), "integers"),
                     ("44", "integers"), ((-1,), "positive")):
        with pytest.raises(ProbeError, match=msg):
            launch.grid3(bad)


def test_launch_convention_is_documented_with_its_source():
    doc = launch.__doc__
    for needle in ("compilation.rst", "block (1, 1, 1)", "test_export_compat.py", "REQNTID",
                   "cuOccupancyMaxActiveBlocksPerMultiprocessor"):
        assert needle in doc


@pytest.mark.parametrize("text,code", [
    ("CUDA error: an illegal memory access was encountered", 700),
    ("RuntimeError: CUDA error: unspecified launch failure", 719),
    ("CUDAError: CUDA_ERROR_MISALIGNED_ADDRESS: misaligned", 716),
    ("CUDA_ERROR_INVALID_VALUE: invalid argument", 1),
    ("nothing to see", None),
])
def test_error_code_from_text(text, code):
    assert launch.error_code_from_text(text) == code


def test_classify_exceptions():
    f = worker.failure_of(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert (f.status, f.fatal, f.cuda_error) == ("crash", True, 700)
    assert "the worker is replaced" in f.error
    f = worker.failure_of(launch.CudaFault(701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "launch"))
    assert (f.status, f.fatal) == ("crash", False)
    f = worker.failure_of(launch.CudaFault(209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "cuLibraryLoadData"), launched=False)
    assert (f.status, f.cuda_error) == ("error", 209) and "NO_BINARY_FOR_GPU" in f.error
    f = worker.failure_of(ProbeError("args() failed: KeyError: 'M'", "/p.py", 3))
    assert f.status == "error" and f.error.startswith("/p.py:3: args() failed")


# --- TorchArrays mirrors SpecArrays ---------------------------------------------------------------------------

def _public_methods(cls):
    return {n: inspect.signature(f) for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def test_torch_arrays_mirror_spec_arrays():
    spec, torch_ = _public_methods(SpecArrays), _public_methods(TorchArrays)
    assert set(spec) == {"empty", "zeros", "full", "randn", "rand", "randint", "randperm", "custom"}
    assert set(spec) <= set(torch_)
    for name, sig in spec.items():
        assert torch_[name] == sig, f"TorchArrays.{name}{torch_[name]} != SpecArrays.{name}{sig}"


def _same_layout(spec: ArraySpec, t: torch.Tensor):
    assert tuple(t.shape) == spec.shape and tuple(t.stride()) == spec.strides
    assert str(t.dtype).removeprefix("torch.") == spec.dtype
    assert (t.data_ptr() - spec.offset) % spec.align == 0


def test_torch_arrays_same_layout_as_specs():
    calls = [("empty", ((16, 8), "float32"), {"strides": (16, 1)}),
             ("zeros", ((32,), "int32"), {"align": 1024}),
             ("full", ((4, 4), "bfloat16", 2.5), {"offset": 6, "align": 16}),
             ("randn", ((8, 8), "float16"), {"strides": (1, 8)}),
             ("rand", ((64,), "float8_e4m3fn"), {"low": 0.001, "high": 0.011}),
             ("randint", ((16, 4), "uint8", 0, 256), {}),
             ("randperm", (100, "int32"), {}),
             ("custom", ((8,), "float32", lambda t, g: t.fill_(3.0)), {})]
    for name, a, kw in calls:
        s = getattr(SpecArrays(), name)(*a, **kw)
        t = getattr(TorchArrays("cpu", seed=1), name)(*a, **kw)
        _same_layout(s, t)


def test_torch_arrays_values():
    arr = TorchArrays("cpu", seed=3)
    assert torch.isnan(arr.empty((4, 4), "float32")).all()
    assert (arr.empty((8,), "int32") == -2**31).all() and (arr.empty((8,), "uint8") == 255).all()
    assert torch.isnan(arr.empty((8,), "float8_e4m3fn").float()).all()
    assert torch.isnan(arr.empty((8,), "bfloat16").float()).all()
    assert (arr.full((3,), "float8_e4m3fn", 2.0).float() == 2.0).all()
    r = arr.randint((1000,), "uint8", 0, 256)
    assert 0 <= int(r.min()) and int(r.max()) <= 255 and len(torch.unique(r)) > 200
    u = arr.rand((1000,), "float32", low=2.0, high=3.0)
    assert 2.0 <= float(u.min()) and float(u.max()) < 3.0
    assert sorted(arr.randperm(50, "int32").tolist()) == list(range(50))
    seen = {}
    arr.custom((4,), "float32", lambda t, g: seen.setdefault("g", g) and None)
    assert seen["g"] is arr.generator
    strided = arr.randn((4, 4), "float32", strides=(8, 2))
    assert tuple(strided.stride()) == (8, 2) and not strided.is_contiguous()


def test_torch_arrays_fresh_per_seed():
    a = TorchArrays("cpu", seed=1).randn((64,), "float32")
    b = TorchArrays("cpu", seed=1).randn((64,), "float32")
    c = TorchArrays("cpu", seed=2).randn((64,), "float32")
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_torch_arrays_refuse_impossible_layouts():
    arr = TorchArrays("cpu")
    with pytest.raises(ProbeError, match="negative strides"):
        arr.zeros((4,), "float32", strides=(-1,))
    with pytest.raises(ProbeError, match=r"offset=3 B is not a multiple of the float32 element size \(4 B\)"):
        arr.zeros((4,), "float32", offset=3)


def test_faulty_probes_layouts_agree():
    for p in load_probes(FAULTY):
        for case in p.case_grid():
            specs = p.launch_args(case)
            tensors = p.launch_args(case, TorchArrays("cpu"))
            for s, t in zip(specs, tensors):
                if isinstance(s, ArraySpec):
                    _same_layout(s, t)
                else:
                    assert s == t


def test_poison_values():
    assert math.isnan(poison_value("bfloat16"))
    assert poison_value("int8") == -128 and poison_value("uint16") == 65535 and poison_value("bool") is None
    t = torch.tensor([1, -2**31, 3], dtype=torch.int32)
    assert is_poisoned(t).tolist() == [False, True, False]


# --- check --------------------------------------------------------------------------------------------------

def test_check_ok_and_wrong_by_relative_error():
    ref = torch.linspace(-1, 1, 1000)
    ok = chk.compare((ref * (1 + 1e-3)).to(torch.bfloat16), ref, arg=1)
    assert ok.status == "ok" and ok.tolerance == 2e-2 and ok.rel_err == pytest.approx(1e-3, rel=1, abs=5e-3)
    bad = chk.compare((ref * 1.1).to(torch.bfloat16), ref, arg=1)
    assert bad.status == "wrong" and bad.rel_err == pytest.approx(0.1, rel=0.05)
    assert "argument 1: relative error" in bad.message and "> tolerance 0.02" in bad.message


def test_check_nan_and_unwritten_fail():
    out = torch.ones(100)
    out[7] = float("nan")
    r = chk.compare(out, torch.ones(100))
    assert r.status == "wrong" and r.nan_count == 1 and "1 of 100 elements are NaN" in r.message
    ints = torch.full((10,), -2**31, dtype=torch.int32)
    ints[:8] = torch.arange(8)
    r = chk.compare(ints, torch.arange(10, dtype=torch.int32))
    assert r.status == "wrong" and r.unwritten_count == 2 and "never written" in r.message
    both = torch.tensor([float("nan"), 1.0])
    assert chk.compare(both.clone(), both).status == "ok"   # NaN expected where the reference has NaN


def test_check_tolerance_by_dtype_and_override():
    assert chk.tolerance_for("float16") == 5e-3 and chk.tolerance_for(torch.float32) == 1e-4
    assert chk.tolerance_for("bfloat16", 0.5) == 0.5
    assert chk.tolerance_for("bfloat16", {1: 0.3}, arg=1) == 0.3
    assert chk.tolerance_for("bfloat16", {"bfloat16": 0.4}, arg=2) == 0.4
    assert chk.tolerance_for("bfloat16", {3: 0.3}, arg=1) == 2e-2
    out = torch.ones(10) * 1.001
    assert chk.compare(out, torch.ones(10)).status == "wrong"
    assert chk.compare(out, torch.ones(10), tolerance=1e-2).status == "ok"


def test_check_shape_scalar_and_zero_reference():
    r = chk.compare(torch.zeros(4, 4), torch.zeros(4))
    assert r.status == "wrong" and "reference shape (4,) != output shape (4, 4)" in r.message
    assert chk.compare(torch.full((8,), 2.0), 2.0).status == "ok"
    z = chk.compare(torch.full((4,), 0.5), torch.zeros(4))
    assert z.status == "wrong" and z.rel_err == pytest.approx(1.0)   # absolute error when ‖ref‖ = 0


def test_check_outputs_combines_and_validates():
    args = (torch.ones(4), torch.ones(4) * 2, torch.ones(4) * 3, 5)
    res = chk.check_outputs(args, {1: torch.ones(4) * 2, 2: torch.ones(4) * 3.5})
    assert res.status == "wrong" and res.arg == 2 and [p["status"] for p in res.per_arg] == ["ok", "wrong"]
    assert chk.check_outputs(args, {1: torch.ones(4) * 2}).status == "ok"
    with pytest.raises(TypeError, match="names argument 3"):
        chk.check_outputs(args, {3: 5})
    with pytest.raises(TypeError, match=r"must return \{arg_index: expected\}"):
        chk.check_outputs(args, [1])


# --- timing with a fake clock ---------------------------------------------------------------------------------

class FakeGPU:
    """A clock that advances by a scripted kernel time per launch, and a fixed time per flush (ms)."""

    def __init__(self, durations_us, flush_us=50.0):
        self.now_ms = 0.0
        self.durations = list(durations_us)
        self.launches = self.flushes = self.syncs = self.events = 0
        self.flush_us = flush_us

    def launch(self):
        d = self.durations[self.launches % len(self.durations)]
        self.launches += 1
        self.now_ms += d / 1000.0

    def flush(self):
        self.flushes += 1
        self.now_ms += self.flush_us / 1000.0

    def synchronize(self):
        self.syncs += 1

    def event(self):
        gpu = self
        self.events += 1

        class Event:
            def record(self):
                self.t = gpu.now_ms

            def elapsed_time(self, end):
                return end.t - self.t
        return Event()


def test_measure_with_fake_clock():
    gpu = FakeGPU([100.0, 110.0, 90.0, 100.0])
    stats, times = timing.measure(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize,
                                  flush=gpu.flush, reps=40, warmup=2, warmup_ms=1.0)
    assert stats.reps == 40 and len(times) == 40
    assert stats.median_us == pytest.approx(100.0) and stats.min_us == pytest.approx(90.0)
    assert stats.p25_us == pytest.approx(97.5) and stats.p75_us == pytest.approx(102.5)
    # the flush is outside the events: each time is one kernel's own, never kernel + flush
    assert {round(t, 6) for t in times} <= {100.0, 110.0, 90.0}
    warm = gpu.launches - 40 - 3
    assert warm == 10   # ceil(1 ms / 0.1 ms estimate) = 10 ≥ warmup 2
    assert gpu.flushes == 40 + 3 and gpu.events == 2 * (40 + 3)   # a flush before each timed launch; none in the warm-up


def test_measure_warmup_cap_and_reps_check():
    gpu = FakeGPU([1.0])
    timing.measure(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize, reps=5, warmup=3,
                   warmup_ms=25.0, max_warmup=50)
    assert gpu.launches == 3 + 50 + 5 and gpu.flushes == 0
    with pytest.raises(ValueError, match="at least one timed repetition"):
        timing.measure(gpu.launch, event_factory=gpu.event, synchronize=gpu.synchronize, reps=0)


def test_quantiles_match_statistics_inclusive():
    xs = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0, 3.5])
    q = statistics.quantiles(xs, n=4, method="inclusive")
    assert timing.quantile(xs, 0.25) == pytest.approx(q[0]) and timing.quantile(xs, 0.75) == pytest.approx(q[2])
    assert timing.quantile([7.0], 0.5) == 7.0
    with pytest.raises(ValueError):
        timing.quantile([], 0.5)


def test_summarize_and_warnings():
    s = timing.summarize([4.0, 4.1, 3.9, 4.0])
    assert s.median_us == 4.0 and s.reps == 4
    w = timing.timing_warnings(s)
    assert len(w) == 1 and "too short to time meaningfully" in w[0]
    noisy = timing.summarize([100, 80, 120, 100, 70, 130])
    assert noisy.spread_pct > 5 and any("high spread" in x for x in timing.timing_warnings(noisy))
    assert timing.timing_warnings(timing.summarize([100.0, 100.5, 99.5])) == []
    assert timing.flush_bytes(50 * 2**20) == 256 * 2**20 and timing.flush_bytes(200 * 2**20) == 400 * 2**20
    assert s.to_dict()["spread_pct"] == pytest.approx(s.spread_pct, abs=1e-3)


# --- session bookkeeping and CLI output -----------------------------------------------------------------------

def _rec(case, hints, median=None, status="ok", arch="sm_90", **kw):
    r = VariantRecord(kernel="k", probe="/x/p.py", case=case, hints=hints, arch=arch, tileiras="t", status="ok",
                      **kw)
    if median is not None or status != "ok":
        r.run = session.new_run(status=status, median_us=median)
    return r


def test_best_hints_and_default():
    recs = [_rec({"T": 1}, {"occupancy": 1}, 30.0), _rec({"T": 1}, {"occupancy": 2}, 20.0),
            _rec({"T": 1}, {"occupancy": 4}, 10.0, status="wrong"), _rec({"T": 2}, {"occupancy": 2}, 5.0)]
    best = {json.dumps(b["case"]): b for b in session.best_hints(recs)}
    b1 = best['{"T": 1}']
    assert b1["best_hints"] == {"occupancy": 2} and b1["speedup"] == pytest.approx(1.5)
    assert best['{"T": 2}']["speedup"] is None
    assert session.is_default_variant(_rec({}, {"occupancy": None})) and session.is_default_variant(_rec({}, {}))
    assert not session.is_default_variant(_rec({}, {"occupancy": 2}))


def test_run_dict_has_every_field():
    d = worker.run_dict(status="ok")
    for k in ("status", "median_us", "p25_us", "p75_us", "reps", "rel_err", "warnings", "driver_ctas_per_sm",
              "static_ctas_per_sm", "occupancy_agrees", "error"):
        assert k in d
    assert d["block"] == [1, 1, 1] and worker.run_dict()["warnings"] is not worker.run_dict()["warnings"]


def test_grid_hints_fill_declared_values():
    rec = {"hints": {"occupancy": None, "num_ctas": 2}, "effective_hints": {"occupancy": 4, "num_ctas": 2}}
    assert worker.grid_hints(rec) == {"occupancy": 4, "num_ctas": 2}


def test_resolve_probe_path(tmp_path):
    p = tmp_path / "probe_a.py"
    p.write_text("")
    assert session.resolve_probe_path("/elsewhere/probe_a.py", [str(p)]) == str(p)
    assert session.resolve_probe_path("/elsewhere/probe_a.py", [], [str(tmp_path)]) == str(p)
    assert session.resolve_probe_path(str(p)) == str(p)
    assert session.resolve_probe_path("/elsewhere/none.py", [str(p)], [str(tmp_path)]) is None


def test_load_bundle_and_cubin_getters(tmp_path):
    from tileprobe.schema import dump
    cubin = b"\x7fELF fake"
    sha = hashlib.sha256(cubin).hexdigest()
    rec = _rec({}, {"occupancy": 1}, cubin_sha256=sha, symbol="k")
    (tmp_path / "cubins").mkdir()
    (tmp_path / "cubins" / f"{sha}.cubin").write_bytes(cubin)
    (tmp_path / "audit.json").write_text(json.dumps(dump([rec], {"tileiras": ["t"]})))
    records, env, get = session.load_bundle(str(tmp_path))
    assert records[0].cubin_sha256 == sha and get(sha) == cubin and get("0" * 64) is None
    assert env["bundle"] == str(tmp_path)
    assert session.cubin_getter(str(tmp_path))(sha) == cubin
    assert session.cubin_getter({sha: cubin})(sha) == cubin
    assert session.cubin_getter(SimpleNamespace(cubins={sha: cubin}))(sha) == cubin
    assert session.cubin_getter(SimpleNamespace(cubin=lambda s: cubin))(sha) == cubin
    with pytest.raises(Exception, match="not a tileprobe bundle"):
        session.load_bundle(str(tmp_path / "cubins"))


class FakeWatchdog:
    restarts = 0

    def __init__(self, outcome):
        self.outcome = outcome
        self.tasks = []

    def start(self):
        return {"sm": "sm_90", "name": "Fake"}

    def submit(self, fn, kwargs, timeout_s=None):
        self.tasks.append((fn, kwargs))
        return self.outcome


def test_run_probes_checks_cubin_and_probe_before_running(tmp_path):
    from tileprobe.run.watchdog import TaskOutcome
    probe = tmp_path / "p.py"
    probe.write_text("")
    good = b"cubin bytes"
    sha = hashlib.sha256(good).hexdigest()
    recs = [_rec({}, {}, cubin_sha256=sha, symbol="k"), _rec({}, {}, cubin_sha256="ab" * 32, symbol="k"),
            _rec({}, {}, cubin_sha256=sha, symbol="k")]
    recs[0].probe = recs[1].probe = str(probe)
    wd = FakeWatchdog(TaskOutcome("done", value={"status": "ok", "median_us": 3.0}, wall_s=0.5, worker_pid=9))
    res = session.run_probes(recs, {sha: good, "ab" * 32: b"other bytes"}, watchdog=wd)
    assert recs[0].run.status == "ok" and recs[0].run.roundtrip_s == 0.5 and recs[0].run.worker_pid == 9
    assert recs[1].run.status == "error" and "hash to another SHA-256" in recs[1].run.error
    assert recs[2].run.status == "error" and "not found on this machine" in recs[2].run.error
    assert len(wd.tasks) == 1 and wd.tasks[0][1]["cubin"] == good and res.ran == 3
    assert res.environment["run"]["block"] == [1, 1, 1]


def test_cli_registers_run_and_renders(capsys):
    from tileprobe.cli import build_parser
    from tileprobe.cli import run as run_cli
    from tileprobe.report.common import run_cell
    from tileprobe.report.markdown import run_markdown
    args = build_parser().parse_args(["run", "a.py", "--timeout", "5", "--reps", "7", "--format", "markdown"])
    assert args.func is run_cli.cmd_run and args.timeout == 5 and args.reps == 7
    r = _rec({"T": 1}, {"occupancy": 2}, 12.5, threads=128, registers=32, shared_bytes=0, stack_bytes=0,
             ctas_per_sm=8, limiter="threads")
    r.run = r.run.replace(rel_err=1e-3, spread_pct=1.0, driver_ctas_per_sm=8, static_ctas_per_sm=8,
                          occupancy_agrees=True)
    r2 = _rec({"T": 1}, {"occupancy": 1}, status="hang", threads=128, registers=32, shared_bytes=0, stack_bytes=0,
              ctas_per_sm=8, limiter="threads")
    r2.run.error = "no result within 5 s"
    res = session.RunResult([r, r2], {"gpu": {"name": "H200", "sm": "sm_90", "driver": "580"}})
    md = run_markdown(res.records, res.environment, advice=res.advice(), best=res.best_hints())
    assert "## tileprobe run" in md and "| hang |" in md and "12.5" in md and "no result within 5 s" in md
    run_cli.emit(res, SimpleNamespace(json=None, format="table"))
    out = capsys.readouterr().out
    assert "median" in out and "12.5" in out and "hang" in out
    assert run_cell(r) == "ok 12.5 µs ±1.0%"


# --- the worker's variant task on CPU, with a fake kernel that computes through the packed pointers ---------

def _healthy_record(**kw):
    arr = _array_param("float32", 1, stride_divisible_by=[1])
    rec = {"kernel": "healthy", "probe": FAULTY, "case": {}, "hints": {}, "effective_hints": {}, "arch": "sm_90",
           "symbol": "add_one", "signature": [arr, arr, {"kind": "constant", "value": 256}], "threads": 128,
           "registers": 12, "driver_shared_bytes": 0, "ctas_per_sm": 16, "cubin_sha256": "ab" * 32}
    rec.update(kw)
    return rec


class FakeKernel:
    """Stands in for LoadedKernel: the parameter table of (X, Y) float32 1-D arrays, and a launch that runs
    ``body(x, y)`` on the memory the packed pointers address (CPU tensors)."""
    params = [launch.KernelParam(i, 0, s) for i, s in enumerate([8, 4, 4, 8, 4, 4])]

    def __init__(self, body, regs=12):
        self.body, self.regs, self.launches = body, regs, 0

    def driver_facts(self, threads):
        return {"driver_ctas_per_sm": 16, "driver_ctas_per_sm_block1": 32, "driver_registers": self.regs,
                "driver_shared_bytes": 0, "driver_local_bytes": 0, "driver_max_threads_per_cta": 128}

    def launch(self, stream, grid, packed):
        import numpy as np
        self.launches += 1
        px, nx, _, py, ny, _ = [p.value for p in packed]
        x = np.ctypeslib.as_array(ctypes.cast(px, ctypes.POINTER(ctypes.c_float)), shape=(nx,))
        y = np.ctypeslib.as_array(ctypes.cast(py, ctypes.POINTER(ctypes.c_float)), shape=(ny,))
        self.body(x, y)


class FakeTimer:
    def __init__(self, kernel_us=42.0):
        self.gpu = FakeGPU([kernel_us])

    def measure(self, launch_fn, **kw):
        def both():
            launch_fn()
            self.gpu.launch()
        return timing.measure(both, event_factory=self.gpu.event, synchronize=self.gpu.synchronize,
                              flush=self.gpu.flush, **kw)


@pytest.fixture
def cpu_worker(monkeypatch):
    monkeypatch.setattr(worker._STATE, "device", "cpu")
    monkeypatch.setattr(worker._STATE, "synchronize", lambda: None)
    monkeypatch.setattr(worker._STATE, "stream", None)
    monkeypatch.setattr(worker._STATE, "num_sms", 4)
    monkeypatch.setattr(worker._STATE, "timer", FakeTimer())

    def use(body, regs=12):
        k = FakeKernel(body, regs)
        monkeypatch.setattr(worker, "_kernel", lambda cubin, symbol, sha: k)
        return k
    return use


def _add(k):
    def body(x, y):
        y[:] = x + k
    return body


def test_run_variant_ok_checked_and_timed(cpu_worker):
    k = cpu_worker(_add(1.0))
    out = worker.run_variant(_healthy_record(), b"", FAULTY, seed=3, reps=7, warmup=1, warmup_ms=0.0)
    assert out["status"] == "ok", out["error"]
    assert out["checked"] and out["rel_err"] == 0.0 and out["tolerance"] == 1e-4
    assert out["median_us"] == pytest.approx(42.0) and out["reps"] == 7 and out["grid"] == [4, 1, 1]
    assert out["block"] == [1, 1, 1] and out["seed"] == 3 and out["threads"] == 128
    assert (out["driver_ctas_per_sm"], out["static_ctas_per_sm"], out["occupancy_agrees"]) == (16, 16, True)
    assert out["warnings"] == [] and k.launches == 1 + 3 + 1 + 7   # checked launch, estimate, warm-up, reps
    assert set(worker.RUN_FIELDS) <= set(out)


@pytest.mark.parametrize("body,count_field", [(_add(2.0), None), (lambda x, y: None, "nan_count")])
def test_run_variant_wrong_and_unwritten(cpu_worker, body, count_field):
    cpu_worker(body)
    out = worker.run_variant(_healthy_record(), b"", FAULTY, reps=3, warmup=1, warmup_ms=0.0)
    assert out["status"] == "wrong" and out["checked"]
    if count_field:
        assert out[count_field] == 1024 and "NaN" in out["error"]
    else:
        assert out["rel_err"] > 0.1 and "relative error" in out["error"]
    assert out["median_us"] is not None   # a wrong variant is still timed


def test_run_variant_sticky_error_is_a_fatal_crash(cpu_worker):
    def body(x, y):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    cpu_worker(body)
    out = worker.run_variant(_healthy_record(), b"", FAULTY)
    assert (out["status"], out["fatal"], out["cuda_error"]) == ("crash", True, 700)
    assert out["median_us"] is None


def test_run_variant_setup_errors(cpu_worker):
    cpu_worker(_add(1.0), regs=40)
    out = worker.run_variant(_healthy_record(ctas_per_sm=8), b"", FAULTY, reps=2, warmup=1, warmup_ms=0.0)
    assert out["status"] == "ok" and out["occupancy_agrees"] is False
    assert any("the driver says 16 CTAs/SM for 128 threads, the static model says 8" in w for w in out["warnings"])
    assert any("registers per thread: the cubin says 12, the driver 40" in w for w in out["warnings"])
    bad = _healthy_record(signature=_healthy_record()["signature"][:2] + [{"kind": "constant", "value": 128}])
    out = worker.run_variant(bad, b"", FAULTY)
    assert out["status"] == "error" and "compiled for the constant 128" in out["error"]
    out = worker.run_variant(_healthy_record(kernel="nope"), b"", FAULTY)
    assert out["status"] == "error" and "no probe named 'nope'" in out["error"]


def test_nvidia_smi_fields_and_fallbacks(tmp_path, monkeypatch):
    """One query for all fields; per-field queries when the driver rejects one; device 0 when the bus id is
    not understood; nothing when nvidia-smi is missing."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text(r'''#!/bin/bash
q="${1#--query-gpu=}"
for a in "$@"; do [ "$a" = "BAD" ] && exit 2; done
[[ "$q" == *clocks.applications.graphics* && "$q" == *,* ]] && exit 2
out=""; IFS=',' read -ra F <<< "$q"
for f in "${F[@]}"; do case $f in driver_version) v=580.159;; clocks.sm) v=1980;; clocks.applications.graphics) v="[N/A]";; pstate) v=P0;; *) v=7;; esac; out="$out${out:+, }$v"; done
echo "$out"
''')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    for bus in (None, "BAD"):
        got = worker.nvidia_smi(bus)
        assert got["driver"] == "580.159" and got["clock_sm_mhz"] == 1980.0 and got["pstate"] == "P0"
        assert got["clock_app_sm_mhz"] is None and got["temperature_c"] == 7.0
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert worker.nvidia_smi() == {}


def test_c_string_stops_at_first_nul():
    from tileprobe.run.worker import c_string
    assert c_string(b"0000:19:00.0\x00\x7f\x00garbage") == "0000:19:00.0"
    assert c_string("0000:19:00.0\x00") == "0000:19:00.0"

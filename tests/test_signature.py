"""JIT-faithful signatures without a driver: cuTile's own inference on fake DLPack arrays."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data")


def _run(code: str) -> str:
    """Run code in a fresh interpreter (the fake driver is process-wide) and return its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), DATA]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_contiguous_arrays_get_jit_assumptions():
    out = _run("""
from tileprobe.probe.signature import ArraySpec, jit_signature
import simple_kernels as k
a = lambda: ArraySpec((4096,), "float32")
sig = jit_signature(k.vadd, (a(), a(), a(), 256))
p = sig.parameters[0]
print(p.dtype.name, p.shape_divisible_by, p.stride_constant, p.base_addr_divisible_by, p.may_alias_internally,
      p.index_dtype.name, sig.parameters[3].value, sig.calling_convention.name)
print(sig.symbol)
""").split("\n")
    assert out[0] == "float32 (16,) (1,) 16 False int32 256 cutile_python_v1"
    assert out[1] == "vadd_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256"


def test_misaligned_odd_shaped_and_strided_arrays_lose_assumptions():
    out = _run("""
from tileprobe.probe.signature import ArraySpec, jit_signature
import simple_kernels as k
x = ArraySpec((4095,), "float32", offset=4)            # base address 4 mod 16, odd length
y = ArraySpec((4096,), "float32", strides=(2,))        # every other element
z = ArraySpec((4096,), "float32")
sig = jit_signature(k.vadd, (x, y, z, 256))
px, py, pz = sig.parameters[:3]
print(px.base_addr_divisible_by, px.shape_divisible_by, py.stride_constant, py.stride_divisible_by,
      pz.base_addr_divisible_by)
""")
    # cuTile 1.7.0 records only the 16-byte facts: anything less is "no assumption" (1).
    assert out.strip() == "1 (1,) (None,) (1,) 16"


def test_bf16_fp8_and_runtime_scalars():
    out = _run("""
from tileprobe.probe.signature import ArraySpec, jit_signature, describe_signature
import simple_kernels as k
sig = jit_signature(k.scale2d, (ArraySpec((64, 512), "bfloat16"), ArraySpec((64, 512), "float8_e4m3fn"), 3, 4, 512))
d = describe_signature(sig)
print(d[0]["dtype"], d[1]["dtype"], d[2]["kind"], d[2]["dtype"], d[3]["value"], d[0]["stride_divisible_by"])
""")
    assert out.strip() == "bfloat16 float8_e4m3fn scalar int32 4 [8, 1]"


def test_fake_driver_answers_only_what_inference_asks():
    """A cuTile release that starts asking the driver for more must fail here, not mis-infer silently."""
    out = _run("""
from tileprobe import _cutile
from tileprobe.probe.signature import ArraySpec, jit_signature
import simple_kernels as k
jit_signature(k.vadd, (ArraySpec((64,), "float32"),) * 3 + (64,))
print(sorted(set(_cutile.FAKE_DRIVER_CALLS)))
""")
    calls = eval(out.strip())
    assert not [c for c in calls if "unsupported" in c], calls
    assert set(calls) <= {"cuInit", "cuDriverGetVersion", "cuPointerGetAttribute"}


def test_cutile_rejects_wrong_argument_count_with_probe_error():
    out = _run("""
from tileprobe.probe.signature import ArraySpec, jit_signature
from tileprobe.errors import ProbeError
import simple_kernels as k
try:
    jit_signature(k.vadd, (ArraySpec((64,), "float32"),))
except ProbeError as e:
    print("ProbeError:", e)
""")
    assert out.startswith("ProbeError: cuTile rejected the launch arguments")


def test_unknown_dtype_and_bad_strides_are_probe_errors():
    from tileprobe.errors import ProbeError
    from tileprobe.probe.signature import ArraySpec
    with pytest.raises(ProbeError, match="unsupported array dtype 'float4_e2m1fn'"):
        ArraySpec((4,), "float4_e2m1fn")
    with pytest.raises(ProbeError, match=r"strides \(1,\) do not match shape \(2, 2\)"):
        ArraySpec((2, 2), "float32", strides=(1,))
    with pytest.raises(ProbeError, match="power of two"):
        ArraySpec((2,), "float32", align=24)


def test_addresses_are_aligned_and_disjoint():
    from tileprobe.probe.signature import ArraySpec, assign_addresses
    specs = [ArraySpec((1000,), "float32"), ArraySpec((10,), "int8", align=512, offset=2), ArraySpec((3,), "float64")]
    assign_addresses(specs)
    assert specs[0].address % 4096 == 0
    assert specs[1].address % 512 == 2
    spans = sorted((s.address, s.address + s.nbytes) for s in specs)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))

"""A program that launches cuTile kernels (under tests/data/record/fake_launch), for tests/test_record.py and
tests/test_record_layouts.py.

    python program.py basic | crash-exc | crash-kill | many | child
    python program.py rope TRUTH.json | layouts TRUTH.json

``rope`` and ``layouts`` launch torch CPU tensors and write, per launch, the signature cuTile's
``KernelSignature.from_kernel_args`` gives for the very tensors launched (each described to cuTile by a DLPack
stand-in with the tensor's own address, shape, strides and dtype: cuTile refuses CPU tensors), under the calling
convention JIT picks: ``cutile_python_v2`` when an array of at most 5 dimensions has a size-1 extent or an argument
is a tuple (cuTile ``cext/tile_kernel.cpp``, ``make_signature``), else ``cutile_python_v1``.
"""
import json
import os
import signal
import subprocess
import sys

from cuda.tile import launch   # taken when the program starts, before any launch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels as k   # noqa: E402


def basic():
    import cuda.tile as ct
    for _ in range(5):
        launch(None, (16,), k.vadd, k.vadd_args(4096))                         # 256-B-aligned bases
    launch(None, (32,), k.vadd, k.vadd_args(8192))                             # same signature as above
    launch(None, (16,), k.vadd, k.vadd_args(4100, align_offset=8))             # another signature (8-B base)
    ct.launch(None, (16,), k.vadd.replace_hints(occupancy=4), k.vadd_args(4096))
    ct.launch(None, (32,), k.scale_rows, k.scale_args())
    runtime = ct.kernel(k.copy_fn, occupancy=2)
    ct.launch(None, (8,), runtime, k.vadd_args(2048)[:2] + (256,))
    rc = subprocess.run([sys.executable, os.path.abspath(__file__), "child"]).returncode
    print(f"result: {sum(range(10))} child={rc}")


def timeout():
    """A launch under a short ct.compiler_timeout whose (simulated, FAKE_COMPILE_S) compile is longer —
    the program catches cuTile's TileCompilerTimeoutError as a TileGym op's caller would — then one under a timeout
    the compile fits in, and one with no timeout at all."""
    import cuda.tile as ct
    from cuda.tile._exception import TileCompilerTimeoutError
    try:
        with ct.compiler_timeout(0.05):
            ct.launch(None, (16,), k.vadd, k.vadd_args(4096))
    except TileCompilerTimeoutError as e:
        print(f"op failed: {str(e).splitlines()[0]}")
    with ct.compiler_timeout(30):
        ct.launch(None, (32,), k.scale_rows, k.scale_args())
    ct.launch(None, (8,), k.vadd, k.vadd_args(2048))


def child():
    for _ in range(3):
        launch(None, (4,), k.vadd, k.vadd_args(1024, tile=128))


def many():
    # 40 shapes of distinct divisibility classes... and frequencies 1..40
    for i in range(1, 41):
        for _ in range(i):
            launch(None, (1,), k.vadd, k.vadd_args(1024 * i + i % 3, tile=128))


def crash_exc():
    for _ in range(4):
        launch(None, (16,), k.vadd, k.vadd_args(4096))
    raise RuntimeError("the program fails after launching")


def crash_kill():
    for _ in range(4):
        launch(None, (16,), k.vadd, k.vadd_args(4096))
    os.kill(os.getpid(), signal.SIGKILL)


def _stand_in(t):
    from tileprobe.probe.signature import ArraySpec
    if isinstance(t, (tuple, list)):
        return type(t)(_stand_in(x) for x in t)
    if hasattr(t, "data_ptr"):
        return ArraySpec(tuple(t.shape), t.dtype, strides=t.stride(), address=t.data_ptr())
    return t


def _needs_v2(t) -> bool:
    if isinstance(t, tuple):
        return True
    if isinstance(t, list):
        return any(_needs_v2(x) for x in t)
    shape = getattr(t, "shape", None)
    if shape is None and hasattr(t, "__cuda_array_interface__"):
        shape = t.__cuda_array_interface__["shape"]
    return shape is not None and 1 in tuple(shape) and len(shape) <= 5


def jit_truth(kernel, args) -> str:
    """The symbol JIT compiles ``kernel`` under for ``args`` (see the module docstring)."""
    from tileprobe import _cutile
    _cutile.install_fake_driver()
    from cuda.tile.compilation import CallingConvention, KernelSignature
    cc = CallingConvention.cutile_python_v2() if any(_needs_v2(a) for a in args) else \
        CallingConvention.cutile_python_v1()
    return KernelSignature.from_kernel_args(kernel, tuple(_stand_in(a) for a in args), cc).symbol


def rope():
    """TileGym's apply_rope_base host code: cos/sin of shape (1, seq, dim), launched with replace_hints(occupancy=9)
    (tilegym 1.5.1 ``_select_rope_kernel`` when autotuning is off); then the same tables expanded over the batch."""
    import torch
    import cuda.tile as ct
    torch.manual_seed(0)
    bf16 = torch.bfloat16
    q = torch.randn(2, 4, 64, 32, dtype=bf16)
    ang = torch.randn(1, 64, 8)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(bf16)          # (1, 64, 16), as TileGym's callers make it
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(bf16)
    kernel = k.rope_like.replace_hints(occupancy=9)
    truth = {}
    for cos_bs, c, s in ((1, cos, sin), (2, cos.expand(2, -1, -1), sin.expand(2, -1, -1))):   # stride 0
        args = (q, c, s, cos_bs, 64, 4, 8)
        for _ in range(3 if cos_bs == 1 else 1):
            ct.launch(None, (2 * 64, 1, 1), kernel, args)
        truth[str(cos_bs)] = jit_truth(k.rope_like, args)
    with open(sys.argv[2], "w") as f:
        json.dump(truth, f)


class _CudaArray:
    """A __cuda_array_interface__ producer (as CuPy or Numba arrays are): byte strides, may be negative."""

    def __init__(self, shape, byte_strides, ptr, typestr="<f4"):
        self._cai = {"shape": shape, "typestr": typestr, "strides": byte_strides, "data": (ptr, False),
                     "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self._cai


def layout_args() -> list:
    """(label, argument) per layout a real program passes."""
    import torch
    bf16 = torch.bfloat16
    buf = torch.empty(8 * 4096, dtype=bf16)
    row = torch.empty(1024, dtype=bf16)
    table = torch.empty(1024, 128, dtype=bf16)
    return [
        ("contiguous 4-D", torch.empty(2, 8, 64, 128, dtype=bf16)),
        ("size-1 leading extent (RoPE cos)", torch.empty(1, 1024, 128, dtype=bf16)),
        ("unsqueeze(0) of a 2-D table", table.unsqueeze(0)),
        ("unsqueeze(1) of a vector", row.unsqueeze(1)),
        ("size-1 extent, odd stride (x[:, 5:6])", table[:, 5:6]),
        ("size-1 extent, any stride (as_strided)", torch.as_strided(buf, (1, 128), (12345, 1))),
        ("all extents 1", torch.empty(1, 1, dtype=bf16)),
        ("6-D with a size-1 extent (no static shape above 5-D)", torch.empty(1, 2, 2, 2, 2, 16, dtype=bf16)),
        ("expand over batch (stride 0)", torch.empty(1, 1024, 128, dtype=bf16).expand(2, -1, -1)),
        ("broadcast column (stride 0 inner)", torch.empty(1024, 1, dtype=bf16).expand(-1, 128)),
        ("column slice x[:, 3:] (2-byte base)", table[:, 3:]),
        ("transpose", table.t()),
        ("every other row x[::2]", table[::2]),
        ("view 32 B into a buffer", buf[16:16 + 4096].view(32, 128)),
        ("view 8 B into a buffer", buf[4:4 + 4096].view(32, 128)),
        ("0-d tensor", torch.tensor(3.0)),
        ("int64 index array", torch.zeros(4096, dtype=torch.int64)),
        ("zero-size extent", torch.empty(0, 128, dtype=bf16)),
        ("odd length fp32 (4100,)", torch.empty(4100)),
        ("bool mask", torch.zeros(64, 16, dtype=torch.bool)),
        ("negative stride (__cuda_array_interface__)", _CudaArray((1024,), (-4,), 0x7F00_0000_0000 + 4 * 1023)),
        ("reversed rows (__cuda_array_interface__)", _CudaArray((64, 128), (-512, 4), 0x7F00_0010_0000)),
        ("size-1 extent (__cuda_array_interface__)", _CudaArray((1, 128), None, 0x7F00_0010_0008)),
        ("tuple of arrays", (torch.empty(64), torch.empty(1, 64))),
        ("list of arrays", [torch.empty(64), torch.empty(64)]),
    ]


def layouts():
    """One launch of ``any_array`` per layout, told apart by the constant N (its index)."""
    import cuda.tile as ct
    truth = {}
    for i, (label, arg) in enumerate(layout_args()):
        ct.launch(None, (1,), k.any_array, (arg, i))
        truth[str(i)] = {"label": label, "symbol": jit_truth(k.any_array, (arg, i))}
    with open(sys.argv[2], "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    {"basic": basic, "child": child, "many": many, "crash-exc": crash_exc, "crash-kill": crash_kill, "rope": rope,
     "layouts": layouts, "timeout": timeout}[sys.argv[1]]()

"""Test double for cuda.tile launches and cuda.tile.tune's timer on a machine without a GPU (tests/test_use.py).

On PYTHONPATH, every Python process gets: ``cuda.tile._cext.launch`` (and ``cuda.tile.launch``) replaced by a
function that accepts the call and returns; ``cuda.tile.tune._tune._benchmark`` (what the real
``exhaustive_search`` times each trial with) replaced by :func:`fake_benchmark`, which "runs" the kernel on torch CPU
tensors (``Z = X + Y``), appends one line per call to ``$FAKE_TUNE_LOG`` (``… no-flush`` for a search made with
``flush_l2=False``; ``benchmark_with_timeout``, what ``single_run_timeout_sec`` runs in a subprocess, runs it
in-process) and returns a time in µs that depends on
the TILE constant and the occupancy hint (TILE 512 with occupancy 2 is fastest); and, when tileprobe's capture is
loaded, its ``device_facts`` answering as an H200 (``$FAKE_GPU`` overrides the name) with this machine's tileiras.
The real ``exhaustive_search`` runs on top of it.
"""
import os
import sys

import cuda.tile as _ct
import cuda.tile._cext as _cext
import cuda.tile.tune._tune as _tune


def fake_launch(stream, grid, kernel, kernel_args, /, **kwargs):
    """The program's own launch: ``Z = X + Y`` on torch CPU tensors (what vadd computes)."""
    if len(kernel_args) == 4:
        x, y, z = kernel_args[:3]
        z.copy_(x + y)


def fake_benchmark(stream, grid, kernel, args, flush_l2=True):
    log = os.environ.get("FAKE_TUNE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{grid}\n" if flush_l2 else f"{grid} no-flush\n")
    if len(args) != 4:      # another kernel (a TileGym op run on CPU tensors): a time from its configuration
        return 10.0 + (hash((tuple(grid), repr([a for a in args if isinstance(a, int)]))) % 1000) / 100
    x, y, z, tile = args[0], args[1], args[2], args[3]
    z.copy_(x + y)
    occ = getattr(getattr(kernel, "_compiler_options", None), "occupancy", None)
    if os.environ.get("FAKE_RANK_NOISE") and os.environ.get("RANK"):
        # each rank's own "noise": rank r finds TILE 256 × 2**(r % 3) fastest, so ranks that search on their own
        # pick differently
        return 10.0 + abs(tile - 256 * 2 ** (int(os.environ["RANK"]) % 3)) / 64 + (0.0 if occ == 2 else 1.5)
    return 10.0 + abs(tile - 512) / 64 + (0.0 if occ == 2 else 1.5)


_cext.launch = fake_launch
_ct.launch = fake_launch
_tune._benchmark = fake_benchmark
# single_run_timeout_sec: the real tuner runs the first warm-up in a subprocess on a CUDA stream; here in-process
_tune.benchmark_with_timeout = lambda stream, grid, kernel, args, timeout, flush_l2=True: fake_benchmark(
    stream, grid, kernel, args, flush_l2)



def install_fake_facts(capture) -> None:
    """Make tileprobe's capture module see an H200 (``$FAKE_GPU`` another name), with this machine's tileiras."""
    where = getattr(capture, "facts", capture)      # the capture's answerer reads its device facts there
    real = where.device_facts

    def fake_facts():
        facts = real()
        facts.update(gpu=os.environ.get("FAKE_GPU", "NVIDIA H200"), num_sms=132, arch="sm_90")
        return facts

    where.device_facts = fake_facts


_hook = sys.modules.get("_tileprobe_hook_state")
if "_tileprobe_record_capture" not in sys.modules and getattr(_hook, "capture", None):
    # tileprobe's hook loads its capture at the first search, after this file: load it now (by path, under its
    # own name, started by the hook as usual) so that its device facts are the fake GPU's
    import importlib.util
    _spec = importlib.util.spec_from_file_location("_tileprobe_record_capture", _hook.capture)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["_tileprobe_record_capture"] = _mod
    _spec.loader.exec_module(_mod)
if "_tileprobe_record_capture" in sys.modules:
    install_fake_facts(sys.modules["_tileprobe_record_capture"])

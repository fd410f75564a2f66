"""Shared test set-up: a results store per test process and one for the whole run, nvdisasm listings of tests/data's
cubins made once per run, the gpu marker, compile counting, a hermetic terminal width and signal dispositions. Every test is parallel-safe (pytest-xdist, README's -n auto)."""
import os as _os
import subprocess as _subprocess
import sys as _sys

import pytest as _pytest

# Loader reports kept across runs (tileprobe/probe/plancache.py) are off in the tests, which count loaders and
# plant probes by path; tests/test_plan_cache.py turns the cache on with a cache folder of its own.
_os.environ.setdefault("TILEPROBE_PLAN_CACHE", "0")

# The hundreds of `python -m tileprobe` children the tests start may keep their compiled modules (__pycache__, ignored
# by git): where the shell sets PYTHONDONTWRITEBYTECODE (these machines' shells do) each child would compile
# tileprobe's modules from source again, 0.55 s of CPU against 0.28 s for one small command (docs/LOG.md §55).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# --- one results store per test process ------------------------------------------------------------------------------

def pytest_configure(config):
    """A test (or a ``tileprobe`` child it starts) that names no ``--store`` uses ``$TILEPROBE_STORE``: here a fresh
    file of this test process's own, so the tests never read or write the developer's store
    (``platformdirs.user_data_dir``, or a ``$TILEPROBE_STORE`` set in the shell) and parallel workers
    (pytest-xdist, ``-n``) never share one. Tests that check the default path set or delete the variable themselves
    (``monkeypatch``)."""
    import tempfile
    folder = tempfile.mkdtemp(prefix="tileprobe-tests-store-")
    config._tileprobe_store_dir = folder
    config._tileprobe_store_was = _os.environ.get("TILEPROBE_STORE")
    _os.environ["TILEPROBE_STORE"] = _os.path.join(folder, "results.sqlite")


def pytest_unconfigure(config):
    import shutil
    folder = getattr(config, "_tileprobe_store_dir", None)
    if folder is None:
        return
    shutil.rmtree(folder, ignore_errors=True)
    was = config._tileprobe_store_was
    if was is None:
        _os.environ.pop("TILEPROBE_STORE", None)
    else:
        _os.environ["TILEPROBE_STORE"] = was


# --- gpu marker: skip GPU tests where no CUDA GPU is present (tileprobe run) -----------------------------------------

_GPU_PROBE = r"""
import ctypes, sys
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError:
    print("no NVIDIA driver on this machine (libcuda.so.1 not found)"); sys.exit(0)
rc = lib.cuInit(0)
if rc != 0:
    print(f"the NVIDIA driver is installed but cuInit failed with CUresult {rc} (no usable GPU)"); sys.exit(0)
n = ctypes.c_int(0)
lib.cuDeviceGetCount(ctypes.byref(n))
if n.value == 0:
    print("the NVIDIA driver sees no CUDA GPU (cuDeviceGetCount = 0)")
"""
_GPU_REASON: list = []


def _no_gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None when a CUDA GPU is present. Asked in a child process, so this
    pytest process never loads the driver (it may fork later; CUDA must not be initialised before a fork).
    Only a missing GPU or driver skips: a GPU machine without torch or cuda-core fails the tests instead."""
    if not _GPU_REASON:
        try:
            out = _subprocess.run([_sys.executable, "-c", _GPU_PROBE], capture_output=True, text=True, timeout=60)
            _GPU_REASON.append(out.stdout.strip() or None)
        except (OSError, _subprocess.SubprocessError) as e:
            _GPU_REASON.append(f"could not probe for a GPU: {e}")
    return _GPU_REASON[0]


def pytest_collection_modifyitems(config, items):
    _slow_files_first(items)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _no_gpu_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(_pytest.mark.skip(reason=f"gpu test: {reason}"))


# --- one results store for the whole run ---------------------------------------------------------------------------

@_pytest.fixture(scope="session")
def shared_store_path(tmp_path_factory) -> str:
    """A results store (path) shared by every test process of this run, pytest-xdist workers included (it sits in
    the folder above the workers' own temp folders), for tests that compile the same variants in different files:
    the first to need a variant compiles it, the others read it from the store (processes sharing a store never
    compile one variant twice at once: tileprobe/store/claims.py). Only for tests whose assertions hold for stored
    records as for fresh ones (the store gives back the same records: tests/test_golden_cli.py), never for a test
    that counts compiles or compares a run with another."""
    import os
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return str(root / "shared-results.sqlite")


# --- how many workers `-n auto` starts --------------------------------------------------------------------------------

def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command) starts two pytest-xdist workers per CPU, up to 8 more than the CPUs
    (2 CPUs: 4 workers), not pytest-xdist's one per CPU: many tests wait rather than compute (deadlines, grace
    periods, a hung compiler's timeout, Ray's start, subprocesses' start-up): the whole run needs about 983 s of
    user+sys CPU (/usr/bin/time, 2026-12-05 19:33-19:57 UTC), 492 s of two CPUs' time, yet took 838 s with one
    worker per CPU on the idle 2-core machine (docs/LOG.md §52) — the CPUs sat idle for about 40 % of it. Every
    test is parallel-safe, so only the pace changes. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (pytest-xdist's own
    variable) still sets the number; ``-n N`` too."""
    if _os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None                                     # pytest-xdist's own hook reads it
    try:
        cpus = len(_os.sched_getaffinity(0))
    except AttributeError:                              # no sched_getaffinity (macOS)
        cpus = _os.cpu_count() or 1
    return cpus + min(cpus, 8)


# --- the slowest files first -----------------------------------------------------------------------------------------

def _slow_files_first(items) -> None:
    """Files with a test marked ``slow`` (minutes each: several compiler releases, a toolchain download, the CLI
    goldens, a Ray cluster) run first, each file's tests in their order: with ``-n auto --dist loadfile`` a worker
    takes the next file as it frees up, and a slow file taken last would leave the other workers idle until it ends.
    Only the order changes (every worker collects the same order, as pytest-xdist requires)."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)      # sort is stable: the order within each group is kept


# --- compiles counted ("nothing stored is compiled again") -----------------------------------------------------------
class CompileCounter:
    """Counts the variants handed to the compile workers. Patched in ``compile.pool`` and where the pipeline
    looks the function up (it imported the name when it was first imported)."""

    def __init__(self, monkeypatch):
        import tileprobe.audit.pipeline as pipeline
        import tileprobe.compile.pool as compile_mod
        self.n = 0
        real = compile_mod.compile_variants

        def counting(variants, **kw):
            variants = list(variants)
            self.n += len(variants)
            return real(variants, **kw)
        monkeypatch.setattr(compile_mod, "compile_variants", counting)
        monkeypatch.setattr(pipeline, "compile_variants", counting)


@_pytest.fixture
def compile_count(monkeypatch) -> CompileCounter:
    """A :class:`CompileCounter` for this test."""
    return CompileCounter(monkeypatch)


# --- a hermetic terminal width -------------------------------------------------------------------------------------

@_pytest.fixture(autouse=True)
def _no_columns_from_the_caller(monkeypatch):
    """Piped CLI output is ``$COLUMNS`` wide when set (``tileprobe.cli._common.console``): a CI runner's or a
    developer's ``COLUMNS`` must not change what the tests see. Tests that want a width set it themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)


# --- signal dispositions the tests' processes inherit ----------------------------------------------------------------

@_pytest.fixture(autouse=True)
def _sigint_as_it_was():
    """A test that leaves SIGINT ignored (or handled) in this process makes every later child inherit it: a Python
    child started then ignores Ctrl-C (its default handler is installed only over SIG_DFL), and the Ctrl-C tests
    saw audits finish with exit 0 in two full runs of 2026-12-02 (docs/FAILURES.md). The disposition is put back
    after each test, and the test that changed it is named in the warnings summary."""
    import signal
    import warnings
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        warnings.warn(f"this test left SIGINT as {after!r} (put back to {before!r})", stacklevel=2)


# --- nvdisasm listings of tests/data's cubins, made once per run -----------------------------------------------------

@_pytest.fixture(scope="session")
def nvdisasm_listing(tmp_path_factory):
    """A :class:`tests.support_sass.ListingCache` in the folder every test process of this run shares (as
    :func:`shared_store_path`): ``nvdisasm_listing(path, options)`` is nvdisasm's listing of the cubin at ``path``,
    made by the first test that asks and read back by the others."""
    import os

    from tests.support_sass import ListingCache
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return ListingCache(root / "nvdisasm-listings")

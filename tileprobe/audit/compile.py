"""Compile variants ahead of time, in parallel worker processes, each in its own temp dir.

A *variant* is one (probe, case, hints, arch). Workers are spawned processes (never forked: cuTile and the fake
driver hold process-wide state); each installs the fake driver, selects its tileiras, turns cuTile's disk cache
off and compiles with cuTile's public ``export_kernel`` for the signature JIT would infer. One tileiras version
per pool, so nothing (compiler lookup, version probe, bytecode version, environment) leaks between versions.

A compile error, a compiler crash (tileiras killed by a signal) or a timeout is a *result* for that variant,
with the compiler's message and the command that repeats it — never an abort. A worker process that dies
(e.g. a crash inside cuTile's C extension) fails only the variants it held; the pool is rebuilt.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import ProbeError

#: Default per-variant compiler timeout (s). FIELD_NOTES: most compiles < 2 s, FFT/FMHA up to 24 s; FlashInfer's
#: W4A4 FP4 GEMM on sm_100 took 167-372 s per variant on a loaded 2-core machine, and 300 s cut three of them.
#: 900 s is about 2.4x the slowest measured, so a busier machine still finishes it; a probe can set its own
#: (``Probe(timeout_s=...)``) and a genuinely stuck compile still ends in 15 minutes.
DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Variant:
    """One thing to compile: a probe's case and hint values for one architecture.

    ``case`` and ``hints`` are tuples of (name, value) pairs in grid order, so a Variant is hashable.
    """
    probe_path: str
    probe_index: int
    probe_name: str
    case: tuple
    hints: tuple
    arch: str
    source_sha256: str = ""   # probe file + kernel module contents (the store's key uses it)
    knobs: tuple = ()          # (per-load hint, case constant) pairs from the probe
    rep: int = 0               # repeat index (audit --repeat): the same compile again, to see tileiras' noise

    @property
    def case_dict(self) -> dict:
        """The case as ``{constant: value}`` (``case`` is a tuple of pairs, so a Variant is hashable)."""
        return dict(self.case)

    @property
    def hints_dict(self) -> dict:
        """The hints set for this variant as ``{hint: value}`` (absent: the kernel's declared value)."""
        return dict(self.hints)

    def label(self) -> str:
        """Human label, e.g. ``w4a16_gemm GATHER=True,LOOP=True occupancy=2 sm_120``."""
        c = ",".join(f"{k}={v}" for k, v in self.case) or "-"
        h = ",".join(f"{k}={v}" for k, v in self.hints) or "declared"
        return f"{self.probe_name} {c} {h} {self.arch}"


@dataclass
class CompileResult:
    """What compiling one variant gave.

    status: ``ok`` | ``compile_error`` | ``compiler_crash`` | ``timeout`` | ``probe_error``; failure: the class
    (:data:`tileprobe.schema.FAILURE_CLASSES`, None when ok), message: the compiler's meaningful lines, fix: what
    to do (:mod:`tileprobe.audit.failure`).
    cubin: the cubin bytes (ok only). compile_s: tileiras wall time (s); total_s: the worker's whole time for
    the variant (signature + Python front end + tileiras + I/O). repro: a shell command that repeats the
    tileiras call (the bytecode is kept in ``artifact_dir`` for failed variants).
    """
    variant: Variant
    status: str
    tileiras: str = ""
    tileiras_path: str = ""
    cuda_tile: str = ""
    symbol: str = ""
    signature: list = field(default_factory=list)
    effective_hints: dict = field(default_factory=dict)
    cubin: bytes | None = None
    sass: dict | None = None
    remarks: str = ""
    error: str = ""
    repro: str = ""
    compile_s: float = 0.0
    export_s: float = 0.0
    total_s: float = 0.0
    artifact_dir: str | None = None
    failure: str | None = None
    message: str = ""
    fix: str = ""

    def fail(self, f) -> "CompileResult":
        """Set status, failure class, message, fix and error from a :class:`tileprobe.audit.failure.Failure`."""
        self.status, self.failure, self.message, self.fix, self.error = f.status, f.failure, f.message, f.fix, f.error
        return self


# --- worker side ---------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(tileiras: str | None, lib_dirs: list[str] | None, timeout_s: float, tmp_root: str,
                 with_sass: bool = False) -> None:
    from . import _cutile
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle: it stops the pool
    import warnings
    warnings.simplefilter("ignore")   # the parent already showed the probe's import-time warnings once
    _cutile.install_fake_driver()
    _cutile.check_cutile()
    if tileiras:
        _cutile.use_compiler(tileiras, lib_dirs)
    _cutile.install_compile_hook()
    wdir = tempfile.mkdtemp(prefix="worker-", dir=tmp_root)
    _cutile.configure_context(wdir, timeout_s)
    _WORKER.update(tmp=wdir, root=tmp_root, timeout_s=timeout_s, probes={}, sigs={}, with_sass=with_sass)


def _probe(path: str, index: int):
    from .probe import load_probes
    key = (path, index)
    if key not in _WORKER["probes"]:
        _WORKER["probes"][key] = load_probes(path)[index]
    return _WORKER["probes"][key]


def effective_hints(kernel, arch: str) -> dict:
    """The hints in force for ``arch``: the kernel's declared values with its ``ByTarget`` entries resolved."""
    by_target = kernel._compiler_options.hints_by_target()
    eff = dict(by_target.get("default", {}))
    eff.update(by_target.get(arch, {}))
    return eff


def compile_one(variant: Variant) -> CompileResult:
    """Compile one variant in this (worker) process. Never raises for compiler or probe failures."""
    from . import _cutile
    from .failure import mark_phase
    from .signature import describe_signature, jit_signature
    t0 = time.perf_counter()
    res = CompileResult(variant, "ok", cuda_tile=_cutile.cutile_version())
    root = _WORKER.get("root")
    try:
        res.tileiras_path = _cutile.current_compiler()
        res.tileiras = _cutile.compiler_build_string()
        mark_phase(root, variant, "import")
        probe = _probe(variant.probe_path, variant.probe_index)
        kernel = probe.resolve_kernel()
        hints = {k: v for k, v in variant.hints if v is not None}
        if hints:
            kernel = kernel.replace_hints(**hints)
        res.effective_hints = effective_hints(kernel, variant.arch)
        sig_key = (variant.probe_path, variant.probe_index, variant.case)
        if probe.args_take_context:   # issue 12: args(case, arrays, *, arch, hints) may differ per variant
            sig_key += (variant.arch, tuple(sorted(res.effective_hints.items())))
        if sig_key not in _WORKER["sigs"]:
            mark_phase(root, variant, "args")
            _WORKER["sigs"][sig_key] = jit_signature(kernel, probe.launch_args(
                variant.case_dict, arch=variant.arch, hints=dict(res.effective_hints)))
        sig = _WORKER["sigs"][sig_key]
        res.symbol, res.signature = sig.symbol, describe_signature(sig)
    except Exception as e:  # the probe's code failed, or cuTile refused what it gave
        text = str(e) if isinstance(e, ProbeError) else f"{type(e).__name__}: {e}"
        res.status, res.failure, res.error, res.message = "probe_error", "probe_error", text, text
        res.fix = f"fix the probe file {variant.probe_path} at the line named"
        mark_phase(root, variant, None)
        res.total_s = time.perf_counter() - t0
        return res
    mark_phase(root, variant, "compile")
    _compile_cubin(kernel, sig, variant, res, probe.timeout_s)
    mark_phase(root, variant, None)
    if res.cubin is not None and _WORKER.get("with_sass"):
        from ..model.sass import sass_summary
        res.sass = sass_summary(res.cubin, res.symbol)
    res.total_s = time.perf_counter() - t0
    return res


def _compile_cubin(kernel, sig, variant: Variant, res: CompileResult, timeout_s: float | None = None) -> None:
    """Compile with the probe's own timeout when it sets one (issue 12), else the audit's."""
    from cuda.tile.compilation import export_kernel
    from . import _cutile
    vdir = tempfile.mkdtemp(prefix="v-", dir=_WORKER["tmp"])
    _cutile.configure_context(vdir, timeout_s or _WORKER["timeout_s"])
    out = os.path.join(vdir, "kernel.cubin")
    _cutile.take_compiler_calls()
    t0 = time.perf_counter()
    failed = None
    try:
        export_kernel(kernel, [sig], out, gpu_code=variant.arch, output_format="cubin")
        with open(out, "rb") as f:
            res.cubin = f.read()
    except Exception as e:
        failed = e
    res.export_s = time.perf_counter() - t0
    calls = _cutile.take_compiler_calls()
    if failed is not None:
        from .failure import classify
        env = calls[-1].cuda_env if calls else None
        res.fail(classify(failed, tileiras=res.tileiras_path, build=res.tileiras, compiler_env=env,
                          timeout_s=timeout_s or _WORKER["timeout_s"]))
        if not res.error:
            res.error = traceback.format_exc(limit=3)
    if calls:
        call = calls[-1]
        res.compile_s = call.seconds
        res.repro = _repro_command(call)
        if call.remarks_path and os.path.exists(call.remarks_path):
            with open(call.remarks_path, encoding="utf-8", errors="replace") as f:
                res.remarks = f.read()
    if res.status == "ok":
        shutil.rmtree(vdir, ignore_errors=True)
    else:
        res.artifact_dir = vdir  # keep the bytecode so the repro command works


def _repro_command(call) -> str:
    env = f"PATH={shlex.quote(call.env_path.split(os.pathsep)[0])}:$PATH"
    if call.env_ld_library_path:
        env += f" LD_LIBRARY_PATH={shlex.quote(call.env_ld_library_path)}"
    return f"env -u CUDA_HOME -u CUDA_PATH {env} " + " ".join(shlex.quote(a) for a in call.argv)


# --- parent side ---------------------------------------------------------------------------------------

def default_jobs() -> int:
    """Worker processes to use: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def compile_variants(variants: Iterable[Variant], *, tileiras: str | None = None,
                     lib_dirs: list[str] | None = None, jobs: int | None = None,
                     timeout_s: float = DEFAULT_TIMEOUT_S, artifact_root: str | None = None,
                     with_sass: bool = False) -> Iterator[CompileResult]:
    """Compile ``variants`` with one tileiras in a pool of spawned workers; yield results as they finish.

    Args:
        tileiras: path of the tileiras binary (``None``: the one cuTile would pick).
        lib_dirs: library folders for that tileiras (libnvvm).
        jobs: worker processes (default: :func:`default_jobs`).
        timeout_s: per-variant compiler timeout in seconds.
        artifact_root: where failed variants keep their bytecode (default: a temp dir that is kept).
        with_sass: also disassemble each cubin in the worker (nvdisasm) for :mod:`tileprobe.model.sass` traits.

    A worker that dies fails the variants it was holding with status ``compiler_crash`` and the pool is rebuilt.
    """
    variants = list(variants)
    if not variants:
        return
    jobs = min(jobs or default_jobs(), len(variants))
    tmp_root = artifact_root or tempfile.mkdtemp(prefix="tileprobe-")
    os.makedirs(tmp_root, exist_ok=True)
    initargs = (tileiras, lib_dirs, timeout_s, tmp_root, with_sass)
    survivors: list[Variant] = []
    yield from _run_pool(variants, jobs, initargs, survivors)
    # A worker died: its pool broke and every unfinished variant with it. Run those one per pool, so only the
    # variant that kills its worker is marked.
    for v in survivors:
        again: list[Variant] = []
        yield from _run_pool([v], 1, initargs, again)
        for dead in again:   # run alone, so it is the variant that ended its worker: what was the worker doing?
            from .failure import dead_worker
            yield CompileResult(dead, "compiler_crash").fail(dead_worker(dead, tmp_root))


def _run_pool(variants, jobs, initargs, broken_out: list) -> Iterator[CompileResult]:
    """Run ``variants`` in one pool. On Ctrl-C (or when the consumer stops early) queued variants are cancelled
    and the workers are stopped at once; results already yielded are the caller's (the audit has stored them)."""
    pool = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                  initargs=initargs)
    try:
        with _no_main_reimport():
            futures = {pool.submit(compile_one, v): v for v in variants}
        for fut in cf.as_completed(futures):
            v = futures[fut]
            try:
                yield fut.result()
            except cf.process.BrokenProcessPool:
                broken_out.append(v)
            except Exception as e:  # a tileprobe bug in the worker: this variant's failure, not the audit's
                yield CompileResult(v, "compile_error", error=f"{type(e).__name__}: {e}")
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers now (terminate, then kill): no orphan keeps compiling."""
    procs = list((getattr(pool, "_processes", None) or {}).values())   # stdlib-private, stable since 3.8
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        for child in _children(p.pid):      # the tileiras / ptxas / nvdisasm a worker is waiting on
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()


def _children(pid: int | None) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc; empty elsewhere)."""
    out = []
    if pid is None or not os.path.isdir("/proc"):
        return out
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


@contextlib.contextmanager
def _no_main_reimport():
    """Start spawned workers without re-running the caller's ``__main__``.

    multiprocessing's spawn re-imports the parent's main script in each worker; a script that calls
    ``tileprobe.audit.audit`` without an ``if __name__ == "__main__":`` guard (or code piped to ``python -``)
    would then run again in every worker and kill the pool. The workers need only tileprobe's modules, so the
    main module is hidden while they start.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main

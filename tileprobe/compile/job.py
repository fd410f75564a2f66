"""Compile variants ahead of time, in worker processes, each in its own temp dir: the worker side.

A *variant* is one (probe, case, hints, arch). Workers are spawned processes (never forked: cuTile and the fake
driver hold process-wide state); each installs the fake driver, selects its tileiras (every run of it contained:
its own process group, killed whole on a timeout, killed when the worker dies), probes the compiler's version once,
turns cuTile's disk cache off and compiles with cuTile's public ``export_kernel`` for the signature JIT would infer.
One tileiras version per pool, so nothing (compiler lookup, version probe, bytecode version, environment) leaks
between versions. The pool itself (streamed dispatch, deadlines, dead workers replaced) is
:mod:`tileprobe.compile.pool`.

A compile error, a compiler crash (tileiras killed by a signal) or a timeout is a *result* for that variant,
with the compiler's message and the command that repeats it — never an abort. Probe code the worker runs (the probe's
import, ``args``) is guarded: ``sys.exit``, ``os._exit`` and a ``KeyboardInterrupt`` it raises become a
``probe_error`` for that variant.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

from tileprobe.errors import ProbeError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.07 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Default per-variant compiler timeout (s). FIELD_NOTES: most compiles < 2 s, FFT/FMHA up to 24 s; FlashInfer's
#: W4A4 FP4 GEMM on sm_100 took 167-372 s per variant on a loaded 2-core machine, and 300 s cut three of them.
#: 900 s is about 2.4x the slowest measured, so a busier machine still finishes it; a probe can set its own
#: (``Probe(timeout_s=...)``) and a genuinely stuck compile still ends in 15 minutes.
DEFAULT_TIMEOUT_S = 900.0
#: Most the load scales :data:`DEFAULT_TIMEOUT_S` by (:func:`load_scaled_timeout_s`): 4 × 900 s = 1 hour.
MAX_LOAD_SCALE = 4.0


def load_scaled_timeout_s(base_s: float = DEFAULT_TIMEOUT_S, *, load: float | None = None,
                          cpus: int | None = None) -> float:
    """The compile timeout (s) of an audit that is given none: ``base_s`` × the machine's load per CPU (the
    1-minute load average ÷ CPUs, :func:`os.getloadavg`, at the audit's start), at least 1× and at most
    :data:`MAX_LOAD_SCALE` × (900–3,600 s by default).

    Why: compile time grows with what else the machine runs. FlashInfer's W4A4 GEMM on sm_100 took 167–372 s
    per variant on a 2-core machine, and 1,055 s on the same machine under more load, past the 900 s
    default. ``load`` / ``cpus`` replace the measured ones (tests); without a load average (a platform without
    ``os.getloadavg``) the result is ``base_s``."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            return base_s
    cpus = cpus or os.cpu_count() or 1
    return base_s * min(max(load / cpus, 1.0), MAX_LOAD_SCALE)


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
    timeout_s: float | None = None   # the probe's own compiler timeout (Probe(timeout_s=...)), for the pool's deadline
    num_sms: int | None = None       # the SM count handed to args(..., num_sms=) (audit/tune --num-sms)
    compile_sha256: str = ""         # kernel source + signature (the store key's code part when known)

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
    to do (:mod:`tileprobe.compile.failure`).
    cubin: the cubin bytes (ok only). compile_s: tileiras wall time (s); total_s: the worker's whole time for
    the variant (signature + Python front end + tileiras + I/O). repro: a shell command that repeats the
    tileiras call (the bytecode is kept in ``artifact_dir`` for failed variants).
    """
    variant: Variant
    status: str
    tileiras: str = ""
    tileiras_path: str = ""
    cuda_tile: str = ""
    bytecode: str = ""           # the Tile IR bytecode version cuTile wrote, "13.4"
    bytecode_sha256: str = ""    # sha256 of the bytecode file tileiras read
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

    def fail(self, f) -> CompileResult:
        """Set status, failure class, message, fix and error from a :class:`tileprobe.compile.failure.Failure`."""
        self.status, self.failure, self.message, self.fix, self.error = f.status, f.failure, f.message, f.fix, f.error
        return self


#: Largest cubin a compile may give, in bytes (the cubin reader's limit for inflated sections,
#: :data:`tileprobe.model.cubin.MAX_INFLATED_BYTES`, is the same 64 MiB): the largest cubin tileprobe's field notes
#: record is a few MB; a bigger file is refused, not stored.
MAX_CUBIN_BYTES = 64 << 20

#: CompileResult fields a worker sends back (the variant is the parent's own; it is not sent).
_RESULT_FIELDS = ("status", "tileiras", "tileiras_path", "cuda_tile", "bytecode", "bytecode_sha256", "symbol",
                  "signature", "effective_hints",
                  "cubin", "sass", "remarks", "error", "repro", "compile_s", "export_s", "total_s", "artifact_dir",
                  "failure", "message", "fix")
_RESULT_TYPES = {"signature": (list,), "effective_hints": (dict,), "cubin": (bytes, type(None)),
                 "sass": (dict, type(None)), "compile_s": (float, int), "export_s": (float, int),
                 "total_s": (float, int), "artifact_dir": (str, type(None)), "failure": (str, type(None))}


def result_data(res: CompileResult) -> dict:
    """What a worker sends back of ``res``: its fields but the variant, as data for
    :mod:`tileprobe.probe.wire`. A field that is not data (a constant in the signature that is an object of the
    probe's class) makes it the variant's ``probe_error`` naming the value and the fix."""
    from tileprobe.probe import wire
    data = {name: getattr(res, name) for name in _RESULT_FIELDS}
    try:
        wire.encode(data, "the result")
    except wire.NotData as e:
        text = f"{res.variant.probe_path}: args() gave a launch argument that is not data: {e}"
        data.update(status="probe_error", failure="probe_error", error=text, message=text, cubin=None, sass=None,
                    signature=[], effective_hints={}, fix=f"fix args() in {res.variant.probe_path}: {e.fix}")
    return data


def result_from_data(data, variant: Variant) -> CompileResult:
    """The :class:`CompileResult` of ``variant`` from a worker's :func:`result_data`, read as data: every field
    checked for its type. Raises ValueError for a dict of another shape."""
    if type(data) is not dict or set(data) != set(_RESULT_FIELDS):
        raise ValueError(f"a compile result with fields {sorted(data) if type(data) is dict else type(data)}")
    for name, value in data.items():
        if type(value) not in _RESULT_TYPES.get(name, (str,)):
            raise ValueError(f"a compile result whose {name} is a {type(value).__name__}")
    if data["cubin"] is not None and len(data["cubin"]) > MAX_CUBIN_BYTES:
        raise ValueError(f"a cubin of {len(data['cubin']):,} bytes, over the limit of {MAX_CUBIN_BYTES:,}")
    return CompileResult(variant, **data)


# --- worker side ---------------------------------------------------------------------------------------

@dataclass
class _WorkerState:
    """This compile worker's set-up (:func:`_init_worker`): its temp folder (``tmp``) in the audit's (``root``),
    the compile timeout (seconds), the probes it loaded and the JIT signatures it made (each once), whether it reads
    SASS, and where a failed compile's artifacts go."""
    tmp: str | None = None
    root: str | None = None
    timeout_s: float | None = None
    probes: dict[tuple, Any] = field(default_factory=dict)
    sigs: dict[tuple, Any] = field(default_factory=dict)
    with_sass: bool | str = False    # True, or model.sass.SASS_GATE: the gated summary only
    artifacts: str | None = None
    bytecode: str = ""               # the Tile IR bytecode version cuTile writes here ("13.4"; fixed or not)


_WORKER = _WorkerState()


def _init_worker(tileiras: str | None, lib_dirs: list[str] | None, timeout_s: float, tmp_root: str,
                 with_sass: bool | str = False, artifact_root: str | None = None) -> dict:
    """Set up this worker: fake driver, contained compiler, the compiler's version probed once (returned).

    Raises:
        TileprobeError: cuTile lacks a name tileprobe needs (the message names the tested cuda-tile releases), or
            tileprobe's own set-up of cuTile failed (any other exception: the message says it is tileprobe's, where
            and with which versions: :func:`tileprobe.compile.failure.own_fault`); ToolchainError: tileiras is not
            executable or does not answer its version probe in time.
    """
    from tileprobe import _cutile
    from tileprobe.errors import TileprobeError
    warnings.simplefilter("ignore")   # the loader already showed the probe's import-time warnings once
    try:
        _cutile.install_fake_driver()
        _cutile.check_cutile()
        if tileiras:
            _cutile.use_compiler(tileiras, lib_dirs)
        else:
            _cutile.contain_default_compiler()
        _cutile.install_compile_hook()
        wdir = tempfile.mkdtemp(prefix="worker-", dir=tmp_root)
        tempfile.tempdir = wdir           # cuTile's and nvdisasm's temp files stay in the audit's own folder,
        os.environ.update(TMPDIR=wdir)    # and tileiras' own ($TMPDIR/tileir-*.o, left when it is killed): an owned
        #                                   folder is removed at the end and swept by the next run after a SIGKILL
        _cutile.configure_context(wdir, timeout_s)
        version, bytecode = _cutile.pin_compiler_facts(wdir)
    except (TileprobeError, OSError):
        raise                             # said already (what to do), or the machine's (a full disk)
    except Exception as e:                # tileprobe's own set-up of cuTile failed: its fault, said so
        from tileprobe.compile.failure import own_call, own_fault
        failure = own_fault(e, own_call(e) or "its compile worker's set-up")
        raise TileprobeError(f"{failure.message}\nfix: {failure.fix}") from e
    global _WORKER
    _WORKER = _WorkerState(tmp=wdir, root=tmp_root, timeout_s=timeout_s, with_sass=with_sass,
                           artifacts=artifact_root or failed_artifacts_dir(),
                           bytecode=_cutile.bytecode_text(bytecode))
    return {"pid": os.getpid(), "tileiras": _cutile.parse_build(version), "bytecode": str(bytecode)}


def failed_artifacts_dir(store_path: str | None = None) -> str:
    """Where failed variants keep their bytecode for the repro command: ``$TILEPROBE_ARTIFACTS``; else a
    ``failed`` folder beside the results store in use (``store_path``: its SQLite file); else, without a store,
    ``tileprobe-failed`` in the temp folder (:func:`tempfile.gettempdir`: ``$TMPDIR`` when set). Never the audit's
    own temp folder, which every run removes. (It used to be always ``~/.cache/tileprobe/failed``,
    outside the store and temp folder a user had given.)"""
    env = os.environ.get("TILEPROBE_ARTIFACTS")
    if env:
        return env
    if store_path:
        return os.path.join(os.path.dirname(os.path.abspath(store_path)), "failed")
    return os.path.join(tempfile.gettempdir(), "tileprobe-failed")


def _probe(path: str, index: int):
    from tileprobe.probe.define import load_probes
    key = (path, index)
    if key not in _WORKER.probes:
        _WORKER.probes[key] = load_probes(path)[index]
    return _WORKER.probes[key]


def compile_one(variant: Variant) -> CompileResult:
    """Compile one variant in this (worker) process. Never raises for compiler or probe failures: probe code that
    fails (an exception, ``sys.exit``, ``os._exit``, a ``KeyboardInterrupt`` of its own) is a ``probe_error`` naming
    the probe's line; the phase it is in is noted (:func:`tileprobe.compile.failure.mark_phase`) so that a worker that
    dies in probe code is not called a compiler crash."""
    from tileprobe import _cutile
    from tileprobe.bytecode_reuse import set_source
    from tileprobe.compile.failure import mark_phase
    from tileprobe.probe.define import probe_code_guard
    from tileprobe.probe.signature import describe_signature, jit_signature
    t0 = time.perf_counter()
    res = CompileResult(variant, "ok", cuda_tile=_cutile.cutile_version())
    root, phase = _WORKER.root, "import"
    try:
        res.tileiras_path = _cutile.current_compiler()
        res.tileiras = _cutile.compiler_build_string()
        with probe_code_guard():
            mark_phase(root, phase)
            probe = _probe(variant.probe_path, variant.probe_index)
            kernel = probe.resolve_kernel()
            phase = "hints"
            hints = {k: v for k, v in variant.hints if v is not None}
            if hints:
                kernel = kernel.replace_hints(**hints)
            res.effective_hints = _cutile.effective_hints(kernel, variant.arch)
            sig_key: tuple = (variant.probe_path, variant.probe_index, variant.case)
            if probe.args_take_context:   # args(case, arrays, *, arch, hints, num_sms) may differ
                sig_key += (variant.arch, tuple(sorted(res.effective_hints.items())), variant.num_sms)
            if sig_key not in _WORKER.sigs:
                phase = "args"
                mark_phase(root, phase)
                _WORKER.sigs[sig_key] = jit_signature(kernel, probe.launch_args(
                    variant.case_dict, arch=variant.arch, hints=dict(res.effective_hints), num_sms=variant.num_sms))
        sig = _WORKER.sigs[sig_key]
        res.symbol, res.signature = sig.symbol, describe_signature(sig)
        _check_torch_free(variant)
    except TorchNeeded as e:
        res.status, res.failure, res.error = "compile_error", "broken_environment", str(e)
        res.message, res.fix = str(e), str(e).rpartition("; ")[2]
        mark_phase(root, None)
        res.total_s = time.perf_counter() - t0
        return res
    except BaseException as e:
        _probe_failed(res, e, phase)
        mark_phase(root, None)
        res.total_s = time.perf_counter() - t0
        return res
    _undo_probe_state()
    mark_phase(root, "compile")
    set_source(variant.probe_path)     # the bytecode reuse of reduce leaves out this file's locations, no others
    _compile_cubin(kernel, sig, variant, res, probe.timeout_s)
    mark_phase(root, None)
    with_sass = _WORKER.with_sass
    if res.cubin is not None and with_sass:
        from tileprobe.model.sass import SASS_GATE, gated_summary, sass_summary
        res.sass = (gated_summary if with_sass == SASS_GATE else sass_summary)(res.cubin, res.symbol)
    res.total_s = time.perf_counter() - t0
    return res


class TorchNeeded(Exception):
    """Probe code imported torch in a compile worker whose cuTile was imported without it."""


def _check_torch_free(variant: Variant) -> None:
    """Raise :class:`TorchNeeded` when this worker's cuTile was imported without torch
    (:func:`tileprobe.probe.zygote.torch_blocked`) and the probe's code imported torch after all (its loader did
    not): cuTile would not know torch dtypes here."""
    from tileprobe.probe.zygote import TORCH_FREE_ENV, torch_blocked
    if torch_blocked() and "torch" in sys.modules:
        raise TorchNeeded(f"{variant.probe_path} imported torch in a compile worker although its loader did not "
                          f"(the worker's cuTile was imported without torch to start faster); audit again with "
                          f"{TORCH_FREE_ENV}=0")


def _undo_probe_state() -> None:
    """Before compiling: disarm the timers probe code may have armed (``signal.alarm``,
    ``signal.setitimer``: their signal would end the worker mid-compile and read as a compiler crash) and make the
    worker's temp folder again if probe code removed it (``shutil.rmtree(tempfile.gettempdir())``)."""
    for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        try:
            signal.setitimer(timer, 0)
        except (OSError, ValueError):
            pass
    if _WORKER.tmp:
        os.makedirs(_WORKER.tmp, exist_ok=True)


def _probe_failed(res: CompileResult, e: BaseException, phase: str) -> None:
    """Make ``res`` the ``probe_error`` of what probe code raised in ``phase`` (import | hints | args): the probe
    file's line where the traceback has one, the exception in words (``args() called os._exit(5)``), a fix."""
    from tileprobe.probe.define import _probe_error_from, describe_exception
    path = res.variant.probe_path
    if isinstance(e, ProbeError):
        text = str(e)
    elif phase == "hints":       # cuTile refused the hint values: its message names the allowed ones
        text = describe_exception(e)
    else:
        text = str(_probe_error_from(e, path, "args()" if phase == "args" else "importing the probe file"))
    res.status, res.failure, res.error, res.message = "probe_error", "probe_error", text, text
    ended = isinstance(e, (SystemExit, KeyboardInterrupt)) or type(e).__name__ == "ProbeExit"
    res.fix = (f"fix args() in {path}: it must return the launch arguments" + (", not end the process" if ended else "")
               if phase == "args" else f"fix the probe file {path} at the line named")


def _compile_cubin(kernel, sig, variant: Variant, res: CompileResult, timeout_s: float | None = None) -> None:
    """Compile with the probe's own timeout when it sets one, else the audit's."""
    from cuda.tile.compilation import export_kernel

    from tileprobe import _cutile
    vdir = tempfile.mkdtemp(prefix="v-", dir=_WORKER.tmp)
    _cutile.configure_context(vdir, timeout_s or _WORKER.timeout_s)
    out = os.path.join(vdir, "kernel.cubin")
    _cutile.take_compiler_calls()
    t0 = time.perf_counter()
    failed: Exception | None = None
    try:
        export_kernel(kernel, [sig], out, gpu_code=variant.arch, output_format="cubin")
        size = os.path.getsize(out)
        if size > MAX_CUBIN_BYTES:
            raise CubinTooLarge(size)
        with open(out, "rb") as f:
            data = f.read(MAX_CUBIN_BYTES + 1)
        res.cubin = data
        if len(data) > MAX_CUBIN_BYTES:    # grew while read
            res.cubin, failed = None, CubinTooLarge(len(data))
    except Exception as e:
        failed = e
    res.export_s = time.perf_counter() - t0
    calls = _cutile.take_compiler_calls()
    if failed is not None and not os.path.isdir(vdir):   # removed under the compile: not by tileiras or tileprobe
        text = (f"the variant's temp folder {vdir} was removed while it compiled (neither tileiras nor tileprobe "
                "removes it: probe code running in the worker, e.g. a thread it started?)")
        res.status = res.failure = "probe_error"
        res.error = res.message = text
        res.fix = f"check what {variant.probe_path} starts at import: it must leave tileprobe's temp folders alone"
        failed = None
    if isinstance(failed, CubinTooLarge):
        res.status = res.failure = "compile_error"
        res.error = res.message = str(failed)
        res.fix = "a cubin this large is not read or stored; check the kernel (an unrolled loop?) or the compiler"
    elif failed is not None:
        from tileprobe.compile.failure import classify
        env = calls[-1].cuda_env if calls else None
        res.fail(classify(failed, tileiras=res.tileiras_path, build=res.tileiras, compiler_env=env,
                          timeout_s=timeout_s or _WORKER.timeout_s))
        if not res.error:
            res.error = traceback.format_exc(limit=3)
    if calls:
        call = calls[-1]
        res.compile_s = call.seconds
        res.bytecode, res.bytecode_sha256 = _WORKER.bytecode, call.bytecode_sha256
        res.repro = _repro_command(call)
        if call.remarks_path and os.path.exists(call.remarks_path):
            with open(call.remarks_path, encoding="utf-8", errors="replace") as f:
                res.remarks = f.read()
    if res.status == "ok":
        shutil.rmtree(vdir, ignore_errors=True)
    else:
        _keep_artifacts(vdir, res)


class CubinTooLarge(Exception):
    """The compiler wrote a cubin larger than :data:`MAX_CUBIN_BYTES` (refused, not read)."""

    def __init__(self, size: int):
        super().__init__(f"the compiler wrote a cubin of {size:,} bytes, more than the limit of {MAX_CUBIN_BYTES:,} "
                         "bytes for one cubin (64 MiB); it was refused, not read or stored")


def _keep_artifacts(vdir: str, res: CompileResult) -> None:
    """Move a failed variant's folder (its bytecode) out of the temp folder, which is removed when the audit ends,
    to :func:`failed_artifacts_dir`, and point the repro command there."""
    dest_root = _WORKER.artifacts or failed_artifacts_dir()
    try:
        os.makedirs(dest_root, exist_ok=True)
        dest = tempfile.mkdtemp(prefix=f"{res.variant.arch}-", dir=dest_root)
        for name in os.listdir(vdir):
            shutil.move(os.path.join(vdir, name), os.path.join(dest, name))
        shutil.rmtree(vdir, ignore_errors=True)
    except OSError:
        res.artifact_dir = vdir     # cannot move it: the repro works until the audit ends
        return
    res.repro = res.repro.replace(vdir, dest)
    res.artifact_dir = dest


def _repro_command(call) -> str:
    env = f"PATH={shlex.quote(call.env_path.split(os.pathsep)[0])}:$PATH"
    if call.env_ld_library_path:
        env += f" LD_LIBRARY_PATH={shlex.quote(call.env_ld_library_path)}"
    return f"env -u CUDA_HOME -u CUDA_PATH {env} " + " ".join(shlex.quote(a) for a in call.argv)


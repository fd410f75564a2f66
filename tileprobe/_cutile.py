"""The one module that touches cuTile's private names.

cuTile's public API gives us ``KernelSignature.from_kernel_args`` (the signature JIT would use) and
``export_kernel`` (ahead-of-time compiles). Three things it does not give, and which live here:

* **A driver-free signature.** ``from_kernel_args`` imports ``cuda.tile._load_libcuda``, which dlopens
  ``libcuda.so.1`` and hands cuTile's C extension the address of ``cuGetProcAddress_v2``. On a machine with
  no driver we put a module of that name in ``sys.modules`` first, whose ``cuGetProcAddress_v2`` is a ctypes
  callback answering the few queries signature inference makes (seen with cuda-tile 1.7.0: ``cuInit``,
  ``cuDriverGetVersion``, ``cuPointerGetAttribute(CONTEXT)``). Every other driver entry point answers
  ``CUDA_ERROR_NOT_SUPPORTED`` and is logged in :data:`FAKE_DRIVER_CALLS`, so a cuTile release that starts
  asking for more is caught by the tests rather than silently mis-inferring.
* **Compiler choice.** ``cuda.tile._compile._find_compiler_bin`` is replaced so a worker compiles with one
  given tileiras (and its ptxas / libnvvm), whatever else is installed.
* **A view of the compiler call.** ``cuda.tile._compile.compile_cubin`` is wrapped to record the exact
  tileiras command line (for a repro), its wall time, and to ask for YAML remarks exactly as cuTile's JIT does
  when its disk cache is on (tileiras >= 13.4), even though the audit turns that cache off.

Call :func:`install_fake_driver` before anything imports ``cuda.tile._load_libcuda`` (i.e. before the first
``from_kernel_args`` or launch in the process). Tested against cuda-tile 1.5 … 1.7 names; :func:`check_cutile`
raises a clear error when a name moved.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import re
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tileprobe.bytecode_reuse import REUSE_ENV
from tileprobe.errors import CompilerWroteNothing, TileprobeError, ToolchainError
from tileprobe.fake_driver import (  # noqa: F401  (re-exported)
    _GETPROC,
    _KEEP_ALIVE,
    CUDA_ERROR_NOT_SUPPORTED,
    CUDA_SUCCESS,
    FAKE_DRIVER_CALLS,
    FAKE_DRIVER_VERSION,
    _get_proc_address,
)
from tileprobe.model.toolkit import tool_timeout_s
from tileprobe.procs import run_in_group
from tileprobe.schema import cutile_version  # the public version, beside the private names it gates
from tileprobe.tileiras_cli import (  # noqa: F401
    DefaultCompilerLookup,
    NoTorch,
    as_text,
    parse_build,
    tileiras_build,
    tileiras_targets,
    which_tool,
)

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

def install_fake_driver() -> None:
    """Make cuTile's signature inference work with no GPU and no ``libcuda.so.1``.

    Idempotent. Raises :class:`TileprobeError` if the real driver module was already imported in this
    process (its function table is then fixed): run the audit in a fresh process.
    """
    name = "cuda.tile._load_libcuda"
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "_tileprobe_fake", False):
            return
        raise TileprobeError(
            "cuTile already loaded the real CUDA driver in this process, so tileprobe cannot install its "
            "driver-free signature inference. Run the audit in a fresh Python process (the tileprobe CLI does).")
    cb = _GETPROC(_get_proc_address)
    _KEEP_ALIVE.append(cb)
    mod = types.ModuleType(name)
    mod.__dict__.update(_tileprobe_fake=True, _dll=None, _cuGetProcAddress_v2=cb,
                        cuGetProcAddress_v2_ptrptr=ctypes.addressof(cb))
    sys.modules[name] = mod


# --- cuTile version and private names: the adapter ------------------------------------------------------

#: The cuda-tile releases tileprobe is tested with, one per series (CI runs the compile, audit and record tests
#: once with each: .ci/cuda_tile_matrix.sh). The message for an unsupported cuda-tile names these.
TESTED_RELEASES = ("1.5.0", "1.6.0", "1.7.0")
#: The newest tested release: what the message for an unsupported cuda-tile tells a user to install.
NEWEST_TESTED = TESTED_RELEASES[-1]


@dataclasses.dataclass(frozen=True)
class PrivateApi:
    """The shape of a cuda-tile release's private compiler side, as tileprobe calls it.

    Attributes:
        compile_cubin: the parameter names of ``cuda.tile._compile.compile_cubin``, in order. 1.5.0:
            ``(fname_bytecode, compiler_options, sm_arch, timeout_sec)``; 1.6.0 adds ``remarks_output_file``;
            1.7.0 adds ``preview_features`` and ``linker_inputs`` (read from each release's ``_compile.py``).
        error_takes_stderr: ``TileCompilerExecutionError(return_code, stderr, compiler_flags, compiler_version)``
            parses tileiras' stderr itself (1.5.0); else it takes ``(return_code, message, loc, compiler_flags,
            compiler_version)``, parsed first by ``_compile._parse_tileir_stderr`` (1.6.0, 1.7.0).
        remarks: cuTile can ask tileiras for YAML remarks (``_compile._tileiras_supports_remarks`` exists and
            ``compile_cubin`` takes ``remarks_output_file``; 1.6.0 and later).
    """
    compile_cubin: tuple[str, ...]
    error_takes_stderr: bool
    remarks: bool


_CUBIN_15 = ("fname_bytecode", "compiler_options", "sm_arch", "timeout_sec")
#: What tileprobe expects of each tested series (``"1.5"`` …), read from that release's ``cuda/tile/_compile.py``
#: and ``_exception.py``; ``tests/test_cutile_api.py`` checks the installed release against its entry.
EXPECTED_APIS: dict[str, PrivateApi] = {
    "1.5": PrivateApi(_CUBIN_15, error_takes_stderr=True, remarks=False),
    "1.6": PrivateApi((*_CUBIN_15, "remarks_output_file"), error_takes_stderr=False, remarks=True),
    "1.7": PrivateApi((*_CUBIN_15, "remarks_output_file", "preview_features", "linker_inputs"),
                      error_takes_stderr=False, remarks=True),
}

#: Names of ``cuda.tile._compile`` every supported release has and tileprobe uses.
NEEDED_NAMES = ("compile_cubin", "_find_compiler_bin", "_CompilerBinary", "_get_max_supported_bytecode_version",
                "_get_compiler_version_string", "_try_get_compiler_version", "_tileiras_effective_opt_and_device_debug",
                "TileCompilerExecutionError", "TileCompilerTimeoutError", "dev_features_enabled")


def series(version: str) -> str:
    """``"1.6.0rc5"`` → ``"1.6"``: the key of :data:`EXPECTED_APIS` (major.minor of a release)."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else version


def expected_api(version: str | None = None) -> PrivateApi | None:
    """What tileprobe expects of cuda-tile ``version`` (default: the installed one); None for an untested series."""
    return EXPECTED_APIS.get(series(version or cutile_version()))


def installed_api() -> PrivateApi:
    """The private API of the installed cuda-tile, read from its functions (not from its version number, so that a
    release tileprobe was not tested with works where its names are the same).

    Raises:
        TileprobeError: a name tileprobe needs is missing or has another shape (:func:`check_cutile`'s message).
    """
    if _API:
        return _API[0]
    import inspect

    from cuda.tile import _compile
    check_cutile()
    fn = getattr(_compile.compile_cubin, "_tileprobe_original", _compile.compile_cubin)
    params = tuple(inspect.signature(fn).parameters)
    error_params = tuple(inspect.signature(_compile.TileCompilerExecutionError.__init__).parameters)[1:]
    _API.append(PrivateApi(params, error_takes_stderr="stderr" in error_params,
                           remarks=hasattr(_compile, "_tileiras_supports_remarks") and "remarks_output_file" in params))
    return _API[0]


_API: list[PrivateApi] = []   # the installed release's, read once per process


def unsupported_text(what: str) -> str:
    """The message for a cuda-tile tileprobe cannot use: ``what`` is missing or changed, the releases really tested
    (:data:`TESTED_RELEASES`) and the command that installs one."""
    tested = ", ".join(TESTED_RELEASES[:-1]) + f" and {TESTED_RELEASES[-1]}"
    return (f"cuda-tile {cutile_version()} {what}, which tileprobe {_tileprobe_version()} uses; tileprobe is tested "
            f"with cuda-tile {tested}: pip install 'cuda-tile=={NEWEST_TESTED}' (or another of these), or a "
            "tileprobe that supports this cuda-tile")


def _tileprobe_version() -> str:
    from tileprobe._version import __version__
    return __version__


def check_cutile() -> None:
    """Check that the private names tileprobe relies on exist in the installed cuTile, with shapes it can call.

    Raises :class:`TileprobeError` naming the missing or changed name, the cuda-tile releases tileprobe was tested
    with and the command that installs one (:func:`unsupported_text`).
    """
    import inspect

    from cuda.tile import _compile
    missing = [n for n in NEEDED_NAMES if not hasattr(_compile, n)]
    if missing:
        raise TileprobeError(unsupported_text(f"lacks cuda.tile._compile.{', '.join(missing)}"))
    fn = getattr(_compile.compile_cubin, "_tileprobe_original", _compile.compile_cubin)
    params = tuple(inspect.signature(fn).parameters)
    if params[:len(_CUBIN_15)] != _CUBIN_15:
        raise TileprobeError(unsupported_text(f"has compile_cubin{inspect.signature(fn)} (tileprobe knows "
                                              f"compile_cubin({', '.join(_CUBIN_15)}, ...))"))
    error_params = tuple(inspect.signature(_compile.TileCompilerExecutionError.__init__).parameters)[1:]
    if error_params not in (("return_code", "stderr", "compiler_flags", "compiler_version"),
                            ("return_code", "message", "loc", "compiler_flags", "compiler_version")):
        raise TileprobeError(unsupported_text(f"has TileCompilerExecutionError({', '.join(error_params)})"))
    if "stderr" not in error_params and not hasattr(_compile, "_parse_tileir_stderr"):
        raise TileprobeError(unsupported_text("lacks cuda.tile._compile._parse_tileir_stderr"))


def feature_notes() -> list[str]:
    """One line for each tileprobe feature the installed cuda-tile cannot give, saying why (``[]`` when none):
    cuda-tile 1.5 never asks tileiras for remarks, so the audit has none to show. A tested release is answered from
    :data:`EXPECTED_APIS` (no cuTile import: the audit's parent process calls this); another is read from its
    functions (:func:`installed_api`)."""
    api = expected_api() or installed_api()
    notes = []
    if not api.remarks:
        notes.append(f"compiler remarks: off: cuda-tile {cutile_version()} does not ask tileiras for them "
                     "(its compile_cubin takes no remarks file; cuda-tile 1.6 and later do)")
    return notes


def execution_error(return_code: int, stderr: str, flags: list[str], version: str | None) -> Exception:
    """cuTile's ``TileCompilerExecutionError`` for a tileiras run that exited with ``return_code`` and printed
    ``stderr``, built as the installed release builds it (:attr:`PrivateApi.error_takes_stderr`)."""
    from cuda.tile import _compile
    if installed_api().error_takes_stderr:
        return _compile.TileCompilerExecutionError(return_code, stderr, " ".join(flags), version)
    message, loc = _compile._parse_tileir_stderr(stderr)
    return _compile.TileCompilerExecutionError(return_code, message, loc, " ".join(flags), version)


# --- compiler selection and the compile hook -----------------------------------------------------------

@dataclasses.dataclass
class CompilerCall:
    """What one tileiras invocation was: the command (argv), its wall time in seconds, remarks file."""
    argv: list[str]
    env_path: str
    env_ld_library_path: str
    seconds: float = 0.0
    remarks_path: str | None = None
    bytecode_sha256: str = ""   # sha256 of the bytecode file tileiras was given
    cuda_env: dict = dataclasses.field(default_factory=dict)   # CUDA_HOME / CUDA_PATH as passed to tileiras


#: Calls recorded by the compile hook since the last :func:`take_compiler_calls`.
_CALLS: list[CompilerCall] = []


def use_compiler(tileiras: str, lib_dirs: list[str] | None = None) -> None:
    """Make cuTile compile with this ``tileiras`` binary (and the ptxas/libnvvm beside it).

    ``lib_dirs`` go first on LD_LIBRARY_PATH; the tileiras folder goes first on PATH (tileiras runs the
    ptxas it finds there). CUDA_HOME / CUDA_PATH are not passed to the compiler: an older toolkit there
    makes tileiras >= 13.4 fail with only "failed to compile Tile IR program" (FIELD_NOTES, 2026-11-29).
    Every run of it is contained (:class:`_ContainedBinary`).
    """
    from cuda.tile import _compile
    if not os.access(tileiras, os.X_OK):
        raise ToolchainError(f"{tileiras} is not an executable tileiras; run `tileprobe doctor`.")
    bin_dir = os.path.dirname(os.path.abspath(tileiras))
    ld = os.pathsep.join([*(lib_dirs or []), os.environ.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    binary = _contained_binary_type()(os.path.abspath(tileiras), path, ld, pass_cuda_home_var=False)
    _compile._find_compiler_bin = lambda: binary
    for fn in ("_get_compiler_version_string", "_get_max_supported_bytecode_version"):
        f = getattr(_compile, fn)
        if hasattr(f, "cache_clear"):
            f.cache_clear()


# --- every tileiras run contained, its version probed once ------------------------------------------------------

_CONTAINED: list = []


def _contained_binary_type():
    """``_ContainedBinary``: cuTile's ``_CompilerBinary`` whose ``run`` starts tileiras in its own process group,
    with a parent-death signal, and kills the whole group (tileiras and its ptxas) on a timeout
    (:func:`tileprobe.procs.run_in_group`); a run cuTile starts without a timeout (its bytecode-version probe)
    gets :func:`~tileprobe.model.toolkit.tool_timeout_s`, and a timeout there is a :class:`ToolchainError` (cuTile
    would swallow a compiler error and fall back to bytecode 13.1). The errors it raises are cuTile's own
    (``TileCompilerExecutionError``, ``TileCompilerTimeoutError``), so failures are classified as before. Built on
    first use (cuTile is imported lazily)."""
    if _CONTAINED:
        return _CONTAINED[0]
    from cuda.tile import _compile

    class _ContainedBinary(_compile._CompilerBinary):
        def run(self, args, flags, timeout_sec=None):
            command = [self.path, *args, *flags]
            bounded = timeout_sec is None
            limit = timeout_sec or tool_timeout_s()
            rc, out, err = run_in_group(command, _tool_env(self), limit)
            if rc is None and bounded:
                raise ToolchainError(f"{self.path} did not answer within {limit:g} s "
                                     f"({' '.join(command[1:])}); it was stopped. Run `tileprobe doctor`.")
            if rc is None:
                message = (f"`tileiras` compiler exceeded timeout {timeout_sec}s. "
                           "Using a smaller tile size may reduce compilation time.")
                raise _compile.TileCompilerTimeoutError(message, " ".join(flags),
                                                        _compile._try_get_compiler_version(self.path))
            if rc != 0:   # raised from the raw output: failure.classify reads stderr and stdout (cuTile's parse drops stdout)
                import subprocess
                raise execution_error(rc, as_text(err), flags,
                                      _compile._try_get_compiler_version(self.path)) \
                    from subprocess.CalledProcessError(rc, command, out, err)
            if "-o" in args[:-1] and not os.path.exists(wrote := args[args.index("-o") + 1]):   # no cubin
                raise CompilerWroteNothing(self.path, str(wrote), as_text(out) + as_text(err))

    _CONTAINED.append(_ContainedBinary)
    return _ContainedBinary


def contain_default_compiler() -> None:
    """Wrap the tileiras cuTile picked by itself (``_find_compiler_bin``) in :class:`_ContainedBinary`."""
    from cuda.tile import _compile
    b = _compile._find_compiler_bin()
    cls = _contained_binary_type()
    if not isinstance(b, cls):
        binary = cls(b.path, b.bin_path, b.ld_path, b.pass_cuda_home_var)
        _compile._find_compiler_bin = lambda: binary


def pin_compiler_facts(temp_dir: str) -> tuple[str, object]:
    """Probe the selected tileiras once — its ``--version`` text and the newest bytecode version it reads — and make
    cuTile answer from these values from now on, whatever temp folder it asks with.

    cuTile caches its bytecode-version probe per temp folder (``_get_max_supported_bytecode_version(temp_dir)``),
    and the audit gives every variant its own folder, so each compile ran the probe again: 88 extra tileiras runs
    for 88 variants. It also runs ``tileiras --version`` again after every failed compile
    (``_try_get_compiler_version``), without a timeout. Call after :func:`use_compiler` /
    :func:`contain_default_compiler`, once per worker.

    Returns (version text, bytecode version). Raises :class:`ToolchainError` when tileiras does not answer within
    :func:`tool_timeout_s`.
    """
    from cuda.tile import _compile
    binary = _compile._find_compiler_bin()
    limit = tool_timeout_s()
    rc, out, err = run_in_group([binary.path, "--version"], _tool_env(binary), limit)
    if rc is None:
        raise ToolchainError(f"{binary.path} --version did not answer within {limit:g} s; it was stopped. "
                             "Run `tileprobe doctor`.")
    version_text = as_text(out) if rc == 0 else None
    probe = getattr(_compile._get_max_supported_bytecode_version, "__wrapped__",
                    _compile._get_max_supported_bytecode_version)
    versions = {}
    fixed = os.environ.get(BYTECODE_ENV, "").strip()

    def max_version(temp_dir_=None, allow_dev=False):
        if allow_dev not in versions:
            versions[allow_dev] = probe(temp_dir, allow_dev)
            if fixed:
                versions[allow_dev] = _fixed_bytecode(fixed, versions[allow_dev], parse_build(version_text or ""))
        return versions[allow_dev]

    from cuda.tile._compile import dev_features_enabled
    bytecode = max_version(allow_dev=dev_features_enabled())
    _compile._get_max_supported_bytecode_version = max_version
    _compile._get_compiler_version_string = lambda: version_text
    _compile._try_get_compiler_version = lambda compiler_bin=None: version_text
    return version_text or "", bytecode


#: Set to a bytecode version (``"13.3"``) to make cuTile write that version whatever the tileiras reads (at most its
#: newest): one frontend's bytecode, the same bytes, for several tileiras releases (``audit --fixed-bytecode``).
BYTECODE_ENV = "TILEPROBE_BYTECODE"


def bytecode_text(version) -> str:
    """cuTile's ``BytecodeVersion`` (``130400``) as ``"13.4"``; ``""`` for None or another shape."""
    try:
        n = int(getattr(version, "value", version))
    except (TypeError, ValueError):
        return ""
    return f"{n // 10000}.{n // 100 % 100}"


def _fixed_bytecode(wanted: str, newest, build: str):
    """The newest cuTile ``BytecodeVersion`` not past ``wanted`` (``"13.3"``; a release newer than cuTile knows gets
    cuTile's newest), when the tileiras (whose newest is ``newest``) reads it.

    Raises:
        ToolchainError: ``wanted`` is not MAJOR.MINOR, older than every version cuTile writes, or newer than this
            tileiras reads.
    """
    from cuda.tile import _compile
    try:
        want = _version_number(wanted)
    except ValueError:
        raise ToolchainError(f"{BYTECODE_ENV}={wanted!r} is not a bytecode version such as 13.3") from None
    fits = [v for v in _compile._all_bytecode_versions(False) if int(v.value) <= want]
    if not fits:
        raise ToolchainError(f"{BYTECODE_ENV}={wanted}: cuda-tile {cutile_version()} writes no bytecode that old")
    chosen = max(fits, key=lambda v: int(v.value))
    if int(chosen.value) > int(getattr(newest, "value", newest)):
        raise ToolchainError(f"{BYTECODE_ENV}={wanted}: {build or 'this tileiras'} reads bytecode up to "
                             f"{bytecode_text(newest)}; fix the bytecode at the oldest release's version")
    return chosen


def newest_bytecode_written() -> str:
    """The newest bytecode version this cuda-tile writes (``"13.4"`` for 1.6.0 and 1.7.0, ``"13.3"`` for 1.5.0: their
    ``_all_bytecode_versions``, read 2026-12-05). A tileiras that reads newer still gets this one."""
    from cuda.tile import _compile
    return bytecode_text(max(int(v.value) for v in _compile._all_bytecode_versions(False)))


def _version_number(text: str) -> int:
    """``"13.3"`` or ``"13.3.36"`` → 130300 (cuTile's ``BytecodeVersion`` numbering). Raises ValueError."""
    major, minor = (int(x) for x in text.strip().split(".")[:2])
    return major * 10000 + minor * 100


def fixed_bytecode_for(releases: Sequence[str]) -> str:
    """The bytecode version every one of these tileiras releases reads (``["13.3.36", "13.4.92"]`` → ``"13.3"``):
    the oldest release's major.minor (tileiras 13.3.36 reads bytecode up to 13.3, 13.4.92 and 13.5.37 up to 13.4:
    cuTile 1.7.0's probe, 2026-12-05). Raises :class:`ToolchainError` for a release that is not MAJOR.MINOR[.PATCH].
    """
    try:
        oldest = min(_version_number(r) for r in releases)
    except ValueError:
        raise ToolchainError(f"releases {', '.join(releases)}: each must be MAJOR.MINOR.PATCH to fix the bytecode "
                             "for them (a tileiras given by path: install it as a toolchain)") from None
    return f"{oldest // 10000}.{oldest // 100 % 100}"


@contextlib.contextmanager
def fixed_bytecode(releases: Sequence[str]) -> Iterator[str]:
    """While inside: every compile worker started writes the bytecode :func:`fixed_bytecode_for` ``releases``
    (:data:`BYTECODE_ENV` set, then restored), so that one frontend's bytecode, the same bytes, goes to each."""
    fixed = fixed_bytecode_for(releases)
    before = os.environ.get(BYTECODE_ENV)
    os.environ[BYTECODE_ENV] = fixed
    try:
        yield fixed
    finally:
        if before is None:
            os.environ.pop(BYTECODE_ENV, None)
        else:
            os.environ[BYTECODE_ENV] = before


def file_sha256(path: str) -> str:
    """The sha256 of a file's bytes (hex); ``""`` when it cannot be read."""
    import hashlib
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def _tool_env(binary) -> dict:
    env = os.environ.copy()
    env["LD_LIBRARY_PATH"], env["PATH"] = binary.ld_path, binary.bin_path
    if not binary.pass_cuda_home_var:
        for key in ("CUDA_HOME", "CUDA_PATH"):
            env.pop(key, None)
    return env


def current_compiler() -> str:
    """Path of the tileiras cuTile would use now. Raises :class:`ToolchainError` if none is found."""
    from cuda.tile import _compile
    try:
        return _compile._find_compiler_bin().path
    except FileNotFoundError as e:
        raise ToolchainError(f"{e} Or install one with `tileprobe toolchain install 13.4`.") from e


def compiler_build_string() -> str:
    """tileiras ``--version`` output, last line (e.g. ``Cuda compilation tools, release 13.4, V13.4.92``)."""
    from cuda.tile import _compile
    return parse_build(_compile._get_compiler_version_string() or "")


def install_compile_hook() -> None:
    """Wrap ``cuda.tile._compile.compile_cubin`` to record each tileiras call (argv, seconds, remarks).

    The wrapper takes whatever the installed release's ``compile_cubin`` takes (:attr:`PrivateApi.compile_cubin`:
    4 parameters in 1.5.0, 5 in 1.6.0, 7 in 1.7.0) and passes it on as given; where the release can ask for
    remarks (:attr:`PrivateApi.remarks`) and tileiras reads them, it asks as cuTile's JIT does with its disk cache on.

    Raises:
        TileprobeError: the installed cuda-tile lacks a name or shape tileprobe needs (:func:`check_cutile`).
    """
    import inspect

    from cuda.tile import _compile
    check_cutile()
    original = getattr(_compile.compile_cubin, "_tileprobe_original", _compile.compile_cubin)
    signature = inspect.signature(original)
    # PrivateApi.remarks, read from the function wrapped here
    remarks = "remarks_output_file" in signature.parameters and hasattr(_compile, "_tileiras_supports_remarks")

    def hooked(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        fname_bytecode = given["fname_bytecode"]
        if (remarks and given.get("remarks_output_file") is None
                and _compile._tileiras_supports_remarks(os.path.dirname(fname_bytecode))):
            # JIT with cuTile's disk cache on (its default) asks for remarks; do the same.
            given["remarks_output_file"] = os.path.splitext(fname_bytecode)[0] + ".remarks.yaml"
        call = _compiler_call(given)
        call.bytecode_sha256 = file_sha256(fname_bytecode)
        _CALLS.append(call)
        t0 = time.perf_counter()
        try:
            reuse = os.environ.get(REUSE_ENV)     # one tileiras run per distinct program (tileprobe.bytecode_reuse)
            if reuse:
                return _compiled_once(reuse, call, lambda: original(*bound.args, **bound.kwargs))
            return original(*bound.args, **bound.kwargs)
        finally:
            call.seconds = time.perf_counter() - t0

    hooked.__dict__["_tileprobe_original"] = original
    _compile.compile_cubin = hooked


def _compiled_once(folder: str, call: CompilerCall, run: Callable[[], object]):
    """``compile_cubin``'s answer through :func:`tileprobe.bytecode_reuse.compile_once`: an equal bytecode's cubin
    (its path, as cuTile returns it), or its failure raised as :class:`_ContainedBinary` raises it."""
    import subprocess
    from pathlib import Path

    from tileprobe.bytecode_reuse import Failed, compile_once
    flags = call.argv[4:]
    context = [call.argv[0], *(f for f in flags if not f.startswith("--remarks-output-file="))]

    def replay(f: Failed) -> BaseException:
        e = execution_error(f.returncode, f.stderr, flags, compiler_build_string() or None)
        e.__cause__ = subprocess.CalledProcessError(f.returncode, call.argv, f.stdout, f.stderr)
        return e
    compile_once(folder, call.argv[1], context, call.argv[3], call.remarks_path, run, replay)
    return Path(call.argv[3])


def _compiler_call(given: dict) -> CompilerCall:
    """The tileiras command ``compile_cubin`` runs for these arguments (bound by name; a parameter the release lacks
    is absent and adds no flag), as cuda-tile 1.5.0-1.7.0 build it."""
    from cuda.tile import _compile
    fname_bytecode, sm_arch = given["fname_bytecode"], given["sm_arch"]
    remarks = given.get("remarks_output_file")
    binary = _compile._find_compiler_bin()
    opt, debug = _compile._tileiras_effective_opt_and_device_debug(given["compiler_options"], sm_arch)
    argv = [binary.path, str(fname_bytecode), "-o", os.path.splitext(fname_bytecode)[0] + ".cubin",
            "--gpu-name", sm_arch, f"-O{opt}", *[f"--preview={f}" for f in given.get("preview_features", ())]]
    for p in given.get("linker_inputs", ()):
        argv += ["-l", str(p)]
    argv.append("--device-debug" if debug else "--lineinfo")
    if remarks is not None:
        argv += ["--remark-format=yaml", "--remarks=all", f"--remarks-output-file={remarks}"]
    passed = getattr(binary, "pass_cuda_home_var", True)
    return CompilerCall(argv, binary.bin_path, binary.ld_path, remarks_path=str(remarks) if remarks else None,
                        cuda_env={k: os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if passed and k in os.environ})


def take_compiler_calls() -> list[CompilerCall]:
    """Return and forget the compiler calls recorded since the last call."""
    calls = list(_CALLS)
    _CALLS.clear()
    return calls


def configure_context(temp_dir: str, timeout_s: float | None) -> None:
    """Point cuTile's default context at ``temp_dir``, set the compiler timeout, and turn its disk cache off.

    The audit has its own store; a cuTile cache hit would skip tileiras and hide the compile.
    """
    from cuda.tile._cext import default_tile_context
    cfg = default_tile_context.config
    cfg.temp_dir = temp_dir
    cfg.compiler_timeout_sec = timeout_s
    cfg.cache_dir = None


# --- where cuTile keeps its compile cache ------------------------------------------------------------------

def compile_cache_dir() -> str | None:
    """The folder of cuTile's compile cache (``cache.db`` inside), as cuTile picks it: ``$CUDA_TILE_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/cutile-python`` (``~/.cache/cutile-python``); None when the cache is turned off
    (``CUDA_TILE_CACHE_DIR=0/off/none``). Asks ``cutile_cache._env`` (cuda-tile 1.7) when it exists."""
    try:
        from cutile_cache._env import get_cache_dir_from_env
        return get_cache_dir_from_env()
    except ImportError:
        env = os.environ.get("CUDA_TILE_CACHE_DIR")
        if env is not None:
            return None if env.strip().lower() in ("0", "off", "none", "") else env
        base = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        return os.path.join(base, "cutile-python")


def effective_hints(kernel, arch: str) -> dict:
    """The hints in force for ``arch``: the kernel's declared values with its ``ByTarget`` entries resolved."""
    by_target = kernel._compiler_options.hints_by_target()
    eff = dict(by_target.get("default", {}))
    eff.update(by_target.get(arch, {}))
    return eff


# --- the kernel class, the JIT's compile, the compiler lookup's helpers ---------------------------------------

def kernel_type() -> type:
    """The class of a ``@ct.kernel`` function: ``ct.kernel`` itself (a class in cuda-tile 1.5.0, 1.6.0 and 1.7.0,
    defined as the private ``cuda.tile._execution.kernel``), for ``isinstance`` checks."""
    import cuda.tile as ct
    return ct.kernel


def kernel_function(kernel) -> Callable:
    """The Python function a ``@ct.kernel`` object wraps (its private ``_pyfunc`` in cuda-tile 1.5.0 … 1.7.0)."""
    return kernel._pyfunc


@contextlib.contextmanager
def jit_compile_hook(seen: Callable[[Any, Any], None]) -> Iterator[None]:
    """While inside, each JIT compile of this process (``cuda.tile._execution.kernel._compile``: ``(self, signature,
    context)`` in 1.5.0, ``compute_capability`` added in 1.6.0 and 1.7.0; passed on as given) runs, then
    ``seen(signature, result)`` is called (``result[0]``: the cubin bytes); it may raise to stop the launch.
    Restored on exit."""
    from cuda.tile import _execution
    original = _execution.kernel._compile

    def hooked(self, signature, *args, **kwargs):
        result = original(self, signature, *args, **kwargs)
        seen(signature, result)
        return result

    _execution.kernel._compile = hooked
    try:
        yield
    finally:
        _execution.kernel._compile = original


def default_toolkit_dirs() -> list[str] | None:
    """cuTile's ``_compile._get_default_cuda_toolkit_paths()`` (a listdir of /usr/local, no compiler run), or None
    when the installed release has no such helper (``tileprobe doctor`` then uses its own copy)."""
    from cuda.tile import _compile
    helper = getattr(_compile, "_get_default_cuda_toolkit_paths", None)
    return list(helper()) if helper is not None else None


def passes_cuda_home_flag() -> bool:
    """Whether the installed cuTile's ``_CompilerBinary`` has ``pass_cuda_home_var`` (1.7: CUDA_HOME / CUDA_PATH are
    kept only for a tileiras found on PATH or in ``$CUDA_HOME/bin``); without it (older releases) they are always
    passed to tileiras."""
    from cuda.tile import _compile
    return "pass_cuda_home_var" in {f.name for f in dataclasses.fields(_compile._CompilerBinary)}

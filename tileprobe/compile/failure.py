"""Why a variant did not compile, in the compiler's own words and in classes a user can act on.

:func:`classify` turns what ``export_kernel`` raised into a :class:`Failure`: its class
(:data:`tileprobe.schema.FAILURE_CLASSES`), the ``status`` older readers know, the meaningful lines of what tileiras
printed (stderr and stdout: cuTile keeps the raw output on the ``CalledProcessError`` its exception is raised from)
or of cuTile's refusal, signals by name, and a fix:

================== ===========================================================================================
unsupported_target the compiler does not list the arch. Known before compiling from ``tileiras --help`` (probed once
                   per toolchain: :func:`unsupported_target`); after the fact from "Cannot find option named 'sm_NN'"
unsupported_feature cuTile's ``UnsupportedFeatureError`` (a dtype or feature this arch lacks, e.g. float4_e2m1fn on
                   sm_90), or "requires tileiras X" — raised before tileiras runs
compiler_crash     tileiras killed by a signal (negative return code): "tileiras was killed by SIGSEGV (signal 11)"
timeout            cuTile's ``CompilerTimeoutError``
broken_environment tileiras printed nothing but ``error: failed to compile Tile IR program`` and the CUDA root it took
                   is broken (:func:`tileprobe.model.toolkit.environment_trap`: the CUDA_HOME trap). The same line
                   with a sound root is a compile_error: tileiras 13.4 also says only that for real errors
                   (cutile-python #94's kernel on sm_120)
compile_error      anything else tileiras or cuTile's front end refused. A front-end error (:func:`front_end`:
                   ``TypeCheckingError`` and the like, raised while cuTile checks the kernel's Python source) is the
                   kernel's: its fix names the file:line cuTile gives (:func:`kernel_fix`); only a refusal by
                   tileiras has a repeat command, so only its fix mentions one. An exception raised in tileprobe's
                   own code or its adapter's call into cuTile (:func:`own_call`: a ``TypeError`` for another
                   release's signature) is tileprobe's: its message and fix say so (:func:`own_fault`), never
                   the kernel's or NVIDIA's
================== ===========================================================================================

:func:`dead_worker` names a compile worker that died: while running probe code (``args``) that is the probe's
failure (``os._exit`` in ``args`` is not a compiler crash), while compiling it is a compiler crash.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass

from tileprobe.model.toolkit import TRAP, cuda_root, environment_trap
from tileprobe.schema import (
    BROKEN_ENVIRONMENT,
    COMPILE_ERROR,
    COMPILER_CRASH,
    FAILURE_FIXES,
    FAILURE_STATUS,
    PROBE_ERROR,
    TIMEOUT,
    UNSUPPORTED_FEATURE,
    UNSUPPORTED_TARGET,
    meaningful_lines,
    signal_text,
)

_TARGET_REFUSED = re.compile(r"Cannot find option named '(sm_\d+[a-z]?)'")
_REQUIRES = re.compile(r"requires tileiras (\d+\.\d+)")
_RELEASE = re.compile(r"V(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class Failure:
    """One classified failure: ``failure`` (class), ``status`` (:data:`tileprobe.schema.FAILURE_STATUS`),
    ``message`` (the meaningful lines, newline-separated), ``fix`` (one line) and ``error`` (the whole text)."""
    failure: str
    message: str
    fix: str
    error: str

    @property
    def status(self) -> str:
        """The record ``status`` this class is stored under."""
        return FAILURE_STATUS[self.failure]


def _decode(b) -> str:
    if b is None:
        return ""
    return b.decode("utf-8", errors="replace") if isinstance(b, (bytes, bytearray)) else str(b)


def _process_output(exc: BaseException) -> tuple[int | None, str] | None:
    """(return code, stderr + stdout) of the tileiras run behind a cuTile CompilerExecutionError, from the
    ``CalledProcessError`` it was raised from (``raise … from``) or while handling (cuda-tile 1.5-1.7's runner),
    else None."""
    for ctx in (exc.__cause__, exc.__context__):
        if isinstance(ctx, subprocess.CalledProcessError):
            return ctx.returncode, "\n".join(x for x in (_decode(ctx.stderr), _decode(ctx.stdout)) if x)
    return None


def _only_trap(lines: list[str]) -> bool:
    """Whether tileiras said nothing but :data:`TRAP` (cuTile's own parse of stderr drops the ``error:``)."""
    bare = TRAP.split(": ", 1)[1]
    return len(lines) == 1 and lines[0].strip() in (TRAP, bare)


def version_of(build: str) -> str | None:
    """``Cuda compilation tools, release 13.4, V13.4.92`` → ``"13.4.92"`` (None when absent)."""
    m = _RELEASE.search(build or "")
    return m.group(1) if m else None


def classify(exc: BaseException, *, tileiras: str | None = None, build: str = "",
             compiler_env: dict | None = None, timeout_s: float | None = None) -> Failure:
    """Classify an exception ``export_kernel`` raised (see the module doc).

    Args:
        tileiras: the compiler's path (for the environment check); build: its ``--version`` release line.
        compiler_env: CUDA_HOME / CUDA_PATH as tileiras got them (default: neither, as tileprobe runs every
            compile).
        timeout_s: the compile timeout in force (for the timeout message).
    """
    name = type(exc).__name__
    text = str(exc).strip()
    if "Timeout" in name:
        limit = f"{timeout_s:g} s" if timeout_s else "the compile timeout"
        return _make(TIMEOUT, [f"tileiras did not finish within {limit} (raise it: --timeout S or "
                               "Probe(timeout_s=S), then --retry-failed)"], f"{name}: {text}")
    if name == "CompilerWroteNothing":     # tileprobe/_cutile.py: exit 0, no cubin
        return _make(COMPILER_CRASH, [text], f"{name}: {text}",
                     "check the compiler: run it by hand with the repeat command, or `tileprobe doctor`; a wrapper "
                     "script must pass -o FILE on to tileiras")
    if "CompilerExecution" in name:
        return _from_tileiras(exc, name, text, tileiras, build, compiler_env)
    lines = meaningful_lines(f"{name}: {text}")
    m = _REQUIRES.search(text)
    if m:
        return _make(UNSUPPORTED_FEATURE, lines, f"{name}: {text}",
                     f"this needs tileiras {m.group(1)} or newer: audit with --tileiras {m.group(1)} (or later)")
    if "UnsupportedFeature" in name:
        return _make(UNSUPPORTED_FEATURE, lines, f"{name}: {text}")
    error = f"{name}: {text}" if text else name
    where = own_call(exc)
    if where:
        return own_fault(exc, where, build)
    if front_end(exc):
        return _make(COMPILE_ERROR, lines, error, kernel_fix(exc))
    if isinstance(exc, OSError) and _NO_SOURCE.search(text):   # inspect.getsource: the kernel has no file
        return _make(COMPILE_ERROR, lines, error, NO_SOURCE_FIX)
    return _make(COMPILE_ERROR, lines, error, BEFORE_TILEIRAS_FIX)


#: Exceptions that say a call was wrong (a parameter, a name, an import), not that what it was given was: raised where
#: tileprobe's adapter (tileprobe/_cutile.py) calls into cuTile, they are tileprobe's (it called another release's
#: private API), e.g. ``TypeError: compile_cubin() takes from 4 to 5 positional arguments but 7 were given``
#: (cuda-tile 1.6.0 under tileprobe before its adapter, 2026-12-05).
_CALL_ERRORS = (TypeError, AttributeError, NameError, ImportError)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ADAPTER = os.path.join(_PACKAGE, "_cutile.py")


def own_call(exc: BaseException) -> str | None:
    """``file:line`` of tileprobe's own code where ``exc`` arose, when it is tileprobe's fault, else None.

    Tileprobe's fault: ``exc`` is neither one of cuTile's (a ``TileError``: the kernel's or the compiler's) nor one
    of tileprobe's deliberate errors (:class:`~tileprobe.errors.TileprobeError`, which say what to do), and either it
    was raised in a frame of the tileprobe package (the traceback's innermost frame), or it is a call error
    (:data:`_CALL_ERRORS`) raised in cuTile code that tileprobe's adapter called (the deepest tileprobe frame is in
    ``tileprobe/_cutile.py``)."""
    import traceback

    from tileprobe.errors import TileprobeError
    names = {c.__name__ for c in type(exc).__mro__}
    if "TileError" in names or isinstance(exc, TileprobeError):
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(_PACKAGE + os.sep)]
    if not ours:
        return None
    last = ours[-1]
    if last is frames[-1] or (isinstance(exc, _CALL_ERRORS) and os.path.abspath(last.filename) == _ADAPTER):
        return f"{os.path.relpath(os.path.abspath(last.filename), os.path.dirname(_PACKAGE))}:{last.lineno}"
    return None


def own_fault(exc: BaseException, where: str, build: str = "") -> Failure:
    """The failure of a variant whose compile failed in tileprobe's own code (:func:`own_call` gave ``where``):
    said to be tileprobe's, with the versions in play (tileprobe, cuda-tile, tileiras ``build``) and where to report
    it; the releases of cuda-tile tileprobe is tested with, and the command that installs one."""
    from tileprobe._cutile import NEWEST_TESTED, TESTED_RELEASES
    from tileprobe._version import __version__
    from tileprobe.schema import cutile_version
    name, text = type(exc).__name__, str(exc).strip()
    versions = f"tileprobe {__version__}, cuda-tile {cutile_version()}, tileiras {version_of(build) or '?'}"
    lines = [f"tileprobe's own call into cuda-tile failed at {where} (a tileprobe bug: not the kernel's, not the "
             f"compiler's): {name}: {text}", f"versions: {versions}"]
    fix = (f"report it to tileprobe (its issue tracker) with this message and the versions ({versions}); a cuda-tile "
           f"tileprobe is tested with ({', '.join(TESTED_RELEASES)}) may avoid it: pip install "
           f"'cuda-tile=={NEWEST_TESTED}', then audit with --retry-failed")
    return _make(COMPILE_ERROR, lines, f"{name}: {text}" if text else name, fix)


#: inspect's words when a function's source cannot be read (``OSError: could not get source code`` / ``source code
#: not available``): cuTile parses the kernel's Python source, so a kernel made by ``exec`` or whose file is gone
#: cannot be compiled.
_NO_SOURCE = re.compile(r"source code not available|could not get source code|could not find class definition")
NO_SOURCE_FIX = ("cuTile could not read the kernel's source (a kernel made by exec() or eval(), or its file is gone "
                 "or changed): define the kernel in a .py file and import it from there")


#: The fix of a compile_error raised before tileiras ran that is not a front-end error of the kernel (cuTile's own
#: InternalError, another exception out of ``export_kernel``): there is no compiler command to repeat.
BEFORE_TILEIRAS_FIX = ("cuTile failed before tileiras ran: read its message; report it to NVIDIA with the kernel if "
                       "the kernel is valid")
_LOCATION = re.compile(r'"([^"\n]+)", line (\d+)')


def front_end(exc: BaseException) -> bool:
    """Whether ``exc`` is an error of cuTile's front end: raised in Python while cuTile parses and type-checks the
    kernel's source (``TypeCheckingError``, ``TileSyntaxError``, ``TileTypeError``, ``TileValueError``,
    ``StaticAssertionError`` …), before tileiras runs, so the kernel is at fault, not the compiler. By class name
    (cuTile's exception classes are not imported here and their names differ between releases): a ``TileError``
    subclass that is not an ``InternalError`` (cuTile's own bugs and its tileiras errors: ``CompilerExecutionError``,
    ``CompilerTimeoutError``)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return "TileError" in names and not names & {"InternalError", "TileInternalError"}


def before_tileiras(fix: str) -> bool:
    """Whether a compile_error's ``fix`` says cuTile refused the kernel before any tileiras ran (:func:`kernel_fix`'s
    front-end error, or :data:`BEFORE_TILEIRAS_FIX`): an answer that does not depend on the compiler."""
    return fix == BEFORE_TILEIRAS_FIX or (fix.startswith("fix the kernel ") and "before tileiras ran" in fix)


def kernel_fix(exc: BaseException) -> str:
    """The fix of a front-end error (:func:`front_end`): fix the kernel at the ``file:line`` cuTile names (the
    exception's ``loc``, else the first ``"file", line N`` of its message; without one, where its message points)."""
    loc = getattr(exc, "loc", None)
    path, line = getattr(loc, "filename", None), getattr(loc, "line", 0)
    if not (path and line):
        m = _LOCATION.search(str(exc))
        path, line = (m.group(1), int(m.group(2))) if m else (None, 0)
    where = f"at {path}:{line}, the line cuTile names" if path and line else "where cuTile's message points"
    return (f"fix the kernel {where}: cuTile refused its source while checking it in Python, before tileiras ran "
            "(an error in the kernel, not the compiler's)")


def _from_tileiras(exc, name: str, text: str, tileiras: str | None, build: str, compiler_env: dict | None) -> Failure:
    raw = _process_output(exc)
    if raw is None:   # another cuTile: parse its "Return code N\n<stderr lines>" message
        m = re.match(r"Return code (-?\d+)", getattr(exc, "message", "") or text)
        raw = (int(m.group(1)) if m else None, getattr(exc, "message", "") or text)
    rc, output = raw
    lines = meaningful_lines(output)
    error = f"{name}: {text}\n--- tileiras output ---\n{output}" if output.strip() else f"{name}: {text}"
    if rc is not None and rc < 0:
        return _make(COMPILER_CRASH, [f"tileiras was killed by {signal_text(rc)}", *lines], error)
    m = _TARGET_REFUSED.search(output)
    if m:
        return _make(UNSUPPORTED_TARGET, lines, error, _target_fix(m.group(1), build))
    if _only_trap(lines) and tileiras:
        env = dict(compiler_env or {})
        why = environment_trap(tileiras, env, version_of(build))
        if why:
            origin = cuda_root(tileiras, env)[1]
            fix = (f"unset {origin[1:]} (tileiras finds its own toolkit without it), or point it at a CUDA toolkit as "
                   "new as tileiras with lib/libnvvm.so.4; `tileprobe doctor` checks it; then audit with --retry-failed"
                   if origin.startswith("$") else
                   "run a tileiras that sits in its complete toolkit (bin/ptxas, lib/libnvvm.so.4 beside it): "
                   "`tileprobe toolchain install 13.4` and --tileiras 13.4, or the pip packages of one release "
                   "(`tileprobe doctor` names them); "
                   "then audit with --retry-failed")
            return _make(BROKEN_ENVIRONMENT, [*lines, f"tileiras {version_of(build) or '?'} took a broken CUDA root: "
                                              f"{why} (the CUDA_HOME trap: tileiras loads libnvvm and ptxas from its "
                                              "CUDA root)"], error, fix)
        return _make(COMPILE_ERROR, lines, error,
                     "tileiras said no more than this, and its CUDA root is sound (not the CUDA_HOME trap): report "
                     "the kernel to NVIDIA with the repeat command; `tileprobe bisect … --property compiles` finds "
                     "the release where it began")
    if rc is not None and not lines:
        lines = [f"tileiras failed with {signal_text(rc)} and printed nothing"]
    return _make(COMPILE_ERROR, lines, error)


def _target_fix(arch: str, build: str) -> str:
    return (f"audit {arch} with a tileiras release that lists it (e.g. --tileiras 13.4; `tileprobe doctor` shows "
            f"each installed release's targets), or leave {arch} out")


def _make(failure: str, lines: list[str], error: str, fix: str | None = None) -> Failure:
    return Failure(failure, "\n".join(lines), fix or FAILURE_FIXES[failure], error)


def unsupported_target(arch: str, targets: list[str], tileiras: str, build: str) -> Failure:
    """The failure of a variant for ``arch`` when tileiras ``tileiras`` (release line ``build``) lists only
    ``targets`` in its ``--help`` (nothing is compiled)."""
    v = version_of(build) or "?"
    message = (f"tileiras {v} does not list {arch}: its --help offers --gpu-name {' '.join(targets)} "
               f"(compiling would end in \"tileiras: for the --gpu-name option: Cannot find option named "
               f"'{arch}'!\")")
    return _make(UNSUPPORTED_TARGET, [message], message, _target_fix(arch, build))


def help_command(tileiras: str) -> str:
    """The command that shows a tileiras's target list (the repeat command of an unsupported_target)."""
    return f"env -u CUDA_HOME -u CUDA_PATH {shlex.quote(tileiras)} --help | grep -- '=sm_'"


# --- a compile worker that died --------------------------------------------------------------------------------

#: What a compile worker is doing, as written to its phase file (:func:`mark_phase`).
PHASES = {"import": "importing the probe file", "args": "running the probe's args()",
          "compile": "compiling (cuTile's front end and tileiras)"}


def phase_file(root: str, pid: int) -> str:
    """Where the compile worker with process id ``pid`` notes its phase, under the pool's temp root ``root``. One
    file per worker, not per variant: two workers given equal variants must not read each other's phase."""
    return os.path.join(root, f"phase-{pid}")


#: The pid its pool knows this worker by, when it is not this process's own: a worker runs under a nanny
#: (:func:`tileprobe.probe.zygote.under_nanny`), whose pid the pool started and watches. None: ``os.getpid()``.
PHASE_PID: int | None = None


def mark_phase(root: str | None, phase: str | None) -> None:
    """Note (``phase`` in :data:`PHASES`) or clear (None) what this worker process does now, in the phase file of
    the pid its pool knows it by (:data:`PHASE_PID`); best effort."""
    if not root:
        return
    path = phase_file(root, PHASE_PID or os.getpid())
    try:
        if phase is None:
            os.unlink(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(phase)
    except OSError:
        pass


#: Signals that end a compile worker only when probe code armed or sent them: tileprobe stops workers with
#: SIGKILL (and SIGTERM when the audit itself dies); a compiler runs in its own process group and cannot arm the
#: worker's timers; a crash of cuTile's extension is SIGSEGV, SIGBUS or SIGABRT.
PROBE_SIGNALS = ("SIGALRM", "SIGVTALRM", "SIGPROF", "SIGUSR1", "SIGUSR2")


def dead_worker(variant, root: str | None, pid: int | None, how: str = "") -> Failure:
    """The failure of ``variant`` when its compile worker process (id ``pid``) died (it compiles one variant at a
    time, so that variant killed it): what the worker was doing, from its phase file (:func:`mark_phase`); ``how``
    it ended, when known ("signal SIGSEGV")."""
    phase = None
    if root and pid is not None:
        try:
            with open(phase_file(root, pid), encoding="utf-8") as f:
                phase = f.read().strip()
        except OSError:
            pass
    ended = f", {how}," if how else ""
    armed = next((s for s in PROBE_SIGNALS if f"{s} " in f"{how} " or f"{s})" in how), None)
    if armed:      # neither tileprobe nor a compiler sends it to the worker; the probe's timer did
        doing = PHASES.get(phase, phase) if phase else "between variants"
        return _make(PROBE_ERROR, [f"the compile worker ended{ended} while {doing}: {armed} is a signal only the "
                                   "probe's own code arms (signal.alarm, signal.setitimer, os.kill); tileprobe and "
                                   "the compiler never send it"],
                     f"the compile worker died{ended} while {doing}; a new worker took the next variant",
                     f"remove the timer or signal from {variant.probe_path} (tileprobe bounds each step itself: "
                     "--probe-timeout, --timeout)")
    if phase is None:
        return _make(BROKEN_ENVIRONMENT, ["the compile worker process died before it started this variant (while "
                                          "setting up cuTile and the compiler)"],
                     f"the compile worker died{ended} at start",
                     "run `tileprobe doctor`, then audit again with --jobs 1 --retry-failed")
    doing = PHASES.get(phase, phase)
    error = f"the compile worker died{ended} while {doing}; a new worker took the next variant"
    if phase in ("import", "args"):
        what = "args()" if phase == "args" else "the probe file's import"
        return _make(PROBE_ERROR, [f"the compile worker process ended{ended} while {doing}: {what} called os._exit() "
                                   "or crashed the interpreter"], error,
                     f"fix {what} in {variant.probe_path}: it must return the launch arguments, not end the process")
    return _make(COMPILER_CRASH, [f"the compile worker process died{ended} while {doing} (a signal, or a crash in "
                                  "cuTile's extension, or the machine ran out of memory)"], error)

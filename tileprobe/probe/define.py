"""Probe files: a kernel, how it is launched, and the grid of cases × hints to audit or run.

A probe file is plain Python that defines ``probe = Probe(...)`` (or ``probes = [Probe(...), ...]``)::

    import cuda.tile as ct
    from tileprobe import Probe

    @ct.kernel
    def add(X, Y, Z, TILE: ct.Constant[int]): ...

    probe = Probe(
        kernel=add,                                   # or "pkg.module:name" / "path/to/file.py:name"
        args=lambda case, arrays: (arrays.randn((4096,), "float32"), arrays.randn((4096,), "float32"),
                                   arrays.empty((4096,), "float32"), case["TILE"]),
        cases={"TILE": [128, 256]},                   # crossed; values reach args() as case["TILE"]
        hints={"occupancy": [1, 2, 4]},               # compiler hints, crossed with the cases
        grid=lambda case, hints, num_sms: (4096 // case["TILE"],),
        reference=lambda case, a: {2: a[0] + a[1]},   # for `tileprobe run`: expected output per arg index
    )

``args(case, arrays)`` returns the arguments exactly as the code under test passes them to ``ct.launch``.
``arrays`` makes device arrays: in an audit they are :class:`~tileprobe.probe.signature.ArraySpec` (shape, dtype,
strides, alignment; no memory), in a GPU run real tensors of the same layout — so the audit compiles the
signature JIT would infer for the real launch.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import inspect
import itertools
import os
import posix
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from tileprobe.errors import ProbeError
from tileprobe.model.hints import LOAD_KNOBS, check_hints, check_values
from tileprobe.probe.signature import ArraySpec


class SpecArrays:
    """The ``arrays`` factory an audit hands to ``Probe.args``: every call returns an :class:`ArraySpec`.

    Each method records how a GPU run must fill the array (``init``), so one ``args`` function serves both.
    Shapes are tuples of elements; ``strides`` in elements (``None``: C-contiguous); ``align`` in bytes.
    """

    def _spec(self, shape, dtype, init, strides=None, align=256, offset=0) -> ArraySpec:
        if isinstance(shape, int):
            shape = (shape,)
        return ArraySpec(tuple(shape), dtype, strides=strides, align=align, offset=offset, init=init)

    def empty(self, shape, dtype, *, strides=None, align=256, offset=0):
        """An output array; a checked GPU run poisons it with NaN (or a sentinel for integers)."""
        return self._spec(shape, dtype, {"kind": "empty"}, strides, align, offset)

    def zeros(self, shape, dtype, *, strides=None, align=256, offset=0):
        """An array of zeros."""
        return self._spec(shape, dtype, {"kind": "full", "value": 0}, strides, align, offset)

    def full(self, shape, dtype, value, *, strides=None, align=256, offset=0):
        """An array filled with ``value``."""
        return self._spec(shape, dtype, {"kind": "full", "value": value}, strides, align, offset)

    def randn(self, shape, dtype, *, scale=1.0, strides=None, align=256, offset=0):
        """Normal(0, scale²) values, fresh per check."""
        return self._spec(shape, dtype, {"kind": "randn", "scale": scale}, strides, align, offset)

    def rand(self, shape, dtype, *, low=0.0, high=1.0, strides=None, align=256, offset=0):
        """Uniform [low, high) values (computed in float32, then cast: works for fp8)."""
        return self._spec(shape, dtype, {"kind": "rand", "low": low, "high": high}, strides, align, offset)

    def randint(self, shape, dtype, low, high, *, strides=None, align=256, offset=0):
        """Uniform integers in [low, high)."""
        return self._spec(shape, dtype, {"kind": "randint", "low": low, "high": high}, strides, align, offset)

    def randperm(self, n, dtype="int32", *, align=256, offset=0):
        """A random permutation of 0 … n-1 (e.g. gather indices)."""
        return self._spec((n,), dtype, {"kind": "randperm"}, None, align, offset)

    def custom(self, shape, dtype, fill: Callable, *, strides=None, align=256, offset=0):
        """An array a GPU run fills by calling ``fill(tensor, generator)`` (torch); the audit ignores it."""
        return self._spec(shape, dtype, {"kind": "custom", "fill": fill}, strides, align, offset)


@dataclass
class Probe:
    """One kernel, its launches and the grid to audit.

    Args:
        kernel: a ``@ct.kernel`` object, or ``"module:attr"`` / ``"file.py:attr"`` naming one.
        args: ``args(case, arrays) -> tuple`` — the ``ct.launch`` arguments for one case (see module doc).
        cases: constant name → list of values; every combination is one case (e.g. GATHER × LOOP).
        hints: compiler hint → list of values (``occupancy``, ``num_ctas``, ``opt_level``,
            ``num_worker_warps``); crossed with the cases. ``None`` as a value means "as the kernel declares".
            Hints left out take the kernel's declared value (``ByTarget`` resolved per arch).
        grid: ``grid(case, hints, num_sms) -> tuple`` of CTAs, for GPU runs.
        reference: ``reference(case, args) -> {arg_index: expected}`` on torch tensors, for GPU runs.
        tolerance: relative-error bound for the check (default: by output dtype).
        name: label in reports (default: the kernel's function name).
        archs: architectures this probe is meant for (default: all the audit asks for).
        knobs: per-load hint → the case constant that carries it, e.g. ``{"allow_tma": "ALLOW_TMA"}`` when the
            kernel passes ``allow_tma=ALLOW_TMA`` to ``ct.load``; such knobs get verdicts too (TMA instructions
            present or not; what a latency value changed).
        tunable: for ``tileprobe tune``: the case names that are tuning knobs (e.g. ``("TILE_M", "TILE_N")``);
            the other case names are the problem (shapes, dtypes), tuned one at a time. Default: no tunable case
            names, so a tune searches the hints only.
        constraints: for ``tileprobe tune``: functions ``(case, hints) -> bool``; a configuration any of them
            rejects is not compiled (rejections are counted by the function's name). ``constraint=`` is one.
        default: for ``tileprobe tune``: the kernel's default configuration, ``{name: value}`` over tunable case
            names and hints; candidates are checked against its output when there is no ``reference``.
            Default: the first value of each tunable name, and cuTile's default of each hint (see
            :mod:`tileprobe.tune.space`).
        timeout_s: compiler timeout per variant for this probe, in seconds (wins over ``--timeout``); for kernels
            slower to compile than the default allows.
        stub_modules: modules to replace by stubs while the kernel is imported (host-only dependencies such as
            ``"flashinfer.jit"``; see :func:`tileprobe.stubs.stub_modules`).
        flush_l2: for GPU runs and tunes: flush the L2 before each timed launch (default True, as
            ``cuda.tile.tune.exhaustive_search``); False times with whatever the previous launch left in L2, as a
            search made with ``flush_l2=False`` does (:func:`tileprobe.run.batch.time_batch`).
        run_timeout_s: for GPU runs and tunes: seconds one launch may take (``single_run_timeout_sec`` of the
            program's search); a batch with a slower launch is an error for that candidate. None: no such bound.

    ``args``, ``reference`` (and ``grid``, for ``arch``) may also take the architecture and the hints in force as
    keyword parameters: ``args(case, arrays, *, arch=None, hints=None)`` gets ``arch="sm_90"`` and ``hints`` = every
    kernel hint's value for this variant (the probe's value, else the declared one, ``ByTarget`` resolved for the
    arch). ``args`` may also take ``num_sms=``: the SM count of the GPU the launch is for — ``run`` and
    ``tune``: the GPU's (or ``tune --num-sms``); ``audit``: ``--num-sms``, else the arch's reference GPU's
    (:func:`tileprobe.model.cluster.reference_num_sms`: sm_90 132, sm_100 148), else None — so a persistent kernel's
    SM-count constant agrees with ``grid(case, hints, num_sms)``. Detected by parameter name (or ``**kwargs``);
    ``args(case, arrays)`` works as before.

    Raises:
        ProbeError: an unknown hint name, an empty value list, a case name that is not a list; a ``tunable`` name
            not in ``cases``, a constraint that is not callable, a ``default`` outside the declared values.
    """
    kernel: Any
    args: Callable[[Mapping[str, Any], Any], Sequence[Any]]
    cases: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    hints: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    grid: Callable | None = None
    reference: Callable | None = None
    tolerance: float | None = None
    name: str | None = None
    archs: Sequence[str] | None = None
    knobs: Mapping[str, str] = field(default_factory=dict)
    tunable: Sequence[str] = ()
    constraints: Sequence[Callable] = ()
    constraint: Callable | None = None
    default: Mapping[str, Any] | None = None
    source: str | None = None        # set by load_probes: "file.py" and index
    index: int = 0
    # --- probes that fit real launch code -----------------------------------------------------------------
    timeout_s: float | None = None
    stub_modules: Sequence[str] = ()
    flush_l2: bool = True
    run_timeout_s: float | None = None
    lineno: int | None = field(default=None, compare=False)   # the line of ``Probe(...)`` in its file

    def __post_init__(self):
        if self.lineno is None:
            self.lineno = _caller_line()
        check_hints(self.hints)
        for c, values in self.cases.items():
            if not isinstance(c, str) or not c:
                raise ProbeError(f"cases key {c!r}: a case is named by a non-empty string (it is the name args() "
                                 f"reads from the case dict, and a column of the tables); e.g. cases={{'TILE': [...]}}")
            check_values("cases", c, values)
        if self.timeout_s is not None:
            from tileprobe.schema import timeout_seconds
            try:
                timeout_seconds(self.timeout_s if isinstance(self.timeout_s, (int, float)) else None)
            except ValueError as e:
                raise ProbeError(f"timeout_s={self.timeout_s!r}: a compiler timeout: {e}") from None
        if not isinstance(self.flush_l2, bool):
            raise ProbeError(f"flush_l2={self.flush_l2!r}: give True or False")
        if self.run_timeout_s is not None and (isinstance(self.run_timeout_s, bool) or not isinstance(
                self.run_timeout_s, (int, float)) or not self.run_timeout_s > 0):
            raise ProbeError(f"run_timeout_s={self.run_timeout_s!r}: give seconds above 0, or None")
        if isinstance(self.stub_modules, str):
            raise ProbeError(f"stub_modules={self.stub_modules!r}: give a list of module names")
        if self.name is not None and (not isinstance(self.name, str)
                                      or (self.name and self.name.splitlines() != [self.name])):
            raise ProbeError(f"name={self.name!r}: give one line of text (it titles tables, reports and stored "
                             "results; a line break there could forge a line of output)")
        for knob, const in self.knobs.items():
            if knob not in LOAD_KNOBS:
                raise ProbeError(f"unknown knob {knob!r}; per-load knobs are {', '.join(LOAD_KNOBS)}")
            if const not in self.cases:
                raise ProbeError(f"knobs[{knob!r}] names {const!r}, which is not in cases= "
                                 f"({', '.join(self.cases) or 'none'}): list its values there")
        _check_tuning(self)

    def resolve_kernel(self):
        """The ``ct.kernel`` object (importing it when given by name). Raises ProbeError if it is not one."""
        k = self.kernel
        if isinstance(k, str):
            from tileprobe.stubs import stub_modules
            with stub_modules(*self.stub_modules):
                k = import_object(k, base_dir=os.path.dirname(self.source) if self.source else None)
        from tileprobe._cutile import kernel_type
        if not isinstance(k, kernel_type()):
            raise ProbeError(f"kernel {self.kernel!r} is a {type(k).__name__}, not a @ct.kernel function",
                             self.source)
        return k

    @property
    def label(self) -> str:
        """The probe's name in reports."""
        if self.name:
            return self.name
        k = self.kernel
        if isinstance(k, str):
            return k.rsplit(":", 1)[-1]
        return getattr(getattr(k, "_pyfunc", None), "__name__", "kernel")

    def case_grid(self) -> list[dict]:
        """Every case as a dict (the cross product of ``cases``, in declaration order)."""
        return _cross(self.cases)

    def hint_grid(self) -> list[dict]:
        """Every hint combination as a dict (the cross product of ``hints``); ``[{}]`` if none."""
        return _cross(self.hints)

    def launch_args(self, case: Mapping[str, Any], arrays=None, *, arch: str | None = None,
                    hints: Mapping[str, Any] | None = None, num_sms: int | None = None) -> tuple:
        """Call ``args(case, arrays)`` (with ``arch=`` / ``hints=`` / ``num_sms=`` when it takes them: ``run``,
        ``tune`` and the audit all call it here); errors become ProbeError pointing at the probe file's line."""
        arrays = arrays or SpecArrays()
        try:
            return tuple(self.args(dict(case), arrays, **context_kwargs(self.args, arch=arch, hints=hints,
                                                                        num_sms=num_sms)))
        except ProbeError:
            raise
        except Exception as e:  # the probe's own code failed
            raise _probe_error_from(e, self.source, f"args({case}) failed") from e


    @property
    def args_take_context(self) -> bool:
        """Whether ``args`` takes ``arch``, ``hints`` or ``num_sms`` (then its arguments may differ per arch, hints
        and SM count)."""
        return bool(self.args_context)

    @property
    def args_context(self) -> tuple[str, ...]:
        """The context keywords ``args`` takes, of ``arch``, ``hints``, ``num_sms`` (all three for ``**kwargs``)."""
        return tuple(context_kwargs(self.args, arch=None, hints=None, num_sms=None))


# --- arch and hints for args / grid / reference -------------------------------------------------------------
def context_kwargs(fn: Callable, **available: Any) -> dict:
    """The keyword arguments among ``available`` (e.g. ``arch=``, ``hints=``) that ``fn`` declares by name or
    accepts through ``**kwargs``; ``{}`` for a function that takes neither (old-style probes)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(available)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in available.items() if k in names}


def _caller_line() -> int | None:
    """The line of the first frame outside this module and dataclasses' generated ``__init__`` (the ``Probe(...)``
    call in a probe file), for errors about the probe as a whole (its kernel, its hints)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and (f.f_code.co_filename == __file__ or f.f_code.co_filename.startswith("<")):
        f = f.f_back
    return f.f_lineno if f is not None else None


def _check_tuning(probe: Probe) -> None:
    """Validate the opt-in tuning fields (``tunable``, ``constraint(s)``, ``default``); see :class:`Probe`."""
    if isinstance(probe.tunable, str):
        raise ProbeError(f"tunable={probe.tunable!r} must be a list of case names, e.g. tunable=({probe.tunable!r},)")
    for name in probe.tunable:
        if name not in probe.cases:
            near = difflib.get_close_matches(str(name), list(probe.cases), n=1)
            maybe = f" (did you mean {near[0]!r}?)" if near else ""
            raise ProbeError(f"tunable names {name!r}, which is not in cases={{...}}{maybe}; cases are "
                             f"{', '.join(probe.cases) or 'none'}: list its values in cases= or drop it from tunable=")
    if callable(probe.constraints):
        raise ProbeError("constraints= takes a list of functions; for one function write constraint=f")
    for fn in [*probe.constraints, *([probe.constraint] if probe.constraint is not None else [])]:
        if not callable(fn):
            raise ProbeError(f"constraint {fn!r} is not callable: give functions (case, hints) -> bool")
    allowed = {**{n: probe.cases[n] for n in probe.tunable}, **probe.hints}
    for name, value in (probe.default or {}).items():
        if name not in allowed:
            raise ProbeError(f"default names {name!r}, which is neither a tunable case name nor a hint of this "
                             f"probe ({', '.join(allowed) or 'none'})")
        if value not in list(allowed[name]):
            raise ProbeError(f"default {name}={value!r} is not among the declared values {list(allowed[name])!r}: "
                             "the default configuration must be one of the candidates")


def _cross(grid: Mapping[str, Sequence[Any]]) -> list[dict]:
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def import_object(spec: str, base_dir: str | None = None):
    """Import ``"pkg.module:attr"`` or ``"path/file.py:attr"`` (a relative path is taken from ``base_dir``, the
    probe file's folder, when given). Raises ProbeError with the fix."""
    if ":" not in spec:
        raise ProbeError(f"{spec!r}: name a kernel as 'module:attr' or 'file.py:attr'")
    mod_name, attr = spec.rsplit(":", 1)
    if mod_name.endswith(".py") and base_dir and not os.path.isabs(mod_name):
        mod_name = os.path.join(base_dir, mod_name)
    try:
        module = _load_module(mod_name) if mod_name.endswith(".py") else importlib.import_module(mod_name)
    except ImportError as e:
        raise ProbeError(f"cannot import {mod_name!r} for kernel {attr!r}: {e}. Is the package installed?") from e
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            near = difflib.get_close_matches(part, [n for n in dir(obj) if not n.startswith("__")], n=1)
            maybe = f" (did you mean {near[0]!r}?)" if near else ""
            raise ProbeError(f"{mod_name!r} has no attribute {attr!r}{maybe}") from e
    return obj


def _near_file(path: str) -> str:
    """`` (did you mean …?)`` with the closest .py file in ``path``'s folder, or "" (none close, or no folder)."""
    folder, base = os.path.split(path)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".py")]
    except OSError:
        return ""
    near = difflib.get_close_matches(base, names, n=1, cutoff=0.8)
    return f" (did you mean {os.path.join(folder, near[0])}?)" if near else ""


def _load_module(path: str):
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise ProbeError(f"{path} is a folder; give the probe files in it (e.g. {path}/*.py)")
    if not os.path.exists(path):
        raise ProbeError(f"{path} is a symbolic link to nothing (dangling or a loop): give the probe file itself"
                         if os.path.lexists(path) else f"no such file: {path}{_near_file(path)}")
    if not os.path.isfile(path):
        raise ProbeError(f"{path} is not a regular file (a FIFO, a device?): give a probe file, a .py")
    name = "tileprobe_probe_" + str(abs(hash(path)))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProbeError(f"{path} is not a Python file: a probe file is a .py that defines `probe = Probe(…)` or "
                         "`probes = [...]` (README, 'Writing a probe')")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _folder_on_path(os.path.dirname(path)):   # sibling modules (e.g. a sample's utils.py)
            spec.loader.exec_module(module)
    except SyntaxError as e:
        del sys.modules[name]
        raise ProbeError(f"syntax error: {e.msg}", path, e.lineno) from e
    except ProbeError as e:
        del sys.modules[name]
        if e.path:
            raise
        raise _probe_error_from(e, path, "invalid probe") from e
    except Exception as e:
        del sys.modules[name]
        raise _probe_error_from(e, path, "loading the probe failed") from e
    except BaseException:   # SystemExit, KeyboardInterrupt, ProbeExit: the caller describes it
        sys.modules.pop(name, None)
        raise
    return module


@contextlib.contextmanager
def _folder_on_path(folder: str):
    """Put ``folder`` first on ``sys.path`` while a file from it is imported, so its sibling modules import (NVIDIA's
    ``samples/AttentionFMHA.py`` imports ``utils`` from its folder); removed afterwards."""
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def _probe_error_from(exc: BaseException, path: str | None, what: str) -> ProbeError:
    """A ProbeError that names the deepest line of ``path`` in the traceback of ``exc``, with
    :func:`describe_exception`'s text (``sys.exit(7)``, ``os._exit(5)``, a NameError's "did you mean")."""
    lineno = None
    if path:
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.abspath(frame.filename) == os.path.abspath(path.split(":")[0]):
                lineno = frame.lineno
    if isinstance(exc, ProbeError):
        return ProbeError(f"{what}: {exc}", path.split(":")[0] if path else None, lineno)
    detail = describe_exception(exc)
    sep = " " if detail.startswith(("called ", "raised ")) else ": "
    return ProbeError(f"{what}{sep}{detail}", path.split(":")[0] if path else None, lineno)


# --- what probe code did, when it did not simply return ---------------------------------------------------------

class ProbeExit(BaseException):
    """Raised in place of ``os._exit(code)`` while probe code runs (:func:`probe_code_guard`)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def probe_code_guard():
    """While probe code runs: ``os._exit(n)`` raises :class:`ProbeExit` instead of ending the process, so it
    becomes the probe's error with its line. (``sys.exit`` and ``KeyboardInterrupt`` are exceptions already; the
    callers catch ``BaseException``.)"""
    real = os._exit

    def refuse(code=0):
        raise ProbeExit(code)
    os._exit = posix._exit = refuse
    try:
        yield
    finally:
        os._exit = posix._exit = real


def describe_exception(exc: BaseException) -> str:
    """What probe code did, in words: ``called sys.exit(7)``, ``called os._exit(5)``, ``raised KeyboardInterrupt
    itself …``, else ``Type: message`` (a NameError or AttributeError with Python's "Did you mean" when a name is
    close)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    if isinstance(exc, ProbeExit):
        return f"called os._exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return ("raised KeyboardInterrupt itself (probe code runs where Ctrl-C does not reach it: tileprobe handles "
                "Ctrl-C)")
    try:
        text = "".join(traceback.TracebackException.from_exception(exc).format_exception_only()).strip()
    except Exception:   # a broken __str__ in the probe's own exception class
        text = type(exc).__name__
    near = _suggestion(exc) if "Did you mean" not in text else None
    text = f"{text}. Did you mean: {near!r}?" if near else text
    text = re.sub(r"\btileprobe_probe_\d+\.", "", text)      # a probe file's module name (see _load_module)
    return text.replace("\n", " ") or type(exc).__name__


def _suggestion(exc: BaseException) -> str | None:
    """The close name Python 3.12's traceback would suggest for a NameError (names of the failing frame) or an
    AttributeError (the object's attributes); Python 3.11 prints it only in its own excepthook."""
    name = getattr(exc, "name", None)
    if not isinstance(name, str):
        return None
    if isinstance(exc, NameError):
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is None:
            return None
        import builtins
        frame = tb.tb_frame
        names = [*frame.f_locals, *frame.f_globals, *dir(builtins)]
    elif isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None:
        names = dir(exc.obj)
    else:
        return None
    near = difflib.get_close_matches(name, [n for n in names if n != name], n=1)
    return near[0] if near else None


class NoProbeDefined(ProbeError):
    """A file that loads but defines neither ``probe`` nor ``probes`` (e.g. a helper module beside the probes)."""


def load_probes(path: str) -> list[Probe]:
    """Load the probes a probe file defines (``probe`` or ``probes``).

    Raises:
        NoProbeDefined: the file defines neither ``probe`` nor ``probes``.
        ProbeError: missing file, syntax or runtime error in it (with file and line), or an object that is not a
            :class:`Probe`.
    """
    path = os.path.abspath(path)   # before its code runs: a probe may change the working folder at import
    module = _load_module(path)
    found = getattr(module, "probes", None)
    if found is None:
        found = getattr(module, "probe", None)
        found = [found] if found is not None else None
    if not found:
        near = difflib.get_close_matches("probes", [n for n in vars(module) if not n.startswith("_")], n=1,
                                         cutoff=0.7)
        maybe = f" (did you mean to name {near[0]!r} `probe` or `probes`?)" if near and near[0] not in (
            "probe", "probes") else ""
        raise NoProbeDefined("defines no probe: add `probe = tileprobe.Probe(kernel=..., args=...)` "
                             f"(or a list `probes = [...]`){maybe}", os.path.abspath(path))
    out: list[Probe] = []
    for i, p in enumerate(found):
        if not isinstance(p, Probe):
            raise ProbeError(f"probes[{i}] is a {type(p).__name__}, not a tileprobe.Probe", os.path.abspath(path))
        p.source = os.path.abspath(path)
        p.index = i
        # tables, verdicts and the store tell probes apart by name and arch: one name is fine for probes whose
        # ``archs`` do not overlap (per-arch launches of one kernel)
        twin = next((q for q in out if q.label == p.label and archs_overlap(q.archs, p.archs)), None)
        if twin is not None:
            raise ProbeError(f"probes[{twin.index}] and probes[{i}] are both named {p.label!r} for "
                             f"{_shared_archs(twin.archs, p.archs)} (lines {twin.lineno} and {p.lineno}): give each a "
                             "distinct name= or disjoint archs= (verdicts would compare one probe's variants with the "
                             "other's)", p.source, getattr(p, "lineno", None))
        out.append(p)
    return out


def archs_overlap(a: Sequence[str] | None, b: Sequence[str] | None) -> bool:
    """Whether two probes' ``archs`` share a target (a probe without ``archs`` is meant for every target)."""
    return not a or not b or bool({str(x).lower() for x in a} & {str(x).lower() for x in b})


def _shared_archs(a: Sequence[str] | None, b: Sequence[str] | None) -> str:
    """``sm_90`` / ``every arch``: what two overlapping ``archs`` share, for a message."""
    if not a and not b:
        return "every arch"
    if not a or not b:
        return ", ".join(map(str, a or b or ()))
    return ", ".join(sorted({str(x).lower() for x in a} & {str(x).lower() for x in b}))

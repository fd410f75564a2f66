"""Probe code runs contained: a probe file is imported, and its kernel, hints and ``args`` are
tried, in a child process — never in the tileprobe process.

Whatever the probe does there becomes that probe's error, and the other probes go on: an exception (with its line
in the probe file and Python's "did you mean"), ``sys.exit(7)``, ``os._exit(5)``, a ``KeyboardInterrupt`` it raises
itself, an endless loop (no result within ``timeout_s`` of the last step: the child's process group is killed),
more than :data:`OUTPUT_LIMIT_BYTES` of output, a crash of the interpreter. The parent receives, per file, a
:class:`FileReport`: one :class:`ProbePlan` per probe (what planning needs: names, grids, hashes, the
variants to leave out because their hints or ``args`` failed) and each error once, however many variants it hits.
It arrives as data (:mod:`tileprobe.probe.wire`: JSON, never a pickle): a case value that is not data (an ``Enum``
member, an object of the probe's own class) is that probe's error, with the fix, and is never unpickled here.

The compile workers import the probe again to compile (they hold the kernel); they guard probe code the same way
(:func:`tileprobe.probe.define.probe_code_guard`) and a worker that dies or hangs is replaced
(:mod:`tileprobe.compile.pool`).

**Sessions** (the static stage near its floor). Outside :func:`loader_sessions` each job — one file's
:func:`check_file`, or one :func:`run_probe_tasks` task — gets a child of its own, which exits after its report.
Inside it (``tileprobe tune`` enters it, beside :func:`~tileprobe.probe.zygote.warm_starts`; an audit alone loads
each file once and does not, an audit inside a tune uses the tune's) a child stays after
its report and waits on its socket for the next job (a ("job", dict) message: data, :mod:`tileprobe.probe.wire`),
and a job goes to an idle child of the same probe file, working folder, ``sys.path`` and environment
(:func:`_child_key`; overrides, targets and SM counts are per job): a file is imported once per command. Why: a
tune imports each probe file for its plan (``tune.static.load_space``), for the audit's load (:func:`check_file`)
and for the launch facts of each batch of landed candidates (``tune.static.launch_facts``); the TileGym matmul's
kernel module imports torch and transformers, 2.3 s on the 2-core machine and ~5 s on the H200 host, where a cold
tune spent plan 7.6 s + compile 17.5 s against a compile floor of 5.5 s (benchmarks/tune/bench_tune.py, 2026-12-02;
here ``load_space`` of that probe took 2.7 s and each further load 1.2 s with a warm zygote and
``TILEPROBE_PLAN_CACHE=0``; benchmarks/audit/bench_loaders.py measures the difference).

Each job starts anew: its own folder as ``tempfile.tempdir``, its stage deadline, its output count and limit. The
containment is the one of a single job: every child runs in its own session with a parent-death signal, guarded
(:func:`tileprobe.procs.guard`), and is killed with its process group on a timeout, a crash, an output flood or a
message that is not data — the next job on its file then gets a fresh child (so does a job given to a kept child
that ended meanwhile before saying a word about it). A busy child is never given a second job: a job on its file
meanwhile (the race thread's launch facts while the main thread loads) starts a second child, which stays too —
waiting for the first would put one thread's probe code behind the other's for a saving of one import. When the
outermost context exits (return, exception, Ctrl-C) every child is killed with its group and reaped, the guard
forgets it, and the session's temp folder is removed. A report's ``code_files`` (the plan cache,
:mod:`tileprobe.probe.plancache`) are the modules the child had imported when it made that report: they only grow,
each file described as it was when first seen. ``TILEPROBE_KEEP_LOADERS=0`` turns sessions off.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import itertools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from multiprocessing.connection import Connection, wait
from typing import Any

from tileprobe.errors import ProbeError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.10 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Seconds one step of probe code may take in the loader (importing the file, importing its kernel, one call of
#: ``args`` with its signature): importing TileGym with torch took 3-5 s on a loaded 2-core machine (2026-12-01).
PROBE_TIMEOUT_S = 60.0
#: Seconds the loader child may take to start (Python, tileprobe, cuTile) before any probe code runs.
STARTUP_S = 60.0
#: A job's stages together (a probe file's load, or one task) may take at most this many times the stage timeout:
#: each stage message starts the stage's own deadline anew, but never past this bound, so a child that sends a stage
#: message every second cannot hold a command (one held an audit 200 s with ``--probe-timeout 10``, 2026-12-04).
#: With the default :data:`PROBE_TIMEOUT_S` a file's load may take 10 min in all; raise ``--probe-timeout`` for more.
JOB_BOUND_STAGES = 10
#: Stage messages one job may send; more stops it as an error (a flood costs the tileprobe process its reading).
MAX_STAGE_MESSAGES = 100_000
#: Bytes of output (stdout and stderr together) a probe may print while it is loaded; more stops it as an error.
OUTPUT_LIMIT_BYTES = 1 << 20
#: Bytes of a probe's output kept to show (its first lines).
OUTPUT_SHOWN_BYTES = 4096


@dataclass
class ProbePlan:
    """What the parent needs of one probe, without its code (data only: :mod:`tileprobe.probe.wire`).

    ``cases`` / ``hints``: name → values, as in :class:`~tileprobe.probe.define.Probe`. ``skip``: variants to leave
    out because their hints or ``args`` failed in the loader, as (case index | None, hint index | None, arch | None)
    where None means "any". ``n_variants``: variants this probe plans for the requested targets, skips excluded
    (the whole grid when ``evaluated`` is False: it was larger than the audit's limit and was not tried).
    """
    source: str
    index: int
    label: str
    cases: dict
    hints: dict
    archs: tuple | None = None
    knobs: dict = field(default_factory=dict)
    timeout_s: float | None = None
    source_sha256: str = ""
    skip: frozenset = frozenset()
    n_variants: int = 0
    evaluated: bool = True
    lineno: int | None = None      # the line of ``Probe(...)`` in ``source`` (name clashes name it)
    # --- what each variant's compile depends on, and the SM count args() gets -------------------------------
    args_context: tuple = ()      # the context keywords args() takes (arch, hints, num_sms)
    num_sms: int | None = None    # the SM count given (audit/tune --num-sms); None: each arch's reference GPU's
    kernel_sha256: str = ""       # the file that defines the kernel (kernel_source_sha256)
    signatures: dict = field(default_factory=dict)   # (case index, hint index | None, arch | None) -> signature sha

    def args_num_sms(self, arch: str) -> int | None:
        """The SM count ``args`` gets for ``arch`` (None when it does not take ``num_sms``): the one given, else
        the arch's reference GPU's (:func:`tileprobe.model.cluster.reference_num_sms`)."""
        if "num_sms" not in self.args_context:
            return None
        from tileprobe.model.cluster import reference_num_sms
        return self.num_sms or reference_num_sms(arch)

    def compile_sha256(self, case_index: int, hint_index: int, arch: str) -> str:
        """SHA-256 of what compiling this variant depends on besides case, hints, arch and compiler: the kernel's
        source file and the launch signature ``args`` gave (constants, dtypes, divisibility); "" when the loader
        did not try ``args`` (then the store key falls back to :attr:`source_sha256`, the whole probe file)."""
        key = (case_index, hint_index, arch) if self.args_context else (case_index, None, None)
        return code_sha256(self.kernel_sha256, self.signatures.get(key, ""))

    def case_grid(self) -> list[dict]:
        """Every case as a dict (the cross product of ``cases``)."""
        return _cross(self.cases)

    def hint_grid(self) -> list[dict]:
        """Every hint combination as a dict; ``[{}]`` if none."""
        return _cross(self.hints)

    def targets(self, targets: Sequence[str]) -> list[str]:
        """The requested ``targets`` this probe is meant for (all when it names no ``archs``)."""
        return probe_targets(self.archs, targets)

    def skipped(self, case_index: int, hint_index: int, arch: str) -> bool:
        """Whether the loader found this variant's hints or ``args`` broken (it is then not compiled)."""
        s = self.skip
        return bool(s) and ((case_index, None, None) in s or (None, hint_index, None) in s
                            or (case_index, hint_index, arch) in s or (case_index, None, arch) in s)


@dataclass
class FileReport:
    """What loading one probe file gave: its probes' plans, its errors (each once, with file:line), a
    ``no_probe`` message when it defines none, and the first :data:`OUTPUT_SHOWN_BYTES` of what it printed."""
    path: str
    plans: list[ProbePlan] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    no_probe: str | None = None
    output: str = ""
    output_bytes: int = 0         # all it printed (``output`` keeps the first OUTPUT_SHOWN_BYTES)
    default_tileiras: str = ""    # the tileiras cuTile picks here (the parent never imports cuTile itself)
    default_tileiras_error: str = ""
    data: Any = None              # what a task (run_probe_tasks) returned, as data
    uses_torch: bool = True       # torch was imported in the loader once its probes were loaded (False
    #                               lets compile workers start from a cuTile imported without torch)
    code_files: list = field(default_factory=list)   # [path, size, mtime_ns] of the modules the loader ran
    #                                                  (the report is kept while they are unchanged)


def _cross(grid) -> list[dict]:
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def _grid_size(grid) -> int:
    return math.prod(len(v) for v in grid.values()) if grid else 1


def probe_targets(probe_archs: Sequence[str] | None, targets: Sequence[str]) -> list[str]:
    """The ``targets`` a probe with ``archs=probe_archs`` is meant for (all when it names none)."""
    if not probe_archs:
        return list(targets)
    mine = {_target_name(a) for a in probe_archs}
    return [t for t in targets if t in mine]


def _target_name(name: str) -> str:
    from tileprobe.errors import TileprobeError
    from tileprobe.model.arch import check_target, get_arch
    try:
        return check_target(name)
    except TileprobeError:
        try:
            return get_arch(name).name
        except TileprobeError:
            return str(name)


def code_sha256(kernel_sha256: str, signature_sha256: str) -> str:
    """The code part of the store key: SHA-256 over the kernel file's and the signature's digests;
    "" when either is unknown."""
    if not kernel_sha256 or not signature_sha256:
        return ""
    return hashlib.sha256(f"kernel:{kernel_sha256}|signature:{signature_sha256}".encode()).hexdigest()


def signature_sha256(sig) -> str:
    """SHA-256 of a cuTile ``KernelSignature`` as :func:`~tileprobe.probe.signature.describe_signature` reads it
    (symbol, each parameter's kind, dtype, constraints, constant values)."""
    from tileprobe.probe.signature import describe_signature
    text = json.dumps([sig.symbol, describe_signature(sig)], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def probe_code_sha256(probe, case: dict, hints: dict, arch: str, num_sms: int | None = None) -> str:
    """:func:`code_sha256` of one variant of a loaded :class:`~tileprobe.probe.define.Probe`, computed in this
    process (the in-process path of :func:`tileprobe.audit.pipeline.iter_variants`; audits use the loader
    child's :attr:`ProbePlan.signatures`). "" when the kernel, the hints or ``args`` fail."""
    from tileprobe._cutile import effective_hints
    from tileprobe.probe.signature import jit_signature
    try:
        kernel = probe.resolve_kernel()
        set_ = {k: v for k, v in hints.items() if v is not None}
        k = kernel.replace_hints(**set_) if set_ else kernel
        a = probe.launch_args(case, arch=arch, hints=effective_hints(k, arch), num_sms=num_sms)
        return code_sha256(kernel_source_sha256(probe), signature_sha256(jit_signature(k, a)))
    except Exception:
        return ""


def kernel_source_sha256(probe) -> str:
    """SHA-256 of the file that defines the probe's kernel (with the signature, what its compile
    depends on; a kernel defined in the probe file makes the probe file its source). "" when it has no file."""
    try:
        path = inspect.getsourcefile(probe.resolve_kernel()._pyfunc)
    except (TypeError, OSError, ProbeError):
        return ""
    if not path:
        return ""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def source_sha256(probe) -> str:
    """SHA-256 over the probe file and the file that defines its kernel (the store's notion of "same code")."""
    h = hashlib.sha256()
    files = [probe.source]
    try:
        files.append(inspect.getsourcefile(probe.resolve_kernel()._pyfunc))
    except (TypeError, OSError, ProbeError):
        pass
    for f in dict.fromkeys(x for x in files if x):
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


# --- child side: try the probe's code --------------------------------------------------------------------------------

class _Failures:
    """Errors of one probe grouped by (what, line, detail), so each is reported once with the variants it hits."""

    def __init__(self, path: str):
        self.path, self.groups = path, {}

    def add(self, what: str, exc: BaseException, label: str, line: int | None = None) -> None:
        from tileprobe.probe.define import _probe_error_from
        err = exc if isinstance(exc, ProbeError) and exc.lineno else _probe_error_from(exc, self.path, what)
        text = str(err)
        if line and not err.lineno:
            text = str(ProbeError(text.removeprefix(f"{self.path}: "), self.path, line))
        self.groups.setdefault(text, []).append(label)

    def messages(self, totals: dict[str, int]) -> list[str]:
        """One line per distinct error: the error, then which variants it leaves out."""
        plural = {"case": "cases", "hints": "hint combinations"}
        out = []
        for text, labels in self.groups.items():
            kind = labels[0].split(" ", 1)[0]
            n, total = len(labels), totals.get(kind, len(labels))
            which = ("" if total == 1 else f"for {labels[0]}: " if n == 1 else
                     f"for all {total} {plural.get(kind, kind)}: " if n == total else
                     f"for {labels[0]} and {n - 1} more of {total} {plural.get(kind, kind)}: ")
            out.append(f"{text} ({which}not compiled)")
        return out


def check_file(path: str, targets: Sequence[str], max_variants: int, stage: Callable[[str], None],
               cases: dict | None = None, hints: dict | None = None, num_sms: int | None = None) -> FileReport:
    """Import the probe file ``path`` and try each probe's kernel, hint values and ``args`` (with cuTile's signature
    inference) for ``targets``; never raises for what the probe does. Runs in the loader child.

    ``cases`` / ``hints``: ``--case`` / ``--hint`` values replacing the probes' own
    (:func:`tileprobe.select.apply_overrides`; case names are checked by the parent, across all files).
    ``num_sms``: the SM count for ``args(..., num_sms=)`` (None: each arch's reference GPU's)."""
    from tileprobe.probe.define import NoProbeDefined, _probe_error_from, load_probes, probe_code_guard
    report = FileReport(os.path.abspath(path))
    stage("importing the probe file")
    try:
        with probe_code_guard():
            probes = load_probes(path)
        if cases or hints:
            from tileprobe.select import apply_overrides
            probes = apply_overrides(probes, cases, hints, check=False)
    except NoProbeDefined as e:
        report.no_probe = str(e)
        return report
    except ProbeError as e:
        report.errors.append(str(e))
        return report
    except BaseException as e:
        report.errors.append(str(_probe_error_from(e, report.path, "importing the probe file")))
        return report
    for p in probes:
        plan = _plan(p, targets, max_variants, stage, report.errors, num_sms)
        if plan is not None:
            report.plans.append(plan)
    report.uses_torch = "torch" in sys.modules
    return report


def _plan(p, targets, max_variants: int, stage, errors: list[str], num_sms: int | None = None) -> ProbePlan | None:
    from tileprobe.probe.define import describe_exception, probe_code_guard
    where = f"probe {p.label!r}"
    stage(f"{where}: importing its kernel {p.kernel!r}")
    try:
        with probe_code_guard():
            kernel = p.resolve_kernel()
            digest, kernel_digest = source_sha256(p), kernel_source_sha256(p)
    except BaseException as e:
        if isinstance(e, ProbeError) and e.path and e.lineno:      # located already (e.g. the kernel file's line)
            errors.append(str(e))
        else:
            detail = str(e).removeprefix(f"{e.path}: ") if isinstance(e, ProbeError) else describe_exception(e)
            spec = str(p.kernel).rsplit(":", 1)[0]
            what = "" if spec in detail or "kernel " in detail else f"kernel {p.kernel!r}: "
            errors.append(str(ProbeError(f"{where}: {what}{detail}", p.source, p.lineno)))
        return None
    plan = ProbePlan(p.source, p.index, p.label, dict(p.cases), dict(p.hints), tuple(p.archs) if p.archs else None,
                     dict(p.knobs), p.timeout_s, digest, lineno=p.lineno, args_context=p.args_context,
                     num_sms=num_sms, kernel_sha256=kernel_digest)
    not_data = plan_not_data(plan)
    if not_data is not None:     # an Enum, an object of the probe's class: it would have to be unpickled by tileprobe
        errors.append(str(ProbeError(f"{where}: {not_data} (not compiled)", p.source, p.lineno)))
        return None
    mine = plan.targets(targets)
    plan.n_variants = _grid_size(p.cases) * _grid_size(p.hints) * len(mine)
    if plan.n_variants > max_variants:
        plan.evaluated = False
        return plan
    fails = _Failures(p.source)
    skip: set = set()
    kernels = _try_hints(p, kernel, where, stage, fails, skip)
    _try_args(p, kernels, mine, stage, fails, skip, plan)
    plan.skip = frozenset(skip)
    plan.n_variants = sum(1 for ci in range(_grid_size(p.cases)) for hi in range(_grid_size(p.hints)) for t in mine
                          if not plan.skipped(ci, hi, t))
    errors.extend(fails.messages({"case": _grid_size(p.cases), "hints": _grid_size(p.hints)}))
    return plan


def plan_not_data(plan: ProbePlan) -> str | None:
    """Why ``plan`` cannot cross to the tileprobe process as data (:mod:`tileprobe.probe.wire`): the first case or
    hint value (or name, arch, knob) that is not data, its place and the fix; None when it can."""
    from tileprobe.probe import wire
    try:
        for name in ("cases", "hints", "knobs", "archs", "label", "timeout_s"):
            wire.encode(getattr(plan, name), name)
    except wire.NotData as e:
        return str(e)
    return None


def _try_hints(p, kernel, where, stage, fails: _Failures, skip: set) -> dict:
    """The kernel with each hint combination (cuTile validates the values); a refused combination is skipped."""
    from tileprobe.probe.define import probe_code_guard
    kernels = {}
    for hi, h in enumerate(p.hint_grid()):
        label = "hints " + (",".join(f"{k}={v!r}" for k, v in h.items()) or "declared")
        stage(f"{where}: {label}")
        try:
            with probe_code_guard():
                set_ = {k: v for k, v in h.items() if v is not None}
                kernels[hi] = kernel.replace_hints(**set_) if set_ else kernel
        except BaseException as e:
            fails.add(f"{where}: {label} refused by cuTile (allowed values in its message)", e, label, p.lineno)
            skip.add((None, hi, None))
    return kernels


def _try_args(p, kernels: dict, targets, stage, fails: _Failures, skip: set, plan: ProbePlan) -> None:
    """Call ``args`` for every case (per target and hints when it takes them) and infer the signature from it;
    each signature's SHA-256 goes to ``plan.signatures`` (the store key)."""
    from tileprobe._cutile import effective_hints
    from tileprobe.probe.define import SpecArrays, context_kwargs, probe_code_guard
    from tileprobe.probe.signature import jit_signature
    args_line = getattr(getattr(p.args, "__code__", None), "co_firstlineno", None)
    if not kernels:
        return
    first = next(iter(kernels.values()))
    for ci, case in enumerate(p.case_grid()):
        label = "case " + (",".join(f"{k}={v!r}" for k, v in case.items()) or "-")
        combos = ([(t, hi) for t in targets for hi in kernels] if p.args_take_context else [(None, None)])
        for arch, hi in combos:
            stage(f"args({case})" + (f" for {arch}" if arch else ""))
            k = first if hi is None else kernels[hi]
            ctx = ({"arch": arch, "hints": effective_hints(k, arch), "num_sms": plan.args_num_sms(arch)}
                   if arch else {})
            try:
                with probe_code_guard():
                    a = tuple(p.args(dict(case), SpecArrays(), **context_kwargs(p.args, **ctx)))
            except BaseException as e:
                fails.add("args()", e, label, args_line)
                skip.add((ci, hi, arch) if arch else (ci, None, None))
                continue
            try:
                with probe_code_guard():
                    sig = jit_signature(k, a)
            except BaseException as e:
                fails.add("args()", e, label, args_line)
                skip.add((ci, hi, arch) if arch else (ci, None, None))
                continue
            plan.signatures[(ci, hi, arch) if arch else (ci, None, None)] = signature_sha256(sig)


def child_main() -> None:
    """Entry of the loader child: ``python -c … FD JOB``; for each job it sends ("stage", text) messages and one
    ("report", FileReport) on the connection FD (a socket), then exits without running the probe's atexit handlers
    — or, when the job says ``stay`` (a :func:`loader_sessions` child), waits on FD for the parent's next
    ("job", dict) and exits at end of file (or on anything else)."""
    from tileprobe.probe.zygote import under_nanny
    from tileprobe.procs import die_with_parent
    fd, job = int(sys.argv[1]), json.loads(sys.argv[2])
    parent = under_nanny(job["parent"])   # probe code that signals its parent reaches a nanny of its own
    die_with_parent(signal.SIGKILL, parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = job["sys_path"] + [p for p in sys.path if p not in job["sys_path"]]
    real_exit = os._exit
    conn = Connection(fd)
    import cuda.tile  # noqa: F401  — not probe code: imported before the probe's clock starts

    from tileprobe.probe.plancache import watch_missing
    watch_missing()   # the modules probe code looks for and does not find (a plan kept for later names them)
    from tileprobe.probe import define, signature  # noqa: F401
    while job is not None:
        _serve_job(conn, job)
        job = _next_job(conn) if job.get("stay") else None
    real_exit(0)


def _serve_job(conn: Connection, job: dict) -> None:
    """In the loader child: run one job (:func:`check_file` or a task) and send its report, as data."""
    from tileprobe.probe import plancache, wire
    tempfile.tempdir = job["tmp"]      # each job's own folder (the parent removes it)
    stage = lambda t: wire.send(conn, ("stage", str(t)))
    try:
        report = (_run_task(job, stage) if job.get("task") else
                  check_file(job["path"], job["targets"], job["max_variants"], stage, job.get("cases"),
                             job.get("hints"), job.get("num_sms")))
    except BaseException as e:
        from tileprobe.probe.define import describe_exception
        report = FileReport(os.path.abspath(job["path"]), errors=[f"{job['path']}: loading failed inside tileprobe: "
                                                                  f"{describe_exception(e)}"])
    report.code_files = plancache.code_files() if plancache.enabled() else []   # (hashes: only when kept)
    with contextlib.suppress(Exception):   # what the job printed is in the pipe before its report
        sys.stdout.flush()
        sys.stderr.flush()
    try:   # data only (tileprobe.probe.wire): the parent never unpickles what probe code made
        wire.send(conn, ("report", report_data(report)), "the probe file's report")
    except (wire.NotData, wire.WireError) as e:   # values _plan did not see (printed output, error texts)
        wire.send(conn, ("report", report_data(FileReport(report.path, errors=[
            f"{report.path}: its report cannot be sent to tileprobe as data ({e})"]))))


def _next_job(conn: Connection) -> dict | None:
    """In a staying loader child: the parent's next job (a ("job", dict) message), or None to exit (end of file,
    or anything else)."""
    from tileprobe.probe import wire
    try:
        kind, payload = wire.recv(conn)
    except (EOFError, OSError, wire.WireError, TypeError, ValueError):
        return None
    return payload if kind == "job" and type(payload) is dict else None


def _run_task(job: dict, stage: Callable[[str], None]) -> FileReport:
    """In the loader child: run tileprobe's function ``job["task"]`` (``"tileprobe.mod:name"``) as
    ``fn(path, stage, **args)`` with the arguments in the file ``job["task_args"]`` (a :mod:`tileprobe.probe.wire`
    message); it returns (data, errors) and guards the probe code it runs itself."""
    from tileprobe.probe import wire
    module, _, name = job["task"].partition(":")
    if not module.startswith("tileprobe."):
        raise ValueError(f"not a tileprobe task: {job['task']!r}")
    with open(job["task_args"], "rb") as f:
        args = wire.loads(f.read())
    data, errors = getattr(importlib.import_module(module), name)(job["path"], stage, **args)
    return FileReport(os.path.abspath(job["path"]), errors=list(errors), data=data, uses_torch="torch" in sys.modules)


def run_probe_tasks(paths: Sequence[str], task: str, task_args: Sequence[dict], *, timeout_s: float = PROBE_TIMEOUT_S,
                    jobs: int | None = None) -> list[FileReport]:
    """Run tileprobe's function ``task`` on each probe file in a contained loader child, as the audit loads probes
    (its timeouts per stage, output limit, crashes and exits as the file's errors). ``task_args``: one dict of data
    per path. Returns one :class:`FileReport` per path, its ``data`` what the task returned (None when it failed:
    then ``errors`` says why)."""
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("load") as tmp:
        return load_probe_files(paths, (), tmp_root=tmp, jobs=jobs, timeout_s=timeout_s,
                                task=(task, list(task_args)))


def _plan_key(path: str, targets, max_variants: int, cases, hints, num_sms, task) -> str:
    from tileprobe.probe.plancache import key
    return key(path, {"targets": list(targets), "max_variants": max_variants, "cases": cases, "hints": hints,
                      "num_sms": num_sms, "task": task})


def _kept_report(k: str, path: str) -> FileReport | None:
    """The report a loader gave for this question before, if the code it ran is unchanged
    (:mod:`tileprobe.probe.plancache`); None otherwise."""
    from tileprobe.probe import plancache, wire
    data = plancache.lookup(k)
    if data is None:
        return None
    try:
        return report_from_data(data, path)
    except wire.WireError:
        return None


def _keep_report(k: str, report: FileReport) -> None:
    """Keep a report without errors for the next run (:mod:`tileprobe.probe.plancache`). Inside
    :func:`loader_sessions` the encoding and the write happen in the session's saver thread, while the command goes
    on (0.19 s of a cold tune's start-up for the 10 RMSNorm configurations, cProfile on the 2-core machine,
    2026-12-02); the session waits for them when it ends."""
    from tileprobe.probe import plancache
    if report.errors or not report.code_files:
        return
    files, report.code_files = report.code_files, []
    data = report_data(report)      # the fields as they are now: the caller may set more on ``report`` later
    session = current_session()
    if session is None or not session.save_later(plancache.save, k, data, files):
        plancache.save(k, data, files)


def report_data(report: FileReport) -> dict:
    """``report`` as a dict of data for :mod:`tileprobe.probe.wire` (its plans as dicts too)."""
    out = {f.name: getattr(report, f.name) for f in fields(FileReport)}
    out["plans"] = [{f.name: getattr(p, f.name) for f in fields(ProbePlan)} for p in report.plans]
    return out


def report_from_data(data: Any, path: str) -> FileReport:
    """The :class:`FileReport` of :func:`report_data`'s dict, read as data. Raises :class:`~tileprobe.probe.wire.
    WireError` for a dict of another shape (fields missing, extra or of the wrong type)."""
    from tileprobe.probe import wire
    try:
        rep = _typed(FileReport, {**data, "plans": []})
        rep.plans = [_typed(ProbePlan, p) for p in data["plans"]]
    except (TypeError, KeyError, AttributeError) as e:
        raise wire.WireError(f"{path}: the loader's report has the wrong shape ({e})") from None
    return rep


_FIELD_TYPES = {"str": str, "int": int, "bool": bool, "dict": dict, "list": list, "frozenset": frozenset}


def _typed(cls, data: dict):
    """``cls(**data)`` after checking that ``data`` names exactly ``cls``'s fields and that each simple field (str,
    int, bool, dict, list, frozenset by its annotation) holds that type. Raises TypeError."""
    names = {f.name for f in fields(cls)}
    if type(data) is not dict or set(data) != names:
        raise TypeError(f"{cls.__name__} fields {sorted(data) if type(data) is dict else type(data).__name__}")
    for f in fields(cls):
        want = _FIELD_TYPES.get(str(f.type).split("[")[0])
        if want is not None and type(data[f.name]) is not want:
            raise TypeError(f"{cls.__name__}.{f.name} is a {type(data[f.name]).__name__}")
    return cls(**data)


def load_plans(paths: Sequence[str], targets: Sequence[str] = (), *,
               timeout_s: float = PROBE_TIMEOUT_S) -> tuple[list[ProbePlan], list[str]]:
    """The probes of ``paths`` as plans (names, cases, hints), loaded contained, without trying their ``args``: for
    commands that need the grid before an audit (gate's ``--where`` check). Returns (plans, errors)."""
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("load") as tmp:
        reports = load_probe_files(paths, targets, tmp_root=tmp, timeout_s=timeout_s, max_variants=0)
    errors = [e for r in reports for e in ([r.no_probe] if r.no_probe else []) + r.errors]
    return [p for r in reports for p in r.plans], errors


# --- parent side ------------------------------------------------------------------------------------------------------

_BOOT = "from tileprobe.probe.contained import child_main; child_main()"


def _job(path: str, targets, max_variants: int, tmp_root: str, overrides: tuple, task: tuple | None,
         num_sms: int | None, stay: bool) -> dict:
    """One loader job as data (the child's argv, or a ("job", …) message to a staying child), in a new folder
    ``load-*`` of ``tmp_root`` that holds its task's arguments and is its ``tempfile.tempdir``."""
    from tileprobe.probe import wire
    tmp = tempfile.mkdtemp(prefix="load-", dir=tmp_root)
    job = {"path": path, "targets": list(targets), "max_variants": max_variants, "parent": os.getpid(),
           "cases": overrides[0], "hints": overrides[1], "num_sms": num_sms, "sys_path": _sys_path(), "tmp": tmp}
    if stay:
        job["stay"] = True
    if task is not None:      # (function, its arguments): in a file, not on the command line (no size limit)
        job["task"], job["task_args"] = task[0], os.path.join(tmp, "task.json")
        with open(job["task_args"], "wb") as f:
            f.write(wire.dumps(task[1], "the task's arguments"))
    return job


def _sys_path() -> list[str]:
    return [os.path.abspath(p) if p else os.getcwd() for p in sys.path]


def _child_key(path: str) -> tuple:
    """What a live loader child shares with every job it may take: the probe file, and what its imports read —
    the working folder, ``sys.path``, the interpreter and the environment (the guard's mark left out: it is set
    once, by the first child's start). ``--case``/``--hint``, targets and SM counts are each job's own."""
    from tileprobe.procs import GUARD_ENV
    return (os.path.abspath(path), os.getcwd(), tuple(_sys_path()), sys.executable,
            tuple(sorted((k, v) for k, v in os.environ.items() if k != GUARD_ENV)))


class _Loader:
    """One loader child for one probe file, as the parent sees it: started with its first job; with ``stay``
    (inside :func:`loader_sessions`) it waits for more after each report (:meth:`again`)."""

    def __init__(self, path: str, targets, max_variants: int, timeout_s: float, tmp_root: str,
                 overrides: tuple = (None, None), task: tuple | None = None, num_sms: int | None = None,
                 stay: bool = False):
        job = _job(path, targets, max_variants, tmp_root, overrides, task, num_sms, stay)
        from tileprobe.procs import arm_guard
        arm_guard()               # before the environment is copied: the loader and what it starts carry the mark
        from tileprobe.procs import importable_env
        env = importable_env()
        from tileprobe.probe.zygote import start_loader
        ours, theirs = socket.socketpair()    # jobs go down (a staying child), stages and reports come up
        w = theirs.fileno()
        try:
            self.proc = start_loader(job, w, env, preload_s=timeout_s) or subprocess.Popen(   # forked warm, else a fresh Python
                [sys.executable, "-c", _BOOT, str(w), json.dumps(job)], pass_fds=(w,),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=env)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        from tileprobe.procs import guard
        guard(self.proc.pid)      # ended with its group even if tileprobe is SIGKILLed
        self.path, self.stay, self.key, self.jobs = path, stay, _child_key(path), 1
        self.msgs: Connection | None = Connection(ours.detach())
        self.out_fd: int | None = self.proc.stdout.fileno()
        self.ended, self._end_lock = False, threading.Lock()
        self._begin(timeout_s, STARTUP_S + timeout_s, "starting Python")

    def _begin(self, timeout_s: float, first_s: float, stage: str) -> None:
        """A job starts: its stage, its deadline (``first_s`` from now), its output counted from 0."""
        self.timeout_s, self.stage, self.report, self.error, self.heard = timeout_s, stage, None, None, False
        self.head, self.out_bytes, self.stages = bytearray(), 0, 0
        self.started = time.monotonic()
        self.deadline = self.started + first_s
        #: The job's absolute end (:data:`JOB_BOUND_STAGES`): no stage message moves :attr:`deadline` past it.
        self.bound = self.deadline + JOB_BOUND_STAGES * timeout_s

    def again(self, job: dict, timeout_s: float) -> bool:
        """Give this staying child its next ``job`` (:func:`_job`): its stage, deadline and output count start
        anew. False (nothing sent) when the child has ended meanwhile; the caller then :meth:`end` s it."""
        from tileprobe.probe import wire
        if self.ended or self.msgs is None or self.proc.poll() is not None:
            return False
        self._drain(keep=False)   # what it printed between jobs is no job's output
        try:
            wire.send(self.msgs, ("job", job), "the loader's job")
        except OSError:
            return False
        self.jobs += 1
        self._begin(timeout_s, timeout_s, "starting its next job")
        return True

    def waitables(self) -> list:
        return [x for x in (self.msgs, self.proc.stdout if self.out_fd is not None else None) if x is not None]

    def pump(self, ready) -> None:
        """Read what is ready: output (counted, the head kept) and messages (stage, report)."""
        if self.out_fd is not None and self.proc.stdout in ready:
            data = os.read(self.out_fd, 65536)
            if not data:
                self.out_fd = None
            self._take(data)
            self._check_flood()
        if self.msgs is not None and self.msgs in ready:
            from tileprobe.probe import wire
            try:
                kind, payload = wire.recv(self.msgs)   # data only: nothing the child sends is unpickled
                if kind == "stage" and type(payload) is str:
                    self.stages += 1
                    if self.stages > MAX_STAGE_MESSAGES:
                        raise wire.WireError(f"more than {MAX_STAGE_MESSAGES:,} stage messages")
                    self.stage = payload if len(payload) <= 500 else f"{payload[:480]}… ({len(payload):,} chars)"
                    self.deadline = min(time.monotonic() + self.timeout_s, self.bound)
                elif kind == "report":
                    self.report = report_from_data(payload, self.path)
                else:
                    raise wire.WireError(f"an unexpected message {kind!r}")
                self.heard = True
            except (EOFError, OSError):
                self.msgs = None
            except (wire.WireError, TypeError, ValueError) as e:
                self.msgs = None
                self.error = (f"{self.path}: the process loading it sent something that is not a loader's message "
                              f"({e}); it was stopped")

    def _check_flood(self) -> None:
        if self.out_bytes > OUTPUT_LIMIT_BYTES and self.error is None:
            self.error = (f"{self.path}: printed more than {OUTPUT_LIMIT_BYTES:,} bytes while {self.stage} and was "
                          f"stopped; remove the prints (first line: {self._first_line()!r})")

    def _take(self, data: bytes) -> None:
        """Count output ``data`` and keep it while the head is under :data:`OUTPUT_SHOWN_BYTES`."""
        self.out_bytes += len(data)
        self.head += data[:max(0, OUTPUT_SHOWN_BYTES - len(self.head))]

    def _first_line(self) -> str:
        line = (bytes(self.head).decode(errors="replace").strip().splitlines() or [""])[0]
        return line if len(line) <= 80 else line[:77] + "..."

    @property
    def finished(self) -> bool:
        """An error; a staying child's report; or the child closed its message socket and either its output or
        itself ended: a process the probe started (``subprocess.Popen`` at import) may hold the output open long
        after the loader is done."""
        return self.error is not None or (self.stay and self.report is not None) or (
            self.msgs is None and (self.out_fd is None or self.proc.poll() is not None))

    def _drain(self, keep: bool = True, every: bool = False) -> None:
        """Read the output already written (the loader's last lines), without waiting for a writer that stays:
        until the head is full, or with ``every`` all of it (counted: a staying child's job is over only then);
        ``keep=False``: read and drop it. At most :data:`OUTPUT_LIMIT_BYTES` and a read more."""
        if self.out_fd is None:
            return
        os.set_blocking(self.out_fd, False)
        budget = OUTPUT_LIMIT_BYTES + 65536
        with contextlib.suppress(BlockingIOError, OSError):
            while budget > 0 and (not keep or every or len(self.head) < OUTPUT_SHOWN_BYTES):
                data = os.read(self.out_fd, 65536)
                if not data:
                    self.out_fd = None
                    break
                budget -= len(data)
                if keep:
                    self._take(data)
        if self.out_fd is not None:
            os.set_blocking(self.out_fd, True)

    def kill(self) -> None:
        """SIGKILL the child, its descendants and its process group (the group outlives a loader that has ended:
        what the probe started and left running is in it, unless it made a session of its own)."""
        from tileprobe.procs import kill_tree
        kill_tree(self.proc.pid, group=True)   # the child is not reaped yet: its group id is still its own

    def end(self) -> int | None:
        """Kill the child with its group (:meth:`kill`), reap it, let the guard forget it, close its socket; its
        exit status (None when it had ended before). Safe to call twice, from two threads."""
        with self._end_lock:
            if self.ended:
                return None
            self.ended = True
            from tileprobe.procs import unguard
            self.kill()
            status = self.proc.wait()
            unguard(self.proc.pid)
            if self.msgs is not None:
                self.msgs.close()
                self.msgs = None
            return status

    def result(self) -> FileReport | None:
        """The report (after :attr:`finished` or a timeout). The child is ended (:meth:`end`), unless it stays and
        its job went well: then it waits for :meth:`again`. None when a reused child ended before it said a word
        about its job (its parent thread ended, say): the job is to be given to another child."""
        from tileprobe.schema import exit_text
        timed_out = not self.finished
        self._drain(every=self.stay)
        if self.stay and not timed_out:
            self._check_flood()
            if self.error is None and self.report is not None and self.proc.poll() is None:
                return self._with_output(self.report)
        status = self.end()
        if self.jobs > 1 and not self.heard and self.error is None and not timed_out:
            return None
        if self.report is None and self.error is None and not timed_out and self._zygote_lost():
            return None          # its zygote died under it (another probe's package): again, from a new zygote
        if timed_out and self.deadline >= self.bound:
            return FileReport(self.path, errors=[
                f"{self.path}: loading it took longer than {self.bound - self.started:.0f} s in all "
                f"({JOB_BOUND_STAGES} × the probe timeout of {self.timeout_s:.0f} s, whatever its stages said) and "
                f"was stopped during {self.stage} (raise --probe-timeout)"])
        if timed_out:
            return FileReport(self.path, errors=[f"{self.path}: {self.stage} did not return within "
                                                 f"{self.timeout_s:.0f} s and was stopped (an endless loop? a slow "
                                                 "import: raise --probe-timeout)"])
        if self.error:
            return FileReport(self.path, errors=[self.error])
        return self._with_output(self.report or FileReport(self.path, errors=[
            f"{self.path}: the process loading it ended during {self.stage} ({exit_text(status)}) and gave no "
            "result (a crash in an extension module, or os._exit before tileprobe could catch it)"]))

    def _zygote_lost(self) -> bool:
        """Whether this child was forked from a zygote that then died (its children die with it) and a new zygote
        is running to start the job again (:func:`tileprobe.probe.zygote.replaced_after`; never a fresh Python
        here: a probe that killed its parent would then reach tileprobe itself)."""
        z = getattr(self.proc, "zygote", None)
        if z is None or not z.dead:
            return False
        from tileprobe.probe.zygote import replaced_after
        return replaced_after(z)

    def _with_output(self, report: FileReport) -> FileReport:
        report.output = bytes(self.head).decode(errors="replace")
        report.output_bytes = self.out_bytes
        return report


# --- loader sessions: children that stay for a command's length ------------------------------------------------------

#: ``TILEPROBE_KEEP_LOADERS=0``: :func:`loader_sessions` keeps no child (one child per job, as outside it).
KEEP_ENV = "TILEPROBE_KEEP_LOADERS"


class LoaderSession:
    """The live loader children of one :func:`loader_sessions` (module doc): idle ones by :func:`_child_key`,
    and every one started (idle or busy), to end them all at :meth:`close`. Thread-safe: a child is given to one
    job at a time (:meth:`loader` takes it off the idle list; :meth:`put_back` returns it).

    ``started`` / ``reused``: children started, and jobs given to a child that had run one before. ``tmp``: the
    session's own temp folder (``tileprobe-loaders-*``, owned: :func:`tileprobe.procs.make_owned_tempdir`), which
    holds each job's folder: a staying child keeps files there that its imports made, after the call that started
    it has removed its own folder."""

    def __init__(self):
        from tileprobe.procs import make_owned_tempdir
        self.lock = threading.Lock()
        self.idle: list[_Loader] = []
        self.live: list[_Loader] = []
        self.tmp = make_owned_tempdir("loaders")
        self.closed = False
        self.started = self.reused = 0
        self.saver: ThreadPoolExecutor | None = None   # plan-cache writes, one at a time (save_later)
        self.lookup = None       # a DefaultCompilerLookup started ahead (prefetch_compiler_lookup)

    def loader(self, path: str, targets, max_variants: int, timeout_s: float, tmp_root: str,
               overrides: tuple = (None, None), task: tuple | None = None, num_sms: int | None = None) -> _Loader:
        """A child running this job (:class:`_Loader`'s arguments): an idle one of the same :func:`_child_key`
        given it, else a new staying one. A busy child is never given a second job: a second job on its file meanwhile
        (the race thread's ``launch_facts`` while the main thread loads) gets a child of its own, which stays
        too. After :meth:`close`: a child of its own that does not stay, as outside a session."""
        key = _child_key(path)
        while True:
            with self.lock:
                if self.closed:
                    break
                found = next((l for l in self.idle if l.key == key), None)
                if found is None:
                    break
                self.idle.remove(found)
            try:
                given = found.again(_job(path, targets, max_variants, self.tmp, overrides, task, num_sms, True),
                                    timeout_s)
            except BaseException:    # the job's folder could not be made: the child waits for another
                self.put_back(found)
                raise
            if given:
                with self.lock:
                    self.reused += 1
                return found
            found.end()              # it had ended (its parent thread, a signal): dropped
            self.put_back(found)
        if self.closed:
            return _Loader(path, targets, max_variants, timeout_s, tmp_root, overrides, task, num_sms)
        new = _Loader(path, targets, max_variants, timeout_s, self.tmp, overrides, task, num_sms, stay=True)
        with self.lock:
            self.live.append(new)
            self.started += 1
        return new

    def put_back(self, loader: _Loader) -> None:
        """``loader``'s job is over (:meth:`_Loader.result`): a live one waits for the next job on its file; one
        ended, or any after :meth:`close`, is ended and forgotten."""
        with self.lock:
            if not loader.ended and not self.closed:
                self.idle.append(loader)
                return
            if loader in self.live:
                self.live.remove(loader)
        loader.end()

    def save_later(self, fn: Callable, *args) -> bool:
        """Run ``fn(*args)`` in the session's saver thread (started on first use); False after :meth:`close`. A
        failure stays in its future, unread: a cache write that fails is a miss next time, never an error."""
        with self.lock:
            if self.closed:
                return False
            if self.saver is None:
                self.saver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tileprobe-plan-saves")
            self.saver.submit(fn, *args)
        return True

    def close(self) -> None:
        """Finish the pending saves, end every child (with its process group) and remove the temp folder. An idle
        child is ended here; one busy in another thread is killed here and reaped by that thread (its job then
        reports the end)."""
        from tileprobe.procs import remove_owned_tempdir
        with self.lock:
            self.closed = True    # a save asked from now on is made by its caller (save_later says False)
            saver, self.saver = self.saver, None
        if saver is not None:
            saver.shutdown(wait=True)
        with self.lock:
            self.closed = True
            idle, busy = list(self.idle), [l for l in self.live if l not in self.idle]
            self.idle.clear()
            self.live.clear()
        try:
            for loader in busy:
                loader.kill()
            for loader in idle:
                loader.end()
        finally:
            remove_owned_tempdir(self.tmp)


_session: LoaderSession | None = None
_session_depth = 0
_session_lock = threading.Lock()


def keep_loaders() -> bool:
    """False when ``TILEPROBE_KEEP_LOADERS=0`` (:data:`KEEP_ENV`)."""
    return os.environ.get(KEEP_ENV, "1") != "0"


def current_session() -> LoaderSession | None:
    """The :class:`LoaderSession` of the :func:`loader_sessions` in force (any thread), or None."""
    return _session


@contextlib.contextmanager
def loader_sessions() -> Iterator[LoaderSession | None]:
    """Inside: :func:`load_probe_files` and :func:`run_probe_tasks` give each job to an idle live child of the
    same probe file (and working folder, ``sys.path``, environment) rather than starting one, so a file is
    imported once per command (module doc). Nested uses share one session; the outermost ends every child and
    removes their temp folders, on return, exception or Ctrl-C. Enter it inside
    :func:`tileprobe.probe.zygote.warm_starts` (children forked from its zygote die with it). Yields the session
    (None with ``TILEPROBE_KEEP_LOADERS=0``)."""
    global _session, _session_depth
    with _session_lock:
        _session_depth += 1
        if _session_depth == 1 and keep_loaders() and _session is None:
            _session = LoaderSession()
        session = _session
    try:
        yield session
    finally:
        with _session_lock:
            _session_depth -= 1
            ending = _session if _session_depth == 0 else None
            if ending is not None:
                _session = None
        if ending is not None:
            ending.close()


def prefetch_compiler_lookup(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Inside :func:`loader_sessions`: start finding the tileiras cuTile picks now
    (:class:`~tileprobe._cutile.DefaultCompilerLookup`), for the session's first :func:`load_probe_files` that asks
    (``find_compiler``): a tune starts it beside its plan, so that its audit need not wait for it (1.5 s of a cold
    tune's path on the H200 host when the answer was not kept, ``benchmarks/tune/trace_tune.py``, 2026-12-02). Returns
    whether one was started."""
    from tileprobe._cutile import DefaultCompilerLookup
    session = current_session()
    if session is None:
        return False
    with session.lock:
        if session.lookup is not None or session.closed:
            return False
        session.lookup = DefaultCompilerLookup(timeout_s)
    return True


def load_probe_files(paths: Sequence[str], targets: Sequence[str], *, tmp_root: str, jobs: int | None = None,
                     timeout_s: float = PROBE_TIMEOUT_S, max_variants: int = 10**9,
                     find_compiler: bool = False, cases: dict | None = None,
                     hints: dict | None = None, task: tuple | None = None,
                     num_sms: int | None = None) -> list[FileReport]:
    """Load each probe file in its own child (``jobs`` at a time) and return one :class:`FileReport` per path, in
    order. ``timeout_s``: seconds each step of probe code may take; ``max_variants``: a probe whose grid is larger
    is not tried (its plan says ``evaluated=False``); ``find_compiler``: the first report also gives the tileiras
    cuTile would pick (``default_tileiras``), found beside the loaders
    (:class:`~tileprobe._cutile.DefaultCompilerLookup`); ``cases`` / ``hints``: ``--case`` / ``--hint`` overrides,
    ``num_sms`` the SM count for ``args`` (:func:`check_file`); ``task``: (tileprobe function, one argument dict
    per path) to run instead of :func:`check_file` (:func:`run_probe_tasks`). Inside :func:`loader_sessions` a
    job goes to a live child of its file when one is idle. Ctrl-C stops the children and propagates."""
    from tileprobe._cutile import DefaultCompilerLookup
    from tileprobe.procs import default_jobs
    jobs = max(1, jobs or default_jobs())
    session = current_session()
    lookup = None
    if find_compiler and paths:   # beside the loaders; one started ahead in this session is taken
        lookup = session.lookup if session is not None and session.lookup is not None else \
            DefaultCompilerLookup(timeout_s)
    tasks = [None if task is None else (task[0], task[1][i]) for i in range(len(paths))]
    keys = [_plan_key(p, targets, max_variants, cases, hints, num_sms, t) for p, t in zip(paths, tasks)]
    reports: list[Any] = [_kept_report(k, p) for k, p in zip(keys, paths)]   # None: to load
    todo = [(i, p) for i, p in enumerate(paths) if reports[i] is None]
    start = session.loader if session is not None else _Loader
    running: dict[int, _Loader] = {}
    first = True
    try:
        while todo or running:
            while todo and len(running) < jobs:
                i, path = todo.pop(0)
                running[i] = start(path, targets, max_variants, timeout_s, tmp_root, (cases, hints), tasks[i], num_sms)
            if first and running:    # a tune's guessed import of cuTile's compile side goes now, beside them
                first = False
                from tileprobe.probe.zygote import loaders_started
                loaders_started()
            soonest = min(l.deadline for l in running.values())
            ready = wait([w for l in running.values() for w in l.waitables()],
                         timeout=min(max(0.0, soonest - time.monotonic()), 0.5))
            for i, loader in list(running.items()):
                loader.pump(ready)
                if loader.finished or time.monotonic() > loader.deadline:
                    del running[i]
                    report = loader.result()
                    if session is not None:
                        session.put_back(loader)
                    if report is None:        # a reused child that was gone: the job goes to another
                        todo.insert(0, (i, paths[i]))
                        continue
                    reports[i] = report
                    _keep_report(keys[i], reports[i])
    finally:
        for loader in running.values():
            loader.end()
            if session is not None:
                session.put_back(loader)
    if lookup is not None:
        reports[0].default_tileiras, reports[0].default_tileiras_error = lookup.result()
    return reports

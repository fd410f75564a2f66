"""The loader child's side of containment (:mod:`tileprobe.probe.contained` has the whole story): the process that
imports a probe file and tries each probe's kernel, hint values and ``args``, sends ("stage", text) messages while
it does, and one ("report", data) at the end (:mod:`tileprobe.probe.wire`: data, never a pickle). Whatever probe code
does here is that probe's error; nothing of this module runs in the tileprobe process but :func:`check_file` when
a caller loads a probe in-process on purpose.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection

from tileprobe.errors import ProbeError
from tileprobe.probe.loader_job import LoaderJob
from tileprobe.probe.plans import (
    FileReport,
    ProbePlan,
    _grid_size,
    kernel_source_sha256,
    report_data,
    signature_sha256,
    source_sha256,
)


class _Failures:
    """Errors of one probe grouped by (what, line, detail), so each is reported once with the variants it hits."""

    def __init__(self, path: str):
        self.path = path
        self.groups: dict[str, list[str]] = {}

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
    from tileprobe.select import WhereError
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
    except WhereError:           # a --case value of the wrong kind: the command line's error (_serve_job)
        raise
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
    — or, when the job says ``stay`` (a :func:`~tileprobe.probe.sessions.loader_sessions` child), waits on FD for the parent's next
    ("job", dict) and exits at end of file (or on anything else)."""
    from tileprobe.probe.zygote_side import under_nanny
    from tileprobe.procs import die_with_parent
    fd, job = int(sys.argv[1]), LoaderJob.from_wire(json.loads(sys.argv[2]))
    parent = under_nanny(job.parent)   # probe code that signals its parent reaches a nanny of its own
    die_with_parent(signal.SIGKILL, parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = job.sys_path + [p for p in sys.path if p not in job.sys_path]
    real_exit = os._exit
    conn = Connection(fd)
    import cuda.tile  # noqa: F401  — not probe code: imported before the probe's clock starts

    from tileprobe.probe.plancache import watch_missing
    watch_missing()   # the modules probe code looks for and does not find (a plan kept for later names them)
    from tileprobe.probe import define, signature  # noqa: F401
    next_job: LoaderJob | None = job
    while next_job is not None:
        _serve_job(conn, next_job)
        next_job = _next_job(conn) if next_job.stay else None
    real_exit(0)


def _serve_job(conn: Connection, job: LoaderJob) -> None:
    """In the loader child: run one job (:func:`check_file` or a task) and send its report, as data."""
    from tileprobe.probe import plancache, wire
    tempfile.tempdir = job.tmp      # each job's own folder (the parent removes it)
    stage = lambda t: wire.send(conn, ("stage", str(t)))
    from tileprobe.select import WhereError
    try:
        report = (_run_task(job, stage) if job.task else
                  check_file(job.path, job.targets, job.max_variants, stage, job.cases, job.hints, job.num_sms))
    except WhereError as e:    # the command line's error, not the probe's: the parent raises it (load_probe_files)
        report = FileReport(os.path.abspath(job.path), usage_error=str(e))
    except BaseException as e:
        from tileprobe.probe.define import describe_exception
        report = FileReport(os.path.abspath(job.path), errors=[f"{job.path}: loading failed inside tileprobe: "
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


def _next_job(conn: Connection) -> LoaderJob | None:
    """In a staying loader child: the parent's next job (a ("job", object) message, checked), or None to exit (end
    of file, or anything else: a job whose fields do not fit too)."""
    from tileprobe.probe import wire
    try:
        kind, payload = wire.recv(conn)
        return LoaderJob.from_wire(payload) if kind == "job" and type(payload) is dict else None
    except (EOFError, OSError, wire.WireError, TypeError, ValueError):
        return None


def _run_task(job: LoaderJob, stage: Callable[[str], None]) -> FileReport:
    """In the loader child: run tileprobe's function ``job.task`` (``"tileprobe.mod:name"``) as
    ``fn(path, stage, **args)`` with the arguments in the file ``job.task_args`` (a :mod:`tileprobe.probe.wire`
    message); it returns (data, errors) and guards the probe code it runs itself.

    Raises:
        ValueError: the task is no function of tileprobe's, or the job names no arguments file."""
    from tileprobe.probe import wire
    module, _, name = (job.task or "").partition(":")
    if not module.startswith("tileprobe."):
        raise ValueError(f"not a tileprobe task: {job.task!r}")
    if job.task_args is None:
        raise ValueError(f"the task {job.task!r} came without its arguments file")
    with open(job.task_args, "rb") as f:
        args = wire.loads(f.read())
    data, errors = getattr(importlib.import_module(module), name)(job.path, stage, **args)
    return FileReport(os.path.abspath(job.path), errors=list(errors), data=data, uses_torch="torch" in sys.modules)

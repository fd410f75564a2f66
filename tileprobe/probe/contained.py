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

import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import wait
from typing import Any

# The parts (re-exported here: callers import them from this module). plans: the records that cross and the code
# hashes; loader_child: the child's side; loader: one child as the parent sees it, and the limits; sessions: the
# children kept for a command. Here: many files at once, and the plan cache.
from tileprobe.probe.loader import (  # noqa: F401
    JOB_BOUND_STAGES,
    MAX_STAGE_MESSAGES,
    OUTPUT_LIMIT_BYTES,
    OUTPUT_SHOWN_BYTES,
    PROBE_TIMEOUT_S,
    STARTUP_S,
    _Loader,
)
from tileprobe.probe.loader_child import check_file, child_main, plan_not_data  # noqa: F401
from tileprobe.probe.plans import (  # noqa: F401
    FileReport,
    ProbePlan,
    _target_name,
    code_sha256,
    kernel_source_sha256,
    probe_code_sha256,
    probe_targets,
    report_data,
    report_from_data,
    signature_sha256,
    source_sha256,
)
from tileprobe.probe.sessions import (  # noqa: F401
    KEEP_ENV,
    LoaderSession,
    current_session,
    keep_loaders,
    loader_sessions,
    prefetch_compiler_lookup,
)


def run_probe_tasks(paths: Sequence[str], task: str, task_args: Sequence[dict], *, timeout_s: float = PROBE_TIMEOUT_S,
                    jobs: int | None = None, kept: bool = True) -> list[FileReport]:
    """Run tileprobe's function ``task`` on each probe file in a contained loader child, as the audit loads probes
    (its timeouts per stage, output limit, crashes and exits as the file's errors). ``task_args``: one dict of data
    per path. Returns one :class:`FileReport` per path, its ``data`` what the task returned (None when it failed:
    then ``errors`` says why). ``kept``: False for a task whose caller keeps the answers itself (the plan cache
    neither asked nor written; each report keeps its ``code_files``)."""
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("load") as tmp:
        return load_probe_files(paths, (), tmp_root=tmp, jobs=jobs, timeout_s=timeout_s,
                                task=(task, list(task_args)), kept=kept)


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
    if report.errors or report.usage_error or not report.code_files:
        return
    files, report.code_files = report.code_files, []
    data = report_data(report)      # the fields as they are now: the caller may set more on ``report`` later
    session = current_session()
    if session is None or not session.save_later(plancache.save, k, data, files):
        plancache.save(k, data, files)


def load_ahead(paths: Sequence[str], targets: Sequence[str], *, timeout_s: float, max_variants: int,
               cases: dict | None = None, hints: dict | None = None, num_sms: int | None = None) -> int:
    """Start loading ``paths`` as :func:`load_probe_files` would with these arguments (:mod:`tileprobe.probe.ahead`),
    in a thread of the current loader session, one file after another; files whose report the plan cache keeps are
    left out. Returns how many loads were started (0 outside a session, or when turned off)."""
    from tileprobe.probe.ahead import enabled, register
    session = current_session()
    if session is None or not enabled() or not paths:
        return 0
    todo = []
    for p in paths:
        k = _plan_key(p, targets, max_variants, cases, hints, num_sms, None)
        fut = register(session, k) if _kept_report(k, p) is None else None
        if fut is not None:
            todo.append((p, fut))
    if not todo:
        return 0

    def run() -> None:
        from tileprobe.procs import owned_tempdir
        for p, f in todo:
            report: Any = None
            try:
                if not session.closed:
                    with owned_tempdir("ahead") as tmp:
                        report = load_probe_files([p], targets, tmp_root=tmp, jobs=1, timeout_s=timeout_s,
                                                  max_variants=max_variants, cases=cases, hints=hints,
                                                  num_sms=num_sms, ahead=False)[0]
            except BaseException:      # the load is asked again by the caller that takes nothing
                report = None
            f.set_result(report)
        session.over.wait()    # a child dies with the thread that started it (its parent-death signal): this one
        # stays until the session has ended them all, so the children it started serve the command's later jobs
    threading.Thread(target=run, name="tileprobe-load-ahead", daemon=True).start()
    return len(todo)


def load_plans(paths: Sequence[str], targets: Sequence[str] = (), *,
               timeout_s: float = PROBE_TIMEOUT_S) -> tuple[list[ProbePlan], list[str]]:
    """The probes of ``paths`` as plans (names, cases, hints), loaded contained, without trying their ``args``: for
    commands that need the grid before an audit (gate's ``--where`` check). Returns (plans, errors)."""
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("load") as tmp:
        reports = load_probe_files(paths, targets, tmp_root=tmp, timeout_s=timeout_s, max_variants=0)
    errors = [e for r in reports for e in ([r.no_probe] if r.no_probe else []) + r.errors]
    return [p for r in reports for p in r.plans], errors



def load_probe_files(paths: Sequence[str], targets: Sequence[str], *, tmp_root: str, jobs: int | None = None,
                     timeout_s: float = PROBE_TIMEOUT_S, max_variants: int = 10**9,
                     find_compiler: bool = False, cases: dict | None = None,
                     hints: dict | None = None, task: tuple | None = None,
                     num_sms: int | None = None, kept: bool = True, ahead: bool = True) -> list[FileReport]:
    """Load each probe file in its own child (``jobs`` at a time) and return one :class:`FileReport` per path, in
    order. ``timeout_s``: seconds each step of probe code may take; ``max_variants``: a probe whose grid is larger
    is not tried (its plan says ``evaluated=False``); ``find_compiler``: the first report also gives the tileiras
    cuTile would pick (``default_tileiras``), found beside the loaders
    (:class:`~tileprobe._cutile.DefaultCompilerLookup`); ``cases`` / ``hints``: ``--case`` / ``--hint`` overrides,
    ``num_sms`` the SM count for ``args`` (:func:`check_file`); ``task``: (tileprobe function, one argument dict
    per path) to run instead of :func:`check_file` (:func:`run_probe_tasks`); ``kept``: False: the plan cache is
    neither asked nor written (the reports keep their ``code_files``); ``ahead``: take a load of the same question
    started ahead in this session (:mod:`tileprobe.probe.ahead`; waits for it). Inside :func:`loader_sessions` a
    job goes to a live child of its file when one is idle. Ctrl-C stops the children and propagates.

    Raises:
        WhereError: a child found a ``--case`` value of the wrong kind for its probes
            (:func:`tileprobe.select.check_case_values`): the command line's error, exit 2."""
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
    reports: list[Any] = [_kept_report(k, p) if kept else None for k, p in zip(keys, paths)]   # None: to load
    if ahead and task is None and session is not None:
        from tileprobe.probe.ahead import take
        for i, k in enumerate(keys):
            reports[i] = reports[i] if reports[i] is not None else take(k, 4 * timeout_s + 60.0)
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
                    if kept:
                        _keep_report(keys[i], reports[i])
    finally:
        for loader in running.values():
            loader.end()
            if session is not None:
                session.put_back(loader)
    if lookup is not None:
        reports[0].default_tileiras, reports[0].default_tileiras_error = lookup.result()
    for rep in reports:
        if rep.usage_error:
            from tileprobe.select import WhereError
            raise WhereError(rep.usage_error)
    return reports

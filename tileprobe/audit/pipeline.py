"""The audit pipeline in one place: probes → variants → compile → cubin → occupancy → verdicts → records.

No GPU is needed. ``audit()`` is what ``tileprobe audit`` runs; every other command builds on its records. Probe
code runs only in loader children (:mod:`.contained`) and compile workers (:mod:`.pool`); variants are planned and
dispatched as a stream; everything runs in one temp folder this call owns and removes (:mod:`.procs`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from tileprobe import _cutile
from tileprobe.audit.result import AuditResult, environment, write_bundle
from tileprobe.audit.sass_reader import SassReader
from tileprobe.audit.variants import check_compile_timeout, iter_variants, plan_variants, record_from
from tileprobe.compile.claims import Claims
from tileprobe.compile.failure import help_command, unsupported_target, version_of
from tileprobe.compile.job import CompileResult, Variant, failed_artifacts_dir, load_scaled_timeout_s
from tileprobe.compile.order import longest_first
from tileprobe.compile.pool import compile_variants
from tileprobe.compile.schedule import ChosenSchedule
from tileprobe.compile.toolcache import binary_fact
from tileprobe.errors import IncompleteError, TileprobeError, ToolchainError, UsageError, shown
from tileprobe.judge.verdict import judge_records
from tileprobe.model.arch import check_target
from tileprobe.model.cubin import CubinInfo
from tileprobe.model.sass import split_register_pool
from tileprobe.model.toolkit import compiler_identity
from tileprobe.probe.contained import (
    OUTPUT_SHOWN_BYTES,
    PROBE_TIMEOUT_S,
    load_probe_files,
    source_sha256,
)
from tileprobe.probe.define import load_probes
from tileprobe.probe.zygote import prefetch_heavy, warm_starts
from tileprobe.procs import default_jobs, owned_tempdir
from tileprobe.schema import (
    VariantRecord,
    short_build,
    timeout_seconds,
    value_key,
)
from tileprobe.select import case_selector, check_case_names, check_overrides
from tileprobe.toolchain import Toolchain

#: The pipeline's API as callers import it (its result and variants live in :mod:`.result` and :mod:`.variants`;
#: :mod:`tileprobe.audit` re-exports part of it lazily).
__all__ = ["MAX_VARIANTS", "AuditResult", "audit", "check_compile_timeout", "distinct_files", "environment",
           "iter_variants", "load_probe_files", "load_probes", "plan_variants", "record_from", "refuse_unlisted",
           "resolve_compiler", "source_sha256", "write_bundle"]

#: Most variants an audit compiles unless told otherwise (``max_variants`` / ``--max-variants``): a 10^6-variant
#: grid took the main process to 3 GB in 3 minutes; 5,000 variants at the 1-3 s a compile takes is
#: already hours on 2 cores.
MAX_VARIANTS = 5000


def resolve_compiler(tc: Toolchain) -> Toolchain:
    """``tc`` with its ``tileiras`` path filled (when empty: the one cuTile would pick), its ``build`` string,
    ``identity`` (:func:`tileprobe.model.toolkit.compiler_identity`: the hash of its files; stored failures are
    reused only for the same identity), ``targets`` (what its ``--help`` lists; asked once per toolchain, ``()``
    when unknown) and, when it had none, the ``version`` its build names (``""`` when it names none).

    Raises:
        ToolchainError: tileiras is not found or does not answer ``--version``, or a managed one says another
            release than its folder and manifest (both were edited or the folder renamed).
    """
    tileiras = tc.tileiras or _cutile.current_compiler()
    build = binary_fact("build", tileiras, _cutile.tileiras_build)   # asked once
    said = version_of(build)
    if tc.source == "managed" and tc.version and said and said != tc.version:   # its folder and manifest lie
        raise ToolchainError(f"{tileiras} says it is tileiras {said} ({build}), but its folder {tc.root} and "
                             f"manifest are {tc.version}'s; reinstall: tileprobe toolchain remove {tc.version} && "
                             f"tileprobe toolchain install {tc.version}")
    identity = compiler_identity(tileiras)
    targets = tc.targets
    if targets is None:     # a list from tileiras (or the cache file's JSON): the toolchain keeps a tuple
        listed = binary_fact("targets", tileiras, _cutile.tileiras_targets)
        targets = tuple(listed) if listed is not None else None
    return dataclasses.replace(tc, tileiras=tileiras, build=build, identity=identity, targets=targets,
                               version=tc.version or version_of(build) or "")


def refuse_unlisted(variants: Sequence[Variant], tc: Toolchain) -> tuple[list[CompileResult], list[Variant]]:
    """Split ``variants`` into results for the archs compiler ``tc`` does not list (``unsupported_target``,
    nothing compiled: :func:`tileprobe.compile.failure.unsupported_target`) and the variants to compile."""
    targets = list(tc.targets or ())
    refused, todo = [], []
    for v in variants:
        if targets and v.arch not in targets:
            res = CompileResult(v, "compile_error", tileiras=tc.build, tileiras_path=tc.tileiras,
                                cuda_tile=_cutile.cutile_version(), repro=help_command(tc.tileiras))
            refused.append(res.fail(unsupported_target(v.arch, targets, tc.tileiras, tc.build)))
        else:
            todo.append(v)
    return refused, todo


def audit(probe_paths: Sequence[str], archs: Sequence[str], *, toolchains: Sequence[Toolchain | dict] | None = None,
          jobs: int | None = None, timeout_s: float | None = None, with_sass: bool = False,
          store=None, progress: Callable | None = None,
          select: Callable[[Variant], bool] | None = None, repeat: int = 1,
          where: dict | None = None, cases: dict | None = None, hints: dict | None = None,
          retry_failed: bool = False, probe_timeout_s: float = PROBE_TIMEOUT_S,
          max_variants: int = MAX_VARIANTS, executor=None, compiler_timeout_s: float | None = None,
          on_record: Callable | None = None, num_sms: int | None = None,
          schedule: ChosenSchedule | None = None) -> AuditResult:
    """Audit probe files for architectures, with one or more tileiras toolchains.

    Args:
        probe_paths: probe files (each defines ``probe`` or ``probes``).
        archs: targets such as ``["sm_90", "sm_120"]`` (:data:`tileprobe.model.arch.TILEIRAS_TARGETS`).
        toolchains: :class:`~tileprobe.toolchain.Toolchain` s (:func:`tileprobe.toolchain.resolve_toolchains`,
            or ``Toolchain.at(path)``), or their mapping form ``{"tileiras": path, "lib_dirs": [...]}``
            (:meth:`~tileprobe.toolchain.Toolchain.from_dict`); ``None`` = the tileiras cuTile would pick.
        jobs: parallel compile workers (default: all CPUs).
        timeout_s: per-variant compiler timeout (s); a probe's ``timeout_s`` wins. None: the default scaled by
            the machine's load at the start (:func:`~tileprobe.compile.job.load_scaled_timeout_s`, 900–3,600 s).
        with_sass: also disassemble each cubin for SASS traits (needs nvdisasm).
        store: a :class:`tileprobe.store.Store`; variants already there are not compiled again and new ones are
            saved as they finish.
        progress: ``progress(kind, n)`` callback, per toolchain: ("compiler", "tileiras 13.4.92") which compiler
            the counts that follow are for, ("stored", n) the variants taken from the store,
            then ("total", n) the compiles to run (repeats included), then ("advance", 1) per finished compile,
            preceded by ("failed", 1) when that compile failed (compile_error, compiler_crash, timeout).
        select: keep only the planned variants for which ``select(variant)`` is true (e.g. one case).
        repeat: compile each variant this many times (≥ 1); records then carry ``code_hashes`` and
            ``deterministic``, and verdicts/compare treat any shared code hash as "same code" (FIELD_NOTES:
            tileiras is not always deterministic). Repeats bypass the store.
        where: ``{name: value}`` (:func:`tileprobe.select.parse_where`): compile only the cases whose
            constants match (every value of each hint: verdicts compare them); hint items are for the caller to
            select records with (:func:`tileprobe.select.select`).
        cases, hints: ``{name: [values]}`` replacing (hints: or adding) the probes' own values
            (``--case`` / ``--hint``; :func:`tileprobe.select.apply_overrides`).
        retry_failed: compile again the variants the store holds as failed (by default a stored failure is the
            answer, except probe errors and broken environments: :meth:`tileprobe.store.Store.lookup`).
        probe_timeout_s: seconds each step of probe code (import, kernel import, one ``args`` call) may take.
        max_variants: most variants (× repeat) to compile; a larger audit is refused before anything runs.
        compiler_timeout_s: a program's compiler timeout (s, ``ct.compiler_timeout``) to check each variant's compile
            time against (:func:`check_compile_timeout`); None: not checked.
        executor: where compiles run: an object with ``compile(variants, **kw)`` yielding
            :class:`~tileprobe.compile.job.CompileResult` s as they finish (:mod:`tileprobe.exec`; default: the
            local pool, :func:`~tileprobe.compile.pool.compile_variants`). Results reach the store from this process
            only.
        on_record: ``on_record(record, cubin)`` as each record lands (:attr:`AuditResult.on_record`).
        num_sms: the SM count handed to probes whose ``args`` take ``num_sms=`` (``--num-sms``; default: each
            arch's reference GPU's, :func:`tileprobe.model.cluster.reference_num_sms`, else None).
        schedule: a :class:`~tileprobe.compile.schedule.ChosenSchedule`: the compiles (not the stored variants)
            started in the order it chooses, as workers free up, until it stops; the variants not started get no
            record.

    With a store, each variant is claimed there at dispatch (:mod:`tileprobe.compile.claims`): processes sharing
    the store never compile one variant twice at once; one claimed by another live process is awaited.

    A variant for an arch the compiler does not list (``tileiras --help``, asked once per toolchain) is not
    compiled: its record says ``unsupported_target``.

    Probe code runs only in child processes: a broken probe is reported once in ``probe_errors`` (file and line)
    and the other probes go on. An unknown arch or an unusable compiler is reported in ``target_errors`` and the
    others go on.

    Raises:
        UsageError: a timeout that is not a positive finite number of seconds; ``repeat`` < 1; more variants than
            ``max_variants`` (the message says how many and how to ask for them).
        WhereError: a ``where`` or override that names nothing or selects nothing
            (:class:`~tileprobe.select.WhereError`).
        IncompleteError: no probe could be loaded.
    """
    t0 = time.perf_counter()
    if timeout_s is None:
        timeout_s = load_scaled_timeout_s()
    check_seconds("timeout_s", timeout_s)
    check_seconds("probe_timeout_s", probe_timeout_s)
    check_overrides(cases, hints)
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}: give 1 or more compiles per variant")
    if num_sms is not None and (isinstance(num_sms, bool) or not isinstance(num_sms, int) or num_sms < 1):
        raise UsageError(f"--num-sms {num_sms!r}: give the GPU's SM count, a whole number ≥ 1")
    result = AuditResult(on_record=on_record)
    since = store_now()
    probe_paths = distinct_files(probe_paths)   # a file named twice (or as ./a.py and a.py) is audited once
    targets = _targets(archs, result)
    if archs and not targets:   # every --arch is wrong: say so now, not after loading the probes (30-50 s)
        result.environment, result.wall_s = environment(), time.perf_counter() - t0
        return result
    order: dict[tuple, int] = {}
    with warm_starts(), owned_tempdir("audit") as tmp:   # loaders and workers forked from one warm cuTile import
        from tileprobe.compile.toolcache import cached_default
        given = [t if isinstance(t, Toolchain) else Toolchain.from_dict(t) for t in toolchains or ()]
        find = not given or any(not tc.tileiras for tc in given)
        known = cached_default() if find else None      # cuTile's lookup imports torch: skipped when cached
        plans, default = _load(probe_paths, targets, result, tmp, jobs, probe_timeout_s, max_variants,
                               find and known is None, cases, hints, num_sms)
        if known is not None:
            default = lambda: known
        select = _selector(where, plans, select)
        total = _count(plans, targets, select, repeat, max_variants)
        if total == 0 and where and not result.probe_errors:   # a broken probe: its own error, not "matches none"
            from tileprobe.select import no_case_match
            raise no_case_match(dict(where), plans)
        for tc in given or [Toolchain.at()]:
            try:
                tc = resolve_compiler(tc if tc.tileiras else dataclasses.replace(tc, tileiras=default()))
            except ToolchainError as e:
                result.target_errors.append(str(e))
                continue
            try:
                _audit_with(tc, plans, targets, result, order, total, tmp=tmp, jobs=jobs, timeout_s=timeout_s,
                            with_sass=with_sass, store=store, progress=progress, select=select, repeat=repeat,
                            retry_failed=retry_failed, executor=executor, since=since, schedule=schedule)
            except ToolchainError as e:
                result.target_errors.append(f"{tc.build or tc.tileiras}: {e}")
    probe_errors = {r.error for r in result.records if r.status == "probe_error"}
    result.probe_errors.extend(sorted(probe_errors - set(result.probe_errors)))
    judge_records(result.records)
    if compiler_timeout_s is not None:
        check_compile_timeout(result.records, compiler_timeout_s)
    if store is not None:
        store.attach_runs(result.records)
    result.records.sort(key=lambda r: (r.tileiras, order.get(_order_key(r.probe, r.kernel, r.case, r.hints, r.arch), 0)))
    result.environment = environment(r.tileiras for r in result.records if r.tileiras)
    if any(r.ok for r in result.records):   # what this cuda-tile cannot give (remarks before 1.6), one line each
        result.notes.extend(_cutile.feature_notes())
    result.wall_s = time.perf_counter() - t0
    return result


def store_now() -> str:
    """Now, as the store writes ``created`` (UTC ISO 8601 with microseconds; :func:`tileprobe.store.now`)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_seconds(name: str, value) -> float:
    """``value`` as a timeout in seconds (:func:`tileprobe.schema.timeout_seconds`).

    Raises:
        UsageError: 0, negative, nan, inf, past 10^7 s or not a number (naming ``name`` and the value).
    """
    try:
        return timeout_seconds(value)
    except ValueError as e:
        raise UsageError(f"{name}={value!r}: {e}") from None


def distinct_files(paths: Sequence[str]) -> list[str]:
    """``paths`` without the repeats of a file named before (same real path: ``a.py``, ``./a.py``, a link to it),
    in their order, each as first given (a probe named 20 times on the command line was compiled 20 times,
    2026-12-04)."""
    seen, out = set(), []
    for p in paths:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _targets(archs: Sequence[str], result: AuditResult) -> list[str]:
    """The requested targets tileiras lists; each other one becomes a target error (the rest are audited)."""
    out = []
    for a in archs:
        try:
            t = check_target(a)
        except TileprobeError as e:
            result.target_errors.append(f"--arch {shown(a)}: {e}")
            continue
        if t not in out:
            out.append(t)
    return out


def _load(paths, targets, result: AuditResult, tmp: str, jobs, timeout_s: float, max_variants: int,
          find_compiler: bool, cases: dict | None = None, hints: dict | None = None, num_sms: int | None = None):
    """Load every probe file in a contained child; collect errors (once each), notes and output. Returns the plans
    and a function giving the tileiras cuTile picks (as the loaders found it: this process does not import cuTile,
    whose import leaves a temp folder behind when the process is killed)."""
    plans = []
    reports = load_probe_files(paths, targets, tmp_root=tmp, jobs=jobs, timeout_s=timeout_s, max_variants=max_variants,
                               find_compiler=find_compiler, cases=cases, hints=hints, num_sms=num_sms)

    def default_tileiras() -> str:
        if reports[0].default_tileiras:
            from tileprobe.compile.toolcache import remember_default
            remember_default(reports[0].default_tileiras)
            return reports[0].default_tileiras
        raise ToolchainError(reports[0].default_tileiras_error or "the tileiras cuTile picks could not be found "
                             "(the process looking for it did not answer); run `tileprobe doctor`")

    shown: dict[str, str] = {}
    for rep in reports:
        if rep.no_probe and len(paths) == 1:
            result.probe_errors.append(rep.no_probe)
        elif rep.no_probe:      # a helper module among several files is not a broken probe
            result.notes.append(f"{rep.path}: skipped, it defines no probe (a helper module?)")
        result.probe_errors.extend(rep.errors)
        _note_output(result, rep, shown)
        plans.extend(rep.plans)
    plans = _without_name_clashes(plans, targets, result)
    prefetch_heavy(any(rep.uses_torch for rep in reports))   # no probe needs torch: workers need not wait for it
    if not plans:
        raise IncompleteError("no probe could be loaded:\n  " + "\n  ".join(result.probe_errors + result.notes))
    check_case_names(cases, plans)
    return plans, default_tileiras


def _without_name_clashes(plans: list, targets: Sequence[str], result: AuditResult) -> list:
    """``plans`` less those whose name another plan of another file already has for one of the requested
    ``targets`` (tables, verdicts and the store tell probes apart by name and arch); each clash is a probe error
    naming both files and lines and the shared archs. Probes of one name with disjoint ``archs`` (per-arch launches
    of one kernel) all stay, and so do plans with no variant to audit (their own errors say why)."""
    kept: list = []
    for plan in plans:
        if plan.evaluated and not plan.n_variants:   # nothing to audit (its own errors say why): no clash
            kept.append(plan)
            continue
        mine = set(plan.targets(targets))
        twin = next((k for k in kept if k.label == plan.label and k.source != plan.source
                     and (k.n_variants or not k.evaluated) and mine & set(k.targets(targets))), None)
        if twin is None:
            kept.append(plan)
            continue
        shared = ", ".join(t for t in targets if t in mine and t in twin.targets(targets))
        result.probe_errors.append(
            f"{plan.source}:{plan.lineno or '?'}: probe {plan.label!r} is also defined at {twin.source}:"
            f"{twin.lineno or '?'}, both for {shared}: give one a distinct name= or make their archs= disjoint "
            f"(this one is not audited)")
    return kept


def _note_output(result: AuditResult, rep, shown: dict[str, str]) -> None:
    """Add what probe file ``rep.path`` printed while loading to the notes: its first 5 lines, or, when an earlier
    file printed the same (a shared helper's banner, a library's warning), one line naming that file.
    ``shown`` maps each output already noted to the file that printed it."""
    text = rep.output.strip()
    if not text:
        return
    if text in shown:
        result.notes.append(f"{rep.path} printed the same while loading as {shown[text]}")
        return
    shown[text] = str(rep.path)
    lines = text.splitlines()
    if rep.output_bytes > OUTPUT_SHOWN_BYTES:     # only the head was kept: its line count says nothing
        more = f"\n  … (it printed {rep.output_bytes:,} bytes in all)"
    else:
        more = f"\n  … ({len(lines) - 5} more lines)" if len(lines) > 5 else ""
    result.notes.append(f"{rep.path} printed while loading:\n  " + "\n  ".join(lines[:5]) + more)


def _selector(where: dict | None, plans, select: Callable | None) -> Callable | None:
    """``select`` and the case items of ``where`` (:func:`tileprobe.select.case_selector`) as one predicate."""
    keep = case_selector(where, plans)
    if keep is None or select is None:
        return keep or select
    return lambda v: keep(v) and select(v)


def _count(plans, targets, select, repeat: int, max_variants: int) -> int:
    """Variants the audit will compile (× repeat counted against the limit).

    Raises:
        UsageError: more than ``max_variants``; says how many, per probe, and the option that allows them.
    """
    n = sum(p.n_variants for p in plans)
    if select is not None:
        n = sum(1 for v in iter_variants(plans, targets) if select(v))
    if n * repeat > max_variants:
        parts = [f"{p.label}: {math.prod(len(v) for v in p.cases.values()):,} case(s) × "
                 f"{math.prod(len(v) for v in p.hints.values()):,} hint combination(s) × "
                 f"{len(p.targets(targets))} arch(s)" for p in plans[:3]]
        rep = f" × {repeat} repeats" if repeat > 1 else ""
        raise UsageError(f"this audit would compile {n:,} variants{rep} ({'; '.join(parts)}), more than the limit of "
                         f"{max_variants:,}: pass --max-variants {n * repeat} to compile them all, or narrow the cases, "
                         "hints or --arch")
    return n * repeat


def _audit_with(tc: Toolchain, plans, targets, result: AuditResult, order: dict, total: int, *, tmp, jobs, timeout_s,
                with_sass, store, progress, select, repeat, retry_failed=False, executor=None, since="",
                schedule: ChosenSchedule | None = None) -> None:
    """One toolchain's part of the audit: stored variants reused, archs the compiler does not list refused
    (:func:`refuse_unlisted`), the rest streamed to the compile workers."""
    def planned() -> Iterator[Variant]:
        return (v for v in iter_variants(plans, targets) if select is None or select(v))

    listed = tc.targets or ()
    if progress:
        progress("compiler", short_build(tc.build))
        stored = _count_stored(planned(), tc, store, retry_failed)
        progress("stored", stored)
        progress("total", total - stored)
    refused: list[CompileResult] = []
    failed: list = []   # failed records taken from the store
    todo = _not_stored(planned(), tc, store, with_sass, result, order, retry_failed, failed)
    if schedule is not None:      # a budgeted tune: what its search chooses, as long as its time allows
        todo = schedule.apply(todo)
    else:                         # the likely slowest compiles start first (reported in the plan's order all the same)
        todo = iter(longest_first(todo))
    extra = (dataclasses.replace(v, rep=i) for i in range(1, repeat) for v in planned()
             if not listed or v.arch in listed)
    repeats: dict[tuple, list[str]] = {}
    claims = Claims(store, tc, since, timeout_s) if store is not None else None

    cut = schedule.cut_monotonic() if schedule is not None else None   # a budgeted tune's end (monotonic clock)

    # the local pool's workers only compile; the SASS facts are read here in batches (audit.sass_reader)
    reader = SassReader(jobs=jobs or default_jobs()) if with_sass is True and executor is None else None

    def compile_(variants: Iterable[Variant], spare: int | None = None) -> None:
        kw: dict[str, Any] = dict(
            tileiras=tc.tileiras, lib_dirs=list(tc.lib_dirs) or None, jobs=jobs, timeout_s=timeout_s,
            with_sass=False if reader is not None else with_sass, tmp_root=tmp,
            artifact_root=failed_artifacts_dir(getattr(store, "path", None) if store is not None else None))
        if executor is not None:
            results = executor.compile(variants, **kw)
        else:
            if cut is not None and schedule is not None:     # a budgeted tune: stop dispatching at its end
                kw.update(cut_at=cut, cut_spare=schedule.spare if spare is None else spare)
            results = compile_variants(variants, **kw)
        with contextlib.closing(results):   # an exception here (Ctrl-C, SIGTERM) stops the workers now, not at GC
            _collect(results, tc, result, store, progress, repeats, reader)

    try:
        stream = _refuse(todo, tc, refused)
        compile_(itertools.chain(claims.dispatch(stream) if claims else stream, extra))
        _collect(refused, tc, result, store, progress, repeats)
        if claims is not None:
            claims.settle(lambda vs: compile_(vs, spare=0), lambda records: _found(records, store, result, progress),
                          until=cut)
        if reader is not None:
            _land_read(reader.close(), tc, result, store)
            reader = None
    finally:
        if reader is not None:    # stopped early: what was compiled still lands (unread facts: the store reads
            _land_unread(reader, tc, result, store)    # them from the cubin at the next lookup)
        if claims is not None:
            claims.release()
    transient = [r for r in failed if (r.failure or r.status) in TRANSIENT_FAILURES]
    if transient:      # an unsupported feature or a compile error is the same answer the next time
        how = " or ".join(sorted({r.failure or r.status for r in transient}))
        result.notes.append(f"{len(transient)} variant(s) that failed by {how} taken from the store, not compiled "
                            f"again ({short_build(tc.build)}); --retry-failed compiles them again")
    if repeat > 1:
        _mark_determinism(result.records, repeats, tc.build)


def _found(records: list, store, result: AuditResult, progress) -> None:
    """Records another process compiled while this audit waited for them (:class:`~.claims.Claims`)."""
    for rec in records:
        _advance(progress, rec)
        data = store.cubin(rec.cubin_sha256) if rec.cubin_sha256 else None
        if data is not None:
            result.cubins[rec.cubin_sha256] = data
        result.records.append(rec)
        result.landed([rec])


#: The statuses the audit's last line counts as failed to compile (``tileprobe.cli.audit.FAILED``).
_FAILED_STATUSES = ("compile_error", "compiler_crash", "timeout")


def _advance(progress, rec) -> None:
    """One finished compile for the ``progress`` callback: ("failed", 1) first when ``rec`` failed to compile,
    then ("advance", 1); ``rec`` None: a repeated compile, which makes no record."""
    if progress:
        if rec is not None and rec.status in _FAILED_STATUSES:
            progress("failed", 1)
        progress("advance", 1)


def _refuse(variants: Iterable[Variant], tc: Toolchain, refused: list) -> Iterator[Variant]:
    """``variants`` less those for archs compiler ``tc`` does not list, whose results go to ``refused``."""
    for v in variants:
        out, keep = refuse_unlisted([v], tc)
        refused.extend(out)
        yield from keep


def _collect(results: Iterable[CompileResult], tc: Toolchain, result: AuditResult, store, progress, repeats: dict,
             reader: SassReader | None = None) -> None:
    """Turn compile results into records (stored as they come); repeated compiles only add code hashes. With a
    ``reader``, a compiled record is stored at once, then waits for its SASS facts (read in batches beside the
    compiles) before it is stored again with them and handed on; the others land at once. A SIGKILL between the two
    leaves the compile stored without its facts, which the store fills in from the cubin when it is read back."""
    for res in results:
        if res.variant.rep:
            _advance(progress, None)
            if res.cubin is not None:
                repeats.setdefault(_base(res.variant), []).append(CubinInfo.from_bytes(res.cubin).code_sha256)
            continue
        rec = record_from(res)
        _advance(progress, rec)
        if res.cubin is not None and rec.cubin_sha256:
            result.cubins[rec.cubin_sha256] = res.cubin
        if reader is not None and rec.ok and rec.cubin_sha256 and res.cubin is not None:
            if store is not None:      # saved now, its SASS facts added when read: a killed audit keeps the compile
                store.save_compile(res, rec, tc)
            reader.submit((res, rec), res.cubin, res.symbol)
        else:
            _land(res, rec, tc, result, store)
        if reader is not None:
            _land_read(reader.take(), tc, result, store)


def _land(res: CompileResult, rec: VariantRecord, tc: Toolchain, result: AuditResult, store) -> None:
    """Store one record and hand it on (:meth:`AuditResult.landed`)."""
    if store is not None:
        store.save_compile(res, rec, tc)
    result.records.append(rec)
    result.landed([rec])


def _land_read(read: Iterable[tuple], tc: Toolchain, result: AuditResult, store) -> None:
    """Land the records whose SASS facts a :class:`SassReader` read: ``((res, rec), summary)`` pairs, the summary
    in the worker's pipe form, set as :func:`record_from` sets a worker's."""
    for (res, rec), summary in read:
        res.sass = summary
        rec.sass, rec.register_pool = split_register_pool(summary)
        _land(res, rec, tc, result, store)


def _land_unread(reader: SassReader, tc: Toolchain, result: AuditResult, store) -> None:
    """After an error or an interrupt: land what the reader read, and the rest without SASS facts; a failure to
    land one does not hide the error that stopped the audit."""
    read, unread = reader.abandon()
    with contextlib.suppress(Exception):
        _land_read(read, tc, result, store)
        for res, rec in cast("list[tuple[CompileResult, VariantRecord]]", unread):   # the keys _collect submitted
            _land(res, rec, tc, result, store)


def _chunks(variants: Iterable[Variant], chunk: int = 256) -> Iterator[list[Variant]]:
    it = iter(variants)
    while batch := list(itertools.islice(it, chunk)):
        yield batch


#: Failures that another try may not repeat (a loaded machine's timeout, a crash, a broken environment since
#: repaired): the store's copy of these is worth a --retry-failed; the others are the compiler's answer.
TRANSIENT_FAILURES = ("timeout", "compiler_crash", "broken_environment")


def _count_stored(variants: Iterable[Variant], tc: Toolchain, store, retry_failed: bool) -> int:
    """How many of ``variants`` the store holds for ``tc`` (read a chunk at a time; nothing kept)."""
    if store is None:
        return 0
    return sum(len(store.lookup(b, tc, retry_failed=retry_failed)[0]) for b in _chunks(variants))


def _not_stored(variants: Iterable[Variant], tc: Toolchain, store, with_sass: bool, result: AuditResult, order: dict,
                retry_failed: bool = False, failed: list | None = None) -> Iterator[Variant]:
    """The variants the store does not hold for ``tc`` (looked up a chunk at a time, as the stream goes); stored
    records (and their cubins) go straight into ``result``, the failed ones also into ``failed``."""
    for batch in _chunks(variants):
        for v in batch:
            order.setdefault(_base(v), len(order))
        if store is None:
            yield from batch
            continue
        cached, todo = store.lookup(batch, tc, with_sass=with_sass, retry_failed=retry_failed)
        if failed is not None:
            failed.extend(r for r in cached if not r.ok)
        result.records.extend(cached)
        for rec in cached:
            data = store.cubin(rec.cubin_sha256) if rec.cubin_sha256 else None
            if data is not None:
                result.cubins[rec.cubin_sha256] = data
        result.landed(cached)
        yield from todo


def _base(v: Variant) -> tuple:
    return _order_key(v.probe_path, v.probe_name, v.case_dict, v.hints_dict, v.arch)


def _mark_determinism(records: list[VariantRecord], repeats: dict[tuple, list[str]], build: str) -> None:
    """Attach the distinct code hashes of the repeated compiles to each ok record of compiler ``build``."""
    for r in records:
        if r.ok and r.tileiras == build:
            hashes = repeats.get(_order_key(r.probe, r.kernel, r.case, r.hints, r.arch), [])
            r.code_hashes = sorted(set(hashes) | {r.code_sha256})
            r.deterministic = len(r.code_hashes) == 1


def _order_key(probe: str, kernel: str, case: dict, hints: dict, arch: str) -> tuple:
    return (probe, kernel, value_key(case), value_key(hints), arch)

"""``tileprobe bisect``: the first published tileiras release where a property of one variant changed.

    tileprobe bisect examples/w4a16_gemm.py --arch sm_120 --where "GATHER=True,LOOP=True,occupancy=2" \\
        --property "occupancy honoured" --good 13.3.36 --bad 13.4.92

The candidates are the published ``nvidia-cuda-tileiras`` releases from GOOD to BAD (the registry's list is the
truth; see :func:`tileprobe.toolchain.published_versions`). Each step installs the release as a managed toolchain
if needed, audits the selected case with every hint value (a verdict compares values), and evaluates the property
with the gate's expectation language (:func:`tileprobe.analyses.gate.parse_expectation`). Binary search assumes the property
changes once between GOOD and BAD; every step is reported (``on_step``) so a non-monotonic history is visible.

Properties on status find where a failure began or ended: ``compiles``, ``no crash`` (e.g. the release
where cutile-python #94's tileiras SIGSEGV became an error: 13.4.59), and, from GPU runs stored in ``--store``,
``no hang`` and ``correct``. A step whose property cannot be checked (no stored run for that release) stops the
bisection with what to run.

Python API: :func:`bisect` (what ``tileprobe bisect`` runs) returns a :class:`BisectResult`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tileprobe.analyses.results import BisectResult, Step
from tileprobe.errors import TileprobeError
from tileprobe.records import SassFacts

# Imports inside functions here are lazy on purpose: at the module head they would add 0.22 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def candidates(published: Sequence[str], good: str, bad: str) -> list[str]:
    """Published releases from ``good`` to ``bad`` inclusive, in release order (either direction of time)."""
    from tileprobe.toolchain import _sort_key, match_version
    good, bad = match_version(good, published), match_version(bad, published)
    ordered = sorted(published, key=_sort_key)
    i, j = ordered.index(good), ordered.index(bad)
    return ordered[i:j + 1] if i <= j else list(reversed(ordered[j:i + 1]))


def bisect_versions(versions: Sequence[str], evaluate: Callable[[str], Step],
                    on_step: Callable[[Step], None] | None = None) -> BisectResult:
    """Binary search over ``versions`` (GOOD first, BAD last) with ``evaluate(version) -> Step``.

    Raises:
        TileprobeError: the property has the same value at GOOD and BAD (nothing to bisect).
    """
    steps: list[Step] = []

    def run(v):
        s = evaluate(v)
        steps.append(s)
        if on_step:
            on_step(s)
        return s

    first, last = run(versions[0]), run(versions[-1])
    if first.holds == last.holds:
        hint = ""
        if first.summary != last.summary and not first.holds:
            hint = (" The variant differs between the ends: if a failure changed (e.g. a crash became an error), "
                    "bisect a status property such as --property \"no crash\" or \"compiles\".")
        raise TileprobeError(f"the property is {'true' if first.holds else 'false'} at both {versions[0]} "
                             f"({first.summary}) and {versions[-1]} ({last.summary}): nothing to bisect. Check "
                             f"--good/--bad and --where.{hint}")
    lo, hi = 0, len(versions) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if run(versions[mid]).holds == first.holds:
            lo = mid
        else:
            hi = mid
    return BisectResult(steps, versions[lo], versions[hi], "")


def make_evaluator(probe: str, arch: str, where: dict, prop: str, jobs: int | None = None,
                   store=None, install: bool = False) -> Callable[[str], Step]:
    """An ``evaluate(version)`` that audits the selected case with that tileiras and checks ``prop``; with
    ``store`` (a :class:`~tileprobe.store.Store`) compiles are reused and saved and the stored GPU runs are attached
    (what ``no hang`` and ``correct`` need).

    ``evaluate`` raises TileprobeError when the property cannot be checked at a release (no stored run)."""
    from tileprobe.analyses.gate import _check_where_names, check, parse_expectation, select
    from tileprobe.audit.selected import audit_selected
    from tileprobe.errors import ProbeError
    from tileprobe.probe.contained import load_plans
    from tileprobe.toolchain import NVCC_PKG, NVVM_PKG, TILEIRAS_PKG, resolve_toolchain
    parse_expectation(prop)  # fail early on a malformed property
    plans, errors = load_plans([probe], [arch])    # probe code runs contained, never in this process
    if not plans:
        raise ProbeError(errors[0] if errors else f"{probe}: no probe loaded")
    _check_where_names(where, plans)  # and on a --where naming nothing

    def evaluate(version: str) -> Step:
        tc = resolve_toolchain(version, auto_install=install)
        result = audit_selected(probe, arch, where=where, toolchains=[tc], jobs=jobs, store=store)
        chosen = select(result.records, where)
        if not chosen:
            from tileprobe.select import no_match_message
            raise TileprobeError(f"{probe}: {no_match_message(where, result.records)}")
        failures = check(chosen, [prop])
        unchecked = [f for f in failures if f.unchecked]
        if unchecked:
            raise TileprobeError(f"cannot check {prop!r} at tileiras {version}: {unchecked[0]}. Runs come from the "
                                 "store (--store): run the variant with that compiler first, or bisect a compile "
                                 "property (compiles, no crash)")
        summary = "; ".join(_summary(r) for r in chosen)
        parts = {"tileiras": tc.pins.get(TILEIRAS_PKG, tc.version), "ptxas": tc.pins.get(NVCC_PKG),
                 "nvvm": tc.pins.get(NVVM_PKG), "bytecode": bytecode_of(chosen)}
        noisy = [r for r in chosen if r.deterministic is False]
        warn = [f"{len(r.code_hashes)} different machine codes over repeated compiles of {r.kernel} "
                f"{', '.join(f'{k}={v}' for k, v in {**r.case, **r.hints}.items())}: this release is not "
                "deterministic for the variant, one compile may not represent it" for r in noisy]
        return Step(version, not failures, summary, [str(f) for f in failures],
                    measured="; ".join(dict.fromkeys(measured(prop, r) for r in chosen)), parts=parts, warnings=warn)

    return evaluate


def bytecode_of(records) -> str:
    """The bytecode the selected records were compiled from: ``"13.3 87a54901a5c5"`` (version, then the first 12
    hex digits of each distinct sha256), ``""`` when they carry none (failed before tileiras ran, or older)."""
    seen = dict.fromkeys((r.bytecode, r.bytecode_sha256[:12]) for r in records if r.bytecode_sha256)
    return "; ".join(f"{v} {h}" for v, h in seen)


def bytecode_verdict(steps: Sequence[Step], fixed: bool) -> str:
    """What the steps' bytecode says of the change (``""`` when a step carries none): the same bytes at every step
    (the change is the compiler's), or different bytes (then a change may be in what cuTile wrote for each release's
    bytecode version; ``fixed``: whether ``--fixed-bytecode`` was asked, which should have held it)."""
    seen = [s.parts.get("bytecode", "") for s in steps]
    if not seen or not all(seen):
        return ""
    if len(set(seen)) == 1:
        return (f"same bytecode at every step ({seen[0]}){', fixed' if fixed else ''}: what changed is tileiras', "
                "not the bytecode cuTile wrote")
    distinct = ", ".join(dict.fromkeys(seen))
    if fixed:
        return f"the bytecode differed between steps although it was fixed ({distinct}): cuTile's output is not stable"
    return (f"the bytecode differed between steps ({distinct}): each release was given the newest bytecode it reads, "
            "so a change may be in the bytecode, not tileiras; bisect with --fixed-bytecode to hold it fixed")


def measured(prop: str, r) -> str:
    """The value ``prop`` is about, as measured on ``r`` (a step says what it measured): the spill counts
    and stack for ``no spills``, the field for ``registers<=128``, the verdict for ``occupancy honoured``, the
    status for ``compiles`` / ``no crash``, the run status for ``no hang`` / ``correct``."""
    from tileprobe.analyses.gate import parse_expectation
    e = parse_expectation(prop)
    if e.kind in ("no_hang", "correct"):
        return f"run {(r.run.status if r.run else None) or 'none'}"
    if not r.ok or e.kind in ("compiles", "no_crash"):
        return "compiled" if r.ok else (r.failure or r.status)
    if e.kind == "no_spills":
        sass = r.sass or SassFacts()
        counts = (f"{sass.spill_loads} LDL/{sass.spill_stores} STL, " if "spill_loads" in sass else "")
        return f"{counts}{r.stack_bytes or 0:,} B stack"
    if e.kind in ("verdict", "took_effect", "not_ignored"):
        return f"{e.field} {r.verdict_status(e.field, 'no verdict')}"
    if e.field:
        value = getattr(r, e.field, None)
        return f"{e.field} {value:,}" if isinstance(value, int) else f"{e.field} {value}"
    return ""


def _summary(r) -> str:
    if not r.ok:
        first = next((ln.strip() for ln in (r.message or r.error or "").splitlines() if ln.strip()), "")
        return f"{r.failure or r.status}" + (f": {first[:120]}" if first else "")
    v = ", ".join(f"{h} {x.status}" for h, x in r.verdicts.items())
    run = f", run {r.run.status}" if r.run and r.run.status else ""
    return (f"{r.threads} threads × {r.registers} regs, {r.shared_bytes:,} B, "
            f"{r.ctas_per_sm} CTA{'' if r.ctas_per_sm == 1 else 's'}/SM, {v}{run}")


def bisect(probe: str, *, arch: str, where: str | Mapping[str, Any], prop: str, good: str, bad: str,
           jobs: int | None = None, on_versions: Callable[[list[str]], None] | None = None,
           on_step: Callable[[Step], None] | None = None, store=None, install: bool = False,
           fixed_bytecode: bool = False) -> BisectResult:
    """``tileprobe bisect``: the first published tileiras release between ``good`` and ``bad`` where ``prop``
    changed for the variants of ``probe`` selected by ``where`` on ``arch`` (see module doc).

    Args:
        where: ``"GATHER=True,occupancy=2"`` or a dict (case constants and hint values).
        prop: an expectation in ``tileprobe gate --expect`` form, e.g. ``"occupancy honoured"``, or a status
            property: ``"compiles"``, ``"no crash"``, ``"no hang"``, ``"correct"`` (the last two need ``store``).
        good, bad: releases (``13.3.36``, or ``13.3`` for its newest patch) where the property has its old and
            its new value.
        on_versions: called once with the candidate releases (GOOD first) before any audit.
        on_step: called after each step (the release, whether the property held, a summary).
        store: a :class:`~tileprobe.store.Store`: compiles reused and saved; its GPU runs attached to the records.
        install: download and install the releases in between that are not installed here (else, when some are
            missing, nothing is downloaded and :class:`~tileprobe.toolchain.ReleasesNotInstalled` says which).
        fixed_bytecode: every step compiles the same bytecode, the version the oldest candidate reads
            (:func:`tileprobe._cutile.fixed_bytecode`); each step's ``parts["bytecode"]`` names it either way
            (:func:`bytecode_verdict` reads them).

    Raises:
        ToolchainError: the registry cannot be reached, or a release is not published or cannot be installed.
        GateError: a malformed ``prop`` or ``where``. TileprobeError: ``where`` matches no variant, or the
            property has the same value at GOOD and BAD.
    """
    from tileprobe.analyses.gate import parse_where
    from tileprobe.toolchain import published_versions, require_installed
    versions = candidates(published_versions(), good, bad)
    require_installed(versions, install)
    if on_versions:
        on_versions(versions)
    selection = parse_where(where) if isinstance(where, str) else dict(where or {})
    import contextlib

    from tileprobe import _cutile
    with _cutile.fixed_bytecode(versions) if fixed_bytecode else contextlib.nullcontext():
        res = bisect_versions(versions, make_evaluator(probe, arch, selection, prop, jobs, store=store,
                                                       install=install), on_step)
    res.prop, res.versions = prop, versions
    return res

"""``tileprobe bisect`` by measured time, split across machines.

The CPU side (:func:`prepare_bundle`, ``tileprobe bisect PROBE --arch sm_90 --where … --good A --bad B
--bundle-out DIR``) compiles the chosen variant(s) with EVERY published tileiras release from GOOD to BAD that lists
the target in ``tileiras --help`` (13.1 and 13.2 do not list sm_90: they are skipped, and the bundle says so) and
writes ONE bundle: ``audit.json`` (records keyed by release) with a ``bisect`` block in its environment (good, bad,
arch, where, the releases in order, the skipped ones) and the cubins.

The GPU side (:func:`bisect_bundle`, ``tileprobe bisect --bundle DIR PROBE --property "time within 5%"``) runs
every release of the bundle, interleaved (:func:`tileprobe.run.session.interleave_releases`: the release that goes
first rotates), in ``rounds`` rounds whose samples are pooled, and checks the property of every release against
the GOOD release's run. Timing every release is cheap next to compiling them, so the GPU side measures them ALL
instead of binary-searching: a history that moves twice is then visible, and the answer needs no monotonicity.
The first release (in release order from GOOD) where the property does not hold is named; when none fails:
"nothing moved beyond noise".

Run properties (:func:`parse_run_property`):

==========================  =================================================================================
``time within N%``          the median within N % of GOOD's, or the difference not significant (Welch t-test,
                            :mod:`tileprobe.analyses.noise`): it fails only when significant AND > N %
``no slower`` /              not slower than GOOD beyond noise (significant and ≥ 2 %)
``time no slower than good``
``no hang``                  the run did not hang (nor the compile time out)
``correct``                  the run checked correct (status ok)
==========================  =================================================================================

One machine with both tileiras and a GPU does both in one command (:func:`bisect_here`).
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tileprobe.analyses.noise import MIN_EFFECT, TimeStats, time_change
from tileprobe.analyses.results import ReleaseStep, TimeBisectResult
from tileprobe.errors import TileprobeError
from tileprobe.jsonrecord import FieldError, from_dict, to_dict
from tileprobe.schema import VariantRecord, VariantRun, p_text

# Imports inside functions here are lazy on purpose: at the module head they would add 0.51 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

_WITHIN = re.compile(r"^(?:time|median)\s+within\s+(\d+(?:\.\d+)?)\s*%(?:\s+of\s+(?:the\s+)?good(?:\s+release)?)?$")
_NO_SLOWER = re.compile(r"^(?:time\s+)?no\s+slower(?:\s+than\s+(?:the\s+)?good(?:\s+release)?)?"
                        r"(?:\s+beyond\s+noise)?$")
#: Default rounds of the GPU side: the interleaved sweep is repeated and the samples pooled.
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class RunProperty:
    """A property of a release's GPU run: ``kind`` (``within`` | ``no_slower`` | ``no_hang`` | ``correct``), the
    allowed change in % (``within``) and the text given."""
    kind: str
    pct: float = 0.0
    text: str = ""

    def check(self, good: VariantRecord | None, r: VariantRecord) -> tuple[bool, str]:
        """(whether the property holds for ``r``, a summary: time, ratio to GOOD, p) — ``good`` is GOOD's record of
        the same variant."""
        run = r.run or VariantRun()
        st = run.status or ("not run" if r.ok else (r.failure or r.status))
        if self.kind == "no_hang":
            return st != "hang" and r.failure != "timeout", _time_summary(good, r)
        if self.kind == "correct":
            return st == "ok", _time_summary(good, r)
        if st != "ok":
            return False, f"{st}: no time"
        if good is None or (good.run or VariantRun()).status != "ok":
            return True, _time_summary(None, r)
        tc = time_change(good.run, run, min_effect=self.pct / 100 if self.kind == "within" else MIN_EFFECT)
        if tc is None:
            return True, _time_summary(good, r)
        if self.kind == "within":
            return not tc.changed, _time_summary(good, r)
        return not (tc.changed and tc.direction == "slower"), _time_summary(good, r)


def parse_run_property(text: str) -> RunProperty | None:
    """The run property ``text`` names (module doc), or None when it is not one (then it is a static property of
    the gate's expectation language)."""
    low = " ".join(str(text).lower().split())
    m = _WITHIN.match(low)
    if m:
        return RunProperty("within", float(m.group(1)), text)
    if _NO_SLOWER.match(low):
        return RunProperty("no_slower", MIN_EFFECT * 100, text)
    if low in ("no hang", "no hangs"):
        return RunProperty("no_hang", 0.0, text)
    if low == "correct":
        return RunProperty("correct", 0.0, text)
    return None


def _time_summary(good: VariantRecord | None, r: VariantRecord) -> str:
    run = r.run or VariantRun()
    if run.status != "ok":
        return run.status or (r.failure or r.status if not r.ok else "not run")
    st = TimeStats.of(run)
    t = f"{st.median_us:,.1f} ± {st.ci95_us():,.1f} µs" if st else f"{run.median_us} µs"
    tc = time_change(good.run, run) if good is not None and good is not r else None
    if tc is None:
        return t
    return f"{t} ({tc.ratio:.3f}× good, {p_text(tc.p)})"


def release_of(build: str) -> str:
    """``13.4.92`` of a tileiras build string (``Cuda compilation tools, release 13.4, V13.4.92``)."""
    m = re.search(r"V(\d+\.\d+\.\d+)", build or "")
    return m.group(1) if m else build


# --- the CPU side ----------------------------------------------------------------------------------------------

def releases_for_target(versions: Sequence[str], arch: str, targets_of: Callable[[str], list[str]]
                        ) -> tuple[list[str], dict[str, str]]:
    """(the ``versions`` whose tileiras lists ``arch``, {skipped version: why}); ``targets_of(version)`` gives a
    release's ``--help`` target list (empty: unknown, kept)."""
    from tileprobe.model.arch import get_arch
    want = get_arch(arch).name
    keep, skipped = [], {}
    for v in versions:
        targets = targets_of(v)
        if targets and want not in targets:
            skipped[v] = f"tileiras {v} does not list {want} in --help ({', '.join(targets)})"
        else:
            keep.append(v)
    return keep, skipped


def prepare_bundle(probe: str, out_dir: str, *, arch: str, where: Mapping[str, Any], good: str, bad: str,
                   jobs: int | None = None, store=None, on_versions: Callable[[list[str], dict], None] | None = None,
                   install: bool = False) -> tuple[list[str], dict[str, str], int]:
    """The CPU side: compile the variants of ``probe`` selected by ``where`` on ``arch`` with every published
    release from ``good`` to ``bad`` that lists ``arch`` (installed as managed toolchains when missing, with
    ``install`` only) and write one bundle to ``out_dir`` holding only the selected variants (module doc).

    Returns (the releases compiled, in order; {skipped release: why}; the bundle's bytes).

    Raises:
        ToolchainError: the registry cannot be reached or a release cannot be installed;
            :class:`~tileprobe.toolchain.ReleasesNotInstalled` before anything is downloaded when some are not
            installed and ``install`` is False. TileprobeError:
            ``where`` selects nothing, fewer than two releases can compile ``arch``.
    """
    from tileprobe.analyses.bisect import candidates
    from tileprobe.analyses.gate import select
    from tileprobe.audit.pipeline import AuditResult, write_bundle
    from tileprobe.audit.selected import audit_selected
    from tileprobe.toolchain import published_versions, require_installed, resolve_toolchains, tileiras_targets
    versions = candidates(published_versions(), good, bad)
    require_installed(versions, install)
    tcs = {v: resolve_toolchains([v], auto_install=install)[0] for v in versions}
    keep, skipped = releases_for_target(versions, arch, lambda v: tileiras_targets(tcs[v].tileiras))
    if on_versions:
        on_versions(keep, skipped)
    if len(keep) < 2:
        raise TileprobeError(f"only {keep or 'no release'} of {versions} can compile {arch}: nothing to bisect "
                             f"({'; '.join(skipped.values())})")
    result = audit_selected(probe, arch, where=where, toolchains=[tcs[v] for v in keep], jobs=jobs, store=store)
    chosen = select(result.records, where)
    if not chosen:
        from tileprobe.select import WhereError, no_match_message
        raise WhereError(f"{probe}: {no_match_message(dict(where), result.records)}")
    plan = BundleBisect(keep[0], keep[-1], arch, {k: str(v) for k, v in where.items()}, keep, skipped)
    env = dict(result.environment, bisect=to_dict(plan))
    cubins = {r.cubin_sha256: result.cubins[r.cubin_sha256] for r in chosen
              if r.cubin_sha256 and r.cubin_sha256 in result.cubins}
    write_bundle(out_dir, AuditResult(records=chosen, environment=env, cubins=cubins))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out_dir) for f in fs)
    return keep, skipped, size


# --- the GPU side ----------------------------------------------------------------------------------------------

def evaluate_releases(records: Sequence[VariantRecord], prop: RunProperty, order: Sequence[str] | None = None
                      ) -> TimeBisectResult:
    """Check ``prop`` for every release's run records against the first release's (GOOD); ``order``: the releases
    in order (default: by version). Pure: the CPU tests call it on recorded runs.

    Raises:
        TileprobeError: fewer than two releases among ``records``.
    """
    from tileprobe.analyses.compare import match_key
    from tileprobe.toolchain import _sort_key
    by_release: dict[str, dict[tuple, VariantRecord]] = {}
    for r in records:
        by_release.setdefault(release_of(r.tileiras), {})[match_key(r)] = r
    versions = [v for v in (order or sorted(by_release, key=_sort_key)) if v in by_release]
    if len(versions) < 2:
        raise TileprobeError(f"need runs of at least two releases to bisect, found {versions}")
    good = by_release[versions[0]]
    steps, first_bad, last_good = [], None, None
    for v in versions:
        holds, parts = True, []
        for key, r in by_release[v].items():
            ok, text = prop.check(good.get(key), r)
            holds = holds and ok
            parts.append(text if len(by_release[v]) == 1 else f"{_short_label(r)}: {text}")
        steps.append(ReleaseStep(v, holds, "; ".join(parts)))
        if first_bad is None:
            if holds:
                last_good = v
            else:
                first_bad = v
    return TimeBisectResult(steps, first_bad, last_good, prop.text)


def _short_label(r: VariantRecord) -> str:
    return " ".join(f"{k}={v}" for k, v in [*r.case.items(), *r.hints.items()]) or r.kernel


def bisect_bundle(bundle: str, probes: Sequence[str], prop: str, *, rounds: int = DEFAULT_ROUNDS,
                  reps: int | None = None, timeout_s: float | None = None,
                  progress: Callable[[int, int, VariantRecord], None] | None = None,
                  on_gpu: Callable[[dict], None] | None = None) -> TimeBisectResult:
    """The GPU side: run every release of ``bundle`` (from :func:`prepare_bundle`) ``rounds`` times, interleaved,
    pool each variant's samples over the rounds, and check ``prop`` (module doc). ``probes``: the probe files to
    import code from (a bundle is data).

    Raises:
        TileprobeError: ``prop`` is not a run property, a malformed bundle, no probe files; WorkerStartError: no GPU.
    """
    from tileprobe.run.session import interleave_releases, load_bundle, run_probes
    from tileprobe.run.watchdog import DEFAULT_TIMEOUT_S, Watchdog
    p = parse_run_property(prop)
    if p is None:
        raise TileprobeError(f"--property {prop!r} with --bundle: give a run property: \"time within 5%\", "
                             "\"no slower\", \"no hang\" or \"correct\" (static properties need no GPU: bisect "
                             "them where tileiras is)")
    if not probes:
        raise TileprobeError(f"--bundle {bundle}: name its probe file too (a bundle is data: probe code is imported "
                             "only from files given on the command line)")
    records, env, cubins = load_bundle(bundle)
    names = {os.path.basename(x) for x in probes}
    records = [r for r in records if os.path.basename(r.probe) in names]
    info = BundleBisect.of(env, bundle)
    pooled: dict[int, list[VariantRun]] = {id(r): [] for r in records}
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    with Watchdog(timeout_s=timeout) as wd:
        for k in range(rounds):
            order = interleave_releases(records, offset=k)
            res = run_probes(order, cubins, probe_paths=probes, timeout_s=timeout, reps=reps, watchdog=wd,
                             environment=env, trust_recorded=False, progress=progress)
            if k == 0 and on_gpu:
                on_gpu(res.environment.get("gpu") or {})
            for r in order:
                if r.run:
                    pooled[id(r)].append(r.run)
            env = res.environment
            if res.aborted:
                break
    for r in records:
        if pooled[id(r)]:
            r.run = pool_runs(pooled[id(r)])
    out = evaluate_releases(records, p, info.releases)
    out.skipped, out.rounds, out.environment = dict(info.skipped or {}), rounds, env
    return out


@dataclass
class BundleBisect:
    """What ``bisect --bundle-out`` writes into its bundle's environment (``bisect``) for the GPU side: the good and
    bad releases, the arch, the ``--where`` values (as text), the releases compiled (in order) and those skipped,
    with why. A bundle that ``audit --bundle`` wrote has none (every field None)."""
    good: Any = None
    bad: Any = None
    arch: Any = None
    where: dict[str, Any] | None = None
    releases: list[Any] | None = None
    skipped: dict[str, Any] | None = None

    @classmethod
    def of(cls, environment: Mapping, bundle: str) -> BundleBisect:
        """The ``bisect`` block of a bundle's environment (empty when it has none).

        Raises:
            TileprobeError: the block is no object, or its releases no list or its skipped releases no object
            (named with the bundle and the field, with the fix)."""
        block = environment.get("bisect")
        try:
            return cls() if not block else from_dict(cls, block, where=f"{bundle}: environment")
        except FieldError as e:
            raise TileprobeError(f"{e}; make the bundle again with `tileprobe bisect --bundle-out DIR`") from None


def pool_runs(runs: Sequence[VariantRun]) -> VariantRun:
    """One run record from several rounds of one variant: the worst status (hang, crash, error, wrong before ok),
    the samples pooled and the statistics recomputed over them (:func:`tileprobe.run.timing.summarize`), the
    first round's other fields. A single run is returned as is."""
    from tileprobe.analyses.compare import RUN_RANK
    from tileprobe.run.timing import sample_fields, summarize
    if len(runs) == 1:
        return runs[0].replace()
    worst = min(runs, key=lambda x: RUN_RANK.get(x.status or "", 1))
    if worst.status != "ok":
        return worst.replace(rounds=len(runs))
    samples = [s for x in runs for s in (x.samples_us or [])]
    out = runs[0].replace(rounds=len(runs))
    if len(samples) >= 2:
        stats = {k: v for k, v in summarize(samples).to_dict().items() if k != "max_us"}
        out = out.replace(**stats, **sample_fields(samples))
    return out

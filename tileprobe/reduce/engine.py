"""``tileprobe reduce``: from a probe whose variant has a property to the smallest kernel that still has it.

    tileprobe reduce examples/w4a16_gemm.py --arch sm_120 --where "GATHER=True,LOOP=True,occupancy=2" \\
        --property "occupancy honoured" --good 13.3.36 --bad 13.4.92 -o reduced/

Steps: (1) check the property on the probe as it is (bad input is an error before anything is reduced, with the
audit line that shows why); (2) fold the variant: its case values and constexpr switches into the source, helpers
inlined, dead code out (kept only if the property still holds); (3) rounds of candidates
(:mod:`tileprobe.reduce.passes`), checked in batches of ``batch`` in the contained compile pool, the first
interesting candidate that is smaller kept, until a round keeps nothing or ``budget_s`` runs out; (4) "what
matters": each construct of the result changed once more on its own; (5) tidy: values read once written into
the line that reads them (one check, kept if the property holds); (6) the written files
(:mod:`tileprobe.reduce.output`).

An edit that fails once (a candidate's ``key``: the pass and the text it changed) is neither built nor tried again
in later rounds unless a round finds nothing (then one last full round); answers and the smallest kernel so far
are journalled in ``OUT/reduce-state.json`` (:mod:`tileprobe.reduce.journal`) after every batch, so a stopped
reduction started again with the same arguments goes on from there.

Python API: :func:`reduce` returns a :class:`Reduction`.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tileprobe.bytecode_reuse import REUSE_ENV, reused_count
from tileprobe.cachefile import read_cache_bytes
from tileprobe.errors import NO_OUTPUT, ProbeError, TileprobeError
from tileprobe.reduce.clean import clean
from tileprobe.reduce.fold import fold_args, fold_constexprs, fold_variant, inline_single_use, propagate_copies
from tileprobe.reduce.inline import inline_helpers
from tileprobe.reduce.journal import Journal
from tileprobe.reduce.journal import load as load_journal
from tileprobe.reduce.oracle import Oracle, Outcome
from tileprobe.reduce.output import write_file
from tileprobe.reduce.passes import Candidate, candidates
from tileprobe.reduce.prop import Property, parse_property
from tileprobe.reduce.source import Size, digest, parse, parts, size

#: Largest probe file reduce reads (bytes): far above any kernel file; a bigger one, a FIFO or a device is refused.
MAX_PROBE_BYTES = 256 << 20
STATE = "reduce-state.json"


class ReduceInputError(TileprobeError):
    """The reduction cannot start: the property does not hold on the probe as given (or holds under both
    compilers), a release is unknown; the message has the audit line that shows why."""


@dataclass
class Need:
    """One construct of the reduced kernel and what changing it alone did: ``needed`` (the property is lost),
    ``not_needed`` (still holds: a construct the rounds could not remove with the others) or ``rejected`` (cuTile or
    the compiler refused the kernel without it: it cannot be told apart)."""
    construct: str
    change: str
    verdict: str
    line: str


@dataclass(frozen=True)
class Resumed:
    """What a resumed reduction goes on from (its ``progress("resumed", …)`` at the start): the journal's path,
    the candidates compiled, wall seconds and steps kept by the runs before."""
    journal: str
    candidates: int
    wall_s: float
    kept: int


@dataclass
class Reduction:
    """What a reduction did. ``source``: the reduced probe module; ``original_size`` / ``final_size``;
    ``candidates``: candidates audited (identical ones once); ``kept``: the steps kept, in order; ``needs``;
    ``removed``: ``ct.*`` calls of the folded kernel that the result no longer has (not needed);
    ``stopped_by_budget``: the budget ran out (the result is the smallest so far); ``resumed``: it went on from a
    journal (``earlier_candidates``, ``earlier_wall_s``: what the runs before it cost); ``wall_s`` (this run);
    ``start``: the outcome on the original probe (the audit lines); ``reused``: compiles (variant × compiler)
    answered from an equal bytecode's compile without running tileiras."""
    source: str
    original_size: Size
    final_size: Size
    candidates: int
    kept: list[str]
    needs: list[Need]
    removed: list[str]
    stopped_by_budget: bool
    resumed: bool
    wall_s: float
    start: Outcome
    final: Outcome
    versions: list[str] = field(default_factory=list)
    needle: str = ""     # the failure signature kept (failure properties), else ""
    earlier_candidates: int = 0     # resumed: candidates compiled by the runs before this one
    earlier_wall_s: float = 0.0     # resumed: their wall seconds
    reused: int = 0                 # compiles answered from an equal bytecode's compile (no tileiras run)


def _order(src: str) -> tuple:
    s = size(src)
    consts = sum(abs(n.value) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant)
                 and type(n.value) is int)
    return (s.tokens, s.lines, consts)


def reduce(probe: str, *, arch: str, where: Mapping[str, Any], prop: str | Property, toolchains: list,
           regression: bool, out_dir: str, budget_s: float | None = None, jobs: int | None = None, store=None,
           batch: int | None = None, compile_timeout_s: float = 300.0,
           progress: Callable[[str, Any], None] | None = None) -> Reduction:
    """Reduce ``probe``'s kernel to the smallest one whose variant still has ``prop`` (module doc).

    Args:
        where: the variant: case constants and hint values (``{"GATHER": True, "occupancy": 2}``).
        prop: a ``--property`` (:func:`tileprobe.reduce.prop.parse_property`).
        toolchains: one (property under it) or two, good then bad (``regression``: the property's value differs
            between them as it does on the probe: kept on every candidate).
        out_dir: where the journal lives (and the caller writes the outputs).
        budget_s: wall seconds, counted from the end of the check of the probe as given (not cut; its time is the
            "start" event's ``check_s``), after which the smallest kernel so far is returned (``stopped_by_budget``).
        batch: candidates audited at once (default: twice the CPUs, at least 4).
        compile_timeout_s: per-variant compile limit; a candidate that hangs the compiler is one that times out.
        progress: ``progress(event, info)``: "resumed" (a :class:`Resumed`, before "start" when it goes on from a
            journal), "restarted" (the journal's path, when the one there was written for other arguments or under
            another environment, :func:`journal_environment`: it starts afresh), "start", "batch", "kept", "needs",
            "done".

    Compiles whose bytecode equals one already compiled in this reduction (:mod:`tileprobe.bytecode_reuse`: the
    same program from another source text) are answered from that compile without running tileiras
    (``Reduction.reused`` counts them); the loaders and compile workers of every batch fork from one warm cuTile
    import (:func:`tileprobe.probe.zygote.warm_starts`). With ``budget_s``, compiles still running when it runs out
    are stopped (their candidates get no answer and are tried again by a resumed run).

    Raises:
        UsageError: a probe the reducer cannot read (no Probe, kernel not in the file), a malformed property.
        ReduceInputError: the property does not hold on the probe as wanted (module doc).
        JournalError: ``OUT/reduce-state.json`` of these arguments is damaged (:mod:`tileprobe.reduce.journal`).
    """
    from tileprobe.probe.zygote import warm_starts
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("reduce-bytecode") as folder, _reuse_env(folder), warm_starts():
        res = _reduce(probe, arch=arch, where=where, prop=prop, toolchains=toolchains, regression=regression,
                      out_dir=out_dir, budget_s=budget_s, jobs=jobs, store=store, batch=batch,
                      compile_timeout_s=compile_timeout_s, progress=progress)
        res.reused = reused_count(folder)
    return res


@contextlib.contextmanager
def _reuse_env(folder: str) -> Iterator[None]:
    """``$TILEPROBE_BYTECODE_REUSE`` set to ``folder`` inside (the compile workers inherit it), as before after."""
    old = os.environ.get(REUSE_ENV)
    os.environ[REUSE_ENV] = folder
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(REUSE_ENV, None)
        else:
            os.environ[REUSE_ENV] = old


def journal_environment(toolchains: list) -> list:
    """What a journal's answers rest on besides the arguments: tileprobe's and cuda-tile's versions, each compiler
    (release, binary, pinned packages, the hash of its files where known) and the versions of the installed
    ``nvidia-*`` packages (nvdisasm reads the SASS facts; the CUDA runtime). A journal written under another of these
    is not resumed: a reinstall between two runs once made a resumed reduction keep a step whose answer the written
    probe no longer gave (a new user's run, 2026-12-05)."""
    from importlib import metadata

    from tileprobe import _cutile
    from tileprobe._version import __version__
    nvidia = sorted((d.name or "", d.version) for d in metadata.distributions()
                    if (d.name or "").lower().startswith("nvidia-"))
    return [__version__, _cutile.cutile_version(),
            [(tc.version, tc.tileiras, sorted(tc.pins.items()), tc.identity) for tc in toolchains], nvidia]


def _reduce(probe: str, *, arch: str, where: Mapping[str, Any], prop: str | Property, toolchains: list,
           regression: bool, out_dir: str, budget_s: float | None = None, jobs: int | None = None, store=None,
           batch: int | None = None, compile_timeout_s: float = 300.0,
           progress: Callable[[str, Any], None] | None = None) -> Reduction:
    """:func:`reduce` inside its bytecode-reuse folder and warm start."""
    t0 = time.monotonic()
    jr = Journal("")

    def save() -> None:
        if jr.key:
            jr.current, jr.kept, jr.failed, jr.needle = current, kept, sorted(failed), p.needle
            jr.memo = {k: o.judgements for k, o in oracle.memo.items()}
            jr.compiled, jr.wall_s = earlier[0] + oracle.compiled, earlier[1] + time.monotonic() - t0
            write_file(state_path, jr.to_json())
    shown = progress or (lambda e, i: None)

    def say(event: str, info: dict) -> None:
        if event == "save":
            save()
        else:
            shown(event, info)
    p = prop if isinstance(prop, Property) else parse_property(prop)
    data = read_cache_bytes(probe, MAX_PROBE_BYTES)    # never blocks on a FIFO nor reads /dev/zero for ever
    if data is None:
        raise ProbeError(f"{probe}: not a readable regular file of at most {MAX_PROBE_BYTES >> 20} MiB: give the "
                         "probe's .py file")
    original = data.decode("utf-8", errors="replace")
    tree = parse(original, probe)
    pp = parts(tree, probe)
    case_names = _case_names(pp)
    case = {k: v for k, v in where.items() if k in case_names}
    hints = {k: v for k, v in where.items() if k not in case_names}
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise TileprobeError(f"-o {out_dir}: exists and is not a folder: give a new or existing folder for the "
                             "reduced kernel, probe and REPORT.md")
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(out_dir, ".reduce-work")
    os.makedirs(work, exist_ok=True)
    oracle = Oracle(arch, toolchains, p, (True,), hints, work, store=store, jobs=jobs,
                    compile_timeout_s=compile_timeout_s)
    versions = [tc.version for tc in toolchains]
    start_src = ast.unparse(fold_variant(tree, case))
    key = hashlib.sha256(json.dumps([original, arch, sorted(where.items(), key=str), p.text, versions, regression,
                                     journal_environment(toolchains)], default=str).encode()).hexdigest()
    state_path = os.path.join(out_dir, STATE)
    loaded = load_journal(state_path, key)      # a damaged journal stops here, before any compile
    resumed = loaded is not None
    if not resumed and os.path.lexists(state_path):
        shown("restarted", state_path)
    jr = loaded or Journal(key)
    earlier = (jr.compiled, jr.wall_s)          # what the runs before this one cost (a resumed report says it)
    for k, js in jr.memo.items():
        oracle.memo[k] = Outcome(False, js)
    if jr.needle:
        p = oracle.prop = dataclasses.replace(p, needle=jr.needle)
    t_check = time.monotonic()
    first = oracle.check([start_src])[0]
    _no_output(first, [tc.tileiras for tc in toolchains], probe, p)
    oracle.want = _want(first, p, regression, versions, probe)
    if p.failure and not p.needle:   # keep the failure by its signature: the first line of the compiler's message
        p = oracle.prop = dataclasses.replace(p, needle=_signature(first))
        oracle.memo.clear()
        first = oracle.check([start_src])[0]
    oracle.rejudge()
    first = oracle.memo[digest(start_src)]
    if resumed:
        shown("resumed", Resumed(state_path, earlier[0], earlier[1], len(jr.kept)))
    checked = time.monotonic()          # the budget starts here: the check of the probe as given is not cut
    say("start", {"size": size(start_src), "line": first.line(), "check_s": checked - t_check})
    kept: list[str] = list(jr.kept)
    current = jr.current or start_src
    failed: set[str] = set(jr.failed)
    if not resumed:
        try:
            folded = _normalized(start_src)
        except Exception:
            folded = start_src
        if folded != current and oracle.check([folded])[0].interesting:
            current = folded
            kept.append("folded the variant: constexpr switches, helpers inlined, dead code out")
    folded_calls = _ct_calls(current)
    deadline = None if budget_s is None else checked + budget_s
    batch = batch or max(4, 2 * (jobs or os.cpu_count() or 1))   # two per core: an audit call's start-up is shared
    stopped = False
    oracle.deadline = deadline      # compiles still running at the budget's end are stopped (the rounds only)
    while True:
        nxt = _round(current, hints, oracle, batch, failed, deadline, say, kept)
        if nxt is False and failed:     # nothing kept while skipping earlier failures: one full round more
            failed.clear()
            nxt = _round(current, hints, oracle, batch, failed, deadline, say, kept)
        if nxt is None:
            stopped = True
        if not isinstance(nxt, str):
            break
        current = nxt
        save()
    oracle.deadline = None
    save()
    if not stopped:       # tidy: copies the rounds left (`w = x`) propagated, kept if the property still holds
        current = _tidy(current, propagate_copies, oracle, kept, "propagated the copies left by the rounds")
        save()
    needs = [] if stopped else _needs(current, hints, oracle, say)
    if not stopped:       # last, after "what matters" was told on the finer kernel: one line per effect
        current = _tidy(current, inline_single_use, oracle, kept,
                        "wrote values read once into the line that reads them")
    final = oracle.check([current])[0]
    save()
    removed = [c for c in folded_calls if c not in _ct_calls(current)]
    res = Reduction(current, size(start_src), size(current), oracle.compiled, kept, needs, removed, stopped, resumed,
                    time.monotonic() - t0, first, final, versions, p.needle, *earlier)
    import shutil
    shutil.rmtree(work, ignore_errors=True)   # the candidates' files; their answers are in the journal
    say("done", {"reduction": res})
    return res


def _tidy(current: str, how: Callable[[ast.Module], ast.Module], oracle: Oracle, kept: list[str], label: str) -> str:
    """``current`` rewritten by ``how`` (a meaning-keeping tidy: copies propagated, single-use values inlined) and
    cleaned, when that still has the property (one candidate); else ``current``."""
    try:
        tidy = ast.unparse(clean(how(ast.parse(current))))
    except Exception:       # a module the tidy cannot follow stays as it is
        return current
    if tidy != current and oracle.check([tidy])[0].interesting:
        kept.append(label)
        return tidy
    return current


def _case_names(pp) -> set[str]:
    kw = pp.kw("cases")
    if kw is not None and isinstance(kw.value, ast.Dict):
        return {k.value for k in kw.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def _normalized(src: str) -> str:
    t = ast.parse(src)
    return ast.unparse(clean(fold_args(propagate_copies(propagate_copies(fold_constexprs(inline_helpers(t)))))))


def _ct_calls(src: str) -> list[str]:
    from tileprobe.reduce.source import is_ct
    k = parts(ast.parse(src)).kernel
    return list(dict.fromkeys(f"ct.{n.func.attr}" for n in ast.walk(k) if isinstance(n, ast.Call) and is_ct(n.func)))


def _no_output(first: Outcome, compilers: list[str], probe: str, p: Property) -> None:
    """Raise ReduceInputError when a compiler exited 0 without writing its cubin on the probe as given
    (:class:`tileprobe.errors.CompilerWroteNothing`): the compiler's fault, not the property's."""
    for (v, _, line), path in zip(first.judgements, compilers):
        if NO_OUTPUT in line:
            raise ReduceInputError(f"{probe}: the compiler {path} (tileiras {v}) produced no output, so "
                                   f"{p.text!r} cannot be judged: {line}. Check --tileiras (run `tileprobe "
                                   "doctor`); nothing was reduced")


def _want(first: Outcome, p: Property, regression: bool, versions: list[str], probe: str) -> tuple[bool, ...]:
    from tileprobe.reduce.prop import checked
    for v, _, line in first.judgements:
        if not checked(line):
            raise ReduceInputError(f"{probe}: {p.text!r} cannot be checked under tileiras {v}: {line}. Choose a "
                                   "property the audit decides for this variant; nothing was reduced")
    holds = tuple(h for _, h, _ in first.judgements)
    if not regression:
        if not holds[0]:
            raise ReduceInputError(f"{probe}: {p.text!r} does not hold to begin with under tileiras {versions[0]}: "
                                   f"{first.judgements[0][2]}. Check --where, --arch and --property (the line "
                                   "after the colon is the audit of the variant); nothing was reduced")
        return (True,)
    if holds[0] == holds[1]:
        raise ReduceInputError(f"{probe}: {p.text!r} {'holds' if holds[0] else 'does not hold'} under both "
                               f"tileiras {versions[0]} ({first.judgements[0][2]}) and {versions[1]} "
                               f"({first.judgements[1][2]}): no regression to keep. Check --good/--bad, --where "
                               "and --property; nothing was reduced")
    return holds


def _signature(o: Outcome) -> str:
    for _, _, line in o.judgements:
        text = line.split(": ", 1)[-1].strip()
        if text:
            return text[:80]
    return ""


def _round(current: str, hints: dict, oracle: Oracle, batch: int, failed: set, deadline, say, kept) -> str | bool | None:
    """One round: the first interesting smaller candidate (its source), False when none, None when the budget ran
    out."""
    tree = ast.parse(current)
    base = _order(current)
    pending: list[Candidate] = []
    seen: set[str] = set()
    out_of_time = (lambda: False) if deadline is None else (lambda: time.monotonic() >= deadline)
    gen = candidates(tree, hints, skip=failed.__contains__, stop=out_of_time)
    done = False
    while not done:
        pending.clear()
        for c in gen:      # candidates are unparsed already: their text is their identity here (the oracle digests)
            d = hashlib.sha256(c.source.encode()).hexdigest()
            if d in seen or _order(c.source) >= base:
                continue
            seen.add(d)
            pending.append(c)
            if len(pending) >= batch:
                break
        else:
            done = True
        if out_of_time():
            return None
        if not pending:
            return False
        outs = oracle.check([c.source for c in pending])
        say("batch", {"n": len(pending), "compiled": oracle.compiled, "kept": sum(o.interesting for o in outs)})
        say("save", {})
        for c, o in zip(pending, outs):
            if o.interesting:
                kept.append(c.label)
                say("kept", {"label": c.label, "size": size(c.source)})
                return c.source
            if not o.cut:           # stopped at the budget: no answer, tried again when the reduction goes on
                failed.add(c.key)
        if any(o.cut for o in outs):
            return None
    return False


def _needs(current: str, hints: dict, oracle: Oracle, say) -> list[Need]:
    """Each construct of ``current`` changed once on its own (the rounds' own transformations, the constant
    halvings and hint values left out): which lose the property."""
    cands = [c for c in candidates(ast.parse(current), hints, refused=True)
             if c.kind not in ("constant", "hint", "chunk")]
    built = [c for c in cands if c.source]
    outs = dict(zip((id(c) for c in built), oracle.check([c.source for c in built]) if built else []))
    by: dict[str, list[tuple[str, str, str]]] = {}
    for c in cands:
        o = outs.get(id(c))
        if o is None:       # refused by a static check (cuTile would refuse it): not compiled, cannot tell
            by.setdefault(c.construct, []).append(("rejected", c.label, f"not compiled: {c.refusal}"))
            continue
        verdict = "not_needed" if o.interesting else ("needed" if all(_told(line) for _, _, line in o.judgements)
                                                      else "rejected")
        by.setdefault(c.construct, []).append((verdict, c.label, o.line()))
    out: list[Need] = []
    for construct, tries in by.items():     # one line per construct: needed if any change of it lost the property
        for verdict in ("needed", "not_needed", "rejected"):
            hit = [t for t in tries if t[0] == verdict]
            if hit:
                out.append(Need(construct, "; ".join(dict.fromkeys(t[1] for t in hit)), verdict, hit[0][2]))
                break
    say("needs", {"needs": out})
    return out


#: Words of an audit line that mean the candidate failed for another reason than the property (it cannot tell).
_UNTOLD = ("no variant", "compile_error", "probe_error", "unsupported_", "timeout", "broken_environment")


def _told(line: str) -> bool:
    """Whether an audit line answers the property (the candidate compiled, or failed as the property says)."""
    from tileprobe.reduce.prop import checked
    return checked(line) and not any(w in line for w in _UNTOLD)

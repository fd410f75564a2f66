"""What changed between two result sets: two compiler versions in one audit, or two stored/JSON audits or runs.

Variants are matched by (kernel, case, hints, arch). Each pair gets a mark, in the spirit of asv's compare:

====  =========================================================================================================
``!``  regression: a hint's goal met in A (honoured or met) and not in B, fewer CTAs/SM, new stack use (spills), a
       worse compile or run status (:data:`COMPILE_RANK`, :data:`RUN_RANK`: ok → error, error → crash, ok → hang,
       ok → wrong …), slower beyond the measured noise
``*``  improvement: the reverse of any of the above (crash → error, error → ok, hang → ok, wrong → ok …)
``x``  machine code or resources changed, residency and verdicts the same; listed first among these: a switch of
       MMA family or of TMA use (``MMA HMMA → HGMMA, TMA 0 → 33``) and a register cap that moved (PTX ``.maxnreg``)
``=``  same machine code and resources
``?``  only one side has the variant
====  =========================================================================================================

Verdict ranks: honoured = met > partial > ignored > infeasible; a change between honoured and met (the hint now
makes, or no longer makes, the difference), a change to or from ``unverified`` (a rule no driver has checked
decides it: neither better nor worse for certain) and any change of a no-goal status (changed / unchanged / baseline)
is listed as a change, not a regression. A failure is a state like any other: the compile status is
compared by failure class (ok > an answer: compile_error, unsupported_target, unsupported_feature,
broken_environment, probe_error > no answer: timeout, compiler_crash) and the run status likewise (ok > wrong >
error > hang, crash); two classes of one rank (crash ↔ timeout, unsupported_target → compile_error) are a change.
Spills are judged by amount too: when both sides spill, LDL+STL growing by at least
:data:`SPILL_CHANGE` (and :data:`SPILL_MIN` instructions) is a regression — even when CTAs/SM rose (each spill is a
local-memory round trip in the loop; more resident CTAs do not pay for a doubling) — and shrinking as much an
improvement; a smaller move is a change (``spills 172 LDL/94 STL → 180 LDL/94 STL (both spill)``). Each judged
item carries its reason (:attr:`Change.why`). Regressions are listed first, and among them new crashes and hangs
first, then by what costs time: status, run, measured time, spills (most added first), residency, verdicts. Times are compared only when both sides ran
on the same GPU, by the rule of :mod:`tileprobe.analyses.noise`: Welch's t-test on the kept samples (or on n, mean
and stdev) at p < 0.05, and a change of the median of at least 2 %.

Python API: :func:`compare_results` (what ``tileprobe compare`` runs) returns a :class:`Comparison`;
:func:`compare_records` compares two record lists (each :class:`Change` with both sides' times and their noise
test); :func:`compiler_steps` compares consecutive compiler builds of one kernel (the HTML report's "what
changed"). The records are :mod:`tileprobe.analyses.results`'; :mod:`tileprobe.report` renders them.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence

from tileprobe.analyses.noise import TimeStats, time_change
from tileprobe.analyses.results import Change, ChangeGroup, Comparison, CompilerSteps, change_topic, group_changes  # noqa: F401 (API)
from tileprobe.errors import TileprobeError, UsageError
from tileprobe.judge.verdict import judge_records
from tileprobe.records import SassFacts
from tileprobe.schema import VariantRecord, VariantRun, build_order, load, number_text, short_build

# Imports inside functions here are lazy on purpose: at the module head they would add 0.21 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

_RANK = {"regression": 0, "improvement": 1, "changed": 2, "unmatched": 3, "same": 4}
_VERDICT_RANK = {"honoured": 3, "met": 3, "partial": 2, "ignored": 1, "infeasible": 0}
#: Compile states by failure class (``ok`` for a compiled variant): higher is better.
COMPILE_RANK = {"ok": 3, "compile_error": 2, "unsupported_target": 2, "unsupported_feature": 2,
                "broken_environment": 2, "probe_error": 2, "timeout": 1, "compiler_crash": 1}
#: GPU run states (``record.run.status``): higher is better.
RUN_RANK = {"ok": 3, "wrong": 2, "error": 1, "hang": 0, "crash": 0}
#: States that make a regression "new crash or hang" (listed first).
_CRASH_OR_HANG = {"compiler_crash", "timeout", "hang", "crash"}
#: Relative change of LDL+STL instructions (both sides spilling) judged a regression / an improvement.
SPILL_CHANGE = 0.10
#: ... and at least this many LDL+STL instructions added or removed (a handful moves with any code change).
SPILL_MIN = 16
#: Why each kind of judged item costs (or saves) time, shown beside it.
WHY = {
    "spills_new": "new spills: LDL/STL are local-memory round trips, in the main loop for a GEMM",
    "spills_more": "more spills (×N = LDL+STL after ÷ before): more local-memory traffic per tile, a regression "
                   "even where CTAs/SM rose",
    "spills_gone": "no spills left: no local-memory traffic",
    "spills_fewer": "fewer spills: less local-memory traffic",
    "ctas_down": "fewer CTAs/SM: less latency hidden (lost residency)",
    "ctas_up": "more CTAs/SM: more latency hidden",
    "verdict_down": "a hint's goal no longer met",
    "verdict_up": "a hint's goal now met",
    "mma": "MMA family switch (HMMA → HGMMA …): another tensor-core code path; only a GPU run says which is faster",
    "tma": "TMA use appeared or went: tile loads take another path",
    "regcap": "register cap (.maxnreg) moved: the compiler's register budget, which spills and CTAs/SM follow",
}


def match_key(r: VariantRecord) -> tuple:
    """How variants are paired across result sets."""
    return (r.kernel, json.dumps(r.case, sort_keys=True, default=str), json.dumps(r.hints, sort_keys=True, default=str),
            r.arch)


def compare_records(a: list[VariantRecord], b: list[VariantRecord]) -> list[Change]:
    """Pair ``a`` and ``b`` and classify every pair (see module doc). Regressions first."""
    ia = {match_key(r): r for r in a}
    ib = {match_key(r): r for r in b}
    out = []
    for key in list(dict.fromkeys([*ia, *ib])):
        ra, rb = ia.get(key), ib.get(key)
        ch = Change(key, ra, rb, time_a=TimeStats.of(ra.run) if ra is not None else None,
                    time_b=TimeStats.of(rb.run) if rb is not None else None,
                    time=time_change(ra.run, rb.run) if ra is not None and rb is not None else None)
        if ra is None or rb is None:
            ch.kind = "unmatched"
            ch.details.append("only in " + ("A" if rb is None else "B"))
        else:
            _classify(ch, ra, rb)
        out.append(ch)
    out.sort(key=lambda c: (_RANK[c.kind], c.severity, -c.weight))
    return out


def compiler_steps(rows: Sequence[VariantRecord]) -> CompilerSteps:
    """What changed between each pair of consecutive compiler builds of ``rows`` (one kernel's records; builds in
    :func:`~tileprobe.schema.build_order`): :func:`compare_records` of each pair, older build as A. A build none of
    whose variants is audited under another build (no partner: nothing to compare) is left out and named."""
    counts: dict[str, int] = {}
    keys: dict[str, set] = {}
    for r in rows:
        if r.tileiras:
            counts[r.tileiras] = counts.get(r.tileiras, 0) + 1
            keys.setdefault(r.tileiras, set()).add(match_key(r))

    def partnered(b: str) -> bool:   # some variant of b is also audited under another build
        return any(keys[b] & keys[o] for o in keys if o != b)

    builds = sorted((b for b in counts if partnered(b)), key=build_order)
    few = sorted((b for b in counts if not partnered(b)), key=build_order)
    steps = [(old, new, compare_records([r for r in rows if r.tileiras == old], [r for r in rows if r.tileiras == new]))
             for old, new in zip(builds, builds[1:])]
    return CompilerSteps([(b, counts[b]) for b in few], steps)


def compiler_steps_by_kernel(records: Sequence[VariantRecord]) -> dict[tuple[str, str], CompilerSteps]:
    """:func:`compiler_steps` per (kernel, probe file) of ``records``: the sections of the HTML report (two probes
    may name different kernels alike)."""
    groups: dict[tuple[str, str], list[VariantRecord]] = {}
    for r in records:
        groups.setdefault((r.kernel, r.probe), []).append(r)
    return {key: compiler_steps(rows) for key, rows in groups.items()}


def _state(r: VariantRecord) -> str:
    return "ok" if r.ok else (r.failure or r.status)


def _state_change(what: str, sa: str | None, sb: str | None, ranks: dict, worse: list, better: list,
                  changed: list) -> None:
    """File a compile or run state change (``what`` = ``status`` | ``run``) under worse / better / changed."""
    if sa == sb or sa is None or sb is None:
        return
    text = f"{what} {sa} → {sb}"
    ra, rb = ranks.get(sa, 1), ranks.get(sb, 1)
    if rb < ra and sb in _CRASH_OR_HANG:
        text += " (new crash)" if sb in ("compiler_crash", "crash") else " (new hang)"
    (worse if rb < ra else better if rb > ra else changed).append(text)


def _classify(ch: Change, a: VariantRecord, b: VariantRecord) -> None:
    worse: list[str] = []
    better: list[str] = []
    changed: list[str] = []
    why: list[str] = []
    notable: list[str] = []
    _state_change("status", _state(a), _state(b), COMPILE_RANK, worse, better, changed)
    _state_change("run", (a.run or VariantRun()).status, (b.run or VariantRun()).status, RUN_RANK, worse, better,
                  changed)
    if a.ok and b.ok:
        for hint in sorted(set(a.verdicts) | set(b.verdicts)):
            va, vb = a.verdict_status(hint), b.verdict_status(hint)
            if va != vb and va and vb:
                n = len(worse) + len(better)
                _verdict_change(f"{hint} {va} → {vb}", va, vb, worse, better, changed)
                if len(worse) + len(better) > n:
                    _why(why, WHY["verdict_down" if worse and worse[-1].startswith(hint) else "verdict_up"])
        if (a.ctas_per_sm or 0) != (b.ctas_per_sm or 0):
            down = (b.ctas_per_sm or 0) < (a.ctas_per_sm or 0)
            (worse if down else better).append(f"CTAs/SM {a.ctas_per_sm} → {b.ctas_per_sm}")
            _why(why, WHY["ctas_down" if down else "ctas_up"])
        spill = _spill_change(a, b) or _spill_amount_change(a, b)
        if spill:
            (worse if spill[0] == "worse" else better).append(spill[1])
            _why(why, spill[2])
            sa, sb = spill_counts(a), spill_counts(b)
            ch.weight = abs(sum(sb) - sum(sa)) if sa and sb else 0
        elif (ca := spill_counts(a)) is not None and (cb := spill_counts(b)) is not None and ca != cb:
            # both sides spill, in amounts within SPILL_CHANGE: shown, not judged
            changed.append(f"spills {_spill_text(ca)} → {_spill_text(cb)} (both spill)")
        notable = _notable_changes(a, b, why)
        resources: tuple[tuple[str, int | None, int | None], ...] = (
            ("threads", a.threads, b.threads), ("registers", a.registers, b.registers),
            ("shared B", a.shared_bytes, b.shared_bytes)) + (
            (("stack B", a.stack_bytes, b.stack_bytes),) if not spill else ())
        for name, before, after in resources:
            if before != after:
                changed.append(f"{name} {number_text(before)} → {number_text(after)}")
        ia, ib = instruction_count(a), instruction_count(b)
        if ia is not None and ib is not None and ia != ib:
            changed.append(f"instructions {ia:,} → {ib:,} ({ib - ia:+,})")
        ch.families = family_changes(a, b)
        if ch.families:
            changed.append(families_text(ch.families))
        if not a.same_code(b) and not (changed or notable or worse or better):
            changed.append("machine code differs")
        changed[:0] = notable
    t = _time_change(a, b, ch.time)
    if t:
        kind, text = t
        (worse if kind == "slower" else better).append(text)
    ch.details = worse + better + [c for c in changed if c not in worse + better]
    ch.kind = "regression" if worse else "improvement" if better else "changed" if changed else "same"
    ch.severity = _severity(worse or better) if worse or better else (0 if notable else 9)
    ch.why, ch.judged = why, len(worse) + len(better)


def instruction_count(r: VariantRecord) -> int | None:
    """Static SASS instructions of the variant, NOPs excluded (code size; ``SassFacts.instructions``), or None when
    the SASS was not read or the record is older than that count."""
    sass = r.sass or SassFacts()
    n = sass.instructions if "instructions" in sass else None
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else None


def family_changes(a: VariantRecord, b: VariantRecord) -> tuple[tuple[str, int, int], ...]:
    """The instruction families (SASS base opcodes: ``HMMA``, ``LDGSTS``, ``UTMALDG``, ``SHFL``, ``MUFU`` …) in
    one side's code only, as ``(opcode, static count in A, static count in B)`` sorted by opcode; ``()`` when
    either record lacks ``SassFacts.opcodes`` (SASS not read, or a record older than that key)."""
    oa, ob = (r.sass.opcodes if r.sass is not None else None for r in (a, b))
    if not isinstance(oa, dict) or not isinstance(ob, dict):
        return ()
    return tuple((op, int(oa.get(op, 0)), int(ob.get(op, 0))) for op in sorted(set(oa) ^ set(ob)))


def families_text(families: Sequence[tuple[str, int, int]]) -> str:
    """``instruction families +MUFU (3), +I2FP (1), −SHFL (4)``: added ones first, each with its static count."""
    added = [f"+{op} ({nb:,})" for op, na, nb in families if not na]
    dropped = [f"−{op} ({na:,})" for op, na, nb in families if na]
    return "instruction families " + ", ".join(added + dropped)


def spill_counts(r: VariantRecord) -> tuple[int, int] | None:
    """(LDL, STL) instructions in the variant's SASS, or None when the SASS was not read."""
    sass = r.sass or SassFacts()
    if "spill_loads" not in sass or sass.spill_loads is None:
        return None
    return int(sass.spill_loads), int(sass.spill_stores or 0)


def _spill_change(a: VariantRecord, b: VariantRecord) -> tuple[str, str, str] | None:
    """("worse" | "better", text, why) when one side spills and the other does not: from the SASS when both sides have
    it (``spills 0 → 171 LDL/122 STL``), else from the stack frame (``stack 0 → 408 B``, which may also be a local
    array: the SASS says which)."""
    sa, sb = spill_counts(a), spill_counts(b)
    if sa is not None and sb is not None:
        if bool(sum(sa)) == bool(sum(sb)):
            return None
        text = f"spills {_spill_text(sa)} → {_spill_text(sb)}"
        return ("worse", text, WHY["spills_new"]) if sum(sb) else ("better", text, WHY["spills_gone"])
    if bool(a.stack_bytes) == bool(b.stack_bytes):
        return None
    return (("worse" if b.stack_bytes else "better"),
            f"stack {a.stack_bytes} → {b.stack_bytes} B ({'new stack use, SASS not read: spills or a local array' if b.stack_bytes else 'no stack'})",
            WHY["spills_new"] if b.stack_bytes else WHY["spills_gone"])


def _why(why: list[str], text: str) -> None:
    if text not in why:
        why.append(text)


def _spill_amount_change(a: VariantRecord, b: VariantRecord) -> tuple[str, str, str] | None:
    """("worse" | "better", text, why) when both sides spill and LDL+STL moved by at least :data:`SPILL_CHANGE`
    and :data:`SPILL_MIN` instructions: ``spills 3323 LDL/3317 STL → 6640 LDL/6600 STL (×2.0)``."""
    sa, sb = spill_counts(a), spill_counts(b)
    if sa is None or sb is None or not sum(sa) or not sum(sb):
        return None
    na, nb = sum(sa), sum(sb)
    if abs(nb - na) < max(SPILL_MIN, SPILL_CHANGE * na):
        return None
    text = f"spills {_spill_text(sa)} → {_spill_text(sb)} (×{nb / na:.1f})"
    return ("worse", text, WHY["spills_more"]) if nb > na else ("better", text, WHY["spills_fewer"])


def _notable_changes(a: VariantRecord, b: VariantRecord, why: list[str]) -> list[str]:
    """Changes listed first among the unjudged ones: the MMA instruction family (``MMA HMMA → HGMMA``,
    with the TMA count), TMA use appearing or going, and the register cap (PTX ``.maxnreg``)."""
    out = []
    fa, fb = _families(a), _families(b)
    ta, tb = _tma_count(a), _tma_count(b)
    if fa is not None and fb is not None and fa != fb:
        tma = f", TMA {ta} → {tb}" if ta is not None and tb is not None and ta != tb else ""
        out.append(f"MMA {'+'.join(fa) or 'none'} → {'+'.join(fb) or 'none'}{tma}")
        _why(why, WHY["mma"])
    elif ta is not None and tb is not None and bool(ta) != bool(tb):
        out.append(f"TMA {ta} → {tb} instructions")
        _why(why, WHY["tma"])
    ca, cb = (a.ptx.maxnreg if a.ptx else None), (b.ptx.maxnreg if b.ptx else None)
    if (a.ptx and b.ptx) and ca != cb:
        out.append(f"register cap (.maxnreg) {ca or 'none'} → {cb or 'none'}")
        _why(why, WHY["regcap"])
    return out


def _families(r: VariantRecord) -> tuple[str, ...] | None:
    sass = r.sass or SassFacts()
    return tuple(sass.matrix_families or ()) if "matrix_families" in sass else None


def _tma_count(r: VariantRecord) -> int | None:
    sass = r.sass or SassFacts()
    return sum((sass.tma or {}).values()) if "tma" in sass or "has_tma" in sass else None


def _spill_text(counts: tuple[int, int]) -> str:
    return f"{counts[0]} LDL/{counts[1]} STL" if sum(counts) else "0"


def _verdict_change(text: str, va: str, vb: str, worse: list, better: list, changed: list) -> None:
    """File one verdict change under worse / better (ranked statuses that moved) or changed (see module doc)."""
    ra, rb = _VERDICT_RANK.get(va), _VERDICT_RANK.get(vb)
    if ra is None or rb is None or ra == rb:
        changed.append(text)
    else:
        (worse if rb < ra else better).append(text)


def _severity(items: list[str]) -> int:
    """Order within a kind: new crashes and hangs first, then verdict changes, status and run changes, residency,
    time, spills."""
    if any(i.endswith(("(new crash)", "(new hang)")) for i in items):
        return -1
    order = ("status", "run", "time", "spills", "stack", "CTAs/SM")
    best = 9
    for i, word in enumerate(order, start=1):
        if any(item.startswith(word) for item in items):
            best = min(best, i)
    return best


def _time_change(a: VariantRecord, b: VariantRecord, tc):
    """("slower" | "faster", text) when B's time differs from A's beyond noise (``tc``, the pair's
    :func:`~tileprobe.analyses.noise.time_change`: Welch's t-test and a 2 % minimum effect); None when within noise,
    not both ok, or run on different GPUs."""
    ra, rb = a.run or VariantRun(), b.run or VariantRun()
    if ra.status != "ok" or rb.status != "ok" or ra.gpu_name != rb.gpu_name:
        return None
    if ra.shared_gpu or rb.shared_gpu:   # timed beside another worker on one GPU
        return None
    if tc is None or not tc.changed:
        return None
    return tc.direction, tc.text()


def split_by_compiler(records: list[VariantRecord]) -> tuple[list[VariantRecord], list[VariantRecord], str, str]:
    """An audit with two tileiras builds → (A records, B records, A build, B build), in the audit's order."""
    builds = list(dict.fromkeys(r.tileiras for r in records))
    if len(builds) != 2:
        found = f": {', '.join(short_build(b) for b in builds)}" if builds else ""
        raise TileprobeError(f"need exactly two compiler builds to compare, found {len(builds)}{found}. "
                             "Audit with --tileiras A,B or give two result files.")
    return ([r for r in records if r.tileiras == builds[0]], [r for r in records if r.tileiras == builds[1]],
            builds[0], builds[1])


def load_side(spec: str, store_path: str | None = None) -> tuple[list[VariantRecord], str]:
    """One side of a comparison: the records of a result JSON file, or of a stored audit by id
    (``tileprobe history`` lists them), and a name for it.

    Raises:
        TileprobeError: ``spec`` is neither a file nor a stored audit id (or the file is not a result).
        StoreError: the store at ``store_path`` cannot be read.
    """
    if os.path.exists(spec):
        recs, env = load(spec, judge=judge_records)
        builds = env.get("tileiras", [])
        builds = [builds] if isinstance(builds, str) else builds
        if not isinstance(builds, list) or not all(isinstance(b, str) for b in builds):
            raise TileprobeError(f"{spec}: environment.tileiras is {_short(builds)}, not a list of compiler builds "
                                 "(strings); give a file written by `tileprobe audit --json` or `tileprobe run --json`")
        return recs, f"{spec} ({side_text(recs) or ', '.join(short_build(b) for b in builds)})"
    from tileprobe.store import Store
    if not spec.strip().isdigit():
        raise _not_a_side(spec)
    with Store.open(store_path, must_exist=bool(store_path), check=True) as store:
        recs = store.records(audit_id=int(spec), judge=judge_records)
        pruned = store.audit_count(int(spec)).pruned_text(int(spec))
        last = store.last_audit_id()
    if not recs and pruned:
        raise TileprobeError(f"stored audit {spec} holds no variant now: {pruned}; `tileprobe history` lists the "
                             "audits stored")
    if not recs and 0 < int(spec) <= last:
        raise TileprobeError(f"stored audit {spec} is no longer in the store: `tileprobe store prune` removed it "
                             "with its variants; `tileprobe history` lists the audits stored")
    if not recs:
        raise _not_a_side(spec)
    # what a prune took is said, not silently left out of the counts ("1 same" of an audit that had 16)
    return recs, f"stored audit {spec}" + (f" ({len(recs)} compared; {pruned})" if pruned else "")


def side_text(recs: Sequence[VariantRecord]) -> str:
    """The frontends and compilers of one side's records: ``cuda-tile 1.5.0, tileiras 13.3.36`` (``""`` for no
    records; a record without a cuda-tile version, from before it was recorded, adds none)."""
    fronts = sorted({r.cuda_tile for r in recs if r.cuda_tile})
    builds = list(dict.fromkeys(short_build(r.tileiras) for r in recs if r.tileiras))
    return ", ".join([*(f"cuda-tile {v}" for v in fronts), *builds])


def changed_side(a: Sequence[VariantRecord], b: Sequence[VariantRecord]) -> str:
    """Which side of the toolchain differs between A and B: the frontend (cuda-tile, which writes the bytecode),
    the compiler (tileiras), both, or neither, in words (``""`` when a side's records name no cuda-tile version).
    Records name the cuda-tile and tileiras that made them, so this is read from A's and B's records."""
    def parts(recs):
        return ({r.cuda_tile for r in recs if r.cuda_tile}, {short_build(r.tileiras) for r in recs if r.tileiras})
    (fa, ca), (fb, cb) = parts(a), parts(b)
    if not (fa and fb):    # a side whose records name no cuda-tile (hand-made, or older than the field)
        return ""
    front, compiler = fa != fb and bool(fa and fb), ca != cb
    said = bytecode_side(a, b, fa, fb, ca, cb)
    if said:
        return said
    if front and not compiler:
        return (f"only the frontend differs (cuda-tile {', '.join(sorted(fa))} → {', '.join(sorted(fb))}; "
                f"{', '.join(sorted(ca))} on both): a change here is cuTile's, in the bytecode it wrote")
    if compiler and not front:
        same = f"cuda-tile {', '.join(sorted(fa))} on both" if fa and fa == fb else "the same frontend"
        return (f"only the compiler differs ({same}, writing the newest bytecode each tileiras reads): a change "
                "here is tileiras' or the bytecode version's")
    if front and compiler:
        return ("the frontend (cuda-tile) and the compiler (tileiras) both differ: a change here may be either's; "
                "compare with one of them the same to tell")
    return ""


def bytecode_side(a: Sequence[VariantRecord], b: Sequence[VariantRecord], fa: set, fb: set, ca: set, cb: set) -> str:
    """What the bytecode hashes of A's and B's records say (``""`` when a side's ok records carry none, records
    older than ``bytecode_sha256``): ``same bytecode, compiler changed`` when every variant both sides compiled was
    given the same bytes (``audit --fixed-bytecode``), else ``bytecode changed`` and why (the frontend, the bytecode
    version). ``fa``/``fb``: the sides' cuda-tile versions, ``ca``/``cb``: their compilers (short builds)."""
    def hashes(recs):
        return {(r.kernel, r.arch, repr(sorted(r.case.items())), repr(sorted(r.hints.items()))): r
                for r in recs if r.ok and r.bytecode_sha256}
    ha, hb = hashes(a), hashes(b)
    both = sorted(set(ha) & set(hb))
    if not both or len(ha) < sum(r.ok for r in a) or len(hb) < sum(r.ok for r in b):
        return ""
    same = sum(ha[k].bytecode_sha256 == hb[k].bytecode_sha256 for k in both)
    fronts = (f"cuda-tile {', '.join(sorted(fa))}" + (f" → {', '.join(sorted(fb))}" if fa != fb else " on both")
              if fa and fb else "")
    versions = ({ha[k].bytecode for k in both}, {hb[k].bytecode for k in both})
    bc = ", ".join(sorted(versions[0])) + (f" → {', '.join(sorted(versions[1]))}" if versions[0] != versions[1] else "")
    compilers = f"{', '.join(sorted(ca))} → {', '.join(sorted(cb))}" if ca != cb else f"{', '.join(sorted(ca))} on both"
    if fa == fb and ca == cb:
        return ""     # nothing of the toolchain differs: nothing to say of its sides
    if same == len(both):
        if ca == cb:
            return (f"same bytecode, same compiler ({fronts}; bytecode {bc}; {compilers}): the {len(both)} "
                    "variant(s) were given the same bytes")
        return (f"same bytecode, compiler changed ({compilers}; bytecode {bc} from {fronts}, the same bytes in all "
                f"{len(both)} variant(s)): a change here is tileiras'")
    differ = f"the bytes differ in {len(both) - same} of {len(both)} variant(s)"
    if fa != fb:
        why = f"frontend {', '.join(sorted(fa))}→{', '.join(sorted(fb))}; {differ}"
        tail = (" and the compiler changed: a change here may be either's" if ca != cb
                else f"; {compilers}: a change here is in what cuTile wrote")
        return f"bytecode changed ({why}){tail}"
    return (f"bytecode changed (bytecode version {bc}, {fronts} writing the newest each tileiras reads; {differ}) and "
            f"the compiler changed ({compilers}): a change here is tileiras' or the bytecode version's; "
            "--fixed-bytecode gives both the same bytes")


def _short(value) -> str:
    """``value`` as JSON text for a message, cut at 80 characters."""
    import json
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else f"{text[:77]}... ({len(text):,} chars)"


def _not_a_side(spec: str) -> TileprobeError:
    return TileprobeError(f"{spec!r} is neither a result file nor a stored audit id; "
                          "see `tileprobe history` for ids")


def compare_results(results: Sequence[str] = (), *, probe: str | None = None, tileiras: Sequence[str] = (),
                    archs: Sequence[str] = ("sm_90", "sm_120"), jobs: int | None = None,
                    store: str | None = None, use_store: bool = True, with_sass: bool | None = None,
                    where: dict | None = None, progress=None) -> Comparison:
    """``tileprobe compare``: what changed between two compilers or two result sets.

    Args:
        results: two result JSON files or stored audit ids (A, B), or one file or stored audit holding two
            compiler builds (an audit with ``--tileiras A,B``, or a run of its bundle: then times are compared
            too, by :mod:`tileprobe.analyses.noise`).
        probe: instead, audit this probe file with the two compilers ``tileiras`` (versions such as
            ``["13.3.36", "13.4.92"]``; installed as managed toolchains when missing) for ``archs``.
        jobs: parallel compiles (None: all CPUs). store: the results store (path; None: the default one): it
            holds stored audit ids, and with ``probe`` the audit reads it (nothing stored is compiled again) and
            fills it. use_store: False compiles everything and stores nothing (``--no-store``).
        with_sass: read the SASS traits (spills as LDL/STL) with nvdisasm (None: when nvdisasm is installed).
        where: only the cases matching it are audited and compared (:mod:`tileprobe.select`).
        progress: the audit's ``progress(kind, n)`` callback.

    Raises:
        UsageError: no sides, more than two, or ``probe`` without two ``tileiras`` (the message lists the accepted
            forms); TileprobeError: a side that cannot be read, or one side without two builds; ToolchainError: a compiler that cannot be resolved or installed; WhereError: a
            ``where`` that matches no variant on either side (the message lists the values there are).
    """
    env: dict = {}
    audited: list[VariantRecord] = []
    if probe:
        if len(tileiras) != 2:
            raise UsageError("with --probe, give two compilers: --tileiras A,B (e.g. 13.3.36,13.4.92)")
        result = _audit_probe(probe, tileiras, archs, jobs, store, use_store, with_sass, where, progress)
        try:
            a, b, name_a, name_b = split_by_compiler(result.records)
        except TileprobeError as e:     # a compiler the audit could not use: say which and why (its fix with it)
            if not result.target_errors:
                raise
            raise TileprobeError(f"{e}\n" + "\n".join(f"  {t}" for t in result.target_errors)) from None
        name_a, name_b = short_build(name_a), short_build(name_b)
        env, audited = result.environment, result.records
    elif len(results) == 2:
        a, name_a = load_side(results[0], store)
        b, name_b = load_side(results[1], store)
    elif len(results) == 1:
        if os.path.exists(results[0]):
            recs, env = load(results[0], judge=judge_records)
        else:   # one stored audit (e.g. a bundle's two releases, run and stored on the GPU machine)
            recs, _ = load_side(results[0], store)
        a, b, name_a, name_b = split_by_compiler(recs)
        name_a, name_b = short_build(name_a), short_build(name_b)
    else:
        given = f" (got {len(results)}: {' '.join(results)})" if results else ""
        raise UsageError(f"compare what?{given} give two result files (or stored audit ids), one file holding two "
                         "compiler builds, or --probe P --tileiras A,B")
    if where:
        from tileprobe.select import select, select_or_explain
        select_or_explain(a + b, where)   # matching nothing is a WhereError (exit 2), as for audit
        a, b = select(a, where), select(b, where)
    side = changed_side(a, b)
    return Comparison(compare_records(a, b), name_a, f"{name_b}; {side}" if side else name_b, env, audited,
                      advice=_advice(audited, where))


def _advice(audited: list[VariantRecord], where: dict | None) -> list[str]:
    """The static advice over the audited records ``where`` selects (what ``compare --tables`` prints under their
    tables); [] without an audit."""
    if not audited:
        return []
    from tileprobe.judge.advice import advice
    from tileprobe.select import select
    return advice(select(audited, where))


def _audit_probe(probe, tileiras, archs, jobs, store_path, use_store, with_sass, where, progress):
    """The audit of ``compare --probe``: through the results store (reused and filled, the audit saved) and with
    the SASS traits when nvdisasm is there."""
    from tileprobe.audit import audit
    from tileprobe.model.sass import have_nvdisasm
    from tileprobe.store import Store
    from tileprobe.toolchain import resolve_toolchains
    store = Store.open(store_path) if use_store else None
    try:
        result = audit([probe], list(archs), toolchains=resolve_toolchains(list(tileiras)), jobs=jobs, store=store,
                       with_sass=have_nvdisasm() if with_sass is None else with_sass, where=where, progress=progress)
        if store is not None:
            store.save_audit(result, f"compare --probe {probe} --tileiras {','.join(tileiras)} --arch {','.join(archs)}")
    finally:
        if store is not None:
            store.close()
    return result

"""Register-pool balance of ``setmaxnreg`` (SASS ``USETMAXREG``): can the CTA's pool ever grant what its warps ask?

Hardware rule, from the PTX ISA ("setmaxnreg", sm_90a+): ``setmaxnreg.dec`` releases registers of the executing
warpgroup "to the register pool of the CTA"; ``setmaxnreg.inc`` asks that pool for registers and "blocks" until
it can take them. The new count is per thread, "in the range 24 to 256 (both inclusive)" and "a multiple of 8";
the instruction is ``.sync.aligned`` over a **warpgroup** (4 consecutive warps, 128 threads): all of its warps
execute the same ``setmaxnreg``. In SASS a grow is ``USETMAXREG.TRY_ALLOC.CTAPOOL UPn, N`` inside a retry loop
(``@!P BRA`` back to it until UPn says it was granted); a shrink is ``USETMAXREG.DEALLOC.CTAPOOL N``.

The pool a CTA is launched with is its warps' allocation: per warp ``registers per thread × 32`` rounded up to
the allocation unit (256 registers per warp on sm_90: ``cudaOccRegAllocationGranularity``, :mod:`tileprobe.model.arch`),
times the warps. Only a DEALLOC adds to what a TRY_ALLOC can take.

What :func:`check_register_pool` does, per kernel:

1. Finds every USETMAXREG: action (TRY_ALLOC / DEALLOC), target (an immediate; a register target cannot be
   read statically), guard predicate, and whether it sits in a retry loop.
2. Finds which warps reach each one, by following the code once per warp index ``w`` (0 … threads/32 − 1): the
   thread index (``S2R SR_TID.X``) shifted right by 5 or more is known per warp, and so is every value computed
   from it by the moves, adds (every 32-bit spelling nvdisasm writes on sm_80 … sm_120: ``IADD3`` with 0–2
   carry-out predicates, ``UIADD3``, ``VIADD``, ``IADD``, ``IMAD.IADD``; :data:`_ADDS`), compares (ISETP/UISETP)
   and predicate logic (PLOP3) it models; a branch or EXIT whose predicate is known for ``w`` goes one way, any
   other goes both ways (so reachability over-approximates). An ``unknown`` that comes from such a branch names
   it and the instruction its predicate came from (:func:`stopped_at`).
3. Balances per warpgroup: the count each warpgroup ends at (its USETMAXREG's target, or the launch count when
   it has none) × 128, summed, against the pool.

Verdicts (:data:`VERDICTS`): ``hang_risk`` — an allocation the pool can never satisfy (no DEALLOC reachable at all,
or the warpgroups' final counts need more than the pool holds): a TRY_ALLOC retry loop then spins for ever, so the
kernel hangs; ``pool_ok`` — every warpgroup's final count fits the pool; ``unknown`` — something the model cannot
decide (a register target, an invalid target, a CTA that is not whole warpgroups, a warpgroup whose warps reach
different counts, or that may reach several, an indirect branch), with the reason; ``none`` — no USETMAXREG.

Assumptions, also stated in each reason: the CTA is one-dimensional in threads (``reqntid`` = (N, 1, 1)), so
warp ``w`` holds threads 32w … 32w+31 and warpgroup ``g`` warps 4g … 4g+3; registers of warps that exited are
not returned to the pool (the PTX ISA says the pool is filled by ``setmaxnreg.dec``); a warpgroup that reaches a
DEALLOC does so without first waiting for an allocation elsewhere (the model does not follow barriers or mbarrier
waits, so a pool that balances can still deadlock through them: ``pool_ok`` is not a proof of progress).

The instructions and their effects on the values followed are :mod:`tileprobe.model.regpool_ops`; the walk, the
reach and the balance are here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tileprobe.model.regpool_ops import (
    _ADDS,
    _IMMEDIATE,
    _MODELLED,
    _NOT_PLAIN_ADD,
    _PREDICATE,
    _PREDICATE_OPERAND,
    _REG,
    _TARGET_LABEL,
    _TID,
    _add_terms,
    _effect,
    _guard,
    _Ins,
    _join,
    _parse,
    _value,
)
from tileprobe.records import PoolInstruction, RegisterPool

__all__ = [
    "HANG_RISK",
    "NONE",
    "POOL_OK",
    "UNKNOWN",
    "VERDICTS",
    "PoolCheck",
    "SetMaxNReg",
    "check_listing",
    "check_register_pool",
    "launch_allocation",
    "warp_reach",
]

HANG_RISK, POOL_OK, UNKNOWN, NONE = "hang_risk", "pool_ok", "unknown", "none"
#: Bumped whenever the walk or the rules change what they decide: a stored check of an older model is redone from
#: the stored cubin (``Store.lookup``). 2: the carry-predicate IADD3, IADD and uniform adds, CS2R.32 as one register.
MODEL_VERSION = 2
#: Verdicts of the check, worst first.
VERDICTS = (HANG_RISK, UNKNOWN, POOL_OK, NONE)
#: setmaxnreg register counts the PTX ISA allows: multiples of 8 in 24 … 256.
MIN_COUNT, MAX_COUNT, COUNT_STEP = 24, 256, 8
WARP_SIZE, WARPS_PER_WARPGROUP = 32, 4
@dataclass(frozen=True)
class SetMaxNReg:
    """One USETMAXREG instruction.

    Attributes:
        address: byte offset in the kernel. action: ``TRY_ALLOC`` (grow) or ``DEALLOC`` (shrink), as written.
        target: registers per thread asked for (immediate), or None for a register operand.
        text: the instruction as nvdisasm wrote it. guard: its predicate (``@P0``) or ``""``.
        retry_loop: a TRY_ALLOC whose following branch jumps back to it (spins until granted).
        warps: warp indices that reach it (over-approximated; see the module doc).
    """
    address: int
    action: str
    target: int | None
    text: str
    guard: str = ""
    retry_loop: bool = False
    warps: tuple[int, ...] = ()

    def record(self) -> PoolInstruction:
        """What a variant record keeps of it (``RegisterPool.instructions`` items)."""
        return PoolInstruction(address=self.address, action=self.action, target=self.target, text=self.text,
                               guard=self.guard, retry_loop=self.retry_loop, warps=list(self.warps))

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return self.record().to_dict()


@dataclass(frozen=True)
class PoolCheck:
    """The register-pool verdict of one kernel (registers are per CTA unless named per thread).

    Attributes:
        verdict: one of :data:`VERDICTS`. reason: the instructions, numbers and reasoning in words.
        registers_per_thread: the launch count (EIATTR_REGCOUNT). threads: threads per CTA.
        pool_registers: the CTA's pool (per-warp allocation × warps), or None when not computed.
        demand_registers: Σ over warpgroups of final count × 128, or None when not decided.
        instructions: every USETMAXREG, in address order.
        warpgroup_counts: final registers per thread of each warpgroup (launch count when it runs no
            USETMAXREG), or ``()`` when not decided.
    """
    verdict: str
    reason: str
    registers_per_thread: int | None = None
    threads: int | None = None
    pool_registers: int | None = None
    demand_registers: int | None = None
    instructions: tuple[SetMaxNReg, ...] = ()
    warpgroup_counts: tuple[int, ...] = field(default=())

    def record(self) -> RegisterPool:
        """The record's ``register_pool`` field (:class:`tileprobe.records.RegisterPool`, with the
        :data:`MODEL_VERSION` that decided it)."""
        return RegisterPool(verdict=self.verdict, reason=self.reason, model_version=MODEL_VERSION,
                            registers_per_thread=self.registers_per_thread, threads=self.threads,
                            pool_registers=self.pool_registers, demand_registers=self.demand_registers,
                            warpgroup_counts=list(self.warpgroup_counts),
                            instructions=[i.record() for i in self.instructions])

    def to_dict(self) -> dict:
        """JSON-ready form (the record's ``register_pool`` field as JSON)."""
        return self.record().to_dict()



def warp_reach(instructions, warps: int) -> tuple[dict[int, set[int]], str | None]:
    """Which warps reach which instruction: ``({index: {warp, …}}, problem)``; ``problem`` names an indirect
    branch the walk could not follow (then every instruction counts as reached by every warp).

    The warps' walks share one memo of blocks (:func:`_walk`): a block entered in the same state by two warps is
    followed once (on the 127 sm_120 cubins of ``examples/*.py``, 2026-12-05, the walk was about half the CPU of
    their SASS facts)."""
    labels = {lab: i for i, ins in enumerate(instructions) for lab in ins.labels}
    reached: dict[int, set[int]] = {}
    for ins in instructions:
        if ins.base in ("BRX", "JMX", "JMP", "BRXU", "JMXU"):
            every = set(range(warps))
            return {i: every for i in range(len(instructions))}, f"indirect branch {ins.text()} at {ins.address:#06x}"
    starts = _blocks(instructions)
    memo: dict[tuple, _BlockRun] = {}
    for w in range(warps):
        for i in _walk(instructions, labels, w, starts, memo=memo):
            reached.setdefault(i, set()).add(w)
    return reached, None


_CONTROL = ("BRA", "EXIT", "RET", "BPT", "KILL", "CALL")


def _blocks(instructions) -> list[int]:
    """Start indices of the basic blocks: the first instruction, every labelled one (a possible branch target) and
    every one after a branch, exit or call."""
    starts = {0}
    for i, ins in enumerate(instructions):
        if ins.labels:
            starts.add(i)
        if ins.base in _CONTROL:
            starts.add(i + 1)
    return sorted(s for s in starts if s < len(instructions))


@dataclass(frozen=True)
class _BlockRun:
    """One block followed from one state: the index of its last instruction followed (a branch, exit or call
    ends it early) and the states it hands on, ``(index, state)``; the states are never changed afterwards."""
    last: int
    succ: tuple[tuple[int, dict], ...]


def _walk(instructions, labels, warp: int, starts: list[int] | None = None,
          undecided: set[int] | None = None, memo: dict[tuple, _BlockRun] | None = None) -> set[int]:
    """Indices of instructions warp ``warp`` may reach (a forward data flow to a fixpoint), block by block: the
    state is joined only at block starts, and inside a block each instruction sees the one before it's output with
    warp values made concrete (:func:`_resolve`) — what an instruction-by-instruction walk gives, without a state
    kept per instruction. ``memo`` (shared by the walks of one kernel's warps): block runs by their block and
    entry state (:func:`_memo_key`), each followed once."""
    starts = _blocks(instructions) if starts is None else starts
    end_of = {b: (starts[k + 1] if k + 1 < len(starts) else len(instructions)) for k, b in enumerate(starts)}
    states: dict[int, dict] = {0: {}}
    work = [0]
    seen: set[int] = set()
    while work:
        b = work.pop()
        if b >= len(instructions):
            continue
        env = _resolve(states[b], warp)   # the block's own copy, changed in place
        key = _memo_key(instructions, b, end_of[b], env, warp) if memo is not None and undecided is None else None
        run = memo.get(key) if key is not None and memo is not None else None
        if run is None:
            run = _run_block(instructions, labels, b, end_of[b], env, warp, undecided)
            if key is not None and memo is not None:
                memo[key] = run
        seen.update(range(b, run.last + 1))
        for j, e in run.succ:
            old = states.get(j)
            joined = _join(old, e)
            if old is None or joined != old:
                states[j] = joined
                work.append(j)
    return seen


def _memo_key(instructions, b: int, end: int, env: dict, warp: int) -> tuple:
    """What a block run depends on: the block, its entry state (values with their types: ``True`` is not ``1``
    here) and the warp when the block can make a warp value (a thread index held or read by an ``S2R``)."""
    state = tuple((k, type(v), v) for k, v in env.items())
    own = any(v == _TID for v in env.values()) or any(instructions[i].base == "S2R" for i in range(b, end))
    return (b, state, warp if own else None)


def _run_block(instructions, labels, b: int, end: int, env: dict, warp: int,
               undecided: set[int] | None) -> _BlockRun:
    """Follow block ``b`` (instructions ``b`` … ``end`` − 1) from state ``env`` (changed in place) for ``warp``."""
    pending = False                    # env holds a warp value ("warp", k) that the next instruction resolves
    for i in range(b, end):
        ins = instructions[i]
        if pending:
            _resolve_in_place(env, warp)
            pending = False
        succ = _step(ins, env, i, labels)
        if undecided is not None and succ is not None and ins.base in ("BRA", "EXIT") and \
                (len(succ) > 1 or _guard(ins, env) is None):
            undecided.add(i)
        if succ is None:           # a plain instruction: on to the next one in the block
            g = _guard(ins, env)
            if g is True:
                _effect(ins, env, in_place=True)
            elif g is None:
                env = _join(env, _effect(ins, env))
            pending = ins.base == "SHF"
            continue
        return _BlockRun(i, tuple(succ))
    return _BlockRun(end - 1, ((end, env),))   # the block ran into the next one's start


def _step(ins: _Ins, env: dict, i: int, labels: dict) -> list[tuple[int, dict]] | None:
    """The successors ``(index, state)`` of a branch, exit or call at index ``i`` under ``env``; None for any other
    instruction (it falls through to ``i + 1`` with its effect)."""
    if ins.base not in _CONTROL:
        return None
    g = _guard(ins, env)
    succ: list[tuple[int, dict]] = []
    if ins.base == "BRA":
        target = _TARGET_LABEL.search(", ".join(ins.operands))
        cond = g
        extra = [o for o in ins.operands if _PREDICATE_OPERAND.fullmatch(o)]
        if extra and cond is not False:
            e = _value(extra[0], env)
            cond = (cond and e) if isinstance(e, bool) and isinstance(cond, bool) else (False if e is False
                                                                                       else None)
        if target and target.group(1) in labels:
            if cond is not False:
                succ.append((labels[target.group(1)], env))
            if cond is not True:
                succ.append((i + 1, env))
        else:
            succ.append((i + 1, env))
    elif ins.base == "CALL":
        new = _effect(ins, env) if g is not False else env
        if g is None:
            new = _join(env, new)
        succ.append((i + 1, new))
        target = _TARGET_LABEL.search(", ".join(ins.operands))
        if target and target.group(1) in labels:
            succ.append((labels[target.group(1)], new))
    elif g is not True:                # EXIT, RET, BPT, KILL
        succ.append((i + 1, env))
    return succ


def stopped_at(instructions, warps) -> str:
    """Why the walk could not decide where ``warps`` go: the first branch (by address) whose condition it did not
    know for one of them, and the instruction that stopped it — the last writer, before the branch, of its
    predicate or of a register that predicate was computed from, that the model does not read (:data:`_MODELLED`;
    a loaded value, a special register other than SR_TID.X …). Back-tracking follows the listing's order, not its
    control flow: it names a likely cause, up to six writers back. '' when every branch was decided."""
    labels = {lab: i for i, ins in enumerate(instructions) for lab in ins.labels}
    branches: set[int] = set()
    for w in warps:
        _walk(instructions, labels, w, undecided=branches)
    if not branches:
        return ""
    i = min(branches)
    branch = instructions[i]
    text = f"the walk could not decide {branch.text()} at {branch.address:#06x}"
    cause = _cause(instructions, i, branch.guard.lstrip("@!") if branch.guard else "")
    return f"{text}{cause}"


def _cause(instructions, i: int, name: str, depth: int = 6) -> str:
    """``: its P0 comes from … at 0x…, which the model does not read`` for the last writer of ``name`` before
    index ``i`` (following modelled writers' sources, ``depth`` writers at most); '' when none is found."""
    first = name
    for _ in range(depth):
        if not name or name in ("PT", "UPT"):
            return ""
        j = next((j for j in range(i - 1, -1, -1) if name in _writes(instructions[j])), None)
        if j is None:
            return f": {name} is not written before it"
        w = instructions[j]
        if w.base not in _MODELLED or _reads_unmodelled(w):
            how = "comes" if name == first else "is computed"
            return f": {first} {how} from {w.text()} at {w.address:#06x}, which the model does not read"
        sources = [o.lstrip("!-~").removesuffix(".reuse") for o in w.operands[_dests(w):]]
        sources = [o for o in sources if (_REG.match(o) or _PREDICATE.fullmatch(o)) and o not in ("RZ", "URZ")]
        if not sources:
            return ""
        i, name = j, sources[0]
    return ""


def _dests(ins: _Ins) -> int:
    """How many leading operands ``ins`` writes (two for the compares and PLOP3, one otherwise)."""
    return 2 if ins.base in ("ISETP", "UISETP", "PLOP3", "UPLOP3") else 1


def _writes(ins: _Ins) -> tuple[str, ...]:
    """Registers and predicates ``ins`` writes (its leading destinations, and what :func:`_kill` forgets)."""
    return tuple(ins.operands[:_dests(ins)]) + (ins.kills if ins.base not in _MODELLED else ())


def _reads_unmodelled(ins: _Ins) -> bool:
    """A modelled opcode in a form :func:`_effect` does not read (``S2R`` of another special register, an add with
    carry-in or 64-bit, a shift other than SHF.R.U32.HI)."""
    if ins.base == "S2R":
        return "SR_TID.X" not in ins.operands
    if ins.base in _ADDS:
        return bool(_NOT_PLAIN_ADD & set(ins.mods)) or _add_terms(ins.base, ins.operands) is None
    if ins.base == "SHF":
        return ins.mods[:3] != ("R", "U32", "HI")
    if ins.base == "IMAD":
        return ins.mods[:1] not in (("MOV",), ("IADD",))
    return False


def _resolve_in_place(env: dict, warp: int) -> None:
    """:func:`_resolve` on ``env`` itself."""
    for k, v in env.items():
        if isinstance(v, tuple):
            env[k] = warp >> v[1]


def _resolve(env: dict, warp: int) -> dict:
    """``env`` with symbolic warp values ``("warp", k)`` (tid.x >> (5+k)) made concrete for ``warp``."""
    return {k: ((warp >> v[1]) if isinstance(v, tuple) else v) for k, v in env.items()}


def _setmaxnreg(instructions, i: int, reached) -> SetMaxNReg:
    ins = instructions[i]
    action = ins.mods[0] if ins.mods else ""
    imm = [o for o in ins.operands if _IMMEDIATE.fullmatch(o)]
    target = int(imm[-1], 0) if imm else None
    loop = False
    for j in range(i + 1, min(i + 4, len(instructions))):
        nxt = instructions[j]
        if nxt.base == "BRA":
            m = _TARGET_LABEL.search(", ".join(nxt.operands))
            back = m and any(m.group(1) in instructions[k].labels for k in range(max(0, i - 2), i + 1))
            loop = bool(back and nxt.guard)
            break
    return SetMaxNReg(ins.address, action, target, ins.text(), ins.guard, loop,
                      tuple(sorted(reached.get(i, ()))))


def check_listing(listing: str, symbol: str | None, registers_per_thread: int, threads: int,
                  reqntid: tuple[int, ...] = (), reg_alloc_unit: int = 256) -> PoolCheck:
    """:func:`check_register_pool` over the text of ``nvdisasm -c`` (kernel ``symbol``; the only kernel when None)."""
    return check_register_pool(_parse(listing, symbol), registers_per_thread, threads, reqntid, reg_alloc_unit)


def launch_allocation(registers_per_thread: int, reg_alloc_unit: int = 256) -> int:
    """Registers per thread a warp holds at launch: ``registers_per_thread`` (EIATTR_REGCOUNT) rounded up to whole
    ``reg_alloc_unit``-register units per warp (256 on sm_80 … sm_121, ``[occ]`` ``cudaOccRegAllocationGranularity``),
    e.g. 255 → 256, 40 → 40, 36 → 40."""
    return -(-registers_per_thread * WARP_SIZE // reg_alloc_unit) * reg_alloc_unit // WARP_SIZE


def check_register_pool(instructions, registers_per_thread: int, threads: int, reqntid: tuple[int, ...] = (),
                        reg_alloc_unit: int = 256) -> PoolCheck:
    """The register-pool verdict of one kernel's instructions (see the module doc for the rules and assumptions).

    Args:
        instructions: the kernel's parsed instructions (:func:`check_listing` parses a listing).
        registers_per_thread: the launch count (cubin EIATTR_REGCOUNT). threads: threads per CTA.
        reqntid: the cubin's (x, y, z) CTA shape, when known; only (N, 1, 1) lets the walk name warps.
        reg_alloc_unit: registers per warp the hardware allocates in (256 on sm_80 … sm_121, ``[occ]``
            ``cudaOccRegAllocationGranularity``).
    """
    found = [i for i, ins in enumerate(instructions) if ins.base == "USETMAXREG"]
    if not found:
        return PoolCheck(NONE, "no USETMAXREG (setmaxnreg) in the SASS", registers_per_thread, threads)
    warps = max(1, -(-threads // WARP_SIZE))
    launch = launch_allocation(registers_per_thread, reg_alloc_unit)
    per_warp = launch * WARP_SIZE
    pool = per_warp * warps
    facts: dict[str, Any] = dict(registers_per_thread=registers_per_thread, threads=threads, pool_registers=pool)
    one_d = not reqntid or tuple(reqntid[1:]) in ((), (1,), (1, 1))
    reached, problem = warp_reach(instructions, warps) if one_d else \
        ({i: set(range(warps)) for i in range(len(instructions))}, f"the CTA is {reqntid}, not one-dimensional")
    smn = tuple(_setmaxnreg(instructions, i, reached) for i in found)
    facts["instructions"] = smn
    rounded = "" if launch == registers_per_thread else f", allocated as {launch}"
    pool_text = (f"the CTA's pool of {pool:,} registers ({registers_per_thread} per thread{rounded}: {per_warp} per "
                 f"warp in {reg_alloc_unit}-register units × {warps} warps)")
    bad = [s for s in smn if s.warps and (s.target is None or not MIN_COUNT <= s.target <= MAX_COUNT
                                          or s.target % COUNT_STEP)]
    if bad:
        what = "; ".join(f"{s.text} at {s.address:#06x}" for s in bad)
        return PoolCheck(UNKNOWN, f"cannot read the count of {what}: a register operand, or outside the PTX ISA's "
                                  f"{MIN_COUNT}…{MAX_COUNT} in steps of {COUNT_STEP}", **facts)
    grows = [s for s in smn if s.action != "DEALLOC" and s.warps and s.target is not None and s.target > launch]
    frees = [s for s in smn if s.action == "DEALLOC" and s.warps]
    if not grows:
        return PoolCheck(POOL_OK, f"no reachable USETMAXREG asks for more than the launch allocation ({launch} per "
                                  f"thread), so {pool_text} is never asked for more", **facts)
    ask = "; ".join(f"{s.text} at {s.address:#06x} ({_warps(s.warps)}"
                    f"{', in a retry loop' if s.retry_loop else ''})" for s in grows)
    if not frees:
        need = max(s.target or 0 for s in grows)
        return PoolCheck(HANG_RISK, f"{ask} asks for {need} registers per thread, above the launch count of "
                                    f"{launch}, and no reachable USETMAXREG.DEALLOC returns registers: {pool_text} "
                                    "is all held by the CTA's own warps, so the allocation can never be granted "
                                    "and its retry loop spins for ever (assumes exited warps return no registers "
                                    "to the pool)", **facts)
    return _balance(instructions, smn, warps, launch, pool, pool_text, problem, facts)


def _balance(instructions, smn, warps: int, launch: int, pool: int, pool_text: str, problem: str | None,
             facts: dict) -> PoolCheck:
    """Per-warpgroup final counts against the pool (both TRY_ALLOC and DEALLOC are reachable)."""
    if warps % WARPS_PER_WARPGROUP:
        return PoolCheck(UNKNOWN, f"the CTA has {warps} warps, not whole warpgroups of {WARPS_PER_WARPGROUP}: "
                                  "setmaxnreg works per warpgroup", **facts)
    if problem:
        return PoolCheck(UNKNOWN, f"cannot tell which warps run which USETMAXREG ({problem})", **facts)
    counts = []
    for g in range(warps // WARPS_PER_WARPGROUP):
        per_warp = []
        for w in range(g * WARPS_PER_WARPGROUP, (g + 1) * WARPS_PER_WARPGROUP):
            per_warp.append(frozenset(s.target for s in smn if w in s.warps))
        if len(set(per_warp)) > 1:
            why = stopped_at(instructions, range(g * WARPS_PER_WARPGROUP, (g + 1) * WARPS_PER_WARPGROUP))
            return PoolCheck(UNKNOWN, f"the warps of warpgroup {g} reach different setmaxnreg counts "
                                      f"({', '.join(sorted({_counts(c) for c in per_warp}))}); the PTX ISA has the "
                                      "whole warpgroup execute the same one" + (f"; {why}" if why else ""),
                             **facts)
        if len(per_warp[0]) > 1:
            why = stopped_at(instructions, range(g * WARPS_PER_WARPGROUP, (g + 1) * WARPS_PER_WARPGROUP))
            return PoolCheck(UNKNOWN, f"warpgroup {g} may reach counts {_counts(per_warp[0])} (branches the model "
                                      "cannot decide, or several in sequence): its final count is not known"
                                      + (f"; {why}" if why else ""), **facts)
        counts.append(next(iter(per_warp[0])) if per_warp[0] else launch)
    demand = sum(c * WARP_SIZE * WARPS_PER_WARPGROUP for c in counts)
    facts.update(demand_registers=demand, warpgroup_counts=tuple(counts))
    plan = ", ".join(f"warpgroup {g}: {c}" for g, c in enumerate(counts))
    if demand > pool:
        return PoolCheck(HANG_RISK, f"the warpgroups end at {plan} registers per thread (× 128 threads = {demand:,}),"
                                    f" more than {pool_text}: a TRY_ALLOC can never be granted and its retry loop "
                                    "spins for ever", **facts)
    return PoolCheck(POOL_OK, f"the warpgroups end at {plan} registers per thread (× 128 threads = {demand:,}), "
                              f"within {pool_text} (assumes each DEALLOC is reached without waiting for a TRY_ALLOC)",
                     **facts)


def _counts(c) -> str:
    return "{" + ", ".join(str(x) for x in sorted(c)) + "}" if c else "none"


def _warps(ws) -> str:
    return f"warp{'s' if len(ws) > 1 else ''} {_ranges(ws)}"


def _ranges(ws) -> str:
    ws = sorted(ws)
    out, start = [], None
    for i, w in enumerate(ws):
        if start is None:
            start = w
        if i + 1 == len(ws) or ws[i + 1] != w + 1:
            out.append(f"{start}" if start == w else f"{start}–{w}")
            start = None
    return ",".join(out) or "none"

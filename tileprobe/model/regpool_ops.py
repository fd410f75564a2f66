"""The instructions the register-pool walk (:mod:`tileprobe.model.regpool`) reads and what each does to the values
it follows: nvdisasm's listing parsed into :class:`_Ins` (:func:`_parse`), and :func:`_effect`, the symbolic
evaluation of the moves, adds (every 32-bit spelling nvdisasm writes on sm_80 … sm_120: ``IADD3`` with 0–2 carry-out
predicates, ``UIADD3``, ``VIADD``, ``IADD``, ``IMAD.IADD``; :data:`_ADDS`), shifts, compares and predicate logic
that carry the warp index; what an instruction overwrites and the walk forgets (:func:`_kill`). Private to the
check: regpool.py is its one user (the tests read the parts they check)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

_MASK = 0xFFFFFFFF
_TID = "tid.x"          # the value of a register holding SR_TID.X (not warp-uniform)

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LABEL_LINE = re.compile(r"^\s*(\.L_x_\d+):")
_LINE = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s*\{?\s*(@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)([^;]*)")
_TARGET_LABEL = re.compile(r"`\((\.L_x_\d+)\)")
_REG = re.compile(r"^(?:U?R\d+|U?P\d+)$")
# Compiled once (the walk runs them per instruction and warp: re's own cache lookup was a third of a 16,161-line
# listing's walk, 1.4 s on the 2-core machine, 2026-12-02; with these, the per-instruction kills and the walk by
# basic blocks 0.53 s (benchmarks/audit/bench_regpool.py), with the same reach and verdicts as the walk of 459075d on
# the 34 listings of tests/data and that kernel, 1-12 warps).
_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+)")
_IMMEDIATE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_PREDICATE = re.compile(r"U?P\d+")
_PREDICATE_OPERAND = re.compile(r"!?U?P(?:T|\d+)")
_GMMA_SHAPE = re.compile(r"(\d+)x(\d+)x\d+")
_FIRST_REG = re.compile(r"(U?R)(\d+)")
_CMP = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
        "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}



@dataclass(frozen=True)
class _Ins:
    address: int
    guard: str
    opcode: str
    operands: tuple[str, ...]
    labels: tuple[str, ...] = ()
    base: str = field(init=False, compare=False, repr=False)              # the opcode before its first "."
    mods: tuple[str, ...] = field(init=False, compare=False, repr=False)  # the opcode's "."-parts after it


    def __post_init__(self):
        parts = self.opcode.split(".")
        object.__setattr__(self, "base", parts[0])
        object.__setattr__(self, "mods", tuple(parts[1:]))

    @functools.cached_property
    def kills(self) -> tuple[str, ...]:
        """What :func:`_kill` forgets after it (found once, when a walk first needs it)."""
        return _kills(self)

    @functools.cached_property
    def kills_all_r(self) -> bool:
        """A matrix instruction of unknown shape: every register is forgotten after it."""
        return "MMA" in self.base and not _gmma_shape(self)

    def text(self) -> str:
        return " ".join(x for x in (self.guard, self.opcode, ", ".join(self.operands)) if x)



def _parse(listing: str, symbol: str | None) -> list[_Ins]:
    """The instructions of kernel ``symbol`` (the only or first kernel when None or absent), NOPs kept out."""
    kernels: dict[str, list[_Ins]] = {}
    current: list[_Ins] | None = None
    pending: list[str] = []
    for line in listing.splitlines():
        m = _SECTION.match(line)
        if m:
            current, pending = kernels.setdefault(m.group(1), []), []
            continue
        m = _LABEL_LINE.match(line)
        if m and current is not None:
            pending.append(m.group(1))
            continue
        m = _LINE.match(line)
        if m and current is not None:
            ops = tuple(o.strip() for o in m.group(4).split(",") if o.strip())
            if m.group(3) == "NOP" and not pending:
                continue
            current.append(_Ins(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), ops, tuple(pending)))
            pending = []
    if symbol in kernels:
        return kernels[symbol]
    return next(iter(kernels.values()), [])


def _value(token: str, env: dict):
    """The known value of operand ``token`` under ``env`` (int, bool, _TID) or None when unknown."""
    t = token.strip()
    if t.endswith(".reuse"):          # an operand-reuse cache hint (``R2.reuse``): the register itself
        t = t[:-6]
    if t.startswith("~") and len(t) > 1:    # IADD3 / LOP's bitwise-not operand (``~R3``)
        v = _int(_value(t[1:], env))
        return (~v) & _MASK if v is not None else None
    neg = t.startswith("!")
    if neg:
        t = t[1:]
    if t in ("PT", "UPT"):
        return not neg
    if t in ("RZ", "URZ"):
        return 0
    if _NUMBER.fullmatch(t):
        return int(t, 0) & _MASK
    if t.startswith("-") and _REG.match(t[1:]):
        v = env.get(t[1:])
        return (-v) & _MASK if isinstance(v, int) and not isinstance(v, bool) else None
    v = env.get(t)
    if neg:
        return (not v) if isinstance(v, bool) else None
    return v


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _signed(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


#: Opcodes whose effect :func:`_effect` models; any other only forgets what it writes (:func:`_kill`).
_MODELLED = frozenset(("S2R", "SHF", "MOV", "UMOV", "R2UR", "IMAD", "IADD3", "UIADD3", "VIADD", "UVIADD", "IADD",
                       "UIADD", "ISETP", "UISETP", "LOP3", "ULOP3", "PLOP3", "UPLOP3"))
#: Integer adds (32-bit, no carry-in): their spellings in nvdisasm 13.x listings of sm_80 … sm_120, as seen on the
#: cubins of tests/data — ``IADD3 R0, R0, -0x5, RZ`` (sm_80/sm_90), ``IADD3 R0, P0, R0, R1, RZ`` (one carry-out
#: predicate), ``IADD3 R0, PT, PT, R0, -0x5, RZ`` (sm_100/sm_120: both carry-out predicates written out),
#: ``UIADD3 UR4, UPT, UPT, UR4, 0x1, URZ`` (uniform), ``VIADD R0, R0, -0x5`` (sm_90+) and ``IADD R0, R0, -0x5``
#: (sm_120). ``.X`` (carry-in), ``.64`` (register pairs) and the IMAD forms other than ``IMAD.IADD`` are not adds
#: of two or three 32-bit terms: they only forget what they write.
_ADDS = frozenset(("IADD3", "UIADD3", "VIADD", "UVIADD", "IADD", "UIADD"))
_NOT_PLAIN_ADD = frozenset(("X", "WIDE", "HI", "SHL", "64"))


def _effect(ins: _Ins, env: dict, in_place: bool = False) -> dict:
    """``env`` after ``ins`` (guard not applied): a new dict, or ``env`` itself changed when ``in_place`` (every
    operand is read before any destination is written). Unmodelled writes make their destinations unknown."""
    out = env if in_place else dict(env)
    if ins.base not in _MODELLED:
        _kill(ins, out)
        return out
    ops, base, mods = ins.operands, ins.base, ins.mods

    def put(dest, value):
        if dest in ("PT", "UPT", "RZ", "URZ"):
            return
        if value is None:
            out.pop(dest, None)
        else:
            out[dest] = value

    if base == "S2R" and len(ops) == 2:
        put(ops[0], _TID if ops[1] == "SR_TID.X" else None)
    elif base == "SHF" and mods[:3] == ("R", "U32", "HI") and len(ops) == 4 and _value(ops[1], env) == 0:
        src, k = _value(ops[3], env), _int(_value(ops[2], env))
        if src == _TID and k is not None and k >= 5:
            put(ops[0], ("warp", k - 5))
        elif _int(src) is not None and k is not None:
            put(ops[0], (src >> k) & _MASK)
        else:
            put(ops[0], None)
    elif base in ("MOV", "UMOV", "R2UR") and len(ops) >= 2:
        put(ops[0], _value(ops[1], env))
    elif base == "IMAD" and mods[:1] == ("MOV",) and len(ops) == 4:
        put(ops[0], _value(ops[3], env))
    elif base == "IMAD" and mods[:1] == ("IADD",) and len(ops) == 4 and not (_NOT_PLAIN_ADD & set(mods)):
        a, b = (_int(_value(ops[1], env)), _int(_value(ops[3], env))) if _value(ops[2], env) == 1 else (None, None)
        put(ops[0], ((a + b) & _MASK) if a is not None and b is not None else None)   # d = a × 1 + b
    elif base in _ADDS and not (_NOT_PLAIN_ADD & set(mods)) and (split := _add_terms(base, ops)) is not None:
        carries, addends = split
        values = [_int(_value(o, env)) for o in addends]
        known = [v for v in values if v is not None]
        put(ops[0], (sum(known) & _MASK) if len(known) == len(values) else None)
        for p in carries:          # carry-out predicates: not modelled, so no longer known
            put(p, None)
    elif base in ("ISETP", "UISETP") and len(ops) == 5 and mods and mods[0] in _CMP and mods[-1] in ("AND", "OR",
                                                                                                     "XOR"):
        a, b, c = _int(_value(ops[2], env)), _int(_value(ops[3], env)), _value(ops[4], env)
        r = None
        if a is not None and b is not None:
            r = _CMP[mods[0]](a, b) if "U32" in mods else _CMP[mods[0]](_signed(a), _signed(b))
        if r is not None and isinstance(c, bool):
            r = {"AND": r and c, "OR": r or c, "XOR": r != c}[mods[-1]]
        elif r is not None and not (mods[-1] == "AND" and c is True):
            r = None
        put(ops[0], r)
        put(ops[1], None)
    elif base in ("LOP3", "ULOP3") and mods[:1] == ("LUT",) and len(ops) == 6 and _REG.match(ops[0]):
        a, b, c, lut = (_int(_value(o, env)) for o in ops[1:5])
        put(ops[0], _lop3(a, b, c, lut) if None not in (a, b, c, lut) else None)
        _kill_predicates(ops[5:], out)
    elif base in ("PLOP3", "UPLOP3") and len(ops) == 7:
        ins_ = [_value(o, env) for o in ops[2:5]]
        for dest, lut in ((ops[0], _int(_value(ops[5], env))), (ops[1], _int(_value(ops[6], env)))):
            if lut is None or not all(isinstance(x, bool) for x in ins_):
                put(dest, None)
            else:
                put(dest, bool((lut >> (ins_[0] << 2 | ins_[1] << 1 | ins_[2])) & 1))
    else:
        _kill(ins, out)
    return out


def _add_terms(base: str, ops: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(carry-out predicates, terms) of an integer add's operands after its destination, or None for a spelling
    that is not one (:data:`_ADDS`): IADD3 / UIADD3 take 0–2 carry-out predicates then three terms; VIADD / IADD
    two terms (an ``IADD`` with a third term is a three-input add as well)."""
    rest = ops[1:]
    carries: list[str] = []
    while rest and _PREDICATE_OPERAND.fullmatch(rest[0]) and len(carries) < 2:
        carries.append(rest[0])
        rest = rest[1:]
    want = (3,) if base in ("IADD3", "UIADD3") else (2, 3)
    if len(rest) not in want or any(_PREDICATE_OPERAND.fullmatch(o) for o in rest):
        return None
    return tuple(carries), tuple(rest)


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    """LOP3's bitwise three-input function: bit ``i`` of ``lut`` is the output for inputs (a, b, c) = bits of i."""
    r = 0
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return r & _MASK


def _kill_predicates(operands, out: dict) -> None:
    for o in operands:
        t = o.lstrip("!")
        if _PREDICATE.fullmatch(t):
            out.pop(t, None)


def _gmma_shape(ins: _Ins):
    return _GMMA_SHAPE.search(ins.opcode) if "GMMA" in ins.base else None


def _kills(ins: _Ins) -> tuple[str, ...]:
    """The registers and predicates an unmodelled ``ins`` may write (:func:`_kill`), found once per instruction."""
    out = []
    shape = _gmma_shape(ins)
    if ins.operands:
        m = _FIRST_REG.fullmatch(ins.operands[0])
        if m:
            mods = set(ins.mods)
            cs2r_pair = ins.base == "CS2R" and "32" not in mods     # CS2R.32 writes one register (sm_100 on)
            width = 4 if mods & {"128", "X4"} else 2 if mods & {"64", "WIDE", "X2"} or cs2r_pair else 1
            if shape:   # wgmma MxNxK: M×N accumulators over 128 threads, at most one 32-bit register each
                width = int(shape.group(1)) * int(shape.group(2)) // 128
            out += [f"{m.group(1)}{int(m.group(2)) + i}" for i in range(width)]
    out += [o.lstrip("!") for o in ins.operands if _PREDICATE.fullmatch(o.lstrip("!"))]
    return tuple(out)


def _kill(ins: _Ins, out: dict) -> None:
    """Forget what an unmodelled instruction may write: its first operand (with the registers after it that a
    wide result fills: .64 / WIDE / X2 / CS2R (not CS2R.32) two, .128 / X4 four, a wgmma MxNxK M·N/128), every predicate it
    names, and every register at all for other matrix instructions."""
    if ins.kills_all_r:
        for k in [k for k in out if isinstance(k, str) and k.startswith("R")]:
            out.pop(k, None)
    for k in ins.kills:
        out.pop(k, None)


def _join(a: dict | None, b: dict) -> dict:
    if a is None:
        return dict(b)
    return {k: v for k, v in a.items() if k in b and b[k] == v}


def _guard(ins: _Ins, env: dict):
    if not ins.guard:
        return True
    return _value(ins.guard[1:], env)

"""Machine code side by side: one kernel's SASS as instructions, their classes, and an aligned diff of two variants.

Input is the text of ``nvdisasm -c`` (:func:`tileprobe.model.sass.disassemble`). Each instruction keeps its address,
predicate, opcode with modifiers (``LDG.E.128``) and operands. For the diff, registers are renamed to their kind
(``R12`` → ``R``, ``UR5`` → ``UR``, ``P3`` → ``P``, ``UP1`` → ``UP``, ``B0`` → ``B``; ``RZ``/``URZ``/``PT`` stay)
and branch labels to ``.L``, so that a different register allocation of the same code does not show as a change;
the alignment is :class:`difflib.SequenceMatcher` over the normalised instructions (opcode and operands), the way a
text diff aligns lines. Opcode classes (:data:`CLASSES`) sum each side's instruction mix.
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field

from tileprobe.errors import CubinError

__all__ = [
    "CLASSES",
    "Instruction",
    "SassDiff",
    "diff_instructions",
    "instruction_class",
    "kernel_instructions",
    "parse_listing",
]

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LINE = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s*\{?\s*(@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\s*(.*?)\s*;?\s*\}?\s*$")
_REGISTER = re.compile(r"\b(UR|UP|R|P|B)(\d+)\b")
_LABEL = re.compile(r"\.L_x_\d+")

#: Opcode classes, in the order a report lists them: (class, regular expression on the base opcode).
CLASSES = (
    ("global memory", r"LDG|STG|RED|ATOMG|ATOM|LD|ST|CCTL.*"),
    ("shared memory", r"LDS|STS|LDSM|STSM|ATOMS|LDGSTS|SYNCS|ARRIVES|LDGDEPBAR"),
    ("local memory (spills)", r"LDL|STL"),
    ("TMA / bulk copy", r"UTMA[A-Z]*|UBLK[A-Z]*"),
    ("matrix (MMA)", r"UTC[A-Z]*MMA|[A-Z]?GMMA|[A-Z]MMA"),
    ("float", r"F[A-Z0-9]*|H[A-Z0-9]*|D[A-Z0-9]*|MUFU"),
    ("integer / logic", r"I[A-Z0-9]*|LOP3|LOP|SHF|SHL|SHR|LEA|SEL|PRMT|POPC|FLO|BMSK|SGXT|VI[A-Z0-9]*|BREV|PLOP3|P2R|R2P"),
    ("conversion", r"F2F|F2I|I2F|I2I|F2FP|I2FP|F2IP"),
    ("move / constant", r"MOV|LDC|LDCU|S2R|CS2R|S2UR|R2UR|SHFL|MOVM|RPCMOV"),
    ("uniform datapath", r"U[A-Z0-9]*"),
    ("control / sync", r"BRA|BRX|JMP|CALL|RET|EXIT|BSSY|BSYNC|BAR|BPT|WARPSYNC|YIELD|NANOSLEEP|MEMBAR|FENCE|ERRBAR|"
                       r"DEPBAR|WARPGROUP|ELECT|VOTE|VOTEU|ACQBULK|BMOV|CGAERRBAR|ENDCOLLECTIVE|KILL"),
)
_CLASS_RE = [(name, re.compile(rf"(?:{rx})")) for name, rx in CLASSES]
_ORDER = ("local memory (spills)", "TMA / bulk copy", "matrix (MMA)", "conversion", "global memory", "shared memory",
          "control / sync", "move / constant", "uniform datapath", "integer / logic", "float")


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction: ``address`` (bytes from the kernel's start), ``predicate`` (``@P0`` or ``""``),
    ``opcode`` with modifiers (``LDG.E.128``) and ``operands`` as nvdisasm writes them."""
    address: int
    predicate: str
    opcode: str
    operands: str

    @property
    def base(self) -> str:
        """The opcode without modifiers (``LDG``)."""
        return self.opcode.split(".", 1)[0]

    def text(self) -> str:
        """``@P0 LDG.E.128 R4, desc[UR6][R2.64]`` (the instruction as nvdisasm prints it)."""
        return " ".join(x for x in (self.predicate, self.opcode, self.operands) if x)

    def normalised(self) -> str:
        """The instruction with register numbers and branch labels removed (what the diff aligns on)."""
        pred = _REGISTER.sub(lambda m: m.group(1), self.predicate)
        ops = _LABEL.sub(".L", _REGISTER.sub(lambda m: m.group(1), self.operands))
        return " ".join(x for x in (pred, self.opcode, ops) if x)


def instruction_class(opcode: str) -> str:
    """The class (:data:`CLASSES`) of a base opcode (``LDG`` → ``global memory``); ``other`` when none fits."""
    base = opcode.split(".", 1)[0]
    for name in _ORDER:
        if dict(_CLASS_RE)[name].fullmatch(base):
            return name
    return "other"


def parse_listing(listing: str) -> dict[str, list[Instruction]]:
    """``nvdisasm -c`` text → {kernel: instructions in address order} (NOPs, alignment padding, left out)."""
    out: dict[str, list[Instruction]] = {}
    current = None
    for line in listing.splitlines():
        m = _SECTION.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = _LINE.match(line)
        if m and current is not None and m.group(3) != "NOP":
            current.append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3),
                                       m.group(4).rstrip(" ;")))
    return out


def kernel_instructions(listing: str, symbol: str | None = None) -> list[Instruction]:
    """The instructions of kernel ``symbol`` in ``listing`` (the only kernel when ``symbol`` is None or absent).

    Raises:
        CubinError: no such kernel and not exactly one to fall back on.
    """
    kernels = parse_listing(listing)
    if symbol in kernels:
        return kernels[symbol]
    if len(kernels) == 1:
        return next(iter(kernels.values()))
    raise CubinError(f"no code section for kernel {symbol!r}; the listing has {', '.join(kernels) or 'none'}")


@dataclass
class SassDiff:
    """Two kernels' machine code compared: per-class counts (A, B), and the alignment as hunks.

    ``hunks``: ``(tag, a_instructions, b_instructions)`` with tag ``equal`` / ``replace`` / ``delete`` /
    ``insert`` (difflib's), over instructions normalised as in the module doc. ``identical``: the same normalised
    code (the variants differ at most in register numbering); ``same_bytes``: not even that.
    """
    a: list[Instruction]
    b: list[Instruction]
    classes: list[tuple[str, int, int]] = field(default_factory=list)
    hunks: list[tuple[str, list[Instruction], list[Instruction]]] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """True when the normalised instruction sequences are equal."""
        return all(tag == "equal" for tag, _, _ in self.hunks)

    @property
    def same_bytes(self) -> bool:
        """True when the instructions are equal as written (registers included)."""
        return [i.text() for i in self.a] == [i.text() for i in self.b]

    @property
    def changed(self) -> int:
        """Instructions on either side outside ``equal`` hunks (replaced, deleted or inserted)."""
        return sum(max(len(x), len(y)) for tag, x, y in self.hunks if tag != "equal")

    def lines(self, context: int = 2, limit: int = 200) -> list[str]:
        """The alignment as text: ``=`` runs of equal instructions summarised (with ``context`` shown at each
        edge), ``-`` A's side of a change, ``+`` B's (a replacement shows both); at most ``limit`` lines."""
        out = []
        for k, (tag, xs, ys) in enumerate(self.hunks):
            if tag == "equal":
                head = xs[:context] if k else []
                tail = xs[-context:] if k < len(self.hunks) - 1 else []
                if len(xs) <= len(head) + len(tail):
                    out += [f"    {i.address:#06x}  {i.text()}" for i in xs]
                    continue
                out += [f"    {i.address:#06x}  {i.text()}" for i in head]
                n = len(xs) - len(head) - len(tail)
                out.append(f"  = {n:,} instruction{'s' if n != 1 else ''} the same")
                out += [f"    {i.address:#06x}  {i.text()}" for i in tail]
                continue
            out += [f"  - A {i.address:#06x}  {i.text()}" for i in xs]
            out += [f"  + B {i.address:#06x}  {i.text()}" for i in ys]
        if len(out) > limit:
            out = out[:limit] + [f"  … {len(out) - limit} more lines (--full shows every line)"]
        return out


def diff_instructions(a: list[Instruction], b: list[Instruction]) -> SassDiff:
    """Compare two kernels' instructions (module doc)."""
    ca, cb = Counter(instruction_class(i.base) for i in a), Counter(instruction_class(i.base) for i in b)
    classes = [(name, ca.get(name, 0), cb.get(name, 0)) for name in (*(n for n, _ in CLASSES), "other")
               if ca.get(name) or cb.get(name)]
    sm = difflib.SequenceMatcher(a=[i.normalised() for i in a], b=[i.normalised() for i in b], autojunk=False)
    hunks: list[tuple[str, list[Instruction], list[Instruction]]] = [
        (tag, a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in sm.get_opcodes()]
    return SassDiff(a, b, classes, hunks)

"""What the analyses return: the result records ``report/`` renders, apart from the code that computes them.

The modules that make them import them from here (``from tileprobe.analyses.compare import Comparison`` still
works); :mod:`tileprobe.report` imports them from here and never a computing module (the ``report-renders-only``
contract in ``pyproject.toml``). What a renderer prints is computed when the record is made: a comparison's noise
tests (:class:`Change`), its advice (:class:`Comparison`), what changed between the compiler builds of the HTML
report (:class:`CompilerSteps`).

* compare (:mod:`tileprobe.analyses.compare`): :class:`Change`, :class:`Comparison`, :class:`CompilerSteps`;
* doctor: :class:`Finding`; gate: :class:`Expectation`, :class:`Failure`, :class:`GateResult`;
* history: :class:`History` (of :class:`StoredAudit`, :class:`StoredCompile`, :class:`StoredRun`); bisect: :class:`Step`, :class:`BisectResult`; bisect by time: :class:`ReleaseStep`,
  :class:`TimeBisectResult`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from tileprobe.analyses.noise import MIN_EFFECT
from tileprobe.records import Key, KeyedRecord

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.analyses.noise import TimeChange, TimeStats
    from tileprobe.schema import VariantRecord


# --- compare ------------------------------------------------------------------------------------------------------

MARKS = {"regression": "!", "improvement": "*", "changed": "x", "same": "=", "unmatched": "?"}


@dataclass
class Change:
    """One matched variant: its kind (regression/improvement/changed/same/unmatched) and what changed."""
    key: tuple
    a: VariantRecord | None
    b: VariantRecord | None
    kind: str = "same"
    details: list[str] = field(default_factory=list)
    severity: int = 9
    why: list[str] = field(default_factory=list)   # the reason of each judged or notable item
    weight: int = 0                                 # spill instructions added (regression) or removed, for order
    judged: int = 0                                 # the first ``judged`` details are the worse and better items
    #: The two sides' run times (:meth:`TimeStats.of <tileprobe.analyses.noise.TimeStats.of>` of ``a.run``,
    #: ``b.run``; None without a timed run) and their noise test (:func:`tileprobe.analyses.noise.time_change`
    #: whichever GPUs ran them; None unless both sides have times): what the renderers print beside a pair.
    time_a: TimeStats | None = None
    time_b: TimeStats | None = None
    time: TimeChange | None = None
    #: Instruction families (SASS base opcodes, ``SassFacts.opcodes``) on one side only: ``(opcode, count in A,
    #: count in B)``, one of the counts 0, sorted by opcode; empty when either side's opcodes were not read.
    families: tuple[tuple[str, int, int], ...] = ()

    @property
    def mark(self) -> str:
        """The one-character mark of :attr:`kind` (:data:`MARKS`)."""
        return MARKS[self.kind]

    def label(self) -> str:
        """``kernel arch NAME=VALUE …`` (case constants, then hints; ``declared hints`` when there are none); a hint
        left to the kernel reads ``occupancy=hint-less`` or ``occupancy=16 (declared)``, as in the tables."""
        r = self.a if self.a is not None else self.b
        if r is None:
            return "(no record)"
        from tileprobe.select import format_value

        def hint(k: str, v) -> str:   # a value left to the kernel reads as the tables write it (report.common)
            if v is not None:
                return format_value(v)
            declared = r.effective_hints.get(k)
            return "hint-less" if declared is None else f"{format_value(declared)} (declared)"
        parts = [f"{k}={format_value(v)}" for k, v in r.case.items()] + [f"{k}={hint(k, v)}"
                                                                          for k, v in r.hints.items()]
        return f"{r.kernel} {r.arch} " + (" ".join(parts) or "declared hints")


def to_json(changes: list[Change]) -> list[dict]:
    """JSON-ready rows: kind, mark, variant label, details, why, and both records."""
    return [{"kind": c.kind, "mark": c.mark, "variant": c.label(), "details": c.details, "why": c.why,
             "a": c.a.to_dict() if c.a else None, "b": c.b.to_dict() if c.b else None} for c in changes]


@dataclass
class ChangeGroup:
    """The changed variants of a comparison that share one kind of change (:func:`group_changes`; :mod:`tileprobe.analyses.compare` re-exports it).

    Attributes:
        topic: what changed, in the words of the details (``instructions``, ``registers``, ``spills``,
            ``occupancy honoured → met``, ``MMA HMMA → HGMMA``, ``machine code only``…).
        changes: the :class:`Change` s with it (a variant is in one group per topic it has).
        deltas: B − A of the topic's number per change, where the topic has one (instructions, registers, threads,
            shared B, stack B, CTAs/SM; LDL+STL for spills; TMA instructions), else empty.
        before, after: the A and B values of those numbers (same order as ``deltas``).
    """
    topic: str
    changes: list[Change] = field(default_factory=list)
    deltas: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)


#: Topics with a number before and after (``registers 126 → 128``), in the order groups are listed.
_NUMERIC_TOPICS = ("instructions", "registers", "CTAs/SM", "threads", "shared B", "stack B")
_ARROW = re.compile(r"(-?[\d,]+)(?: LDL/(\d+) STL)? → (-?[\d,]+)(?: LDL/(\d+) STL)?")
CODE_ONLY = "machine code only (same size and resources)"
#: The topic of SASS base opcodes in one side's code only (:attr:`Change.families`).
FAMILIES = "instruction families"


def change_topic(detail: str) -> str:
    """The kind of one change detail (:attr:`Change.details`): its numeric topic (``instructions``, ``registers`` …),
    ``spills``, ``stack``, the MMA switch without its TMA count, ``TMA``, ``register cap (.maxnreg)``, ``machine
    code only`` for ``machine code differs``, else the detail itself (status, run and verdict transitions,
    ``occupancy honoured → met``)."""
    for t in _NUMERIC_TOPICS:
        if detail.startswith(t + " "):
            return t
    if detail.startswith("spills "):
        return "spills"
    if detail.startswith("stack "):
        return "stack"
    if detail.startswith("MMA "):
        return detail.split(",")[0]
    if detail.startswith("TMA "):
        return "TMA"
    if detail.startswith("register cap"):
        return "register cap (.maxnreg)"
    if detail == "machine code differs":
        return CODE_ONLY
    if detail.startswith(FAMILIES + " "):
        return FAMILIES
    return detail


def _merge_families(groups: dict[str, ChangeGroup]) -> list[ChangeGroup]:
    """The groups with the per-family ones (keyed ``+MUFU`` / ``−SHFL``) merged where the same variants added or
    dropped them: one ``instruction families added: F2I, I2FP, MUFU; dropped: SHFL`` group per set of variants."""
    out = [g for key, g in groups.items() if g.topic != FAMILIES]
    merged: dict[tuple[int, ...], tuple[list[str], list[str], list[Change]]] = {}
    for key, g in groups.items():
        if g.topic == FAMILIES:
            added, dropped, changes = merged.setdefault(tuple(id(c) for c in g.changes), ([], [], g.changes))
            (added if key[0] == "+" else dropped).append(key[1:])
    for added, dropped, changes in merged.values():
        words = ([f"added: {', '.join(added)}"] if added else []) + ([f"dropped: {', '.join(dropped)}"] if dropped
                                                                     else [])
        out.append(ChangeGroup(f"{FAMILIES} {'; '.join(words)}", changes))
    return out


def group_changes(changes: Sequence[Change], kinds: Sequence[str] = ("changed",)) -> list[ChangeGroup]:
    """The changes of ``kinds`` grouped by topic (:func:`change_topic`), the most variants first (numeric topics
    in :data:`_NUMERIC_TOPICS` order among equals): what ``compare`` and the reports print one line each for,
    instead of a line per variant (``--details`` lists every variant)."""
    groups: dict[str, ChangeGroup] = {}
    for c in changes:
        if c.kind not in kinds:
            continue
        for d in c.details:
            topic = change_topic(d)
            if topic == FAMILIES:
                for op, na, _ in c.families:
                    groups.setdefault(("−" if na else "+") + op, ChangeGroup(FAMILIES)).changes.append(c)
                continue
            g = groups.setdefault(topic, ChangeGroup(topic))
            if g.changes and g.changes[-1] is c:
                continue
            g.changes.append(c)
            m = _ARROW.search(d)
            if m and (topic in _NUMERIC_TOPICS or topic in ("spills", "TMA")):
                a = int(m.group(1).replace(",", "")) + int(m.group(2) or 0)
                b = int(m.group(3).replace(",", "")) + int(m.group(4) or 0)
                g.before.append(a)
                g.after.append(b)
                g.deltas.append(b - a)
    order = {t: i for i, t in enumerate(_NUMERIC_TOPICS)}
    return sorted(_merge_families(groups), key=lambda g: (-len(g.changes), order.get(g.topic, len(order)), g.topic))


@dataclass
class Comparison:
    """What :func:`~tileprobe.analyses.compare.compare_results` found: the :class:`Change` s (regressions first),
    the names of sides A and B, the environment of the audit or file they came from (``{}`` for two files), and
    with ``probe`` the audited records (both compilers)."""
    changes: list[Change]
    name_a: str
    name_b: str
    environment: dict = field(default_factory=dict)
    audited: list[VariantRecord] = field(default_factory=list)
    total: int | None = None     # variants compared before :meth:`only` filtered them (None: not filtered)
    #: With ``probe``: the static advice over the audited records ``where`` selects (``compare --tables`` prints
    #: it under their tables).
    advice: list[str] = field(default_factory=list)
    #: The smallest move of the median that counts as a time change (the noise rule's, :data:`MIN_EFFECT`).
    min_effect: float = MIN_EFFECT

    @property
    def timed(self) -> bool:
        """True when some variant has a timed GPU run on both sides (then compare reports times)."""
        return any(c.a is not None and c.b is not None and c.time_a and c.time_b for c in self.changes)

    def to_json(self) -> list[dict]:
        """:func:`to_json` of the changes (what ``--json`` writes)."""
        return to_json(self.changes)

    def only(self, kinds: Sequence[str] = ("regression",), where: dict | None = None) -> Comparison:
        """A copy keeping the changes of these ``kinds`` (``compare --regressions``) whose variants match
        ``where`` (:mod:`tileprobe.select`); ``total`` keeps the count before filtering."""
        from tileprobe.select import matches
        kept = [c for c in self.changes if c.kind in kinds and (not where or matches(c.a or c.b, where))]
        return Comparison(kept, self.name_a, self.name_b, self.environment, self.audited,
                          total=self.total if self.total is not None else len(self.changes), advice=self.advice,
                          min_effect=self.min_effect)


@dataclass
class CompilerSteps:
    """What changed between consecutive compiler builds among one kernel's records (the HTML report's first
    section, :func:`tileprobe.analyses.compare.compiler_steps`): the builds ``left_out`` of the comparison (none
    of their variants audited with another build: no partner) with their variant counts, and
    each compared pair, oldest first, as (older build, newer build, its :class:`Change` s, regressions first)."""
    left_out: list[tuple[str, int]] = field(default_factory=list)
    steps: list[tuple[str, str, list[Change]]] = field(default_factory=list)


# --- doctor -------------------------------------------------------------------------------------------------------

#: A :class:`Finding`'s levels.
LEVELS = ("ok", "warn", "error")


@dataclass(frozen=True)
class Finding:
    """One diagnosis. ``level``: ok | warn | error; ``topic``: what it is about (``"CUDA_HOME"``, ``"pip packages"``,
    …); ``message``: what was seen; ``fix``: what to do ("" when nothing is needed)."""
    level: str
    topic: str
    message: str
    fix: str = ""

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"Finding.level must be one of {LEVELS}, got {self.level!r}")


# --- gate ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expectation:
    """One parsed expectation. kind: verdict | took_effect | not_ignored | compiles | no_crash | no_hang | correct |
    no_spills | no_hang_risk | compare | time."""
    text: str
    kind: str
    field: str = ""
    op: str = ""
    value: float | None = None      # NUMBER; None for baseline comparisons
    baseline_pct: float = 0.0       # time <= baseline + N%

    @property
    def uses_baseline(self) -> bool:
        """Whether the expectation compares with the ``--baseline`` record (``FIELD OP baseline``)."""
        return self.kind in ("compare", "time") and self.value is None


@dataclass
class Failure:
    """One expectation that one variant (or the selection) does not meet.

    ``unchecked``: the expectation could not be checked (no run records, no baseline record).
    """
    expectation: str
    variant: str
    expected: str
    got: str
    reason: str = ""
    unchecked: bool = False

    def __str__(self) -> str:
        head = "cannot check" if self.unchecked else f"expected {self.expected}, got {self.got}"
        return f"{self.variant}: {head}" + (f" — {self.reason}" if self.reason else "")


@dataclass
class GateResult:
    """What a gate checked: the selected records, the expectations and the failures."""
    records: list[VariantRecord]
    expectations: list[Expectation]
    failures: list[Failure] = field(default_factory=list)
    allow_unchecked: bool = False

    @property
    def passed(self) -> bool:
        """True when every failure is an unchecked one and ``allow_unchecked`` lets those pass."""
        return not [f for f in self.failures if not (f.unchecked and self.allow_unchecked)]

    def to_dict(self) -> dict:
        """``{"passed", "expectations", "failures", "variants"}`` (what ``tileprobe gate --json`` writes)."""
        return {"passed": self.passed, "expectations": [e.text for e in self.expectations],
                "failures": [f.__dict__ for f in self.failures], "variants": [r.to_dict() for r in self.records]}


# --- history ------------------------------------------------------------------------------------------------------

class StoredAudit(KeyedRecord):
    """One stored audit (a :meth:`Store.audits` row, read as it comes: key order and keys the store adds kept).
    ``created``: ISO time (UTC); ``wall_s``: the audit's wall time (s); ``compile_keys``: its compiles, in order."""
    __slots__ = ()
    id = Key[int | None]()
    created = Key[str | None]()
    host = Key[str | None]()
    tileprobe = Key[str | None]()
    command_line = Key[str | None]()
    n_variants = Key[int | None]()
    wall_s = Key[float | None]()
    environment = Key[dict | None]()
    compile_keys = Key[list | None]()


class StoredCompile(KeyedRecord):
    """One stored compile (a :meth:`Store.compiles` row: provenance, resources and its newest run's median in µs and
    GPU). ``case``/``hints``: ``{name: value}``; ``reg_pool``: the register-pool verdict (``hang_risk`` …)."""
    __slots__ = ()
    key = Key[str | None]()
    created = Key[str | None]()
    host = Key[str | None]()
    kernel = Key[str | None]()
    probe = Key[str | None]()
    case = Key[dict | None]()
    hints = Key[dict | None]()
    arch = Key[str | None]()
    tileiras = Key[str | None]()
    cuda_tile = Key[str | None]()
    status = Key[str | None]()
    failure = Key[str | None]()        # the failure class (unsupported_feature …), None when ok
    registers = Key[int | None]()
    ctas_per_sm = Key[int | None]()
    compile_s = Key[float | None]()
    reg_pool = Key[str | None]()
    median_us = Key[float | None]()
    gpu = Key[str | None]()


class StoredRun(KeyedRecord):
    """One stored GPU run (a :meth:`Store.runs` row) with its compile's kernel, case, hints, arch and tileiras;
    ``gpu``: the GPU's name; ``median_us`` in µs."""
    __slots__ = ()
    id = Key[int | None]()
    compile_key = Key[str | None]()
    created = Key[str | None]()
    host = Key[str | None]()
    gpu = Key[str | None]()
    driver = Key[str | None]()
    status = Key[str | None]()
    median_us = Key[float | None]()
    kernel = Key[str | None]()
    case = Key[dict | None]()
    hints = Key[dict | None]()
    arch = Key[str | None]()
    tileiras = Key[str | None]()


@dataclass
class History:
    """What a store holds, newest first: its audits, compiles and runs (rows read once into records by
    :func:`tileprobe.analyses.history.history`) of the store at path ``store``."""
    store: str
    audits: list[StoredAudit] = field(default_factory=list)
    compiles: list[StoredCompile] = field(default_factory=list)
    runs: list[StoredRun] = field(default_factory=list)
    #: One line per listed audit that ``store prune`` took variants from (``"15 variants of audit 1 were pruned
    #: (`tileprobe store prune`)"``): its count above is of what is still stored.
    pruned: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """``{"store", "audits", "compiles", "runs", "pruned"}`` (JSON-ready: the rows as the store gave them)."""
        return {"store": self.store, "audits": [a.to_dict() for a in self.audits],
                "compiles": [c.to_dict() for c in self.compiles], "runs": [r.to_dict() for r in self.runs],
                "pruned": list(self.pruned)}


# --- bisect -------------------------------------------------------------------------------------------------------

@dataclass
class Step:
    """One bisection step: the release, whether the property held, the selected records' summary
    (``threads × regs, shared B, CTA/SM, verdicts``) and the gate's failure lines when it did not hold."""
    version: str
    holds: bool
    summary: str
    detail: list[str] = field(default_factory=list)
    measured: str = ""             # the property's own value, e.g. "3323 LDL/3317 STL, 8,720 B stack"
    parts: dict = field(default_factory=dict)      # toolkit parts it ran with: tileiras, ptxas (nvcc), nvvm
    warnings: list[str] = field(default_factory=list)   # e.g. machine code that differs between compiles


@dataclass
class BisectResult:
    """The steps in the order run, the last release like GOOD and the first like BAD, the property tested and
    the candidate releases (GOOD first)."""
    steps: list[Step]
    last_good: str
    first_bad: str
    prop: str
    versions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """``{"property", "first_bad", "last_good", "steps": [Step fields], "warnings"}`` (what ``--json``
        writes)."""
        return {"property": self.prop, "first_bad": self.first_bad, "last_good": self.last_good,
                "steps": [asdict(s) for s in self.steps], "warnings": self.warnings()}

    def warnings(self) -> list[str]:
        """What weakens the answer: the last good and first bad releases ran with other ptxas or nvvm
        releases (then a tileiras change cannot be told from a ptxas or nvvm change), a part whose release differs
        from its tileiras release, and steps whose machine code differed between compiles."""
        by = {s.version: s for s in self.steps}
        good, bad = by.get(self.last_good), by.get(self.first_bad)
        out = []
        if good and bad and good.parts and bad.parts:
            moved = [f"{k} {good.parts.get(k)} → {bad.parts.get(k)}" for k in ("ptxas", "nvvm")
                     if good.parts.get(k) != bad.parts.get(k)]
            if moved:
                out.append(f"tileiras {self.last_good} → {self.first_bad} also changed {', '.join(moved)}: the change "
                           "may come from those, not from tileiras")
        for s in self.steps:
            other = [f"{k} {v}" for k, v in s.parts.items() if k not in ("tileiras", "bytecode") and v and v != s.version]
            if other and s.version in (self.last_good, self.first_bad):
                out.append(f"tileiras {s.version} ran with {', '.join(other)} (the newest of its major.minor, not "
                           "necessarily the release it came with)")
            out.extend(f"tileiras {s.version}: {w}" for w in s.warnings)
        return list(dict.fromkeys(out))


@dataclass
class ReleaseStep:
    """One release on the GPU: whether the property held (for every selected variant), the summary per variant."""
    version: str
    holds: bool
    summary: str
    detail: list[str] = field(default_factory=list)


@dataclass
class TimeBisectResult:
    """Every release's step (release order, GOOD first), the first release where the property does not hold
    (None: nothing moved), the last one before it that held, the property, the skipped releases and the rounds."""
    steps: list[ReleaseStep]
    first_bad: str | None
    last_good: str | None
    prop: str
    skipped: dict[str, str] = field(default_factory=dict)
    rounds: int = 1
    environment: dict = field(default_factory=dict)

    def conclusion(self) -> str:
        """The one-line answer."""
        if self.first_bad is None:
            return (f"`{self.prop}` holds at every release ({', '.join(s.version for s in self.steps)}): nothing "
                    "moved beyond noise")
        return f"first release where `{self.prop}` fails: tileiras {self.first_bad} (last that held: {self.last_good})"

    def to_dict(self) -> dict:
        """``{"property", "first_bad", "last_good", "rounds", "skipped", "steps": [...]}`` (``--json``)."""
        return {"property": self.prop, "first_bad": self.first_bad, "last_good": self.last_good,
                "rounds": self.rounds, "skipped": self.skipped, "steps": [asdict(s) for s in self.steps]}

"""What a reduction keeps: a property of the selected variants under one compiler, or a difference between two.

Forms (``--property``), each checked on the variants ``--where`` selects:

* every ``tileprobe gate --expect`` form (:func:`tileprobe.analyses.gate.parse_expectation`): ``occupancy
  honoured``, ``no spills``, ``no hang risk``, ``registers<=128``, ``compiles``, ``no crash`` …;
* ``HINT ignored`` (the hint's verdict is ``ignored``/``unchanged``: the negation of ``HINT not ignored``),
  ``spills`` (negation of ``no spills``), ``hang risk`` (negation of ``no hang risk``), ``not FORM``;
* a compile failure kept by its signature: ``compiler crash`` (tileiras killed by a signal, the record's
  ``failure`` is ``compiler_crash``), ``compile error`` (any compile error), or either followed by a quoted text
  that the compiler's message must contain (``compile error "failed to compile Tile IR"``). A candidate that
  fails for another reason (cuTile rejects it, another message) does not hold the property.

Under two compilers (``--good G --bad B``) a candidate is kept when the property's value differs between them
the same way as on the original kernel (e.g. honoured under G and ignored under B).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tileprobe.errors import UsageError, shown

_FAIL = re.compile(r'^(compiler crash|compile error|compile failure)(?:\s+["\'](.+)["\'])?$', re.I)
_NEGATIONS = {"spills": "no spills", "hang risk": "no hang risk", "hang_risk": "no hang risk",
              "crash": "no crash"}


@dataclass(frozen=True)
class Property:
    """One parsed ``--property``: a gate expectation (``expect``) possibly negated, or a failure signature.

    ``failure``: ``"compiler_crash"`` or ``"compile_error"`` for the failure forms (``text``: what the message
    must contain, case-insensitive), else ``""``."""
    text: str
    expect: str = ""
    negated: bool = False
    failure: str = ""
    needle: str = ""

    @property
    def needs_sass(self) -> bool:
        """Whether checking it needs the SASS read (the register-pool check, spill counts)."""
        return "hang risk" in self.expect or "spill" in self.expect


def parse_property(text: str) -> Property:
    """Parse ``--property`` (module doc for the forms).

    Raises:
        UsageError: a form neither the gate nor this module knows (the message lists the gate's forms).
    """
    from tileprobe.analyses.gate import GateError, forms, parse_expectation
    t = " ".join(str(text).split())
    low = t.lower()
    m = _FAIL.match(t)
    if m:
        kind = "compiler_crash" if m.group(1).lower() == "compiler crash" else "compile_error"
        return Property(t, failure=kind, needle=m.group(2) or "")
    negated = False
    if low.startswith("not "):
        negated, low = True, low[4:]
    if low in _NEGATIONS:
        negated, low = not negated, _NEGATIONS[low]
    elif low.endswith(" ignored") and len(low.split()) == 2:
        negated, low = not negated, low.replace(" ignored", " not ignored")
    try:
        parse_expectation(low)
    except GateError as e:
        raise UsageError(f"--property {shown(t, quote=True)}: {e}\nforms: the gate's (below), 'HINT ignored', 'spills', "
                         f"'hang risk', 'not FORM', 'compiler crash', 'compile error \"TEXT\"'\n{forms()}") from None
    return Property(t, expect=low, negated=negated)


@dataclass(frozen=True)
class Judgement:
    """Whether a property holds on one candidate's selected records under one compiler, and the audit line that
    shows why (the record's measured value, or the compiler's first message line). A property that cannot be
    checked (an ``unverified`` verdict, an ``unknown`` register pool) has ``holds`` False and a line starting with
    :data:`UNCHECKED`: such a candidate is never interesting, whichever value the property must have."""
    holds: bool
    line: str

    @property
    def checked(self) -> bool:
        """False when the property could not be checked (see class doc)."""
        return checked(self.line)


#: How the line of a judgement that could not be checked starts.
UNCHECKED = "cannot check: "


def checked(line: str) -> bool:
    """Whether a judgement's ``line`` says the property was checked (journalled answers keep only the line)."""
    return not line.startswith(UNCHECKED)


def judge(prop: Property, records: Sequence) -> Judgement:
    """Check ``prop`` on ``records`` (the variants ``--where`` selected, one compiler). No record: does not hold
    (a candidate whose probe did not load, or cuTile rejected before any variant, is not interesting)."""
    from tileprobe.analyses.bisect import _summary, measured
    from tileprobe.analyses.gate import check
    if not records:
        return Judgement(False, "no variant (the candidate did not load or compile)")
    line = "; ".join(dict.fromkeys(_summary(r) for r in records))
    if prop.failure:
        holds = all(_fails_like(prop, r) for r in records)
        return Judgement(holds, line)
    if any(not r.ok for r in records) and prop.expect not in ("compiles", "no crash"):
        return Judgement(False, line)
    failures = check(records, [prop.expect])
    if any(f.unchecked for f in failures):
        return Judgement(False, f"{UNCHECKED}{failures[0]}")
    holds = not failures
    detail = "; ".join(dict.fromkeys(measured(prop.expect, r) for r in records))
    return Judgement(holds != prop.negated, f"{detail} ({line})" if detail else line)


def _fails_like(prop: Property, r) -> bool:
    if r.ok:
        return False
    if prop.failure == "compiler_crash" and r.failure != "compiler_crash":
        return False
    if prop.failure == "compile_error" and r.failure not in ("compile_error", "compiler_crash"):
        return False
    text = f"{r.message or ''}\n{r.error or ''}".lower()
    return prop.needle.lower() in text

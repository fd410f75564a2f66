"""The variant selection every command shares: ``--where NAME=VALUE,…`` and the ``--case`` / ``--hint`` overrides.

``--where "GATHER=True,TILE=128×128,occupancy=2"`` selects the variants whose case constants and hint values
(kernel hints, per-load knobs) equal every item. A value is written as the tables print it (``128×128``,
``True``, ``fp16``) or as Python (``(128, 128)``, ``[128, 128]``, ``'fp16'``, ``None``); commas inside brackets or
quotes do not split items. Tuples and lists are the same value (records keep tuples as JSON lists).

``--case TILE=64,128`` and ``--hint occupancy=1,2`` replace (or, for a hint the probe does not list, add) the
values a probe crosses: :func:`parse_overrides` reads them and :func:`apply_overrides` makes the probes.

Errors are :class:`WhereError` (a :class:`~tileprobe.errors.UsageError`: exit 2): the message names the text, what is
wrong and what would be accepted; :func:`no_match_message` lists the values the candidates have.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tileprobe.errors import ProbeError, UsageError, shown
from tileprobe.model.hints import KERNEL_HINTS, LOAD_KNOBS, check_hints

__all__ = [
    "WhereError",
    "apply_overrides",
    "case_filter",
    "case_selector",
    "check_case_names",
    "check_names",
    "check_overrides",
    "format_value",
    "matches",
    "no_case_match",
    "no_match_message",
    "parse_overrides",
    "parse_value",
    "parse_where",
    "same_value",
    "select",
    "split_items",
]

_DIMS = re.compile(r"^\s*-?\d+(?:\s*[×x]\s*-?\d+)+\s*$")


class WhereError(UsageError):
    """A ``--where`` / ``--case`` / ``--hint`` text that cannot be read, names nothing, or matches nothing: a
    command-line error, so the CLI exits 2 (:data:`tileprobe.errors.EXIT_USAGE`), as argparse does."""


def split_items(text: str) -> list[str]:
    """Split on commas that are not inside brackets or quotes: ``"A=(1,2),B=3"`` → ``["A=(1,2)", "B=3"]``."""
    items: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text or "":
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    items.append("".join(cur).strip())
    return [i for i in items if i]


def parse_value(text: str) -> Any:
    """One value: ``128×128`` / ``128x128`` → ``[128, 128]``; a Python literal (tuples → lists); else the text."""
    text = text.strip()
    if _DIMS.match(text):
        return [int(p) for p in re.split(r"\s*[×x]\s*", text)]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return json.loads(json.dumps(value, default=str))


def format_value(value: Any) -> str:
    """A value as the tables print it (``[128, 128]`` → ``128×128``)."""
    if isinstance(value, (list, tuple)):
        return "×".join(map(str, value))
    return str(value)


def parse_where(text: str | None, option: str = "--where") -> dict[str, Any]:
    """``"GATHER=True,TILE=(128,128),occupancy=2"`` → ``{"GATHER": True, "TILE": [128, 128], "occupancy": 2}``.

    Raises:
        WhereError: an item that is not ``NAME=VALUE`` (the message shows the accepted spellings); a given text
            with no item (``""``, ``",,"``); a name given twice (a variant has one value of each).
    """
    out: dict[str, Any] = {}
    example = (f"e.g. {option} \"GATHER=True,TILE=128×128,occupancy=2\" (tuples as the tables print them, 128×128, "
               "or as Python, (128,128))")
    items = split_items(text or "")
    if text is not None and not items:
        raise WhereError(f"{option} {shown(text, quote=True)} names nothing; {example}")
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise WhereError(f"{option} {shown(text, quote=True)}: {shown(item, quote=True)} is not NAME=VALUE; "
                             f"{example}")
        name = name.strip()
        if name in out:
            raise WhereError(f"{option} {shown(text, quote=True)} gives {shown(name)} twice "
                             f"({shown(format_value(out[name]))} and {shown(value.strip())}); a variant has one value "
                             "of each: select one value per name")
        out[name] = parse_value(value)
    return out


def same_value(actual: Any, wanted: Any) -> bool:
    """Whether a record's value equals a selection value (tuples = lists; ``True`` ≠ ``1``; else by text)."""
    actual = json.loads(json.dumps(actual, default=str))
    wanted = json.loads(json.dumps(wanted, default=str))
    if isinstance(actual, bool) != isinstance(wanted, bool):
        return str(actual) == str(wanted)
    return actual == wanted or format_value(actual) == format_value(wanted)


def _value_of(r, name: str) -> Any:
    return r.case[name] if name in r.case else r.hint(name)


def matches(r, where: Mapping[str, Any]) -> bool:
    """Whether record ``r`` (a :class:`~tileprobe.schema.VariantRecord`) has every ``where`` value."""
    return all(same_value(_value_of(r, k), v) for k, v in where.items())


def matches_values(case: Mapping[str, Any], hints: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """:func:`matches` for plain ``case`` and ``hints`` dicts (stored rows); a name in neither does not match."""
    values = {**hints, **case}
    return all(k in values and same_value(values[k], v) for k, v in where.items())


def select(records: Iterable, where: Mapping[str, Any] | None) -> list:
    """The records that match ``where`` (all of them when it is empty or None)."""
    return [r for r in records if matches(r, where or {})]


def check_names(where: Mapping[str, Any], case_names: Iterable[str], hint_names: Iterable[str],
                option: str = "--where") -> None:
    """Refuse names that are neither a case constant nor a hint.

    Raises:
        WhereError: naming the unknown names, the case constants and the hints.
    """
    cases, hints = sorted(set(case_names)), list(dict.fromkeys(hint_names))
    bad = [k for k in where if k not in cases and k not in hints]
    if bad:
        raise WhereError(f"{option} names {named_with_near(bad, cases + hints)}, which is neither a case constant of "
                         f"the probe ({', '.join(cases) or 'none'}) nor a hint ({', '.join(hints)})")


def named_with_near(bad: Sequence[str], known: Sequence[str]) -> str:
    """``'occupncy' (did you mean 'occupancy'?), 'X'``: each unknown name quoted, with the closest ``known`` name
    when one is close (:func:`difflib.get_close_matches`, cutoff 0.6)."""
    import difflib

    def one(name: str) -> str:
        near = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
        return f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
    return ", ".join(one(n) for n in bad)


def natural_key(v: Any) -> tuple:
    """Sort key: numbers by value, sequences of numbers (tiles) element by element, the rest by text."""
    def num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if num(v):
        return (0, (v,), "")
    if isinstance(v, (list, tuple)) and v and all(num(x) for x in v):
        return (0, tuple(v), "")
    return (1, (), str(v))


def distinct(values: Iterable[Any]) -> list:
    """``values`` once each, in first-seen order; values with equal JSON text are one (``(1, 2)`` and ``[1, 2]``)."""
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault(json.dumps(v, sort_keys=True, default=str), v)
    return list(seen.values())


def takes_text(name: str, values: Iterable[Any]) -> str:
    """``occupancy takes 1, 2, 4``: the distinct ``values`` in natural order (:func:`natural_key`)."""
    vals = sorted(distinct(values), key=natural_key)
    return f"{name} takes {', '.join(format_value(v) for v in vals) or 'no value'}"


def values_text(records: Sequence, names: Iterable[str]) -> str:
    """``TILE takes 64×64, 128×128; occupancy takes 1, 2, 4``: the values the records have, per name."""
    return "; ".join(takes_text(k, (_value_of(r, k) for r in records)) for k in names)


def no_match_message(where: Mapping[str, Any], records: Sequence, option: str = "--where") -> str:
    """What to say when ``where`` selects none of ``records``: the selection and the values there are."""
    text = ",".join(f"{k}={format_value(v)}" for k, v in where.items())
    return (f"{option} {text} matches none of the {len(records)} variant(s); {values_text(records, where) or 'none'}")


def select_or_explain(records: Sequence, where: Mapping[str, Any] | None, option: str = "--where") -> list:
    """:func:`select`, raising when a non-empty ``where`` matches nothing.

    Raises:
        WhereError: :func:`no_match_message`.
    """
    chosen = select(records, where)
    if where and not chosen and records:
        raise WhereError(no_match_message(where, records, option))
    return chosen


# --- --case / --hint -------------------------------------------------------------------------------------------------

def parse_overrides(items: Sequence[str] | None, option: str) -> dict[str, list]:
    """``["TILE=64,128", "OTHER=(1,2),(3,4)"]`` → ``{"TILE": [64, 128], "OTHER": [[1, 2], [3, 4]]}``.

    Raises:
        WhereError: an item that is not ``NAME=V1,V2,…``.
    """
    out: dict[str, list] = {}
    for item in items or ():
        name, eq, values = item.partition("=")
        vals = split_items(values)
        if not eq or not name.strip() or not vals:
            raise WhereError(f"{option} {item!r}: write NAME=V1,V2,… e.g. {option} "
                             f"{'occupancy=1,2' if option == '--hint' else 'TILE=128×128,256×256'}")
        name = name.strip()
        if name in out:
            raise WhereError(f"{option} {name}= is given twice; list its values once: {option} {name}=V1,V2,…")
        out[name] = distinct(parse_value(v) for v in vals)     # a value listed twice is one variant, compiled once
    return out


def apply_overrides(probes: Sequence, cases: Mapping[str, list] | None = None,
                    hints: Mapping[str, list] | None = None, *, check: bool = True) -> list:
    """Copies of ``probes`` with ``cases`` values replacing theirs and ``hints`` replacing or adding hint values.

    A case name no probe has is refused (its ``args`` would not know it; ``check=False`` leaves that to the caller,
    e.g. the loader of one file among several); a hint is checked by
    :class:`~tileprobe.probe.define.Probe` (the kernel hints cuTile takes).

    A value given as text for a constant the probes declare only booleans (or only whole numbers) for is read as
    a boolean when it is ``true``/``false`` in any case, else refused (:func:`check_case_values`), with or without
    ``check``.

    Raises:
        WhereError: a case constant none of the probes declares; a value of the wrong kind. ProbeError: a hint cuTile
            does not take.
    """
    cases, hints = dict(cases or {}), dict(hints or {})
    if not cases and not hints:
        return list(probes)
    if check:
        check_case_names(cases, probes)
    cases = check_case_values(cases, probes)
    cases = {k: [tuple(x) if isinstance(x, list) else x for x in v] for k, v in cases.items()}
    out = []
    for p in probes:
        mine = {k: v for k, v in cases.items() if k in p.cases}
        q = dataclasses.replace(p, cases={**p.cases, **mine}, hints={**p.hints, **hints})
        q.source, q.index = p.source, p.index
        out.append(q)
    return out


def check_overrides(cases: Mapping[str, list] | None, hints: Mapping[str, list] | None) -> None:
    """Refuse ``--hint`` names and values cuTile would refuse (:func:`tileprobe.model.hints.check_hints`), before any
    probe is loaded. (``--case`` names are checked against the probes: :func:`check_case_names`.)

    Raises:
        WhereError: the hint, the value and the allowed ones.
    """
    try:
        check_hints({k: list(v) for k, v in (hints or {}).items()})
    except ProbeError as e:
        raise WhereError(f"--hint: {e}") from e


def check_case_names(cases: Mapping[str, list] | None, probes: Sequence) -> None:
    """Refuse ``--case`` names that none of ``probes`` (:class:`~tileprobe.probe.define.Probe` s or plans) declares.

    Raises:
        WhereError: naming them and the case constants there are.
    """
    known = {c for p in probes for c in p.cases}
    bad = [c for c in (cases or {}) if c not in known]
    if bad:
        raise WhereError(f"--case names {named_with_near(bad, sorted(known))}, which no probe declares in cases= "
                         f"({', '.join(sorted(known)) or 'none'})")


def check_case_values(cases: Mapping[str, list], probes: Sequence) -> dict[str, list]:
    """``cases`` with each value of a constant the probes declare only booleans for read as a boolean (``true``,
    ``False``: any case), and refused when it is of another kind (text, ``None``, a number), as for a constant
    declared only with whole numbers: such a value reached the kernel, and cuTile's refusal blamed the probe.

    Raises:
        WhereError: the constant, the value given, what it takes (the probe's values), a near spelling.
    """
    out = {}
    for name, values in cases.items():
        declared = [v for p in probes for v in p.cases.get(name, ())]
        kind = _one_kind(declared)
        fixed = []
        for v in values:
            if kind is bool and isinstance(v, str) and v.strip().lower() in ("true", "false"):
                v = v.strip().lower() == "true"
            if kind is not None and _one_kind([v]) is not kind:   # None, 1, 1.0, 0x1 (read as 0×1) for a boolean
                words = "True or False" if kind is bool else "whole numbers"
                given = named_with_near([v], ["True", "False"]) if kind is bool and isinstance(v, str) else repr(v)
                raise WhereError(f"--case {name}={format_value(v)}: {name} takes {words} (the probe's values: "
                                 f"{', '.join(format_value(x) for x in distinct(declared))}), not "
                                 f"{'the text ' if isinstance(v, str) else ''}{given}")
            fixed.append(v)
        out[name] = fixed
    return out


def _one_kind(values: Sequence) -> type | None:
    """bool when every value is a boolean, int when every one is a whole number (not a boolean), else None."""
    if values and all(isinstance(v, bool) for v in values):
        return bool
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return int
    return None


def case_selector(where: Mapping[str, Any] | None, probes: Sequence, option: str = "--where"):
    """A predicate on variants for the case items of ``where`` (hint items, and case constants that carry a
    per-load knob — ``knobs={"allow_tma": "ALLOW_TMA"}`` — are left to the records: verdicts need every value of a
    hint or a knob; a new user, 2026-12-02: ``--where ALLOW_TMA=False`` turned "allow_tma honoured" into
    "ignored"), after checking every name against ``probes``; None when ``where`` has no such case item.

    Raises:
        WhereError: a name that is neither a case constant, a kernel hint nor a per-load knob.
    """
    where = dict(where or {})
    if not where:
        return None
    check_names(where, {c for p in probes for c in p.cases}, [*KERNEL_HINTS, *LOAD_KNOBS], option)
    _check_hint_values(where, probes, option)
    knob_cases = {c for p in probes for c in (getattr(p, "knobs", None) or {}).values()}
    case_items = {k: v for k, v in where.items() if any(k in p.cases for p in probes) and k not in knob_cases}
    if not case_items:
        return None
    return lambda v: all(same_value(v.case_dict.get(k), want) for k, want in case_items.items())


def _check_hint_values(where: Mapping[str, Any], probes: Sequence, option: str) -> None:
    """Refuse, before compiling, a hint item of ``where`` whose value no probe plans (it would select nothing once
    every variant had been compiled); names no probe gives values for are left to the records."""
    for name, want in where.items():
        if any(name in p.cases for p in probes):
            continue
        planned = distinct(x for p in probes for x in (p.hints or {}).get(name, ()))
        if planned and not any(same_value(x, want) for x in planned):
            raise WhereError(f"{option} {shown(f'{name}={format_value(want)}')} matches none of the planned variants; "
                             f"{takes_text(name, planned)}")


def no_case_match(where: Mapping[str, Any], probes: Sequence, option: str = "--where") -> WhereError:
    """The error for case items of ``where`` that select none of the probes' variants: the values there are."""
    names = [k for k in where if any(k in p.cases for p in probes)]
    values = [takes_text(k, (x for p in probes for x in p.cases.get(k, ()))) for k in names]
    text = ",".join(f"{k}={format_value(where[k])}" for k in (names or where))
    why = "; ".join(values) or "no variant was planned to select from"
    return WhereError(f"{option} {shown(text)} matches none of the planned variants; {why}")


def case_filter(where: Mapping[str, Any] | None, probes: Sequence, variants: Sequence, option: str = "--where"):
    """The ``variants`` whose case constants match the case items of ``where`` (:func:`case_selector`).

    Raises:
        WhereError: a name that is neither a case constant, a kernel hint nor a per-load knob; case values that
            select no variant (the message lists the values there are).
    """
    keep = case_selector(where, probes, option)
    if keep is None:
        return list(variants)
    chosen = [v for v in variants if keep(v)]
    if variants and not chosen:
        raise no_case_match(dict(where or {}), probes, option)
    return chosen

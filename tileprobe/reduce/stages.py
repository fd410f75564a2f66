"""Compilers one after another inside one audit of a batch of candidates: a candidate that the first compiler's
records already rule out is not compiled under the next.

A regression (``--good G --bad B``) keeps a candidate only when the property holds under G and not under B. Most
candidates are not kept, and most of those are ruled out by one compiler alone: the edit removed the trigger (the
property now holds under B as well: 40 of the 149 candidates of ``padded_w4a16``'s reduction, 2026-12-05, LOG §50's
journal), or cuTile refused the source before any tileiras ran (61 of 149), which it does under every compiler.
So the audit compiles the compiler where the property must *not* hold first (the trigger's loss shows there), and a
later compiler only gets the candidates still in the running: their records under the earlier compilers give the
wanted value, and they are not refused by cuTile before tileiras ran (a refusal gives the same records, hence the
same value, under every compiler, and a regression wants two different values).

The audit loads the candidate files once and compiles toolchain by toolchain (:func:`tileprobe.audit.audit`); this
module follows it through the audit's documented hooks: ``progress("compiler", …)`` says which compiler's variants
come next, ``on_record`` hands each record as it lands (with its SASS facts when they are read), and ``select``
decides per variant. Verdicts are computed on copies of the earlier compiler's records (the audit judges its own
at the end).
"""
from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tileprobe.compile.job import Variant
from tileprobe.reduce.prop import Judgement, Property, checked, judge

#: The line of a compiler's judgement that was not compiled because an earlier compiler ruled the candidate out.
NOT_COMPILED = "not compiled: ruled out under tileiras "


@dataclass
class Stages:
    """The staged order of one audit call and what it decided.

    ``toolchains`` and ``want`` as the oracle has them; ``hints``: the ``--where`` hint items (the variants the
    property is checked on). ``order``: toolchain indices in the order the audit compiles them (the ones whose
    property must not hold first). ``skipped``: candidate path (real path) → the version that ruled it out, for the
    candidates no later compiler compiled, with the stage from which on they were not compiled."""
    toolchains: Sequence[Any]
    want: tuple[bool, ...]
    prop: Property
    hints: dict
    order: list[int] = field(default_factory=list)
    skipped: dict[str, tuple[int, str]] = field(default_factory=dict)
    _landed: dict[str, list] = field(default_factory=dict)
    _stage: int = -1
    _decided: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.order = sorted(range(len(self.toolchains)), key=lambda i: self.want[i])

    def ordered(self) -> list:
        """The toolchains in the order to audit them."""
        return [self.toolchains[i] for i in self.order]

    def progress(self, kind: str, n: Any) -> None:
        """The audit's ``progress``: ``("compiler", "tileiras V")`` starts the next stage."""
        if kind == "compiler":
            self._stage += 1
            self._decided.clear()

    def on_record(self, rec: Any, _cubin: bytes | None) -> None:
        """The audit's ``on_record``: each record as it lands, kept by candidate file."""
        self._landed.setdefault(os.path.realpath(rec.probe), []).append(rec)

    def select(self, v: Variant) -> bool:
        """The audit's ``select``: every variant in the first stage (and in the audit's count before it); in a later
        stage only the variants of candidates no earlier compiler ruled out."""
        if self._stage <= 0:
            return True
        path = os.path.realpath(v.probe_path)
        keep = self._decided.get(path)
        if keep is None:
            keep = self._decided[path] = self._in_the_running(path)
        return keep

    def _in_the_running(self, path: str) -> bool:
        later = [self.want[i] for i in self.order[self._stage:]]
        for i in self.order[:self._stage]:
            j, refused = self._judged(path, i)
            if not (j.holds == self.want[i] and checked(j.line)) or (refused and any(w != j.holds for w in later)):
                self.skipped.setdefault(path, (self._stage, self.toolchains[i].version))
                return False
        return True

    def _judged(self, path: str, i: int) -> tuple[Judgement, bool]:
        """The property's judgement on ``path``'s records under toolchain ``i`` (verdicts computed on copies), and
        whether every one of them was refused before tileiras ran."""
        from tileprobe.judge.verdict import judge_records
        from tileprobe.schema import short_build
        from tileprobe.select import select
        mine = [copy.copy(r) for r in self._landed.get(path, [])
                if short_build(r.tileiras) == f"tileiras {self.toolchains[i].version}"]
        judge_records(mine)
        recs = select(mine, self.hints) if self.hints else mine
        return judge(self.prop, recs), bool(recs) and all(refused_before_tileiras(r) for r in recs)

    def placeholder(self, path: str, i: int) -> tuple[str, bool, str] | None:
        """The judgement of toolchain ``i`` for a candidate it did not compile (``path`` ruled out earlier): the
        value it must not have, and a line saying which compiler ruled it out; None when it was compiled."""
        by = self.skipped.get(os.path.realpath(path))
        if by is None or self.order.index(i) < by[0]:
            return None
        return (self.toolchains[i].version, not self.want[i], f"{NOT_COMPILED}{by[1]}")


def refused_before_tileiras(rec: Any) -> bool:
    """Whether a record is a compile cuTile refused before any tileiras ran (its front end, or its own internal
    error: :func:`tileprobe.compile.failure.before_tileiras`): the same under every compiler."""
    from tileprobe.compile.failure import before_tileiras
    return not rec.ok and rec.failure == "compile_error" and before_tileiras(rec.fix or "")

"""Is a candidate interesting? Audit a batch of candidate probes at once in the audit's contained compile pool
(every core; probe code only in loader children, each compile a child with a timeout) and check the property on
each candidate's selected variants under each compiler.

Under two compilers the audit compiles them one after another, the one where the property must not hold first,
and the second only gets the candidates the first did not rule out (:mod:`tileprobe.reduce.stages`).

Identical candidates (same source as :func:`tileprobe.reduce.source.digest` sees it) are checked once: the
answers are kept in memory and in the reduction's journal, and the compiles themselves in the results store, so a
stopped reduction that starts again compiles nothing it compiled before.
"""
from __future__ import annotations

import ast
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tileprobe.compile.job import Variant
from tileprobe.compile.schedule import ChosenSchedule
from tileprobe.reduce.prop import Judgement, Property, judge
from tileprobe.reduce.source import digest, parts
from tileprobe.reduce.stages import Stages


@dataclass(frozen=True)
class Outcome:
    """One candidate's answer: ``judgements`` per compiler version (in the order the compilers were given) and
    whether it is ``interesting`` (the property holds as wanted under every compiler)."""
    interesting: bool
    judgements: tuple[tuple[str, bool, str], ...]
    cut: bool = False        # its compiles were stopped at the deadline: no answer (not remembered, tried again)

    def line(self) -> str:
        """The audit line per compiler: ``13.4.92: holds — …``."""
        return "; ".join(f"{v}: {'holds' if h else 'does not hold'} — {text}" for v, h, text in self.judgements)


@dataclass
class Oracle:
    """Checks candidates for one reduction.

    ``want``: for each toolchain (same order as ``toolchains``), whether the property must hold (True) or must
    not (False) on a kept candidate: ``(True,)`` under one compiler; ``(True, False)`` for a regression.
    ``hints``: the hint items of ``--where`` (which variants the property is checked on)."""
    arch: str
    toolchains: Sequence[Any]
    prop: Property
    want: tuple[bool, ...]
    hints: dict
    workdir: str
    store: Any = None
    jobs: int | None = None
    compile_timeout_s: float = 300.0
    memo: dict[str, Outcome] = field(default_factory=dict)
    compiled: int = 0        # candidates audited (not answered from memory)
    deadline: float | None = None    # time.monotonic() at which compiles still running are stopped (the budget)

    @property
    def staged(self) -> bool:
        """Whether a batch's compilers run one after another, each on the candidates the ones before did not rule
        out (:mod:`tileprobe.reduce.stages`): when the wanted value is known for every compiler (not during the
        check of the probe as given, which decides it) and there are several."""
        return len(self.toolchains) > 1 and len(self.want) == len(self.toolchains)

    def check(self, sources: Sequence[str]) -> list[Outcome]:
        """The outcome of each source, auditing the ones not seen before in one batch. A candidate whose compiles
        the :attr:`deadline` stopped gets an outcome with ``cut`` set, which is not remembered (asked again, it is
        audited again) and not counted in :attr:`compiled`."""
        keys = [digest(s) for s in sources]
        todo = {k: s for k, s in zip(keys, sources) if k not in self.memo}
        got: dict[str, Outcome] = self._audit(todo) if todo else {}
        for k, o in got.items():
            if not o.cut:
                self.memo[k] = o
                self.compiled += 1
        return [self.memo.get(k) or got[k] for k in keys]

    def rejudge(self) -> None:
        """Recompute every remembered outcome's ``interesting`` against :attr:`want` (answers from a journal were
        kept as the judgements alone)."""
        for k, o in self.memo.items():
            self.memo[k] = Outcome(self._interesting(o.judgements), o.judgements)

    def _interesting(self, js) -> bool:
        """The property has the wanted value under every compiler, and could be checked under every one (an
        unchecked answer is never a wanted "does not hold")."""
        from tileprobe.reduce.prop import checked
        return all(h == w and checked(line) for (_, h, line), w in zip(js, self.want))

    def _audit(self, todo: dict[str, str]) -> dict[str, Outcome]:
        from tileprobe.audit.pipeline import audit
        from tileprobe.errors import TileprobeError
        from tileprobe.schema import short_build
        from tileprobe.select import select
        paths = {}
        for k, src in todo.items():
            path = os.path.join(self.workdir, f"cand_{k[:16]}.py")
            with open(path, "w") as f:
                f.write(named(src, f"cand_{k[:16]}"))
            paths[path] = k
        st = Stages(self.toolchains, self.want, self.prop, self.hints) if self.staged else None
        try:
            result = audit(list(paths), [self.arch], toolchains=st.ordered() if st else list(self.toolchains),
                           jobs=self.jobs, store=self.store, timeout_s=self.compile_timeout_s,
                           with_sass=self.prop.needs_sass,
                           schedule=None if self.deadline is None else _Until(self.deadline),
                           progress=st.progress if st else None, select=st.select if st else None,
                           on_record=st.on_record if st else None)
            records = result.records
        except TileprobeError:        # no candidate of the batch loaded: none is interesting
            records = []
        late = self.deadline is not None and time.monotonic() >= self.deadline
        by_path: dict[str, list] = {}
        for r in records:
            by_path.setdefault(os.path.realpath(r.probe), []).append(r)
        out = {}
        for path, k in paths.items():
            recs = select(by_path.get(os.path.realpath(path), []), self.hints) if self.hints else \
                by_path.get(os.path.realpath(path), [])
            js, cut = [], False
            for i, tc in enumerate(self.toolchains):
                mine = [r for r in recs if short_build(r.tileiras) == f"tileiras {tc.version}"]
                ruled_out = st.placeholder(path, i) if st and not mine else None
                if ruled_out is not None:      # an earlier compiler ruled it out: not compiled under this one
                    js.append(ruled_out)
                    continue
                cut = cut or (late and not mine)     # stopped at the deadline before any record landed
                j: Judgement = judge(self.prop, mine)
                js.append((tc.version, j.holds, j.line))
            out[k] = Outcome(not cut and self._interesting(js), tuple(js), cut)
        return out


class _Until(ChosenSchedule):
    """The audit's schedule for a reduction with a budget: every variant, in the audit's order, started until
    ``cut_at`` (``time.monotonic()``); then the compiles still running are killed and give no record
    (:meth:`tileprobe.compile.pool.WorkerPool.run` with ``cut_spare`` 0)."""

    def __init__(self, cut_at: float):
        super().__init__(choose=lambda _now: None, key=id, clock=time.monotonic, cut_at=cut_at, spare=0)

    def apply(self, variants: Iterable[Variant]) -> Iterator[Variant]:
        """``variants`` as they come, none after the cut."""
        for v in variants:
            if self.clock() >= cast(float, self.cut_at):
                return
            yield v


def named(source: str, name: str) -> str:
    """``source`` with its ``Probe(name=...)`` set to ``name`` (candidates of one batch must not share a name:
    the audit tells probes apart by it)."""
    tree = ast.parse(source)
    call = parts(tree).probe_call
    call.keywords = [k for k in call.keywords if k.arg != "name"] + [ast.keyword("name", ast.Constant(name))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"

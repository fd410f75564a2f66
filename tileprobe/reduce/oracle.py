"""Is a candidate interesting? Audit a batch of candidate probes at once in the audit's contained compile pool
(every core; probe code only in loader children, each compile a child with a timeout) and check the property on
each candidate's selected variants under each compiler.

Identical candidates (same source as :func:`tileprobe.reduce.source.digest` sees it) are checked once: the
answers are kept in memory and in the reduction's journal, and the compiles themselves in the results store, so a
stopped reduction that starts again compiles nothing it compiled before.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tileprobe.reduce.prop import Judgement, Property, judge
from tileprobe.reduce.source import digest, parts


@dataclass(frozen=True)
class Outcome:
    """One candidate's answer: ``judgements`` per compiler version (in the order the compilers were given) and
    whether it is ``interesting`` (the property holds as wanted under every compiler)."""
    interesting: bool
    judgements: tuple[tuple[str, bool, str], ...]

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

    def check(self, sources: Sequence[str]) -> list[Outcome]:
        """The outcome of each source, auditing the ones not seen before in one batch."""
        keys = [digest(s) for s in sources]
        todo = {k: s for k, s in zip(keys, sources) if k not in self.memo}
        if todo:
            self.memo.update(self._audit(todo))
            self.compiled += len(todo)
        return [self.memo[k] for k in keys]

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
        try:
            result = audit(list(paths), [self.arch], toolchains=list(self.toolchains), jobs=self.jobs,
                           store=self.store, timeout_s=self.compile_timeout_s, with_sass=self.prop.needs_sass)
            records = result.records
        except TileprobeError:        # no candidate of the batch loaded: none is interesting
            records = []
        by_path: dict[str, list] = {}
        for r in records:
            by_path.setdefault(os.path.realpath(r.probe), []).append(r)
        out = {}
        for path, k in paths.items():
            recs = select(by_path.get(os.path.realpath(path), []), self.hints) if self.hints else \
                by_path.get(os.path.realpath(path), [])
            js = []
            for tc in self.toolchains:
                mine = [r for r in recs if short_build(r.tileiras) == f"tileiras {tc.version}"]
                j: Judgement = judge(self.prop, mine)
                js.append((tc.version, j.holds, j.line))
            out[k] = Outcome(self._interesting(js), tuple(js))
        return out


def named(source: str, name: str) -> str:
    """``source`` with its ``Probe(name=...)`` set to ``name`` (candidates of one batch must not share a name:
    the audit tells probes apart by it)."""
    tree = ast.parse(source)
    call = parts(tree).probe_call
    call.keywords = [k for k in call.keywords if k.arg != "name"] + [ast.keyword("name", ast.Constant(name))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"

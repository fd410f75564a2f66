"""Dead code out: kernel statements whose values nothing reads, parameters nothing reads (with the probe's
``args`` element for each), module names and imports nothing uses, empty loops and branches."""
from __future__ import annotations

import ast
import copy
from collections import Counter

from tileprobe.reduce.fold import EFFECTS
from tileprobe.reduce.source import is_ct, names_used, nodes, parts

#: Module names a probe file keeps even when unused (``import cuda.tile as ct``, ``Probe``).
KEEP = {"ct", "Probe", "probe", "probes"}


def _has_effect(node: ast.AST) -> bool:
    for n in nodes(node):
        if isinstance(n, ast.Call):
            if not is_ct(n.func) or n.func.attr in EFFECTS or n.func.attr.startswith("atomic"):
                if not is_ct(n.func) and isinstance(n.func, ast.Name) and n.func.id in ("range", "len", "int",
                                                                                    "float", "min", "max"):
                    continue
                return True
    return False


def _targets(s: ast.stmt) -> set[str] | None:
    """Names a pure assignment ``s`` binds; None when ``s`` is not one (it may have an effect)."""
    if isinstance(s, ast.Assign):
        ts = s.targets
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
        ts = [s.target]
    else:
        return None
    names: set[str] = set()
    for t in ts:
        for n in nodes(t):
            if isinstance(n, ast.Name):
                names.add(n.id)
            elif not isinstance(n, (ast.Tuple, ast.List, ast.Store, ast.Load)):
                return None
    value = getattr(s, "value", None)
    return None if value is not None and _has_effect(value) else names


def _walk_lists(stmts: list[ast.stmt]):
    yield stmts
    for s in stmts:
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                yield from _walk_lists(sub)


def _unit_reads(node: ast.AST) -> set[str] | None:
    """The names one "reader" reads: a simple statement all of it, a loop its ``iter``, a branch or ``while`` its
    test; None for anything else (the kernel, expressions: their statement reads for them)."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return names_used(node.iter)
    if isinstance(node, (ast.If, ast.While)):
        return names_used(node.test)
    if isinstance(node, ast.stmt) and not isinstance(node, (ast.With, ast.FunctionDef, ast.AsyncFunctionDef,
                                                            ast.ClassDef)):
        return names_used(node)
    return None


def remove_dead(kernel: ast.FunctionDef) -> bool:
    """Delete, to a fixpoint, the pure assignments of ``kernel`` whose names no other statement reads, and loops
    and branches left empty. Returns whether anything was deleted.

    Each sweep counts, once, how many statements read each name, and walks the statement lists innermost and last
    first, taking a deleted statement's reads off the counts as it goes: a chain of dead values goes in one sweep,
    in time linear in the kernel (the reducer cleans every candidate it builds; a sweep that walked the whole
    kernel per statement took minutes per round on a kernel of a few hundred lines)."""
    any_change = False
    while True:
        changed = False
        reads: Counter[str] = Counter()
        own: dict[int, set[str]] = {}
        for node in nodes(kernel):
            r = _unit_reads(node)
            if r is not None:
                own[id(node)] = r
                reads.update(r)
        for lst in reversed(list(_walk_lists(kernel.body))):
            for s in reversed(list(lst)):
                names = _targets(s)
                if names is None:
                    continue
                mine = own.get(id(s), set())
                if all(reads[n] - (n in mine) <= 0 for n in names):
                    lst.remove(s)
                    reads.subtract(mine)
                    changed = True
        for lst in list(_walk_lists(kernel.body)):
            for s in list(lst):
                if isinstance(s, (ast.For, ast.While, ast.If)) and all(isinstance(b, ast.Pass) for b in s.body) \
                        and all(isinstance(b, ast.Pass) for b in s.orelse) and not _has_effect(
                        s.iter if isinstance(s, ast.For) else s.test):
                    lst.remove(s)
                    changed = True
                elif isinstance(s, ast.Pass) and len(lst) > 1:
                    lst.remove(s)
                    changed = True
        for lst in _walk_lists(kernel.body):
            if not lst:
                lst.append(ast.Pass())
        if not changed:
            return any_change
        any_change = True


def drop_unused_params(tree: ast.Module) -> None:
    """Remove kernel parameters the kernel does not read, with the ``args`` tuple element for each (only when the
    probe's ``args`` returns a tuple of as many elements as the kernel has parameters)."""
    p = parts(tree)
    tup = p.args_tuple()
    if tup is None or any(isinstance(e, ast.Starred) for e in tup.elts) or len(tup.elts) != len(p.kernel.args.args):
        return
    used = set().union(*(names_used(s) for s in p.kernel.body))
    for i, a in reversed(list(enumerate(p.kernel.args.args))):
        if a.arg not in used:
            del p.kernel.args.args[i], tup.elts[i]


def drop_unused_module_names(tree: ast.Module) -> None:
    """Remove module-level assignments, functions and imports whose names nothing else in the module reads (the
    names each module statement holds counted once, a removed statement's taken off: linear in the module)."""
    held = {id(n): {d.id for d in nodes(n) if isinstance(d, ast.Name)} for n in tree.body}
    count: Counter[str] = Counter()
    for names in held.values():
        count.update(names)
    while True:
        removed = False
        for node in list(tree.body):
            if isinstance(node, (ast.Expr)) and isinstance(node.value, ast.Constant) and node is not tree.body[0]:
                continue
            bound = _bound(node)
            if not bound or bound & KEEP:
                continue
            mine = held[id(node)]
            if all(count[b] - (b in mine) <= 0 for b in bound):
                tree.body.remove(node)
                count.subtract(mine)
                removed = True
        if not removed:
            return


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in nodes(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.FunctionDef):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def clean(tree: ast.Module) -> ast.Module:
    """Dead statements, unused parameters (and their arguments), unused module names: a new module."""
    return clean_in_place(copy.deepcopy(tree))


def clean_in_place(tree: ast.Module) -> ast.Module:
    """:func:`clean` on ``tree`` itself (the reducer's candidates are copies already: one copy fewer each)."""
    p = parts(tree)
    remove_dead(p.kernel)
    drop_unused_params(tree)
    drop_unused_module_names(tree)
    return ast.fix_missing_locations(tree)

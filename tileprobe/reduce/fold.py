"""Transformations that keep a kernel's meaning for one variant: fold the variant's case values and constexpr
parameters into the source, fold constant branches, inline ``@ct.function`` helpers, delete dead code and unused
parameters (with the probe's arguments for them), unused module names and imports.

Every function takes and returns an :class:`ast.Module` (the input is not changed). A probe the reducer cannot
read a part of (no ``args`` tuple, a helper with two returns) keeps that part as it is.
"""
from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable, Mapping
from typing import Any

from tileprobe.reduce.source import parts

#: ``ct.*`` calls with an effect beyond their value: a statement calling one is never dead code.
EFFECTS = ("store", "scatter", "store_advanced_indexing", "print", "printf", "assert_")
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.Div: operator.truediv}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge}
_NO = object()


def const_value(e: ast.expr, env: Mapping[str, Any]) -> Any:
    """The value of ``e`` when it is built of literals, names in ``env`` and arithmetic, comparisons, ``not`` /
    ``and`` / ``or``, ``x if c else y`` and tuples; else the sentinel ``_NO``. Nothing is executed."""
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name):
        return env.get(e.id, _NO)
    if isinstance(e, ast.Tuple):
        vals = [const_value(x, env) for x in e.elts]
        return _NO if any(v is _NO for v in vals) else tuple(vals)
    if isinstance(e, ast.UnaryOp):
        v = const_value(e.operand, env)
        if v is _NO:
            return _NO
        unary: dict[type, Callable[[Any], Any]] = {ast.Not: operator.not_, ast.USub: operator.neg,
                                                   ast.UAdd: operator.pos}
        return unary.get(type(e.op), lambda _: _NO)(v)
    if isinstance(e, ast.BinOp) and type(e.op) in _BIN:
        a, b = const_value(e.left, env), const_value(e.right, env)
        if a is _NO or b is _NO or not all(isinstance(x, (int, float)) for x in (a, b)):
            return _NO
        try:
            return _BIN[type(e.op)](a, b) if not (isinstance(e.op, ast.Pow) and abs(b) > 64) else _NO
        except (ArithmeticError, ValueError):
            return _NO
    if isinstance(e, ast.BoolOp):
        vals = [const_value(x, env) for x in e.values]
        if any(v is _NO for v in vals):
            return _NO
        return all(vals) if isinstance(e.op, ast.And) else any(vals)
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _CMP:
        a, b = const_value(e.left, env), const_value(e.comparators[0], env)
        return _NO if a is _NO or b is _NO else _CMP[type(e.ops[0])](a, b)
    if isinstance(e, ast.IfExp):
        c = const_value(e.test, env)
        return _NO if c is _NO else const_value(e.body if c else e.orelse, env)
    return _NO


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = constant expression`` (and ``A, B = 1, 2``) values, in order."""
    env: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t, v = node.targets[0], node.value
        if isinstance(t, ast.Name):
            val = const_value(v, env)
            if val is not _NO:
                env[t.id] = val
        elif isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
            for tt, vv in zip(t.elts, v.elts):
                val = const_value(vv, env)
                if isinstance(tt, ast.Name) and val is not _NO:
                    env[tt.id] = val
    return env


def fold_variant(tree: ast.Module, case: Mapping[str, Any]) -> ast.Module:
    """Replace ``case["NAME"]`` by the variant's value wherever the probe reads it, and leave ``Probe(cases=...)``
    without those names (without ``cases=`` when none is left)."""
    tree = copy.deepcopy(tree)

    class Sub(ast.NodeTransformer):
        def visit_Subscript(self, node):
            self.generic_visit(node)
            key = node.slice
            if (isinstance(node.value, ast.Name) and node.value.id == "case" and isinstance(key, ast.Constant)
                    and key.value in case):
                return ast.copy_location(ast.Constant(case[key.value]), node)
            return node
    tree = Sub().visit(tree)
    p = parts(tree)
    kw = p.kw("cases")
    if kw is not None and isinstance(kw.value, ast.Dict):
        keep = [(k, v) for k, v in zip(kw.value.keys, kw.value.values)
                if not (isinstance(k, ast.Constant) and k.value in case)]
        kw.value.keys, kw.value.values = [k for k, _ in keep], [v for _, v in keep]
        if not keep:
            p.probe_call.keywords.remove(kw)
    return ast.fix_missing_locations(tree)


def _is_constexpr(ann: ast.expr | None, tree: ast.Module) -> bool:
    if ann is None:
        return False
    if "Constant" in ast.unparse(ann):
        return True
    if isinstance(ann, ast.Name):
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == ann.id for t in node.targets)
                    and "Constant" in ast.unparse(node.value)):
                return True
    return False


def fold_constexprs(tree: ast.Module) -> ast.Module:
    """Each constexpr kernel parameter (annotated ``ct.Constant[...]`` or an alias of it) whose probe argument is a
    constant expression is replaced by that value in the kernel and dropped from the signature and the ``args``
    tuple. Runtime parameters are never folded (a runtime trip count stays runtime)."""
    tree = copy.deepcopy(tree)
    p = parts(tree)
    tup, env = p.args_tuple(), module_constants(tree)
    if tup is None or any(isinstance(e, ast.Starred) for e in tup.elts) or len(tup.elts) != len(p.kernel.args.args):
        return tree
    assigned = {n.id for n in ast.walk(p.kernel) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    values: dict[str, Any] = {}
    for i, a in reversed(list(enumerate(p.kernel.args.args))):
        v = const_value(tup.elts[i], env)
        if v is _NO or not isinstance(v, (int, float, bool)) or a.arg in assigned or not _is_constexpr(a.annotation,
                                                                                                      tree):
            continue
        values[a.arg] = v
        del p.kernel.args.args[i], tup.elts[i]

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Load) and node.id in values:
                return ast.copy_location(ast.Constant(values[node.id]), node)
            return node
    p.kernel.body = [Sub().visit(s) for s in p.kernel.body]
    return fold_branches(ast.fix_missing_locations(tree))


class _Folder(ast.NodeTransformer):
    """Fold constant expressions (no names) and constant ``if`` / ``x if c else y``."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        c = const_value(node.test, {})
        return node if c is _NO else (node.body if c else node.orelse)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        return _literal(node)

    visit_UnaryOp = visit_Compare = visit_BoolOp

    def visit_If(self, node):
        self.generic_visit(node)
        c = const_value(node.test, {})
        if c is _NO:
            return node
        return (node.body if c else node.orelse) or None


def _literal(node):
    v = const_value(node, {})
    return node if v is _NO or isinstance(v, tuple) else ast.copy_location(ast.Constant(v), node)


def fold_branches(tree: ast.Module) -> ast.Module:
    """Kernel ``if``s and conditional expressions with a constant test replaced by the branch taken."""
    tree = copy.deepcopy(tree)
    p = parts(tree)
    folder = _Folder()
    body = []
    for s in p.kernel.body:
        r = folder.visit(s)
        body.extend(r if isinstance(r, list) else [r] if r is not None else [])
    p.kernel.body = body or [ast.Pass()]
    return ast.fix_missing_locations(tree)


def propagate_copies(tree: ast.Module) -> ast.Module:
    """Kernel locals bound exactly once to a constant, or to a name that is never rebound (a parameter, another
    such local), are replaced by that value and their binding removed (what inlining leaves: ``_f1_rows = TN``);
    then constant expressions and branches fold again."""
    tree = copy.deepcopy(tree)
    k = parts(tree).kernel
    for _ in range(500):
        stores: dict[str, int] = {}
        for n in ast.walk(k):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                stores[n.target.id] = stores.get(n.target.id, 0) + 1
        order = {id(n): i for i, n in enumerate(_preorder(k))}
        first_store: dict[str, int] = {}
        for n in _preorder(k):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                first_store.setdefault(n.id, order[id(n)])
        found = None
        for n in _preorder(k):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and stores.get(n.targets[0].id) == 1
                    and (isinstance(n.value, ast.Constant)
                         or (isinstance(n.value, ast.Name) and (stores.get(n.value.id, 0) == 0 or (
                             stores.get(n.value.id) == 1 and first_store[n.value.id] < order[id(n)]))))):
                found = n
                break
        if found is None or not isinstance(found.targets[0], ast.Name):
            break
        name, value = found.targets[0].id, found.value

        class Sub(ast.NodeTransformer):
            def visit_Name(self, node):
                if isinstance(node.ctx, ast.Load) and node.id == name:
                    return ast.copy_location(copy.deepcopy(value), node)
                return node

            def visit_Assign(self, node):
                if node is found:
                    return None
                self.generic_visit(node)
                return node
        k.body = [s for s in (Sub().visit(s) for s in k.body) if s is not None] or [ast.Pass()]
        for sub in ast.walk(k):
            for field in ("body", "orelse"):
                lst = getattr(sub, field, None)
                if isinstance(lst, list) and not lst and field == "body":
                    lst.append(ast.Pass())
    return fold_branches(ast.fix_missing_locations(tree))


def _preorder(node: ast.AST):
    """``node`` and everything under it in source order (``ast.walk`` is breadth-first)."""
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child)


def fold_args(tree: ast.Module) -> ast.Module:
    """Constant conditional expressions in the probe's ``args`` folded (``(M * K,) if True else (M, K)``)."""
    tree = copy.deepcopy(tree)
    p = parts(tree)
    if p.args_fn is not None:
        p.args_fn.body = [_Folder().visit(s) for s in p.args_fn.body]
    return ast.fix_missing_locations(tree)


def inline_single_use(tree: ast.Module, max_len: int = 100) -> ast.Module:
    """Kernel locals assigned once and read once, by a simple statement later in the same block, are written into
    that read and their assignment removed (``w = ct.reshape(x, s)`` then ``acc = ct.mma(a, w, acc)`` →
    ``acc = ct.mma(a, ct.reshape(x, s), acc)``), when the statement that reads it stays within ``max_len``
    characters (a report's kernel stays readable), nothing between the two rebinds a name the value reads, and the
    value calls no ``ct.*`` with an effect (:data:`EFFECTS`). A value is never moved into or out of a loop or a
    branch. The meaning is the same: cuTile's tiles are values; this only shortens the kernel a report shows."""
    from tileprobe.reduce.source import names_used
    tree = copy.deepcopy(tree)
    k = parts(tree).kernel
    for _ in range(500):
        if not _inline_one(k, max_len, names_used):
            break
    return ast.fix_missing_locations(tree)


def _inline_one(k: ast.FunctionDef, max_len: int, names_used) -> bool:
    stores: dict[str, int] = {}
    loads: dict[str, int] = {}
    for n in ast.walk(k):
        if isinstance(n, ast.Name):
            d = stores if isinstance(n.ctx, ast.Store) else loads
            d[n.id] = d.get(n.id, 0) + 1
    blocks = [k.body] + [getattr(s, f) for s in ast.walk(k) for f in ("body", "orelse")
                         if s is not k and isinstance(getattr(s, f, None), list) and getattr(s, f)
                         and isinstance(getattr(s, f)[0], ast.stmt)]
    simple = (ast.Assign, ast.Expr, ast.AugAssign, ast.Return)
    for body in blocks:
        for i, s in enumerate(body):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
                continue
            name = s.targets[0].id
            if stores.get(name) != 1 or loads.get(name) != 1 or any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in EFFECTS
                    for c in ast.walk(s.value)):
                continue
            reads = names_used(s.value)
            for j in range(i + 1, len(body)):
                use = body[j]
                if name not in names_used(use):
                    if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in reads
                           for n in ast.walk(use)):
                        break       # a name the value reads is rebound before the read
                    continue
                if not isinstance(use, simple):
                    break           # read inside a loop, a branch: the value would move into it
                new = _substitute(use, name, s.value)
                if len(ast.unparse(new)) > max_len:
                    break
                body[j] = new
                del body[i]
                return True
    return False


def _substitute(stmt: ast.stmt, name: str, value: ast.expr) -> ast.stmt:
    stmt = copy.deepcopy(stmt)

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Load) and node.id == name:
                return ast.copy_location(copy.deepcopy(value), node)
            return node
    return Sub().visit(stmt)

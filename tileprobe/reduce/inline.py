"""Inline ``@ct.function`` helpers into the kernel, so that the reduced kernel is one function and each of the
helper's statements can be reduced on its own.

A call ``f(a, b)`` anywhere in a kernel statement becomes, before that statement, the helper's body with its
parameters bound (``_f1_x = a``) and its locals renamed (``_f1_t``), and the call becomes the renamed return value.
Helpers with a ``return`` anywhere but at the end, ``*args``, defaults or keyword calls are left as calls.
"""
from __future__ import annotations

import ast
import copy
import itertools

from tileprobe.reduce.source import parts


def _inlinable(f: ast.FunctionDef) -> bool:
    a = f.args
    if a.vararg or a.kwarg or a.defaults or a.kwonlyargs or a.posonlyargs or not f.body:
        return False
    rets = [n for n in ast.walk(f) if isinstance(n, ast.Return)]
    return len(rets) <= 1 and (not rets or f.body[-1] is rets[0]) and not any(
        isinstance(n, (ast.Yield, ast.Global, ast.Nonlocal, ast.FunctionDef, ast.Lambda))
        for s in f.body for n in ast.walk(s))


def _rename(f: ast.FunctionDef, prefix: str) -> tuple[list[ast.stmt], ast.expr | None, list[str]]:
    locals_ = {a.arg for a in f.args.args} | {n.id for n in ast.walk(f) if isinstance(n, ast.Name)
                                             and isinstance(n.ctx, ast.Store)}
    body = copy.deepcopy(f.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]      # the docstring

    class R(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in locals_:
                node.id = prefix + node.id
            return node
    body = [R().visit(s) for s in body]
    ret = None
    last = body[-1] if body else None
    if isinstance(last, ast.Return):
        body.pop()
        ret = last.value
    return body, ret, [prefix + a.arg for a in f.args.args]


def inline_helpers(tree: ast.Module, rounds: int = 8) -> ast.Module:
    """Inline every inlinable ``@ct.function`` call of the kernel (helpers calling helpers too, up to ``rounds``
    levels). Helper definitions are left in place (unused ones go with :func:`tileprobe.reduce.clean.clean`)."""
    tree = copy.deepcopy(tree)
    counter = itertools.count(1)
    for _ in range(rounds):
        p = parts(tree)
        helpers = {n: f for n, f in p.helpers.items() if _inlinable(f)}
        changed = False

        def expand(stmts: list[ast.stmt]) -> list[ast.stmt]:
            nonlocal changed
            out: list[ast.stmt] = []
            for s in stmts:
                for field in ("body", "orelse"):
                    if isinstance(s, (ast.For, ast.While, ast.If, ast.With)) and hasattr(s, field):
                        setattr(s, field, expand(getattr(s, field)))
                pre: list[ast.stmt] = []

                class Call(ast.NodeTransformer):
                    def visit_Call(self, node):
                        self.generic_visit(node)
                        f = helpers.get(node.func.id) if isinstance(node.func, ast.Name) else None
                        if f is None or node.keywords or len(node.args) != len(f.args.args):
                            return node
                        body, ret, params = _rename(f, f"_{f.name}{next(counter)}_")
                        pre.extend(ast.Assign([ast.Name(n, ast.Store())], a) for n, a in zip(params, node.args))
                        pre.extend(body)
                        return ret if ret is not None else ast.Constant(None)
                if isinstance(s, (ast.For, ast.While, ast.If)):
                    head = s.iter if isinstance(s, ast.For) else s.test
                    new = Call().visit(head)
                    if isinstance(s, ast.For):
                        s.iter = new
                    else:
                        s.test = new if isinstance(s, ast.If) else s.test
                else:
                    s = Call().visit(s)
                if pre:
                    changed = True
                out.extend(pre)
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
                    out.append(s)
            return out
        p.kernel.body = expand(p.kernel.body)
        if not changed:
            break
    return ast.fix_missing_locations(tree)

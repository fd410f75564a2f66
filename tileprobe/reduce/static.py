"""Static checks that tell, without compiling, that cuTile would refuse a candidate: a candidate caught here is
never built into a compile.

In the benchmark reductions of LOG §50 (2026-12-05) cuTile refused 59 of ``padded_w4a16``'s 149 candidates and
33 of the seed example's 107 before tileiras ran; each refusal still cost a batch slot, the loading of the file
in a loader child and one type check per variant and compiler. Two of the refusals' kinds are visible in the
syntax tree alone:

* ``TypeCheckingError: Use of potentially undefined variable `x` `` — a name read where not every path has
  bound it: bound only inside a loop's body (even ``range(1)``: cuTile does not count trips) and read after the
  loop, or bound in one branch of an ``if`` whose test is a runtime value (a test on constants is folded by
  cuTile, so the branch it takes counts) (:func:`maybe_undefined`);
* ``Invalid argument #1 of reshape(): Expected a tile, but given value has type Array[…]`` — a kernel
  *array* parameter (one that a ``ct.load`` / ``ct.store`` / ``ct.gather`` … takes as its array) put where a tile
  value was, as replacing ``a = ct.gather(X, …)`` by its operand ``a = X`` does (:func:`array_params`).

Both were measured against cuTile 1.7.0 (the undefined-variable rule on a kernel with ``for k in range(1)``, ``if
True`` and ``if j > 0``: refused, accepted, refused; 2026-12-05).
"""
from __future__ import annotations

import ast
import builtins

from tileprobe.reduce.source import nodes

#: ``ct.*`` calls whose first argument is an array (global memory), not a tile.
ARRAY_OPS = frozenset({"load", "store", "gather", "scatter", "load_advanced_indexing", "store_advanced_indexing",
                       "atomic_add", "atomic_cas", "atomic_xchg", "atomic_max", "atomic_min", "atomic_and",
                       "atomic_or", "atomic_xor"})


def array_params(kernel: ast.FunctionDef) -> set[str]:
    """The kernel's parameters used as arrays: the first argument (or ``array=``) of a ``ct.*`` memory operation
    (:data:`ARRAY_OPS`) somewhere in the kernel."""
    params = {a.arg for a in kernel.args.args}
    out: set[str] = set()
    for n in nodes(kernel):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ARRAY_OPS
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "ct"):
            continue
        first = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "array"), None)
        if isinstance(first, ast.Name) and first.id in params:
            out.add(first.id)
    return out


def maybe_undefined(tree: ast.Module) -> set[str]:
    """Names the kernel of ``tree`` reads where cuTile cannot prove them bound (module doc): each such read makes
    cuTile refuse the kernel. Names bound nowhere are :func:`tileprobe.reduce.passes.unbound`'s."""
    from tileprobe.reduce.source import parts
    k = parts(tree).kernel
    local = {n.id for n in nodes(k) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local -= {a.arg for a in k.args.args}
    bad: set[str] = set()
    _flow(k.body, set(), local, bad)
    return bad - set(dir(builtins))


def _reads(node: ast.AST, defined: set[str], local: set[str], bad: set[str]) -> None:
    for n in nodes(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in local and n.id not in defined:
            bad.add(n.id)


def _stores(node: ast.AST) -> set[str]:
    return {n.id for n in nodes(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _flow(body: list[ast.stmt], defined: set[str], local: set[str], bad: set[str]) -> set[str]:
    """Walk ``body`` in order from the kernel-local names ``defined`` before it; add the reads of names not
    certainly bound to ``bad``; return the names certainly bound after it."""
    d = set(defined)
    for s in body:
        if isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            _reads(head, d, local, bad)
            inner = d | (_stores(s.target) if isinstance(s, ast.For) else set())
            _flow(s.body, inner, local, bad)    # what the body binds is not bound after: it may run no trip
            d = _flow(s.orelse, d, local, bad) if s.orelse else d
        elif isinstance(s, ast.If):
            _reads(s.test, d, local, bad)
            then, other = _flow(s.body, d, local, bad), _flow(s.orelse, d, local, bad)
            runtime = any(isinstance(n, ast.Name) and n.id in local for n in nodes(s.test))
            # a test on constants (or constexpr parameters) is folded by cuTile: either branch may be the one
            # taken, so what either binds counts (no refusal is claimed where cuTile might accept)
            d = (then & other) if runtime else (then | other)
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            _reads(s, d, local, bad)
            if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id in local \
                    and s.target.id not in d:       # `x += 1` reads x
                bad.add(s.target.id)
            d |= _stores(s)
        else:       # anything else (with, try, a nested def …): its bindings count, its reads are not judged
            d |= _stores(s)
    return d

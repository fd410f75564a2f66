"""A probe module's parts as the reducer sees them: the kernel, its ``@ct.function`` helpers, the ``args``
function, the ``Probe(...)`` call and the module constants; and how big a kernel is.

Works on Python's :mod:`ast` only: nothing here imports or runs the probe (that happens in the audit's contained
children).
"""
from __future__ import annotations

import ast
import hashlib
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from tileprobe.errors import UsageError


@dataclass
class Parts:
    """Handles into one parsed probe module (``tree``); any may be None except ``kernel`` and ``probe_call``."""
    tree: ast.Module
    kernel: ast.FunctionDef
    helpers: dict[str, ast.FunctionDef]
    args_fn: ast.FunctionDef | None
    probe_call: ast.Call

    def kw(self, name: str) -> ast.keyword | None:
        """The ``Probe(...)`` keyword ``name``, or None."""
        return next((k for k in self.probe_call.keywords if k.arg == name), None)

    def args_tuple(self) -> ast.Tuple | None:
        """The tuple ``args`` returns (its last statement ``return (...)``, or a lambda's tuple body), else None."""
        if self.args_fn is not None:
            last = self.args_fn.body[-1] if self.args_fn.body else None
            if isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple):
                return last.value
            return None
        kw = self.kw("args")
        if kw is not None and isinstance(kw.value, ast.Lambda) and isinstance(kw.value.body, ast.Tuple):
            return kw.value.body
        return None


def _decorator_is(dec: ast.expr, name: str) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(target, ast.Attribute) and target.attr == name) or (isinstance(target, ast.Name)
                                                                         and target.id == name)


def parts(tree: ast.Module, where: str = "probe") -> Parts:
    """Find the parts of ``tree``.

    Raises:
        UsageError: no ``Probe(...)`` call at module level, its ``kernel=`` is not a function of this file (a
            ``"file:name"`` string: reduce that file's kernel from a probe that defines it), or no such function.
    """
    call = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            if (isinstance(f, ast.Name) and f.id == "Probe") or (isinstance(f, ast.Attribute) and f.attr == "Probe"):
                call = node.value
    if call is None:
        raise UsageError(f"{where}: no `probe = Probe(...)` at module level: reduce takes a probe file that defines "
                         "its kernel and one Probe")
    kernel_kw = next((k for k in call.keywords if k.arg == "kernel"), None)
    if kernel_kw is None or not isinstance(kernel_kw.value, ast.Name):
        raise UsageError(f"{where}:{call.lineno}: Probe(kernel=...) is not a function defined in this file; copy the "
                         "kernel into the probe file (reduce rewrites that file only)")
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    kernel = funcs.get(kernel_kw.value.id)
    if kernel is None:
        raise UsageError(f"{where}:{call.lineno}: kernel {kernel_kw.value.id!r} is imported, not defined here; copy "
                         "it (and its @ct.function helpers) into the probe file")
    helpers = {n: f for n, f in funcs.items() if any(_decorator_is(d, "function") for d in f.decorator_list)}
    args_kw = next((k for k in call.keywords if k.arg == "args"), None)
    args_fn = funcs.get(args_kw.value.id) if args_kw is not None and isinstance(args_kw.value, ast.Name) else None
    return Parts(tree, kernel, helpers, args_fn, call)


def parse(source: str, where: str = "probe") -> ast.Module:
    """``ast.parse`` with a clear error (file:line) on a syntax error, and on an expression nested too deeply for
    the reducer: every candidate is a copy of the tree rewritten and unparsed, each recursive in Python, so a tree
    that cannot be copied and unparsed under Python's recursion limit (a sum of a few hundred terms written out)
    is refused here, before anything is compiled, not met as a RecursionError mid-reduction.

    Raises:
        UsageError: the source does not parse, or holds an expression too deep to copy (message: the line, the
            depth and the fix: split it into assignments)."""
    import copy
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise UsageError(f"{where}:{e.lineno}: {e.msg}: fix the probe file's syntax") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"{where}: an expression is nested too deeply for Python's parser: split it into "
                         "assignments of a few terms each (e.g. partial sums) and run again") from None
    try:
        ast.unparse(copy.deepcopy(tree))
    except RecursionError:
        line, depth = deepest(tree)
        raise UsageError(f"{where}:{line}: an expression nested {depth} levels deep: the reducer copies and rewrites "
                         f"the kernel's syntax tree recursively and this is past Python's recursion limit "
                         f"({sys.getrecursionlimit()}). Split it into assignments of a few terms each (e.g. partial "
                         "sums) and run again") from None
    return tree


def deepest(tree: ast.AST) -> tuple[int, int]:
    """(line, depth) of the most deeply nested node of ``tree``, found without recursion (a stack of
    (node, depth)): the place a RecursionError came from."""
    best = (0, 0)
    stack: list[tuple[ast.AST, int, int]] = [(tree, 0, 0)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > best[1]:
            best = (line, depth)
        stack.extend((child, depth + 1, line) for child in ast.iter_child_nodes(node))
    return best


def digest(source: str) -> str:
    """The candidate's identity: sha256 of its source as ``ast.unparse`` writes it (comments, blank lines and
    formatting do not make two candidates different)."""
    return hashlib.sha256(ast.unparse(ast.parse(source)).encode()).hexdigest()


@dataclass(frozen=True)
class Size:
    """How big a kernel is: ``lines`` of its body (non-blank, as unparsed, helpers it calls included), Python
    ``tokens`` of the same text, kernel ``params`` and ``ct_calls`` (calls of ``ct.*`` in kernel and helpers)."""
    lines: int
    tokens: int
    params: int
    ct_calls: int

    def __str__(self) -> str:
        return (f"{self.lines} lines, {self.tokens} tokens, {self.params} kernel parameters, "
                f"{self.ct_calls} ct.* calls")


def size(source: str) -> Size:
    """:class:`Size` of the kernel of probe ``source`` (its helpers counted too)."""
    p = parts(ast.parse(source))
    funcs = [p.kernel, *p.helpers.values()]
    text = "\n".join(ast.unparse(s) for f in funcs for s in f.body)
    lines = sum(1 for ln in text.splitlines() if ln.strip())
    toks = sum(1 for t in tokenize.generate_tokens(io.StringIO(text + "\n").readline)
               if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                 tokenize.ENDMARKER, tokenize.COMMENT))
    calls = sum(1 for f in funcs for n in ast.walk(f) if isinstance(n, ast.Call) and is_ct(n.func))
    return Size(lines, toks, len(p.kernel.args.args), calls)


def is_ct(func: ast.expr, name: str | None = None) -> TypeGuard[ast.Attribute]:
    """Whether ``func`` is ``ct.NAME`` (any name when ``name`` is None); a type guard: ``func.attr`` is the name."""
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "ct"
            and (name is None or func.attr == name))


def names_used(node: ast.AST) -> set[str]:
    """Every name read anywhere under ``node``."""
    return {n.id for n in nodes(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every node under it, in no particular order: :func:`ast.walk` for callers that collect sets or
    ask ``any``, 2.2× faster (a stack and ``_fields`` instead of ``ast.iter_child_nodes``' generators: 28,041
    nodes walked 5 times in 0.065 s against 0.145 s, 2026-12-05). Building a round's candidates walked the tree
    ~36,000 times for a 200-statement kernel, two thirds of its time (cProfile of ``bench_generation.py``)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for f in n._fields:
            v = getattr(n, f, None)
            if type(v) is list:
                stack.extend([x for x in v if isinstance(x, ast.AST)])
            elif isinstance(v, ast.AST):
                stack.append(v)

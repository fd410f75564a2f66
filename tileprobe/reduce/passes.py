"""The reducer's candidate transformations, each one step a kernel engineer would try, in the order they are
tried: delete a statement (with the code only it used), take one branch of an ``if``, run a loop once or a constant
number of times, ``ct.gather`` ↔ ``ct.load``, drop a keyword of a ``ct.*`` call (``latency=``, ``padding_value=``,
``allow_tma=`` …), replace a value by one of its operands, halve a constant, drop a hint value.

Every candidate is a :class:`Candidate`: a new module (cleaned of dead code, :func:`tileprobe.reduce.clean.clean`),
what was done in words (``label``) and what it was done to (``construct``: the same text each time the same
construct is met, so the "needs" list can name it).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tileprobe.reduce.clean import clean_in_place
from tileprobe.reduce.fold import module_constants
from tileprobe.reduce.source import is_ct, nodes, parts
from tileprobe.reduce.static import array_params, maybe_undefined

Path = tuple


@dataclass
class Candidate:
    """One transformed probe module: ``label`` (what was done), ``construct`` (the kernel construct it removed or
    simplified, e.g. ``ct.gather(X, …) inside a runtime loop``), ``kind`` (the pass), ``key`` (the edit's
    identity across rounds: the pass and the full text of what it changed, so an edit that failed once is skipped
    in later rounds without building its module again) and ``source``: the module unparsed, built on first use
    (copied, edited, cleaned: milliseconds to a second for a big kernel); "" when the edit gives no valid
    candidate (a name left unbound, an edit that does not apply); ``refusal``, once ``source`` is built: why
    cuTile would refuse the candidate, when a static check (:mod:`tileprobe.reduce.static`) tells so without a
    compile (its ``source`` is then "")."""
    label: str
    construct: str
    kind: str
    key: str
    build: Callable[[], str | Refused | None] = dataclasses.field(repr=False, compare=False)
    _source: str | None = dataclasses.field(default=None, repr=False, compare=False)
    refusal: str = dataclasses.field(default="", compare=False)

    @property
    def source(self) -> str:
        """The candidate module's source ("" when there is none)."""
        if self._source is None:
            got = self.build()
            if isinstance(got, Refused):
                self.refusal, got = got.why, None
            self._source = got or ""
        return self._source


@dataclass(frozen=True)
class Refused:
    """A candidate that cuTile would refuse, known without compiling it: ``why``, in cuTile's terms."""
    why: str


def _lazy(tree: ast.Module, edit: Callable[[ast.Module], bool | None], label: str, construct: str, kind: str,
          key: str = "") -> Candidate:
    """A candidate whose module is built (copied, edited, cleaned, unparsed: milliseconds to a second for a big
    kernel) only when :func:`candidates` decides to try it."""
    return Candidate(label, construct, kind, key or f"{kind}:{label}", lambda: _make(tree, edit))


def _stmt_paths(body: list[ast.stmt], prefix: Path = ()) -> Iterator[Path]:
    for i, s in enumerate(body):
        yield prefix + (i,)
        for field in ("body", "orelse"):
            sub = getattr(s, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                yield from _stmt_paths(sub, prefix + (i, field))


def _locate(kernel: ast.FunctionDef, path: Path) -> tuple[list[ast.stmt], int]:
    lst: Any = kernel.body
    for step in path[:-1]:
        lst = lst[step] if isinstance(step, int) else getattr(lst, step)
    return lst, path[-1]


def _statements(kernel: ast.FunctionDef) -> list[tuple[Path, ast.stmt]]:
    """Every statement of ``kernel`` with its path, outermost first (a list: the passes edit copies, not it)."""
    out = []
    for path in _stmt_paths(kernel.body):
        lst, i = _locate(kernel, path)
        out.append((path, lst[i]))
    return out


def _loops_over(kernel: ast.FunctionDef, path: Path) -> list[ast.For]:
    """The ``for`` loops enclosing the statement at ``path``."""
    out: list[ast.For] = []
    lst: Any = kernel.body
    for step in path[:-1]:
        if isinstance(step, int):
            node = lst[step]
            if isinstance(node, ast.For):
                out.append(node)
            lst = node
        else:
            lst = getattr(lst, step)
    return out


def _runtime(loop: ast.For, consts: set[str]) -> bool:
    """Whether a loop's trip count is not a constant: its ``range`` reads a name that is not a module constant
    (a kernel parameter, a value computed in the kernel)."""
    return any(isinstance(n, ast.Name) and n.id not in ("range", *consts) for n in nodes(loop.iter))


def _where(kernel: ast.FunctionDef, path: Path) -> str:
    loops = _loops_over(kernel, path)
    if not loops:
        return ""
    consts = _CONSTS.get(id(kernel), set())
    return " inside a loop with a runtime trip count" if any(_runtime(lp, consts) for lp in loops) \
        else " inside a constant-trip-count loop"


#: id(kernel) → its module's constant names, set by :func:`candidates` (loops over those are constant loops).
_CONSTS: dict[int, set[str]] = {}


def _short(node: ast.AST, n: int = 60) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= n else text[:n - 1] + "…"


def _ct_names(node: ast.AST) -> list[str]:
    return list(dict.fromkeys(f"ct.{c.func.attr}" for c in ast.walk(node) if isinstance(c, ast.Call)
                              and is_ct(c.func)))


#: id(tree) → (tree, its text): the round's kernel unparsed once; each candidate parses it into its own copy.
_TEXT: dict[int, tuple[ast.Module, str]] = {}


def _copy(tree: ast.Module) -> ast.Module:
    """A fresh copy of ``tree`` to edit: its text (unparsed once per tree) parsed again, which has the same
    statements at the same paths. ``ast.parse`` is C; ``copy.deepcopy`` of a 100-statement kernel took 0.11 s a
    candidate, 27 % of building it (cProfile of ``bench_generation.py --lines 100``, 2026-12-05)."""
    got = _TEXT.get(id(tree))
    if got is None or got[0] is not tree:
        got = _TEXT[id(tree)] = (tree, ast.unparse(tree))
    return ast.parse(got[1])


def _make(tree: ast.Module, edit: Callable[[ast.Module], bool | None]) -> str | Refused | None:
    try:
        t = _copy(tree)
        if edit(t) is False:
            return None
        try:
            t = clean_in_place(t)
        except Exception:
            return None
        if unbound(t):
            return None
        maybe = _newly_undefined(tree, t)
        if maybe:
            return Refused(f"cuTile refuses it: {', '.join(f'`{n}`' for n in sorted(maybe))} would be read where "
                           "not every path binds it (TypeCheckingError: use of potentially undefined variable)")
        return ast.unparse(t)
    except RecursionError:      # an expression nested deeper than Python's recursion limit: no candidate
        return None


#: id(tree) → (tree, the names its kernel reads where cuTile cannot prove them bound): the round's kernel, once.
_UNDEFINED: dict[int, tuple[ast.Module, set[str]]] = {}


def _newly_undefined(base: ast.Module, cand: ast.Module) -> set[str]:
    """Names ``cand``'s kernel reads where cuTile cannot prove them bound (:func:`static.maybe_undefined`: it
    would refuse the candidate) that ``base``'s kernel did not already read so (a kernel reduced for that very
    refusal keeps it)."""
    got = _UNDEFINED.get(id(base))
    if got is None or got[0] is not base:
        got = _UNDEFINED[id(base)] = (base, maybe_undefined(base))
    return maybe_undefined(cand) - got[1]


def unbound(tree: ast.Module) -> set[str]:
    """Names the kernel reads that nothing binds (a parameter, a kernel assignment or loop variable, a module
    name, a builtin): a candidate with one fails in cuTile, so it is not compiled at all."""
    import builtins
    k = parts(tree).kernel
    bound = {a.arg for a in k.args.args} | {n.id for n in nodes(k) if isinstance(n, ast.Name)
                                           and isinstance(n.ctx, ast.Store)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            bound |= {n.id for t in node.targets for n in nodes(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    used = {n.id for n in nodes(k) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - bound - set(dir(builtins))


def _unbinds(kernel: ast.FunctionDef, removed: list[ast.stmt]) -> bool:
    """Whether deleting the statements ``removed`` leaves a name the rest of ``kernel`` reads with no binding (the
    check :func:`unbound` makes on a built candidate, made here on the kernel as it is, in one walk, before a copy:
    in a kernel whose values feed each other most single deletions are such, and building each one — copy, edit,
    clean, unparse — cost seconds per batch on a big kernel)."""
    inside = {id(n) for s in removed for n in nodes(s)}
    lost = {n.id for s in removed for n in nodes(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if not lost:
        return False
    lost -= {a.arg for a in kernel.args.args}
    read = set()
    for n in nodes(kernel):
        if id(n) in inside or not isinstance(n, ast.Name):
            continue
        if isinstance(n.ctx, ast.Store):
            lost.discard(n.id)
        else:
            read.add(n.id)
    return bool(lost & read)


def deletions(tree: ast.Module) -> Iterator[Candidate]:
    """Delete one kernel statement (outermost first; a loop or branch with all it holds)."""
    k = parts(tree).kernel
    for path, s in _statements(k):
        if _unbinds(k, [s]):
            continue

        def edit(t, path=path):
            L, j = _locate(parts(t).kernel, path)
            del L[j]
            if not L:
                L.append(ast.Pass())
        names = ", ".join(_ct_names(s)) or "no ct.* call"
        yield _lazy(tree, edit, f"delete `{_short(s)}`", f"`{_short(s, 50)}` ({names}){_where(k, path)}", "delete",
                    key=f"delete:{ast.unparse(s)}")


def loops(tree: ast.Module) -> Iterator[Candidate]:
    """Each ``for`` loop: run its body once (the loop variable 0), or loop a constant number of times (1)."""
    k = parts(tree).kernel
    for path, s in _statements(k):
        if not isinstance(s, ast.For) or not isinstance(s.target, ast.Name):
            continue
        kind = "runtime" if _runtime(s, _CONSTS.get(id(k), set())) else "constant"
        what = f"loop `for {s.target.id} in {_short(s.iter, 40)}` ({kind} trip count){_where(k, path)}"

        def once(t, path=path):
            L, j = _locate(parts(t).kernel, path)
            loop = L[j]
            L[j:j + 1] = [ast.Assign([ast.Name(loop.target.id, ast.Store())], ast.Constant(0)), *loop.body]

        def const(t, path=path):
            L, j = _locate(parts(t).kernel, path)
            loop = L[j]
            if _const_range(loop) == 1:
                return False
            loop.iter = ast.Call(ast.Name("range", ast.Load()), [ast.Constant(1)], [])
        for edit, label in ((once, "run the loop's body once"), (const, "give the loop a constant trip count (1)")):
            yield _lazy(tree, edit, f"{label}: `for {s.target.id} in {_short(s.iter, 40)}`", what, "loop",
                        key=f"loop:{label}:{s.target.id}:{ast.unparse(s.iter)}")


def _const_range(loop: ast.For) -> int | None:
    it = loop.iter
    if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and len(it.args) == 1
            and isinstance(it.args[0], ast.Constant) and type(it.args[0].value) is int):
        return it.args[0].value
    return None


def branches(tree: ast.Module) -> Iterator[Candidate]:
    """Each ``if``: keep only its body, or only its ``else``."""
    k = parts(tree).kernel
    for path, s in _statements(k):
        if not isinstance(s, ast.If):
            continue
        for field in ("body", "orelse"):
            def edit(t, path=path, field=field):
                L, j = _locate(parts(t).kernel, path)
                L[j:j + 1] = getattr(L[j], field) or [ast.Pass()]
            yield _lazy(tree, edit, f"keep only the {'then' if field == 'body' else 'else'} branch of "
                        f"`if {_short(s.test, 40)}`", f"branch `if {_short(s.test, 40)}`", "branch",
                        key=f"branch:{field}:{ast.unparse(s.test)}")


def _calls(tree: ast.Module) -> list[tuple[Path, int, ast.Call]]:
    """Every ``ct.*`` call of the kernel: (statement path, index among the statement's own calls, call)."""
    k = parts(tree).kernel
    out: list[tuple[Path, int, ast.Call]] = []
    for path in _stmt_paths(k.body):
        lst, i = _locate(k, path)
        own = _own_calls(lst[i])
        out.extend((path, n, c) for n, c in enumerate(own))
    return out


def _own_calls(s: ast.stmt) -> list[ast.Call]:
    nodes: list[ast.AST]
    if isinstance(s, ast.For):
        nodes = [s.iter]
    elif isinstance(s, (ast.If, ast.While)):
        nodes = [s.test]
    else:
        nodes = [s]
    return [c for n in nodes for c in ast.walk(n) if isinstance(c, ast.Call) and is_ct(c.func)]


def _call_at(t: ast.Module, path: Path, n: int) -> ast.Call:
    L, j = _locate(parts(t).kernel, path)
    return _own_calls(L[j])[n]


def keywords(tree: ast.Module) -> Iterator[Candidate]:
    """Drop one keyword argument of a ``ct.*`` call (load/store options and hints: ``latency``, ``allow_tma``,
    ``padding_value``, ``check_bounds`` …); ``dtype=`` and ``shape=``/``index=``/``tile=``/``axis=`` are kept."""
    k = parts(tree).kernel
    for path, n, c in _calls(tree):
        for kw in c.keywords:
            if kw.arg in ("dtype", "shape", "index", "tile", "axis", None):
                continue

            def edit(t, path=path, n=n, name=kw.arg):
                call = _call_at(t, path, n)
                call.keywords = [x for x in call.keywords if x.arg != name]
            yield _lazy(tree, edit, f"drop `{kw.arg}=` of {_short(c.func)}",
                        f"`{kw.arg}={_short(kw.value, 20)}` of {_short(c.func)}{_where(k, path)}", "option",
                        key=f"option:{kw.arg}:{ast.unparse(c)}")


def gather_load(tree: ast.Module) -> Iterator[Candidate]:
    """``ct.gather(A, (B * T + ct.arange(T, …),))`` → ``ct.load(A, index=(B,), shape=(T,))`` and back (1-D: the
    form a row gather of consecutive rows takes); a gather by an index tile ``I`` → ``ct.zeros(I.shape,
    dtype=A.dtype)`` (the gathered values gone, the shape kept)."""
    k = parts(tree).kernel
    for path, n, c in _calls(tree):
        if is_ct(c.func, "gather") and len(c.args) >= 2 and isinstance(c.args[1], ast.Tuple) \
                and len(c.args[1].elts) == 1:
            index = c.args[1].elts[0]
            if isinstance(index, ast.Name) and isinstance(c.args[0], ast.Name):
                def zeros(t, path=path, n=n, index=index.id, array=c.args[0].id):
                    call = _call_at(t, path, n)
                    call.func.attr = "zeros"
                    call.args = [ast.Attribute(ast.Name(index, ast.Load()), "shape", ast.Load())]
                    call.keywords = [ast.keyword("dtype", ast.Attribute(ast.Name(array, ast.Load()), "dtype",
                                                                        ast.Load()))]
                yield _lazy(tree, zeros, f"ct.gather → ct.zeros of the index's shape: `{_short(c, 50)}`",
                            f"ct.gather({_short(c.args[0], 12)}, …){_where(k, path)}", "gather",
                            key=f"zeros:{ast.unparse(c)}")
            m = _block_index(index)
            if m is None:
                continue
            block, tile = m

            def edit(t, path=path, n=n, block=block, tile=tile):
                call = _call_at(t, path, n)
                call.func.attr = "load"
                call.args = call.args[:1]
                call.keywords = [ast.keyword("index", ast.Tuple([block], ast.Load())),
                                 ast.keyword("shape", ast.Tuple([tile], ast.Load()))]
            yield _lazy(tree, edit, f"ct.gather → ct.load: `{_short(c, 50)}`",
                        f"ct.gather({_short(c.args[0], 12)}, …){_where(k, path)}", "gather",
                        key=f"gather-load:{ast.unparse(c)}")
        elif is_ct(c.func, "load") and len(c.args) == 1:
            kw = {x.arg: x.value for x in c.keywords}
            idx, shape = kw.get("index"), kw.get("shape")
            if not (isinstance(idx, ast.Tuple) and isinstance(shape, ast.Tuple) and len(idx.elts) == 1
                    and len(shape.elts) == 1):
                continue

            def edit(t, path=path, n=n, b=idx.elts[0], tl=shape.elts[0]):
                call = _call_at(t, path, n)
                call.func.attr = "gather"
                e = ast.BinOp(ast.BinOp(b, ast.Mult(), tl), ast.Add(),
                              ast.Call(ast.Attribute(ast.Name("ct", ast.Load()), "arange", ast.Load()), [tl],
                                       [ast.keyword("dtype", ast.Attribute(ast.Name("ct", ast.Load()), "int32",
                                                                           ast.Load()))]))
                call.args = [call.args[0], ast.Tuple([e], ast.Load())]
                call.keywords = []
            yield _lazy(tree, edit, f"ct.load → ct.gather: `{_short(c, 50)}`",
                        f"ct.load({_short(c.args[0], 12)}, …){_where(k, path)}", "load",
                        key=f"load-gather:{ast.unparse(c)}")


def _block_index(e: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``B * T + ct.arange(T, …)`` → (B, T), else None."""
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and isinstance(e.left, ast.BinOp)
            and isinstance(e.left.op, ast.Mult) and isinstance(e.right, ast.Call) and is_ct(e.right.func, "arange")
            and e.right.args):
        return None
    if ast.dump(e.left.right) != ast.dump(e.right.args[0]):
        return None
    return e.left.left, e.left.right


def operands(tree: ast.Module) -> Iterator[Candidate]:
    """Replace an assigned value by one of its operands (``w = ct.reshape(x, s)`` → ``w = x``; ``a * b`` → ``a``);
    never by a kernel array parameter (``a = ct.gather(X, …)`` → ``a = X``: an array where a tile was, which cuTile
    refuses: :func:`tileprobe.reduce.static.array_params`)."""
    k = parts(tree).kernel
    arrays = array_params(k)
    for path, s in _statements(k):
        if not isinstance(s, ast.Assign):
            continue
        v = s.value
        subs = v.args if isinstance(v, ast.Call) else [v.left, v.right] if isinstance(v, ast.BinOp) else []
        func = v.func if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and not is_ct(v.func) \
            else None
        method = func is not None
        if func is not None:      # x.reshape(s) → x
            subs = [func.value, *subs]
        for m, sub in enumerate(subs):
            if isinstance(sub, (ast.Constant, ast.Tuple, ast.Attribute)):
                continue
            label = f"`{_short(s.targets[0], 20)} = {_short(sub, 40)}` instead of"
            def edit(t, path=path, m=m, method=method):
                L, j = _locate(parts(t).kernel, path)
                val = L[j].value
                if isinstance(val, ast.Call):
                    L[j].value = ([val.func.value] if method else []) + val.args
                    L[j].value = L[j].value[m]
                else:
                    L[j].value = (val.left, val.right)[m]
            what = (f"ct.{v.func.attr}" if isinstance(v, ast.Call) and is_ct(v.func) else
                    f".{func.attr}()" if func is not None else _short(v, 30))
            c = _lazy(tree, edit, f"{label} {what}", f"{what} in `{_short(s, 50)}`{_where(k, path)}", "operand",
                      key=f"operand:{m}:{ast.unparse(s)}")
            if isinstance(sub, ast.Name) and sub.id in arrays:      # an array where a tile was: never compiled
                c.build = functools.partial(Refused, f"cuTile refuses it: `{sub.id}` is an array, not a tile "
                                                     "(TypeCheckingError: expected a tile)")
            yield c


def constants(tree: ast.Module) -> Iterator[Candidate]:
    """Divide a module constant the kernel reads (tile sizes, block sizes) by 16, 4 or 2 (biggest cut first: the
    first that keeps the property is kept, so a tile size falls in one step, not one halving per round) when it
    is an integer ≥ 2. Constants only
    the probe's ``args`` read (problem sizes) are left: they do not change what the kernel compiles to."""
    from tileprobe.reduce.source import names_used
    env = module_constants(tree)
    read = names_used(parts(tree).kernel)
    for idx, node in enumerate(tree.body):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t, v = node.targets[0], node.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) else [(t, v)]
        for m, (name, val) in enumerate(pairs):
            if not (isinstance(name, ast.Name) and isinstance(val, ast.Constant) and type(val.value) is int
                    and val.value >= 2 and name.id in env and name.id in read):
                continue

            for new in dict.fromkeys(x for x in (val.value // 16, val.value // 4, val.value // 2) if x >= 1):
                def edit(tr, idx=idx, m=m, new=new):
                    a = tr.body[idx]
                    target = a.value.elts[m] if isinstance(a.value, ast.Tuple) else a.value
                    target.value = new
                yield _lazy(tree, edit, f"{name.id} = {new} (was {val.value})", f"the value of {name.id}",
                            "constant")


def _reference_value(lst: ast.List) -> int | None:
    """The index of the value a hint's verdicts compare with (README "Verdicts": the hint-less build, ``None``, when
    audited, else the lowest value), or None when it cannot be told from constants."""
    consts = [(m, el.value) for m, el in enumerate(lst.elts) if isinstance(el, ast.Constant)]
    for m, v in consts:
        if v is None:
            return m
    numbers = [(v, m) for m, v in consts if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return min(numbers)[1] if numbers else None


def hint_values(tree: ast.Module, keep: dict) -> Iterator[Candidate]:
    """Drop one value of a ``Probe(hints=...)`` list that ``--where`` does not select, never the reference a verdict
    is judged against (the hint-less build or the lowest value: without it a verdict changes meaning, e.g.
    ``honoured`` becomes ``met``, as a new user's reduction of the seed showed, 2026-12-05)."""
    p = parts(tree)
    kw = p.kw("hints")
    if kw is None or not isinstance(kw.value, ast.Dict):
        return
    for key, lst in zip(kw.value.keys, kw.value.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(lst, ast.List)):
            continue
        ref = _reference_value(lst)
        for m, el in enumerate(lst.elts):
            if isinstance(el, ast.Constant) and keep.get(key.value, object()) == el.value:
                continue
            if m == ref:      # the build a verdict is judged against: dropping it turns "honoured" into "met"
                continue

            def edit(t, key=key.value, m=m):
                d = parts(t).kw("hints").value
                L = next(v for k2, v in zip(d.keys, d.values) if isinstance(k2, ast.Constant) and k2.value == key)
                del L.elts[m]
            yield _lazy(tree, edit, f"drop {key.value}={_short(el)} from the probe's hints",
                        f"hint value {key.value}={_short(el)}", "hint")


def chunks(tree: ast.Module) -> Iterator[Candidate]:
    """Coarse deletions first: each statement list of the kernel with 4 or more statements loses a contiguous half,
    then a quarter (the ddmin idea of C-Reduce and picire: one kept candidate removes many statements, where
    single deletions would take one round each). A chunk whose removal leaves a name unbound is never built into a
    compile (:func:`unbound`), so most of these cost no compile."""
    k = parts(tree).kernel
    lists = [((), k.body)] + [(path + (f,), getattr(s, f)) for path, s in _statements(k)
                              for f in ("body", "orelse") if isinstance(getattr(s, f, None), list)
                              and getattr(s, f) and isinstance(getattr(s, f)[0], ast.stmt)]
    for prefix, body in lists:
        n = len(body)
        for size_ in dict.fromkeys(x for x in (n // 2, n // 4) if x >= 2):
            for start in range(0, n - size_ + 1, size_):
                text = "; ".join(ast.unparse(x).split("\n")[0] for x in body[start:start + size_])

                if _unbinds(k, body[start:start + size_]):
                    continue

                def edit(t, prefix=prefix, start=start, size_=size_):
                    lst = parts(t).kernel.body if not prefix else _block(parts(t).kernel, prefix)
                    del lst[start:start + size_]
                    if not lst:
                        lst.append(ast.Pass())
                yield _lazy(tree, edit, f"delete {size_} statements `{_short(body[start], 40)}` …",
                            f"statements {start + 1}–{start + size_} of a block", "chunk",
                            key=f"chunk:{text}")


def _block(kernel: ast.FunctionDef, path: Path) -> list[ast.stmt]:
    """The statement list at ``path`` (a statement's path then ``"body"`` / ``"orelse"``)."""
    lst, i = _locate(kernel, path[:-1])
    return getattr(lst[i], path[-1])


#: The passes in the order a round tries them (biggest cuts first).
PASSES = (chunks, deletions, branches, loops, gather_load, keywords, operands, constants)


def candidates(tree: ast.Module, keep_hints: dict, skip: Callable[[str], bool] | None = None,
               stop: Callable[[], bool] | None = None, refused: bool = False) -> Iterator[Candidate]:
    """Every candidate of one round, built: the hint values first (each one dropped makes every later compile
    cheaper), then :data:`PASSES` in order. A candidate whose ``key`` ``skip`` names is not built (it failed in an
    earlier round); the generation ends as soon as ``stop()`` says so (a budget checked between candidates, not
    only between compiles: building the candidates of an 800-line kernel takes minutes). ``refused``: also the
    candidates a static check refused (``source`` "", ``refusal`` set): "what matters" lists them, uncompiled."""
    _CONSTS.clear()
    _CONSTS[id(parts(tree).kernel)] = set(module_constants(tree))
    _UNDEFINED.clear()
    _TEXT.clear()
    gens = [hint_values(tree, keep_hints), *(p(tree) for p in PASSES)]
    for gen in gens:
        for c in gen:
            if stop is not None and stop():
                return
            if skip is not None and skip(c.key):
                continue
            if c.source or (refused and c.refusal):
                yield c

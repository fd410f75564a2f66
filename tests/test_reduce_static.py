"""The reducer's static checks: candidates cuTile would refuse (a name not bound on every path, an array where a
tile was) are never built into a compile; the kernel's own refusals are kept (a reduction for that refusal)."""
import ast
import textwrap

from tileprobe.reduce import passes
from tileprobe.reduce.static import array_params, maybe_undefined

HEAD = """import cuda.tile as ct
from tileprobe import Probe
T = 256

@ct.kernel
def k(PARAMS):
"""
TAIL = """
probe = Probe(kernel=k, args=lambda case, arrays: (1, 2, 3), name="k")
"""


def module(body: str, params: str = "A, C, n") -> ast.Module:
    return ast.parse(HEAD.replace("PARAMS", params) + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
                     + "\n" + TAIL)


def test_a_name_bound_only_in_a_loop_and_read_after_it_is_maybe_undefined_even_for_one_trip():
    for head in ("for t in range(n):", "for t in range(1):"):
        tree = module(f'''
            i = ct.bid(0)
            {head}
                a = ct.load(A, index=(i,), shape=(T,))
            ct.store(C, index=(i,), tile=a)
        ''')
        assert maybe_undefined(tree) == {"a"}, head


def test_a_runtime_branch_binds_only_what_both_sides_bind_and_a_constant_test_counts_either():
    one_side = module('''
        i = ct.bid(0)
        if i > 0:
            a = ct.load(A, index=(i,), shape=(T,))
        ct.store(C, index=(i,), tile=a)
    ''')
    assert maybe_undefined(one_side) == {"a"}
    both = module('''
        i = ct.bid(0)
        if i > 0:
            a = ct.load(A, index=(i,), shape=(T,))
        else:
            a = ct.load(A, index=(0,), shape=(T,))
        ct.store(C, index=(i,), tile=a)
    ''')
    assert maybe_undefined(both) == set()
    constant = module('''
        i = ct.bid(0)
        if True:
            a = ct.load(A, index=(i,), shape=(T,))
        ct.store(C, index=(i,), tile=a)
    ''')
    assert maybe_undefined(constant) == set()      # cuTile folds the test: it accepts this kernel


def test_a_loop_carried_value_needs_a_binding_before_the_loop():
    carried = module('''
        i = ct.bid(0)
        for t in range(n):
            acc = acc + ct.load(A, index=(t,), shape=(T,))
        ct.store(C, index=(i,), tile=ct.bid(1))
    ''')
    assert maybe_undefined(carried) == {"acc"}
    bound = module('''
        acc = ct.zeros((T,), dtype=ct.float32)
        for t in range(n):
            acc += ct.load(A, index=(t,), shape=(T,))
            x = acc
        ct.store(C, index=(0,), tile=acc)
    ''')
    assert maybe_undefined(bound) == set()


def test_array_parameters_are_the_arrays_of_memory_operations():
    tree = module('''
        i = ct.bid(0)
        r = ct.gather(A, (i,))
        ct.store(C, index=(i,), tile=r * n)
    ''')
    k = next(s for s in tree.body if isinstance(s, ast.FunctionDef))
    assert array_params(k) == {"A", "C"}


#: A loop that adds loads into `acc`: deleting `acc = ct.zeros(...)` or putting the array `A` where the tile `a`
#: was are edits cuTile refuses.
ACC_LOOP = '''
    i = ct.bid(0)
    acc = ct.zeros((T,), dtype=ct.float32)
    for t in range(n):
        a = ct.load(A, index=(t,), shape=(T,))
        acc = acc + a
    ct.store(C, index=(i,), tile=acc)
'''


def test_no_candidate_puts_an_array_where_a_tile_was_or_reads_a_maybe_undefined_name():
    tree = module(ACC_LOOP)
    labels = [c.label for c in passes.candidates(tree, {})]
    assert not any("= A`" in lb for lb in labels), labels          # `a = A` instead of ct.load
    # deleting `acc = ct.zeros(...)` leaves acc read in the loop before any binding: never built
    assert not any(lb.startswith("delete `acc = ct.zeros") for lb in labels), labels
    # running the loop's body once keeps `acc` bound on every path: built
    assert any(lb.startswith("run the loop's body once") for lb in labels), labels
    for c in passes.candidates(tree, {}):
        assert not maybe_undefined(ast.parse(c.source)), c.label


def test_a_kernel_reduced_for_that_refusal_keeps_its_candidates():
    tree = module('''
        i = ct.bid(0)
        for t in range(n):
            a = ct.load(A, index=(t,), shape=(T,))
            b = ct.load(A, index=(i,), shape=(T,))
        ct.store(C, index=(i,), tile=a)
    ''')
    assert maybe_undefined(tree) == {"a"}
    labels = [c.label for c in passes.candidates(tree, {})]
    # deleting `b = …` leaves the refusal as it was (a property "compile error" keeps it): still a candidate
    assert any(lb.startswith("delete `b = ct.load") for lb in labels), labels


def test_what_matters_lists_a_statically_refused_change_as_cannot_tell_without_compiling_it():
    from tileprobe.reduce.engine import _needs
    from tileprobe.reduce.oracle import Outcome
    tree = module(ACC_LOOP)
    refused = [c for c in passes.candidates(tree, {}, refused=True) if not c.source]
    why = {c.label: c.refusal for c in refused}
    assert "potentially undefined" in why["delete `acc = ct.zeros((T,), dtype=ct.float32)`"]
    assert "`A` is an array, not a tile" in why["`a = A` instead of ct.load"]

    class Asked:      # the oracle's interface; answers "loses the property" to every compiled candidate
        def __init__(self):
            self.sources = []

        def check(self, sources):
            self.sources += sources
            return [Outcome(False, (("13.4.92", False, "occupancy ignored"),)) for _ in sources]
    asked = Asked()
    needs = {n.construct: n for n in _needs(ast.unparse(tree), {}, asked, lambda e, i: None)}
    assert len(asked.sources) == len([c for c in passes.candidates(tree, {}) if c.kind not in
                                      ("constant", "hint", "chunk")])
    zeros = next(n for k, n in needs.items() if k.startswith("`acc = ct.zeros"))
    assert zeros.verdict == "rejected" and zeros.line.startswith("not compiled: cuTile refuses it")

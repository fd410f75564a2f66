"""tileprobe reduce's source transformations (AST only: nothing compiled, nothing imported from the probe)."""
import ast
from pathlib import Path

import pytest

from tileprobe.errors import UsageError
from tileprobe.reduce import clean, engine, fold, output, passes, source

ROOT = Path(__file__).resolve().parents[1]
PADDED = ROOT / "benchmarks" / "reduce" / "padded_w4a16.py"
SEED = ROOT / "examples" / "w4a16_gemm.py"
PADDED_CASE = dict(GATHER=True, LOOP=True, SCALED=True, ACT=0, BIAS=False)


def normalized(path, case):
    t = ast.parse(path.read_text())
    return engine._normalized(ast.unparse(fold.fold_variant(t, case)))


def kernel_text(src):
    return ast.unparse(source.parts(ast.parse(src)).kernel)


def test_fold_variant_replaces_case_values_and_drops_them_from_cases():
    t = fold.fold_variant(ast.parse(SEED.read_text()), {"GATHER": True, "LOOP": False})
    text = ast.unparse(t)
    assert 'case["GATHER"]' not in text and "case['GATHER']" not in text
    assert "cases=" not in text          # both case names folded: no cases left
    assert "True, False)" in text.replace("\n", " ")   # the args tuple ends with the folded values


def test_constexpr_switches_fold_to_the_variant_and_leave_the_signature():
    src = normalized(SEED, {"GATHER": True, "LOOP": True})
    k = source.parts(ast.parse(src)).kernel
    assert [a.arg for a in k.args.args] == ["X", "ROWS", "W", "S", "OUT", "num_iterations", "grid_m"]
    body = ast.unparse(k)
    assert "if GATHER" not in body and "ct.load(X" not in body     # the GATHER=False branch is gone
    assert "for it in range(num_iterations)" in body               # the runtime trip count stays runtime
    assert "6144" in body                                          # K folded to the probe's value


def test_loop_false_folds_the_runtime_loop_to_range_1():
    src = normalized(SEED, {"GATHER": False, "LOOP": False})
    body = kernel_text(src)
    assert "range(1)" in body and "num_iterations" not in body
    assert "ct.gather(X" not in body


def test_helpers_are_inlined_and_dead_helpers_leave_the_module():
    src = normalized(PADDED, PADDED_CASE)
    tree = ast.parse(src)
    p = source.parts(tree)
    assert p.helpers == {}                                       # every @ct.function inlined, then unused
    body = ast.unparse(p.kernel)
    assert "ct.unpack_from_bytes" in body and "ct.expand_dims" in body   # unpack and dequant bodies inlined
    assert "silu" not in body and "ct.tanh(" not in body and "ct.exp(" not in body   # ACT=0: no activation
    assert "unused_a" not in body and "EXPERT_IDS" not in body and "BIAS_T" not in body
    size = source.size(src)
    assert size.params == 7 and size.lines <= 30
    assert source.size(ast.unparse(ast.parse(PADDED.read_text()))).lines > 60


def test_unused_parameters_leave_with_their_probe_arguments():
    src = normalized(PADDED, PADDED_CASE)
    p = source.parts(ast.parse(src))
    assert len(p.args_tuple().elts) == len(p.kernel.args.args) == 7


def test_dead_code_goes_but_stores_stay():
    t = ast.parse("import cuda.tile as ct\n@ct.kernel\ndef k(A, B):\n    x = ct.load(A, index=(0,), shape=(4,))\n"
                  "    y = x + 1\n    z = y * 2\n    ct.store(B, index=(0,), tile=y)\n"
                  "probe = Probe(kernel=k, args=lambda case, arrays: (1, 2))\n")
    out = ast.unparse(clean.clean(t))
    assert "z = " not in out and "y = x + 1" in out and "ct.store" in out


def test_deletion_candidates_never_leave_an_unbound_name():
    src = normalized(SEED, {"GATHER": True, "LOOP": True})
    cands = list(passes.candidates(ast.parse(src), {"occupancy": 2}))
    assert cands
    for c in cands:
        assert not passes.unbound(ast.parse(c.source)), c.label


def test_candidates_name_the_runtime_loop_and_the_gather_inside_it():
    src = normalized(SEED, {"GATHER": True, "LOOP": True})
    cands = list(passes.candidates(ast.parse(src), {"occupancy": 2}))
    kinds = {c.kind for c in cands}
    assert {"hint", "delete", "loop", "gather", "option", "operand", "constant"} <= kinds
    loop = [c for c in cands if c.kind == "loop" and "num_iterations" in c.construct]
    assert loop and all("runtime trip count" in c.construct for c in loop)
    assert any(c.kind == "gather" and "inside a loop with a runtime trip count" in c.construct for c in cands)
    assert cands[0].kind == "hint"             # hint values first: they make every later compile cheaper
    hint_labels = [c.label for c in cands if c.kind == "hint"]
    assert all("occupancy=2" not in h for h in hint_labels)   # the selected value is never dropped


def test_gather_to_load_keeps_block_index_and_shape():
    src = normalized(SEED, {"GATHER": True, "LOOP": True})
    load, zeros = passes.gather_load(ast.parse(src))
    assert "rows = ct.load(ROWS, index=(mb,), shape=(TM,))" in load.source
    assert "a = ct.zeros(idx.shape, dtype=X.dtype)" in zeros.source and "ct.gather(X" not in zeros.source
    assert "ct.gather(ROWS" in zeros.source       # only the one gather changed


def test_standalone_kernel_file_imports_only_cuda_tile(tmp_path):
    src = normalized(PADDED, PADDED_CASE)
    w = output.write_standalone(src, str(tmp_path))
    ktree = ast.parse(Path(w.kernel).read_text())
    imports = {a.name for n in ast.walk(ktree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    froms = {n.module for n in ast.walk(ktree) if isinstance(n, ast.ImportFrom)}
    assert imports == {"cuda.tile"} and froms == set()
    assert {"TM", "TN", "TK", "SB"} <= {t.id for n in ktree.body if isinstance(n, ast.Assign)
                                       for t in ast.walk(n.targets[0]) if isinstance(t, ast.Name)}
    ptext = Path(w.probe).read_text()
    assert f"reduced_kernel.py:{w.kernel_name}" in ptext and "def args" in ptext
    compile(ptext, w.probe, "exec")


def test_a_probe_without_its_kernel_in_the_file_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="not a function defined in this file"):
        source.parts(ast.parse('probe = Probe(kernel="k.py:vec_add")'), "p.py")
    with pytest.raises(UsageError, match="no `probe = Probe"):
        source.parts(ast.parse("x = 1"), "p.py")
    with pytest.raises(UsageError, match="p.py:1"):
        source.parse("def (", "p.py")


def test_size_counts_lines_tokens_params_and_ct_calls():
    src = ("import cuda.tile as ct\n@ct.kernel\ndef k(A, B):\n    x = ct.load(A, index=(0,), shape=(4,))\n"
           "    ct.store(B, index=(0,), tile=x)\nprobe = Probe(kernel=k)\n")
    s = source.size(src)
    assert (s.lines, s.params, s.ct_calls) == (2, 2, 2)
    assert s.tokens == len("x = ct . load ( A , index = ( 0 , ) , shape = ( 4 , ) )".split()) + \
        len("ct . store ( B , index = ( 0 , ) , tile = x )".split())


def test_the_reference_hint_value_is_never_dropped():
    """Dropping occupancy=1 (the lowest value, the reference of the others' verdicts) made a reduced probe's
    "occupancy honoured" read "met" (a new user, 2026-12-05): only the other values are candidates to drop."""
    import ast

    from tests.test_reduce_run import TINY
    from tileprobe.reduce.passes import hint_values
    tree = ast.parse(TINY.replace('hints={"occupancy": [1, 2]}', 'hints={"occupancy": [4, 1, 2, 8]}'))
    dropped = sorted(c.label for c in hint_values(tree, {"occupancy": 2}))
    assert dropped == ["drop occupancy=4 from the probe's hints", "drop occupancy=8 from the probe's hints"]


def test_values_read_once_are_written_into_their_reader_but_never_into_a_loop_or_past_a_rebinding():
    src = '''
import cuda.tile as ct
from tileprobe import Probe
T = 16

@ct.kernel
def k(A, B, n):
    i = ct.bid(0)
    a = ct.load(A, index=(i,), shape=(T,))
    w = ct.reshape(a, (T,))
    b = ct.load(B, index=(i,), shape=(T,))
    for it in range(n):
        b = b + a
    ct.store(B, index=(i,), tile=w + b)

probe = Probe(kernel=k, args=lambda case, arrays: (1, 2, 3), name="k")
'''
    out = kernel_text(ast.unparse(fold.inline_single_use(ast.parse(src))))
    assert "ct.store(B, index=(ct.bid(0),)" not in out        # i is read three times: kept
    assert "w = " not in out
    lines = [ln.strip() for ln in out.splitlines()[2:]]
    assert lines[0] == "i = ct.bid(0)"
    assert "a = ct.load(A, index=(i,), shape=(T,))" in lines   # read twice (in the loop and by w): kept
    assert "b = ct.load(B, index=(i,), shape=(T,))" in lines   # rebound in the loop: kept
    assert "ct.store(B, index=(i,), tile=ct.reshape(a, (T,)) + b)" in lines   # w read once, after the loop
    short = kernel_text(ast.unparse(fold.inline_single_use(ast.parse(src), max_len=20)))
    assert "w = ct.reshape(a, (T,))" in short                  # the reader would be too long: kept


def test_an_edit_that_failed_is_skipped_unbuilt_and_the_budget_stops_generation(monkeypatch):
    src = normalized(SEED, {"GATHER": True, "LOOP": True})
    tree = ast.parse(src)
    built = []
    real = passes._make
    monkeypatch.setattr(passes, "_make", lambda t, e: built.append(1) or real(t, e))
    every = list(passes.candidates(tree, {"occupancy": 2}))
    keys, all_built = [c.key for c in every], len(built)
    assert len(set(keys)) == len(keys)           # each edit has its own identity (two gathers' options differ)
    failed = {c.key for c in every if c.kind == "delete"}
    rest = list(passes.candidates(tree, {"occupancy": 2}, skip=failed.__contains__))
    assert failed and not any(c.key in failed for c in rest)
    assert len(built) - all_built == all_built - len(failed)     # the skipped edits were never built
    assert [c.key for c in rest] == [k for k in keys if k not in failed]
    n = len(built)
    assert list(passes.candidates(tree, {"occupancy": 2}, stop=lambda: True)) == [] and len(built) == n
    after = passes.candidates(ast.parse(src.replace("padding_value=0, check_bounds", "check_bounds")),
                              {"occupancy": 2})
    assert {c.key for c in after if c.kind == "delete"} & failed   # the same statements keep their keys


def test_coarse_deletions_drop_half_then_a_quarter_of_a_block_first():
    stores = "\n".join(f"    ct.store(B{i}, index=(i,), tile=ct.load(A, index=(i,), shape=(T,)))" for i in range(8))
    src = (f"import cuda.tile as ct\nfrom tileprobe import Probe\nT = 16\n\n@ct.kernel\n"
           f"def k(A, {', '.join(f'B{i}' for i in range(8))}):\n    i = ct.bid(0)\n{stores}\n\n"
           "probe = Probe(kernel=k, args=lambda case, arrays: (1,), name='k')\n")
    cands = list(passes.candidates(ast.parse(src), {}))
    chunks = [c for c in cands if c.kind == "chunk"]
    assert cands[0].kind == "chunk"                 # coarse first
    # 9 statements: halves of 4 (2 of them, the first leaves `i` unbound), quarters of 2 (4, the first unbound)
    kernels = [kernel_text(c.source) for c in chunks]
    assert len(chunks) == 1 + 3
    assert all(k.count("ct.store") == 4 for k in kernels[:1]) and all(k.count("ct.store") == 6 for k in kernels[1:])
    assert all("i = ct.bid(0)" in k for k in kernels)

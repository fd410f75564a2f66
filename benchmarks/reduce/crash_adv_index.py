"""A row-norm kernel padded around cutile-python #94's trigger, for ``tileprobe reduce`` of a compiler crash.

Planted trigger (tests/data/cutile_python_94.py): a row read through ``ct.load_advanced_indexing``, summed, and
stored back through ``ct.store_advanced_indexing`` into an aliased slice of the same array; tileiras 13.3.36 is
killed by SIGSEGV on it (13.4.59 and later answer with an error). Around it: a scale helper, a constexpr
switch, extra loads and stores of other arrays, and unused parameters.

    tileprobe reduce benchmarks/reduce/crash_adv_index.py --arch sm_120 --where "NORM=True" \\
        --property "compiler crash" --tileiras 13.3.36
"""
import cuda.tile as ct

from tileprobe import Probe

W = 32
N = 256


@ct.function
def scaled(t, factor):
    """``t`` times a constant factor, in float32."""
    tf = ct.astype(t, ct.float32)
    return tf * factor


@ct.function
def square_sum(t):
    """Sum of squares along axis 1."""
    return ct.sum(t * t, axis=1)


@ct.kernel
def row_stats(source, OTHER, OUT, COUNTS, unused_stride, unused_flag, NORM: ct.Constant[bool],
              FACTOR: ct.Constant[int]):
    bid = ct.bid(0)
    row = ct.arange(1, dtype=ct.int32)
    other = ct.load(OTHER, index=(bid,), shape=(W,))
    counts = ct.load(COUNTS, index=(0,), shape=(1,))
    matrix = ct.load_advanced_indexing(source, (ct.Slice(0, 1), row, ct.Slice(0, W))).reshape((1, W))
    if NORM:
        result = ct.sum(matrix, axis=1)
    else:
        result = square_sum(matrix)
    twice = scaled(other, FACTOR)
    ct.store(OUT, index=(bid,), tile=twice)
    ct.store_advanced_indexing(source, (ct.Slice(0, 1), row, ct.Slice(0, 1)), result.reshape((1, 1, 1)))


def args(case, arrays):
    return (arrays.randn((1, 1, W), "float32"), arrays.randn((N,), "float32"), arrays.empty((N,), "float32"),
            arrays.randint((4,), "int32", 0, 8), 0, 1, case["NORM"], 2)


probe = Probe(
    kernel=row_stats,
    args=args,
    cases={"NORM": [True, False]},
    grid=lambda case, hints, num_sms: (1,),
    name="crash_adv_index",
)

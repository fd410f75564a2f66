"""A reduction whose rounding depends on its configuration (tests/test_bit_exact.py): each row of X summed in
chunks of TN elements, the chunk sums added in order, so another TN adds the same float32 numbers in another
order."""
import cuda.tile as ct


@ct.kernel
def row_sum(X, OUT, TN: ct.Constant[int]):
    m = ct.bid(0)
    acc = ct.full((1, 1), 0.0, dtype=ct.float32)
    for j in range(X.shape[1] // TN):
        t = ct.load(X, index=(m, j), shape=(1, TN))
        acc = acc + ct.sum(t, axis=1, keepdims=True)
    ct.store(OUT, index=(m,), tile=ct.reshape(acc, (1,)))

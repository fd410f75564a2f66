"""Small kernels for signature and compile tests (kernels must live in a real file for cuTile)."""
import cuda.tile as ct


@ct.kernel
def vadd(X, Y, Z, TILE: ct.Constant[int]):
    b = ct.bid(0)
    x = ct.load(X, index=(b,), shape=(TILE,))
    y = ct.load(Y, index=(b,), shape=(TILE,))
    ct.store(Z, index=(b,), tile=x + y)


@ct.kernel
def scale2d(X, Y, n, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm = ct.bid(0)
    x = ct.load(X, index=(bm, 0), shape=(TM, TN))
    ct.store(Y, index=(bm, 0), tile=x * n)


@ct.kernel
def fp4_unpack(W, OUT, TILE: ct.Constant[int]):
    b = ct.bid(0)
    wb = ct.load(W, index=(b,), shape=(TILE,))
    w = ct.unpack_from_bytes(wb, ct.float4_e2m1fn)
    ct.store(OUT, index=(b,), tile=ct.astype(w, ct.float16))

"""Real cuTile kernels launched by tests/data/record/program.py (under a fake launch) and audited from the probes
tileprobe record writes for them."""
import cuda.tile as ct


@ct.kernel
def vadd(X, Y, Z, TILE: ct.Constant[int]):
    b = ct.bid(0)
    x = ct.load(X, index=(b,), shape=(TILE,))
    y = ct.load(Y, index=(b,), shape=(TILE,))
    ct.store(Z, index=(b,), tile=x + y)


@ct.kernel(occupancy=ct.ByTarget(sm_100=16))
def scale_rows(X, Y, s, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm = ct.bid(0)
    x = ct.load(X, index=(bm, 0), shape=(TM, TN))
    ct.store(Y, index=(bm, 0), tile=ct.astype(x * s, Y.dtype))


def copy_fn(X, Y, TILE: ct.Constant[int]):
    """A plain function: the program wraps it with ct.kernel(occupancy=2) at run time (like TileGym's
    get_cached_ct_kernel)."""
    b = ct.bid(0)
    ct.store(Y, index=(b,), tile=ct.load(X, index=(b,), shape=(TILE,)))


#: Base addresses the program hands out (fake device memory): 256-, 16- and 8-byte aligned.
BASE = 0x7F00_0010_0000


def vadd_args(n, align_offset=0, tile=256):
    from tileprobe.probe.signature import ArraySpec
    return (ArraySpec((n,), "float32", address=BASE + align_offset),
            ArraySpec((n,), "float32", address=BASE + 0x100_0000),
            ArraySpec((n,), "float32", address=BASE + 0x200_0000), tile)


def scale_args():
    from tileprobe.probe.signature import ArraySpec
    x = ArraySpec((512, 64), "float16", strides=(128, 1), address=BASE + 0x300_0000)   # every other row block
    return (x, ArraySpec((512, 64), "float16", address=BASE + 0x400_0000), 2.0, 16, 64)


@ct.kernel
def rope_like(q, cos, sin, COS_BS: ct.Constant[int], SEQ: ct.Constant[int], TILE_H: ct.Constant[int],
              TILE_D: ct.Constant[int]):
    """TileGym's RoPE pattern (tilegym 1.5.1 ``ops/cutile/rope.py``, ``_rope_kernel``): ``q`` (batch, heads, seq,
    dim) rotated in place by rows of ``cos``/``sin`` of shape (cos_bs, seq, dim), where cos_bs is 1 when one table
    serves every batch (JIT then makes that extent a static shape: ``1s1``, calling convention v2)."""
    bid = ct.bid(0)
    b = bid // SEQ
    row = bid % SEQ
    cb = 0 if COS_BS == 1 else b
    c = ct.load(cos, index=(cb, row, 0), shape=(1, 1, TILE_D)).reshape((1, TILE_D))
    s = ct.load(sin, index=(cb, row, 0), shape=(1, 1, TILE_D)).reshape((1, TILE_D))
    x1 = ct.load(q, index=(b, 0, row, 0), shape=(1, TILE_H, 1, TILE_D)).reshape((TILE_H, TILE_D))
    x2 = ct.load(q, index=(b, 0, row, 1), shape=(1, TILE_H, 1, TILE_D)).reshape((TILE_H, TILE_D))
    ct.store(q, index=(b, 0, row, 0), tile=(x1 * c - x2 * s).reshape((1, TILE_H, 1, TILE_D)).astype(q.dtype))
    ct.store(q, index=(b, 0, row, 1), tile=(x2 * c + x1 * s).reshape((1, TILE_H, 1, TILE_D)).astype(q.dtype))


@ct.kernel
def any_array(A, N: ct.Constant[int]):
    """Takes one array (or a tuple / list of arrays) of any layout; launched, recorded and its signature inferred,
    never compiled (tests/test_record_layouts.py)."""
    ct.bid(0)

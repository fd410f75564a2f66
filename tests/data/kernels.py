"""Small cuTile kernels that ``make_cubins.py`` compiles into the cubin fixtures.

They live in a real file: cuTile reads a kernel's source with ``inspect``, and a function made by ``exec``
cannot be compiled (``OSError: could not get source code``).
"""
import cuda.tile as ct

VEC_TILE = 1024
MM_TILE = (128, 128, 64)  # (TM, TN, TK): fp16 inputs, fp32 accumulator


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    """c = a + b, one 1-D tile per CTA: no shared memory, no matrix instructions (128 threads)."""
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)


@ct.kernel
def matmul(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """c = a @ b: matrix instructions on every target, TMA and a pipelined shared-memory ring on sm_90+."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        x = ct.load(a, index=(bm, k), shape=(TM, TK))
        y = ct.load(b, index=(k, bn), shape=(TK, TN))
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(bm, bn), tile=acc.astype(c.dtype))


# The same matmul as 2-CTA clusters (EIATTR_CTA_PER_CLUSTER 2x1x1 on sm_90/sm_100/sm_120).
matmul_cluster2 = matmul.replace_hints(num_ctas=2)

# occupancy=4 caps registers hard: spills (STACK > 0, LDL/STL) on sm_80 and sm_120.
matmul_occ4 = matmul.replace_hints(occupancy=4)

# An ignored hint: at 128 threads occupancy 1 and 2 both leave 255 registers, so the SASS and .nv.info are
# identical while the files differ (the embedded Tile IR / PTX carry the hint).
vec_add_occ1 = vec_add.replace_hints(occupancy=1)
vec_add_occ2 = vec_add.replace_hints(occupancy=2)
# A hint that reaches ptxas as a cap (.maxnreg 128) the kernel never needed: same SASS again.
vec_add_occ4 = vec_add.replace_hints(occupancy=4)

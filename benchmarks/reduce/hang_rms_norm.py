"""The persistent RMSNorm of the "why 255 registers" thread, padded for ``tileprobe reduce`` of a register-pool
``hang_risk`` that one tileiras release has and another has not.

Planted trigger: at occupancy 16 with TMA off on sm_90, tileiras 13.3.36 builds 256 threads × 24 registers and
warps 4–7 ask the CTA's register pool for 32 (``USETMAXREG.TRY_ALLOC``) with nothing to give them back:
``hang_risk`` (it hung on an H200); tileiras 13.4.92 builds 32 registers with no ``setmaxnreg``. Around it: a
weight helper, an offset switch, an extra residual path, a statistics output and unused parameters.

    tileprobe reduce benchmarks/reduce/hang_rms_norm.py --arch sm_90 --where "ALLOW_TMA=False,occupancy=16" \\
        --property "no hang risk" --good 13.4.92 --bad 13.3.36
"""
import cuda.tile as ct

from tileprobe import Probe

M, N = 16384, 512
TILE_M, TILE_N = 4, 512


@ct.function
def weight_row(W, tile_n, offset):
    """The weight row (1, tile_n) in float32 plus ``offset``."""
    w = ct.load(W, index=(0,), shape=(tile_n,), padding_mode=ct.PaddingMode.ZERO)
    w = ct.astype(w, ct.float32)
    return ct.full((1, tile_n), offset, dtype=ct.float32) + ct.reshape(w, (1, tile_n))


@ct.kernel
def rms_norm_padded(X, Y, W, Rstd, RESID, STATS, unused_scale, unused_count,
                    TILE_SIZE_M: ct.Constant[int], TILE_SIZE_N: ct.Constant[int], EPS: ct.Constant[float],
                    OFFSET: ct.Constant[float], ALLOW_TMA: ct.Constant[bool], ADD_RESID: ct.Constant[bool]):
    bid = ct.bid(0)
    M = X.shape[0]
    N = X.shape[1]
    upper_bound = (M + TILE_SIZE_M - 1) // TILE_SIZE_M
    w_with_offset = weight_row(W, TILE_SIZE_N, OFFSET)
    num_tile_blocks = ct.num_blocks(0)
    stats = ct.load(STATS, index=(0,), shape=(TILE_SIZE_M,))
    for current_bid in range(bid, upper_bound, num_tile_blocks):
        x = ct.load(X, index=(current_bid, 0), shape=(TILE_SIZE_M, TILE_SIZE_N),
                    padding_mode=ct.PaddingMode.ZERO, latency=10, allow_tma=ALLOW_TMA)
        x = ct.astype(x, ct.float32)
        if ADD_RESID:
            r = ct.load(RESID, index=(current_bid, 0), shape=(TILE_SIZE_M, TILE_SIZE_N))
            x = x + ct.astype(r, ct.float32)
        x2_sum = ct.sum(x * x, axis=1, keepdims=True)
        variance = x2_sum / ct.full((TILE_SIZE_M, 1), N * 1.0, dtype=ct.float32)
        rsqrt_var = ct.rsqrt(variance + ct.full((TILE_SIZE_M, 1), EPS, dtype=ct.float32))
        ct.store(Rstd, index=(current_bid,), tile=ct.reshape(rsqrt_var, (TILE_SIZE_M,)), allow_tma=False)
        y = ct.astype(x * rsqrt_var * w_with_offset, X.dtype)
        ct.store(Y, index=(current_bid, 0), tile=y, allow_tma=False, latency=3)
        spare = stats + ct.reshape(rsqrt_var, (TILE_SIZE_M,))


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"), arrays.randn((M, N), "bfloat16"),
            arrays.empty((TILE_M,), "float32"), 1.0, 0,
            TILE_M, TILE_N, 1e-6, 0.0, case["ALLOW_TMA"], case["ADD_RESID"])


probe = Probe(
    kernel=rms_norm_padded,
    args=args,
    cases={"ALLOW_TMA": [True, False], "ADD_RESID": [False, True]},
    hints={"occupancy": [1, 8, 16]},
    grid=lambda case, hints, num_sms: (num_sms * (hints.get("occupancy") or 1),),
    name="hang_rms_norm",
)

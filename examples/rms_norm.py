"""Persistent RMSNorm from the "why 255 registers" thread (cutile-python), as a tileprobe probe.

16384 x 512 bf16, tile 4 x 512, grid = SMs x occupancy. The x load's ``allow_tma`` is a constant so the probe
can cross TMA on/off with occupancy 1 … 16 (the thread hung at occupancy=16 with TMA off on tileiras 13.2).

    tileprobe audit examples/rms_norm.py --arch sm_90
"""
import cuda.tile as ct

from tileprobe import Probe

M, N = 16384, 512
TILE_M, TILE_N = 4, 512


@ct.kernel
def rms_norm_static_persistent(
    X, Y, W, Rstd,
    TILE_SIZE_M: ct.Constant[int],
    TILE_SIZE_N: ct.Constant[int],
    EPS: ct.Constant[float],
    OFFSET: ct.Constant[float],
    ALLOW_TMA: ct.Constant[bool],
):
    bid = ct.bid(0)
    M = X.shape[0]
    N = X.shape[1]
    upper_bound = (M + TILE_SIZE_M - 1) // TILE_SIZE_M
    w = ct.load(W, index=(0,), shape=(TILE_SIZE_N,), padding_mode=ct.PaddingMode.ZERO)
    w = ct.astype(w, ct.float32)
    num_tile_blocks = ct.num_blocks(0)
    for current_bid in range(bid, upper_bound, num_tile_blocks):
        x = ct.load(X, index=(current_bid, 0), shape=(TILE_SIZE_M, TILE_SIZE_N),
                    padding_mode=ct.PaddingMode.ZERO, latency=10, allow_tma=ALLOW_TMA)
        x = ct.astype(x, ct.float32)
        x2_sum = ct.sum(x * x, axis=1, keepdims=True)
        variance = x2_sum / ct.full((TILE_SIZE_M, 1), N * 1.0, dtype=ct.float32)
        rsqrt_var = ct.rsqrt(variance + ct.full((TILE_SIZE_M, 1), EPS, dtype=ct.float32))
        ct.store(Rstd, index=(current_bid,), tile=ct.reshape(rsqrt_var, (TILE_SIZE_M,)), allow_tma=False)
        w_with_offset = ct.full((1, TILE_SIZE_N), OFFSET, dtype=ct.float32) + ct.reshape(w, (1, TILE_SIZE_N))
        y = ct.astype(x * rsqrt_var * w_with_offset, X.dtype)
        ct.store(Y, index=(current_bid, 0), tile=y, allow_tma=False, latency=3)


def args(case, arrays):
    return (arrays.randn((M, N), "bfloat16"), arrays.empty((M, N), "bfloat16"),
            arrays.randn((N,), "bfloat16"), arrays.empty((M,), "float32"),
            TILE_M, TILE_N, 1e-6, 0.0, case["ALLOW_TMA"])


def reference(case, a):
    x, w = a[0].float(), a[2].float()
    rstd = (x.pow(2).mean(dim=1, keepdim=True) + 1e-6).rsqrt()
    return {1: (x * rstd * w).to(a[0].dtype), 3: rstd.reshape(-1)}


probe = Probe(
    kernel=rms_norm_static_persistent,
    args=args,
    cases={"ALLOW_TMA": [True, False]},
    hints={"occupancy": [1, 2, 4, 8, 16]},
    knobs={"allow_tma": "ALLOW_TMA"},   # the x load's allow_tma: judged against the TMA instructions in the SASS
    grid=lambda case, hints, num_sms: (num_sms * (hints.get("occupancy") or 1),),
    reference=reference,
    name="rms_norm",
)

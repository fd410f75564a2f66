"""W4A16 GEMM from the "occupancy hint ignored on sm_120" report (cutile-python #117), as a tileprobe probe.

FP4 (E2M1) weights with E4M3 block scales per 16, BF16 activations, tile 64x128x128; M, N, K = 16384, 6144,
6144. The activation is read with a tile load or a row gather (GATHER), and the M-block loop runs a runtime
trip count or once (LOOP). tileiras 13.4 ignores occupancy=2 for GATHER and LOOP on sm_120; 13.3 honours it.

    tileprobe audit examples/w4a16_gemm.py --arch sm_120
"""
import cuda.tile as ct

from tileprobe import Probe

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
TM, TN, TK, SB = 64, 128, 128, 16
M, N, K = 16384, 6144, 6144


@ct.kernel
def w4a16_gemm(X, ROWS, W, S, OUT, num_iterations, grid_m, K: ConstInt, GATHER: ConstBool, LOOP: ConstBool):
    nb = ct.bid(1)
    k_off = ct.arange(TK, dtype=ct.int32)
    for it in range(num_iterations if LOOP else 1):
        mb = ct.bid(0) + it * grid_m
        rows = ct.gather(ROWS, (mb * TM + ct.arange(TM, dtype=ct.int32),), padding_value=0)
        acc = ct.zeros((TM, TN), dtype=ct.float32)
        for kt in range(K // TK):
            if GATHER:
                idx = ct.reshape(rows, (TM, 1)) * K + ct.reshape(kt * TK + k_off, (1, TK))
                a = ct.gather(X, (idx,), padding_value=0, check_bounds=True, latency=3)
            else:
                a = ct.load(X, index=(mb, kt), shape=(TM, TK), latency=3)
            wb = ct.load(W, index=(nb, kt), shape=(TN, TK // 2), latency=3)
            w = ct.reshape(ct.unpack_from_bytes(ct.reshape(wb, (-1,)), ct.float4_e2m1fn), (TN, TK))
            s = ct.load(S, index=(nb, kt), shape=(TN, TK // SB), latency=3)
            wd = ct.reshape(ct.astype(w, ct.bfloat16), (TN, TK // SB, SB)) * ct.expand_dims(
                ct.astype(s, ct.bfloat16), axis=2)
            acc = ct.mma(a, ct.permute(ct.reshape(wd, (TN, TK)), (1, 0)), acc)
        ct.store(OUT, index=(mb, nb), tile=ct.astype(acc, ct.bfloat16))


def args(case, arrays):
    # As the report launches it: X flattened when gathering; one CTA per M block, trip count 1.
    x = arrays.randn((M * K,) if case["GATHER"] else (M, K), "bfloat16")
    return (x, arrays.randperm(M, "int32"), arrays.randint((N, K // 2), "uint8", 0, 256),
            arrays.rand((N, K // SB), "float8_e4m3fn", low=0.001, high=0.011),
            arrays.empty((M, N), "bfloat16"), 1, M // TM, K, case["GATHER"], case["LOOP"])


probe = Probe(
    kernel=w4a16_gemm,
    args=args,
    cases={"GATHER": [False, True], "LOOP": [False, True]},
    hints={"occupancy": [1, 2, 4]},
    grid=lambda case, hints, num_sms: (M // TM, N // TN),
    name="w4a16_gemm",
)

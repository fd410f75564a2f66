"""W4A16 GEMM for sm_90 (Hopper), as a tileprobe probe: the kernel of ``w4a16_gemm.py`` without ``float4_e2m1fn``.

cuTile refuses ``float4_e2m1fn`` on sm_90 (``UnsupportedFeatureError: float4_e2m1fn is not supported on sm_90``),
so this variant unpacks the 4-bit E2M1 weights with integer operations: each uint8 byte of ``W`` holds two codes,
element ``2j`` in the low nibble and ``2j + 1`` in the high nibble (the order ``ct.unpack_from_bytes`` and
torch's ``float4_e2m1fn_x2`` use). An E2M1 code is ``s e1 e0 m`` (sign, 2-bit exponent with bias 1, 1-bit
mantissa; OCP Microscaling Formats spec v1.0, section 5.3.3), decoded arithmetically:

    magnitude × 4 = (m × 2)            if e == 0   (subnormal: 0 or 0.5)
                    ((2 + m) << e)     otherwise   (1, 1.5, 2, 3, 4, 6)

E4M3 block scales per 16 weights, BF16 activations, tile 64×128×128; M, N, K = 16384, 6144, 6144. GATHER reads
the activation rows through an index array, LOOP runs the M-block loop with a runtime trip count.

    tileprobe audit examples/w4a16_gemm_sm90.py --arch sm_90
    tileprobe run examples/w4a16_gemm_sm90.py            # on an H100/H200
"""
import cuda.tile as ct

from tileprobe import Probe

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
TM, TN, TK, SB = 64, 128, 128, 16
M, N, K = 16384, 6144, 6144


@ct.kernel
def w4a16_gemm_sm90(X, ROWS, W, S, OUT, num_iterations, grid_m, K: ConstInt, GATHER: ConstBool, LOOP: ConstBool):
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
            wb = ct.astype(ct.load(W, index=(nb, kt), shape=(TN, TK // 2), latency=3), ct.int32)
            lo = ct.reshape(wb & 15, (TN, TK // 2, 1))
            hi = ct.reshape(wb >> 4, (TN, TK // 2, 1))
            code = ct.reshape(ct.cat((lo, hi), 2), (TN, TK))       # element 2j: low nibble, 2j+1: high
            e = (code >> 1) & 3
            m = code & 1
            mag4 = ct.where(e == 0, m * 2, (m + 2) << e)          # |value| × 4, exact in int32
            sign = 1 - ((code >> 3) & 1) * 2
            w = ct.astype(ct.astype(mag4 * sign, ct.float32) * 0.25, ct.bfloat16)
            s = ct.load(S, index=(nb, kt), shape=(TN, TK // SB), latency=3)
            wd = ct.reshape(w, (TN, TK // SB, SB)) * ct.expand_dims(ct.astype(s, ct.bfloat16), axis=2)
            acc = ct.mma(a, ct.permute(ct.reshape(wd, (TN, TK)), (1, 0)), acc)
        ct.store(OUT, index=(mb, nb), tile=ct.astype(acc, ct.bfloat16))


def args(case, arrays):
    # As w4a16_gemm.py launches it: X flattened when gathering; one CTA per M block, trip count 1.
    x = arrays.randn((M * K,) if case["GATHER"] else (M, K), "bfloat16")
    return (x, arrays.randperm(M, "int32"), arrays.randint((N, K // 2), "uint8", 0, 256),
            arrays.rand((N, K // SB), "float8_e4m3fn", low=0.001, high=0.011),
            arrays.empty((M, N), "bfloat16"), 1, M // TM, K, case["GATHER"], case["LOOP"])


#: E2M1 code -> value (OCP MX spec v1.0, table of FP4 E2M1 values): codes 0-7 positive, 8-15 negative.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def reference(case, a):
    """OUT = X[rows] @ (decode(W) * S)ᵀ in float32 (bf16 × e4m3 products are exact in bf16), cast to bf16."""
    import torch
    x, rows, wq, s = a[0], a[1], a[2], a[3]
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=wq.device)
    codes = torch.stack((wq & 15, wq >> 4), dim=-1).reshape(N, K).long()
    wd = lut[codes] * s.float().repeat_interleave(SB, dim=1)
    xm = x.reshape(M, K)
    if case["GATHER"]:
        xm = xm[rows.long()]
    return {4: (xm.float() @ wd.t()).to(torch.bfloat16)}


probe = Probe(
    kernel=w4a16_gemm_sm90,
    args=args,
    cases={"GATHER": [False, True], "LOOP": [False, True]},
    hints={"occupancy": [1, 2, 4]},
    grid=lambda case, hints, num_sms: (M // TM, N // TN),
    reference=reference,
    name="w4a16_gemm_sm90",
    archs=["sm_90"],
)
